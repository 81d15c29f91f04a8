"""The p2p topology (PHY-PHY): veth ports, testpmd or linux-bridge, tgen; brought up and torn
down without leaving anything (``leak_check``: netns, links, processes, hugepage files)."""
from __future__ import annotations

import shutil

import pytest

import nfvperf.topo as topo_pkg
from nfvperf.host.run import RunContext
from nfvperf.tg.base import DutFailure, TrafficProfile
from nfvperf.topo.spec import TopologySpec

pytestmark = pytest.mark.root

DUTS = ["testpmd", "linux-bridge"]


def _tgen_available() -> bool:
    try:
        from nfvperf.tg.tgen import find_tgen_binary
        find_tgen_binary()
        return True
    except Exception:  # noqa: BLE001
        return False


def _dut_skip(dut):
    if dut == "testpmd" and not shutil.which("dpdk-testpmd"):
        pytest.skip("dpdk-testpmd not installed")


@pytest.mark.parametrize("dut,port_kind,mtu", [("testpmd", "af_packet", 1500),
                                                ("testpmd", "af_xdp", 1500),
                                                ("linux-bridge", "af_packet", 9000)])
def test_p2p_forwards_raw_frames_and_tears_down(dut, port_kind, mtu, tmp_path, leak_check,
                                                raw_port):
    """Without the generator: frames sent on <tag>p0 come out of <tag>p1 through the DUT."""
    _dut_skip(dut)
    run = RunContext(run_dir=tmp_path / "run")
    leak_check.watch(run.tag)
    spec = TopologySpec(kind="p2p", dut=dut, port_kind=port_kind, mtu=mtu)
    with topo_pkg.build(spec, run, start_tgen=False) as t:
        assert t.kind == "p2p" and len(t.ports) == 2
        assert t.switching_operations(True) == t.switching_operations(False) == 1
        p0, p1 = raw_port(t.ports[0].tg_ifname), raw_port(t.ports[1].tg_ifname)
        got = []
        for _ in range(25):          # the DUT's rings (AF_XDP) come up asynchronously
            p0.send(1, sig=b"WARM")
            got = p1.receive(sig=b"WARM", wait_s=0.2, want=1)
            if got:
                break
        assert got, "nothing forwarded"
        before = t.dut_counters()["total"]
        size = min(mtu + 18, 1518) if dut == "testpmd" else mtu + 18
        p0.send(100, sig=b"P2PT", gap_s=0.0005, size_b=size)
        frames = p1.receive(sig=b"P2PT", wait_s=3, want=100)
        assert len(frames) == 100 and len(frames[0]) == size - 4
        after = t.dut_counters()["total"]
        assert after["tx_packets"] - before["tx_packets"] >= 100
        env = t.environment()
        assert env["topology"] == "p2p" and env["dut"]["dut"] == dut
        assert env["cores_shared"] in (True, False) and isinstance(env["warnings"], list)
        assert {c["name"] for c in env["preflight"]} >= {"root", "hugepages"}
        t.dut_alive()
        with pytest.raises(Exception):
            t.measurer()          # no generator in this topology instance


def test_p2p_failed_bring_up_releases_everything(tmp_path, leak_check):
    """A DUT that cannot start (bad lcores) fails the bring-up; nothing stays behind."""
    if not shutil.which("dpdk-testpmd"):
        pytest.skip("dpdk-testpmd not installed")
    run = RunContext(run_dir=tmp_path / "run")
    leak_check.watch(run.tag)
    spec = TopologySpec(kind="p2p", dut="testpmd", testpmd={"lcores": "0@0,1@999"})
    with pytest.raises(DutFailure):
        with topo_pkg.build(spec, run, start_tgen=False):
            pass


def test_wrong_dut_and_jumbo_on_af_packet_are_refused(tmp_path, leak_check):
    run = RunContext(run_dir=tmp_path / "run")
    leak_check.watch(run.tag)
    with pytest.raises(Exception, match="p-ovs-p"):
        with topo_pkg.build(TopologySpec(kind="p2p", dut="ovs-dpdk"), run, start_tgen=False,
                            preflight=False):
            pass
    with pytest.raises(Exception, match="1518"):
        with topo_pkg.build(TopologySpec(kind="p2p", dut="testpmd", mtu=9000), run,
                            start_tgen=False, preflight=False):
            pass


@pytest.mark.skipif(not _tgen_available(), reason="tgen not built (make build)")
@pytest.mark.parametrize("dut", DUTS)
def test_p2p_tgen_trial_counts_match(dut, tmp_path, leak_check):
    _dut_skip(dut)
    run = RunContext(run_dir=tmp_path / "run")
    leak_check.watch(run.tag)
    spec = TopologySpec(kind="p2p", dut=dut)
    with topo_pkg.build(spec, run) as t:
        m = t.measurer()
        m.set_profile(TrafficProfile(frame_size_b=64, bidirectional=True, link_speed_bps=1e9,
                                     latency=True, learning=True, drain_s=0.5))
        d0 = t.dut_counters()["total"]
        r = m.measure(1.0, 2000)
        d1 = t.dut_counters()["total"]
        assert r.sent >= 2 * 2000 * 0.9, r.to_dict()
        assert r.received == r.sent, (r.sent, r.received, r.invalid_reasons)
        assert r.loss_ratio == 0.0
        # the DUT forwarded at least every test frame (plus learning frames)
        assert d1["tx_packets"] - d0["tx_packets"] >= r.received
        env = m.environment()
        assert env["topology"]["dut"]["dut"] == dut
