"""Core counts as people say them (``pmd_cores: 2, ht: true``) resolved from a sibling map; the
per-socket ``socket_mem``; ``nfvperf calc pmd-mask --cores/--mask``."""
from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from nfvperf.cli import main
from nfvperf.suite_load import validate_suite
from nfvperf.dut.ovs_dpdk import OvsDpdk
from nfvperf.dut.ovs_spec import OvsSpec
from nfvperf.host.cpu import (CoreRequestError, CpuTopology, cpu_mask, plan_pinning,
                              resolve_cores)
from nfvperf.host.run import RunContext
from nfvperf.topo import build
from nfvperf.topo.base import TopologyError
from nfvperf.topo.spec import TopologySpec

# 2 sockets x 4 cores x 2 threads; CPU i and i+8 are siblings; socket 1 = cores 4-7
SIBLINGS = {i: [i % 8, i % 8 + 8] for i in range(16)}
NODES = {i: 0 if i % 8 < 4 else 1 for i in range(16)}


@pytest.fixture
def fake() -> CpuTopology:
    return CpuTopology.from_siblings(SIBLINGS, NODES)


@pytest.fixture
def fake_sysfs(tmp_path: Path) -> Path:
    """A copy of /sys/devices/system/cpu with the 2 x 4 x 2 sibling map."""
    root = tmp_path / "cpu"
    (root).mkdir()
    (root / "online").write_text("0-15\n")
    for c in range(16):
        t = root / f"cpu{c}" / "topology"
        t.mkdir(parents=True)
        (t / "thread_siblings_list").write_text(f"{c % 8},{c % 8 + 8}\n")
        (t / "core_id").write_text(f"{c % 8}\n")
        (t / "physical_package_id").write_text(f"{NODES[c]}\n")
        (root / f"cpu{c}" / f"node{NODES[c]}").mkdir()
    return root


def test_sysfs_copy_reads_as_the_fake_map(fake_sysfs: Path, fake: CpuTopology) -> None:
    t = CpuTopology.read(fake_sysfs)
    assert t.physical_cores() == fake.physical_cores() == [[i, i + 8] for i in range(8)]
    assert t.threads_per_core() == 2 and t.nodes() == [0, 1]
    assert t.allowed == list(range(16))          # not this process's affinity


def test_one_thread_per_core_skips_core_0(fake: CpuTopology) -> None:
    r = resolve_cores(1, topo=fake, field="topology.ovs.pmd_cores")
    assert r.cpus == [1] and r.mask == "0x2" and not r.warnings
    r = resolve_cores(2, topo=fake)
    assert r.cpus == [1, 2] and r.mask == "0x6"
    assert r.siblings[0] == "CPU 1 (node 0, siblings 1,9: sibling(s) 9 unused)"
    # socket 0 first (cores 1-3), then socket 1: never the housekeeping core 0 or its sibling 8
    assert resolve_cores(4, topo=fake).cpus == [1, 2, 3, 4]


def test_ht_takes_both_siblings(fake: CpuTopology) -> None:
    """Seed 000 §10.3 '2 physical cores, 4 PMDs': both threads of two cores."""
    r = resolve_cores(2, True, topo=fake, field="topology.ovs.pmd_cores")
    assert r.cpus == [1, 2, 9, 10] and r.mask == "0x606" and r.threads == 4
    assert r.siblings == ["CPU 1,9 (node 0, siblings 1,9: both threads)",
                          "CPU 2,10 (node 0, siblings 2,10: both threads)"]
    assert r.to_dict()["cpu_list"] == "1-2,9-10"


def test_numa_node_and_exclusions(fake: CpuTopology) -> None:
    assert resolve_cores(2, topo=fake, numa_node=1).cpus == [4, 5]
    first = resolve_cores(2, True, topo=fake)
    second = resolve_cores(2, topo=fake, exclude=first.cpus)
    assert second.cpus == [3, 4] and not set(first.cpus) & set(second.cpus)


def test_housekeeping_core_only_when_nothing_else(fake: CpuTopology) -> None:
    r = resolve_cores(8, topo=fake, field="topology.ovs.pmd_cores")
    assert 0 in r.cpus and len(r.cpus) == 8
    assert "housekeeping core (CPU 0" in r.warnings[0] and "topology.ovs.pmd_cores" in r.warnings[0]
    r = resolve_cores(7, topo=fake)
    assert 0 not in r.cpus and not r.warnings


def test_too_many_cores_names_field_and_host(fake: CpuTopology) -> None:
    with pytest.raises(CoreRequestError) as ei:
        resolve_cores(9, topo=fake, field="topology.ovs.pmd_cores")
    msg = str(ei.value)
    assert msg.startswith("topology.ovs.pmd_cores: 9 wanted")
    assert "8 physical core(s) × 2 thread(s)" in msg and "lower topology.ovs.pmd_cores" in msg
    with pytest.raises(CoreRequestError, match="4 usable.*already taken"):
        resolve_cores(5, topo=fake, exclude=[1, 2, 3, 4])
    with pytest.raises(CoreRequestError, match="at least 1"):
        resolve_cores(0, topo=fake)


def test_ht_without_hyperthreads_names_the_ht_field() -> None:
    flat = CpuTopology.from_siblings({i: [i] for i in range(4)})
    with pytest.raises(CoreRequestError) as ei:
        resolve_cores(1, True, topo=flat, field="topology.ovs.pmd_cores")
    assert str(ei.value).startswith("topology.ovs.ht: true uses both hyper-threads")
    assert "no hyper-threading" in str(ei.value)


def test_real_host_topology() -> None:
    """This host's own sibling map: a count up to its cores resolves, one more fails clearly."""
    host = CpuTopology.read()
    n = len(host.physical_cores())
    r = resolve_cores(n, topo=host, field="topology.ovs.pmd_cores")
    assert len(r.cpus) == n and r.mask == cpu_mask(r.cpus)
    assert all(c in host.cpus for c in r.cpus)
    if n > 1:
        assert host.allowed[0] not in resolve_cores(1, topo=host).cpus   # not the housekeeping CPU
    with pytest.raises(CoreRequestError, match=f"{n + 1} wanted.*{n} physical core"):
        resolve_cores(n + 1, topo=host, field="topology.ovs.pmd_cores")


def test_plan_keeps_fixed_roles_apart(fake: CpuTopology) -> None:
    dut = resolve_cores(2, True, topo=fake, field="topology.ovs.pmd_cores")
    plan = plan_pinning({"dut": 1, "vnf0": 1, "tgen": 1}, fake, fixed={"dut": dut})
    assert plan.roles["dut"] == [1, 2, 9, 10]
    others = plan.roles["vnf0"] + plan.roles["tgen"]
    assert not set(others) & set(dut.cpus) and 0 not in others
    assert not plan.cores_shared and plan.resolved["dut"]["mask"] == "0x606"


# ------------------------------------------------------------------ options model
def test_ovs_spec_core_options() -> None:
    s = OvsSpec(pmd_cores=2, ht=True)
    assert s.pmd_threads() == 4
    assert OvsSpec(pmd_cpu_mask="0x30000c").pmd_threads() == 4
    assert OvsSpec().pmd_threads() is None
    with pytest.raises(ValidationError, match="give pmd_cores .* or pmd_cpu_mask"):
        OvsSpec(pmd_cores=2, pmd_cpu_mask="0xc")
    with pytest.raises(ValidationError, match="ht: true applies to pmd_cores"):
        OvsSpec(ht=True)
    with pytest.raises(ValidationError):
        OvsSpec(pmd_cores=0)
    req = OvsDpdk.core_request(TopologySpec(ovs={"pmd_cores": 2, "ht": True}))
    assert req is not None and (req.field, req.cores, req.ht) == ("topology.ovs.pmd_cores", 2, True)
    assert OvsDpdk.core_request(TopologySpec()) is None
    assert "2 PMD cores (4 threads, HT)" in OvsDpdk.describe_options({"pmd_cores": 2, "ht": True})


def test_socket_mem_per_socket() -> None:
    """Seed 003: dpdk-socket-mem=11264,1024 (MB on socket 0, socket 1)."""
    for given in ("11264,1024", [11264, 1024], "11264, 1024"):
        s = OvsSpec(socket_mem=given)
        assert s.socket_mem == [11264, 1024] and s.dpdk_socket_mem() == "11264,1024"
    assert OvsSpec(socket_mem=2048).dpdk_socket_mem() == "2048"
    assert OvsSpec(socket_mem_mb=512).dpdk_socket_mem() == "512"       # the old option still works
    assert OvsDpdk.hugepage_demand_mb(TopologySpec(ovs={"socket_mem": "1024,512"})) == 1536
    with pytest.raises(ValidationError, match="MB per NUMA socket"):
        OvsSpec(socket_mem="lots")
    with pytest.raises(ValidationError, match="at least one > 0"):
        OvsSpec(socket_mem="0,0")
    with pytest.raises(ValidationError, match="give socket_mem .* or socket_mem_mb"):
        OvsSpec(socket_mem="1024,1024", socket_mem_mb=4096)


def test_testpmd_and_tgen_core_options() -> None:
    with pytest.raises(ValidationError, match="give cores .* or lcores"):
        TopologySpec(testpmd={"cores": 2, "lcores": "0@0,1@1"})
    with pytest.raises(ValidationError, match="give tgen_cores .* or tgen_lcores"):
        TopologySpec(tgen_cores=1, tgen_lcores="0@0,1@1")
    with pytest.raises(ValidationError, match="tgen_ht: true applies to tgen_cores"):
        TopologySpec(tgen_ht=True)


def _suite(topology: dict, tests: list) -> dict:
    return {"name": "t", "topology": topology, "traffic": {"frame_sizes": [64]}, "tests": tests}


def test_test_override_replaces_the_suites_other_way() -> None:
    """A suite with a raw mask, a test (or study unit) with pmd_cores: the count replaces the
    mask instead of being refused as 'both'; the same for socket_mem / socket_mem_mb."""
    s = validate_suite(_suite(
        {"kind": "p-ovs-p", "ovs": {"pmd_cpu_mask": "0x4", "socket_mem_mb": 2048}},
        [{"method": "throughput", "name": "a", "topology": {"ovs": {"pmd_cores": 2, "ht": True}}},
         {"method": "throughput", "name": "b", "topology": {"ovs": {"socket_mem": "1024,1024"}}},
         {"method": "throughput", "name": "c"}]))
    a, b, c = (t.topology.ovs for t in s.tests)
    assert a.pmd_cores == 2 and a.ht and a.pmd_cpu_mask is None and a.socket_mem_mb == 2048
    assert b.socket_mem == [1024, 1024] and b.pmd_cpu_mask == "0x4"
    assert c.pmd_cpu_mask == "0x4" and c.pmd_cores is None


# ------------------------------------------------------------------ topology build
def test_topology_resolves_counts_when_built(fake: CpuTopology, tmp_path: Path) -> None:
    spec = TopologySpec(kind="pvp", ovs={"pmd_cores": 2, "ht": True}, testpmd={"cores": 1},
                        tgen_cores=1)
    topo = build(spec, RunContext("cores0", tmp_path), preflight=False)
    plan = topo.plan_cpus(fake)
    assert plan.roles["dut"] == [1, 2, 9, 10]          # pmd-cpu-mask 0x606
    assert plan.roles["vnf0"] == [3] and plan.roles["tgen"] == [4]
    topo.plan = plan
    env = topo.environment()
    assert env["cores"]["dut"]["mask"] == "0x606" and env["cores"]["dut"]["field"] == \
        "topology.ovs.pmd_cores"
    assert env["cores"]["vnf0"]["field"] == "topology.testpmd.cores"


def test_topology_refuses_more_cores_than_the_host_has(tmp_path: Path) -> None:
    """On the real host: one core more than it has is a TopologyError naming the option (a
    `--tg sim` run builds no topology and never gets here)."""
    n = len(CpuTopology.read().physical_cores())
    spec = TopologySpec(kind="p-ovs-p", ovs={"pmd_cores": n + 1})
    topo = build(spec, RunContext("cores1", tmp_path), preflight=False)
    with pytest.raises(TopologyError, match=rf"topology.ovs.pmd_cores: {n + 1} wanted"):
        topo.plan_cpus()
    fake16 = CpuTopology.from_siblings(SIBLINGS, NODES)
    assert len(topo.plan_cpus(fake16).roles["dut"]) == n + 1


# ------------------------------------------------------------------ calc pmd-mask
def test_calc_pmd_mask_cores(fake_sysfs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calc", "pmd-mask", "--cores", "2", "--ht", "--sysfs", str(fake_sysfs)]) == 0
    out = capsys.readouterr().out
    assert "pmd-cpu-mask=0x606   (2 physical cores × 2 threads = 4 PMD threads)" in out
    assert "CPUs 1-2,9-10" in out and "CPU 1,9 (node 0, siblings 1,9: both threads)" in out
    assert "other_config:pmd-cpu-mask=606" in out
    assert main(["calc", "pmd-mask", "--mask", "0xc0c", "--sysfs", str(fake_sysfs)]) == 0
    out = capsys.readouterr().out
    assert "CPUs 2-3,10-11" in out and "CPU 3,11 (node 0, siblings 3,11: both threads)" in out
    assert main(["calc", "pmd-mask", "--mask", "30000c", "--sysfs", str(fake_sysfs)]) == 0
    assert "CPU 20-21: not on this host" in capsys.readouterr().out
    assert main(["calc", "pmd-mask", "--cores", "9", "--sysfs", str(fake_sysfs)]) == 2
    assert "--cores: 9 wanted" in capsys.readouterr().err
    assert main(["calc", "pmd-mask", "--ht", "2,3"]) == 2
    assert main(["calc", "pmd-mask"]) == 2


def test_socket_mem_preflight_names_missing_sockets() -> None:
    from nfvperf.dut.ovs_spec import socket_mem_check
    c = socket_mem_check([11264, 1024], nodes=[0])
    assert c.status == "fail" and c.required
    assert c.detail == ("topology.ovs.socket_mem '11264,1024' gives memory to NUMA socket(s) 1, "
                        "but this host has node(s) 0")
    assert "socket_mem: '11264,0'" in c.fix
    assert socket_mem_check([11264, 1024], nodes=[0, 1]).status == "ok"
    assert socket_mem_check([512, 0], nodes=[0]).status == "ok"
    names = [ch(("root",)).name for ch in
             OvsDpdk.preflight_needs(TopologySpec(ovs={"socket_mem": "512,512"})).checks]
    assert "ovs.socket_mem" in names


def test_vnf_core_counts_size_the_vm_and_the_container(fake: CpuTopology, tmp_path: Path) -> None:
    """testpmd.cores: 2, ht: true for each VNF of a pvp: the VM VNF gets a vCPU per resolved CPU
    plus vCPU 0 (testpmd's main lcore, on housekeeping), pinned to them; the container VNF's
    EAL lcores run one forwarding lcore per resolved CPU."""
    from nfvperf.dut.testpmd import TestpmdVnf
    from nfvperf.host.run import ResourceTracker
    from nfvperf.vm.qemu import VmVnf
    spec = TopologySpec(kind="pvp", vnf="vm", testpmd={"cores": 2, "ht": True})
    run = RunContext("cores2", tmp_path)
    topo = build(spec, run, preflight=False)
    plan = topo.plan_cpus(fake)
    # the OVS PMD has no count here: the VNF's cores resolve first, the PMD gets a CPU left over
    assert plan.roles["vnf0"] == [1, 2, 9, 10] and plan.resolved["vnf0"]["mask"] == "0x606"
    assert not set(plan.roles["dut"]) & {0, 1, 2, 9, 10}
    vm = VmVnf(run, ResourceTracker(run), sockets=[], name="vnf0", plan=plan, spec=spec)
    assert vm.vcpus == 5 and vm.cpu_pin == [0, 1, 2, 9, 10]
    assert "nfvperf.nbcores=4" in vm.kernel_cmdline()
    box = TestpmdVnf(run, ResourceTracker(run), sockets=[tmp_path / "a", tmp_path / "b"],
                     name="vnf0", plan=plan, spec=spec)
    assert box.lcores == "0@0,1@1,2@2,3@9,4@10" and box.n_fwd_lcores() == 4


def test_pmd_mask_naming_missing_cpus_fails_preflight() -> None:
    """seed000's pmd_cpu_mask 0x4 on a 2-CPU host: OVS would start no PMD and forward nothing, so
    preflight refuses it with the host's CPUs and a mask that fits."""
    from nfvperf.dut.ovs_spec import pmd_mask_check
    c = pmd_mask_check("0x4", allowed=[0, 1])
    assert c.status == "fail" and c.required
    assert "0x4 names CPU(s) 2" in c.detail and "pmd_cores" in c.fix and "0x2" in c.fix
    assert pmd_mask_check("0x6", allowed=[0, 1, 2]).status == "ok"


def _small_host(n: int) -> CpuTopology:
    from nfvperf.host.cpu import Cpu
    cpus = {i: Cpu(i, i, 0, 0, [i]) for i in range(n)}
    return CpuTopology(cpus, list(range(n)), list(range(n)), [], [])


def test_sharing_keeps_the_generator_apart_from_the_dut() -> None:
    """PVP on 2 CPUs: tgen on the housekeeping CPU, OVS PMD and the VNF share CPU 1 (before,
    round-robin put tgen on CPU 1 beside the PMD, in its time slices)."""
    plan = plan_pinning({"dut": 1, "vnf0": 1, "tgen": 1}, _small_host(2))
    assert plan.roles == {"dut": [1], "vnf0": [1], "tgen": [0]}
    assert plan.cores_shared
    (w,) = [w for w in plan.warnings if w.startswith("CORES SHARED")]
    assert "CPU 1: dut, vnf0" in w and "generator keeps its own" in w
    # p-ovs-p on 2 CPUs is unchanged: PMD on 1, tgen on 0
    assert plan_pinning({"dut": 1, "tgen": 1}, _small_host(2)).roles == {"dut": [1], "tgen": [0]}
    # 3 CPUs (housekeeping 0): everyone has a CPU, nothing to keep apart
    assert plan_pinning({"dut": 1, "vnf0": 1, "tgen": 1}, _small_host(3)).roles == \
        {"dut": [1], "vnf0": [2], "tgen": [0]}
    # one CPU for everything: nothing can be kept apart, and the warning says they compete
    one = plan_pinning({"dut": 1, "tgen": 1}, _small_host(1))
    assert one.roles == {"dut": [0], "tgen": [0]}
    assert any("generator and DUT compete" in w for w in one.warnings)
