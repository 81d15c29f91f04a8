"""What a topology on a testbed refuses before anything starts (issue 10): a kind that does not
run across hosts (vxlan), a DUT or VNF (vnf: vm) that runs on this machine only, a port kind that is not the cabled
kernel interfaces, fewer cabled links than ports.  Without a testbed nothing changes."""
from __future__ import annotations

import pytest

from nfvperf.host.proc import LOCAL
from nfvperf.host.run import RunContext
from nfvperf.host.ssh import SshHost
from nfvperf.testbed.spec import SshSpec
from nfvperf.topo import build
from nfvperf.topo.base import TopologyError
from nfvperf.topo.spec import TopologySpec

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
LINKS = [{"tester": f"t.p{i}", "dut": f"d.p{i}", "tester_iface": f"tp{i}", "dut_iface": f"dp{i}"}
         for i in range(2)]


def _hosts() -> dict:
    return {"tg_host": SshHost("t", SshSpec(address="192.0.2.1", host_key=KEY), role="tester"),
            "dut_host": SshHost("d", SshSpec(address="192.0.2.2", host_key=KEY), role="dut")}


def _topo(tmp_path, links=LINKS, **spec):
    spec = {"kind": "p-ovs-p", "dut": "ovs-dpdk", "port_kind": "af_packet", **spec}
    return build(TopologySpec(**spec), RunContext(run_dir=tmp_path), testbed_links=links,
                 **_hosts())


def test_multihost_topology_accepts_p_ovs_p_on_cabled_links(tmp_path):
    t = _topo(tmp_path)
    t.check_spec()                       # no connection is made to check
    assert t.on_testbed() and t.tg_host.name == "t" and t.dut_host.name == "d"
    local = build(TopologySpec(kind="p-ovs-p", dut="ovs-dpdk", port_kind="af_packet"),
                  RunContext(run_dir=tmp_path))
    assert local.tg_host is LOCAL and local.dut_host is LOCAL and not local.on_testbed()


@pytest.mark.parametrize("kind", ["pvp", "pvvp"])
def test_multihost_topology_accepts_pvp_with_container_vnfs(tmp_path, kind):
    t = _topo(tmp_path, kind=kind)
    t.check_spec()
    assert t.kind == kind                # pvvp (a subclass of pvp) records its own kind
    assert all(v.runs_remote for v in t.vnf_classes_for(t.spec))


@pytest.mark.parametrize("spec, why", [
    ({"kind": "vxlan", "port_kind": "af_packet"}, "topology kind vxlan does not run on a testbed"),
    ({"kind": "pvp", "vnf": "vm"}, "topology.vnf vm: this VNF runs on this machine only"),
    ({"port_kind": "vhost"}, "port_kind vhost: on a testbed the ports are the cabled"),
    ({"dut": "ovs-system"}, "ovs-system runs on this machine only"),
])
def test_multihost_topology_refusals(tmp_path, spec, why):
    with pytest.raises(TopologyError, match=why):
        _topo(tmp_path, **spec).check_spec()


def test_multihost_topology_needs_a_link_per_port(tmp_path):
    with pytest.raises(TopologyError, match="2 ports, but the testbed cables only 1"):
        _topo(tmp_path, links=LINKS[:1]).check_spec()
