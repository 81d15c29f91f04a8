"""Reports built from real (simulated) runs: seed-style tables, L1/L2 labels, switching ops,
HTML with embedded plots, compare flags a changed capacity and nothing else."""
from __future__ import annotations

import io
import re

import pytest

from nfvperf import units
from nfvperf.suite_load import validate_suite
from nfvperf.report.compare import compare_runs
from nfvperf.report.html import render_html
from nfvperf.report.tables import build
from nfvperf.report.terminal import print_report
from nfvperf.runner import execute
from nfvperf.store import Store

SUITE = {
    "name": "report-test",
    "topology": {"kind": "p-ovs-p"},
    "traffic": {"frame_sizes": [64, 1518], "link_speed": "10G"},
    "profile": "quick",
    "sim": {"capacity_pps": 4_000_000, "seed": 3},
    "tests": [
        {"method": "throughput", "resolution_pct": 0.5},
        {"method": "latency", "fractions": [0.5, 1.0], "repetitions": 1, "frame_sizes": [64]},
        {"method": "frame_loss_rate", "frame_sizes": [64]},
        {"method": "back_to_back", "frame_sizes": [64], "repetitions": 2},
        {"method": "reset", "frame_sizes": [64], "methods": ["frame_loss", "timestamp"]},
        {"method": "throughput", "name": "tp-pvp", "frame_sizes": [64], "topology": {"kind": "pvp"},
         "resolution_pct": 0.5},
    ],
}


def _run(store: Store, tmp_path, **sim) -> object:
    data = dict(SUITE, sim=dict(SUITE["sim"], **sim))
    out = execute(validate_suite(data), store=store, tg="sim", out_dir=tmp_path, show_progress=False,
                  log=lambda s: None)
    assert out.status == "completed", out.reason
    return store.load_run(out.run_id)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rep")
    store = Store("sqlite:///" + str(tmp / "r.db"))
    a = _run(store, tmp)
    b = _run(store, tmp)                        # same model: no change
    c = _run(store, tmp, capacity_pps=3_000_000)   # 25 % less capacity
    yield a, b, c
    store.close()


def _table(data, key, startswith=""):
    return [t for t in data.tables if t.key == key and t.title.startswith(startswith)]


def test_throughput_table_shape_and_labels(runs) -> None:
    a = runs[0]
    data = build(a)
    (tt,) = _table(data, "throughput", "throughput [p-ovs-p]")
    assert tt.columns[:5] == ["Frame B", "fps / interface", "L1 Mbps / interface", "L2 Mbps / interface",
                              "% line rate (L1)"]
    assert "aggregate fps (×2)" in tt.columns
    assert "per interface (per direction" in tt.note and "× 2 transmitting" in tt.note
    row64 = tt.rows[0]
    fps = float(row64[1].replace(",", ""))
    assert 3.9e6 < fps <= 4.0e6
    assert float(row64[2].replace(",", "")) == pytest.approx(units.l1_bps(fps, 64) / 1e6, abs=0.1)
    assert float(row64[3].replace(",", "")) == pytest.approx(units.l2_bps(fps, 64) / 1e6, abs=0.1)
    assert float(row64[4]) == pytest.approx(units.pct_line_rate(fps, 64, 10e9), abs=0.01)
    assert re.match(r"[\d.]+ / [\d.]+ / [\d.,]+$", row64[7])      # latency from the 100 % point
    row1518 = tt.rows[1]
    assert row1518[4] == "100.00"          # 4 Mfps capacity > line rate at 1518 B


def test_switching_operations(runs) -> None:
    data = build(runs[0])
    (pov,) = _table(data, "switching", "throughput [p-ovs-p]")
    (pvp,) = _table(data, "switching", "tp-pvp [pvp]")
    assert pov.rows[0][2] == "1" and pvp.rows[0][2] == "2"
    agg = float(pvp.rows[0][1].replace(",", ""))
    assert float(pvp.rows[0][3].replace(",", "")) == pytest.approx(2 * agg, abs=1)


def test_goals_latency_loss_summaries(runs) -> None:
    data = build(runs[0])
    assert _table(data, "goals")[0].rows[0][1] == "throughput"
    (lat,) = _table(data, "latency")
    assert [r[1] for r in lat.rows] == ["50 %", "100 %"]
    assert "RFC 1242" in lat.note
    assert _table(data, "latency_pct")
    (loss,) = _table(data, "loss")
    assert loss.rows[0][1] == "100.0" and float(loss.rows[-1][5]) == 0.0
    (b2b,) = _table(data, "back_to_back")
    assert b2b.rows[0][2] == "2"
    (rst,) = _table(data, "reset")
    assert float(rst.rows[0][5]) > 0
    assert any("Deviations from RFC 2544" in n for n in data.notes)


def test_terminal_report(runs) -> None:
    buf = io.StringIO()
    print_report(runs[0], buf)
    text = buf.getvalue()
    for s in ("zero-loss throughput (RFC 2544 §26.1)", "L1 Mbps / interface", "L2 Mbps / interface",
              "% line rate (L1)", "switching performance (seed 000 Table 5-1)", "latency (RFC 2544 §26.2)",
              "frame loss rate (RFC 2544 §26.3)", "back-to-back frames (RFC 9004)", "reset (RFC 6201)",
              "throughput [p-ovs-p]"):
        assert s in text, s


def test_html_self_contained_with_plots(runs) -> None:
    html = render_html(runs[0])
    assert html.count("data:image/png;base64,") == 4
    for h in ("Throughput vs frame size", "Loss vs load", "Latency percentiles", "Latency histogram",
              "Environment", "Suite configuration", "cpu_model", "L1 Mbps / interface"):
        assert h in html
    assert "<script" not in html and 'src="http' not in html


def test_compare_flags_only_real_changes(runs) -> None:
    a, b, c = runs
    same = compare_runs(a, b)
    assert same.rows and not same.flagged
    diff = compare_runs(a, c)
    flagged = {(r.test, r.frame_size_b) for r in diff.flagged}
    assert ("throughput", 64) in flagged and ("tp-pvp", 64) in flagged
    assert ("throughput", 1518) not in flagged      # line rate either way
    r = next(r for r in diff.flagged if r.test == "throughput")
    assert r.delta == pytest.approx(-0.25, abs=0.02) and r.threshold >= 0.02


def test_result_notes_reach_the_report_once_each() -> None:
    from types import SimpleNamespace as NS

    from nfvperf.report.tables import result_notes
    cap = "generator-limited: max load capped at 553,767 fps"
    t64 = NS(name="throughput", frame_size_b=64, results=[
        NS(data={"notes": [cap]}), NS(data={"throughput": {"notes": [cap, "irregular"]}})])
    t512 = NS(name="latency", frame_size_b=512, results=[NS(data={"notes": []})])
    assert result_notes([t64, t512]) == [f"throughput 64 B: {cap}", "throughput 64 B: irregular"]
