"""Real OVS-DPDK with the options people say: ``pmd_cores`` resolved to the pmd-cpu-mask OVS
gets (and runs PMD threads on), ``socket_mem`` per NUMA socket as dpdk-socket-mem; traffic
passes with them."""
from __future__ import annotations

import os

import pytest

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("need_tgen")]

if os.geteuid() != 0 or not os.path.exists("/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"):
    pytest.skip("needs root and openvswitch-switch-dpdk", allow_module_level=True)

from nfvperf.host.cpu import CpuTopology, resolve_cores  # noqa: E402
from nfvperf.trial import TrafficProfile  # noqa: E402
from nfvperf.topo import build  # noqa: E402
from nfvperf.topo.base import TopologyError  # noqa: E402
from nfvperf.topo.spec import TopologySpec  # noqa: E402


def test_pmd_cores_and_socket_mem_reach_ovs(run_ctx) -> None:
    spec = TopologySpec(kind="p-ovs-p", port_kind="vhost", ovs={"pmd_cores": 1, "socket_mem": "512"})
    want = resolve_cores(1, field="topology.ovs.pmd_cores")
    with build(spec, run_ctx) as topo:
        env = topo.environment()
        assert env["cores"]["dut"]["mask"] == want.mask
        assert env["dut"]["pmd_cpu_mask"] == want.mask               # what OVS was given
        assert env["dut"]["other_config"]["dpdk-socket-mem"] == "512"
        # OVS runs one PMD thread, on that CPU
        rxq = topo.dut.pmd_rxq()
        assert f"core_id {want.cpus[0]}:" in rxq and rxq.count("pmd thread") == 1
        m = topo.measurer()
        m.set_profile(TrafficProfile(frame_size_b=64, flows_per_port=4, bidirectional=True,
                                     drain_s=0.5, learning=False))
        m.measure(0.5, 500)                                           # warm-up
        res = m.measure(0.5, 4000)
        assert res.valid, res.invalid_reasons
        assert res.sent == res.received == 4000


def test_more_pmd_cores_than_the_host_fails_before_anything_starts(run_ctx) -> None:
    n = len(CpuTopology.read().physical_cores())
    spec = TopologySpec(kind="p-ovs-p", port_kind="vhost", ovs={"pmd_cores": n + 1})
    with pytest.raises(TopologyError, match=rf"topology.ovs.pmd_cores: {n + 1} wanted .* {n} "
                                            rf"physical core"):
        with build(spec, run_ctx):
            pass


def _profile(vlan=None) -> TrafficProfile:
    return TrafficProfile(frame_size_b=128, flows_per_port=4, bidirectional=True, drain_s=0.5,
                          learning=False, vlan=vlan)


def test_dual_bridge_vlan_translation_rewrites_the_tag(run_ctx) -> None:
    """Seed 003: PHY 0 on one bridge, PHY 1 on another, joined by patch ports; frames enter
    tagged 100, the ingress bridge rewrites the tag to 200 (mod_vlan_vid) and the egress bridge
    forwards only tag 200.  All frames arriving proves the rewrite; a tag that is not
    translated (300) passes nowhere."""
    spec = TopologySpec(kind="p-ovs-p", port_kind="vhost",
                        ovs={"socket_mem_mb": 512, "bridges": 2, "vlan_translate": {100: 200}})
    with build(spec, run_ctx) as topo:
        dut = topo.dut
        assert len(dut.bridges) == 2
        kinds = {p.name: (p.kind, p.bridge) for p in dut.ovs_ports.values()}
        assert sorted(k for k, _ in kinds.values()) == ["dpdkvhostuserclient",
                                                          "dpdkvhostuserclient", "patch", "patch"]
        m = topo.measurer()
        m.set_profile(_profile(vlan=100))
        m.measure(0.5, 500)                                           # warm-up
        res = m.measure(0.5, 4000)
        assert res.valid, res.invalid_reasons
        assert res.sent == res.received == 4000
        for br in dut.bridges:
            flows = {f["match"]: f for f in dut.dump_flows(br)}
            ingress = [f for mt, f in flows.items() if "dl_vlan=100" in mt]
            egress = [f for mt, f in flows.items() if "dl_vlan=200" in mt]
            assert len(ingress) == 1 and "mod_vlan_vid:200" in ingress[0]["actions"]
            assert ingress[0]["n_packets"] >= 2000 and egress[0]["n_packets"] >= 2000
        m.set_profile(_profile(vlan=300))
        res = m.measure(0.5, 2000)
        assert res.sent == 2000 and res.received == 0


def test_single_bridge_vlan_translation_and_plain_dual_bridge(run_ctx) -> None:
    spec = TopologySpec(kind="p-ovs-p", port_kind="vhost",
                        ovs={"socket_mem_mb": 512, "vlan_translate": {100: 200}})
    with build(spec, run_ctx) as topo:
        m = topo.measurer()
        m.set_profile(_profile(vlan=100))
        m.measure(0.5, 500)
        res = m.measure(0.5, 4000)
        assert res.sent == res.received == 4000
        rules = topo.dut.dump_flows()
        assert len(rules) == 2 and all("mod_vlan_vid:200" in f["actions"] for f in rules)
        assert sum(f["n_packets"] for f in rules) >= 4000
    spec = TopologySpec(kind="p-ovs-p", port_kind="vhost", ovs={"socket_mem_mb": 512, "bridges": 2})
    with build(spec, run_ctx) as topo:
        m = topo.measurer()
        m.set_profile(_profile())
        m.measure(0.5, 500)
        res = m.measure(0.5, 4000)
        assert res.valid, res.invalid_reasons
        assert res.sent == res.received == 4000
        counters = topo.dut.counters()["ports"]
        assert counters["phy0"]["rx_packets"] >= 2000 and counters["phy1"]["tx_packets"] >= 2000


def test_pvp_pmd_and_vnf_core_counts(run_ctx) -> None:
    """pmd_cores and testpmd.cores together: each resolves to its own core (here, on a 2-CPU
    host, the VNF's is the housekeeping core, and the environment says so); the container
    VNF's testpmd runs its forwarding lcore there; traffic passes."""
    host = CpuTopology.read()
    if len(host.physical_cores()) < 2:
        pytest.skip("needs 2 physical cores")
    spec = TopologySpec(kind="pvp", port_kind="vhost", ovs={"socket_mem_mb": 512, "pmd_cores": 1},
                        testpmd={"cores": 1})
    with build(spec, run_ctx) as topo:
        env = topo.environment()
        dut, vnf = env["cores"]["dut"], env["cores"]["vnf0"]
        assert len(dut["cpus"]) == len(vnf["cpus"]) == 1 and dut["cpus"] != vnf["cpus"]
        assert env["dut"]["pmd_cpu_mask"] == dut["mask"]
        assert env["vnfs"][0]["lcores"].endswith(f"1@{vnf['cpus'][0]}")
        if len(host.physical_cores()) == 2:
            assert any("housekeeping core" in w for w in env["warnings"])
        m = topo.measurer()
        m.set_profile(TrafficProfile(frame_size_b=64, flows_per_port=4, bidirectional=True,
                                     drain_s=0.5, learning=False))
        m.measure(0.5, 500)
        res = m.measure(0.5, 2000)
        assert res.sent == res.received == 2000
