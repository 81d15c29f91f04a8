"""PHY-PHY (seed 000 test case 7.1): generator ports <-> DUT ports, the DUT forwards 0<->1, 2<->3.

Emulated PHY (``port_kind: af_packet`` / ``af_xdp``)::

    tgen --net_af_packet--> <tag>p0 ==veth== <tag>d0 --+
                            (root netns)     (<tag>-dut netns)  DUT: testpmd io/mac, or
    tgen <-net_af_packet--- <tag>p1 ==veth== <tag>d1 --+        a Linux bridge

Userspace ports (``port_kind: vhost`` / ``memif``, testpmd only): tgen's virtio-user (vhost-user
server) or memif client on a socket in the run dir; testpmd's net_vhost (client) / net_memif
(server) on the same socket.  No DUT namespace.

Real NICs (``port_kind: pci``, ``pci: [tg0, dut0, tg1, dut1]``): the generator opens tg0/tg1 and
the DUT (testpmd) dut0/dut1 by PCI address; the cables are tg0-dut0 and tg1-dut1.  All must be
bound to vfio-pci (docs/topologies.md).  linux-bridge cannot use PCI ports.

One switching operation per frame.
"""
from __future__ import annotations

from typing import Any

from . import register
from .base import Topology, TopologyError


@register("p2p")
class P2P(Topology):
    kind = "p2p"
    base_switching_operations = 1
    #: a forwarder on the PHY ports; OVS-DPDK runs in p-ovs-p (PHY-vSwitch-PHY)
    duts = ("testpmd", "linux-bridge")

    def setup(self) -> None:
        spec = self.spec
        if self.port_kind().dut_netns:       # the DUT ends are interfaces (veth)
            self.dut_netns = self.make_netns("dut")
        ports = self.add_ports_from_spec(dut_netns=self.dut_netns)
        if len(ports) < 2 or len(ports) % 2:
            raise TopologyError(f"p2p needs an even number of ports, got {len(ports)}")
        # the DUT's own options section (testpmd:, linux_bridge:, ...) as the adapter reads it;
        # eth_peers: the generator MACs a rewriting (mac) forwarder sends to
        options: dict[str, Any] = dict(self.dut_class().spec_options(spec),
                                       eth_peers=[p.tg_mac for p in ports])
        dut = self.make_dut(spec.dut, netns=self.dut_netns, **options)
        for p in ports:
            dut.add_port(p.dut_portref())
        dut.start()
        dut.program(None)
