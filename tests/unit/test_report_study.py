"""Study reports from stored rows with known numbers: pivots and ratios against the baseline,
Mpps per PMD core, VXLAN overhead, switching operations across topologies, TCP vs streams; the
latency attribution fix; the header's facts (VM accelerator...)."""
from __future__ import annotations

import io

import pytest

from nfvperf import units
from nfvperf.report.extract import resolved_tests
from nfvperf.report.html import render_html
from nfvperf.report.study import ratio_text, study_reports
from nfvperf.report.tables import build
from nfvperf.report.terminal import print_report
from nfvperf.store import Store

from _study_runs import SUITE_TOPOLOGY, add_test, cores_flows_study, latency_data, new_run, topo_row


@pytest.fixture()
def store(tmp_path):
    s = Store("sqlite:///" + str(tmp_path / "s.db"))
    yield s
    s.close()


def _num(cell: str) -> float:
    return float(cell.replace(",", "").rstrip("×"))


def test_grid_pivot_ratios_and_per_core(store) -> None:
    rid = new_run(store)
    fps = cores_flows_study(store, rid)
    run = store.load_run(rid)
    (rep,) = study_reports(resolved_tests(run))
    assert rep.row_axis == "pmd_cores" and rep.baseline == {"pmd_cores": 1, "flows": 1}
    pv = rep.pivot("fps")
    assert pv.rows == ["1", "2", "4"] and pv.columns == ["flows=1", "flows=1,000"]
    assert pv.value("4", "flows=1,000") == fps[(4, 1000)]
    assert pv.ratio("1", "flows=1") == pytest.approx(1.0)
    assert pv.ratio("4", "flows=1,000") == pytest.approx(5.6 / 2.0)
    assert ratio_text(pv.ratio("2", "flows=1")) == "1.90×"
    l1 = rep.pivot("l1_mbps")
    assert l1.value("2", "flows=1") == pytest.approx(units.l1_bps(3.8e6, 64) / 1e6)
    assert rep.pivot("pct").value("1", "flows=1") == pytest.approx(units.pct_line_rate(2.0e6, 64, 10e9))
    # Mpps per PMD core: aggregate (×2 directions) / cores; × = scaling efficiency vs the baseline's
    pc = rep.pivot("per_core")
    assert pc is not None
    assert pc.value("4", "flows=1") == pytest.approx(7.0e6 * 2 / 4 / 1e6)
    assert pc.ratio("4", "flows=1") == pytest.approx((7.0 / 4) / 2.0)
    table = pv.to_table()
    assert table.columns == ["pmd_cores", "flows=1", "flows=1 ×", "flows=1,000", "flows=1,000 ×"]
    assert table.rows[2] == ["4", "7,000,000", "3.50×", "5,600,000", "2.80×"]


def test_core_count_from_the_pmd_mask_without_axis(store) -> None:
    """No pmd_cores axis or field: the cores come from the popcount of the stored mask."""
    rid = new_run(store)
    for mask, v in (("0x4", 2e6), ("0x3c", 6e6)):
        add_test(store, rid, f"m[mask={mask}]", "throughput", 64, v,
                 topology=topo_row(overrides={"ovs": {"pmd_cpu_mask": mask}}),
                 study={"name": "m", "axes": {"topology.ovs.pmd_cpu_mask": mask}, "baseline": mask == "0x4"})
    (rep,) = study_reports(resolved_tests(store.load_run(rid)))
    assert [p.cores for p in rep.points] == [1, 4]
    assert rep.pivot("per_core").value("0x3c", "value") == pytest.approx(6e6 * 2 / 4 / 1e6)


def test_multi_size_study_rows_are_frame_sizes(store) -> None:
    rid = new_run(store)
    for flows, scale in ((1, 1.0), (10000, 0.5)):
        for size, v in ((64, 4e6), (512, 2e6)):
            add_test(store, rid, f"f[flows={flows}]", "throughput", size, v * scale,
                     traffic={"flows_per_port": flows},
                     study={"name": "f", "axes": {"flows": flows}, "baseline": flows == 1})
    (rep,) = study_reports(resolved_tests(store.load_run(rid)))
    pv = rep.pivot("fps")
    assert rep.row_axis is None and pv.rows == ["64", "512"] and pv.columns == ["flows=1", "flows=10,000"]
    assert pv.ratio("512", "flows=10,000") == pytest.approx(0.5)       # against the baseline at 512 B
    assert rep.pivot("per_core") is None                                 # cores did not vary


def test_tcp_study_gbps_vs_streams(store) -> None:
    rid = new_run(store, tg="iperf3")
    for tso in (True, False):
        for streams, gbps in ((1, 9.0), (4, 18.0), (8, 20.0)):
            add_test(store, rid, f"tcp[streams={streams},tso={tso}]", "tcp", None,
                     gbps * 1e9 * (1.0 if tso else 0.5),
                     study={"name": "tcp", "axes": {"tso": tso, "streams": streams},
                            "baseline": tso and streams == 1})
    (rep,) = study_reports(resolved_tests(store.load_run(rid)))
    pv = rep.pivot("tcp")
    assert rep.row_axis == "streams" and pv.rows == ["1", "4", "8"] and pv.columns == ["tso=on", "tso=off"]
    assert pv.value("8", "tso=on") == pytest.approx(20.0)
    assert pv.ratio("8", "tso=off") == pytest.approx(10.0 / 9.0)


def test_vxlan_overhead_and_switching_across_topologies(store) -> None:
    rid = new_run(store)
    add_test(store, rid, "pvp", "throughput", 64, 3.0e6, topology=topo_row("pvp", {"kind": "pvp"}, sw=2))
    add_test(store, rid, "vxlan", "throughput", 64, 2.4e6, topology=topo_row("vxlan", {"kind": "vxlan", "mtu": 1550},
                                                                             sw=2), traffic={"vxlan": True})
    add_test(store, rid, "p-ovs-p", "throughput", 64, 5.0e6)
    data = build(store.load_run(rid))
    (vx,) = [t for t in data.tables if t.key == "vxlan_overhead"]
    assert vx.rows == [["64", "pvp", "3,000,000", "vxlan", "2,400,000", "20.0"]]
    (sw,) = [t for t in data.tables if t.key == "switching_across"]
    assert sw.columns == ["Frame B", "pvp (pvp, ×2)", "vxlan (vxlan, ×2)", "p-ovs-p (p-ovs-p, ×1)"]
    assert sw.rows[0] == ["64", "12,000,000", "9,600,000", "10,000,000"]


def test_latency_only_from_the_same_configuration(store) -> None:
    """Issue 9 item 4: the 2-core row must not show the 1-core latency test's numbers (the old
    _latency_for matched any latency test of the same size and topology kind)."""
    rid = new_run(store)
    add_test(store, rid, "tp-1core", "throughput", 64, 2e6)
    add_test(store, rid, "tp-2core", "throughput", 64, 4e6,
             topology=topo_row(overrides={"ovs": {"pmd_cpu_mask": "0xc"}}))
    add_test(store, rid, "tp-1k-flows", "throughput", 64, 1.5e6, traffic={"flows_per_port": 1000})
    add_test(store, rid, "lat-1core", "latency", 64, None, data=latency_data(12_000.0))
    data = build(store.load_run(rid))
    col = None
    lat_of = {}
    for t in data.tables:
        if t.key == "throughput":
            col = next(i for i, c in enumerate(t.columns) if c.startswith("Latency"))
            lat_of[t.title.split(" ")[0]] = t.rows[0][col]
    assert lat_of["tp-1core"] == "6.00 / 12.00 / 36.00"
    assert lat_of["tp-2core"] == "—" and lat_of["tp-1k-flows"] == "—"


def test_study_latency_pivot_pairs_units_by_axes(store) -> None:
    rid = new_run(store)
    for cores, v, lat in ((1, 2e6, 20_000.0), (2, 4e6, None)):
        ov = {"ovs": {"pmd_cores": cores}}
        add_test(store, rid, f"tp[pmd_cores={cores}]", "throughput", 64, v, topology=topo_row(overrides=ov),
                 study={"name": "tp", "axes": {"pmd_cores": cores}, "baseline": cores == 1})
        if lat:
            add_test(store, rid, f"lat[pmd_cores={cores}]", "latency", 64, None, topology=topo_row(overrides=ov),
                     study={"name": "lat", "axes": {"pmd_cores": cores}, "baseline": cores == 1},
                     data=latency_data(lat))
    reps = {r.name: r for r in study_reports(resolved_tests(store.load_run(rid)))}
    lp = reps["tp"].pivot("latency")
    assert lp.value("1", "value") == pytest.approx(20.0) and lp.value("2", "value") is None


def test_rate_unit_puts_its_pivot_first(store) -> None:
    rid = new_run(store)
    cores_flows_study(store, rid)
    run = store.load_run(rid)
    run.config = dict(run.config, traffic={"rate_unit": "l1_mbps"})
    tables = [t for t in build(run).tables if t.key.startswith("study_")]
    assert tables[0].key == "study_l1_mbps" and "flows=1 ×" in tables[0].columns
    assert "flows=1 ×" not in tables[1].columns


def test_header_says_what_ran(store) -> None:
    env = {"cores_shared": True, "host": {"cpu_model": "Intel(R) Xeon(R) Gold 6148", "cpus_online": 2,
                                          "dpdk_version": "22.11.1",
                                          "ovs_vswitchd_version": "ovs-vswitchd (Open vSwitch) 3.1.0"},
           "measurer": {"measurer": "tgen", "tgen_version": "0.4", "lcores": "0@1,1@1"},
           "topologies": [{"kind": "pvp", "measurer": {"topology": {
               "dut": {"dut": "ovs-dpdk", "version": "3.1.0 (DPDK 22.11.1)"},
               "vnfs": [{"vnf": "vnf0", "kind": "vm", "dut": "vm", "accel": "tcg",
                         "accel_reason": "/dev/kvm unusable (No such file or directory)",
                         "version": "QEMU 8.2"}]}}}]}
    rid = new_run(store, env=env, topology=dict(SUITE_TOPOLOGY_VM))
    add_test(store, rid, "pvp", "throughput", 64, 1e6, topology=topo_row("pvp", {"kind": "pvp"}, sw=2))
    run = store.load_run(rid)
    head = dict(build(run).header)
    assert head["VM accelerator"].startswith("TCG (/dev/kvm unusable") and "far below" in head["VM accelerator"]
    assert head["Cores shared (generator / DUT)"].startswith("yes")
    assert head["Host CPU"].startswith("Intel(R) Xeon(R) Gold 6148, 2 CPUs online")
    assert "DPDK 22.11.1" in head["DPDK / OVS versions"] and "Open vSwitch) 3.1.0" in head["DPDK / OVS versions"]
    assert "DUT ovs-dpdk 3.1.0" in head["DPDK / OVS versions"] and "VNF vnf0 QEMU 8.2" in head["DPDK / OVS versions"]
    assert head["Generator"] == "tgen, version 0.4, lcores 0@1,1@1" and head["Port kind"] == "af_packet"
    assert head["Numbers from"].startswith("measurements")
    buf = io.StringIO()
    print_report(run, buf)
    assert "VM accelerator" in buf.getvalue() and "TCG" in buf.getvalue()
    html = render_html(run)
    assert "VM accelerator" in html and "TCG (/dev/kvm unusable" in html


def test_header_of_a_sim_run_without_vm(store) -> None:
    rid = new_run(store, tg="sim")
    add_test(store, rid, "t", "throughput", 64, 1e6)
    head = dict(build(store.load_run(rid)).header)
    assert head["Numbers from"].startswith("a model")
    assert head["VM accelerator"] == "no VM in this run" and head["Cores shared (generator / DUT)"] == "not recorded"


SUITE_TOPOLOGY_VM = {**SUITE_TOPOLOGY, "kind": "pvp", "vnf": "vm"}


# ----------------------------------------------------------------------------- compare, N runs

def _three_runs(store):
    """#1 and #2 the same numbers under different test names (another suite spelling the same
    configurations); #3 25 % slower; #1 alone has an extra test; a test whose flows changed is
    paired by name."""
    r1, r2, r3 = new_run(store, "a"), new_run(store, "b"), new_run(store, "c")
    cores_flows_study(store, r1)
    fps = cores_flows_study(store, r3, scale=0.75)
    for (cores, flows), v in reversed(list(fps.items())):       # other names, other order
        masks = {1: "0x4", 2: "0xc", 4: "0x3c"}
        add_test(store, r2, f"renamed[{cores},{flows}]", "throughput", 64, v,
                 topology=topo_row(overrides={"ovs": {"pmd_cpu_mask": masks[cores], "pmd_cores": cores}}),
                 traffic={"flows_per_port": flows},
                 study={"name": "other", "axes": {"pmd_cores": cores, "flows": flows}, "baseline": False})
    add_test(store, r1, "only-in-1", "throughput", 128, 1e6, traffic={"flows_per_port": 7})
    for rid, flows in ((r1, 1), (r2, 1), (r3, 1000)):
        add_test(store, rid, "plain", "throughput", 512, 2e6, traffic={"flows_per_port": flows})
    return [store.load_run(r) for r in (r1, r2, r3)]


def test_compare_three_runs_matched_by_configuration(store) -> None:
    from nfvperf.report.compare import compare_many
    runs = _three_runs(store)
    cmp = compare_many(runs)
    grid = [r for r in cmp.rows if r.test.startswith("grid[")]
    assert len(grid) == 6
    for r in grid:
        assert r.values[1] == r.values[0]                      # #2 matched despite its other names
        assert r.ratios[1] == pytest.approx(1.0) and not r.flagged[1]
        assert r.ratios[2] == pytest.approx(0.75) and r.flagged[2]
    assert ("only-in-1 128 B", [2, 3]) in cmp.missing
    (plain,) = [r for r in cmp.rows if r.test == "plain"]
    assert "matched by name" in plain.note and "flows_per_port 1 → 1000" in plain.note
    assert len(cmp.flagged) == 6


def test_compare_cli_prints_the_pivot(store, tmp_path, capsys) -> None:
    from nfvperf.cli import main
    _three_runs(store)
    assert main(["compare", "1", "2", "3", "--db", store.url]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if "grid[pmd_cores=4,flows=1000]" in ln]
    assert lines and "1.00×" in lines[0] and "0.75×" in lines[0] and "CHANGED ▼ #3" in lines[0]
    assert "only in #1: only-in-1 128 B" in out and "6 change(s) above the noise threshold:" in out
    assert main(["compare", "1", "2", "--db", store.url]) == 0          # two runs: as before
    two = capsys.readouterr().out
    assert "0 change(s) above the noise threshold." in two and "#3" not in two


# ----------------------------------------------------------------------------- plots, Markdown

def _rules_study(store) -> int:
    rid = new_run(store)
    for rules, v in ((64, 8e6), (1000, 7e6), (65536, 4e6)):
        for kind in ("p-ovs-p", "pvp"):
            add_test(store, rid, f"r[rules={rules},kind={kind}]", "throughput", 64, v / (1 if kind == "p-ovs-p" else 2),
                     study={"name": "rules", "axes": {"rules": rules, "kind": kind},
                            "baseline": rules == 64 and kind == "p-ovs-p"})
    return rid


def test_study_plot_along_the_axis_log_scale_one_series_per_configuration(store) -> None:
    from nfvperf.report.plots import study_figure
    (rep,) = study_reports(resolved_tests(store.load_run(_rules_study(store))))
    fig = study_figure(rep, rep.pivots[0].metric)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "rules (log scale)"
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert set(lines) == {"kind=p-ovs-p", "kind=pvp"}
    assert list(lines["kind=pvp"].get_xdata()) == [64, 1000, 65536]
    assert list(lines["kind=pvp"].get_ydata()) == pytest.approx([4.0, 3.5, 2.0])     # Mfps


def test_plot_files_html_and_markdown(store, tmp_path) -> None:
    from nfvperf.report.markdown import render_markdown
    from nfvperf.report.plots import write_plot_files
    run = store.load_run(_rules_study(store))
    files = write_plot_files(run, tmp_path / "plots")
    names = sorted(p.name for p in files)
    assert names == ["study-rules-fps.png", "study-rules-fps.svg", "throughput-vs-frame-size.png",
                     "throughput-vs-frame-size.svg"]
    assert (tmp_path / "plots" / "study-rules-fps.svg").read_text().lstrip().startswith("<?xml")
    assert all(p.stat().st_size > 1000 for p in files)
    html = render_html(run)
    assert "Study rules: zero-loss throughput" in html and "study rules: zero-loss throughput, fps per" in html
    md = render_markdown(run)
    assert "| rules | kind=p-ovs-p | kind=p-ovs-p × | kind=pvp | kind=pvp × |" in md
    assert "| 65,536 | 4,000,000 | 0.50× | 2,000,000 | 0.25× |" in md
    assert "| **VM accelerator** | no VM in this run |" in md


def test_plot_files_are_drawn_one_at_a_time(store, tmp_path, monkeypatch) -> None:
    """Each figure is saved and closed before the next is drawn: seed 000's 40+ studies had every
    figure open at once (matplotlib's 'More than 20 figures have been opened' warning, and the
    memory of them all) before the first was written."""
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure
    from nfvperf.report.plots import write_plot_files
    plt.close("all")
    run = store.load_run(_rules_study(store))
    open_at_save: list[int] = []
    real = Figure.savefig
    monkeypatch.setattr(Figure, "savefig",
                        lambda self, *a, **k: (open_at_save.append(len(plt.get_fignums())), real(self, *a, **k))[1])
    files = write_plot_files(run, tmp_path / "plots")
    assert len(files) == 4 and open_at_save and max(open_at_save) == 1, open_at_save
    assert plt.get_fignums() == []


def test_report_cli_markdown_and_plots(store, tmp_path, capsys) -> None:
    from nfvperf.cli import main
    rid = _rules_study(store)
    assert main(["report", str(rid), "--db", store.url, "--markdown", "-"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# nfvperf report") and "### study rules: zero-loss throughput" in out
    assert main(["report", str(rid), "--db", store.url, "-q", "--plots", str(tmp_path / "p")]) == 0
    assert "plots: 4 files (PNG and SVG) in" in capsys.readouterr().out
    assert (tmp_path / "p" / "study-rules-fps.svg").exists()


def test_compare_in_the_suites_rate_unit(store) -> None:
    """traffic.rate_unit: compare's rate rows in that unit (here % line rate, L1)."""
    from nfvperf.report.compare import compare_many
    runs = []
    for v in (2e6, 3e6):
        rid = new_run(store)
        add_test(store, rid, "t", "throughput", 64, v)
        run = store.load_run(rid)
        run.config = dict(run.config, traffic={"rate_unit": "percent"})
        runs.append(run)
    (row,) = compare_many(runs).rows
    assert row.metric == "% line rate (L1)"
    assert row.values == pytest.approx([units.pct_line_rate(2e6, 64, 10e9), units.pct_line_rate(3e6, 64, 10e9)])
    assert row.ratios[1] == pytest.approx(1.5) and row.flagged[1]


def test_compare_pairs_a_study_unit_with_the_plain_test_of_its_configuration(store) -> None:
    from nfvperf.report.compare import compare_many
    r1, r2 = new_run(store), new_run(store)
    ov = {"ovs": {"pmd_cores": 2}}
    for cores in (1, 2):
        add_test(store, r1, f"x[pmd_cores={cores}]", "throughput", 64, 1e6 * cores,
                 topology=topo_row(overrides={"ovs": {"pmd_cores": cores}}),
                 study={"name": "x", "axes": {"pmd_cores": cores}, "baseline": cores == 1})
    add_test(store, r2, "x-2core", "throughput", 64, 2.2e6, topology=topo_row(overrides=ov))
    cmp = compare_many([store.load_run(r1), store.load_run(r2)])
    (paired,) = [r for r in cmp.rows if r.values[1] is not None]
    assert paired.test == "x[pmd_cores=2]" and paired.ratios[1] == pytest.approx(1.1)
    assert paired.note.startswith("matched by configuration without the study axes")
    assert ("x[pmd_cores=1] 64 B", [2]) in cmp.missing


def test_vxlan_pair_listed_once_when_two_tests_hold_it(store) -> None:
    """seed 004 holds the same VXLAN-vs-plain pair in two studies: the overhead table lists it once."""
    rid = new_run(store)
    add_test(store, rid, "pvp", "throughput", 64, 3.0e6, topology=topo_row("pvp", {"kind": "pvp"}, sw=2))
    for name in ("vxlan-a", "vxlan-b"):
        add_test(store, rid, name, "throughput", 64, 2.4e6,
                 topology=topo_row("vxlan", {"kind": "vxlan", "mtu": 1550}, sw=2), traffic={"vxlan": True})
    (vx,) = [t for t in build(store.load_run(rid)).tables if t.key == "vxlan_overhead"]
    assert vx.rows == [["64", "pvp", "3,000,000", "vxlan-a", "2,400,000", "20.0"]]


def test_numeric_variant_names_plot_as_numbers() -> None:
    """A rules axis written as named variants "64" … "1000000" (rules and flows set together)
    plots on the log scale of a number axis."""
    from nfvperf.report.plots import _axis_value
    assert _axis_value("1000000") == 1_000_000 and _axis_value(" 64") == 64
    assert _axis_value("ht-on") == "ht-on" and _axis_value(8) == 8


def test_skipped_topology_is_named_and_left_out_of_the_header(store) -> None:
    """A unit whose topology the host was too small for: its reason is in "Skipped here", and
    its topology (never built) does not appear in the switching-operations line."""
    env = {"topologies": [{"kind": "p-ovs-p", "skipped": "topology.ovs.pmd_cores: 4 wanted"},
                          {"kind": "p-ovs-p", "switching_operations": 1,
                           "switching_operations_source": "topology"}]}
    rid = new_run(store, env=env)
    t = store.start_test(rid, name="cores[pmd_cores=4]", method="throughput", frame_size_b=64, params={},
                         traffic={}, topology={"kind": "p-ovs-p"}, study={"name": "cores", "axes": {"pmd_cores": 4},
                                                                         "baseline": True})
    store.finish_test(t.id, "skipped", "host too small: topology.ovs.pmd_cores: 4 wanted")
    add_test(store, rid, "cores[pmd_cores=1]", "throughput", 64, 5e5,
             study={"name": "cores", "axes": {"pmd_cores": 1}, "baseline": False})
    data = build(store.load_run(rid))
    (sk,) = [t for t in data.tables if t.key == "skipped"]
    assert sk.rows == [["host too small: topology.ovs.pmd_cores: 4 wanted", "1", "cores[pmd_cores=4] 64 B"]]
    assert dict(data.header)["Switching operations"] == "p-ovs-p: 1 per direction (topology)"


def test_compare_shows_each_runs_harness_ceiling_and_says_which_are_harness_bound(store) -> None:
    """issue 8: compare puts the stored ceiling beside each rate; a harness-bound change is named."""
    from rich.console import Console

    from nfvperf.report.compare import compare_many, render
    runs = []
    for v, ceil in ((2.0e6, 4.0e6), (3.0e6, 3.1e6)):
        rid = new_run(store)
        add_test(store, rid, "t", "throughput", 64, v)
        add_test(store, rid, "lat", "latency", 64, None, data=latency_data(10_000))
        run = store.load_run(rid)
        run.environment = {"harness_ceiling": {"port_kind": None, "per_size": {"64": {"fps": ceil}}}}
        runs.append(run)
    cmp = compare_many(runs)
    rate = next(r for r in cmp.rows if r.test == "t")
    assert rate.ceilings == [4.0e6, 3.1e6] and rate.bounds == ["DUT-bound", "harness-bound"]
    assert rate.harness_bound == [2] and "harness-bound in #2" in rate.note
    lat = next(r for r in cmp.rows if r.test == "lat")
    assert lat.bounds == ["", ""] and "harness" not in lat.note
    buf = io.StringIO()
    render(cmp, Console(file=buf, width=250))
    out = buf.getvalue()
    assert "Harness ceiling fps / bound" in out and "4,000,000 DUT / 3,100,000 harness" in out
    runs[1].environment = {}
    (row,) = [r for r in compare_many(runs).rows if r.test == "t"]
    assert row.bounds == ["DUT-bound", "—"] and not row.harness_bound


def test_host_cpu_steadiness_raises_compare_noise_and_is_in_the_report(store) -> None:
    """A run stores how much its host's CPU speed moved on its own (environment.cpu_steadiness):
    compare does not flag a change smaller than that, and the report prints it with a note."""
    from nfvperf.host.steadiness import summarize
    from nfvperf.report.compare import compare_many
    runs = []
    for v in (3.0e6, 3.6e6):                                   # +20 %
        rid = new_run(store)
        add_test(store, rid, "t", "throughput", 64, v)
        runs.append(store.load_run(rid))
    (row,) = compare_many(runs).rows
    assert row.flagged[1] and "steadiness" not in row.note      # steady (unmeasured) hosts: a change
    runs[1].environment = dict(runs[1].environment or {},
                               cpu_steadiness=summarize({0: [100.0] * 20, 1: [100.0] * 14 + [70.0] * 6}, 2.0))
    (row,) = compare_many(runs).rows
    assert not row.flagged[1] and row.thresholds[1] == pytest.approx(0.30)
    assert "noise = host CPU steadiness" in row.note
    rep = build(runs[1])
    facts = dict(rep.header)
    assert facts["Host CPU steadiness"].startswith("speed moved 30 %")
    assert any("CPU speed moved by 30 %" in n for n in rep.notes)
    assert dict(build(runs[0]).header)["Host CPU steadiness"] == "not measured"


def test_repeat_spreads_are_set_beside_the_hosts_own_noise(store) -> None:
    """A repeated search on a host whose CPU speed moved: the report puts the two spreads side
    by side, and says whether the DUT can be blamed for any of it."""
    from nfvperf.host.steadiness import summarize
    shaky = summarize({0: [100.0] * 20 + [60.0] * 10}, 2.0)          # 40 %
    rid = new_run(store, env={"cpu_steadiness": shaky})
    for size, rr in ((64, 0.38), (512, 0.17)):
        add_test(store, rid, "throughput", "throughput", size, 4e6,
                 data={"throughput_pps": 4e6, "repeat": {"n": 3, "median_pps": 4e6, "min_pps": 3.2e6,
                                                          "max_pps": 3.2e6 * (1 + rr), "relative_range": rr}})
    notes = build(store.load_run(rid)).notes
    (n,) = [n for n in notes if n.startswith("Repeated searches")]
    assert "throughput 64 B 38 %" in n and "throughput 512 B 17 %" in n and "moved by 40 %" in n
    assert "within the host's own noise" in n
    # a spread above the host's: the DUT (or the path) is not excused
    rid2 = new_run(store, env={"cpu_steadiness": shaky})
    add_test(store, rid2, "throughput", "throughput", 64, 4e6,
             data={"throughput_pps": 4e6, "repeat": {"n": 3, "relative_range": 0.6}})
    (n2,) = [n for n in build(store.load_run(rid2)).notes if n.startswith("Repeated searches")]
    assert "not only the host's" in n2
    # a steady host, or no repeat: no such note
    rid3 = new_run(store, env={"cpu_steadiness": summarize({0: [100.0] * 30}, 2.0)})
    add_test(store, rid3, "throughput", "throughput", 64, 4e6,
             data={"throughput_pps": 4e6, "repeat": {"n": 3, "relative_range": 0.3}})
    assert not [n for n in build(store.load_run(rid3)).notes if n.startswith("Repeated searches")]
