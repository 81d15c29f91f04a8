"""``vhost``: the generator is a virtio-user device (DPDK ``net_virtio_user``) and the DUT the
vhost-user backend, over one Unix socket per port, ``<run dir>/<tag>-vhu<i>.sock``.

tgen's virtio-user is the vhost-user *server* (it creates the socket, ``server=1``) and the DUT
connects as *client*: OVS-DPDK with a ``dpdkvhostuserclient`` port, testpmd with ``net_vhost``
``client=1``.  tgen's probe waits for each connection, and a client retries a missing socket
once a second: OVS is given each socket's path as it appears, a DPDK DUT on p2p is launched once
tgen's first socket listens (docs/topologies.md).  virtio-user shares the generator's memory with
the backend by file descriptor: tgen runs on hugepages (``--in-memory``, memfd-backed) with
``--single-file-segments`` (vhost-user maps at most 8 memory regions).

For DPDK DUTs the harness is then far faster than on veth (measured on 2 cores: tgen against a
testpmd io forwarder ~14 Mpps, against OVS-DPDK with one PMD ~8 Mpps at 64 B).  Kernel DUTs cannot
attach it, and the generator ends are not kernel interfaces (no TCP endpoints).
"""
from __future__ import annotations

from nfvperf.dut.base import PortRef, VhostBackend, VhostFrontend

from .base import HostPort, PortKind, register_port_kind


@register_port_kind("vhost")
class Vhost(PortKind):
    family = "vhost"
    order = 20
    max_mtu = 9216
    mtu_limit_reason = ("the vhost-user path (virtio-user, OVS dpdkvhostuser, net_vhost) is set up for MTU 9216 "
                        "at most; traffic is tested at 9000")
    tgen_eal = ("--single-file-segments",)
    tgen_hugepages = True
    kernel_refusal = ("vhost ports are userspace (vhost-user sockets): only DPDK DUTs (testpmd, "
                      "ovs-dpdk) can attach them; a kernel DUT needs port_kind af_packet or af_xdp")
    wait_link = True
    socket_stem = "vhu"
    tg_rxd = 4096
    tg_multiqueue = True
    tg_queue_pair_per_worker = True

    @classmethod
    def tg_queue_pairs(cls, dut_peer_queues: int) -> int:
        """The frontend creates the queue pairs: a DUT that sends on one TX queue per lcore
        (l3fwd) needs as many, or what it sends on queues the frontend lacks is lost.  OVS and
        testpmd map their TX queues onto the enabled ones (peer_queues 1)."""
        return max(1, int(dut_peer_queues))

    def tg_portref(self, port: HostPort) -> PortRef:
        # the frontend, vhost-user server, with virtqueues of tg_rxd entries (DPDK's default is 256)
        return PortRef(f"tg{port.index}", VhostFrontend(server=True, queue_size=self.tg_rxd),
                       socket=port.socket, mtu=port.mtu, mac=port.tg_mac)

    def dut_portref(self, port: HostPort) -> PortRef:
        return PortRef(f"phy{port.index}", VhostBackend(client=True), socket=port.socket,
                       mtu=port.mtu, mac=port.dut_mac)
