"""``topology.tgen_cores: 2`` through real DUTs on vhost ports with 2 queues: tgen gets 2 worker
lcores and 2 TX / 2 RX queues per port (virtio-user ``queues=2``), each direction is split over
both TX queues, and the frames come back over the DUT's queues: testpmd with 2 RX/TX queues per
port, OVS-DPDK with ``n_rxq: 2``.  Every frame is accounted (no false loss below capacity), the
DUT's counters agree, and the result names the cores each direction used."""
from __future__ import annotations

import os
import shutil

import pytest

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("need_tgen")]

if os.geteuid() != 0:
    pytest.skip("needs root", allow_module_level=True)

from nfvperf.topo import build  # noqa: E402
from nfvperf.topo.spec import TopologySpec  # noqa: E402
from nfvperf.trial import TrafficProfile  # noqa: E402

HAVE_OVS = os.path.exists("/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk")
HAVE_TESTPMD = bool(shutil.which("dpdk-testpmd"))


def _spec(dut: str) -> TopologySpec:
    if dut == "testpmd":
        if not HAVE_TESTPMD:
            pytest.skip("dpdk-testpmd not installed")
        return TopologySpec(kind="p2p", dut="testpmd", port_kind="vhost", tgen_cores=2,
                            testpmd={"queues": 2})
    if not HAVE_OVS:
        pytest.skip("openvswitch-switch-dpdk not installed")
    return TopologySpec(kind="p-ovs-p", port_kind="vhost", tgen_cores=2,
                        ovs={"socket_mem_mb": 512, "n_rxq": 2})


@pytest.mark.parametrize("dut", ["testpmd", "ovs-dpdk"])
def test_tgen_cores_multiqueue_every_frame_accounted(run_ctx, dut) -> None:
    with build(_spec(dut), run_ctx) as topo:
        listed = topo.tgen.rpc("ports.list")
        assert [(p["txq"], p["rxq"]) for p in listed] == [(2, 2), (2, 2)], listed
        assert all(p["tx_lcores"] == [1, 2] for p in listed), listed
        assert any("queues=2" in a for a in topo.tgen.argv_used), topo.tgen.argv_used
        m = topo.measurer()
        m.set_profile(TrafficProfile(frame_size_b=64, flows_per_port=256, bidirectional=True,
                                     drain_s=0.5, learning=False))
        assert m.split_n == 2 and len(m.stream_ids) == 4
        m.measure(0.2, 2000)             # warm-up, as the searches do (vhost start-up, flows)
        load = 10_000
        res = m.measure(1.0, load)
        assert res.valid, res.invalid_reasons
        assert [s.name for s in res.streams] == ["p0->p1", "p1->p0"]
        for s in res.streams:
            assert s.sent == pytest.approx(load, abs=2) and s.received == s.sent, s
            assert s.lost == 0 and s.duplicates == 0, s
            assert s.latency is not None and s.latency.count == s.received
        assert res.expected == res.sent == res.received
        # the DUT forwarded every frame both ways
        after = res.dut_counters
        for i in (0, 1):
            st = res.tg_counters[f"port{i}"]["stats"]
            assert after["ports"][f"phy{i}"]["rx_packets"] == st["opackets"]
            assert after["ports"][f"phy{i}"]["tx_packets"] == st["ipackets"]
        # the result names the cores: each direction on both worker lcores, and their CPUs
        cores = res.extra["tgen_cores"]
        assert cores["cores"] == 2 and cores["sub_streams"] == 2, cores
        plan_cpus = topo.plan.cpus("tgen") if topo.tg_plan is None else topo.tg_plan.cpus("tgen")
        for name in ("p0->p1", "p1->p0"):
            d = cores["directions"][name]
            assert d["tx_lcores"] == [1, 2] and d["tx_queues"] == [0, 1], d
            assert d["tx_cpus"] == sorted(plan_cpus), (d, plan_cpus)
            assert d["rx_lcores"] == [1, 2], d
        env = m.environment()
        assert env["tgen_cores"]["directions"]["p0->p1"]["tx_lcores"] == [1, 2]


def test_tgen_cores_multiqueue_with_bonds_receives_each_group_on_one_lcore(run_ctx) -> None:
    """OVS bonds (seed 003): each side's generator ports are a receive group, which one lcore
    must poll (PROTOCOL.md §4): with tgen_cores: 2 the TX side is split over both workers and every
    RX queue goes to the first (--rx-lcores 1); every frame still accounted over the members."""
    if not HAVE_OVS:
        pytest.skip("openvswitch-switch-dpdk not installed")
    spec = TopologySpec(kind="p-ovs-p", port_kind="vhost", ports=4, tgen_cores=2,
                        ovs={"socket_mem_mb": 512, "bond_mode": "balance-slb"})
    with build(spec, run_ctx) as topo:
        assert topo.rx_groups() == [[0, 2], [1, 3]]
        assert "--rx-lcores" in topo.tgen.argv_used
        listed = topo.tgen.rpc("ports.list")
        assert all(p["tx_lcores"] == [1, 2] and p["rx_lcores"] == [1, 1] for p in listed), listed
        m = topo.measurer()
        m.set_profile(TrafficProfile(frame_size_b=64, flows_per_port=256, bidirectional=True,
                                     drain_s=0.3, learning=True, learning_s=0.3))
        assert m.split_n == 2 and len(m.stream_ids) == 8
        m.measure(0.2, 2000)
        r = m.measure(0.5, 4000)
        assert r.valid, r.invalid_reasons
        assert len(r.streams) == 4 and r.received == r.sent == 4 * 2000, r.to_dict()
        for s in r.streams:
            assert s.lost == 0 and s.misrouted == 0 and s.duplicates == 0, s
            assert len(s.rx_ports) == 2 and sum(s.rx_by_port.values()) == s.received, s
