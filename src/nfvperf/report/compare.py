"""Compare two runs test by test and frame size by frame size.

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
one is flagged for a 1 % change the default would hide.  Latency rows compare the
average at the Throughput point and never flag less than 10 %.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Optional

from nfvperf.report.extract import (RATE_METHODS, goals_of, headline_pps, latency_at_throughput,
                                    method_metric, num, repeat_of, walk)

DEFAULT_THRESHOLD = 0.02
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
    if lo and hi and lo > 0 and hi >= lo:
        return (hi - lo) / lo
    return 0.0


def _repeat_spread(data: dict[str, Any]) -> Optional[float]:
    """The relative range over the repetitions of a repeated search, or None."""
    rep = repeat_of(data)
    return num(rep.get("relative_range")) if rep is not None else None


def noise_threshold(da: dict[str, Any], db: dict[str, Any], default: float) -> tuple[float, str]:
    """(threshold, what it came from) for one row; see the module docstring."""
    width = max(_rel_width(da), _rel_width(db))
    sa, sb = _repeat_spread(da), _repeat_spread(db)
    if sa is not None and sb is not None:
        return max(sa, sb, width), "repeat spread"
    return max(default, width, 2 * _repeat_cv(da), 2 * _repeat_cv(db)), ""


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
    r = test.results[-1]
    data = r.data or {}
    if test.method == "latency":
        lat = latency_at_throughput(data)
        return ("avg latency ns", num(lat.get("avg_ns")) if lat else None, data)
    mm = method_metric(test.method, data)
    if mm:
        return (f"{mm[0]} ({mm[2]})", mm[1], data)
    if test.method not in RATE_METHODS and r.value_pps is None:
        return ("(no comparable value)", None, data)
    v = r.value_pps if r.value_pps is not None else headline_pps(data)
    return ("fps per interface", v, data)


def compare_runs(a: Any, b: Any, threshold: float = DEFAULT_THRESHOLD) -> Comparison:
    cmp = Comparison(a=a, b=b)
    ta = {(t.name, t.frame_size_b): t for t in a.tests}
    tb = {(t.name, t.frame_size_b): t for t in b.tests}
    order = list(dict.fromkeys(list(ta) + list(tb)))
    for key in order:
        label = f"{key[0]} {key[1] or 'IMIX'} B"
        if key not in tb:
            cmp.only_a.append(label)
            continue
        if key not in ta:
            cmp.only_b.append(label)
            continue
        ma, va, da = _metric(ta[key])
        mb, vb, db = _metric(tb[key])
        thr, source = noise_threshold(da, db, threshold)
        if ta[key].method == "latency":
            thr = max(thr, LATENCY_THRESHOLD)
        delta = (vb - va) / va if va and vb is not None else None
        note = f"noise = {source}" if source else ""
        if va is None and vb is None:
            continue
        if va is None or vb is None:
            note = "missing value"
        flagged = delta is not None and abs(delta) > thr
        cmp.rows.append(Row(test=key[0], frame_size_b=key[1], metric=ma if va is not None else mb, a=va, b=vb,
                            delta=delta, threshold=thr, flagged=flagged, note=note))
    return cmp


def render(cmp: Comparison, console: Any) -> None:
    from rich.markup import escape
    from rich.table import Table

    def f(v: Optional[float]) -> str:
        return "—" if v is None else f"{v:,.0f}"

    console.print(f"compare run A {cmp.a.id} ({cmp.a.tag}, {cmp.a.suite}) → "
                  f"run B {cmp.b.id} ({cmp.b.tag}, {cmp.b.suite})", markup=False)
    t = Table(caption="Δ = (B − A) / A. CHANGED: |Δ| above the row's noise threshold = max(default, relative "
                      "search width RUB−RLB of A/B, 2 × CV of repeated values); when both runs repeated the "
                      "search (--repeat), max(their relative range (max−min)/median, search width). "
                      "Rates per interface.",
              caption_justify="left")
    for c in ("Test", "Frame B", "Metric", "A", "B", "Δ %", "Noise ±%", "Verdict"):
        t.add_column(c, justify="left" if c in ("Test", "Metric", "Verdict") else "right")
    for r in cmp.rows:
        verdict = ("CHANGED ▲" if (r.delta or 0) > 0 else "CHANGED ▼") if r.flagged else ("same" if r.delta is not None
                                                                                         else r.note)
        if r.delta is not None and r.note:
            verdict += f" ({r.note})"
        t.add_row(escape(r.test), str(r.frame_size_b or "IMIX"), r.metric, f(r.a), f(r.b),
                  "—" if r.delta is None else f"{100 * r.delta:+.2f}", f"{100 * r.threshold:.2f}", verdict)
    console.print(t)
    for lab in cmp.only_a:
        console.print(f"only in A: {lab}", markup=False)
    for lab in cmp.only_b:
        console.print(f"only in B: {lab}", markup=False)
    n = len(cmp.flagged)
    console.print(f"{n} change(s) above the noise threshold" + (":" if n else "."))
    for r in cmp.flagged:
        console.print(f"  {r.test} {r.frame_size_b or 'IMIX'} B {r.metric}: {100 * (r.delta or 0):+.2f} % "
                      f"(noise ±{100 * r.threshold:.2f} %)", markup=False)
