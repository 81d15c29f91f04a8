"""veth port kinds, ``af_packet`` and ``af_xdp``: a veth pair per port, the generator's end
``<tag>p<i>`` (root namespace, or the topology's generator namespace), the DUT's end ``<tag>d<i>``
in the DUT namespace.  tgen opens its end with DPDK's net_af_packet / net_af_xdp; a DPDK DUT opens
its end the same way, a kernel DUT (Linux bridge) takes the interface itself.  The kinds for
kernel DUTs, for TCP endpoints (iperf3), and for parity with earlier veth results; the harness
is the bottleneck here (AF_PACKET ~0.5 Mpps), not a DPDK DUT.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from nfvperf.dut.base import KernelIf, PortRef
from nfvperf.host import netns as N, xdp as X

from .base import CabledLink, HostPort, PortKind, register_port_kind

if TYPE_CHECKING:
    from ..base import Topology

log = logging.getLogger(__name__)


class VethKind(PortKind):
    family = "veth"
    kernel = True
    tcp = True
    dut_netns = True
    #: the kernel veth itself carries any MTU the spec accepts (iperf3, raw frames)
    path_max_mtu = 9600
    driver = "af_packet"
    testbed_end = ("iface", "iface: (the kernel interface)", "kernel interfaces")

    def create(self, topo: Topology, n: int, *, dut_netns: Optional[str], tg_netns: Optional[str],
               mtu: int) -> list[HostPort]:
        links = getattr(topo, "testbed_links", None)
        if links:
            return self.from_testbed(topo, n, links, mtu)
        new = []
        for k in range(n):
            i = len(topo.ports) + k
            a, b = topo.run.ifname(f"p{i}"), topo.run.ifname(f"d{i}")
            mac_a, mac_b = self.macs(topo.run.tag, i)
            pair = N.create_veth(a, b, tg_netns, dut_netns, mtu=mtu, tracker=topo.tracker,
                                 mac_a=mac_a, mac_b=mac_b)
            new.append(HostPort(i, "veth", tg_ifname=a, tg_netns=tg_netns, dut_ifname=b,
                                dut_netns=dut_netns, driver=self.driver, mtu=mtu, veth=pair,
                                tg_mac=mac_a, dut_mac=mac_b))
        return self._append(topo, new)

    def from_testbed(self, topo: Topology, n: int, links: Sequence[CabledLink], mtu: int) -> list[HostPort]:
        """The ports of a testbed (issue 10): the cabled interfaces of its links, the tester's
        end in the tester host's namespace, the DUT's end in the DUT host's; nothing created."""
        new = []
        for k in range(n):
            i = len(topo.ports) + k
            if i >= len(links):
                raise ValueError(f"the testbed cables {len(links)} link(s); port {i} has none")
            lk = links[i]
            new.append(HostPort(i, "veth", tg_ifname=lk["tester_iface"], tg_netns=None,
                                dut_ifname=lk["dut_iface"], dut_netns=None, driver=self.driver, mtu=mtu))
        return self._append(topo, new)

    def tg_portref(self, port: HostPort) -> PortRef:
        return PortRef(f"tg{port.index}", KernelIf.of(self.driver), ifname=port.tg_ifname,
                       netns=port.tg_netns, mtu=port.mtu, mac=port.tg_mac)

    def dut_portref(self, port: HostPort) -> PortRef:
        return PortRef(f"phy{port.index}", KernelIf.of(self.driver), ifname=port.dut_ifname,
                       netns=port.dut_netns, mtu=port.mtu, mac=port.dut_mac)


def kernel_mac(wire_mac: str) -> str:
    """The address the kernel interface of a generator's af_packet end gets while tgen drives it:
    ``wire_mac`` with the low bit of its 5th byte flipped (``02:..:a0:<i>`` -> ``02:..:a1:<i>``:
    locally administered, unicast, and no other port's)."""
    b = wire_mac.split(":")
    b[4] = f"{int(b[4], 16) ^ 1:02x}"
    return ":".join(b)


@register_port_kind("af_packet")
class AfPacket(VethKind):
    """veth opened with net_af_packet (the default).

    tgen's frames to its own af_packet end carry that port's MAC.  Were it the kernel
    interface's own address, the kernel would also take every frame up its IP stack and route it
    (``ip_route_input_slow``, a dst allocated and freed per frame), in the softirq of whoever sent
    it: the DUT's CPU pays for the generator.  Measured through testpmd io (bench/harness_ceiling.py,
    64 B): 426 kfps with the kernel routing tgen's frames, 562-609 kfps without; testpmd's own
    generator, whose frames go to an address no interface has, 610 kfps.  So while tgen drives the
    port the kernel interface gets another address (:func:`kernel_mac`) and tgen keeps ``tg_mac``
    on the wire (``--port N:mac=``); frames to it stop at ``ip_rcv``'s first check
    (PACKET_OTHERHOST).  iperf3 (TCP tests) keeps the interface's address as made: it is the
    kernel's own endpoint."""

    order = 10
    driver = "af_packet"

    def tg_wire_mac(self, port: HostPort) -> Optional[str]:
        return port.tg_mac if port.veth is not None and port.tg_mac else None

    def before_tgen(self, port: HostPort) -> None:
        wire = self.tg_wire_mac(port)
        if wire and port.tg_ifname:
            N.set_link(port.tg_ifname, port.tg_netns, address=kernel_mac(wire))
    max_mtu = 1500
    mtu_limit_reason = ("DPDK 22.11 net_af_packet receives frames up to 1518 B; jumbo frames "
                        "need port_kind vhost (DPDK DUTs) or pci")


@register_port_kind("af_xdp")
class AfXdp(VethKind):
    """veth opened with net_af_xdp (one umem frame per packet).

    Measured (issue 8 item 5, docs/topologies.md "AF_XDP on veth"): the sockets already get
    native XDP on veth and the PMD's preferred busy polling (budget 64); napi_defer_hard_irqs /
    gro_flush_timeout and busy_budget 0/256 changed nothing measurable; more than one queue is
    impossible (DPDK 22.11 net_af_xdp sizes queue_count by ethtool's combined channels, which veth
    does not have).  What limits it is the kernel's copy path: ~90 % of both CPUs in
    ``sendto`` → ``__xsk_generic_xmit`` and the peer's ``veth_poll`` run in its softirq."""

    order = 11
    driver = "af_xdp"
    #: net_af_xdp's busy-polling lines are INFO: make them visible so the run records them
    tgen_eal = (X.AF_XDP_LOG_LEVEL,)
    max_mtu = 1500
    mtu_limit_reason = ("DPDK 22.11 net_af_xdp reports max_rx_pktlen 1514 B: 3014 B frames sent "
                        "through testpmd were all missed at tgen's af_xdp RX; jumbo frames need "
                        "port_kind vhost (DPDK DUTs) or pci")

    def path_facts(self, port: HostPort, topo: Topology) -> dict[str, object]:
        """The XDP mode each end's program is attached in (``native`` | ``generic``; None = no
        program, e.g. a kernel DUT's end), the copy mode and queue count of veth, and what tgen's
        PMD logged about busy polling.  Ends on another host (a testbed) are not read."""
        facts: dict[str, object] = {"zero_copy": False, "queues": 1}
        ends = (("tg", port.tg_ifname, port.tg_netns, getattr(topo, "tg_host", None)),
                ("dut", port.dut_ifname, port.dut_netns, getattr(topo, "dut_host", None)))
        for end, ifname, ns, host in ends:
            if not ifname or getattr(host, "remote", False):
                continue
            try:
                facts[f"{end}_xdp_mode"] = X.xdp_mode(ifname, ns)
            except (LookupError, OSError) as e:
                facts[f"{end}_xdp_mode_error"] = str(e)
        if facts.get("tg_xdp_mode") == "generic":
            log.warning("AF_XDP port %s: the generator's socket runs in generic (skb) XDP mode, "
                        "slower than native", port.tg_ifname)
        tgen = getattr(topo, "tgen", None)
        log_path = getattr(tgen, "log_path", None)
        if log_path is not None and not getattr(getattr(topo, "tg_host", None), "remote", False):
            try:
                with open(Path(log_path), errors="replace") as f:
                    facts.update(X.busy_poll_from_log(f.read(65536)))
            except OSError:
                pass
        if "busy_poll_error" in facts:
            log.warning("AF_XDP port %s: busy polling unavailable: %s", port.tg_ifname,
                        facts["busy_poll_error"])
        return facts
