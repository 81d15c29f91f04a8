"""Study reports: the configurations of one study side by side (issue 9 item 3).

A study (``tests.study``: name, axis values, baseline flag) expands one suite entry into one test
per configuration.  Its report is a set of :class:`Pivot` tables:

- rows = frame sizes, or the primary axis when the study ran one frame size (``streams`` for
  TCP studies, else the first axis); columns = the configurations of the other axes;
- zero-loss fps per interface with a ratio to the study's baseline ("1.87×") beside every
  column, L1 Mbps and % line rate (the unit ``traffic.rate_unit`` names comes first);
- Mpps per PMD core (aggregate fps / cores) with its ratio to the baseline's (scaling
  efficiency) when the core count varies;
- switching operations/s (aggregate fps × the topology's switching operations) when the
  topologies differ;
- average latency at Throughput, only from a latency result of the same configuration
  (report.configuration), else empty;
- TCP Gbit/s (iperf3 goodput) for TCP studies, the latency of a latency study, the main scalar of
  any other method.

Run-wide, :func:`vxlan_overhead` pairs each VXLAN test with the same test without VXLAN and
:func:`switching_across_topologies` normalises throughput over topologies by switching
operations.  Everything here is computed from stored rows; :meth:`Pivot.to_table` turns a pivot
into a :class:`~nfvperf.report.table.Table` so the terminal, Markdown and HTML renderers show it.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional

from nfvperf.report import ceiling as hc
from nfvperf.report.configuration import axes_of, fitted_axes, is_vxlan, pmd_cores, study_of, without_vxlan
from nfvperf.methods import result_class
from nfvperf.report.extract import fmt_num, num, rates, result, result_value
from nfvperf.report.polling import MARK, overlap_note, overlap_of
from nfvperf.report.table import THROUGHPUT_METHODS, Table, latency_for

#: axes plotted (and read) on a log scale
LOG_AXES = ("flows", "rules", "traffic.flows_per_port", "topology.ovs.rules", "flows_per_port")
#: the rate unit (``traffic.rate_unit``) -> the pivot metric shown first
RATE_UNIT_METRIC = {"pps": "fps", "l1_mbps": "l1_mbps", "l2_mbps": "l2_mbps", "percent": "pct"}


def ratio_text(r: Optional[float]) -> str:
    """``1.87×`` (two decimals), ``—`` without a ratio."""
    return "—" if r is None else f"{r:.2f}×"


def axis_text(v: Any) -> str:
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def is_log_axis(axis: str) -> bool:
    return axis in LOG_AXES or axis.endswith((".flows_per_port", ".rules"))


@dataclass
class Point:
    """One test of a study: its axis values, frame size and headline numbers."""
    test: Any
    axes: dict[str, Any]
    size: Optional[int]
    baseline: bool
    value: Optional[float]          # fps per interface (rate methods) or the method's main scalar
    directions: int = 1
    switching_operations: int = 1
    cores: Optional[int] = None
    latency_ns: Optional[float] = None
    latency_gross: bool = False     # net of the harness was asked for, but there is no self-latency
    #: the DUT's/VNFs' polling CPUs on the generator's ({"cpus", "roles"}); {} none; None unknown
    overlap: Optional[dict[str, Any]] = None


@dataclass
class Metric:
    key: str
    title: str
    unit: str
    digits: int
    fn: Callable[[Point], Optional[float]]
    ratios: bool = False


@dataclass
class Pivot:
    """One metric of a study: rows × configurations, each cell with its ratio to the baseline."""
    study: str
    metric: Metric
    row_label: str
    rows: list[str]
    columns: list[str]
    cells: dict[tuple[str, str], Optional[float]] = field(default_factory=dict)
    ratios: dict[tuple[str, str], Optional[float]] = field(default_factory=dict)
    baseline: str = ""
    note: str = ""
    #: cells whose unit had DUT/VNF polling threads on the generator's CPUs -> that fact
    shared: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    #: ratio cells between a unit that shared the generator's CPU and one that did not
    mixed: set[tuple[str, str]] = field(default_factory=set)

    def value(self, row: str, col: str) -> Optional[float]:
        return self.cells.get((row, col))

    def ratio(self, row: str, col: str) -> Optional[float]:
        return self.ratios.get((row, col))

    def whole_column_shared(self, col: str) -> bool:
        """Every cell of the column that has a unit shared the generator's CPU (the mark goes on
        the column header instead of each cell)."""
        keys = [(r, col) for r in self.rows if (r, col) in self.cells]
        return bool(keys) and all(k in self.shared for k in keys)

    def to_table(self) -> Table:
        whole = {c: self.whole_column_shared(c) for c in self.columns}
        cols = [self.row_label]
        for c in self.columns:
            cols.append(f"{c} {MARK}" if whole[c] else c)
            if self.metric.ratios:
                cols.append(f"{c} ×" if len(self.columns) > 1 else "× baseline")
        t = Table(f"study {self.study}: {self.metric.title}", (self.note + self.shared_note()).strip(), cols,
                  key=f"study_{self.metric.key}")
        for r in self.rows:
            row = [r]
            for c in self.columns:
                cell = fmt_num(self.value(r, c), self.metric.digits)
                marked = (r, c) in self.shared and not whole[c] and self.value(r, c) is not None
                row.append(f"{cell} {MARK}" if marked else cell)
                if self.metric.ratios:
                    ratio = ratio_text(self.ratio(r, c))
                    row.append(f"{ratio} {MARK}" if (r, c) in self.mixed and self.ratio(r, c) is not None
                               else ratio)
            t.rows.append(row)
        return t

    def shared_note(self) -> str:
        """Which configurations had DUT/VNF polling threads on the generator's CPUs, and (with
        ratios) which ratios set such a unit against one that did not."""
        if not self.shared:
            return ""
        facts: dict[str, dict[str, Any]] = {}
        for (r, c), fact in self.shared.items():
            if c == "value":                    # no column axes: the row names the configuration
                label = f"{r} B" if self.row_label == "Frame B" else f"{self.row_label}={r}"
            else:
                label = c if self.whole_column_shared(c) else \
                    f"{c} at {r} B" if self.row_label == "Frame B" else f"{self.row_label}={r}, {c}"
            facts.setdefault(label, fact)
        note = " " + overlap_note(facts)
        mixed = [k for k in self.mixed if self.ratio(*k) is not None]
        if self.metric.ratios and mixed:
            cols = list(dict.fromkeys(c for _, c in sorted(mixed, key=lambda k: self.columns.index(k[1]))))
            note += (f" Ratios marked {MARK} ({'; '.join(cols)}) set a unit that shared the generator's CPU "
                     f"against one that did not (baseline {self.baseline}): they compare the CPU sharing, "
                     "not the configurations.")
        return note


@dataclass
class StudyReport:
    name: str
    method: str
    axes: list[str]
    row_axis: Optional[str]            # None: rows are frame sizes
    baseline: dict[str, Any]
    points: list[Point]
    pivots: list[Pivot] = field(default_factory=list)

    def pivot(self, key: str) -> Optional[Pivot]:
        return next((p for p in self.pivots if p.metric.key == key), None)


# --------------------------------------------------------------------------- points

def _point(t: Any, tests: list[Any], net_env: Optional[dict[str, Any]] = None) -> Point:
    """``net_env``: the run's environment when latency is shown net of the harness self-latency."""
    st = study_of(t) or {}
    tp = t.topology or {}
    data = t.results[-1].data or {} if t.results else {}
    value: Optional[float] = None
    latency = None
    gross = False

    def net(lat: Any) -> Any:
        nonlocal gross
        lat, g = hc.net_point(lat, net_env or {}, t.frame_size_b, tp.get("port_kind") or None,
                              net_env is not None)
        gross = gross or g
        return lat

    res = result(t)
    if res is not None:
        if t.method in THROUGHPUT_METHODS:
            value = result_value(t)
        elif res.LATENCY:
            avg = num((net(res.latency_at_throughput()) or {}).get("avg_ns"))
            value = avg / 1e3 if avg is not None else None
        else:
            mm = res.main_metric()
            value = mm[1] if mm else None
    if t.method in THROUGHPUT_METHODS:
        lat = net(latency_for(tests, t, data if t.results else None))
        latency = num(lat.get("avg_ns")) if lat else None
    return Point(test=t, axes=axes_of(t), size=t.frame_size_b, baseline=bool(st.get("baseline")),
                 value=value, directions=int(tp.get("directions") or 1),
                 switching_operations=int(tp.get("switching_operations") or 1), cores=pmd_cores(t),
                 latency_ns=latency, latency_gross=gross, overlap=overlap_of(t))


def _rates(p: Point, key: str) -> Optional[float]:
    return None if p.value is None else rates(p.value, p.test.traffic or {})[key]


def _per_core(p: Point) -> Optional[float]:
    return None if p.value is None or not p.cores else p.value * p.directions / p.cores / 1e6


def rate_metrics(rate_unit: str = "pps") -> list[Metric]:
    """fps, L1 Mbps, L2 Mbps (when asked for), % line rate — the ``rate_unit`` one first, with
    the ratios."""
    ms = [Metric("fps", "zero-loss throughput, fps per interface", "fps", 0, lambda p: p.value),
          Metric("l1_mbps", "zero-loss throughput, L1 Mbps per interface", "Mbps", 1,
                 lambda p: _rates(p, "l1_mbps")),
          Metric("pct", "zero-loss throughput, % line rate (L1)", "%", 2, lambda p: _rates(p, "l1_pct"))]
    if rate_unit == "l2_mbps":
        ms.insert(2, Metric("l2_mbps", "zero-loss throughput, L2 Mbps per interface", "Mbps", 1,
                            lambda p: _rates(p, "l2_mbps")))
    first = RATE_UNIT_METRIC.get(rate_unit, "fps")
    ms.sort(key=lambda m: m.key != first)
    ms[0].ratios = True
    return ms


PER_CORE = Metric("per_core", "efficiency, Mpps per PMD core (aggregate fps / PMD cores)", "Mpps/core", 3,
                  _per_core, ratios=True)
SWITCHING = Metric("switching", "switching operations/s (aggregate fps × switching operations)", "ops/s", 0,
                   lambda p: None if p.value is None else p.value * p.directions * p.switching_operations,
                   ratios=True)
LATENCY = Metric("latency", "average latency at Throughput, µs (same configuration only)", "µs", 2,
                 lambda p: None if p.latency_ns is None else p.latency_ns / 1e3)


def method_metrics(method: str) -> list[Metric]:
    """The pivot of a study of a method that is not a rate: what its result class declares
    (``study_metric()``), else the value as stored, titled by the method."""
    m = result_class(method).study_metric()
    if m is None:
        return [Metric("value", method, "", 3, lambda p: p.value, ratios=True)]
    div = m.study_divisor
    fn: Callable[[Point], Optional[float]] = (lambda p: p.value) if div == 1.0 else \
        (lambda p: None if p.value is None else p.value / div)
    return [Metric(m.study_key, m.title, m.shown_unit, m.digits, fn, ratios=True)]


# --------------------------------------------------------------------------- pivots

def _row_axis(method: str, axes: list[str], sizes: list[Optional[int]]) -> Optional[str]:
    if len(sizes) > 1 or not axes:
        return None
    own = result_class(method).STUDY_ROW_AXIS
    if own is not None and own in axes:
        return own
    return axes[0]


def _labels(p: Point, row_axis: Optional[str], col_axes: list[str]) -> tuple[str, str]:
    fitted = fitted_axes(p.test)
    row = _axis_value_text(p, row_axis, fitted) if row_axis else (fmt_num(p.size) if p.size else "IMIX")
    col = ", ".join(f"{a}={_axis_value_text(p, a, fitted)}" for a in col_axes) or "value"
    return row, col


def _axis_value_text(p: Point, axis: str, fitted: dict[str, dict[str, Any]]) -> str:
    """The axis value as written, and what ran when ``--fit-host`` changed it: ``4→2 (fitted)``."""
    text = axis_text(p.axes.get(axis))
    if axis in fitted:
        text += f"→{axis_text(fitted[axis].get('to'))} (fitted)"
    return text


def build_pivot(rep: StudyReport, metric: Metric, note: str = "") -> Pivot:
    col_axes = [a for a in rep.axes if a != rep.row_axis]
    pv = Pivot(study=rep.name, metric=metric, row_label=rep.row_axis or "Frame B", rows=[], columns=[],
               note=note)
    base_by_size: dict[Optional[int], Point] = {}
    for p in rep.points:
        if all(p.axes.get(a) == v for a, v in rep.baseline.items()):
            base_by_size.setdefault(p.size, p)
    for p in rep.points:
        row, col = _labels(p, rep.row_axis, col_axes)
        if row not in pv.rows:
            pv.rows.append(row)
        if col not in pv.columns:
            pv.columns.append(col)
        v = metric.fn(p)
        pv.cells[(row, col)] = v
        if (p.overlap or {}).get("cpus"):
            pv.shared[(row, col)] = p.overlap or {}
        base = base_by_size.get(p.size)
        bv = metric.fn(base) if base is not None else None
        pv.ratios[(row, col)] = v / bv if v is not None and bv else None
        if base is not None and bool((p.overlap or {}).get("cpus")) != bool((base.overlap or {}).get("cpus")):
            pv.mixed.add((row, col))
    pv.baseline = ", ".join(f"{a}={axis_text(v)}" for a, v in rep.baseline.items())
    return pv


def _baseline(points: list[Point], axes: list[str]) -> dict[str, Any]:
    """The units flagged ``baseline``; else the first value of every axis."""
    flagged = next((p for p in points if p.baseline), None)
    if flagged is not None:
        return {a: flagged.axes.get(a) for a in axes}
    return {a: next((p.axes[a] for p in points if a in p.axes), None) for a in axes}


def _net_metric(m: Metric) -> Metric:
    """A latency metric titled as net of the harness self-latency."""
    return replace(m, title=m.title.replace("at Throughput", "at Throughput net of harness self-latency", 1))


def _gross_note(rep: StudyReport) -> str:
    gross = list(dict.fromkeys(f"{p.test.name} {fmt_num(p.size) if p.size else 'IMIX'} B"
                               for p in rep.points if p.latency_gross))
    return (" Gross (no harness self-latency measured for it): " + ", ".join(gross) + ".") if gross else ""


def study_reports(tests: list[Any], rate_unit: str = "pps",
                  net_env: Optional[dict[str, Any]] = None) -> list[StudyReport]:
    """One report per study of the run, in the order the studies first appear.  ``net_env``: the
    run's environment when latency is reported net of the harness self-latency (None: gross)."""
    groups: dict[tuple[str, str], list[Any]] = {}
    for t in tests:
        st = study_of(t)
        if st:
            groups.setdefault((str(st["name"]), t.method), []).append(t)
    out = []
    for (name, method), group in groups.items():
        points = [_point(t, tests, net_env) for t in group]
        axes = list(dict.fromkeys(a for p in points for a in p.axes))
        sizes = list(dict.fromkeys(p.size for p in points))
        rep = StudyReport(name=name, method=method, axes=axes, row_axis=_row_axis(method, axes, sizes),
                          baseline=_baseline(points, axes), points=points)
        base = f"Ratios (×) against the baseline {', '.join(f'{a}={axis_text(v)}' for a, v in rep.baseline.items())}"
        base += " at the same frame size." if len(sizes) > 1 else "."
        if method in THROUGHPUT_METHODS:
            _rate_pivots(rep, rate_unit, base, net_env is not None)
        else:
            for m in method_metrics(method):
                if result_class(method).LATENCY and net_env is not None:
                    rep.pivots.append(build_pivot(rep, _net_metric(m), base + _gross_note(rep)))
                else:
                    rep.pivots.append(build_pivot(rep, m, base))
        out.append(rep)
    return out


def _rate_pivots(rep: StudyReport, rate_unit: str, base: str, net: bool = False) -> None:
    ndir = {p.directions for p in rep.points}
    for i, m in enumerate(rate_metrics(rate_unit)):
        rep.pivots.append(build_pivot(rep, m, (base + " " if i == 0 else "") + "Per interface (per direction)."))
    cores = {p.cores for p in rep.points}
    if len(cores) > 1 and None not in cores:
        rep.pivots.append(build_pivot(rep, PER_CORE, "Aggregate fps (per interface × "
                                      f"{'/'.join(str(n) for n in sorted(ndir))} transmitting interfaces) / PMD "
                                      "cores, in Mpps; × = per-core efficiency against the baseline's "
                                      "(1.00× = linear scaling)."))
    elif len(cores) > 1:
        missing = [p.test.name for p in rep.points if p.cores is None]
        rep.pivots[0].note += (" Mpps per PMD core not shown: no PMD core count for "
                               + ", ".join(dict.fromkeys(missing)) + ".")
    if len({p.switching_operations for p in rep.points}) > 1:
        rep.pivots.append(build_pivot(rep, SWITCHING, "Normalises throughput across topologies: a frame "
                                      "crossing the switch twice (PVP) counts two switching operations "
                                      "(seed 000 Table 5-1)."))
    lat = build_pivot(rep, _net_metric(LATENCY) if net else LATENCY,
                      "Latency at Throughput from a latency test of the same configuration "
                      "(topology overrides, traffic, study axes) or the throughput test's own; empty "
                      "otherwise." + (_gross_note(rep) if net else ""))
    if any(v is not None for v in lat.cells.values()):
        rep.pivots.append(lat)


# --------------------------------------------------------------------------- run-wide comparisons

@dataclass
class VxlanPair:
    plain: Any
    vxlan: Any
    size: Optional[int]
    plain_pps: Optional[float]
    vxlan_pps: Optional[float]

    @property
    def overhead_pct(self) -> Optional[float]:
        """Throughput lost to VXLAN, in % of the plain throughput (inner frame sizes)."""
        if not self.plain_pps or self.vxlan_pps is None:
            return None
        return 100.0 * (1.0 - self.vxlan_pps / self.plain_pps)


def vxlan_overhead(tests: list[Any]) -> list[VxlanPair]:
    """Every rate test with VXLAN paired with the same test without it (same method, inner frame
    size and configuration once VXLAN is taken out: report.configuration.without_vxlan)."""
    plain: dict[str, Any] = {}
    for t in tests:
        if t.method in THROUGHPUT_METHODS and not is_vxlan(t):
            plain.setdefault(without_vxlan(t), t)
    out = []
    seen = set()
    for t in tests:
        if t.method in THROUGHPUT_METHODS and is_vxlan(t):
            p = plain.get(without_vxlan(t))
            key = (without_vxlan(t), t.frame_size_b)
            if p is not None and key not in seen:      # two studies may hold the same pair
                seen.add(key)
                out.append(VxlanPair(plain=p, vxlan=t, size=t.frame_size_b, plain_pps=result_value(p),
                                     vxlan_pps=result_value(t)))
    return out


def vxlan_table(pairs: list[VxlanPair]) -> Optional[Table]:
    if not pairs:
        return None
    t = Table("VXLAN overhead (seed 000 Fig 7-22)",
              "The same test with and without VXLAN at the same inner frame size; overhead = throughput "
              "lost to encapsulation, (1 − VXLAN / plain) × 100. fps per interface.",
              ["Frame B (inner)", "Without VXLAN", "fps", "With VXLAN", "fps", "Overhead %"], key="vxlan_overhead")
    for p in pairs:
        t.rows.append([fmt_num(p.size), p.plain.name, fmt_num(p.plain_pps, 0), p.vxlan.name,
                       fmt_num(p.vxlan_pps, 0), fmt_num(p.overhead_pct, 1)])
    return t


def switching_across_topologies(tests: list[Any]) -> Optional[Table]:
    """Throughput normalised by switching operations over the run's topologies (tests outside
    studies; a study has its own pivot), when they differ: rows = frame size, columns = tests."""
    tps = [t for t in tests if t.method in THROUGHPUT_METHODS and not study_of(t) and t.frame_size_b]
    if len({int((t.topology or {}).get("switching_operations") or 1) for t in tps}) < 2:
        return None
    names = list(dict.fromkeys(t.name for t in tps))
    sizes = sorted({t.frame_size_b for t in tps})
    label = {t.name: f"{t.name} ({(t.topology or {}).get('kind')}, "
                     f"×{int((t.topology or {}).get('switching_operations') or 1)})" for t in tps}
    tb = Table("switching operations/s across topologies (seed 000 Table 5-1)",
               "Aggregate fps × switching operations per frame (in brackets): the work the switch does, "
               "comparable across topologies.", ["Frame B"] + [label[n] for n in names], key="switching_across")
    by = {(t.name, t.frame_size_b): t for t in tps}
    for s in sizes:
        row = [fmt_num(s)]
        for n in names:
            t = by.get((n, s))
            v = result_value(t) if t is not None else None
            tp = (t.topology or {}) if t is not None else {}
            row.append("—" if v is None else fmt_num(v * int(tp.get("directions") or 1)
                                                     * int(tp.get("switching_operations") or 1), 0))
        tb.rows.append(row)
    return tb


def study_tables(tests: list[Any], rate_unit: str = "pps", net_env: Optional[dict[str, Any]] = None) -> list[Table]:
    """Every study pivot, then the run-wide VXLAN overhead and switching-operations tables
    (``net_env``: latency net of the harness, :func:`study_reports`)."""
    out = [pv.to_table() for rep in study_reports(tests, rate_unit, net_env) for pv in rep.pivots]
    vx = vxlan_table(vxlan_overhead(tests))
    if vx is not None:
        out.append(vx)
    sw = switching_across_topologies(tests)
    if sw is not None:
        out.append(sw)
    return out
