"""PHY-OVS-PHY (seed 000 §7.2): tgen port i <-> veth <-> OVS-DPDK dpdk port <-> ... <-> tgen port i+1.

OVS runs in the DUT namespace ``<tag>-dut`` where the DUT ends of the veth pairs live; its bridge
cross-connects port pairs with the seed reports' rules (``in_port=1,dl_type=0x800,actions=output:2``
and back).  With ``ovs.rules: N`` (rule complexity, seed 004 §6) every direction instead gets N
rules matching (src IP, dst IP) = (base + i, base + i), 1:1 with tgen's flows, and no catch-all,
so a flow without a rule is dropped (visible as loss).  One switching operation per frame.

The same building blocks serve pvp / pvvp / vxlan (``OvsTopology``).
"""
from __future__ import annotations

import importlib
import ipaddress
from typing import Any, ClassVar, Optional, Sequence

from nfvperf.dut.base import DUT_REGISTRY, DutAdapter, Flow, PortEnd, PortRef, VhostBackend, VhostFrontend, dut_class
from nfvperf.dut.vswitch import VSwitch
from nfvperf.host import netns as N
from nfvperf.topo import register
from nfvperf.topo.base import Topology, TopologyError
from nfvperf.dut.ovs_spec import OvsSpec
from nfvperf.topo.spec import TopologySpec

#: tgen's stream addresses; the rules and stream_params use the same bases
SRC_IP = "198.18.0.1"
DST_IP = "198.19.0.1"


def flow_ips(n: int, src: str = SRC_IP, dst: str = DST_IP) -> list[tuple[str, str]]:
    """The (src, dst) IPs of tgen's flows 0..n-1 when it varies both (``vary: [src_ip, dst_ip]``)."""
    s, d = ipaddress.ip_address(src), ipaddress.ip_address(dst)
    if s.version == d.version == 4 and int(s) + n <= 1 << 32 and int(d) + n <= 1 << 32:
        # integer arithmetic: ~10x faster than IPv4Address objects (seed 004: 2M rules)
        a, b = int(s), int(d)
        return [(_v4(a + i), _v4(b + i)) for i in range(n)]
    return [(str(s + i), str(d + i)) for i in range(n)]


def _v4(x: int) -> str:
    return f"{x >> 24}.{x >> 16 & 255}.{x >> 8 & 255}.{x & 255}"


class OvsTopology(Topology):
    """Shared by the OVS topologies: DUT namespace, PHY ports of the spec's port kind (veth,
    vhost-user, PCI), the switch (a :class:`VSwitch`: OVS-DPDK, kernel OVS, or a plugin's)."""

    #: VNFs per generator port pair (pvp 1, pvvp 2, vxlan 1)
    n_vnfs = 0
    duts: ClassVar[Optional[tuple[str, ...]]] = ("ovs-dpdk",)
    #: ``topology.vnf`` -> (module, class) of the VNF: testpmd in a container or in a QEMU guest
    VNF_CLASSES = {"container": ("nfvperf.dut.testpmd", "TestpmdVnf"),
                   "vm": ("nfvperf.vm.qemu", "VmVnf")}

    @classmethod
    def vnf_class(cls, spec: TopologySpec) -> type[DutAdapter]:
        mod, name = cls.VNF_CLASSES[spec.vnf]
        return getattr(importlib.import_module(mod), name)

    @classmethod
    def vnf_classes_for(cls, spec: Any) -> list[type[DutAdapter]]:
        """One VNF class per VNF: ``n_vnfs`` per generator port pair."""
        return [cls.vnf_class(spec)] * (cls.n_vnfs * max(1, spec.ports // 2))

    @classmethod
    def spec_refusal(cls, spec: TopologySpec) -> Optional[str]:
        """Bonds are p-ovs-p's (:class:`PhyOvsPhy`)."""
        mode = spec.ovs.bond_mode
        if mode and cls.kind != "p-ovs-p":
            return (f"topology.ovs.bond_mode: {mode} bonds are built by kind p-ovs-p (two bonds, "
                    f"one per side), not {cls.kind}")
        return None

    def tcp_refusal(self) -> Optional[str]:
        if int(self.ovs_spec().rules or 0):
            return ("ovs.rules matches tgen's flow addresses only; TCP endpoints need the in_port "
                    "cross-connect (ovs.rules: 0)")
        return None

    def cpu_demands(self) -> dict[str, int]:
        """One polling CPU for the OVS PMD, one per VNF, one for tgen (in that priority)."""
        vnfs = {f"vnf{j}": 1 for j in range(self.n_vnfs * max(1, self.spec.ports // 2))}
        return {"dut": int(self.dut_class().polling_cpus), **vnfs, "tgen": 1}

    def ovs_spec(self) -> OvsSpec:
        return self.spec.ovs

    def switch(self) -> VSwitch:
        """The DUT as the :class:`VSwitch` the topology drives."""
        if not isinstance(self.dut, VSwitch):
            raise TopologyError(f"{self.kind} drives a vSwitch (nfvperf.dut.vswitch.VSwitch); "
                                f"topology.dut {self.spec.dut} is none")
        return self.dut

    def setup_ovs(self, attach_phys: bool = True) -> VSwitch:
        """DUT netns + PHY ports + the switch (not started) with the PHY ports on its first
        bridge (ofport = index + 1) unless ``attach_phys`` is False."""
        if self.dut_host.remote or self.ovs_spec().existing_db:
            # the DUT's ends of the cabled links are in the DUT host's own namespace, and an OVS
            # that is already running sees the host's namespace: the DUT ends stay there
            self.dut_netns = None
        else:
            self.dut_netns = self.make_netns("dut")
            # OVS's bridge ports are taps in this namespace: no IPv6 chatter from them to the ports
            N.run_in_netns(self.dut_netns, ["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                                            "net.ipv6.conf.default.disable_ipv6=1"], check=False)
        self.add_ports_from_spec(dut_netns=self.dut_netns)
        self.make_dut(self.spec.dut, netns=self.dut_netns)
        dut = self.switch()
        gen_vhost = [p.dut_portref().name for p in self.ports if isinstance(p.dut_portref().end, VhostBackend)]
        if gen_vhost and self.want_tgen and not self.dut_host.remote:
            # OVS gets each generator socket's path once tgen listens on it (start_tgen)
            dut.defer_vhost_connect(gen_vhost)
        # the rule set for the current spec, which an in-place ovs.rules change installs
        dut.set_forwarding(self.forwarding_flows)
        if attach_phys:
            for p in self.ports:
                dut.add_port(p.dut_portref())
        return dut

    def add_vnf(self, dut: VSwitch, name: str) -> tuple[int, int]:
        """A VNF on two ``dpdkvhostuserclient`` ports of the first bridge, as vhost-user server:
        testpmd in a container (``TestpmdVnf``) or, with ``vnf: vm``, in a QEMU guest (``VmVnf``,
        which boots once OVS has connected: see :meth:`wait_vnfs_ready`).  Returns the two port
        indices."""
        socks = [dut.vhost_socket(f"{name}-{k}") for k in range(2)]
        names = [f"{name}-vhu{k}" for k in range(2)]
        if not self.dut_host.remote:
            # OVS gets each socket's path as the VNF listens on it (below, while it starts)
            dut.defer_vhost_connect(names)
        # OVS first: virtio-user in server mode waits for its client while it starts
        idx = [dut.add_port(PortRef(n, VhostFrontend(), socket=s, mtu=self.spec_mtu()))
               for n, s in zip(names, socks)]
        # the VNF reads its own options from the spec (a container testpmd: virtqueues of
        # testpmd.vnf_queue_size, default 1024, DPDK's own is 256: a VNF on a shared CPU is
        # descheduled for milliseconds, the vring is what OVS queues meanwhile)
        assert self.tracker is not None  # bring_up() creates it before setup()
        # on a testbed the VNF runs on the DUT host, next to OVS and its sockets
        where: dict[str, Any] = {"host": self.dut_host} if self.dut_host.remote else {}
        vnf = self.vnf_class(self.spec)(self.run, self.tracker, sockets=socks, server=True,
                                        name=name, plan=self.plan, spec=self.spec, **where)
        dut.connect_while(vnf.start, names)
        self.vnfs.append(vnf)
        return idx[0], idx[1]

    def start_tgen(self) -> None:
        """Start the generator; the switch connects its deferred generator-facing vhost-user
        ports as tgen listens on each (:meth:`VSwitch.connect_while`)."""
        self.switch().connect_while(super().start_tgen)

    def wait_vnfs_ready(self, dut: VSwitch) -> None:
        """VM VNFs boot after OVS connected to them; then every vhost port must come up."""
        for v in self.vnfs:
            if hasattr(v, "wait_ready"):
                v.wait_ready()
        self.wait_vhost_up(dut)

    def reset_dut(self) -> None:
        """RFC 6201 reset: OVS restarts with its ports and rules; the VNFs keep running and OVS
        reconnects to their sockets (waited for here)."""
        super().reset_dut()
        if self.vnfs and self.dut is not None:
            self.wait_vnfs_ready(self.switch())
        if self.dut is not None and self.tgen is not None:
            # OVS reconnects to the generator's vhost-user sockets (port_kind vhost)
            self.wait_vhost_up(self.switch(), ends=(VhostBackend,))

    def wait_vhost_up(self, dut: VSwitch, timeout_s: float = 20.0,
                      ends: tuple[type[PortEnd], ...] = (VhostFrontend,)) -> None:
        """OVS connects to the VNF sockets asynchronously; wait until every vhost port of the
        PortRef ``ends`` is up (the VNFs' ``VhostFrontend``; the generator's ``VhostBackend``
        ports come up only once tgen runs)."""
        self.wait_interfaces_up(dut, [p.name for p in dut.ports if isinstance(p.end, ends)], timeout_s,
                                "vhost-user ports")

    def wait_interfaces_up(self, dut: VSwitch, names: list[str], timeout_s: float, what: str = "ports") -> None:
        """Poll the switch until every port in ``names`` is up (:meth:`VSwitch.ports_down`; the
        DUT checked alive between polls); RuntimeError naming those still down after ``timeout_s``."""
        self.wait_none_down(lambda: dut.ports_down(names), timeout_s, lambda down: RuntimeError(
            f"{what} {down} not up after {timeout_s:.0f} s; switch log: {dut.log_tail()}"), 0.2)

    def direction_ips(self, index: int) -> tuple[str, str]:
        """Base (src, dst) IPs of direction ``index`` (forward pairs first, then the reverse)."""
        return (SRC_IP, DST_IP) if index < len(self.tg_pairs()) else (DST_IP, SRC_IP)

    def stream_params(self) -> Optional[list[dict[str, Any]]]:
        ips = [self.direction_ips(i) for i in range(2 * len(self.tg_pairs()))]   # both ways
        return [{"src_ip": src, "dst_ip": dst, "vary": ["src_ip", "dst_ip"]} for src, dst in ips]

    def forwarding_flows(self) -> Optional[list[Flow]]:
        """The first bridge's rules for the current spec, which depend on ``ovs.rules`` (what
        setup() programs, and an in-place ``ovs.rules`` change installs); None when ``ovs.rules``
        does not shape this topology's forwarding (vxlan, dual bridge)."""
        return None

    def path_flows(self, hops: Sequence[tuple[int, int]], direction: int) -> list[Flow]:
        """OpenFlow rules for one direction crossing OVS at ``hops`` [(in index, out index), ...]:
        the seed's in_port rules, or with ``ovs.rules`` N (src, dst) IP rules at the first hop."""
        n_rules = int(self.ovs_spec().rules or 0)
        flows: list[Flow] = []
        for k, (a, b) in enumerate(hops):
            if n_rules and k == 0:
                src, dst = self.direction_ips(direction)
                flows += [Flow(a, b, {"src_ip": s, "dst_ip": d})
                          for s, d in flow_ips(n_rules, src, dst)]
            else:
                flows.append(Flow(a, b))
        return flows


@register("p-ovs-p")
class PhyOvsPhy(OvsTopology):
    """PHY-OVS-PHY."""

    #: OVS-DPDK, or OVS on the kernel datapath ("native OvS", seed 000 §7.2.1)
    duts: ClassVar[Optional[tuple[str, ...]]] = ("ovs-dpdk", "ovs-system")
    base_switching_operations = 1
    testbed_ready = True

    def setup(self) -> None:
        bonds, bridges = self.bond_mode(), self.bridge_features()
        dut = self.setup_ovs(attach_phys=not bonds and (not bridges or self.n_bridges() == 1))
        dut.start()
        if bonds:
            self.wire_bonds(dut)
        elif bridges:
            self.wire_bridges(dut)
        else:
            dut.program(self.forwarding_flows())

    def forwarding_flows(self) -> Optional[list[Flow]]:
        """Each port pair cross-connected (or by ``ovs.rules`` IP rules); None with the dual
        bridge / VLAN translation, whose rules :meth:`wire_bridges` installs, and with bonds
        (:meth:`wire_bonds`)."""
        if self.bridge_features() or self.bond_mode():
            return None
        pairs = self.tg_pairs()
        flows: list[Flow] = []
        for i, (a, b) in enumerate(pairs):
            flows += self.path_flows([(a, b)], i)
            flows += self.path_flows([(b, a)], len(pairs) + i)
        return flows

    # -- seed 003: dual bridge (patch ports) and VLAN translation --------------------------------
    def n_bridges(self) -> int:
        return int(self.ovs_spec().bridges or 1)

    def bridge_features(self) -> bool:
        return self.n_bridges() > 1 or bool(self.ovs_spec().vlan_translate)

    def tcp_refusal(self) -> Optional[str]:
        if self.ovs_spec().vlan_translate:
            return "ovs.vlan_translate forwards only VLAN-tagged frames; TCP endpoints send untagged"
        return super().tcp_refusal()

    def wire_bridges(self, dut: VSwitch) -> None:
        """Ports, patch ports and rules of the dual-bridge / VLAN-translating p-ovs-p: with one
        bridge each port pair forwards ``in_port=a,dl_vlan=A -> mod_vlan_vid:B,output:b``; with
        two, PHY 0 sits on the first bridge and PHY 1 on the second, joined by patch ports, the
        ingress bridge rewrites A -> B and the egress bridge forwards only tag B (so a frame
        whose tag was not rewritten is dropped: the translation is seen to happen)."""
        vt = dict(self.ovs_spec().vlan_translate or {})
        if self.n_bridges() == 1:
            rules = []
            for a, b in self.tg_pairs():
                rules += self._hop_rules(dut.ofport(a), dut.ofport(b), vt, ingress=True)
                rules += self._hop_rules(dut.ofport(b), dut.ofport(a), vt, ingress=True)
            dut.program(rules)
            return
        if len(self.ports) != 2:
            raise TopologyError(f"ovs.bridges: 2 puts PHY port 0 and PHY port 1 on two bridges "
                                f"joined by patch ports: give ports: 2, not {len(self.ports)}")
        brs = [dut.bridges[0], dut.add_bridge()]
        phy, patch = [], []
        for k, br in enumerate(brs):
            phy.append(dut.attach_portref(self.ports[k].dut_portref(), br, ofport=1))
            patch.append(dut.add_patch(br, brs[1 - k], ofport=2))
        for k, br in enumerate(brs):
            dut.program(self._hop_rules(phy[k], patch[k], vt, ingress=True) +
                        self._hop_rules(patch[k], phy[k], vt, ingress=False), bridge=br)

    @staticmethod
    def _hop_rules(in_of: int, out_of: int, vt: dict[int, int], ingress: bool) -> list[str]:
        """ovs-ofctl rules for one hop: plain forwarding, or per translated VLAN: at the ingress
        rewrite the tag, at the egress forward only the rewritten tag."""
        if not vt:
            return [f"priority=100,in_port={in_of},idle_timeout=0,actions=output:{out_of}"]
        if ingress:
            return [f"priority=200,in_port={in_of},dl_vlan={a},idle_timeout=0,"
                    f"actions=mod_vlan_vid:{b},output:{out_of}" for a, b in vt.items()]
        return [f"priority=200,in_port={in_of},dl_vlan={b},idle_timeout=0,actions=output:{out_of}"
                for b in vt.values()]

    def reset_dut(self) -> None:
        """RFC 6201 reset; the dual-bridge wiring (second bridge, patch ports) and the bonds are
        redone."""
        bonds = self.bond_mode()
        if not bonds and (not self.bridge_features() or self.n_bridges() == 1):
            super().reset_dut()
            return
        assert self.dut is not None
        self.dut.stop()
        self.dut.start()
        if bonds:
            self.wire_bonds(self.switch())
            if self.tgen is not None:
                self.wait_bonds(self.switch())
            return
        self.wire_bridges(self.switch())
        if self.tgen is not None:
            self.wait_vhost_up(self.switch(), ends=(VhostBackend,))

    # -- seed 003: bonds ---------------------------------------------------------------------------
    @classmethod
    def spec_refusal(cls, spec: TopologySpec) -> Optional[str]:
        """A bond needs OVS-DPDK and two or more members per side (ports 0, 2, ... and 1, 3, ...)."""
        mode = spec.ovs.bond_mode
        if not mode:
            return None
        if not dut_class(spec.dut).builds_bonds:
            able = sorted(n for n, c in DUT_REGISTRY.items() if c.builds_bonds)
            return (f"topology.ovs.bond_mode: {mode} bonds are built by dut {', '.join(able)}, not "
                    f"{spec.dut}")
        n = int(spec.ports)
        if n < 4 or n % 2:
            per = n // 2
            return (f"topology.ports: bond_mode {mode} bonds ports 0, 2, ... on one side and 1, "
                    f"3, ... on the other; ports: {n} gives {per} member{'s' if per != 1 else ''} "
                    f"per bond, and a bond needs two or more: give ports: 4 (ports 0 and 2 form "
                    f"one bond, 1 and 3 the other)")
        return None

    def bond_mode(self) -> Optional[str]:
        return self.ovs_spec().bond_mode

    def bond_sides(self) -> list[list[int]]:
        """Port indices of the two bonds: [[0, 2, ...], [1, 3, ...]]."""
        n = len(self.ports) or int(self.spec.ports)
        return [list(range(0, n, 2)), list(range(1, n, 2))]

    def bond_names(self) -> list[str]:
        return [f"{self.run.tag}bond{k}" for k in range(2)]

    def rx_groups(self) -> list[list[int]]:
        """With bonds, each side's generator ports are one receive group: a frame may leave OVS
        by any member of the egress bond."""
        return self.bond_sides() if self.bond_mode() else []

    @classmethod
    def tx_pair_count(cls, spec: TopologySpec) -> int:
        if spec.ovs.bond_mode == "active-backup":
            return 1
        return super().tx_pair_count(spec)

    def tg_pairs(self) -> list[tuple[int, int]]:
        """Port pairs 0->1, 2->3 ...; an active-backup bond admits frames only on its active
        member (OVS drops what arrives on a backup), so there only the primaries (0 and 1)
        send, and every frame comes back on the other bond's primary."""
        if self.bond_mode() == "active-backup":
            return [(0, 1)]
        return super().tg_pairs()

    def wire_bonds(self, dut: VSwitch) -> None:
        """Two OVS bonds of the PHY ports (ports 0, 2, ... and 1, 3, ...; each member keeps OpenFlow
        port index + 1), on one bridge, or with ``bridges: 2`` one bond per bridge joined by patch
        ports (OpenFlow port 100).  Forwarding is OVS's NORMAL action (MAC learning), the only
        one that outputs through a bond's member choice; with ``vlan_translate`` each member's
        ingress rule rewrites the tag first, and with two bridges the patch port passes only the
        rewritten tag.  An active-backup bond's primary is
        its lowest port (``other_config:bond-primary``)."""
        ovs = self.ovs_spec()
        mode = str(ovs.bond_mode)
        vt = dict(ovs.vlan_translate or {})
        nbr = self.n_bridges()
        brs = [dut.bridges[0]] if nbr == 1 else [dut.bridges[0], dut.add_bridge()]
        other: dict[str, str] = {}
        if ovs.lacp_fallback_ab:
            other["lacp-fallback-ab"] = "true"
        if ovs.bond_rebalance_ms is not None:
            other["bond-rebalance-interval"] = str(int(ovs.bond_rebalance_ms))
        members: list[list[int]] = []
        sides = self.bond_sides()
        for k, (side, name) in enumerate(zip(sides, self.bond_names())):
            oc = dict(other)
            if mode == "active-backup":
                oc["bond-primary"] = self.ports[side[0]].dut_portref().name
            if mode == "balance-slb":
                # this bond sends out what the other side's ports sent: their source MACs
                basis = self.slb_hash_basis(dut, sides[1 - k], [0, *vt.values()])
                if basis:
                    oc["bond-hash-basis"] = str(basis)
            refs = [(self.ports[i].dut_portref(), i + 1, i) for i in side]
            members.append(dut.add_bond(brs[k % nbr], name, refs, mode, str(ovs.bond_lacp), oc))
        patch = [dut.add_patch(br, brs[1 - k], ofport=100) for k, br in enumerate(brs)] if nbr > 1 else []
        for k, br in enumerate(brs):
            on_bridge = [m for j, ms in enumerate(members) if j % nbr == k for m in ms]
            dut.program(self._bond_rules(on_bridge, patch[k] if patch else None, vt), bridge=br)

    def slb_hash_basis(self, dut: VSwitch, senders: Sequence[int], vlans: Sequence[int],
                       tries: int = 256) -> int:
        """The smallest ``bond-hash-basis`` for which the generator MACs of ports ``senders``
        (the source MACs a balance-slb bond hashes, with each VLAN of ``vlans``) fall in
        different hash buckets (``ovs-appctl bond/hash``), so OVS gives each its own member
        (a new bucket takes the next member in turn) and the bond is measured spreading, not
        by chance through one member (two MACs share one of the 256 buckets in 1 of 256 runs).
        0 when the MACs are not known here (NICs: the generator reads them)."""
        macs = [self.ports[i].tg_mac for i in senders]
        if len(macs) < 2 or not all(macs):
            return 0
        for basis in range(tries):
            hashes = ([dut.bond_hash(str(mac), v, basis) for mac in macs] for v in sorted(set(vlans)))
            if all(len(set(got)) == len(got) for got in hashes):
                return basis
        return 0

    @staticmethod
    def _bond_rules(members: Sequence[int], patch: Optional[int], vt: dict[int, int]) -> list[str]:
        """A bond bridge's rules: NORMAL for everything; with VLAN translation the members'
        frames tagged A are rewritten to B first (others dropped) and the patch port (two
        bridges) passes only tag B."""
        if not vt:
            return ["priority=100,idle_timeout=0,actions=NORMAL"]
        rules = [f"priority=200,in_port={m},dl_vlan={a},idle_timeout=0,"
                 f"actions=mod_vlan_vid:{b},NORMAL" for m in members for a, b in vt.items()]
        if patch is not None:
            rules += [f"priority=200,in_port={patch},dl_vlan={b},idle_timeout=0,actions=NORMAL"
                      for b in vt.values()]
        return rules

    def wait_bonds(self, dut: VSwitch, timeout_s: float = 20.0) -> None:
        """Every member of both bonds enabled (its link up: the generator's vhost-user ends are
        connected), and an active-backup bond's primary active."""
        primary = self.bond_mode() == "active-backup"
        for side, name in zip(self.bond_sides(), self.bond_names()):
            active = self.ports[side[0]].dut_portref().name if primary else None
            dut.wait_bond(name, timeout_s=timeout_s, active=active)

    def start_tgen(self) -> None:
        super().start_tgen()
        if self.bond_mode() and self.dut is not None:
            self.wait_bonds(self.switch())
