"""``memif``: shared-memory packet interfaces (DPDK ``net_memif``) over one Unix socket per port,
``<run dir>/<tag>-memif<i>.sock`` (a file, not an abstract socket: the DUT may sit in another
network namespace, and cleanup finds it).  The DUT is the memif *server* (creates the socket);
tgen connects as *client* once the DUT is up.

For testpmd (p2p); OVS 3.1 is refused (see ``OvsDpdk.port_kind_notes``).  Kernel DUTs cannot
attach it, and the generator ends are not kernel interfaces (no TCP endpoints).
"""
from __future__ import annotations

from typing import Any, Optional

from nfvperf.dut.base import PortRef

from .base import HostPort, PortKind, register_port_kind


@register_port_kind("memif")
class Memif(PortKind):
    family = "memif"
    order = 30
    max_mtu = 1500
    mtu_limit_reason = "jumbo frames over memif are not supported by nfvperf yet"
    tgen_hugepages = True
    kernel_refusal = ("memif ports are userspace (DPDK net_memif): only DPDK DUTs can attach "
                      "them; a kernel DUT needs port_kind af_packet or af_xdp")
    wait_link = True

    def create(self, topo: Any, n: int, *, dut_netns: Optional[str], tg_netns: Optional[str],
               mtu: int) -> list[HostPort]:
        new = []
        for k in range(n):
            i = len(topo.ports) + k
            tg_mac, dut_mac = self.macs(topo.run.tag, i)
            new.append(HostPort(i, self.family, mtu=mtu, tg_mac=tg_mac, dut_mac=dut_mac,
                                socket=self.socket_path(topo, f"memif{i}")))
        return self._append(topo, new)

    def tg_portref(self, port: HostPort) -> PortRef:
        return PortRef(f"tg{port.index}", kind="memif", socket=port.socket, mtu=port.mtu,
                       mac=port.tg_mac, extra={"role": "client"})

    def dut_portref(self, port: HostPort) -> PortRef:
        return PortRef(f"phy{port.index}", kind="memif", socket=port.socket, mtu=port.mtu,
                       mac=port.dut_mac, extra={"role": "server"})
