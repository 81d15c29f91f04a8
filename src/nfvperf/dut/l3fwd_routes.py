"""The addresses and routes of DPDK's l3fwd as a DUT: which addresses sit behind which port, the
route files l3fwd reads (``--rule_ipv4`` / ``--rule_ipv6``, LPM or exact match), and the
generator's stream addresses that those routes carry.

Every port ``p`` has an address block (the hosts "behind" it): the generator's frames of the
direction ``a -> b`` come from port ``a``'s block and go to port ``b``'s, flow ``k`` using the
block's address ``1 + k`` as source and destination (tgen varies both by the flow index, its
default).  So l3fwd routes a frame by its destination to the port whose block holds it.

IPv4 blocks are powers of two, at least 256 addresses and more than the flows: inside the RFC
2544 benchmarking range 198.18.0.0/15 while every port's block fits in it (2 ports, up to 65 535
flows: 198.18.0.0/16 and 198.19.0.0/16, tgen's own defaults), else in 10.0.0.0/8.  IPv6 blocks
are ``2001:2:0:<p>::/64`` (RFC 5180's benchmarking range; tgen's defaults for ports 0 and 1).

Route tables (``mode``):

* ``lpm`` (longest prefix match): one route per port and IP version, the port's block; any
  number of flows that fits the blocks.
* ``em`` (exact match): one hash entry per flow and direction (source, destination, UDP ports
  1024/1024, protocol 17) of the test's IP version, every direction of every port pair.  l3fwd
  fills one hash, IPv4's or (``--ipv6``) IPv6's; the other version's file gets flow 0 of each
  direction (l3fwd refuses an empty rule file) and is not loaded.  l3fwd's
  hash holds :data:`EM_HASH_ENTRIES` keys per IP version; nfvperf fills at most
  :data:`EM_MAX_ENTRIES` of them (cuckoo hashing fails inserts before the last slot).
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Iterator, Optional

#: l3fwd's exact-match hash size (L3FWD_HASH_ENTRIES in l3fwd.h of DPDK 22.11, 64-bit)
EM_HASH_ENTRIES = 4 * 1024 * 1024
#: the exact-match entries nfvperf puts in one hash (3/4 of it)
EM_MAX_ENTRIES = EM_HASH_ENTRIES * 3 // 4
#: l3fwd's LPM tables hold this many routes per IP version (IPV4_L3FWD_LPM_MAX_RULES)
LPM_MAX_RULES = 1024
#: l3fwd reads at most this many ports (RTE_MAX_ETHPORTS of Debian's DPDK 22.11 build is 32;
#: its --config and -p portmask are 32-bit)
MAX_PORTS = 32
#: UDP ports and protocol of tgen's frames (its defaults: only the IPs vary per flow)
UDP_SRC_PORT = UDP_DST_PORT = 1024
PROTO_UDP = 0x11

RFC2544_NET = ipaddress.IPv4Network("198.18.0.0/15")
LARGE_NET = ipaddress.IPv4Network("10.0.0.0/8")
V6_PREFIX = "2001:2:0:{p:x}::"


class RouteError(ValueError):
    """The routes cannot be made (the message names the field and the fix)."""


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


@dataclass(frozen=True)
class AddressPlan:
    """The address blocks of ``ports`` ports for ``flows`` flows per direction."""

    ports: int
    flows: int
    v4_base: ipaddress.IPv4Address
    v4_block: int                      # addresses per port (a power of two)

    @classmethod
    def make(cls, ports: int, flows: int) -> "AddressPlan":
        if ports < 2 or ports % 2:
            raise RouteError(f"topology.ports: l3fwd forwards between port pairs; {ports} is not an "
                             f"even number of at least 2")
        if ports > MAX_PORTS:
            raise RouteError(f"topology.ports: l3fwd drives at most {MAX_PORTS} ports, not {ports}")
        if flows < 1:
            raise RouteError(f"traffic.flows_per_port: at least 1, not {flows}")
        need = max(256, _pow2_at_least(flows + 1))
        per_port = RFC2544_NET.num_addresses // _pow2_at_least(ports)
        if need <= per_port:
            return cls(ports, flows, RFC2544_NET.network_address, per_port)
        if need * _pow2_at_least(ports) > LARGE_NET.num_addresses:
            most = LARGE_NET.num_addresses // _pow2_at_least(ports) - 1
            raise RouteError(f"traffic.flows_per_port: {flows:,} flows on each of {ports} ports do not "
                             f"fit l3fwd's address plan ({LARGE_NET}, {most:,} flows per port at "
                             f"most); lower traffic.flows_per_port or topology.ports")
        return cls(ports, flows, LARGE_NET.network_address, need)

    # -- blocks ------------------------------------------------------------------------------
    def v4_network(self, port: int) -> ipaddress.IPv4Network:
        base = int(self.v4_base) + port * self.v4_block
        return ipaddress.IPv4Network((base, 32 - (self.v4_block.bit_length() - 1)))

    def v6_network(self, port: int) -> ipaddress.IPv6Network:
        return ipaddress.IPv6Network(f"{V6_PREFIX.format(p=port)}/64")

    def host(self, port: int, k: int, ip_version: int = 4) -> str:
        """Port ``port``'s address of flow ``k`` (the block's address 1 + k)."""
        net = self.v4_network(port) if ip_version == 4 else self.v6_network(port)
        return str(net.network_address + 1 + k)

    # -- what the generator sends ------------------------------------------------------------
    def directions(self) -> list[tuple[int, int]]:
        """(tx, rx) port pairs, forward first (0->1, 2->3, ...), then the reverse: the order of
        the generator's stream parameters (``TgenMeasurer``)."""
        fwd = [(i, i + 1) for i in range(0, self.ports - 1, 2)]
        return fwd + [(b, a) for a, b in fwd]

    def stream_fields(self, tx: int, rx: int, ip_version: int = 4) -> dict[str, object]:
        """tgen stream fields of the direction ``tx -> rx``: base addresses of flow 0; tgen adds
        the flow index to both."""
        return {"src_ip": self.host(tx, 0, ip_version), "dst_ip": self.host(rx, 0, ip_version),
                "vary": ["src_ip", "dst_ip"]}


def check_routes(mode: str, ports: int, flows: int) -> Optional[str]:
    """Why ``mode``'s route table cannot hold ``flows`` flows per direction on ``ports`` ports
    (None if it can); the message names the field and the fix."""
    try:
        AddressPlan.make(ports, flows)
    except RouteError as e:
        return str(e)
    if mode == "em":
        n = ports * flows           # exact-match entries of the test's IP version: every flow of every direction
        if n > EM_MAX_ENTRIES:
            most = EM_MAX_ENTRIES // ports
            return (f"traffic.flows_per_port: l3fwd's exact-match table (topology.l3fwd.mode: em) "
                    f"would need {n:,} entries ({flows:,} flows x {ports} directions), more than the "
                    f"{EM_MAX_ENTRIES:,} nfvperf fills of its {EM_HASH_ENTRIES:,}-entry hash; lower "
                    f"traffic.flows_per_port to {most:,} or use topology.l3fwd.mode: lpm")
    elif mode != "lpm":
        return f"topology.l3fwd.mode: lpm or em, not {mode!r}"
    elif ports > LPM_MAX_RULES:
        return f"topology.ports: l3fwd's LPM table holds {LPM_MAX_RULES} routes"
    return None


# ---------------------------------------------------------------------------------- rule files
def lpm_rules(plan: AddressPlan) -> tuple[list[str], list[str]]:
    """``--rule_ipv4`` and ``--rule_ipv6`` lines of the LPM table: ``R<prefix>/<len> <port>``."""
    return [f"R{plan.v4_network(p)} {p}" for p in range(plan.ports)], \
        [f"R{plan.v6_network(p)} {p}" for p in range(plan.ports)]


def em_rule_lines(plan: AddressPlan, ip_version: int, flows: Optional[int] = None
                  ) -> Iterator[str]:
    """Exact-match lines of one IP version: ``flows`` flows (default: the plan's) of every
    direction."""
    n = plan.flows if flows is None else flows
    for tx, rx in plan.directions():
        net_s = plan.v4_network(tx) if ip_version == 4 else plan.v6_network(tx)
        net_d = plan.v4_network(rx) if ip_version == 4 else plan.v6_network(rx)
        s0, d0 = int(net_s.network_address) + 1, int(net_d.network_address) + 1
        addr = ipaddress.IPv4Address if ip_version == 4 else ipaddress.IPv6Address
        for k in range(n):
            # l3fwd's EM rule: R<dst> <src> <dst port> <src port> <proto> <out port>
            yield f"R{addr(d0 + k)} {addr(s0 + k)} {UDP_DST_PORT} {UDP_SRC_PORT} {PROTO_UDP:#x} {rx}"


def em_rules(plan: AddressPlan, ip_version: int) -> tuple[Iterator[str], Iterator[str]]:
    """``--rule_ipv4`` and ``--rule_ipv6`` lines of the exact-match table: every flow of the
    test's IP version, flow 0 of each direction of the other."""
    return em_rule_lines(plan, 4, None if ip_version == 4 else 1), \
        em_rule_lines(plan, 6, None if ip_version == 6 else 1)
