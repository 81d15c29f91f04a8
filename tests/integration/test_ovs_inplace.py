"""A running p-ovs-p changes OVS-DPDK settings in place (issue 16 item 1): rx queues 1 -> 2 (the
af_packet vdev is re-created with 2 queue pairs, pmd-rxq-show lists both queues), the rule set
0 -> 1000 -> 0 per direction (dump-aggregate counts it), the EMC insertion probability / SMC
and the PMD mask (a second PMD thread, then the CPU plan's again), each with the same
ovs-vswitchd (no restart) and traffic passing after it."""
from __future__ import annotations

import os

import pytest

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("need_tgen")]

if os.geteuid() != 0 or not os.path.exists("/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"):
    pytest.skip("needs root and openvswitch-switch-dpdk", allow_module_level=True)

from nfvperf.dut.ovs_pmd import parse_pmd_rxq  # noqa: E402
from nfvperf.host.cpu import CpuTopology, cpu_mask  # noqa: E402
from nfvperf.dut.ovs_rules import flow_count  # noqa: E402
from nfvperf.topo import build  # noqa: E402
from nfvperf.topo.base import RestartRequired  # noqa: E402
from nfvperf.topo.spec import TopologySpec  # noqa: E402
from nfvperf.trial import TrafficProfile  # noqa: E402


def _spec(**ovs) -> TopologySpec:
    return TopologySpec(kind="p-ovs-p", port_kind="af_packet", ovs={"socket_mem_mb": 512, **ovs})


def _passes(m) -> None:
    m.measure(0.3, 500)                                   # warm-up: datapath flows, EMC
    res = m.measure(0.5, 1000)
    assert res.valid, res.invalid_reasons
    assert res.sent == res.received == 1000


def _other_config(dut, key: str) -> str:
    return dut.vsctl("get", "Open_vSwitch", ".", f"other_config:{key}", wait=False).strip().strip('"')


def test_rxq_rules_and_emc_change_without_a_restart(run_ctx) -> None:
    with build(_spec(), run_ctx) as topo:
        dut = topo.dut
        pid = dut.pids()["ovs-vswitchd"]
        m = topo.measurer()
        m.set_profile(TrafficProfile(frame_size_b=64, flows_per_port=4, bidirectional=True,
                                     drain_s=0.3, learning=False))
        _passes(m)
        names = [p.name for p in dut.ports]
        assert all(parse_pmd_rxq(dut.pmd_rxq())["ports"][n] == [0] for n in names)

        # rx queues 1 -> 2 (with the af_packet vdev's queue pairs)
        done = topo.reconfigure(_spec(n_rxq=2))
        assert done["changes"] == {"ovs.n_rxq": 2}
        rxq = parse_pmd_rxq(dut.pmd_rxq())
        assert all(rxq["ports"][n] == [0, 1] for n in names), rxq
        for n in names:
            assert dut.vsctl("get", "Interface", n, "options:n_rxq", wait=False).strip('"\n') == "2"
            assert "qpairs=2" in dut.vsctl("get", "Interface", n, "options:dpdk-devargs", wait=False)
        assert [dut.ofport(i) for i in range(len(names))] == [1, 2]
        _passes(m)

        # 1000 IP rules per direction, then back to the in_port cross-connect
        done = topo.reconfigure(_spec(n_rxq=2, rules=1000))
        assert done["dut"]["ovs.rules"]["rule_install"]["installed"] == 2000
        assert flow_count(dut.ofctl("dump-aggregate", dut.bridges[0])) == 2000
        _passes(m)
        topo.reconfigure(_spec(n_rxq=2))
        assert flow_count(dut.ofctl("dump-aggregate", dut.bridges[0])) == 2
        _passes(m)

        # EMC: insert every flow (1), then OVS's default again (key removed)
        topo.reconfigure(_spec(n_rxq=2, emc_insert_inv_prob=1, smc_enable=True))
        assert _other_config(dut, "emc-insert-inv-prob") == "1"
        assert _other_config(dut, "smc-enable") == "true"
        _passes(m)
        topo.reconfigure(_spec(n_rxq=2))
        assert dut.vsctl("--if-exists", "get", "Open_vSwitch", ".",
                         "other_config:emc-insert-inv-prob", wait=False).strip() == ""

        # PMD threads on one more CPU (the mask), then the CPU plan's again (mask unset)
        plan_cpus = list(topo.plan.cpus("dut"))
        more = sorted(plan_cpus + [c for c in CpuTopology.read().allowed if c not in plan_cpus][:1])
        if len(more) > len(plan_cpus):
            done = topo.reconfigure(_spec(n_rxq=2, pmd_cpu_mask=cpu_mask(more)))
            assert done["dut"]["pmd_threads"] == more
            assert sorted(parse_pmd_rxq(dut.pmd_rxq())["pmds"]) == more
            # the stored pinning follows the mask, and the switch says whether the PMD threads
            # now share the generator's CPUs (an interleaved study's unit gets it: nfvperf.runner.rounds)
            gen = set(topo.plan.cpus("tgen"))
            assert topo.environment()["pinning"]["roles"]["dut"] == more
            assert done["generator_cpu_overlap"] == (
                {"cpus": sorted(gen & set(more)), "roles": ["dut"]} if gen & set(more) else {})
            _passes(m)
            done = topo.reconfigure(_spec(n_rxq=2))
            assert sorted(parse_pmd_rxq(dut.pmd_rxq())["pmds"]) == plan_cpus
            assert topo.environment()["pinning"]["roles"]["dut"] == plan_cpus
            assert done["generator_cpu_overlap"] == (
                {"cpus": sorted(gen & set(plan_cpus)), "roles": ["dut"]} if gen & set(plan_cpus) else {})
            assert _other_config(dut, "pmd-cpu-mask") == cpu_mask(plan_cpus)
            _passes(m)

        # what needs a restart is refused, nothing changed
        with pytest.raises(RestartRequired, match="ovs.socket_mem_mb"):
            topo.reconfigure(_spec(n_rxq=2, socket_mem_mb=1024))
        assert dut.pids()["ovs-vswitchd"] == pid               # never restarted
        dut.alive()
        env = topo.environment()
        assert env["spec"]["ovs"]["n_rxq"] == 2
        assert len(env["dut"]["reconfigurations"]) >= 5
