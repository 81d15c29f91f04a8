"""Adapters and topologies own their knowledge (DESIGN.md): options model, binaries, hugepage and
core demand, port kinds, preflight; TopologySpec takes its allowed values from the registries."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from nfvperf import topo
from nfvperf.config import SuiteError
from nfvperf.suite_load import validate_suite
from nfvperf.dut import load_adapters
from nfvperf.dut.base import DUT_REGISTRY, AdapterOptions, DutAdapter, register_dut
from nfvperf.host.preflight import Binary, Needs
from nfvperf.host.run import RunContext
from nfvperf.topo import register
from nfvperf.topo.base import Topology
from nfvperf.topo.spec import TopologySpec, allowed_duts

SRC = Path(__file__).resolve().parents[2] / "src"


def _suite(**topology):
    return {"name": "s", "topology": topology, "tests": [{"method": "throughput"}]}


def _problems(data) -> list[str]:
    with pytest.raises(SuiteError) as ei:
        validate_suite(data)
    return ei.value.problems


# --------------------------------------------------------------------------- adapters declare
@pytest.mark.parametrize("name,key,binaries,polling,hugepages", [
    ("ovs-dpdk", "ovs", {"ovs-vswitchd-dpdk", "ovsdb-server"}, 1, 1024),
    ("testpmd", "testpmd", {"dpdk-testpmd"}, 1, 512),
    ("linux-bridge", "linux_bridge", set(), 0, 0),
])
def test_each_adapter_declares_its_needs(name, key, binaries, polling, hugepages) -> None:
    load_adapters()
    cls = DUT_REGISTRY[name]
    spec = TopologySpec(kind="p2p" if name != "ovs-dpdk" else "p-ovs-p", dut=name)
    assert cls.options_key == key and issubclass(cls.options_model, AdapterOptions)
    assert isinstance(getattr(spec, key), cls.options_model)        # the spec's section is its model
    assert {b.name for b in cls.binaries} == binaries
    assert cls.polling_cpus == polling
    assert cls.hugepage_demand_mb(spec) == hugepages
    needs = cls.preflight_needs(spec)
    assert isinstance(needs, Needs) and {n for n, (_, req) in needs.binaries.items() if req} == binaries


def test_ovs_hugepages_follow_its_socket_memory() -> None:
    spec = TopologySpec(kind="pvp", ovs={"socket_mem_mb": 2048})
    assert DUT_REGISTRY["ovs-dpdk"].hugepage_demand_mb(spec) == 2048
    t = topo.build(spec, RunContext(run_dir="/tmp/nfvperf-unit"))
    assert t.hugepage_demand_mb() == 512 + 2048 + 512          # tgen + OVS + one container VNF
    vm = topo.build(TopologySpec(kind="pvvp", vnf="vm"), RunContext(run_dir="/tmp/nfvperf-unit"))
    assert vm.hugepage_demand_mb() == 512 + 1024 + 2 * 1280
    assert "qemu-system-x86_64" in vm.preflight_needs(vm.spec).binaries


def test_options_models_live_in_the_adapter_modules_and_yaml_keys_work() -> None:
    from nfvperf.dut import linux_bridge, ovs_dpdk, testpmd
    from nfvperf.topo import spec as spec_mod
    assert spec_mod.OvsSpec is ovs_dpdk.OvsSpec and spec_mod.TestpmdSpec is testpmd.TestpmdSpec
    assert spec_mod.LinuxBridgeSpec is linux_bridge.LinuxBridgeSpec
    s = validate_suite(_suite(kind="p2p", dut="linux-bridge", linux_bridge={"mode": "single"},
                              testpmd={"forward_mode": "mac"}, ovs={"n_rxq": 2}))
    assert s.spec.topology.linux_bridge.mode == "single" and s.spec.topology.testpmd.forward_mode == "mac"
    probs = _problems(_suite(ovs={"n_rxqq": 2}))
    assert probs[0].startswith("topology.ovs.n_rxqq: unknown field; did you mean 'n_rxq'?")


# --------------------------------------------------------------------------- registry-derived values
def test_kind_and_dut_errors_name_the_registered_values() -> None:
    probs = _problems(_suite(kind="nope"))
    assert probs == ["topology.kind: got 'nope'; allowed values: 'p2p', 'p-ovs-p', 'pvp', 'pvvp', 'host-vm', 'vm-link-vm', 'vm-vm' or 'vxlan'"]
    probs = _problems(_suite(dut="ovs"))
    assert probs == ["topology.dut: got 'ovs'; allowed values: 'l3fwd', 'linux-bridge', 'ovs-dpdk', 'ovs-system' or 'testpmd'"]


def test_incompatible_topology_and_dut_refused_at_validation() -> None:
    probs = _problems(_suite(kind="p-ovs-p", dut="linux-bridge"))
    assert len(probs) == 1 and probs[0].startswith("topology.dut: kind p-ovs-p cannot use dut 'linux-bridge'")
    assert "allowed DUTs for p-ovs-p: 'ovs-dpdk'" in probs[0] and "works with kind p2p" in probs[0]
    probs = _problems({"name": "s", "topology": {"kind": "p2p", "dut": "testpmd"},
                       "tests": [{"method": "throughput", "topology": {"kind": "pvp"}}]})
    assert probs[0].startswith("tests[0].topology.dut: kind pvp cannot use dut 'testpmd'")
    assert "'ovs-dpdk'" in probs[0]
    probs = _problems(_suite(kind="p2p", dut="linux-bridge", port_kind="pci", pci=["0000:01:00.0", "0000:01:00.1"]))
    assert probs[0].startswith("topology.port_kind: kind p2p with dut linux-bridge cannot use port_kind 'pci'")
    with pytest.raises(ValidationError, match="p-ovs-p"):
        TopologySpec(kind="p2p")                      # the default dut (ovs-dpdk) does not fit p2p
    assert allowed_duts("p2p") == ["l3fwd", "linux-bridge", "testpmd"]


# --------------------------------------------------------------------------- one module each
def test_a_fake_adapter_and_topology_registered_in_a_test_are_usable() -> None:
    """Registering is all it takes: validation, compatibility, demands and needs follow."""
    calls = []

    @register_dut("fake-switch")
    class FakeSwitch(DutAdapter):
        name = "fake-switch"
        binaries = (Binary("fake-switchd", "fake-pkg"),)
        polling_cpus = 3
        port_kinds = ("af_packet",)

        @classmethod
        def hugepage_demand_mb(cls, spec):
            return 777

        @classmethod
        def adjust_plan(cls, plan, spec):
            calls.append(plan)

        def start(self): ...
        def counters(self): return {"ports": {}}
        def alive(self): ...
        def stop(self): ...

    @register("fake-topo")
    class FakeTopo(Topology):
        duts = ("fake-switch",)
        base_switching_operations = 5

    try:
        s = validate_suite(_suite(kind="fake-topo", dut="fake-switch"))
        assert s.spec.topology.kind == "fake-topo"
        assert topo.switching_operations(s.spec.topology) == 5
        t = topo.build(s.spec.topology, RunContext(run_dir="/tmp/nfvperf-unit"))
        assert isinstance(t, FakeTopo) and t.dut_class() is FakeSwitch
        assert t.cpu_demands() == {"dut": 3, "tgen": 1}
        assert t.hugepage_demand_mb() == 512 + 777
        needs = s.spec.topology.preflight_needs()
        assert needs.binaries["fake-switchd"][1] is True
        t.plan_cpus()
        assert calls                                     # the adapter amended the CPU plan
        probs = _problems(_suite(kind="fake-topo", dut="testpmd"))
        assert "allowed DUTs for fake-topo: 'fake-switch'" in probs[0]
        probs = _problems(_suite(kind="fake-topo", dut="fake-switch", port_kind="af_xdp"))
        assert probs[0].startswith("topology.port_kind:") and "'af_packet'" in probs[0]
        assert "fake-topo" in _problems(_suite(kind="nope"))[0]
    finally:
        DUT_REGISTRY.pop("fake-switch", None)
        topo.REGISTRY.pop("fake-topo", None)
    assert "fake-topo" not in _problems(_suite(kind="nope"))[0]


def test_new_adapter_and_topology_are_one_file_each(tmp_path: Path) -> None:
    """Drop one adapter file and one topology file into the packages (here: directories added to
    the packages' search path, in a fresh interpreter): the adapter's options section, its name and
    the topology's kind are accepted, and nothing else was edited."""
    (tmp_path / "dut").mkdir()
    (tmp_path / "topo").mkdir()
    (tmp_path / "dut" / "fakesw.py").write_text(textwrap.dedent('''
        from pydantic import Field
        from nfvperf.dut.base import AdapterOptions, DutAdapter, register_dut

        class FakeOptions(AdapterOptions):
            queues: int = Field(1, ge=1, le=4)

        @register_dut("fakesw")
        class FakeSw(DutAdapter):
            name = "fakesw"
            options_key = "fakesw"
            options_model = FakeOptions
            def start(self): ...
            def counters(self): return {"ports": {}}
            def alive(self): ...
            def stop(self): ...
    '''))
    (tmp_path / "topo" / "faketopo.py").write_text(textwrap.dedent('''
        from nfvperf.topo import register
        from nfvperf.topo.base import Topology

        @register("faketopo")
        class FakeTopo(Topology):
            duts = ("fakesw",)
            base_switching_operations = 4
    '''))
    prog = textwrap.dedent(f'''
        import json, sys
        import nfvperf.dut
        nfvperf.dut.__path__.append({str(tmp_path / "dut")!r})
        import nfvperf.topo
        nfvperf.topo.__path__.append({str(tmp_path / "topo")!r})
        from nfvperf.config import SuiteError
        from nfvperf.suite_load import validate_suite
        s = validate_suite({{"name": "s", "topology": {{"kind": "faketopo", "dut": "fakesw",
                             "fakesw": {{"queues": 3}}}}, "tests": [{{"method": "throughput"}}]}})
        out = {{"queues": s.spec.topology.fakesw.queues,
               "ops": nfvperf.topo.switching_operations(s.spec.topology)}}
        try:
            validate_suite({{"name": "s", "topology": {{"kind": "faketopo", "dut": "fakesw",
                             "fakesw": {{"queues": 9}}}}, "tests": [{{"method": "throughput"}}]}})
        except SuiteError as e:
            out["error"] = e.problems[0]
        print(json.dumps(out))
    ''')
    env = dict(os.environ, PYTHONPATH=str(SRC))
    p = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["queues"] == 3 and out["ops"] == 4
    assert out["error"].startswith("topology.fakesw.queues:")


# --------------------------------------------------------------------------- no names outside owners
def test_no_dut_or_kind_names_outside_their_owners() -> None:
    """topo/base.py, host/preflight.py and the report name no DUT or topology kind (topo/spec.py
    keeps only the historical defaults kind p-ovs-p, dut ovs-dpdk)."""
    names = ["ovs-dpdk", "linux-bridge", '== "testpmd"', '"p2p"', '"p-ovs-p"', '"pvp"', '"pvvp"']   # ("vxlan" is also a traffic key)
    for rel in ("nfvperf/topo/base.py", "nfvperf/host/preflight.py",
                "nfvperf/report/tables.py", "nfvperf/topo/__init__.py"):
        text = (SRC / rel).read_text()
        code = "\n".join(line.split("#")[0] for line in text.splitlines())
        hits = [n for n in names if n in code]
        assert not hits, f"{rel} names {hits}"
    import re
    branch = re.compile(r"\bdut\s*(==|!=|in\b)|spec\.kind\s*(==|!=|in\b)|"
                        r"self\.kind\s*==\s*\"(p2p|p-ovs-p|pvp|pvvp|vxlan)\"|kinds_vnfs")
    for f in (SRC / "nfvperf").rglob("*.py"):
        code = "\n".join(line.split("#")[0] for line in f.read_text().splitlines()
                         if not line.lstrip().startswith(("``", '"', "'")))
        assert not branch.search(code), f"{f}: {branch.search(code).group(0)}"
    pf = (SRC / "nfvperf/host/preflight.py").read_text()
    assert "nfvperf.tg" not in pf and "nfvperf.topo" not in pf.replace("nfvperf.topo.preflight", "")
