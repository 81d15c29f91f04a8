"""A testbed run's CPU plans and PCI NICs (issue 10), with fake hosts whose files are dicts:

* each host's CPU topology is read from that host's own sysfs (through its host object), the
  DUT's and VNFs' cores planned on the DUT host, tgen's on the tester host, the testbed's
  ``cpu.isolated`` preferred and ``cpu.housekeeping`` never polled; the controller's CPUs are
  never read for a remote host;
* ``port_kind: pci`` takes the PCI addresses of the cabled NICs in link order (tgen ``-a <pci>``,
  OVS ``type=dpdk`` with ``dpdk-devargs=<pci>``), and the per-host preflight names the host, the
  testbed field and ``nfvperf testbed prepare`` for a NIC that is missing or not bound.

No NIC is driven here (none on this machine): what runs for real is in the integration tests.
"""
from __future__ import annotations

import pytest

from nfvperf.host import cpu as cpu_mod
from nfvperf.host.cpu import CpuTopology, format_cpulist
from nfvperf.host.run import RunContext
from nfvperf.testbed.hosts import TestbedHosts, check_testbed, preflight_failures, topology_kwargs
from nfvperf.testbed.spec import validate_testbed
from nfvperf.topo import build
from nfvperf.topo.base import HostTooSmall, TopologyError
from nfvperf.topo.spec import TopologySpec

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
CPU = "/sys/devices/system/cpu"
NODE = "/sys/devices/system/node"


def sysfs(n_cpus: int, smt: bool, nodes: int) -> dict[str, str]:
    """A sysfs tree: ``n_cpus`` logical CPUs; with ``smt`` CPU c and c + n/2 are siblings;
    physical cores spread over ``nodes`` NUMA nodes in halves."""
    files = {f"{CPU}/online": f"0-{n_cpus - 1}", f"{NODE}/online": f"0-{nodes - 1}"}
    cores = n_cpus // 2 if smt else n_cpus
    per_node = cores // nodes
    node_cpus: dict[int, list[int]] = {n: [] for n in range(nodes)}
    for c in range(n_cpus):
        core = c % cores
        sib = [core, core + cores] if smt else [c]
        files[f"{CPU}/cpu{c}/topology/thread_siblings_list"] = format_cpulist(sib)
        files[f"{CPU}/cpu{c}/topology/core_id"] = str(core)
        files[f"{CPU}/cpu{c}/topology/physical_package_id"] = str(core // per_node)
        node_cpus[core // per_node].append(c)
    for n, cs in node_cpus.items():
        files[f"{NODE}/node{n}/cpulist"] = format_cpulist(cs)
    return files


class FakeHost:
    """A remote host object whose files are a dict (what SshHost offers the planner and the
    preflight: read_text, exists, connect/preflight/close)."""

    remote = True

    def __init__(self, name: str, files: dict[str, str]):
        self.name = name
        self.files = dict(files)
        self.reads: list[str] = []
        self.work_dir = "/var/lib/nfvperf"

    def read_text(self, path) -> str:
        self.reads.append(str(path))
        if str(path) not in self.files:
            raise FileNotFoundError(str(path))
        return self.files[str(path)]

    def exists(self, path) -> bool:
        p = str(path).rstrip("/")
        return any(k == p or k.startswith(p + "/") for k in self.files)

    def public(self) -> dict:
        return {"name": self.name, "via": "fake"}

    def connect(self) -> None:
        pass

    def close(self) -> None:
        pass

    def preflight(self, needs) -> list:
        return []


TESTER = FakeHost("tester1", sysfs(8, smt=False, nodes=1))
DUT = FakeHost("dut1", sysfs(16, smt=True, nodes=2))
HINTS = {"tester": {"host": "tester1", "isolated": "2-7", "housekeeping": "0-1", "numa": 0},
         "dut": {"host": "dut1", "isolated": "2-7,10-15", "housekeeping": "0-1,8-9", "numa": 0}}
LINKS = [{"link": i, "tester": f"tester1.p{i}", "dut": f"dut1.p{i}", "tester_iface": None,
          "dut_iface": None, "tester_pci": f"0000:3b:00.{i}", "dut_pci": f"0000:5e:00.{i}", "tester_numa": 0,
          "dut_numa": 0, "speed": "10G", "tester_vhost": False, "dut_vhost": False}
         for i in range(2)]


@pytest.fixture
def no_controller_cpus(monkeypatch):
    """Any read of the controller's own CPUs (its sysfs, its affinity) fails the test."""
    real = CpuTopology.read.__func__

    def read(cls, root=cpu_mod.SYS_CPU, reader=None, node_root=cpu_mod.SYS_NODE):
        if reader is None:
            raise AssertionError(f"the controller's CPUs were read ({root})")
        return real(cls, root, reader, node_root)

    def affinity(_pid):
        raise AssertionError("the controller's CPU affinity was used")

    monkeypatch.setattr(CpuTopology, "read", classmethod(read))
    monkeypatch.setattr(cpu_mod.os, "sched_getaffinity", affinity)


def _topo(tmp_path, hints=HINTS, links=LINKS, **spec):
    spec = {"kind": "p-ovs-p", "dut": "ovs-dpdk", "port_kind": "pci", **spec}
    return build(TopologySpec(**spec), RunContext(run_dir=tmp_path), testbed_links=links,
                 tg_host=TESTER, dut_host=DUT, cpu_hints=hints, preflight=False)


def test_multihost_cpu_topology_read_through_a_host_object():
    t = CpuTopology.read(reader=DUT.read_text)
    assert t.online == list(range(16)) and t.allowed == list(range(16))
    assert t.hyperthreading and t.cpus[3].siblings == [3, 11] and t.cpus[11].siblings == [3, 11]
    assert t.nodes() == [0, 1] and t.cpus[5].node == 1 and t.cpus[13].node == 1 and t.cpus[9].node == 0
    assert all(r.startswith(("/sys/devices/system/cpu/", "/sys/devices/system/node/"))
               for r in DUT.reads)
    small = CpuTopology.read(reader=TESTER.read_text)
    assert small.online == list(range(8)) and not small.hyperthreading and small.nodes() == [0]


def test_multihost_cpu_plan_per_host_never_reads_the_controller(tmp_path, no_controller_cpus):
    t = _topo(tmp_path, kind="pvp", ovs={"pmd_cores": 2, "ht": True})
    plan = t.plan = t.plan_cpus()
    assert plan.topology["host"] == "dut1" and plan.topology["logical_cpus"] == 16
    assert t.tg_plan is not None and t.tg_plan.topology["host"] == "tester1"
    assert t.tg_plan.topology["logical_cpus"] == 8
    # the DUT's PMDs: 2 whole cores, both threads, isolated, on the NIC's node 0, no housekeeping
    dut = plan.cpus("dut")
    assert len(dut) == 4 and not set(dut) & {0, 1, 8, 9}
    assert all(DUT.files[f"{CPU}/cpu{c}/topology/thread_siblings_list"] for c in dut)
    assert all(c in (2, 3, 10, 11) for c in dut), dut        # node 0 and isolated
    assert "tgen" not in plan.roles and "vnf0" in plan.roles
    assert not set(plan.cpus("vnf0")) & ({0, 1, 8, 9} | set(dut))
    assert plan.housekeeping == [0, 1, 8, 9]
    # tgen: on the tester's isolated CPUs, main lcore on its first housekeeping CPU
    assert t.tg_plan.roles == {"tgen": [2]} and t.tg_plan.housekeeping == [0, 1]
    assert t.tgen_lcores() == "0@0,1@2"
    env = t.environment()
    assert env["pinning_hosts"]["dut"]["topology"]["host"] == "dut1"
    assert env["pinning_hosts"]["tester"]["roles"] == {"tgen": [2]}
    assert env["pinning_hosts"]["tester"]["topology"]["testbed_hints"]["housekeeping"] == "0-1"


def test_multihost_cpu_isolated_hint_preferred(tmp_path, no_controller_cpus):
    hints = {"tester": {"host": "tester1", "isolated": "6-7", "housekeeping": "0"},
             "dut": {"host": "dut1", "isolated": "7,15", "housekeeping": "0,8"}}
    t = _topo(tmp_path, hints=hints)
    plan = t.plan_cpus()
    assert set(plan.cpus("dut")) <= {7, 15}
    assert t.tg_plan is not None and t.tg_plan.cpus("tgen") == [6]


def test_multihost_cpu_housekeeping_never_polls(tmp_path, no_controller_cpus):
    hints = {"tester": {"host": "tester1", "housekeeping": "0-7"},
             "dut": {"host": "dut1", "housekeeping": "0-1,8-9"}}
    with pytest.raises(HostTooSmall, match=r"host tester1: .*hosts\.tester1\.cpu\.housekeeping"):
        _topo(tmp_path, hints=hints).plan_cpus()
    hints = {"tester": {"host": "tester1", "housekeeping": "0"},
             "dut": {"host": "dut1", "housekeeping": "0-5,8-13"}}
    with pytest.raises(HostTooSmall, match=r"host dut1: 3 polling CPU\(s\) wanted \(dut\), but CPU\(s\) 0 .*"
                       r"hosts\.dut1\.cpu\.housekeeping: 0-5,8-13.*topology\.ovs\.pmd_cores"):
        _topo(tmp_path, hints=hints, ovs={"pmd_cores": 3}).plan_cpus()


def test_multihost_pci_ports_from_the_links(tmp_path, no_controller_cpus):
    from nfvperf.dut.ovs_dpdk import OvsDpdk
    from nfvperf.tg.tgen import TgenProcess
    t = _topo(tmp_path)
    t.check_spec()
    t.plan = t.plan_cpus()
    ports = t.add_ports_from_spec()
    assert [(p.tg_pci, p.dut_pci) for p in ports] == [("0000:3b:00.0", "0000:5e:00.0"),
                                                      ("0000:3b:00.1", "0000:5e:00.1")]
    # tgen on the tester: -a <tester pci> per port, in link order, PCI bus scanned
    tg = TgenProcess(t.tgen_port_specs(), t.tgen_lcores(), run_dir=tmp_path, tag="nfvpci1",
                     binary=tmp_path / "tgen", host=TESTER)
    eal = tg.eal_args()
    assert "--no-pci" not in eal
    assert [eal[i + 1] for i, a in enumerate(eal) if a == "-a"] == ["0000:3b:00.0", "0000:3b:00.1"]
    # OVS-DPDK on the DUT: type=dpdk ports with dpdk-devargs=<DUT pci>
    ovs = OvsDpdk(t.run, None, cpus=t.plan.cpus("dut"), spec=t.spec, plan=t.plan, host=DUT)
    assert "--no-pci" not in ovs.other_config()["dpdk-extra"]
    assert ovs.other_config()["dpdk-lcore-mask"] == "0x1"       # DUT host's housekeeping CPU 0
    calls: list[tuple] = []
    ovs.vsctl = lambda *a, **k: calls.append(a) or ""          # type: ignore[method-assign]
    ovs._ofport = lambda name, timeout=10.0: len(calls)         # type: ignore[method-assign]
    for i, p in enumerate(ports):
        ovs.attach_portref(t.port_kind().dut_portref(p), "br0", ofport=i + 1, dpdk_index=i)
    assert [c[c.index("Interface") + 1:c.index("Interface") + 4] for c in calls] == [
        ("phy0", "type=dpdk", 'options:dpdk-devargs="0000:5e:00.0"'),
        ("phy1", "type=dpdk", 'options:dpdk-devargs="0000:5e:00.1"')]


def test_multihost_pci_link_without_pci_refused(tmp_path):
    links = [dict(LINKS[0]), dict(LINKS[1], dut_pci=None, dut_iface="ens1f1")]
    with pytest.raises(TopologyError, match=r"links\.1: .*hosts\.dut1\.nics\.p1 has no pci"):
        _topo(tmp_path, links=links).check_spec()
    with pytest.raises(TopologyError, match=r"links\.0: .*hosts\.tester1\.nics\.p0 has no iface"):
        _topo(tmp_path, port_kind="af_packet").check_spec()


LAB = {"name": "lab1", "hosts": {
    "tester1": {"role": "tester", "ssh": {"address": "192.0.2.11", "host_key": KEY},
                "nics": [{"name": "p0", "pci": "0000:3b:00.0", "numa": 0},
                         {"name": "p1", "pci": "0000:3b:00.1", "numa": 0}],
                "cpu": {"isolated": "2-7", "housekeeping": "0-1"}},
    "dut1": {"role": "dut", "ssh": {"address": "192.0.2.12", "host_key": KEY},
             "nics": [{"name": "p0", "pci": "0000:5e:00.0", "numa": 1},
                      {"name": "p1", "pci": "0000:5e:00.1", "numa": 1, "driver": "uio_pci_generic"},
                      {"name": "m0", "pci": "0000:01:00.0", "iface": "eno1"}],
             "cpu": {"isolated": "2-7,10-15", "housekeeping": "0-1,8-9"}}},
    "links": [{"tester": "tester1.p0", "dut": "dut1.p0"}, {"tester": "tester1.p1", "dut": "dut1.p1"}]}


def test_multihost_topology_kwargs_carry_pci_and_cpu_hints():
    spec = validate_testbed(LAB)
    kw = topology_kwargs(spec, TestbedHosts(spec))          # not connected: nothing reached
    assert [(lk["tester_pci"], lk["dut_pci"]) for lk in kw["testbed_links"]] == [
        ("0000:3b:00.0", "0000:5e:00.0"), ("0000:3b:00.1", "0000:5e:00.1")]
    assert kw["cpu_hints"]["dut"] == {"host": "dut1", "isolated": "2-7,10-15",
                                      "housekeeping": "0-1,8-9", "numa": 1}
    assert kw["cpu_hints"]["tester"]["numa"] == 0


def _pci_hosts():
    def dev(pci, driver):
        base = f"/sys/bus/pci/devices/{pci}"
        return {f"{base}/uevent": (f"DRIVER={driver}\n" if driver else "") + f"PCI_SLOT_NAME={pci}\n"}
    tester = FakeHost("tester1", {**dev("0000:3b:00.0", "vfio-pci"), **dev("0000:3b:00.1", "vfio-pci")})
    dut = FakeHost("dut1", {**dev("0000:5e:00.0", "i40e"), **dev("0000:01:00.0", "igb")})
    return {"tester1": tester, "dut1": dut}


def test_multihost_pci_preflight_names_host_field_and_fix():
    spec = validate_testbed(LAB)
    hosts = _pci_hosts()
    rows = check_testbed(spec, port_kind="pci", make=lambda name, _h: hosts[name])
    pci = {(r.host, r.check): r for r in rows if r.check.startswith("pci:")}
    assert pci[("tester1", "pci:p0")].status == "ok" and pci[("tester1", "pci:p1")].required
    bound = pci[("dut1", "pci:p0")]
    assert bound.status == "fail" and bound.required
    assert bound.detail == ("hosts.dut1.nics.p0.pci: 0000:5e:00.0 on host dut1 is bound to i40e, "
                            "not vfio-pci")
    assert "nfvperf testbed prepare" in bound.fix and "--limit dut1" in bound.fix
    missing = pci[("dut1", "pci:p1")]
    assert missing.status == "fail" and "no PCI device 0000:5e:00.1 on host dut1" in missing.detail
    assert "hosts.dut1.nics.p1.pci" in missing.fix
    fails = preflight_failures(rows)
    assert len([f for f in fails if ": pci:" in f]) == 2      # p0, p1; not the management NIC
    assert any(f.startswith("dut1: pci:p0: hosts.dut1.nics.p0.pci:") for f in fails)
    # a run over kernel interfaces does not need the NICs bound
    rows = check_testbed(spec, port_kind="af_packet", make=lambda name, _h: hosts[name])
    assert not [f for f in preflight_failures(rows) if ": pci:" in f]
    # `testbed check` (no suite): a NIC with a kernel interface is only reported
    rows = check_testbed(spec, make=lambda name, _h: hosts[name])
    m0 = next(r for r in rows if r.host == "dut1" and r.check == "pci:m0")
    assert m0.status == "warn" and not m0.required and "bound to igb" in m0.detail
