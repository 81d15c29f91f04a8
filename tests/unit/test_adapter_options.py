"""An adapter reads its own typed section of the topology spec (issue 18 item 7).

``DutAdapter.options(spec)`` is the section ``options_key`` of a TopologySpec, looked up among the
spec's fields (``TopologyView.option_section``), checked to be the adapter's model
(``options_as``), and typed as that model where the adapter narrows it.  The adapters built from
a spec read its fields directly: these tests pin that they take the same values as before (the
spec's section, its port kind and MTU; the defaults without a spec)."""
from __future__ import annotations

from typing import Optional

import pytest
from pydantic import BaseModel, Field, create_model

from nfvperf.dut.base import AdapterOptions, DutAdapter, TopologyView
from nfvperf.dut.l3fwd import L3fwd, L3fwdSpec, _SpecView, problems, spec_ports
from nfvperf.dut.linux_bridge import LinuxBridge
from nfvperf.dut.ovs_dpdk import OvsDpdk
from nfvperf.dut.ovs_spec import OvsSpec
from nfvperf.dut import testpmd as tp    # its functions start with 'test': not imported bare
from nfvperf.host.run import RunContext
from nfvperf.topo import TopologySpec
from nfvperf.vm.guest import TcpGuest


class _Options(AdapterOptions):
    depth: int = Field(4, ge=1)


class _Plugin(DutAdapter):
    """A plugin adapter whose section exists only at run time (not declared on TopologySpec)."""

    name = "plugin-under-test"
    options_key = "plugin_opts"
    options_model = _Options

    @classmethod
    def options(cls, spec: TopologyView) -> Optional[_Options]:
        return cls.options_as(spec, _Options)

    def start(self) -> None: ...

    def counters(self) -> dict[str, object]:
        return {"ports": {}}

    def alive(self) -> None: ...

    def stop(self) -> None: ...


def test_each_builtin_adapter_gets_its_own_section() -> None:
    spec = TopologySpec(kind="p-ovs-p", port_kind="vhost", ovs={"n_rxq": 2, "socket_mem_mb": 512})
    ovs = OvsDpdk.options(spec)
    assert ovs is spec.ovs and isinstance(ovs, OvsSpec) and ovs.n_rxq == 2
    assert tp.Testpmd.options(spec) is spec.testpmd and isinstance(spec.testpmd, tp.TestpmdSpec)
    assert LinuxBridge.options(spec) is spec.linux_bridge
    assert L3fwd.options(spec) is spec.l3fwd
    assert spec.dut_options() is spec.ovs


def test_option_section_is_a_lookup_among_the_models_fields() -> None:
    spec = TopologySpec()
    assert spec.option_section("ovs") is spec.ovs
    assert spec.option_section("vm") is spec.vm
    assert spec.option_section("kind") is None          # a field, but not a section
    assert spec.option_section("nope") is None          # no such field
    assert spec.option_section("__class__") is None     # only fields, never attributes


def test_a_plugin_section_added_at_run_time_is_found_and_typed() -> None:
    with_plugin = create_model("TopologySpec", __base__=TopologySpec,
                               plugin_opts=(_Options, Field(default_factory=_Options)))
    spec = with_plugin(plugin_opts={"depth": 9})
    opts = _Plugin.options(spec)
    assert isinstance(opts, _Options) and opts.depth == 9
    assert _Plugin.options(TopologySpec()) is None       # a spec without the section


def test_a_section_of_another_model_is_a_type_error_naming_adapter_and_key() -> None:
    class Confused(_Plugin):
        name = "confused"
        options_key = "ovs"              # the OVS section, read as the plugin's model

    with pytest.raises(TypeError, match=r"confused: topology.ovs is a OvsSpec, not the _Options"):
        Confused.options(TopologySpec())


def test_an_adapter_without_a_section_has_no_options() -> None:
    class Plain(_Plugin):
        options_key = None

    assert Plain.options(TopologySpec()) is None
    assert DutAdapter.options(TopologySpec()) is None


def test_ovs_dpdk_reads_a_topology_spec_an_ovs_spec_or_nothing(tmp_path) -> None:
    run = RunContext("nfv0ao0aa", tmp_path / "run")
    topo = TopologySpec(kind="p-ovs-p", port_kind="memif",
                        ovs={"socket_mem_mb": 768, "pmd_cpu_mask": "0x4", "n_rxq": 2})
    a = OvsDpdk(run, None, cpus=[1], spec=topo)
    assert a.spec is topo.ovs and a.port_kind == "memif"
    assert (a.pmd_cpu_mask, a.socket_mem_mb, a.socket_mem) == ("0x4", 768, "768")
    b = OvsDpdk(run, None, cpus=[1], spec=OvsSpec(socket_mem_mb=512, smc_enable=True))
    assert b.port_kind is None and b.pmd_cpu_mask == "0x2" and b.socket_mem == "512"
    assert b.other_config()["smc-enable"] == "true"
    c = OvsDpdk(run, None, cpus=[3])
    assert c.spec is None and (c.pmd_cpu_mask, c.socket_mem_mb, c.socket_mem) == ("0x8", 512, "512")
    assert "smc-enable" not in c.other_config() and "emc-insert-inv-prob" not in c.other_config()
    # the class declarations read the same section
    assert OvsDpdk.in_place_for(topo) == OvsDpdk.in_place - {"ovs.pmd_cpu_mask"}
    assert OvsDpdk.hugepage_demand_mb(topo) == 768


def test_testpmd_section_is_followed_by_the_vnfs_whatever_the_dut() -> None:
    spec = TopologySpec(kind="pvp", port_kind="vhost", testpmd={"cores": 2, "vnf_queue_size": 512})
    assert spec.dut == "ovs-dpdk" and tp.testpmd_options(spec) is spec.testpmd
    req = tp.testpmd_core_request(spec)
    assert req is not None and (req.field, req.cores, req.ht) == ("topology.testpmd.cores", 2, False)
    assert tp.testpmd_options(None) is None and tp.testpmd_core_request(None) is None
    assert tp.testpmd_core_request(TopologySpec(kind="pvp", port_kind="vhost")) is None


def test_l3fwd_reads_the_path_from_a_spec_or_its_own_ports() -> None:
    spec = TopologySpec(kind="p2p", dut="l3fwd", port_kind="af_xdp", ports=4)
    assert spec_ports(spec) == 4 and spec_ports(None) == 2
    why = problems(spec, L3fwdSpec(queues=2), flows=1)
    assert any("topology.l3fwd.queues" in w and "af_xdp" in w for w in why)
    assert problems(_SpecView("af_packet", 2, 9000), L3fwdSpec(), flows=1)[0].startswith("topology.mtu")
    four, two = (TopologySpec(kind="p2p", dut="l3fwd", port_kind="af_packet", ports=n, l3fwd={"rxd": 8192})
                 for n in (4, 2))
    assert L3fwd.hugepage_demand_mb(four) > L3fwd.hugepage_demand_mb(two)     # the spec's ports count


def test_tcp_guest_memory_comes_from_the_vm_section() -> None:
    spec = TopologySpec(kind="vm-vm", vm={"memory_mb": 1024})
    assert TcpGuest.vm_options(spec) is spec.vm
    assert TcpGuest.hugepage_demand_mb(spec) == 1024 + 64
    assert TcpGuest.hugepage_demand_mb(TopologySpec(kind="vm-vm")) == 512 + 64


def test_the_topology_spec_is_a_topology_view() -> None:
    """mypy checks it where a TopologySpec is passed as a TopologyView; at run time every member
    of the protocol is there too."""
    members = [n for n in vars(TopologyView) if not n.startswith("_")]
    assert {"kind", "dut", "ports", "port_kind", "pci", "mtu", "vnf", "option_section"} <= set(members)
    spec = TopologySpec()
    assert all(hasattr(spec, n) for n in members)
    assert isinstance(spec.option_section("ovs"), BaseModel)
