"""Kernel TCP endpoints of a topology's generator ends (``--tg iperf3``): :func:`tcp_endpoints`
moves the veth ends of two ports into namespaces of the run and addresses them (``Topology.tcp_endpoints``)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, TypedDict

from nfvperf.host import netns as N

from .errors import TopologyError
from .ports import port_kind_class, port_kind_names

if TYPE_CHECKING:
    from .base import Topology


class TcpEnds(TypedDict):
    """:meth:`Topology.tcp_endpoints`: the two kernel TCP endpoints a topology made of its
    generator ends (namespaces, addresses, interfaces, MTU, each end's offload state)."""

    client_ns: str
    server_ns: str
    client_ip: str
    server_ip: str
    client_if: Optional[str]
    server_if: Optional[str]
    mtu: int
    offloads: dict[str, dict[str, str]]


def tcp_endpoints(topo: Topology, net: str = "198.18.0", client_port: int = 0,
                  server_port: int = 1) -> TcpEnds:
    """Turn the generator ends of ports ``client_port``/``server_port`` into TCP endpoints
    (for iperf3, instead of tgen; build the topology with ``start_tgen=False``).

    Each veth end moves into a namespace of the run (``<tag>-tcpc`` / ``<tag>-tcps``,
    released by the tracker), gets ``<net>.1/24`` (client) / ``<net>.2/24`` (server) and a
    permanent neighbour entry for the other side (the OVS topologies forward IPv4 only,
    ``dl_type=0x800``, so ARP would not pass), and is brought up.  MTU and offloads stay as
    the topology set them (``create_veth`` turns offloads off: TCP goodput is lower than with
    TSO/GSO on); the state in force is in the returned ``offloads``.

    Returns ``{"client_ns", "server_ns", "server_ip", "client_ip", "client_if", "server_if",
    "mtu", "offloads"}``."""
    if not topo.port_kind_class().tcp:
        veth = [k for k in port_kind_names() if port_kind_class(k).tcp]
        raise TopologyError(f"TCP endpoints need kernel interfaces at the generator ends: "
                            f"topology.port_kind {' or '.join(veth)}, not {topo.spec.port_kind}")
    if not topo.up or topo.tracker is None:
        raise TopologyError("tcp_endpoints(): the topology is not up")
    if topo.tgen is not None:
        raise TopologyError("tcp_endpoints(): tgen holds the generator ports "
                            "(build the topology with start_tgen=False)")
    refusal = topo.tcp_refusal()
    if refusal:
        raise TopologyError(refusal)
    if max(client_port, server_port) >= len(topo.ports):
        raise TopologyError(f"tcp_endpoints(): ports {client_port}/{server_port} do not exist")
    cp, sp = topo.ports[client_port], topo.ports[server_port]
    ends = []
    for role, port, host in (("tcpc", cp, 1), ("tcps", sp, 2)):
        if not port.tg_ifname:
            raise TopologyError(f"port {port.index} is not a veth port")
        ns = topo.make_netns(role)
        N.run_in_netns(ns, ["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                            "net.ipv6.conf.default.disable_ipv6=1"], check=False)
        N.run_in_netns(port.tg_netns, ["ip", "link", "set", "dev", port.tg_ifname,
                                       "netns", ns])
        port.tg_netns = ns
        if port.veth is not None:
            port.veth.ns_a = ns
        ends.append((ns, port, f"{net}.{host}"))
    for (ns, port, ip), (_, peer, peer_ip) in zip(ends, reversed(ends)):
        assert port.tg_ifname is not None and peer.tg_ifname is not None  # checked above
        N.add_address(port.tg_ifname, f"{ip}/24", ns)
        N.set_link(port.tg_ifname, ns, state="up")
        mac = peer.tg_mac or N.link_mac(peer.tg_ifname, peer.tg_netns)
        N.run_in_netns(ns, ["ip", "neigh", "replace", peer_ip, "lladdr", mac, "nud",
                            "permanent", "dev", port.tg_ifname])
    offloads: dict[str, dict[str, str]] = {}
    want = ("tcp-segmentation-offload", "generic-segmentation-offload",
            "generic-receive-offload", "tx-checksumming", "rx-checksumming")
    for port in (cp, sp):
        for ifname, if_ns in ((port.tg_ifname, port.tg_netns), (port.dut_ifname, port.dut_netns)):
            try:
                assert ifname is not None  # veth ports have both ends (caught below like any failure)
                out = N.run_in_netns(if_ns, ["ethtool", "-k", ifname], check=False).stdout
            except Exception as e:  # noqa: BLE001 - best effort
                offloads[f"{if_ns}/{ifname}"] = {"error": str(e)}
                continue
            fields = (line.partition(":") for line in out.splitlines())
            offloads[f"{if_ns}/{ifname}"] = {k.strip(): v.strip() for k, _, v in fields if k.strip() in want}
    tcp: TcpEnds = {"client_ns": ends[0][0], "server_ns": ends[1][0], "client_ip": ends[0][2],
                    "server_ip": ends[1][2], "client_if": cp.tg_ifname, "server_if": sp.tg_ifname,
                    "mtu": cp.mtu, "offloads": offloads}
    return tcp
