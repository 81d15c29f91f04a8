"""How the harness ceiling and latency net of it are shown, from stored rows with known numbers:
a ceiling that is only the nominal line rate reads "≥" everywhere (tables, header, HTML, plot,
``nfvperf baseline``, compare) and a result near it is not called harness-bound; with latency net
of the harness, every latency figure of a report is net (throughput and latency tables, study
pivots, percentile plot) or says "gross" (histogram, sizes without a self-latency)."""
from __future__ import annotations

import copy
import io

import pytest

from nfvperf.report import ceiling as hc
from nfvperf.report.html import render_html
from nfvperf.report.plots import (latency_histogram_figure, latency_percentiles_figure, study_figures,
                                  throughput_figure)
from nfvperf.report.tables import build
from nfvperf.store import Store
from nfvperf.trial import TrafficProfile, TrialResult

from _study_runs import add_test, new_run, topo_row

LINE_1518 = TrafficProfile(frame_size_b=1518, link_speed_bps=10e9).max_load_pps     # 812,743.5 fps

# 64 B: a measured limit (3 Mfps); 1518 B: the first trial at line rate passed, a lower bound
CEILING = {"port_kind": "af_packet", "tgen_lcores": "0@0,1@1", "mtu": 1500, "cached": False,
           "measured_at": "2025-01-01T00:00:00Z",
           "per_size": {"64": {"fps": 3_000_000.0, "zero_loss_fps": 2_900_000.0, "line_rate_fps": 14_880_952.4,
                               "at_line_rate": False,
                               "self_latency_ns": {"min": 4_000.0, "p50": 8_000.0, "p99": 15_000.0}},
                        "1518": {"fps": LINE_1518, "zero_loss_fps": LINE_1518, "line_rate_fps": LINE_1518,
                                 "at_line_rate": True,
                                 "self_latency_ns": {"min": 5_000.0, "p50": 9_000.0, "p99": 20_000.0}}}}
ENV = {"harness_ceiling": CEILING, "harness_ceilings": [CEILING]}


def lat_data(min_ns: float, avg_ns: float, max_ns: float) -> dict:
    return {"points": [{"fraction": 1.0, "load_pps": 1e6, "count": 1000, "min_ns": min_ns, "avg_ns": avg_ns,
                        "max_ns": max_ns, "repetitions": 1, "lost": 0,
                        "percentiles_ns": {"50": avg_ns, "99": max_ns - 1_000.0},
                        "histogram": [[min_ns, 10], [avg_ns, 980], [max_ns, 10]]}]}


@pytest.fixture()
def store(tmp_path):
    s = Store("sqlite:///" + str(tmp_path / "s.db"))
    yield s
    s.close()


def _run(store, env=None, tg="tgen"):
    """64 B at 2.9 Mfps (above 90 % of a measured 3 Mfps), 1518 B at line rate and at half of it;
    a latency test at 64 B (10 / 20 / 60 µs) and at 512 B, a size the ceiling has no entry for."""
    rid = new_run(store, env=copy.deepcopy(ENV) if env is None else env, tg=tg)
    add_test(store, rid, "tp", "throughput", 64, 2.9e6)
    add_test(store, rid, "tp", "throughput", 1518, LINE_1518)
    add_test(store, rid, "tp-half", "throughput", 1518, 400_000.0)
    add_test(store, rid, "tp", "throughput", 512, 1e6)
    add_test(store, rid, "lat", "latency", 64, None, data=lat_data(10_000.0, 20_000.0, 60_000.0))
    add_test(store, rid, "lat", "latency", 512, None, data=lat_data(11_000.0, 21_000.0, 61_000.0))
    return rid, store.load_run(rid)


def _table(run, key, title_start="", **kw):
    return next(t for t in build(run, **kw).tables if t.key == key and t.title.startswith(title_start))


def _col(t, start):
    return next(i for i, c in enumerate(t.columns) if c.startswith(start))


# ------------------------------------------------------------------------------ gap A: ≥ line rate

class _Forwarder:
    """Carries ``cap`` fps per interface without loss, drops the rest."""

    def __init__(self, cap: float) -> None:
        self.cap = cap

    def set_profile(self, profile) -> None:
        pass

    def measure(self, duration_s: float, load_pps: float) -> TrialResult:
        exp = round(load_pps * duration_s) * 2
        return TrialResult(duration_s=duration_s, load_pps=load_pps, sent=exp, expected=exp,
                           received=round(min(load_pps, self.cap) * duration_s) * 2)


def test_a_ceiling_at_line_rate_is_stored_as_a_lower_bound() -> None:
    from nfvperf.topo.ceiling import zero_loss_fps
    prof = TrafficProfile(frame_size_b=1518, link_speed_bps=10e9)
    at_line = zero_loss_fps(_Forwarder(1e9), prof)
    assert at_line["fps"] == pytest.approx(LINE_1518) and at_line["at_line_rate"] is True
    below = zero_loss_fps(_Forwarder(500_000), prof)
    assert below["fps"] < LINE_1518 and below["at_line_rate"] is False
    assert hc.is_lower_bound(at_line) and not hc.is_lower_bound(below)


def test_lower_bound_of_entries_stored_before_the_flag() -> None:
    assert hc.is_lower_bound({"fps": 5.0, "zero_loss_fps": 5.0, "line_rate_fps": 5.0})    # first trial passed
    assert not hc.is_lower_bound({"fps": 5.0, "zero_loss_fps": 3.0, "line_rate_fps": 5.0})
    assert not hc.is_lower_bound({"fps": 5.0})                                          # nothing to tell: false
    assert not hc.is_lower_bound({"fps": 5.0, "zero_loss_fps": 5.0, "line_rate_fps": 5.0, "at_line_rate": False})
    assert hc.ceiling_text(LINE_1518, True) == "≥ 812,744" and hc.ceiling_text(LINE_1518) == "812,744"


def test_bound_label_near_a_lower_bound_ceiling() -> None:
    assert hc.bound_label(95.0, 100.0, lower_bound=True) == hc.NEAR_LINE_RATE
    assert hc.bound_label(50.0, 100.0, lower_bound=True) == hc.DUT_BOUND
    assert hc.bound_label(95.0, 100.0) == hc.HARNESS_BOUND


def test_throughput_table_header_and_html_show_the_lower_bound(store) -> None:
    _, run = _run(store)
    tt = _table(run, "throughput", "tp ")
    rows = {r[0]: r for r in tt.rows}
    assert rows["64"][-2:] == ["3,000,000", hc.HARNESS_BOUND]
    assert rows["1,518"][-2:] == ["≥ 812,744", hc.NEAR_LINE_RATE]     # line rate reached: not harness-bound
    half = _table(run, "throughput", "tp-half")
    assert half.rows[0][-2:] == ["≥ 812,744", hc.DUT_BOUND]
    data = build(run)
    assert "1518 B ≥ 812,744 fps" in dict(data.header)["Harness ceiling"]
    (note,) = [n for n in data.notes if n.startswith(f"A throughput marked {hc.NEAR_LINE_RATE}")]
    assert "max load passed" in note and "harness-bound" not in note
    html = render_html(run)
    assert "<td>≥ 812,744</td>" in html and f"<td>{hc.NEAR_LINE_RATE}</td>" in html


def test_bound_notes_read_the_bound_column_when_searches_were_repeated(store) -> None:
    """With --repeat the last column is the repeats' spread, not the bound."""
    rid = new_run(store, env=copy.deepcopy(ENV))
    rep = {"n": 3, "min_pps": 2.8e6, "max_pps": 3.0e6, "relative_range": 0.07}
    add_test(store, rid, "tp", "throughput", 64, 2.9e6, data={"throughput_pps": 2.9e6, "repeat": rep})
    add_test(store, rid, "tp", "throughput", 1518, LINE_1518, data={"throughput_pps": LINE_1518, "repeat": rep})
    data = build(store.load_run(rid))
    tt = next(t for t in data.tables if t.key == "throughput")
    assert tt.columns[-1].startswith("Repeats")
    assert any(n.startswith(f"A throughput marked {hc.HARNESS_BOUND}") for n in data.notes)
    assert any(n.startswith(f"A throughput marked {hc.NEAR_LINE_RATE}") for n in data.notes)


def test_a_run_stored_before_the_flag_still_reads(store) -> None:
    old = copy.deepcopy(CEILING)
    for p in old["per_size"].values():
        del p["at_line_rate"]
    bare = {"64": {"fps": 3_000_000.0}, "1518": {"fps": LINE_1518}}     # no search fields at all
    _, run = _run(store, env={"harness_ceiling": old})
    assert {r[0]: r[-2] for r in _table(run, "throughput", "tp ").rows}["1,518"] == "≥ 812,744"
    _, run = _run(store, env={"harness_ceiling": dict(CEILING, per_size=bare)})
    rows = {r[0]: r for r in _table(run, "throughput", "tp ").rows}
    assert rows["1,518"][-2:] == ["812,744", hc.HARNESS_BOUND]


def test_plot_marks_the_lower_bound(store) -> None:
    _, run = _run(store)
    ax = throughput_figure(run).axes[0]
    (line,) = [ln for ln in ax.get_lines() if ln.get_gid() == "harness-ceiling"]
    assert "≥ at 1518 B" in line.get_label() and "lower bound" in line.get_label()
    (up,) = [ln for ln in ax.get_lines() if ln.get_gid() == "harness-ceiling-lower-bound"]
    assert list(up.get_xdata()) == [1518] and up.get_marker() == "^" and "≥" in up.get_label()
    assert any("≥" in t.get_text() for t in ax.get_legend().get_texts())


def test_baseline_output_shows_the_lower_bound(capsys, tmp_path) -> None:
    from nfvperf.cli import _print_baseline
    from nfvperf.store.ceiling import CeilingCache
    profiles = {s: TrafficProfile(frame_size_b=s, link_speed_bps=10e9) for s in (64, 1518)}
    _print_baseline(copy.deepcopy(CEILING), profiles, CeilingCache(tmp_path / "c.json"))
    out = capsys.readouterr().out
    (l64,) = [ln for ln in out.splitlines() if ln.strip().startswith("64 ")]
    (l1518,) = [ln for ln in out.splitlines() if ln.strip().startswith("1518 ")]
    assert "3,000,000" in l64 and "≥" not in l64
    assert "≥ 812,744" in l1518 and "100.00" in l1518
    assert hc.LOWER_BOUND_NOTE in out


def test_compare_shows_the_lower_bound(store) -> None:
    from rich.console import Console

    from nfvperf.report.compare import compare_many, render
    _, a = _run(store)
    _, b = _run(store)
    cmp = compare_many([a, b])
    buf = io.StringIO()
    render(cmp, Console(file=buf, width=400))
    out = buf.getvalue()
    assert "≥ 812,744 line rate / ≥ 812,744 line rate" in out
    assert "3,000,000 harness / 3,000,000 harness" in out


# ------------------------------------------------------------------------------ gap B: net latency

def test_throughput_table_latency_follows_the_net_option(store) -> None:
    _, run = _run(store)
    gross = _table(run, "throughput", "tp ")
    i = _col(gross, "Latency")
    assert gross.columns[i] == "Latency min/avg/max µs (@ % of Throughput)"
    assert gross.columns[i + 1] == "harness self-latency min/p50/p99 µs"
    assert {r[0]: r[i] for r in gross.rows}["64"] == "10.00 / 20.00 / 60.00"
    assert {r[0]: r[i + 1] for r in gross.rows}["64"] == "4.00 / 8.00 / 15.00"
    net = _table(run, "throughput", "tp ", net_of_harness=True)
    assert net.columns[i].endswith("net of harness self-latency")
    rows = {r[0]: r for r in net.rows}
    assert rows["64"][i] == "6.00 / 12.00 / 52.00"            # min − 4, avg and max − 8
    assert rows["512"][i] == "11.00 / 21.00 / 61.00 (gross)"   # no self-latency at 512 B
    # the suite's option does the same
    run.config = dict(run.config, ceiling={"latency_net_of_harness": True})
    assert {r[0]: r[i] for r in _table(run, "throughput", "tp ").rows}["64"] == "6.00 / 12.00 / 52.00"


def test_latency_table_marks_rows_it_cannot_net(store) -> None:
    _, run = _run(store)
    lt = _table(run, "latency", net_of_harness=True)
    rows = {r[0]: r for r in lt.rows}
    assert rows["64"][1] == "100 %" and rows["64"][5:8] == ["6.00", "12.00", "52.00"]
    assert rows["512"][1] == "100 % (gross)" and rows["512"][5:8] == ["11.00", "21.00", "61.00"]


def test_latency_plots_follow_the_net_option(store) -> None:
    _, run = _run(store)
    gross = latency_percentiles_figure(run).axes[0]
    net = latency_percentiles_figure(run, True).axes[0]
    g64 = next(ln for ln in gross.get_lines() if ln.get_label().startswith("lat 64 B"))
    n64 = next(ln for ln in net.get_lines() if ln.get_label().startswith("lat 64 B"))
    assert list(n64.get_ydata()) == pytest.approx([y - 8.0 for y in g64.get_ydata()])   # µs
    assert "net of harness" in net.get_title() and "net" not in gross.get_title()
    assert any(ln.get_label() == "lat 512 B @100% (gross)" for ln in net.get_lines())
    assert "gross" in latency_histogram_figure(run, True).axes[0].get_title()
    assert "gross" not in latency_histogram_figure(run).axes[0].get_title()
    html = render_html(run, net_of_harness=True)
    assert "<h3>Latency percentiles (net of harness self-latency)</h3>" in html
    assert "<h3>Latency histogram (gross: includes the harness self-latency)</h3>" in html
    assert "<h3>Latency percentiles</h3>" in render_html(run)


def test_study_latency_follows_the_net_option(store) -> None:
    rid = new_run(store, env=copy.deepcopy(ENV))
    for cores, v, lat in ((1, 2e6, 20_000.0), (2, 4e6, 30_000.0)):
        ov = {"ovs": {"pmd_cores": cores}}
        add_test(store, rid, f"tp[pmd_cores={cores}]", "throughput", 64, v, topology=topo_row(overrides=ov),
                 study={"name": "tp", "axes": {"pmd_cores": cores}, "baseline": cores == 1})
        add_test(store, rid, f"lat[pmd_cores={cores}]", "latency", 64, None, topology=topo_row(overrides=ov),
                 study={"name": "lat", "axes": {"pmd_cores": cores}, "baseline": cores == 1},
                 data=lat_data(lat / 2, lat, lat * 3))
    run = store.load_run(rid)

    def pivots(**kw):
        return {t.title: t for t in build(run, **kw).tables if t.key == "study_latency"}

    gross = pivots()
    assert [r[1] for r in gross["study tp: average latency at Throughput, µs (same configuration only)"].rows] \
        == ["20.00", "30.00"]
    net = pivots(net_of_harness=True)
    tp = net["study tp: average latency at Throughput net of harness self-latency, µs (same configuration only)"]
    lat = net["study lat: average latency at Throughput net of harness self-latency, µs"]
    assert [r[1] for r in tp.rows] == ["12.00", "22.00"] and [r[1] for r in lat.rows] == ["12.00", "22.00"]
    (title, _, fig) = next(f for f in study_figures(run, True) if f[0].startswith("Study lat"))
    assert "net of harness" in title
    assert list(fig.axes[0].get_lines()[0].get_ydata()) == pytest.approx([12.0, 22.0])


def test_net_asked_without_a_self_latency_says_gross(store) -> None:
    _, run = _run(store, env={"harness_ceiling_off": "--tg sim: no harness ceiling"}, tg="sim")
    data = build(run, net_of_harness=True)
    assert any("every latency shown is gross" in n for n in data.notes)
    assert not any(n.startswith("Latency is reported net") for n in data.notes)
    lt = next(t for t in data.tables if t.key == "latency")
    assert "net of" not in lt.title
    tt = next(t for t in data.tables if t.key == "throughput")
    assert "harness self-latency min/p50/p99 µs" not in tt.columns          # no harness: no column
    assert "net" not in latency_percentiles_figure(run, True).axes[0].get_title()


def test_cli_report_latency_net_of_harness(store, tmp_path, capsys) -> None:
    from nfvperf.cli import main
    rid, _ = _run(store)
    db = str(tmp_path / "s.db")
    assert main(["report", str(rid), "--db", db, "--markdown", "-"]) == 0
    gross = capsys.readouterr().out
    assert "10.00 / 20.00 / 60.00" in gross and "net of harness" not in gross
    html = tmp_path / "r.html"
    assert main(["report", str(rid), "--db", db, "--markdown", "-", "--latency-net-of-harness",
                 "--html", str(html), "--plots", str(tmp_path / "plots")]) == 0
    net = capsys.readouterr().out
    assert "6.00 / 12.00 / 52.00" in net and "10.00 / 20.00 / 60.00" not in net
    assert "Latency is reported net of the generator's self-latency" in net
    assert "Latency percentiles (net of harness self-latency)" in html.read_text()


def test_cli_run_sim_latency_net_of_harness(tmp_path, capsys) -> None:
    """``nfvperf run --tg sim --latency-net-of-harness``: the sim has no harness, and the report
    says that the latency it shows is gross instead of calling it net."""
    from nfvperf.cli import main
    suite = tmp_path / "suite.yaml"
    suite.write_text("name: net\ntopology: {kind: p-ovs-p}\ntraffic: {frame_sizes: [64]}\nprofile: quick\n"
                     "sim: {capacity_pps: 2000000}\ntests:\n  - {method: throughput, resolution_pct: 1}\n"
                     "  - {method: latency, fractions: [0.5], repetitions: 1}\n")
    assert main(["run", str(suite), "--tg", "sim", "--db", str(tmp_path / "r.db"), "--out", str(tmp_path / "o"),
                 "--no-progress", "--report", "--latency-net-of-harness"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Latency net of the harness was asked for, but this run has no harness self-latency" in out
    assert "(net of harness self-latency)" not in out
