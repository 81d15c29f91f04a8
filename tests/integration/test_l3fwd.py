"""dut l3fwd on real parts: DPDK's l3fwd example (build/l3fwd/l3fwd, scripts/build-l3fwd.sh)
between tgen's ports on p2p.

* ``nfvperf run`` of a short zero-loss search through l3fwd on vhost (LPM) and memif (exact
  match): each finds a rate above zero, and on the passing trial l3fwd's own counters (read from
  its telemetry socket) equal the generator's, port by port: what tgen sent on a link l3fwd
  received on it, what l3fwd sent tgen received (the RFC 2544 learning frames, which l3fwd sends
  back out of the port they came in on, included on both sides).
* The routes are what forwards: exact-match entries for 10 flows carry 10 of 100 flows' frames
  (the rest go back out of their input port, counted lost), on af_packet.
* Two lcores on vhost: l3fwd sends on one TX queue per lcore, the generator's virtio-user opens
  two queue pairs, and frames cross both.
Nothing is left behind (``leak_check``: processes, hugepage files, runtime dirs, sockets)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_runs import export, run_suite

import nfvperf.topo as topo_pkg
from nfvperf.dut.l3fwd import L3fwd, find_l3fwd
from nfvperf.host.run import RunContext
from nfvperf.topo.spec import TopologySpec
from nfvperf.trial import TrafficProfile

pytestmark = pytest.mark.root


@pytest.fixture(autouse=True)
def _needs_l3fwd_and_tgen(need_tgen):
    try:
        find_l3fwd()
    except FileNotFoundError as e:
        pytest.skip(str(e))


SUITE = """\
name: l3fwd-local
topology: {kind: p2p, dut: l3fwd, ports: 2, port_kind: vhost}
traffic: {frame_sizes: [64], flows_per_port: 100, bidirectional: true, link_speed: 100M}
profile: quick
tests:
  - method: throughput
    name: tput
    trial_duration_s: 0.5
    resolution_pct: 10
    calibrate: false
    study:
      axes:
        variant:
          vhost-lpm: {topology: {port_kind: vhost, l3fwd: {mode: lpm}}}
          memif-em:  {topology: {port_kind: memif, l3fwd: {mode: em}}}
"""


def test_zero_loss_search_through_l3fwd_counts_match_the_generator(tmp_path: Path, leak_check) -> None:
    suite = tmp_path / "l3fwd.yaml"
    suite.write_text(SUITE)
    _, run_id, db = run_suite(suite, tmp_path, leak_check, "--no-ceiling")
    tests = {t["name"]: t for t in export(run_id, db)["tests"]}
    assert set(tests) == {"tput[variant=vhost-lpm]", "tput[variant=memif-em]"}
    for name, t in tests.items():
        assert t["status"] == "passed", (name, t["status"])
        fps = t["results"][0]["value_pps"]
        assert fps > 0, (name, t["results"])
        passing = [tr for tr in t["trials"] if tr["valid"] and tr["loss_ratio"] == 0 and tr["sent"] > 0
                   and tr["load_pps"] == pytest.approx(fps, rel=1e-6)]
        assert passing, (name, [(tr["load_pps"], tr["loss_ratio"]) for tr in t["trials"]])
        tr = passing[-1]
        d = tr["detail"]
        dut, tg = d["dut_counters"], d["tg_counters"]
        assert dut["dut"] == "l3fwd" and dut["scope"] == "trial", dut
        assert tr["received"] == tr["sent"] > 0
        for i in (0, 1):
            phy, gen = dut["ports"][f"phy{i}"], tg[f"port{i}"]["stats"]
            assert phy["rx_packets"] == gen["opackets"], (name, i, phy, gen)     # tgen -> l3fwd
            assert phy["tx_packets"] == gen["ipackets"], (name, i, phy, gen)     # l3fwd -> tgen
            assert phy["rx_dropped"] == phy["tx_dropped"] == 0, phy
        # what is not a test frame is the learning frames, returned on the port they left from
        assert dut["total"]["rx_packets"] == tr["sent"] + d["non_test_rx"]
        assert dut["total"]["tx_packets"] == tr["received"] + d["non_test_rx"]
    env = export(run_id, db)["run"]["environment"]
    duts = [info["environment"]["dut"] for info in env["topologies"] if "environment" in info]
    assert {(e["mode"], e["routes"]["v4"]["rules"]) for e in duts} == {("lpm", 2), ("em", 200)}
    assert all(e["flows"] == 100 and e["ip_version"] == 4 for e in duts)


# the direct trials below send learning frames and wait 0.2 s after them, not RFC 2544's 2 s:
# l3fwd routes by table and learns nothing

def test_exact_match_routes_only_the_flows_they_hold(tmp_path: Path, leak_check) -> None:
    run = RunContext(run_dir=tmp_path / "run")
    leak_check.watch(run.tag)
    spec = TopologySpec(kind="p2p", dut="l3fwd", port_kind="af_packet",
                        l3fwd={"mode": "em", "flows": 10, "ip_version": 4})
    with topo_pkg.build(spec, run) as t:
        assert isinstance(t.dut, L3fwd) and t.dut.rule_files["v4"]["rules"] == 20
        m = t.measurer()
        m.set_profile(TrafficProfile(frame_size_b=64, flows_per_port=10, bidirectional=True,
                                     link_speed_bps=1e9, drain_s=0.3, learning_s=0.2))
        ok = m.measure(0.5, 2000)
        assert ok.sent > 0 and ok.received == ok.sent, (ok.sent, ok.received)
        m.set_profile(TrafficProfile(frame_size_b=64, flows_per_port=100, bidirectional=True,
                                     link_speed_bps=1e9, drain_s=0.3, learning_s=0.2))
        before = t.dut_counters()["ports"]
        r = m.measure(0.5, 2000)
        after = t.dut_counters()["ports"]
        # 10 of 100 flows routed; the others l3fwd sent back out of the port they came in on
        assert 0.05 * r.sent < r.received < 0.2 * r.sent, (r.sent, r.received)
        fwd = sum(after[p]["tx_packets"] - before[p]["tx_packets"] for p in after)
        assert fwd >= r.sent * 0.99, (fwd, r.sent)


def test_two_lcores_on_vhost_send_on_two_queues_the_generator_opened(tmp_path: Path, leak_check) -> None:
    run = RunContext(run_dir=tmp_path / "run")
    leak_check.watch(run.tag)
    spec = L3fwd.fit_traffic(TopologySpec(kind="p2p", dut="l3fwd", port_kind="vhost",
                                          l3fwd={"cores": 2}), _Traffic())
    with topo_pkg.build(spec, run) as t:
        dut = t.dut
        assert isinstance(dut, L3fwd) and dut.lcores == 2
        assert dut.lcore_config() == [(0, 0, 0), (1, 0, 1)]
        # the generator attached during l3fwd's link check (the topology launches l3fwd, starts
        # tgen, then awaits l3fwd's main loop): every link was up when the check ended, instead
        # of l3fwd waiting out its 9 s and starting with its links down
        assert dut.proc is not None
        links = re.findall(r"Port (\d+) Link (\w+)", Path(dut.proc.log_path).read_text())
        assert sorted(links) == [("0", "up"), ("1", "up")], links
        assert all("queues=2" in p.devargs and p.rx_queues == 2 for p in t.tgen_port_specs())
        m = t.measurer()
        m.set_profile(TrafficProfile(frame_size_b=64, flows_per_port=100, bidirectional=True,
                                     link_speed_bps=1e9, drain_s=0.3, learning_s=0.2))
        r = m.measure(1.0, 5000)
        assert r.sent > 0 and r.received == r.sent, (r.sent, r.received)
        assert dut.dpdk_telemetry is not None
        q = {i: dut.dpdk_telemetry.command(f"/ethdev/stats,{i}")["q_opackets"][:2] for i in (0, 1)}
        # lcore 0 polls port 0 and sends to port 1 on TX queue 0; lcore 1 the other way on queue 1
        assert q[1][0] >= r.sent // 2 and q[0][1] >= r.sent // 2, q


class _Traffic:
    flows_per_port, ip_version, vlan, vxlan = 100, 4, None, False
