"""Compare two or more runs configuration by configuration and frame size by frame size.

Tests are matched by configuration (:func:`match_tests`: method, frame size, topology
kind/DUT/port kind/overrides, traffic, study axes), not only by name; every run's value is shown
with its ratio against the first run's ("0.75×").

A change is flagged when ``|B − A| / A`` exceeds the noise threshold of that row:

    threshold = max(default (2 %, ``--threshold``),
                    relative search width (RUB − RLB) / RLB of A and of B,
                    2 × the coefficient of variation of repeated values in A and in B)

The search width is the resolution of a throughput result (a smaller change cannot be told
from it); the repeated values are the per-repetition results a method stores (``repetitions`` /
``values`` / ``bursts_frames`` lists, e.g. back-to-back repeats).

When *both* results come from a search run several times (``repeat``, ``nfvperf run --repeat
N``), their measured spread replaces the fixed default: the threshold is then

    max(relative range (max − min) / median of A and of B, relative search width of A and of B)

so a DUT that varies by 5 % between repetitions is not flagged for a 3 % change, and a stable
one is flagged for a 1 % change the default would hide.

A run on real parts stores how much its host's CPU speed moved on its own (probes before and
after it: ``environment.cpu_steadiness``, :mod:`nfvperf.host.steadiness`).  When the larger of the two
runs' spreads is above the threshold, it becomes the threshold ("noise = host CPU steadiness"):
on a VM whose vCPU ran at 60 % of its speed for part of a second, a 30 % change is not a finding.

Units of interleaved studies (``rounds``) compare the median of their first metric over the
rounds (MRR, PDR or NDR, named in the row); when both runs interleaved, the threshold is the wider
of the two medians' 95 % exact rank intervals, relative to the median ("noise = the rounds' 95 %
intervals"), and the host's CPU steadiness does not raise it: the rounds measured that noise.

Latency rows compare the average at the Throughput point and never flag less than 10 %.

Rate rows carry each run's harness ceiling for that frame size and port kind (what tgen through
testpmd io carried, stored with the run) and the bound label (:mod:`nfvperf.report.ceiling`): a
change between results that are harness-bound says more about the harness than about the DUT,
and the verdict says so.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from nfvperf.report.ceiling import (DUT_BOUND, HARNESS_BOUND, NEAR_LINE_RATE, NO_CEILING, bound_label,
                                    ceiling_bound, ceiling_text)
from nfvperf.report.configuration import config_key, differences
from nfvperf.report.polling import MARK, mark_overlaps, shares_generator_cpu
from nfvperf.host.steadiness import spread_pct
from nfvperf.methods import result_of
from nfvperf.report.extract import RATE_METHODS, goals_of, num, rates, repeat_of, resolved_tests, walk
from nfvperf.report.rounds import rounds_result
from nfvperf.report.study import ratio_text
from nfvperf.report.table import is_latency
from rich.markup import escape
from rich.table import Table

DEFAULT_THRESHOLD = 0.02
#: the noise source of rows whose runs both interleaved their units (``rounds``)
ROUNDS_SOURCE = "the rounds' 95 % intervals"
# latency is noisier than a searched rate: its rows never flag less than this
LATENCY_THRESHOLD = 0.10


@dataclass
class Row:
    test: str
    frame_size_b: Optional[int]
    metric: str
    a: Optional[float]
    b: Optional[float]
    delta: Optional[float]
    threshold: float
    flagged: bool
    note: str = ""
    ceilings: list[Optional[float]] = field(default_factory=list)   # harness ceiling fps of A, B
    bounds: list[str] = field(default_factory=list)
    ceiling_lower: list[bool] = field(default_factory=list)        # ceiling only a lower bound (≥)


@dataclass
class Comparison:
    a: Any
    b: Any
    rows: list[Row] = field(default_factory=list)
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)

    @property
    def flagged(self) -> list[Row]:
        return [r for r in self.rows if r.flagged]


def _rel_width(data: dict[str, Any]) -> float:
    goals = goals_of(data)
    g = goals[0] if goals else data
    lo, hi = num(g.get("lower_bound_pps")), num(g.get("upper_bound_pps"))
    return (hi - lo) / lo if lo and hi and lo > 0 and hi >= lo else 0.0


def _repeat_spread(data: dict[str, Any]) -> Optional[float]:
    """The relative range over the repetitions of a repeated search, or None."""
    rep = repeat_of(data)
    return num(rep.get("relative_range")) if rep is not None else None


def _rounds_width(data: dict[str, Any]) -> Optional[float]:
    """An interleaved unit's (``rounds`` summary) relative width of its first metric's median
    interval, (hi − lo) / median; None for other results."""
    metrics = data.get("metrics") if "rounds_measured" in data else None
    if not isinstance(metrics, dict) or not metrics:
        return None
    iv = (next(iter(metrics.values())) or {}).get("interval") or {}
    med, lo, hi = num(iv.get("median")), num(iv.get("lo")), num(iv.get("hi"))
    return (hi - lo) / med if med and lo is not None and hi is not None else None


def noise_threshold(da: dict[str, Any], db: dict[str, Any], default: float) -> tuple[float, str]:
    """(threshold, what it came from) for one row; see the module docstring."""
    ra, rb = _rounds_width(da), _rounds_width(db)
    if ra is not None and rb is not None:
        return max(ra, rb, 0.005), ROUNDS_SOURCE
    width = max(_rel_width(da), _rel_width(db))
    sa, sb = _repeat_spread(da), _repeat_spread(db)
    if sa is not None and sb is not None:
        return max(sa, sb, width), "repeat spread"
    return max(default, width, 2 * _repeat_cv(da), 2 * _repeat_cv(db)), ""


def host_noise(run: Any) -> float:
    """The CPU speed spread (a fraction) that ``run`` measured on its host around it
    (``environment.cpu_steadiness``); 0 when it measured none."""
    return (spread_pct((getattr(run, "environment", None) or {}).get("cpu_steadiness")) or 0.0) / 100.0


def _repeat_cv(data: dict[str, Any]) -> float:
    cv = 0.0
    for d in walk(data):
        for key in ("repetitions", "values", "repeats", "bursts_frames", "throughput_bps", "recovery_times_s"):
            vals = d.get(key)
            if isinstance(vals, list) and len(vals) >= 2 and all(isinstance(v, (int, float)) for v in vals):
                m = statistics.fmean(vals)
                if m:
                    cv = max(cv, statistics.pstdev(vals) / abs(m))
    return cv


def _metric(test: Any) -> tuple[str, Optional[float], dict[str, Any]]:
    if not test.results:
        return ("(no result)", None, {})
    summ = rounds_result(test)
    if summ is not None:           # an interleaved unit: the median of its first metric's rounds
        name, mm = next(iter((summ.get("metrics") or {"mrr": {}}).items()))
        return (f"{name.upper()} median fps per interface ({summ.get('rounds_measured')} rounds)",
                num(mm.get("median_pps")), summ)
    r = test.results[-1]
    data = r.data or {}
    res = result_of(test.method, data)
    if res.LATENCY:
        lat = res.latency_at_throughput()
        return ("avg latency ns", num(lat.get("avg_ns")) if lat else None, data)
    mm = res.main_metric()
    if mm:
        return (f"{mm[0]} ({mm[2]})", mm[1], data)
    if test.method not in RATE_METHODS and r.value_pps is None:
        return ("(no comparable value)", None, data)
    v = r.value_pps if r.value_pps is not None else res.rate_pps()
    return ("fps per interface", v, data)


# --------------------------------------------------------------------------- matching

def _index(run: Any) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for t in _tests(run):
        out.setdefault(config_key(t), []).append(t)
    return out


def _tests(run: Any) -> list[Any]:
    """The run's tests with their topology resolved when the run carries its config."""
    if getattr(run, "config", None) is not None and all(hasattr(t, "topology") for t in run.tests):
        tests = resolved_tests(run)
        mark_overlaps(tests, getattr(run, "environment", None) or {})   # DUT polling on tgen's CPU
        return tests
    return list(run.tests)


def _ident(t: Any) -> tuple[str, str, Optional[int]]:
    return (t.name, t.method, t.frame_size_b)


def match_tests(runs: list[Any]) -> list[tuple[list[Optional[Any]], str]]:
    """Tests matched across runs: one entry per configuration (method, frame size, topology
    kind/DUT/port kind/overrides, traffic, study axes; report.configuration.config_key), each a
    list with one test (or None) per run, and a note.  A configuration that occurs more than once
    in a run is split by test name.  Tests left unmatched are then paired, when that is
    unambiguous, by the configuration without the study axes (a study unit and a plain test entry
    with the same overrides), then by test name, method and frame size; the note says so and
    lists the configuration differences."""
    keyed = [_index(r) for r in runs]
    rows: list[tuple[list[Optional[Any]], str]] = []
    for key in dict.fromkeys(k for idx in keyed for k in idx):
        lists = [idx.get(key, []) for idx in keyed]
        if all(len(ts) <= 1 for ts in lists):
            rows.append(([ts[0] if ts else None for ts in lists], ""))
            continue
        for name in dict.fromkeys(t.name for ts in lists for t in ts):
            rows.append(([next((t for t in ts if t.name == name), None) for ts in lists], ""))
    rows = _pair_leftovers(rows, lambda t: config_key(t, axes=False),
                           "matched by configuration without the study axes")
    return _pair_leftovers(rows, _ident, "matched by name")


def _pair_leftovers(rows: list[tuple[list[Optional[Any]], str]], keyfn: Callable[[Any], Any],
                    how: str) -> list[tuple[list[Optional[Any]], str]]:
    """Merge the incomplete rows that share ``keyfn`` when each run has at most one test among
    them (no ambiguity)."""
    groups: dict[Any, list[int]] = {}
    for i, (row, _) in enumerate(rows):
        keys = {keyfn(t) for t in row if t is not None}
        if None in row and len(keys) == 1:
            groups.setdefault(keys.pop(), []).append(i)
    drop: set[int] = set()
    out = list(rows)
    for idxs in groups.values():
        if len(idxs) < 2:
            continue
        cols = [[rows[i][0][c] for i in idxs if rows[i][0][c] is not None] for c in range(len(rows[idxs[0]][0]))]
        if any(len(c) > 1 for c in cols):
            continue                                   # ambiguous: leave them apart
        merged: list[Optional[Any]] = [c[0] if c else None for c in cols]
        first = next(t for t in merged if t is not None)
        diffs = [d for t in merged if t is not None and t is not first for d in differences(first, t)]
        out[idxs[0]] = (merged, how + ("; configuration differs: " + "; ".join(dict.fromkeys(diffs))
                                       if diffs else ""))
        drop.update(idxs[1:])
    return [r for i, r in enumerate(out) if i not in drop]


# --------------------------------------------------------------------------- N runs

@dataclass
class MultiRow:
    """One matched configuration across the runs: values, ratios against the first run, and the
    noise threshold and flag of every run against the first."""
    test: str
    frame_size_b: Optional[int]
    metric: str
    values: list[Optional[float]]
    ratios: list[Optional[float]]
    thresholds: list[float]
    flagged: list[bool]
    note: str = ""
    ceilings: list[Optional[float]] = field(default_factory=list)   # harness ceiling fps per run
    bounds: list[str] = field(default_factory=list)                 # DUT-bound / harness-bound / —
    ceiling_lower: list[bool] = field(default_factory=list)         # ceiling only line rate (≥)

    @property
    def harness_bound(self) -> list[int]:
        """1-based numbers of the runs whose value is harness-bound."""
        return [i + 1 for i, b in enumerate(self.bounds) if b == HARNESS_BOUND]

    @property
    def changed(self) -> bool:
        return any(self.flagged)


@dataclass
class MultiComparison:
    runs: list[Any]
    rows: list[MultiRow] = field(default_factory=list)
    missing: list[tuple[str, list[int]]] = field(default_factory=list)   # (label, runs lacking it)

    @property
    def flagged(self) -> list[MultiRow]:
        return [r for r in self.rows if r.changed]


RATE_UNITS = {"l1_mbps": ("L1 Mbps per interface", "l1_mbps"), "l2_mbps": ("L2 Mbps per interface", "l2_mbps"),
              "percent": ("% line rate (L1)", "l1_pct")}


def _in_unit(test: Any, metric: str, v: Optional[float], unit: str) -> tuple[str, Optional[float]]:
    """A rate in fps per interface in the suite's ``traffic.rate_unit``."""
    if metric != "fps per interface" or unit not in RATE_UNITS or v is None:
        return metric, v
    label, key = RATE_UNITS[unit]
    return label, rates(v, getattr(test, "traffic", None) or {})[key]


def _ceiling(run: Any, test: Any, metric: str, fps: Optional[float]) -> tuple[Optional[float], str, bool]:
    """(harness ceiling fps, bound label, whether the ceiling is only a lower bound) of a rate
    result of ``run``; (None, "", False) for other rows."""
    if test is None or metric != "fps per interface":
        return None, "", False
    env = getattr(run, "environment", None) or {}
    pkind = (getattr(test, "topology", None) or {}).get("port_kind") or None
    ceil, lower = ceiling_bound(env, test.frame_size_b, pkind) if isinstance(env, dict) else (None, False)
    return ceil, bound_label(fps, ceil, lower_bound=lower), lower


def compare_many(runs: list[Any], threshold: float = DEFAULT_THRESHOLD) -> MultiComparison:
    """Every configuration of the runs side by side; ratios and noise flags against ``runs[0]``."""
    if len(runs) < 2:
        raise ValueError("compare needs at least two runs")
    cmp = MultiComparison(runs=list(runs))
    unit = str(((getattr(runs[0], "config", None) or {}).get("traffic") or {}).get("rate_unit") or "pps")
    hosts = [host_noise(r) for r in runs]     # each run's own CPU noise, once, not per row
    for tests, note in match_tests(runs):
        first = next(t for t in tests if t is not None)
        label = f"{first.name} {first.frame_size_b or 'IMIX'} B"
        lacking = [i + 1 for i, t in enumerate(tests) if t is None]
        if lacking:
            cmp.missing.append((label, lacking))
        measured = [_metric(t) if t is not None else ("", None, {}) for t in tests]
        if all(m[1] is None for m in measured):
            continue
        metric = next(m[0] for m in measured if m[1] is not None)
        values = [_in_unit(t, m[0], m[1], unit)[1] if t is not None else None for t, m in zip(tests, measured)]
        metric = _in_unit(first, metric, 1.0, unit)[0]
        va, da = values[0], measured[0][2]
        ratios, thresholds, flagged = [], [], []
        for hn, v, m in zip(hosts, values, measured):
            thr, source = noise_threshold(da, m[2], threshold)
            host = max(hosts[0], hn)
            if host > thr and source != ROUNDS_SOURCE:   # rounds measured the host's noise themselves
                thr, source = host, "host CPU steadiness"
            if is_latency(first.method):
                thr = max(thr, LATENCY_THRESHOLD)
            r = v / va if va and v is not None else None
            ratios.append(r)
            thresholds.append(thr)
            flagged.append(r is not None and abs(r - 1.0) > thr)
            if source and "noise" not in note:
                note = (note + "; " if note else "") + f"noise = {source}"
        if va is None or any(v is None for v in values):
            note = (note + "; " if note else "") + "missing value"
        cb = [_ceiling(run, t, m[0], m[1]) for run, t, m in zip(runs, tests, measured)]
        row = MultiRow(test=first.name, frame_size_b=first.frame_size_b, metric=metric, values=values,
                       ratios=ratios, thresholds=thresholds, flagged=flagged, note=note,
                       ceilings=[c for c, _, _ in cb], bounds=[b for _, b, _ in cb],
                       ceiling_lower=[lo for _, _, lo in cb])
        if row.harness_bound:
            row.note = (row.note + "; " if row.note else "") + (
                "harness-bound in " + ", ".join(f"#{i}" for i in row.harness_bound) +
                ": above 90 % of the harness ceiling, a change there is the harness's as much as the DUT's")
        shared = [i + 1 for i, t in enumerate(tests) if t is not None and shares_generator_cpu(t)]
        if shared:
            row.note = (row.note + "; " if row.note else "") + (
                f"{MARK} DUT polling on the generator's CPU in " + ", ".join(f"#{i}" for i in shared) +
                ": busy-pollers time-sliced on one CPU, not the DUT" +
                (", so a change is the CPU sharing's as much as the DUT's"
                 if len(shared) < sum(t is not None for t in tests) else ""))
        cmp.rows.append(row)
    return cmp


def compare_runs(a: Any, b: Any, threshold: float = DEFAULT_THRESHOLD) -> Comparison:
    """Two runs (:func:`compare_many` of ``[a, b]``) as A/B rows with the relative change."""
    many = compare_many([a, b], threshold)
    cmp = Comparison(a=a, b=b)
    for r in many.rows:
        va, vb = r.values
        delta = (r.ratios[1] - 1.0) if r.ratios[1] is not None else None
        cmp.rows.append(Row(test=r.test, frame_size_b=r.frame_size_b, metric=r.metric, a=va, b=vb, delta=delta,
                            threshold=r.thresholds[1], flagged=r.flagged[1], note=r.note,
                            ceilings=r.ceilings, bounds=r.bounds, ceiling_lower=r.ceiling_lower))
    for label, lacking in many.missing:
        (cmp.only_a if 2 in lacking else cmp.only_b).append(label)
    return cmp


# --------------------------------------------------------------------------- rendering

def _f(v: Optional[float]) -> str:
    if v is None:
        return "—"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.3f}"


def verdict(r: MultiRow, n_runs: int) -> str:
    """CHANGED ▲/▼ against #1 (which run, among more than two), else "same" when every run has
    a value; the row's note after it."""
    text = ", ".join(f"CHANGED {'▲' if (r.ratios[i] or 0) > 1 else '▼'}{f' #{i + 1}' if n_runs > 2 else ''}"
                     for i in range(1, n_runs) if r.flagged[i])
    if not text:
        text = "same" if all(x is not None for x in r.ratios) else ""
    if r.note:
        text = f"{text} ({r.note})" if text else r.note
    return text


def shows_bound(cmp: MultiComparison) -> bool:
    """Whether any row has a harness ceiling to show (the column is left out otherwise)."""
    return any(b not in ("", NO_CEILING) for r in cmp.rows for b in r.bounds)


def render(cmp: MultiComparison, console: Any) -> None:
    """Print a comparison."""
    runs = cmp.runs
    console.print("compare " + " → ".join(f"#{i + 1} run {r.id} ({r.tag}, {r.suite})" for i, r in enumerate(runs))
                  + "; ratios and Δ against #1", markup=False)
    t = Table(caption="Tests matched by configuration (method, frame size, topology kind/DUT/port kind/overrides, "
                      "traffic, study axes), else by test name (noted). × = value / #1's; Δ = (#n − #1) / #1. "
                      "CHANGED: |Δ| above the row's noise threshold = max(default, relative search width "
                      "RUB−RLB, 2 × CV of repeated values); when both runs repeated the search (--repeat), "
                      "max(their relative range (max−min)/median, search width). Rates per interface.",
              caption_justify="left")
    cols = ["Test", "Frame B", "Metric"] + [f"#{i + 1}" for i in range(len(runs))]
    cols += [f"#{i + 1} ×" for i in range(1, len(runs))]
    cols += ["Δ %" if len(runs) == 2 else "Δ % (#2…)", "Noise ±%"]
    show_bound = shows_bound(cmp)
    cols += ["Harness ceiling fps / bound"] if show_bound else []
    cols += ["Verdict"]
    for c in cols:
        t.add_column(c, justify="left" if c in ("Test", "Metric", "Verdict") else "right")
    for r in cmp.rows:
        deltas = ["—" if x is None else f"{100 * (x - 1):+.2f}" for x in r.ratios[1:]]
        bound = [_bound_cell(r)] if show_bound else []
        t.add_row(escape(r.test), str(r.frame_size_b or "IMIX"), r.metric, *[_f(v) for v in r.values],
                  *[ratio_text(x) for x in r.ratios[1:]], " / ".join(deltas),
                  " / ".join(f"{100 * x:.2f}" for x in r.thresholds[1:]), *bound, escape(verdict(r, len(runs))))
    console.print(t)
    for label, lacking in cmp.missing:
        present = [f"#{i + 1}" for i in range(len(runs)) if i + 1 not in lacking]
        console.print(f"only in {', '.join(present)}: {label}", markup=False)
    n = len(cmp.flagged)
    console.print(f"{n} change(s) above the noise threshold" + (":" if n else "."))
    for r in cmp.flagged:
        for i in range(1, len(runs)):
            if r.flagged[i]:
                console.print(f"  {r.test} {r.frame_size_b or 'IMIX'} B {r.metric}: #{i + 1} "
                              f"{100 * ((r.ratios[i] or 1) - 1):+.2f} % (noise ±{100 * r.thresholds[i]:.2f} %)",
                              markup=False)


_SHORT = {DUT_BOUND: "DUT", HARNESS_BOUND: "harness", NEAR_LINE_RATE: "line rate"}


def _bound_cell(r: MultiRow) -> str:
    """"2,950,000 DUT / 3,010,000 harness" (one entry per run), "" for rows without a rate; a
    ceiling that is only the nominal line rate reads "≥ 812,744 line rate"."""
    if not any(r.bounds):
        return ""
    lower = list(r.ceiling_lower) + [False] * (len(r.ceilings) - len(r.ceiling_lower))
    return " / ".join("—" if c is None else f"{ceiling_text(c, lo) if lo else _f(c)} {_SHORT.get(b, '')}".strip()
                      for c, b, lo in zip(r.ceilings, r.bounds, lower))

