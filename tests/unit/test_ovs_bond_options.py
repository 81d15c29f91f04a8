"""OVS bonds on p-ovs-p (seed 003's bonding cases): the options and their refusals (one member,
balance-tcp without an LACP partner, other kinds and DUTs), the rules and ovs-vsctl transaction
the topology makes, the hash basis that gives each generator MAC its own bucket, bond/show
parsing, and the generator's receive groups (tgen ``rx_ports``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from nfvperf.dut.base import PortRef, VhostBackend
from nfvperf.dut.ovs_dpdk import OvsDpdk
from nfvperf.dut.ovs_spec import OvsSpec, bond_refusal
from nfvperf.dut.ovs_ports import parse_bond_show
from nfvperf.topo.p_ovs_p import PhyOvsPhy
from nfvperf.topo.spec import TopologySpec


def test_bond_modes_that_can_be_measured() -> None:
    for mode in ("balance-slb", "active-backup"):
        assert OvsSpec(bond_mode=mode).bond_mode == mode
        assert bond_refusal(mode, "off", False) is None
    s = OvsSpec(bond_mode="balance-slb", bond_rebalance_ms=0, bridges=2, vlan_translate={100: 200})
    assert OvsDpdk.describe_options(s.model_dump()) == ["2 bridges (patch ports)", "VLAN 100->200",
                                                         "bond balance-slb"]


@pytest.mark.parametrize("kw,field,words", [
    # OVS balances TCP bonds only with negotiated LACP, and drops everything without it
    ({"bond_mode": "balance-tcp"}, "topology.ovs.bond_lacp: off", ["drops every frame", "balance-slb"]),
    # tgen is no LACP partner: OVS disables the bond, or falls back to active-backup
    ({"bond_mode": "balance-tcp", "bond_lacp": "active"}, "topology.ovs.bond_lacp: active",
     ["does not speak LACP", "disables the bond"]),
    ({"bond_mode": "balance-tcp", "bond_lacp": "active", "lacp_fallback_ab": True},
     "topology.ovs.bond_lacp: active", ["bond_mode: active-backup"]),
    ({"bond_mode": "balance-slb", "bond_lacp": "passive"}, "topology.ovs.bond_lacp: passive", ["LACP"]),
    ({"bond_lacp": "active"}, "bond_lacp, lacp_fallback_ab and bond_rebalance_ms", ["give bond_mode"]),
    ({"bond_mode": "balance-slb", "rules": 16}, "bond_mode and rules", ["NORMAL"]),
    ({"bond_mode": "balance-xor"}, "bond_mode", ["active-backup", "balance-slb"]),
])
def test_bond_refusals_name_the_field(kw: dict[str, Any], field: str, words: list[str]) -> None:
    with pytest.raises(ValidationError) as ei:
        OvsSpec(**kw)
    msg = str(ei.value)
    assert field in msg and all(w in msg for w in words), msg


def test_a_bond_of_one_member_is_refused_before_anything_starts() -> None:
    with pytest.raises(ValidationError) as ei:
        TopologySpec(kind="p-ovs-p", ports=2, port_kind="vhost", ovs={"bond_mode": "balance-slb"})
    msg = str(ei.value)
    assert "topology.ports" in msg and "gives 1 member per bond" in msg and "ports: 4" in msg, msg
    with pytest.raises(ValidationError, match="topology.ports"):
        TopologySpec(kind="p-ovs-p", ports=5, port_kind="vhost", ovs={"bond_mode": "active-backup"})
    ok = TopologySpec(kind="p-ovs-p", ports=4, port_kind="vhost", ovs={"bond_mode": "balance-slb"})
    assert ok.ovs.bond_mode == "balance-slb"


def test_bonds_only_on_p_ovs_p_with_ovs_dpdk() -> None:
    with pytest.raises(ValidationError, match="built by kind p-ovs-p"):
        TopologySpec(kind="pvp", ports=4, port_kind="vhost", ovs={"bond_mode": "balance-slb"})
    with pytest.raises(ValidationError, match="built by dut ovs-dpdk, not ovs-system"):
        TopologySpec(kind="p-ovs-p", dut="ovs-system", ports=4, ovs={"bond_mode": "balance-slb"})


def test_suite_validation_refuses_the_one_member_bond() -> None:
    from nfvperf.config import SuiteError
    from nfvperf.suite_load import validate_suite
    base = {"name": "t", "topology": {"kind": "p-ovs-p", "port_kind": "vhost",
                                      "ovs": {"bond_mode": "balance-slb"}},
            "traffic": {"frame_sizes": [64]}, "tests": [{"method": "throughput"}]}
    with pytest.raises(SuiteError) as ei:
        validate_suite(base)
    assert any("topology.ports" in p and "a bond needs two or more" in p for p in ei.value.problems), \
        ei.value.problems
    ok = dict(base, topology=dict(base["topology"], ports=4))
    assert validate_suite(ok).tests[0].topology.ovs.bond_mode == "balance-slb"


def _topo(tmp_path: Path, **ovs: Any) -> PhyOvsPhy:
    """A p-ovs-p of 4 vhost ports, not brought up (its ports as the vhost kind would make them)."""
    from nfvperf.host.run import RunContext
    from nfvperf.topo import build
    from nfvperf.topo.base import HostPort
    spec = TopologySpec(kind="p-ovs-p", ports=4, port_kind="vhost", ovs={"socket_mem_mb": 512, **ovs})
    topo = build(spec, RunContext("bd0", tmp_path))
    assert isinstance(topo, PhyOvsPhy)
    topo.ports = [HostPort(i, "vhost", mtu=1500, tg_mac=f"02:00:00:00:a0:{i:02x}") for i in range(4)]
    return topo


def test_bond_sides_groups_and_directions(tmp_path: Path) -> None:
    slb = _topo(tmp_path, bond_mode="balance-slb")
    assert slb.bond_sides() == [[0, 2], [1, 3]]
    assert slb.rx_groups() == [[0, 2], [1, 3]]
    assert slb.tg_pairs() == [(0, 1), (2, 3)]
    assert slb.forwarding_flows() is None           # NORMAL, installed by wire_bonds
    # active-backup admits frames only on the active member: only the primaries send
    ab = _topo(tmp_path, bond_mode="active-backup")
    assert ab.tg_pairs() == [(0, 1)] and ab.rx_groups() == [[0, 2], [1, 3]]
    plain = _topo(tmp_path)
    assert plain.rx_groups() == [] and plain.tg_pairs() == [(0, 1), (2, 3)]


def test_bond_rules() -> None:
    assert PhyOvsPhy._bond_rules([1, 3, 2, 4], None, {}) == [
        "priority=100,idle_timeout=0,actions=NORMAL"]
    # one bridge, VLAN translation: every member rewrites at ingress, then NORMAL
    assert PhyOvsPhy._bond_rules([1, 3], None, {100: 200}) == [
        "priority=200,in_port=1,dl_vlan=100,idle_timeout=0,actions=mod_vlan_vid:200,NORMAL",
        "priority=200,in_port=3,dl_vlan=100,idle_timeout=0,actions=mod_vlan_vid:200,NORMAL"]
    # two bridges: the patch port passes only the rewritten tag
    assert PhyOvsPhy._bond_rules([1, 3], 100, {100: 200})[-1] == \
        "priority=200,in_port=100,dl_vlan=200,idle_timeout=0,actions=NORMAL"


class FakeOvs(OvsDpdk):
    """OvsDpdk whose ovs-vsctl / ovs-appctl calls are recorded, not run."""

    def __init__(self, tmp_path: Path, buckets: dict[tuple[str, str, str], int]):
        from nfvperf.host.run import RunContext
        super().__init__(RunContext("bd1", tmp_path), spec=OvsSpec(bond_mode="balance-slb"))
        self.calls: list[tuple[str, ...]] = []
        self.buckets = buckets

    def vsctl(self, *args: str, wait: bool = True, timeout: float = 30.0) -> str:
        self.calls.append(("vsctl", *args))
        return ""

    def appctl(self, *args: str, timeout: float = 15.0) -> str:
        self.calls.append(("appctl", *args))
        if args[0] == "bond/hash":
            return f"{self.buckets.get(tuple(args[1:]), hash(args[1:]) & 0xff)}\n"
        return ""

    def ofctl(self, cmd: str, bridge: str, *args: str, timeout: float = 30.0) -> str:
        self.calls.append(("ofctl", cmd, bridge, *args))
        return ""

    def _ofport(self, name: str, timeout: float = 10.0) -> int:
        return int(name[-1]) + 1


def test_add_bond_is_one_transaction_with_each_members_interface(tmp_path: Path) -> None:
    ovs = FakeOvs(tmp_path, {})
    members = [(PortRef(f"phy{i}", VhostBackend(client=True), socket=Path(f"/s/vhu{i}.sock"),
                        mtu=9000), i + 1, i) for i in (1, 3)]
    ofports = ovs.add_bond("br0", "bond1", members, "active-backup",
                           other_config={"bond-primary": "phy1"})
    assert ofports == [2, 4]
    (call,) = [c for c in ovs.calls if c[0] == "vsctl"]
    args = list(call[1:])
    assert args[:6] == ["--may-exist", "add-bond", "br0", "bond1", "phy1", "phy3"]
    text = " ".join(args)
    for i in (1, 3):
        assert (f"set Interface phy{i} type=dpdkvhostuserclient "
                f'options:vhost-server-path="/s/vhu{i}.sock" ofport_request={i + 1} mtu_request=9000') in text
    assert 'set Port bond1 bond_mode=active-backup lacp=off other_config:bond-primary="phy1"' in text
    assert ovs.ovs_ports["phy3"].ofport == 4 and ovs.bonds["bond1"]["members"] == ["phy1", "phy3"]
    with pytest.raises(Exception, match="two or more members"):
        ovs.add_bond("br0", "bond2", members[:1], "balance-slb")


def test_slb_hash_basis_separates_the_generator_macs(tmp_path: Path) -> None:
    topo = _topo(tmp_path, bond_mode="balance-slb")
    a0, a2 = "02:00:00:00:a0:00", "02:00:00:00:a0:02"
    # basis 0: both MACs of side A in bucket 7 (one member would carry everything); basis 1 not
    ovs = FakeOvs(tmp_path, {(a0, "0", "0"): 7, (a2, "0", "0"): 7, (a0, "0", "1"): 7, (a2, "0", "1"): 9})
    assert topo.slb_hash_basis(ovs, [0, 2], [0]) == 1
    # with VLAN translation the bucket of the output VLAN counts too
    ovs = FakeOvs(tmp_path, {(a0, "0", "0"): 1, (a2, "0", "0"): 2, (a0, "200", "0"): 5,
                             (a2, "200", "0"): 5, (a0, "0", "1"): 1, (a2, "0", "1"): 2,
                             (a0, "200", "1"): 5, (a2, "200", "1"): 6})
    assert topo.slb_hash_basis(ovs, [0, 2], [0, 200]) == 1
    ovs = FakeOvs(tmp_path, {(a0, "0", "0"): 1, (a2, "0", "0"): 2})
    assert topo.slb_hash_basis(ovs, [0, 2], [0]) == 0
    topo.ports[2].tg_mac = None            # MACs unknown here (NICs): OVS's default basis
    assert topo.slb_hash_basis(ovs, [0, 2], [0]) == 0


SHOW = """---- nfvbond1 ----
bond_mode: balance-slb
bond may use recirculation: no, Recirc-ID : -1
bond-hash-basis: 0
lacp_status: off
lacp_fallback_ab: false
active-backup primary: <none>
active member mac: 00:00:00:00:00:00(phy1)

member phy1: enabled
  active member
  may_enable: true
  hash 158: 1205 kB load

member phy3: disabled
  may_enable: true
  hash 248: 1160 kB load
  hash 12: 3 kB load
"""


def test_parse_bond_show() -> None:
    st = parse_bond_show(SHOW)
    assert st["bond_mode"] == "balance-slb" and st["lacp_status"] == "off"
    assert st["active_member"] == "phy1" and st["primary"] == "<none>"
    assert st["members"] == {"phy1": {"enabled": True, "active": True, "hashes": [158]},
                             "phy3": {"enabled": False, "active": False, "hashes": [248, 12]}}


class _Proc:
    ports: list = []

    def __init__(self) -> None:
        self.added: list[dict[str, Any]] = []

    def rpc(self, method: str, **kw: Any) -> Any:
        return {}

    def call(self, method: str, params: Any = None, timeout_s: Any = None) -> Any:
        self.added.append(params)
        return {"stream_id": len(self.added) - 1}


def test_measurer_streams_name_their_receive_group() -> None:
    from nfvperf.tg.tgen import TgenMeasurer
    from nfvperf.trial import TrafficProfile
    proc = _Proc()
    m = TgenMeasurer(proc, [(0, 1), (2, 3)], rx_groups=[[0, 2], [1, 3]])  # type: ignore[arg-type]
    m.set_profile(TrafficProfile(bidirectional=True, flows_per_port=256))
    got = [(s["port"], s["rx_port"], s["rx_ports"], s["name"]) for s in proc.added]
    assert got == [(0, 1, [1, 3], "p0->p1+3"), (2, 3, [3, 1], "p2->p3+1"),
                   (1, 0, [0, 2], "p1->p0+2"), (3, 2, [2, 0], "p3->p2+0")]
    # without groups: no rx_ports field (an older tgen refuses unknown fields)
    proc2 = _Proc()
    TgenMeasurer(proc2, [(0, 1)]).set_profile(TrafficProfile())  # type: ignore[arg-type]
    assert all("rx_ports" not in s for s in proc2.added)
    with pytest.raises(ValueError, match="port 2 is in groups 0 and 1"):
        TgenMeasurer(proc, [(0, 1)], rx_groups=[[0, 2], [2, 3]])  # type: ignore[arg-type]


def test_measurer_result_carries_the_members_counts() -> None:
    from nfvperf.tg.tgen import TgenMeasurer
    from nfvperf.trial import TrafficProfile
    proc = _Proc()
    m = TgenMeasurer(proc, [(0, 1)], rx_groups=[[1, 3]])  # type: ignore[arg-type]
    m.set_profile(TrafficProfile(bidirectional=False))
    raw = {"streams": [{"id": 0, "name": "p0->p1+3", "tx_port": 0, "rx_port": 1, "rx_ports": [1, 3],
                        "rx_by_port": {"1": 600, "3": 400}, "sent": 1000, "received": 1000,
                        "lost": 0, "misrouted": 0, "intended_frames": 1000}],
           "ports": [], "effective_duration_s": 1.0}
    r = m._convert(raw, 1.0, 1000.0, [1000])
    (s,) = r.streams
    assert s.rx_ports == [1, 3] and s.rx_by_port == {"1": 600, "3": 400} and s.lost == 0
    assert r.valid and r.to_dict()["streams"][0]["rx_by_port"] == {"1": 600, "3": 400}


def test_active_backup_aggregate_counts_the_primaries_only() -> None:
    """The report's aggregate is per-interface load x transmitting interfaces: with
    active-backup bonds only the primaries send (2 of 4 ports, bidirectional)."""
    from nfvperf.topo import tx_pairs
    from nfvperf.units import directions
    ab = TopologySpec(kind="p-ovs-p", ports=4, port_kind="vhost", ovs={"bond_mode": "active-backup"})
    slb = TopologySpec(kind="p-ovs-p", ports=4, port_kind="vhost", ovs={"bond_mode": "balance-slb"})
    assert tx_pairs(ab) == 1 and tx_pairs(slb) == 2 and tx_pairs(TopologySpec(ports=4)) == 2
    assert directions({"bidirectional": True}, 4, tx_pairs(ab)) == 2
    assert directions({"bidirectional": False}, 4, tx_pairs(ab)) == 1
    assert directions({"bidirectional": True}, 4, tx_pairs(slb)) == 4 == directions({}, 4)
