"""In-place topology changes (issue 16 item 1): which spec differences a running DUT takes
without a restart (``nfvperf.topo.inplace``), the adapters' declarations, the adapter's and the
topology's reconfigure() contract; the OVS-DPDK adapter's steps with its OVS commands recorded."""
from __future__ import annotations

from typing import Any

import pytest

from nfvperf.dut import load_adapters
from nfvperf.dut.base import DUT_REGISTRY, MemifEnd
from nfvperf.dut.ovs_dpdk import OvsDpdk
from nfvperf.dut.ovs_ctl import OvsPort
from nfvperf.dut.ovs_spec import OvsSpec
from nfvperf.dut.ovs_pmd import parse_pmd_rxq, requeue_devargs
from nfvperf.dut.ovs_rules import RuleInstall
from nfvperf.host.run import RunContext
from nfvperf.topo import build
from nfvperf.topo.base import RestartRequired, TopologyError
from nfvperf.topo.inplace import (differences, in_place_difference, restart_fields,
                                  restart_reason)
from nfvperf.topo.spec import TopologySpec


def _ovs(**ovs: Any) -> TopologySpec:
    return TopologySpec(kind="p-ovs-p", port_kind="vhost", ovs={"socket_mem_mb": 512, **ovs})


# --------------------------------------------------------------------------- the pure functions
def test_equal_specs_need_nothing() -> None:
    a = _ovs(rules=1000)
    assert in_place_difference(a, _ovs(rules=1000)) == {}
    assert restart_fields(a, _ovs(rules=1000)) == [] and restart_reason(a, a) is None


def test_ovs_dpdk_changes_rules_queues_pmd_mask_emc_smc_in_place() -> None:
    a = _ovs()
    b = _ovs(rules=1000, n_rxq=2, pmd_cpu_mask="0x2", emc_insert_inv_prob=0, smc_enable=True,
             pmd_maxsleep_us=100)
    assert in_place_difference(a, b) == {
        "ovs.pmd_cpu_mask": "0x2", "ovs.n_rxq": 2, "ovs.emc_insert_inv_prob": 0,
        "ovs.smc_enable": True, "ovs.rules": 1000, "ovs.pmd_maxsleep_us": 100}
    assert restart_fields(a, b) == []
    # and back: b's values, None (unset) included
    assert in_place_difference(b, a) == {
        "ovs.pmd_cpu_mask": None, "ovs.n_rxq": 1, "ovs.emc_insert_inv_prob": None,
        "ovs.smc_enable": False, "ovs.rules": 0, "ovs.pmd_maxsleep_us": None}


@pytest.mark.parametrize("b,fields", [
    (_ovs(pmd_cores=2), ["ovs.pmd_cores"]),                       # the CPU plan moves
    (_ovs(pmd_cores=1, ht=True), ["ovs.pmd_cores", "ovs.ht"]),
    (_ovs(socket_mem_mb=1024), ["ovs.socket_mem_mb"]),
    (_ovs(n_rxq_desc=2048, rules=10), ["ovs.n_rxq_desc"]),         # one field spoils it
    (TopologySpec(kind="p-ovs-p", port_kind="af_packet", ovs={"socket_mem_mb": 512}), ["port_kind"]),
    (TopologySpec(kind="pvp", port_kind="vhost", ovs={"socket_mem_mb": 512}), ["kind"]),
    (_ovs(bridges=2), ["ovs.bridges"]),
])
def test_what_needs_a_restart(b, fields) -> None:
    a = _ovs()
    assert in_place_difference(a, b) is None
    assert restart_fields(a, b) == fields


def test_dut_differs_names_dut() -> None:
    a = TopologySpec(kind="p-ovs-p", port_kind="af_packet")
    b = TopologySpec(kind="p-ovs-p", port_kind="af_packet", dut="ovs-system")
    assert in_place_difference(a, b) is None and restart_fields(a, b) == ["dut"]
    reason = restart_reason(a, b)
    assert reason is not None and reason.startswith("dut ('ovs-dpdk' -> 'ovs-system') differs; "
                                                    "ovs-dpdk changes in place only ovs.emc")


def test_vnf_kind_and_vnf_options_restart() -> None:
    a = TopologySpec(kind="pvp", port_kind="vhost")
    assert restart_fields(a, TopologySpec(kind="pvp", port_kind="vhost", vnf="vm")) == ["vnf"]
    b = TopologySpec(kind="pvp", port_kind="vhost", testpmd={"rxd": 2048}, ovs={"rules": 8})
    assert in_place_difference(a, b) is None and restart_fields(a, b) == ["testpmd.rxd"]


def test_memif_keeps_the_pmd_mask_for_a_restart() -> None:
    a = TopologySpec(kind="p-ovs-p", port_kind="memif")
    b = TopologySpec(kind="p-ovs-p", port_kind="memif", ovs={"pmd_cpu_mask": "0x2", "n_rxq": 2})
    assert restart_fields(a, b) == ["ovs.pmd_cpu_mask"]
    assert in_place_difference(a, TopologySpec(kind="p-ovs-p", port_kind="memif",
                                               ovs={"n_rxq": 2})) == {"ovs.n_rxq": 2}


def test_an_attached_ovs_changes_only_its_own_ports_and_rules() -> None:
    a = _ovs(existing_db="/run/openvswitch/db.sock")
    b = _ovs(existing_db="/run/openvswitch/db.sock", rules=64, n_rxq=2, smc_enable=True)
    assert restart_fields(a, b) == ["ovs.smc_enable"]
    c = _ovs(existing_db="/run/openvswitch/db.sock", rules=64, n_rxq=2)
    assert in_place_difference(a, c) == {"ovs.n_rxq": 2, "ovs.rules": 64}


def test_testpmd_changes_nothing_in_place() -> None:
    a = TopologySpec(kind="p2p", dut="testpmd")
    b = TopologySpec(kind="p2p", dut="testpmd", testpmd={"rxd": 2048})
    assert in_place_difference(a, b) is None and restart_fields(a, b) == ["testpmd.rxd"]
    assert "changes nothing in place" in (restart_reason(a, b) or "")
    # an option section the DUT does not use still counts: the spec is another configuration
    assert restart_fields(a, TopologySpec(kind="p2p", dut="testpmd", ovs={"rules": 4})) == ["ovs.rules"]


def test_differences_keep_dict_options_whole() -> None:
    a = _ovs(vlan_translate={100: 200})
    assert differences(a, _ovs(vlan_translate={100: 300})) == {"ovs.vlan_translate": {100: 300}}


def test_every_declared_field_is_a_field_of_the_spec() -> None:
    load_adapters()
    from nfvperf.topo.inplace import _flat
    paths = set(_flat(TopologySpec()))
    for name, cls in DUT_REGISTRY.items():
        assert isinstance(cls.in_place, frozenset)
        assert cls.in_place <= paths, (name, cls.in_place - paths)
    assert DUT_REGISTRY["ovs-dpdk"].in_place == {
        "ovs.rules", "ovs.n_rxq", "ovs.pmd_cpu_mask", "ovs.emc_insert_inv_prob",
        "ovs.smc_enable", "ovs.pmd_maxsleep_us"}
    assert DUT_REGISTRY["testpmd"].in_place == frozenset()
    assert DUT_REGISTRY["linux-bridge"].in_place == frozenset()


# --------------------------------------------------------------------------- adapter contract
def _adapter(tmp_path, **spec: Any) -> OvsDpdk:
    return OvsDpdk(RunContext("nfv0ip0aa", tmp_path / "run"), None, cpus=[1],
                   spec=OvsSpec(socket_mem_mb=512, **spec))


def test_adapter_refuses_a_field_it_cannot_change(tmp_path) -> None:
    dut = _adapter(tmp_path)
    with pytest.raises(ValueError, match=r"ovs-dpdk cannot change ovs.pmd_cores, ovs.socket_mem_mb "
                                         r"while running \(it changes in place: ovs.emc"):
        dut.reconfigure({"ovs.socket_mem_mb": 1024, "ovs.pmd_cores": 2, "ovs.rules": 4})
    assert dut.reconfigure({}) == {}
    with pytest.raises(ValueError, match="not running"):
        dut.reconfigure({"ovs.rules": 4})


class _Recorder:
    """Stands in for OVS: records ovs-vsctl calls, answers pmd-rxq-show from the options set."""

    def __init__(self, dut: OvsDpdk) -> None:
        self.dut, self.calls = dut, []
        self.cores = [1]
        self.rxq = {p.name: 1 for p in dut.ovs_ports.values() if p.kind == "dpdk"}

    def vsctl(self, *args: str, wait: bool = True, timeout: float = 30.0) -> str:
        if args[:1] == ("get",):
            return "[]" if args[-1] == "error" else "1"
        self.calls.append(list(args))
        iface = None
        for i, a in enumerate(args):
            value = a.split("=", 1)[-1].strip('"')
            if a.startswith("other_config:pmd-cpu-mask="):
                bits = int(value, 16)
                self.cores = [c for c in range(bits.bit_length()) if bits >> c & 1]
            if a == "Interface":
                iface = args[i + 1]
            if a.startswith("options:n_rxq="):
                self.rxq[str(iface)] = int(value)
        return ""

    def pmd_rxq(self) -> str:
        lines = []
        for k, core in enumerate(self.cores):
            lines.append(f"pmd thread numa_id 0 core_id {core}:")
            lines.append("  isolated : false")
            for port, n in self.rxq.items():
                lines += [f"  port: {port:<16} queue-id: {q:>2} (enabled)   pmd usage:  0 %"
                          for q in range(n) if q % len(self.cores) == k]
        return "\n".join(lines)


def test_ovs_steps_other_config_queues_and_rules(tmp_path, monkeypatch) -> None:
    dut = _adapter(tmp_path, emc_insert_inv_prob=10)
    dut.started, dut.bridges = True, ["br0"]
    dut.ovs_ports = {
        "p0": OvsPort("p0", "dpdk", "br0", 1, {"dpdk-devargs": "net_af_packet0,iface=d0,qpairs=1,"
                                                                "blocksz=4096", "n_rxq": "1"}),
        "v0": OvsPort("v0", "dpdkvhostuserclient", "br0", 2, {"vhost-server-path": "/s"})}
    rec = _Recorder(dut)
    for name in ("vsctl", "pmd_rxq"):
        monkeypatch.setattr(dut, name, getattr(rec, name))
    monkeypatch.setattr(dut, "_ofport", lambda name, timeout=10.0: dut.ovs_ports[name].ofport)
    programmed: list[Any] = []

    def program(flows: list[str]) -> None:
        programmed.append(flows)
        dut.rule_installs.append(RuleInstall("br0", len(flows), 0.1, "bundle", 1, len(flows)))

    monkeypatch.setattr(dut, "program", program)
    dut.forwarding = lambda: [f"rules={dut.spec.rules}"]
    done = dut.reconfigure({"ovs.emc_insert_inv_prob": None, "ovs.smc_enable": True,
                            "ovs.pmd_cpu_mask": "0x1", "ovs.n_rxq": 2, "ovs.rules": 64})
    # other_config in one transaction: set what a start would set now, remove what it would not
    assert rec.calls[0] == ["set", "Open_vSwitch", ".", 'other_config:pmd-cpu-mask="0x1"',
                            'other_config:smc-enable="true"', "--", "remove", "Open_vSwitch",
                            ".", "other_config", "emc-insert-inv-prob"]
    # the dpdk port gets n_rxq and a vdev with 2 queue pairs; the vhost port is left alone
    assert rec.calls[1] == ["set", "Interface", "p0", 'options:n_rxq="2"',
                            'options:dpdk-devargs="net_af_packet0,iface=d0,qpairs=2,blocksz=4096"']
    assert programmed == [["rules=64"]] and done["ovs.rules"]["rule_install"]["installed"] == 1
    assert done["pmd_threads"] == [0]
    assert done["ovs.n_rxq"]["ports"] == {"p0": {"queues": [0, 1], "ofport": 1}}
    assert done["ovs.emc_insert_inv_prob"] == {"from": 10, "to": None}
    assert dut.spec.n_rxq == 2 and dut.pmd_cpu_mask == "0x1" and dut.spec.rules == 64
    assert dut.reconfigurations[-1]["changes"]["ovs.n_rxq"] == 2
    # back to the plan's CPUs: pmd_cpu_mask unset -> the dut CPUs [1], as a start computes it
    dut.reconfigure({"ovs.pmd_cpu_mask": None})
    assert rec.calls[-1] == ["set", "Open_vSwitch", ".", 'other_config:pmd-cpu-mask="0x2"']
    # a forwarding source that says rules do not shape this topology: recorded, nothing installed
    dut.forwarding = lambda: None
    assert "does not shape" in dut.reconfigure({"ovs.rules": 0})["ovs.rules"]["note"]
    assert programmed == [["rules=64"]]


def test_memif_refuses_a_new_pmd_mask(tmp_path) -> None:
    dut = _adapter(tmp_path)
    dut.started, dut.phy_ends = True, (MemifEnd,)
    with pytest.raises(ValueError, match="port_kind memif"):
        dut.reconfigure({"ovs.pmd_cpu_mask": "0x2"})


def test_parsers() -> None:
    assert requeue_devargs("net_af_xdp0,iface=x,start_queue=0,queue_count=1", 4) == \
        "net_af_xdp0,iface=x,start_queue=0,queue_count=4"
    assert requeue_devargs("0000:03:00.0", 4) == "0000:03:00.0"
    text = ("Displaying last 60 seconds pmd usage %\n"
            "pmd thread numa_id 0 core_id 1:\n  isolated : false\n"
            "  port: p0                queue-id:  0 (enabled)   pmd usage:  0 %\n"
            "  port: p0                queue-id:  1 (enabled)   pmd usage:  0 %\n"
            "  overhead:  0 %\n"
            "pmd thread numa_id 0 core_id 3:\n  isolated : false\n"
            "  port: p1                queue-id:  0 (enabled)   pmd usage: NOT AVAIL\n")
    assert parse_pmd_rxq(text) == {"pmds": {1: [["p0", 0], ["p0", 1]], 3: [["p1", 0]]},
                                   "ports": {"p0": [0, 1], "p1": [0]}}


# --------------------------------------------------------------------------- Topology.reconfigure
class _FakeDut:
    in_place = OvsDpdk.in_place

    def __init__(self) -> None:
        self.got: list[dict[str, Any]] = []

    def reconfigure(self, changes: dict[str, Any]) -> dict[str, Any]:
        self.got.append(changes)
        if "ovs.smc_enable" in changes:
            raise ValueError("refused")
        if "ovs.n_rxq" in changes and changes["ovs.n_rxq"] == 8:
            raise RuntimeError("OVS broke")
        return {"ok": True}


def test_topology_reconfigure(tmp_path) -> None:
    a = _ovs()
    topo = build(a, RunContext("nfv0ip0bb", tmp_path / "run"), start_tgen=False)
    with pytest.raises(TopologyError, match="not up"):
        topo.reconfigure(_ovs(rules=4))
    topo.up, topo.dut = True, _FakeDut()
    b = _ovs(rules=4, n_rxq=2)
    assert topo.reconfigure(b) == {"changes": {"ovs.n_rxq": 2, "ovs.rules": 4}, "dut": {"ok": True}}
    assert topo.spec is b
    assert topo.reconfigure(_ovs(rules=4, n_rxq=2)) == {}
    with pytest.raises(RestartRequired, match=r"cannot change in place: ovs.pmd_cores \(None -> 2\) "
                                              r"differs; ovs-dpdk changes in place only") as ei:
        topo.reconfigure(_ovs(pmd_cores=2))
    assert ei.value.fields == ["ovs.pmd_cores"] and topo.spec.ovs.rules == 4
    # the adapter refuses before applying: a restart, spec unchanged
    with pytest.raises(RestartRequired, match="refused"):
        topo.reconfigure(_ovs(rules=4, n_rxq=2, smc_enable=True))
    # it fails part-way: the error says the DUT may be half-changed
    with pytest.raises(TopologyError, match="may be half-changed .* OVS broke"):
        topo.reconfigure(_ovs(rules=4, n_rxq=8))
    assert topo.spec.ovs.n_rxq == 2
