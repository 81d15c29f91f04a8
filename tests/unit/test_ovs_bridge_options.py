"""ovs.bridges (dual bridge, patch ports) and ovs.vlan_translate (seed 003): validation and the
rules the p-ovs-p topology installs for them."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from nfvperf.dut.ovs_dpdk import OvsDpdk
from nfvperf.dut.ovs_spec import OvsSpec
from nfvperf.topo.p_ovs_p import PhyOvsPhy
from nfvperf.topo.spec import TopologySpec


def test_options_validate() -> None:
    s = OvsSpec(bridges=2, vlan_translate={"100": "200"})
    assert s.vlan_translate == {100: 200}
    with pytest.raises(ValidationError, match="VLAN ids 1..4094"):
        OvsSpec(vlan_translate={100: 4095})
    with pytest.raises(ValidationError, match="VLAN ids 1..4094"):
        OvsSpec(vlan_translate={})
    with pytest.raises(ValidationError, match="vlan_translate and rules"):
        OvsSpec(vlan_translate={100: 200}, rules=64)
    with pytest.raises(ValidationError):
        OvsSpec(bridges=3)
    bits = OvsDpdk.describe_options({"bridges": 2, "vlan_translate": {100: 200}})
    assert bits == ["2 bridges (patch ports)", "VLAN 100->200"]


def test_hop_rules() -> None:
    assert PhyOvsPhy._hop_rules(1, 2, {}, ingress=True) == [
        "priority=100,in_port=1,idle_timeout=0,actions=output:2"]
    assert PhyOvsPhy._hop_rules(1, 2, {100: 200}, ingress=True) == [
        "priority=200,in_port=1,dl_vlan=100,idle_timeout=0,actions=mod_vlan_vid:200,output:2"]
    # the egress bridge forwards only the rewritten tag
    assert PhyOvsPhy._hop_rules(2, 1, {100: 200}, ingress=False) == [
        "priority=200,in_port=2,dl_vlan=200,idle_timeout=0,actions=output:1"]


def test_tcp_refused_with_vlan_translation(tmp_path) -> None:
    from nfvperf.host.run import RunContext
    from nfvperf.topo import build
    topo = build(TopologySpec(ovs={"vlan_translate": {100: 200}}), RunContext("vt0", tmp_path))
    assert "VLAN-tagged" in (topo.tcp_refusal() or "")
    assert topo.bridge_features() and topo.n_bridges() == 1


def test_suite_with_vlan_translation_needs_the_tag() -> None:
    from nfvperf.config import SuiteError
    from nfvperf.suite_load import validate_suite
    base = {"name": "t", "topology": {"kind": "p-ovs-p", "ovs": {"vlan_translate": {100: 200}}},
            "traffic": {"frame_sizes": [64]}, "tests": [{"method": "throughput"}]}
    with pytest.raises(SuiteError) as ei:
        validate_suite(base)
    assert any("forwards only frames tagged 100, but traffic.vlan is None; set traffic.vlan: 100"
               in p for p in ei.value.problems)
    ok = dict(base, traffic={"frame_sizes": [64], "vlan": 100})
    assert validate_suite(ok).tests[0].topology.ovs.vlan_translate == {100: 200}
