"""``pci``: real NICs bound to vfio-pci.  ``topology.pci: [tg0, dut0, tg1, dut1, ...]``: the
generator opens the even addresses, the DUT the odd ones; the cables are tg0-dut0, tg1-dut1.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

from nfvperf.dut.base import PciNic, PortRef, VhostBackend

from ..errors import TopologyError
from .base import HostPort, PortKind, register_port_kind

if TYPE_CHECKING:
    from ..base import Topology
    from ..spec import TopologyBase


def pci_numa_node(addr: str) -> Optional[int]:
    """NUMA node of a PCI device from sysfs (None when unknown or not NUMA)."""
    full = addr if addr.count(":") == 2 else f"0000:{addr}"
    try:
        node = int(Path(f"/sys/bus/pci/devices/{full}/numa_node").read_text().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


@register_port_kind("pci")
class Pci(PortKind):
    family = "pci"
    order = 40
    max_mtu = 9600          # the NIC's own limit applies (checked by its PMD at start)
    tgen_hugepages = True
    #: wait for the generator's links before the first trial: a NIC's link comes up after its
    #: port starts, and a vhost-user cable to a guest's NIC once the guest's end is driven
    wait_link = True
    #: a NIC offers several queue pairs (RSS): topology.tgen_cores gives tgen one per worker
    tg_multiqueue = True
    dut_vfs = True
    testbed_end = ("pci", "pci: (the NIC's PCI address)", "PCI NICs")
    testbed_vhost = True

    @classmethod
    def port_count(cls, spec: TopologyBase) -> int:
        return len(spec.pci) // 2

    def create_from_testbed(self, topo: Topology, n: int, mtu: int) -> list[HostPort]:
        """The ports of a testbed (issue 10): the PCI NICs of its links, in link order, the
        tester's NIC for the generator (``-a <pci>``), the DUT's for the switch (a ``dpdk`` port
        with ``dpdk-devargs=<pci>``); bound to vfio-pci by ``nfvperf testbed prepare``."""
        links = topo.testbed_links
        if len(links) < n:
            raise TopologyError(f"topology.ports: {n} ports, but the testbed cables only "
                                f"{len(links)} tester-DUT link(s)")
        new = []
        for k in range(n):
            i = len(topo.ports) + k
            vhost = links[k]["dut_vhost"] or links[k]["tester_vhost"]
            # a guest's NIC cabled to this machine: this machine's end (the DUT's, or tgen's) is
            # a vhost-user backend (net_vhost client, OVS dpdkvhostuserclient) on the cable QEMU
            # serves (testbed nics: vhost: true)
            sock = Path(vhost) if isinstance(vhost, str) else None
            tg_mac, dut_mac = self.macs(topo.run.tag, i) if sock else (None, None)
            new.append(HostPort(i, "pci", tg_pci=links[k]["tester_pci"],
                                dut_pci=links[k]["dut_pci"], mtu=mtu, socket=sock,
                                tg_mac=tg_mac if links[k]["tester_pci"] is None else None,
                                dut_mac=dut_mac if links[k]["dut_pci"] is None else None))
        return self._append(topo, new)

    @classmethod
    def pci_addresses(cls, spec: TopologyBase) -> list[str]:
        return list(spec.pci)

    @classmethod
    def local_refusal(cls, spec: TopologyBase) -> Optional[str]:
        if not spec.pci:
            return ("topology.pci: port_kind pci drives NICs by PCI address: give pci: [tg0, dut0, "
                    "tg1, dut1], or run on a testbed that cables them (--testbed FILE; without "
                    "NICs: testbeds/emulated-pci.yaml)")
        return None

    @classmethod
    def numa_node(cls, spec: TopologyBase) -> Optional[int]:
        pci = cls.pci_addresses(spec)
        return pci_numa_node(pci[0]) if pci else None

    def create(self, topo: Topology, n: int, *, dut_netns: Optional[str], tg_netns: Optional[str],
               mtu: int) -> list[HostPort]:
        if getattr(topo, "testbed_links", None):
            return self.create_from_testbed(topo, int(topo.spec.ports), mtu)
        pci = self.pci_addresses(topo.spec)
        why = self.local_refusal(topo.spec)
        if why:
            raise TopologyError(why)
        if len(pci) % 2:
            raise TopologyError(f"port_kind pci needs generator/DUT address pairs, got {len(pci)}")
        new = [HostPort(len(topo.ports) + k // 2, "pci", tg_pci=pci[k], dut_pci=pci[k + 1], mtu=mtu)
               for k in range(0, len(pci), 2)]
        return self._append(topo, new)

    @staticmethod
    def _end(name: str, pci: Optional[str], mac: Optional[str], port: HostPort) -> PortRef:
        """The NIC at ``pci``, or without one the vhost-user cable to a guest's NIC."""
        if pci is None and port.socket is not None:
            return PortRef(name, VhostBackend(client=True), socket=port.socket, mtu=port.mtu, mac=mac)
        return PortRef(name, PciNic(), pci=pci, mtu=port.mtu)

    def tg_portref(self, port: HostPort) -> PortRef:
        return self._end(f"tg{port.index}", port.tg_pci, port.tg_mac, port)

    def dut_portref(self, port: HostPort) -> PortRef:
        return self._end(f"phy{port.index}", port.dut_pci, port.dut_mac, port)
