"""Real OVS-DPDK with the options people say: ``pmd_cores`` resolved to the pmd-cpu-mask OVS
gets (and runs PMD threads on), ``socket_mem`` per NUMA socket as dpdk-socket-mem; traffic
passes with them."""
from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.root

if os.geteuid() != 0 or not os.path.exists("/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"):
    pytest.skip("needs root and openvswitch-switch-dpdk", allow_module_level=True)

from nfvperf.host.cpu import CpuTopology, resolve_cores  # noqa: E402
from nfvperf.trial import TrafficProfile  # noqa: E402
from nfvperf.topo import build  # noqa: E402
from nfvperf.topo.base import TopologyError  # noqa: E402
from nfvperf.topo.spec import TopologySpec  # noqa: E402


@pytest.fixture(autouse=True)
def _need_tgen():
    from nfvperf.tg.tgen import find_tgen_binary
    try:
        find_tgen_binary()
    except FileNotFoundError as e:
        pytest.skip(str(e))


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
        res = m.measure(1.0, 2000)
        assert res.valid, res.invalid_reasons
        assert res.sent == res.received == 4000


def test_more_pmd_cores_than_the_host_fails_before_anything_starts(run_ctx) -> None:
    n = len(CpuTopology.read().physical_cores())
    spec = TopologySpec(kind="p-ovs-p", port_kind="vhost", ovs={"pmd_cores": n + 1})
    with pytest.raises(TopologyError, match=rf"topology.ovs.pmd_cores: {n + 1} wanted .* {n} "
                                            rf"physical core"):
        with build(spec, run_ctx):
            pass
