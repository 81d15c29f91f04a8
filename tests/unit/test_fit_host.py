"""--fit-host's rules (nfvperf.fit) on hosts described by a sibling map and a RAM size: hyper-threads
off without SMT, core counts through the topology's own CPU plan, OVS socket memory on the host's
NUMA nodes only and within half of its RAM; a fitted topology fits; what still does not fit is
said, and why a topology does not fit names each option and what --fit-host would set."""
from __future__ import annotations

from nfvperf.fit import Fit, FitChange, HostFacts, fit_topology
from nfvperf.host.cpu import CpuTopology
from nfvperf.topo.spec import TopologySpec


def host(cores: int, threads: int = 1, nodes: int = 1, mem_mb: int = 65536) -> HostFacts:
    """``cores`` physical cores of ``threads`` siblings each (CPU i's siblings: i, i+cores, ...),
    cores spread evenly over ``nodes`` NUMA nodes."""
    sib = {c + t * cores: [c + k * cores for k in range(threads)] for c in range(cores)
           for t in range(threads)}
    per = max(1, cores // nodes)
    node = {cpu: min(nodes - 1, (cpu % cores) // per) for cpu in sib}
    return HostFacts(CpuTopology.from_siblings(sib, nodes=node), mem_mb)


def spec(**kw) -> TopologySpec:
    kw.setdefault("port_kind", "vhost")
    return TopologySpec(**kw)


def test_ht_off_where_the_host_has_no_smt() -> None:
    s = spec(kind="p-ovs-p", ovs={"pmd_cores": 1, "ht": True})
    fit = fit_topology(s, host(4))
    assert fit.changes == [FitChange("ovs.ht", True, False, "no SMT: this host has one thread per core")]
    assert fit.spec.ovs.ht is False and fit.spec.ovs.pmd_cores == 1 and fit.problem is None
    assert s.ovs.ht is True                                   # the given spec is left alone
    # a host with SMT keeps it
    assert fit_topology(s, host(4, threads=2)).fits_as_given


def test_core_counts_lowered_to_what_the_cpu_plan_resolves() -> None:
    s = spec(kind="p-ovs-p", ovs={"pmd_cores": 4})
    fit = fit_topology(s, host(2), start_tgen=False)
    assert [(c.field, c.old, c.new) for c in fit.changes] == [("ovs.pmd_cores", 4, 2)]
    assert "2 physical cores" in fit.changes[0].why
    assert fit_topology(s, host(8)).fits_as_given
    # HT and cores together (seed 004: 4 cores with their siblings on a 2-core host without SMT)
    fit = fit_topology(spec(kind="pvp", ovs={"pmd_cores": 4, "ht": True}), host(2), start_tgen=False)
    assert {(c.field, c.old, c.new) for c in fit.changes} == {("ovs.ht", True, False), ("ovs.pmd_cores", 4, 2)}


def test_the_largest_count_goes_first_and_a_tie_lowers_the_vnfs() -> None:
    """pvp: OVS's PMD cores and the VNF's testpmd cores come from one pool of physical cores."""
    s = spec(kind="pvp", ovs={"pmd_cores": 4}, testpmd={"cores": 2})
    fit = fit_topology(s, host(3))
    got = {c.field: (c.old, c.new) for c in fit.changes}
    assert got == {"ovs.pmd_cores": (4, 2), "testpmd.cores": (2, 1)}, got
    assert fit.problem is None and fit_topology(fit.spec, host(3)).fits_as_given


def test_more_core_counts_than_cores_does_not_fit_even_fitted() -> None:
    """Every count at 1 and still too many roles for the host: said, with the CPU plan's words."""
    s = spec(kind="pvp", ovs={"pmd_cores": 2}, testpmd={"cores": 1})
    fit = fit_topology(s, host(1))
    assert fit.problem and "topology.testpmd.cores" in fit.problem
    assert ("ovs.pmd_cores", 2, 1) in [(c.field, c.old, c.new) for c in fit.changes]
    reason = fit.unfit_reason()
    assert reason and "--fit-host would change ovs.pmd_cores 2→1" in reason and "even then" in reason


def test_socket_memory_only_on_the_hosts_numa_nodes() -> None:
    s = spec(kind="p-ovs-p", ovs={"socket_mem": "11264,1024"})
    fit = fit_topology(s, host(4, nodes=1))
    assert [(c.field, c.old, c.new) for c in fit.changes] == [("ovs.socket_mem", [11264, 1024], [11264])]
    assert "NUMA node(s) 0 only" in fit.changes[0].why
    assert fit.spec.ovs.socket_mem == [11264]
    assert fit_topology(s, host(4, nodes=2)).fits_as_given
    # memory only on the missing node moves to the host's first
    assert fit_topology(spec(kind="p-ovs-p", ovs={"socket_mem": [0, 4096]}), host(2)).spec.ovs.socket_mem == [4096]


def test_a_pmd_mask_keeps_the_cpus_the_host_has() -> None:
    fit = fit_topology(spec(kind="p-ovs-p", ovs={"pmd_cpu_mask": "0x3c"}), host(4))
    assert [(c.field, c.old, c.new) for c in fit.changes] == [("ovs.pmd_cpu_mask", "0x3c", "0xc")]
    fit = fit_topology(spec(kind="p-ovs-p", ovs={"pmd_cpu_mask": "0xf0"}), host(2))
    assert fit.spec.ovs.pmd_cpu_mask == "0x2"        # none left: the host's last CPU


def test_hugepages_within_half_the_ram() -> None:
    """p-ovs-p: tgen 512 MB + OVS socket memory; 8 GB of RAM allow 4096 MB of hugepages."""
    s = spec(kind="p-ovs-p", ovs={"socket_mem_mb": 6144})
    fit = fit_topology(s, host(2, mem_mb=8192))
    assert [(c.field, c.old, c.new) for c in fit.changes] == [("ovs.socket_mem_mb", 6144, 3584)]
    assert "4,096 MB" in fit.changes[0].why
    assert fit_topology(s, host(2, mem_mb=16384)).fits_as_given
    # one change per field, the reasons together: NUMA first, then memory (pvp: tgen 512 MB and
    # the container VNF's testpmd 512 MB leave 3072 MB of the 4096 to OVS)
    fit = fit_topology(spec(kind="pvp", ovs={"socket_mem": "11264,1024"}), host(2, mem_mb=8192))
    (c,) = fit.changes
    assert (c.old, c.new) == ([11264, 1024], [3072]) and "NUMA" in c.why and "RAM" in c.why
    # the VM VNF's guest memory counts too (1024 MB + 256 MB for QEMU)
    fit = fit_topology(spec(kind="pvp", vnf="vm", ovs={"socket_mem_mb": 8192}), host(2, mem_mb=8192))
    assert fit.spec.ovs.socket_mem_mb == 2304
    # too little RAM for even the least socket memory: not fitted, said
    fit = fit_topology(spec(kind="pvp"), host(2, mem_mb=2048))
    assert fit.problem and "hugepages" in fit.problem and "2,048 MB RAM" in fit.problem


def test_a_topology_without_the_ovs_dut_keeps_its_ovs_section() -> None:
    """testpmd on p2p does not read ovs: (seed 003's case 1 inherits the suite's socket_mem)."""
    s = spec(kind="p2p", dut="testpmd", ovs={"socket_mem": "11264,1024"})
    assert fit_topology(s, host(4)).fits_as_given


def test_the_unfit_reason_names_each_option_and_the_fix() -> None:
    fit = fit_topology(spec(kind="pvp", ovs={"pmd_cores": 4, "ht": True}), host(2), start_tgen=False)
    why = fit.unfit_reason()
    assert why is not None and why.startswith("does not fit this host; --fit-host would change ")
    assert "ovs.ht true→false (no SMT" in why and "ovs.pmd_cores 4→2" in why
    assert Fit(spec(kind="p-ovs-p")).unfit_reason() is None


def test_host_facts_of_this_machine_are_read() -> None:
    h = HostFacts.read()
    assert h.mem_total_mb > 0 and h.cpus.online and h.hugepage_limit_mb == h.mem_total_mb // 2
    assert "NUMA node" in h.describe() and h.to_dict()["mem_total_mb"] == h.mem_total_mb


def test_guest_vcpus_beyond_the_hosts_cpus_are_kept_and_seed_001s_pinned_units_still_run() -> None:
    """``topology.vm.vcpus`` is the guest's shape, not a host resource: QEMU runs 4 vCPUs on 2
    CPUs under TCG and under KVM (a warning), the topology pins every vCPU of a guest onto the
    CPU(s) its plan gives that guest whatever their number, and seed 001's Table 5 pins one
    iperf3 process per vCPU (processes: 4, pin_cores 0..3), which 2 vCPUs would refuse.  So
    --fit-host leaves it (docs/run-plan.md) and the scenario-3 units run fitted on 2 cores."""
    from nfvperf.suite_load import find_suite, load_suite
    from nfvperf.plan import plan_run
    s = spec(kind="vm-vm", port_kind="af_packet", vm={"vcpus": 4, "queues": 8})
    fit = fit_topology(s, host(2))
    assert fit.spec.vm.vcpus == 4 and not [c for c in fit.changes if c.field.startswith("vm.")]
    suite = load_suite(find_suite("seed001-tcp"), quick=True)
    plan = plan_run(suite, "sim", fit_host=True, host=host(2))
    s3 = [u for u in plan.units if u.test.name.startswith("scenario3-streams")]
    assert s3 and all(u.runs for u in s3), [u.reason for u in s3 if not u.runs]
    assert all(u.test.topology.vm.vcpus == 4 for u in s3)
