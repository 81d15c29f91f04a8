"""Report tables as data (rendered to the terminal by rich and to HTML by Jinja2).

Shapes follow the seed reports (seed 000 Tables 7-x: packet size | Mbps | packets/s | % line
rate | min/avg/max latency; Table 5-1 switching operations), with METHODOLOGY A3/G7 applied:
every bit rate is labelled L1 or L2, and every table says per-interface vs aggregate.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from nfvperf.host.steadiness import moved_pct, steadiness_note
from nfvperf.methods import REGISTRY as METHODS, LatencyResult, method_info, result_class, result_of, runs_on_iperf3
from nfvperf.report import ceiling as hc
from nfvperf.report.extract import fmt_num, num, rates, repeat_of, result_value, scalars, size_of
from nfvperf.report.rounds import is_rounds_test, rounds_tables
from nfvperf.report.rule_install import rule_install_tables
from nfvperf.report.study import study_tables
from nfvperf.report.table import THROUGHPUT_METHODS, Table, is_latency, is_loss_steps, latency_for
from nfvperf.store.db import run_liveness
from nfvperf.units import directions, switching_ops_pps
from nfvperf.report.extract import resolved_tests, walk
from nfvperf.report.explain import comparison_table, why_table
from nfvperf.report.facts import run_facts
from nfvperf.report.polling import MARK, mark_overlaps, overlap_note, overlap_of, run_note
from nfvperf.dut.base import dut_class

PCTS = ("50", "90", "99", "99.9", "99.99")


@dataclass
class ReportData:
    run: Any
    header: list[tuple[str, str]]
    tables: list[Table]
    directions: int
    switching_ops: int
    notes: list[str] = field(default_factory=list)


def _us(ns: Optional[float]) -> str:
    return "—" if ns is None else f"{ns / 1e3:,.2f}"


def _dir_note(bidir: bool, ports: int, n: int) -> str:
    mode = "bidirectional" if bidir else "unidirectional"
    return (f"Rates are per interface (per direction, = MLR Trial Load); aggregate = per-interface "
            f"× {n} transmitting interface(s) ({mode}, {ports} ports).")


def build(run: Any, net_of_harness: Optional[bool] = None) -> ReportData:
    """The report's header, notes and tables.  ``net_of_harness``: latency net of the harness
    self-latency (None: the suite's ``ceiling.latency_net_of_harness``)."""
    cfg = run.config or {}
    env = run.environment or {}
    asked_net = hc.latency_net_wanted(cfg, net_of_harness)
    # net only where there is a self-latency to take off: a run without one stays gross (noted)
    net_of_harness = asked_net and hc.has_self_latency(env)
    topo = cfg.get("topology") or {}
    traffic = cfg.get("traffic") or {}
    ports = int(topo.get("ports") or env.get("ports") or 2)
    ndir = directions(traffic, ports)
    sw = int(env.get("switching_operations") or 1)
    prof = cfg.get("profile") or {}
    header = [
        ("Run", f"{run.id} ({run.tag})"), ("Suite", run.suite), ("Status", run.status +
                                                                  (f" — {run.reason}" if run.reason else "")),
        ("Topology", f"{run.topology}, {ports} ports, DUT {run.dut}"),
        ("Started / finished (UTC)", f"{_dt(run.started_at)} / {_dt(run.finished_at)}"),
        ("Link speed", f"{env.get('link_speed') or traffic.get('link_speed')} per port (L1)"),
        ("Flows per port", str(traffic.get("flows_per_port", 1))),
        ("Direction", f"{'bidirectional' if traffic.get('bidirectional', True) else 'unidirectional'}; "
                      f"aggregate = per-interface × {ndir}"),
        ("Profile", f"{prof.get('name', run.profile)}: trial {prof.get('trial_s')} s, drain "
                    f"{prof.get('drain_s')} s, settle {prof.get('settle_s')} s, learning {prof.get('learning_s')} s"),
        ("Switching operations", "; ".join(dict.fromkeys(
            f"{i.get('kind')}: {i.get('switching_operations')} per direction ({i.get('switching_operations_source')})"
            for i in env.get("topologies") or [] if not i.get("skipped"))) or f"{sw} per direction"),
        ("Harness ceiling", hc.summary(env, run.tg)),
    ]
    fit = env.get("fit_host") or {}
    if fit:          # --fit-host: what the run changed in the suite to fit this host (nfvperf.fit)
        header.append(("Fitted to host", f"{fit.get('host')}: " + (fit.get("summary") or "nothing to change")))
    header[4:4] = run_facts(run)
    notes = []
    dead = run_liveness(run)
    if dead:
        notes.append(f"This run is marked running but {dead}.")
    devs = env.get("profile_deviations") or []
    if devs:
        notes.append("Deviations from RFC 2544 §23/§24 (MLRsearch requires reporting them): " + "; ".join(devs))
    if env.get("cores_shared"):
        notes.append("Cores were shared (busy-polling threads of the generator, the DUT or its VNFs, and "
                     "housekeeping; the run's pinning warnings say which): results are a lower bound "
                     "of what dedicated cores would give.")
    steady = steadiness_note(env.get("cpu_steadiness"))
    if steady:
        notes.append(steady)
    if run.tg == "sim":
        notes.append("Measured on the simulated DUT (--tg sim): numbers come from a model, not a device.")
    if fit.get("changes"):
        notes.append("Fitted to host (--fit-host): each unit ran on its fitted topology (the tests' "
                     "topology rows name the changes); test names keep the suite's values, and a study "
                     "axis the fit changed shows both, the value written and the one that ran "
                     "(pmd_cores=4→2 (fitted)).")
    tests = resolved_tests(run)   # tests.topology: overrides of run.config's
    mark_overlaps(tests, env)     # DUT polling on the generator's CPUs, for runs stored without it
    polling = run_note(tests)
    if polling:
        notes.append(polling)
    notes += result_notes(tests)
    host_rep = repeat_vs_host_note(tests, env)
    if host_rep:
        notes.append(host_rep)
    tables: list[Table] = []
    # a unit the run plan (or a failed preflight) skipped measured nothing: it is listed once, in
    # "Skipped here", and kept out of every measurement table
    skipped = [t for t in tests if t.status == "skipped"]
    tests = [t for t in tests if t.status != "skipped"]
    tables += rounds_tables(tests, env)
    all_tests, tests = tests, [t for t in tests if not is_rounds_test(t)]
    tables += study_tables(tests, str(traffic.get("rate_unit") or "pps"), env if net_of_harness else None)
    tables += _throughput_tables(tests, ndir, ports, traffic, sw, env, net_of_harness)
    tables += _latency_tables(tests, ndir, ports, traffic, env, net_of_harness)
    notes += ceiling_notes(tables, env, net_of_harness, asked_net)
    tables += [t for t in (why_table(all_tests, env), comparison_table(all_tests)) if t is not None]
    tables += _loss_tables(tests)
    tables += _other_tables(tests)
    tables += rule_install_tables(env)
    failed = [t for t in all_tests if t.status not in ("passed",)]
    if failed:
        tables.append(Table("Tests not passed", "", ["Test", "Frame B", "Status", "Reason"],
                            [[t.name, fmt_num(t.frame_size_b), t.status, t.reason or ""] for t in failed],
                            key="failed"))
    if skipped:
        tables.append(skipped_table(skipped))
    return ReportData(run=run, header=header, tables=tables, directions=ndir, switching_ops=sw, notes=notes)


def ceiling_notes(tables: list[Table], env: dict[str, Any], net: bool, asked_net: bool = False) -> list[str]:
    """``net``: latency is shown net of the harness; ``asked_net``: it was asked for (it is not
    net when the run has no self-latency: the sim, no ceiling)."""
    out = [f"The harness ceiling ({c.get('port_kind')}) could not be measured: {c['error']}"
           for c in hc.ceilings_of(env) if c.get("error")]
    # the bound column by name: with repeated searches the last column is their spread
    bounds = {row[t.columns.index("bound")] for t in tables if t.key == "throughput" for row in t.rows
              if len(row) == len(t.columns)}
    if hc.HARNESS_BOUND in bounds:
        out.append(f"A throughput marked {hc.HARNESS_BOUND} is above "
                   f"{hc.HARNESS_BOUND_FRACTION:.0%} of what the harness alone carries on this path "
                   "(tgen through testpmd io, same ports and cores): it shows the generator's limit, "
                   "not the DUT's; the DUT is at least this fast.")
    if hc.NEAR_LINE_RATE in bounds:
        out.append(f"A throughput marked {hc.NEAR_LINE_RATE} is above {hc.HARNESS_BOUND_FRACTION:.0%} "
                   "of a harness ceiling shown as \"≥\": the harness carried the nominal line rate with "
                   "zero loss, so its own limit is unknown. The result is near the link's nominal rate, "
                   "which caps the search (at line rate itself the search says \"max load passed\"): it "
                   "shows neither the harness's limit nor the DUT's; the DUT is at least this fast.")
    elif any(hc.is_lower_bound(p) for c in hc.ceilings_of(env) for p in (c.get("per_size") or {}).values()):
        out.append("A harness ceiling shown as \"≥\" is only the nominal line rate: the harness carried it "
                   "with zero loss, so its own limit is higher and was not found (a lower bound).")
    if net:
        out.append("Latency is reported net of the generator's self-latency on the harness path "
                   "(its min taken from min, its median from avg, max and percentiles): in the "
                   "throughput, latency and study tables and the latency plots, except figures "
                   "marked gross (no self-latency for that size; the histogram).")
    elif asked_net:
        out.append("Latency net of the harness was asked for, but this run has no harness "
                   "self-latency (no harness ceiling: --tg sim, --no-ceiling, or a failed "
                   "measurement): every latency shown is gross.")
    return out


def result_notes(tests: list[Any]) -> list[str]:
    """What the methods and searches said about their own results (generator-limited max load,
    irregular bounds, skipped sizes...), once per distinct text, prefixed with test and size."""
    seen: dict[str, None] = {}
    for t in tests:
        for r in t.results:
            for d in walk(r.data):
                notes = d.get("notes")
                for n in notes if isinstance(notes, list) else []:
                    if isinstance(n, str) and n:
                        seen.setdefault(f"{t.name} {fmt_num(t.frame_size_b)} B: {n}", None)
    return list(seen)


#: the key of the report's "Skipped here" table
SKIPPED_KEY = "skipped"


def skipped_table(skipped: list[Any]) -> Table:
    """The units that did not run on this host, one row per reason: the reason, how many units
    it skipped, and the units (a test's sizes together: ``pmd[pmd_cores=4] 64/128 B``)."""
    by_reason: dict[str, dict[str, list[str]]] = {}
    for t in skipped:
        sizes = by_reason.setdefault(t.reason or "(no reason stored)", {}).setdefault(t.name, [])
        if t.frame_size_b is not None:
            sizes.append(str(t.frame_size_b))       # as `nfvperf validate` writes them: 1024
    rows = []
    for reason, tests in by_reason.items():
        n = sum(max(1, len(sizes)) for sizes in tests.values())
        units = ", ".join(f"{name} {'/'.join(sizes)} B" if sizes else name for name, sizes in tests.items())
        rows.append([reason, str(n), units])
    return Table("Skipped here", "Units the run plan skipped on this host or port kind (or whose "
                 "topology's preflight failed): nothing was measured for them, so the tables above "
                 "leave them out. `nfvperf validate` with the run's options lists the same units.",
                 ["Reason", "Units", "Skipped units"], rows, key=SKIPPED_KEY)


def repeat_vs_host_note(tests: list[Any], env: dict[str, Any]) -> Optional[str]:
    """When searches were repeated on a host whose CPU speed moved (``cpu_steadiness`` above the
    note threshold): their spreads beside the host's, so a reader sees whether a spread is the
    DUT's or the host's."""
    host = moved_pct(env.get("cpu_steadiness"))
    if host is None:
        return None
    spreads = []
    for t in tests:
        for r in t.results[-1:]:
            rep = repeat_of(r.data or {})
            rr = num(rep.get("relative_range")) if rep else None
            if rr is not None:
                spreads.append((f"{t.name} {fmt_num(t.frame_size_b)} B", 100.0 * rr))
    if not spreads:
        return None
    within = all(v <= host for _, v in spreads)
    return ("Repeated searches spread by " + ", ".join(f"{n} {v:.0f} %" for n, v in spreads) +
            f" (relative range) while this host's CPU speed moved by {host:.0f} % on its own: "
            + ("every spread is within the host's own noise, so none of it can be put on the DUT."
               if within else "spreads above that are the DUT's or the path's, not only the host's."))


def _dt(v: Any) -> str:
    return v.strftime("%Y-%m-%d %H:%M:%S") if v else "—"


def _by_name(tests: list[Any], shows: Callable[[str], bool]) -> dict[str, list[Any]]:
    """The tests whose method ``shows`` selects, grouped by test name."""
    out: dict[str, list[Any]] = {}
    for t in tests:
        if shows(t.method):
            out.setdefault(t.name, []).append(t)
    return out


def _topo(group: list[Any], ndir: int, ports: int, sw: int) -> tuple[int, int, int, str]:
    """(directions, ports, switching ops, kind) of a test group, from its stored topology."""
    tp = (group[0].topology or {}) if group else {}
    return (int(tp.get("directions") or ndir), int(tp.get("ports") or ports),
            int(tp.get("switching_operations") or sw),
            str(tp.get("kind") or ""))


def _label(name: str, kind: str, group: list[Any], suite_traffic: dict) -> str:
    """``name [kind, what differs from the suite's traffic, OVS rules/PMD mask]`` for a table title."""
    tr = (group[0].traffic or {}) if group else {}
    bits = [kind] if kind else []
    bits += _dut_bits((group[0].topology or {}) if group else {})
    flows = tr.get("flows_per_port")
    if flows and flows != suite_traffic.get("flows_per_port", 1):
        bits.append(f"{flows:,} flows/port")
    if tr.get("vxlan"):
        bits.append("VXLAN, inner sizes")
    if tr.get("vlan"):
        bits.append(f"VLAN {tr['vlan']}")
    if tr.get("bidirectional") is False and suite_traffic.get("bidirectional", True):
        bits.append("unidirectional")
    return f"{name} [{', '.join(bits)}]" if bits else name


def _dut_bits(topology: dict[str, Any]) -> list[str]:
    """What the stored topology's DUT adapter says about its non-default options (OVS: PMD mask,
    rx queues, rules)."""
    try:
        cls = dut_class(str(topology.get("dut") or ""))
    except ValueError:
        return []
    section = topology.get(cls.options_key) if cls.options_key else None
    return cls.describe_options(section) if isinstance(section, dict) else []


def _port_kind(group: list[Any]) -> Optional[str]:
    return ((group[0].topology or {}).get("port_kind") if group else None) or None


def _throughput_tables(tests: list[Any], ndir: int, ports: int, traffic: dict, sw: int,
                       env: Optional[dict[str, Any]] = None, net: bool = False) -> list[Table]:
    env = env or {}
    out: list[Table] = []
    run_ndir, run_ports, run_sw = ndir, ports, sw
    for name, group in _by_name(tests, THROUGHPUT_METHODS.__contains__).items():
        ndir, ports, sw, kind = _topo(group, run_ndir, run_ports, run_sw)
        pkind = _port_kind(group)
        name = _label(name, kind, group, traffic)
        tt = Table(f"{name}: zero-loss throughput (RFC 2544 §26.1)",
                   _dir_note(traffic.get("bidirectional", True), ports, ndir) +
                   " Line rate per RFC 5180 App. A / METHODOLOGY A1; % line rate is L1. A search run "
                   "several times (repeat) shows the median, and its spread in the last column. Harness "
                   "ceiling = what tgen through testpmd io carries on the same ports and cores; bound: "
                   f"{hc.HARNESS_BOUND} above {hc.HARNESS_BOUND_FRACTION:.0%} of it ({hc.NEAR_LINE_RATE} "
                   "when the ceiling is \"≥\": only the nominal line rate, which the harness carried).",
                   ["Frame B", "fps / interface", "L1 Mbps / interface", "L2 Mbps / interface",
                    "% line rate (L1)", f"aggregate fps (×{ndir})", f"aggregate L1 Mbps (×{ndir})",
                    "Latency min/avg/max µs (@ % of Throughput)" +
                    (", net of harness self-latency" if net else ""), SELF_LATENCY_COLUMN,
                    "harness ceiling fps", "bound", REPEATS_COLUMN], key="throughput")
        swt = Table(f"{name}: switching performance (seed 000 Table 5-1)",
                    f"Switching ops/s = aggregate throughput × switching operations ({sw} per direction "
                    "for this topology).", ["Frame B", f"aggregate fps (×{ndir})", "Switching operations",
                                            "Switching ops/s"], key="switching")
        gt = Table(f"{name}: search goals (MLRsearch RLB/RUB)",
                   "RLB = Relevant Lower Bound (the result), RUB = Relevant Upper Bound; loads per interface.",
                   ["Frame B", "Goal", "Loss ratio", "Exceed ratio", "RLB fps", "RUB fps", "Width fps",
                    "Cond. throughput fps", "Regular"], key="goals")
        shared: dict[str, dict[str, Any]] = {}     # "<unit>": DUT polling on the generator's CPUs
        for t in group:
            ceil, lower = hc.ceiling_bound(env, t.frame_size_b, pkind)
            sl_cell = _self_lat_cell(hc.self_latency(env, t.frame_size_b, pkind))
            ceil_cells = [hc.ceiling_text(ceil, lower)]
            if not t.results:
                tt.rows.append([fmt_num(t.frame_size_b), f"({t.status})"] + ["—"] * 6 + [sl_cell] + ceil_cells
                               + ["—", "—"])
                continue
            data = t.results[-1].data or {}
            pps = result_value(t)
            ceil_cells.append(hc.bound_label(pps, ceil, lower_bound=lower))
            lat, gross = hc.net_point(latency_for(tests, t, data), env, t.frame_size_b, pkind, net)
            latency = (f"{_us(lat.get('min_ns'))} / {_us(lat.get('avg_ns'))} / {_us(lat.get('max_ns'))}"
                       if lat else "—")
            frac = num(lat.get("fraction")) if lat else None
            if frac is not None and frac != 1.0:
                latency += f" @{100 * frac:g}%"
            if gross:
                latency += f" {GROSS}"
            size = fmt_num(t.frame_size_b) if t.frame_size_b else f"IMIX ({size_of(t.traffic):.0f} avg)"
            if t.traffic.get("vxlan"):
                size += f" (+50 = {int(size_of(t.traffic))} outer)"
            if pps is None:
                tt.rows.append([size, "n/a"] + ["—"] * 6 + [sl_cell] + ceil_cells + ["—"])
                continue
            r = rates(pps, t.traffic or {})
            fps = fmt_num(pps, 0) if pps > 0 else "0 (no loss-free load found)"
            fact = overlap_of(t) or {}
            if fact.get("cpus"):
                fps += f" {MARK}"
                shared.setdefault(f"{size} B", fact)
            tt.rows.append([size, fps,
                            fmt_num(r["l1_mbps"], 1), fmt_num(r["l2_mbps"], 1),
                            fmt_num(r["l1_pct"], 2), fmt_num(pps * ndir, 0), fmt_num(r["l1_mbps"] * ndir, 1),
                            latency, sl_cell] + ceil_cells + [_spread_cell(data)])
            swt.rows.append([size, fmt_num(pps * ndir, 0), str(sw), fmt_num(switching_ops_pps(pps * ndir, sw), 0)])
            for g in result_of(t.method, data).goal_results():
                rlb, rub = num(g.get("lower_bound_pps")), num(g.get("upper_bound_pps"))
                gt.rows.append([size, str(g.get("name", "")), fmt_num(num(g.get("loss_ratio")), 4),
                                fmt_num(num(g.get("exceed_ratio")), 2), fmt_num(rlb, 0), fmt_num(rub, 0),
                                fmt_num(rub - rlb if rlb is not None and rub is not None else None, 0),
                                fmt_num(num(g.get("conditional_throughput_pps")), 0),
                                "no: " + str(g.get("irregular_reason") or "irregular") if g.get("irregular")
                                else "yes"])
        if shared:
            tt.note += " " + overlap_note(_shared_labels(shared, len(swt.rows)))
        for col in (REPEATS_COLUMN, SELF_LATENCY_COLUMN):   # no search was repeated; no harness (sim)
            i = tt.columns.index(col)
            if all(len(row) <= i or row[i] == "—" for row in tt.rows):
                del tt.columns[i]
                tt.rows = [row[:i] + row[i + 1:] for row in tt.rows]
        out.append(tt)
        out.append(swt)
        if gt.rows:
            out.append(gt)
    return out


def _shared_labels(shared: dict[str, dict[str, Any]], measured: int) -> dict[str, dict[str, Any]]:
    """The frame sizes of one test's table whose unit shared the generator's CPU (size label ->
    fact), as one "every frame size" when all measured units did (one topology ran them all)."""
    facts = list(shared.values())
    if len(shared) == measured and all(f == facts[0] for f in facts):
        return {"every frame size": facts[0]}
    return shared


#: the throughput table's spread over repetitions (dropped when no search was repeated)
REPEATS_COLUMN = "Repeats: min – max fps (range)"
#: the generator's own latency on the harness path beside a latency (dropped without a ceiling)
SELF_LATENCY_COLUMN = "harness self-latency min/p50/p99 µs"
#: a latency shown as measured although the report is net of the harness (no self-latency for it)
GROSS = "(gross)"


def _spread_cell(data: dict[str, Any]) -> str:
    """The throughput table's spread over repetitions: ``3×: 7,900,000 – 8,000,000 (1.26 %)``;
    the fps column then holds their median.  "—" for a search run once."""
    rep = repeat_of(data)
    if rep is None:
        return "—"
    rr = num(rep.get("relative_range"))
    n = int(num(rep.get("n")) or 0)
    return (f"{n}×: {fmt_num(num(rep.get('min_pps')), 0)} – {fmt_num(num(rep.get('max_pps')), 0)}"
            + (f" ({100 * rr:.2f} %)" if rr is not None else ""))


def _self_lat_cell(sl: Optional[dict[str, float]]) -> str:
    return " / ".join(_us(sl.get(k)) for k in ("min", "p50", "p99")) if sl else "—"


def _latency_tables(tests: list[Any], ndir: int, ports: int, traffic: dict,
                    env: Optional[dict[str, Any]] = None, net: bool = False) -> list[Table]:
    env = env or {}
    out: list[Table] = []
    run_ndir, run_ports = ndir, ports
    for name, group in _by_name(tests, is_latency).items():
        ndir, ports, _sw, kind = _topo(group, run_ndir, run_ports, 1)
        pkind = _port_kind(group)
        name = _label(name, kind, group, traffic)
        definition = ""
        net_title = " (net of harness self-latency)" if net else ""
        lt = Table(f"{name}: {SUMMARY_TITLES.get(group[0].method, group[0].method)}{net_title}", "",
                   ["Frame B", "% of Throughput", "Load fps / interface", "Repetitions", "Samples",
                    "Min µs", "Avg µs", "Max µs", "Frames lost",
                    "harness self-latency min/p50/p99 µs"], key="latency")
        pt = Table(f"{name}: latency percentiles and delay variation", "µs, mean over repetitions; PDV = RFC 5481 "
                   "D(i)−D(min), IPDV = RFC 3393 D(i)−D(i−1).", ["Frame B", "% of Throughput"] +
                   [f"p{p} µs" for p in PCTS] + ["PDV p99 µs", "IPDV max µs"], key="latency_pct")
        for t in group:
            sl = hc.self_latency(env, t.frame_size_b, pkind)
            if not t.results:
                lt.rows.append([fmt_num(t.frame_size_b), f"({t.status})"] + ["—"] * 7 + [_self_lat_cell(sl)])
                continue
            res = result_of(t.method, t.results[-1].data or {})
            own = res if isinstance(res, LatencyResult) else None     # its Throughput and definition
            definition = definition or str((own.definition if own else "") or "")
            tput = num(own.throughput_pps) if own else None
            for lat in res.latency_points():
                definition = definition or str(lat.get("definition") or "")
                lat, gross = hc.net_point(lat, env, t.frame_size_b, pkind, net)
                fr = _fraction_cell(lat, tput) + (f" {GROSS}" if gross else "")
                lt.rows.append([fmt_num(t.frame_size_b), fr, fmt_num(num(lat.get("load_pps")), 0),
                                fmt_num(lat.get("repetitions")), fmt_num(lat.get("count")),
                                _us(num(lat.get("min_ns"))), _us(num(lat.get("avg_ns"))),
                                _us(num(lat.get("max_ns"))), fmt_num(lat.get("lost")), _self_lat_cell(sl)])
                pc = lat.get("percentiles_ns") or {}
                pt.rows.append([fmt_num(t.frame_size_b), fr] + [_us(num(_pct(pc, p))) for p in PCTS] +
                               [_us(num((lat.get("pdv_ns") or {}).get("p99"))),
                                _us(num((lat.get("ipdv_ns") or {}).get("max")))])
        lt.note = (f"Definition: {definition or 'as reported by the measurer'}. " +
                   _dir_note(traffic.get("bidirectional", True), ports, ndir))
        out.append(lt)
        if any(any(c != "—" for c in row[2:]) for row in pt.rows):
            out.append(pt)
    return out


def _fraction_cell(lat: dict[str, Any], tput: Optional[float]) -> str:
    """"90 %", or for a point the generator could not offer "90 % → 78 % (generator-limited)"."""
    frac = num(lat.get("fraction"))
    if frac is None:
        return "—"
    cell = f"{100 * frac:g} %"
    load = num(lat.get("load_pps"))
    if lat.get("generator_limited") and tput and load is not None:
        cell += f" → {100 * load / tput:.0f} % (generator-limited)"
    return cell


def _pct(pc: dict[str, Any], p: str) -> Any:
    if p in pc:
        return pc[p]
    for k, v in pc.items():
        try:
            if abs(float(k) - float(p)) < 1e-9:
                return v
        except ValueError:
            continue
    return None


def _loss_tables(tests: list[Any]) -> list[Table]:
    out: list[Table] = []
    for name, group in _by_name(tests, is_loss_steps).items():
        ft = Table(f"{name}: {SUMMARY_TITLES.get(group[0].method, group[0].method)}",
                   "Load in % of the theoretical maximum (L1) per interface; loss % = (in − out) × 100 / in.",
                   ["Frame B", "Load % (L1)", "Load fps / interface", "Sent", "Received", "Loss %"], key="loss")
        for t in group:
            for tr in t.trials:
                mx = rates(1.0, t.traffic or {})["max_fps"]
                ft.rows.append([fmt_num(t.frame_size_b), fmt_num(100 * tr.load_pps / mx, 1),
                                fmt_num(tr.load_pps, 0), fmt_num(tr.sent), fmt_num(tr.received),
                                fmt_num(100 * tr.loss_ratio, 4)])
        out.append(ft)
    return out


# table titles the methods declare (MethodInfo.title)
SUMMARY_TITLES = {name: method_info(name).title or name for name in METHODS}


def _own_table(method: str) -> bool:
    """Shown in the throughput, latency or loss tables (the other methods: their own table or
    the scalars table)."""
    return method in THROUGHPUT_METHODS or is_latency(method) or is_loss_steps(method)


def _other_tables(tests: list[Any]) -> list[Table]:
    out: list[Table] = []
    groups: dict[str, list[Any]] = {}
    for t in tests:
        if not _own_table(t.method):   # all TCP tests in one table (seed 001: one row per stream count)
            groups.setdefault(t.method if runs_on_iperf3(t.method) else t.name, []).append(t)
    for name, group in groups.items():
        method = group[0].method
        spec = result_class(method).TABLE
        if spec is not None:
            tb = Table(f"{name}: {spec.title}", spec.note, list(spec.columns), key=method)
            for t in group:       # the first column is the test (TABLE.first "Test") or the size
                first = t.name if spec.first == "Test" else fmt_num(t.frame_size_b)
                if t.results:
                    tb.rows.append(result_of(method, t.results[-1].data or {}).table_row(first))
                else:
                    tb.rows.append([first, f"({t.status})"] + ["—"] * (len(spec.columns) - 2))
            out.append(tb)
            continue
        title = SUMMARY_TITLES.get(method, method)
        tb = Table(f"{name}: {title}", "Scalar results as stored (units in the field names).",
                   ["Frame B", "Field", "Value"], key="summary")
        for t in group:
            if not t.results:
                tb.rows.append([fmt_num(t.frame_size_b), "status", f"{t.status}: {t.reason or ''}"])
                continue
            for k, v in scalars(t.results[-1].data or {}):
                if k in ("method", "frame_size_b"):
                    continue
                tb.rows.append([fmt_num(t.frame_size_b), k, fmt_num(v, 4) if isinstance(v, float) else fmt_num(v)])
        out.append(tb)
    return out
