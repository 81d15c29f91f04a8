"""``memif``: shared-memory packet interfaces (DPDK ``net_memif``) over one Unix socket per port,
``<run dir>/<tag>-memif<i>.sock`` (a file, not an abstract socket: the DUT may sit in another
network namespace, and cleanup finds it).  The DUT is the memif *server* (creates the socket);
tgen connects as *client* once the DUT is up.

testpmd (p2p) and OVS-DPDK (a ``type=dpdk`` port on net_memif) can be the server.  memif's rings
pair up: the server can send on as many queues as the client polls.  OVS sends on one TX queue
per PMD thread plus one for its main thread (its PMD on queue 1), so tgen opens that many RX
queues (``tg_rx_queues``); with one, OVS 3.1 fails every transmit (``ovs_tx_failure_drops``).
Kernel DUTs cannot attach it, and the generator ends are not kernel interfaces (no TCP
endpoints).
"""
from __future__ import annotations

from nfvperf.dut.base import MemifEnd, PortRef

from .base import HostPort, PortKind, register_port_kind


@register_port_kind("memif")
class Memif(PortKind):
    family = "memif"
    order = 30
    max_mtu = 1500
    mtu_limit_reason = ("DPDK 22.11 net_memif reports max_rx_pktlen 1518 B, so ethdev refuses a larger "
                        "MTU (testpmd: \"Frame size (9018) > device max frame size (1518)\")")
    tgen_hugepages = True
    #: tgen's ends are zero-copy clients (tg_portref): their mbufs are the shared buffers, so
    #: DPDK must map its hugepages as one file per segment list to register them as regions
    tgen_eal = ("--single-file-segments",)
    #: ... and the server on the other core writes and reads those mbufs
    tg_prefetch = True
    kernel_refusal = ("memif ports are userspace (DPDK net_memif): only DPDK DUTs can attach "
                      "them; a kernel DUT needs port_kind af_packet or af_xdp")
    wait_link = True
    socket_stem = "memif"

    @classmethod
    def tg_rx_queues(cls, dut_tx_queues: int) -> int:
        return max(1, int(dut_tx_queues))

    def tg_portref(self, port: HostPort) -> PortRef:
        # zero-copy: the DUT (the server) copies into and out of tgen's own mbufs, and tgen does
        # no copy of its own; with copies, at 1518 B tgen's core was the bottleneck (it did both
        # copies of every frame) and tgen carried 0.96x what testpmd flowgen did on the same
        # path (bench/harness_ceiling.py; docs/tgen.md)
        return PortRef(f"tg{port.index}", MemifEnd("client", zero_copy=True), socket=port.socket,
                       mtu=port.mtu, mac=port.tg_mac)

    def dut_portref(self, port: HostPort) -> PortRef:
        return PortRef(f"phy{port.index}", MemifEnd("server"), socket=port.socket, mtu=port.mtu,
                       mac=port.dut_mac)
