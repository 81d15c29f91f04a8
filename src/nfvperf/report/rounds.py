"""Reports of interleaved studies (issue 16): per metric, every unit's median over the rounds with
its 95 % exact rank interval, and its paired ratio to the baseline with that ratio's interval.

A unit of such a study is a test whose last result is of kind ``rounds`` (``nfvperf.runner.rounds``
writes it; the figures of each round are results of kind ``round``).  A ratio whose interval
contains 1.0 is printed as "no difference measured (±x %)", never as a bare ratio.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from nfvperf.methods.capacity import METRIC_TITLES
from nfvperf.report import ceiling as hc
from nfvperf.report.polling import MARK, overlap_note, overlap_of
from nfvperf.report.extract import fmt_num, rates
from nfvperf.report.table import Table


def rounds_result(t: Any) -> Optional[dict[str, Any]]:
    """The unit's summary over its rounds (None: not a unit of an interleaved study)."""
    for r in reversed(list(getattr(t, "results", None) or [])):
        if getattr(r, "kind", None) == "rounds":
            return r.data or {}
    return None


def round_rows(t: Any) -> list[dict[str, Any]]:
    return [r.data or {} for r in getattr(t, "results", None) or [] if getattr(r, "kind", None) == "round"]


def is_rounds_test(t: Any) -> bool:
    """A unit of a study that ran (or was running) in interleaved rounds."""
    return bool(((getattr(t, "study", None) or {}).get("rounds"))) or rounds_result(t) is not None


@dataclass
class UnitRounds:
    label: str
    axes: dict[str, Any]
    size: Optional[int]
    baseline: bool
    summary: dict[str, Any]
    profile: dict[str, Any] = field(default_factory=dict)
    port_kind: Optional[str] = None
    #: DUT/VNF polling threads on the generator's CPUs (report.polling; the runner stores it with
    #: the units built as their own spec), ``{}`` none, None unknown
    overlap: Optional[dict[str, Any]] = None

    def metric(self, m: str) -> dict[str, Any]:
        return (self.summary.get("metrics") or {}).get(m) or {}

    def ratio(self, m: str) -> Optional[dict[str, Any]]:
        return (self.summary.get("ratios") or {}).get(m)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "/".join(_value(x) for x in v)
    return f"{v:g}" if isinstance(v, float) else str(v)


def _label(axes: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_value(v)}" for k, v in axes.items())


def studies(tests: list[Any]) -> dict[str, list[UnitRounds]]:
    """The interleaved studies among ``tests``, by name, their units in suite order."""
    out: dict[str, list[UnitRounds]] = {}
    for t in tests:
        if not is_rounds_test(t):
            continue
        st = t.study or {}
        summ = rounds_result(t) or {}
        out.setdefault(st.get("name") or t.name, []).append(
            UnitRounds(_label(st.get("axes") or {}), dict(st.get("axes") or {}), t.frame_size_b,
                       bool(st.get("baseline")), summ, dict(t.traffic or {}),
                       (getattr(t, "topology", None) or {}).get("port_kind"), overlap_of(t)))
    return out


def ratio_text(r: Optional[dict[str, Any]]) -> str:
    return str(r.get("text") or "—") if r else "—"


def interval_text(iv: Optional[dict[str, Any]]) -> str:
    if not iv:
        return "—"
    pct = f"{float(iv.get('confidence') or 0) * 100:.0f} %"
    return f"{fmt_num(iv.get('lo'), 0)}–{fmt_num(iv.get('hi'), 0)} ({pct}{'' if iv.get('enough') else ', few rounds'})"


def spread_pct(iv: Optional[dict[str, Any]]) -> Optional[float]:
    """The interval's width relative to the median, in %."""
    if not iv or not iv.get("median"):
        return None
    return 100.0 * (float(iv["hi"]) - float(iv["lo"])) / float(iv["median"])


def metric_table(name: str, metric: str, units: list[UnitRounds], info: dict[str, Any],
                 env: Optional[dict[str, Any]] = None) -> Table:
    cols = ["Unit", "Frame B", "median fps / interface", "interval of the median", "L1 Mbps",
            "% line rate (L1)", "rounds ok", "vs baseline (paired per round)", "harness ceiling fps", "bound"]
    rows = []
    shared = {u.label: u.overlap for u in units if u.overlap and u.overlap.get("cpus")}
    base_shared = any(u.baseline and u.label in shared for u in units)
    for u in units:
        mm = u.metric(metric)
        med = mm.get("median_pps")
        rr = rates(med, u.profile) if med else {}
        vals = mm.get("values_pps") or []
        ok = sum(v is not None for v in vals)
        base = "baseline" if u.baseline else ratio_text(u.ratio(metric))
        ceil, lower = hc.ceiling_bound(env or {}, u.size, u.port_kind)
        mark = f" {MARK}" if u.label in shared else ""
        if not u.baseline and base != "—" and bool(mark) != base_shared:
            base += f" {MARK}"          # exactly one of the two figures measured two pollers (tables.py)
        rows.append([u.label, fmt_num(u.size), fmt_num(med, 0) + mark, interval_text(mm.get("interval")),
                     fmt_num(rr.get("l1_mbps"), 1), fmt_num(rr.get("l1_pct"), 2),
                     f"{ok}/{int(u.summary.get('rounds_measured') or 0)}", base,
                     hc.ceiling_text(ceil, lower), hc.bound_label(med, ceil, lower_bound=lower)])
    sw = info.get("switching") or {}
    note = (f"{METRIC_TITLES.get(metric, metric)}; {info.get('rounds', '?')} interleaved rounds (each round "
            f"measures every unit once, in a fresh random order; seed {info.get('seed', '?')}); units "
            f"switched {sw.get('how', '?')}. Ratios are the median of per-round ratios to the baseline "
            "of the same round, with a 95 % exact rank interval (order statistics, binomial); a ratio "
            "whose interval contains 1.0 reads \"no difference measured (±x %)\".")
    if any(r[-1] == hc.HARNESS_BOUND for r in rows):
        note += (f" A unit marked {hc.HARNESS_BOUND} forwarded more than {hc.HARNESS_BOUND_FRACTION:.0%} of "
                 "what the harness alone carries at zero loss on this path: its figure, and a ratio to it, "
                 "show the harness, not the DUT.")
    if shared:
        note += " " + overlap_note(shared)
    if sw.get("restart_units"):
        note += (f" Units {', '.join(sw['restart_units'])} could only be interleaved by restarting the "
                 f"topology ({sw.get('restart_reason', '')}).")
    return Table(f"study {name} [{metric}]: {METRIC_TITLES.get(metric, metric)} over rounds", note, cols, rows,
                 key=f"rounds:{metric}")


def rounds_tables(tests: list[Any], env: dict[str, Any]) -> list[Table]:
    """One table per interleaved study and metric."""
    infos = {i.get("study"): i for i in env.get("rounds") or []}
    out = []
    for name, units in studies(tests).items():
        info = infos.get(name) or {}
        metrics = info.get("metrics") or list((units[0].summary.get("metrics") or {}).keys())
        for m in metrics:
            out.append(metric_table(name, m, units, info, env))
    return out
