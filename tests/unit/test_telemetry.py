"""Telemetry per trial (issue 28): readings and their per-trial difference, the loss account (its
parts add up to the trial's loss or the rest is unaccounted), "not available" never zero, the
bound's one line, and the comparison's explanation; OVS's pmd-stats-show, dpctl/show and
coverage/show parsed; the report prints the lines (terminal and HTML)."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

from nfvperf.dut.base import DutAdapter
from nfvperf.dut.ovs_pmd import parse_pmd_stats
from nfvperf.dut.ovs_telemetry import datapath_flows, drop_counters, ovs_reading, pmd_reading
from nfvperf.report.explain import comparison_text, differences
from nfvperf.report.html import render_html
from nfvperf.report.tables import build
from nfvperf.report.terminal import print_report
from nfvperf.store import Store
from nfvperf.tg.telemetry import (NA, PMD_FIELDS, PORT_FIELDS, TelemetryProbe, dut_reading, explain_trial,
                                  generator_telemetry, loss_account, loss_text, pmd_summary, telemetry_delta)
from nfvperf.tg.tgen import TgenMeasurer
from nfvperf.trial import TrafficProfile, TrialResult

from tests.unit.test_tgen_client import fake_bin, make_proc  # noqa: F401 (fixture)

PMD_STATS_31 = """pmd thread numa_id 0 core_id 1:
  packets received: 1000
  packet recirculations: 0
  avg. datapath passes per packet: 1.00
  phwol hits: 0
  mfex opt hits: 0
  simple match hits: 990
  emc hits: 5
  smc hits: 0
  megaflow hits: 3
  avg. subtable lookups per megaflow hit: 1.00
  miss with success upcall: 2
  miss with failed upcall: 0
  avg. packets per output batch: 32.00
  idle cycles: 5000 (20.00%)
  processing cycles: 20000 (80.00%)
  avg cycles per packet: 25.00 (25000/1000)
  avg processing cycles per packet: 20.00 (20000/1000)
main thread:
  packets received: 7
"""
# OVS 2.x: no simple match, no HW offload line
PMD_STATS_2X = """pmd thread numa_id 0 core_id 2:
  packets received: 500
  packet recirculations: 0
  emc hits: 100
  smc hits: 0
  megaflow hits: 400
  miss with success upcall: 0
  miss with failed upcall: 0
  idle cycles: 10 (1.00%)
  processing cycles: 990 (99.00%)
"""
DPCTL_SHOW = "netdev@ovs-netdev:\n  lookups: hit:0 missed:0 lost:0\n  flows: 7\n  port 0: ovs-netdev (tap)\n"
COVERAGE = """Event coverage, avg rate over last: 5 seconds, last minute, last hour,  hash=1:
bridge_reconfigure         0.0/sec     0.000/sec        0.0003/sec   total: 3
datapath_drop_upcall_error   0.0/sec     0.000/sec        0.0000/sec   total: 11
drop_action_of_pipeline    0.2/sec     0.000/sec        0.0000/sec   total: 4
85 events never hit
"""


# ------------------------------------------------------------------------------ OVS parsing
def test_ovs_pmd_stats_become_telemetry_fields():
    pmds = pmd_reading(parse_pmd_stats(PMD_STATS_31))
    assert list(pmds) == ["pmd core 1"]                     # the main thread is not a PMD
    c = pmds["pmd core 1"]
    assert set(c) == set(PMD_FIELDS)
    assert (c["packets"], c["simple_match_hits"], c["emc_hits"], c["megaflow_hits"], c["upcalls"],
            c["failed_upcalls"], c["busy_cycles"], c["idle_cycles"]) == (1000, 990, 5, 3, 2, 0, 20000, 5000)


def test_a_counter_this_ovs_does_not_print_is_not_available_not_zero():
    c = pmd_reading(parse_pmd_stats(PMD_STATS_2X))["pmd core 2"]
    assert c["simple_match_hits"] == NA and c["phwol_hits"] == NA
    assert c["emc_hits"] == 100 and c["megaflow_hits"] == 400
    assert pmd_reading({}) == NA                             # kernel datapath: no PMDs at all


def test_datapath_flows_and_drop_counters():
    assert datapath_flows(DPCTL_SHOW) == 7
    assert datapath_flows("") == NA
    assert drop_counters(COVERAGE) == {"datapath_drop_upcall_error": 11, "drop_action_of_pipeline": 4}
    assert drop_counters("85 events never hit\n") == {}        # nothing dropped: 0, known
    assert drop_counters("") == NA
    r = ovs_reading("ovs-dpdk", {"ports": {"p0": {"rx_packets": 3, "tx_dropped": 1}},
                                 "pmd": parse_pmd_stats(PMD_STATS_31)}, DPCTL_SHOW, COVERAGE)
    assert r["datapath_flows"] == 7 and r["drops"]["datapath_drop_upcall_error"] == 11
    # dump-ports has no tx_retries (the Interface statistics are 5 s stale): not available
    assert r["ports"]["p0"]["tx_retries"] == NA and r["ports"]["p0"]["tx_dropped"] == 1


# --------------------------------------------------------------------------------- readings
def test_delta_subtracts_counters_keeps_na_and_gauges():
    before = dut_reading("x", {"p0": {"rx_packets": 10, "tx_dropped": 1}}, datapath_flows=4,
                         pmds={"pmd core 1": {"packets": 100, "emc_hits": NA}})
    after = dut_reading("x", {"p0": {"rx_packets": 25, "tx_dropped": 0}}, datapath_flows=9,
                        pmds={"pmd core 1": {"packets": 160, "emc_hits": NA}})
    d = telemetry_delta(before, after)
    assert d["ports"]["p0"]["rx_packets"] == 15
    assert d["ports"]["p0"]["rx_missed"] == NA                  # never 0
    assert d["pmds"]["pmd core 1"] == {"packets": 60, "emc_hits": NA}
    assert d["datapath_flows"] == {"before": 4, "after": 9}
    assert d["ports"]["p0"]["tx_dropped"] == 0 and d["counters_reset"] == ["ports.p0.tx_dropped"]


def test_probe_reads_around_the_trial_and_keeps_a_failed_read():
    n = {"reads": 0}

    def read():
        n["reads"] += 1
        return {"pmds": NA, "ports": {"p": {"rx_packets": 100 * n["reads"]}}}
    p = TelemetryProbe(read)
    p.before()
    out = p.after()
    assert n["reads"] == 2 and out["ports"]["p"]["rx_packets"] == 100 and out["read_s"] >= 0

    def broken():
        raise OSError("socket gone")
    p = TelemetryProbe(broken)
    p.before()
    assert "socket gone" in p.after()["error"]
    assert TelemetryProbe(None).after() == {"available": NA}


class _Bare(DutAdapter):
    """A DUT that declares nothing beyond the base: port counters only."""

    name = "bare"

    def start(self) -> None:
        self.started = True

    def counters(self) -> dict:
        return {"ports": {"a": {"rx_packets": 5, "tx_packets": 5, "rx_dropped": 0, "tx_dropped": 0,
                                "rx_errors": 0, "tx_errors": 0, "rx_missed": 3}}}

    def alive(self) -> None:
        pass

    def stop(self) -> None:
        pass


def test_a_dut_without_telemetry_gives_not_available(tmp_path):
    from nfvperf.host.run import RunContext
    dut = _Bare(RunContext(tag="ut28", run_dir=tmp_path), None)
    r = dut.telemetry()
    assert r["pmds"] == NA and r["datapath_flows"] == NA and r["drops"] == NA
    assert r["ports"]["a"]["rx_packets"] == 5
    # it has rx_missed in its counters but does not declare it: not available, and never 0
    assert r["ports"]["a"]["rx_missed"] == NA and r["ports"]["a"]["tx_retries"] == NA
    tel = {"dut": telemetry_delta(r, r), "generator": {"intended": 10, "not_sent": 0}}
    assert explain_trial({"telemetry": tel}, "DUT-bound") == "DUT-bound: PMD telemetry not available (bare)"
    assert explain_trial({}, "DUT-bound") == "DUT-bound: telemetry not available"
    assert pmd_summary(tel) is None


# ------------------------------------------------------------------------------ loss account
def _trial(expected, sent, received, dut=None, gen_ports=None, **extra):
    return {"expected": expected, "sent": sent, "received": received, "extra": extra,
            "telemetry": {"dut": dut or {}, "generator": {"ports": gen_ports or {}}}}


@pytest.mark.parametrize("received", [0, 500, 940, 999])
def test_loss_account_adds_up_or_names_the_rest(received):
    dut = {"ports": {"phy0": {"rx_dropped": 10, "tx_dropped": 0}, "vhu1": {"rx_dropped": 0, "tx_dropped": 30}},
           "drops": {"datapath_drop_upcall_error": 5}, "vnfs": {"vnf0": {"ports": {"a": {"rx_dropped": 2,
                                                                                       "tx_dropped": 1}}}}}
    gen = {"port1": {"rx_missed": 4, "rx_nombuf": 0}}
    acc = loss_account(_trial(1000, 990, received, dut, gen, misrouted=1))
    parts = acc["parts"]
    assert parts == {"not_sent": 10, "dut_rx_full": 0, "dut_rx": 10, "dut_inside": 5, "dut_tx": 30, "vnf": 3,
                     "generator_rx": 4, "misrouted": 1}
    assert acc["ports"]["dut_tx"] == {"vhu1": 30} and acc["ports"]["vnf"] == {"vnf0:a": 3}
    located = sum(parts.values())
    assert acc["lost"] == 1000 - received
    if located <= acc["lost"]:
        assert located + acc["unaccounted"] == acc["lost"] and acc["excess"] == 0
    else:                                    # counters saw more than the test's frames
        assert acc["unaccounted"] == 0 and acc["excess"] == located - acc["lost"]
        assert "counters exceed the loss" in loss_text(acc)


def test_loss_account_without_counters_says_unaccounted_and_what_is_missing():
    acc = loss_account(_trial(1000, 1000, 900))
    assert acc["unaccounted"] == 100
    text = loss_text(acc)
    assert text.startswith("100 lost: 100 % unaccounted")
    assert "not available: missed at the DUT's RX" in text and "missed at the generator's RX" in text
    assert loss_account(_trial(1000, 1000, 1000)) is None and loss_text(None) == "no loss"


def test_frames_a_full_vhost_ring_held_back_are_the_duts():
    acc = loss_account(_trial(1000, 400, 400, backpressure=True))
    assert acc["parts"]["not_sent"] == 0 and acc["parts"]["dut_rx_full"] == 600
    assert "60 %" not in loss_text(acc) and "100 % held back by the DUT's full RX ring" in loss_text(acc)
    assert loss_account(_trial(1000, 400, 400))["parts"]["not_sent"] == 600


def test_loss_text_names_the_port():
    dut = {"ports": {"phy0": {"rx_dropped": 0, "tx_dropped": 0}, "vhu-vnf": {"rx_dropped": 0, "tx_dropped": 900}}}
    assert "90 % dropped at the DUT's TX (vhu-vnf)" in loss_text(loss_account(_trial(1000, 1000, 0, dut)))


# ----------------------------------------------------------------------------- bound's line
def _pmd_tel(packets, busy, idle, **hits):
    c = {f: 0 for f in PMD_FIELDS}
    c.update(packets=packets, busy_cycles=busy, idle_cycles=idle, **hits)
    return {"dut": {"adapter": "ovs-dpdk", "pmds": {"pmd core 1": c}, "datapath_flows": {"before": 1, "after": 2}},
            "generator": {"intended": packets, "not_sent": 0}}


def test_dut_bound_line_from_pmd_counters():
    tel = _pmd_tel(1000, 212_000, 0, simple_match_hits=990, emc_hits=10)
    line = explain_trial({"telemetry": tel}, "DUT-bound")
    assert line == "DUT-bound: PMD core 1 100 % busy, 212 cycles/packet, 99 % simple match, 1 % EMC, 2 datapath flows"


def test_harness_bound_line_names_the_generators_cause():
    gen = generator_telemetry({"streams": [{"tx_retries": 50, "tx_nombuf": 0}], "pacer_late_max_ns": 20000},
                              sent=970, expected=1000, not_sent_at_tx=0)
    line = explain_trial({"telemetry": {"dut": {}, "generator": gen}}, "DUT-bound")
    assert line.startswith("harness-bound: tgen: 3.0 % of frames not sent, TX ring full 50 times")
    assert "lcore busy share not available" in line
    # a tgen that reports its workers: the busiest TX lcore's share, RX-only lcores left out
    gen = generator_telemetry({"streams": [{"tx_retries": 0}], "workers": [
        {"lcore": 1, "tx": True, "rx": True, "busy_share": 0.62}, {"lcore": 2, "tx": True, "rx": False, "busy_share": 0.998},
        {"lcore": 3, "tx": False, "rx": True, "busy_share": 1.0}, {"lcore": 4, "tx": True, "busy_share": None}]},
        sent=970, expected=1000, not_sent_at_tx=0)
    assert gen["lcore_busy"] == 0.998 and set(gen["lcores"]) == {"lcore 1", "lcore 2", "lcore 3"}
    assert explain_trial({"telemetry": {"dut": {}, "generator": gen}}, "—") == \
        "harness-bound: tgen: 3.0 % of frames not sent, TX lcore 100 % busy"
    # held back by a full DUT ring: the DUT's bound, not the generator's
    held = generator_telemetry({"streams": []}, sent=970, expected=1000, not_sent_at_tx=0, held_back=True)
    tel = _pmd_tel(970, 100, 0, emc_hits=970)
    tel["generator"] = held
    assert explain_trial({"telemetry": tel}, "—").startswith("DUT-bound: PMD core 1 100 % busy")


# ------------------------------------------------------------------------------ comparisons
def test_comparison_names_the_counters_that_differ_most():
    a = {"share:emc_hits": 0.02, "share:megaflow_hits": 0.9, "share:upcalls": 0.08, "cycles_per_packet": 310.0}
    b = {"share:emc_hits": 0.99, "share:megaflow_hits": 0.01, "share:upcalls": 0.0, "cycles_per_packet": 180.0}
    text = comparison_text("flows=100000", "flows=1", a, b)
    assert text == "flows=100000 vs flows=1: EMC hits 2 % vs 99 %, megaflow hits 90 % vs 1 %, cycles/packet 310 vs 180"
    assert differences(a, b)[0] == (pytest.approx(0.97), "share:emc_hits")


def test_comparison_without_a_difference_says_why():
    a = {"share:simple_match_hits": 0.995, "cycles_per_packet": 250.0}
    b = {"share:simple_match_hits": 0.996, "cycles_per_packet": 245.0}
    text = comparison_text("flows=100000", "flows=1", a, b)
    assert text == ("flows=100000 vs flows=1: no counter differs by 5 % or more "
                    "(simple match hits 99.5 % vs 99.6 %, cycles/packet 250 vs 245)")
    assert comparison_text("a", "b", {}, b) == "a vs b: telemetry not available"


# ------------------------------------------------------------------------ measurer and report
def test_measurer_reads_telemetry_around_each_trial_and_stores_it(fake_bin: Path, tmp_path: Path):  # noqa: F811
    state = {"n": 0}

    def telemetry():
        state["n"] += 1
        return dut_reading("fake", {"p0": {"rx_packets": 100 * state["n"], "tx_dropped": 0}},
                           pmds={"pmd core 1": {f: 10 * state["n"] for f in PMD_FIELDS}})
    with make_proc(fake_bin, tmp_path) as proc:
        m = TgenMeasurer(proc, [(0, 1)], dut_telemetry=telemetry)
        m.set_profile(TrafficProfile(learning=False, drain_s=0.05))
        r = m.measure(0.2, 1000)
        assert state["n"] == 2
        tel = r.to_dict()["telemetry"]
        assert tel["dut"]["ports"]["p0"]["rx_packets"] == 100 and tel["dut"]["pmds"]["pmd core 1"]["packets"] == 10
        assert tel["generator"]["intended"] == r.expected and tel["generator"]["lcore_busy"] == NA
        assert set(PORT_FIELDS) <= set(tel["dut"]["ports"]["p0"])
        m.telemetry_enabled = False          # off (bench/telemetry_cost.py): no reads, marked so
        r2 = m.measure(0.2, 1000)
        assert state["n"] == 2 and r2.telemetry["dut"] == {"available": NA}


def _stored_study(store: Store) -> int:
    run = store.create_run(suite="t28", suite_path=None, topology="p-ovs-p", dut="ovs-dpdk", tg="tgen",
                           profile="quick", config={"topology": {"kind": "p-ovs-p", "dut": "ovs-dpdk"},
                                                    "traffic": {"link_speed": "40G"}}, environment={})
    prof = TrafficProfile(frame_size_b=64, link_speed_bps=40e9).to_dict()
    for flows, fps, tel in ((1, 1_000_000, _pmd_tel(1000, 180_000, 0, emc_hits=990, megaflow_hits=10)),
                            (100000, 600_000, _pmd_tel(1000, 310_000, 0, emc_hits=20, megaflow_hits=900,
                                                       upcalls=80))):
        t = store.start_test(run.id, name=f"flows[flows={flows}]", method="throughput", frame_size_b=64,
                             params={}, traffic=prof, topology={"kind": "p-ovs-p", "port_kind": "vhost"},
                             study={"name": "flows", "axes": {"flows": flows}, "baseline": flows == 1})
        for load, recv in ((fps, 2000), (fps * 1.1, 1900)):
            gen = dict(tel["generator"], intervals={"interval_ms": 100.0, "sent": [1000, 1000],
                                                    "received": [1000, recv - 1000], "lost": [0, 2000 - recv]})
            tr = TrialResult(duration_s=1, load_pps=load, sent=2000, received=recv, expected=2000,
                             telemetry=dict(tel, generator=gen))
            store.add_trial(t.id, tr, {"phase": "search"})
        store.add_result(t.id, "throughput", {"throughput_pps": fps}, value_pps=fps)
        store.finish_test(t.id, "passed")
    store.finish_run(run.id, "completed")
    return run.id


def test_report_prints_the_bound_loss_and_comparison_lines(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    run = store.load_run(_stored_study(store))
    data = build(run)
    why = next(t for t in data.tables if t.key == "why")
    assert [r[3] for r in why.rows] == [
        "DUT-bound: PMD core 1 100 % busy, 180 cycles/packet, 99 % EMC, 1 % megaflow, 2 datapath flows",
        "DUT-bound: PMD core 1 100 % busy, 310 cycles/packet, 90 % megaflow, 8 % upcalls, 2 % EMC, 2 datapath flows"]
    assert why.rows[0][4].startswith("at 1,100,000 fps: 100 lost: 100 % unaccounted")
    cmp = next(t for t in data.tables if t.key == "explained")
    assert cmp.rows == [["flows", "64", "0.60×", "flows=100000 vs flows=1: EMC hits 2 % vs 99 %, megaflow hits "
                                                 "90 % vs 1 %, cycles/packet 310 vs 180"]]
    out = io.StringIO()
    print_report(run, out)
    text = out.getvalue()
    assert "flows=100000 vs flows=1: EMC hits 2 % vs 99 %" in text and "180 cycles/packet" in text
    html = render_html(run)
    assert "flows=100000 vs flows=1: EMC hits 2 % vs 99 %" in html and "310 cycles/packet" in html
    assert "Loss over time" in html              # the trials carry tgen's intervals (loss over time)
    store.close()
