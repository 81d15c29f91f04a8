"""The ends of a port, one class per way a process opens it (issue 18 item 2).

A :class:`~nfvperf.dut.base.PortRef` carries one :class:`PortEnd`; the end, not the adapter, knows
the port's device arguments: DPDK's (``--vdev`` value or ``-a`` PCI address: tgen, testpmd,
l3fwd), OVS-DPDK's Interface (``type=dpdk`` with ``options:dpdk-devargs``, or
``dpdkvhostuserclient`` with ``options:vhost-server-path``) and a kernel DUT's interface name
(Linux bridge, kernel OVS).  Adapters ask the end and never compare a kind string, as OVS's
datapath asks a ``netdev_class`` for its operations.

The port kinds (:mod:`nfvperf.topo.ports`) pick the two ends of each PHY port they make (its
generator end and its DUT end); VNFs and topologies make the ends of their own ports (a VM's
vhost-user NICs, a VNF's sockets on OVS).

=================== ======================================== ==========================================
end (``name``)      DPDK device argument                     OVS-DPDK Interface / kernel DUT
=================== ======================================== ==========================================
AfPacketIf, AfXdpIf net_af_packet / net_af_xdp on ``ifname`` ``dpdk`` on that vdev / the interface
(KernelIf: veth)
PciNic (pci)        ``-a <pci>``                             ``dpdk`` with the PCI address / refused
VhostFrontend       net_virtio_user on ``socket``            ``dpdkvhostuserclient`` (OVS connects to
(vhost-user)        (``server``: creates it)                 the frontend's socket) / refused
VhostBackend        net_vhost on ``socket`` (``client``:     ``dpdkvhostuserclient`` when ``client``,
(vhost-backend)     connects to it)                          else refused / refused
MemifEnd (memif)    net_memif ``role`` on ``socket``         ``dpdk`` on that vdev / refused
=================== ======================================== ==========================================
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal, Optional

from nfvperf.trial import Unsupported

if TYPE_CHECKING:
    from nfvperf.dut.base import PortRef

__all__ = ["PortEnd", "KernelIf", "AfPacketIf", "AfXdpIf", "PciNic", "VhostFrontend", "VhostBackend", "MemifEnd"]



class PortEnd:
    """How a process opens one port.  Subclasses set the class attributes and implement
    :meth:`dpdk_devargs`; the others have the defaults of a userspace vdev."""

    #: the end's name in messages and records (``veth``, ``pci``, ``vhost-user``, ...)
    name: ClassVar[str] = "abstract"
    #: the ``topology.port_kind`` values whose PHY ports have this end at the DUT (:func:`phy_end`)
    kinds: ClassVar[tuple[str, ...]] = ()
    #: the peer polls one ring per TX queue of the DUT, counted when it started (memif): the
    #: DUT's TX queues (OVS: PMD threads + 1) cannot change while it runs
    fixed_rings: ClassVar[bool] = False
    #: a kernel interface (``PortRef.ifname`` in ``PortRef.netns``): kernel DUTs can attach it
    kernel: ClassVar[bool] = False
    #: a PCI device: DPDK opens it with ``-a`` (others: ``--vdev``) and probes the PCI bus
    pci_device: ClassVar[bool] = False
    #: DPDK shares the process's memory with the peer by file descriptor (vhost-user): the EAL
    #: needs ``--single-file-segments`` (vhost-user maps at most 8 memory regions)
    shares_memory: ClassVar[bool] = False
    #: a DPDK process on it polls one RX queue per lcore at least (net_af_packet: a socket each,
    #: each gets part of the frames): l3fwd opens ``max(queues, lcores)`` RX queues per port
    rx_queue_per_lcore: ClassVar[bool] = False
    #: it has one queue (net_af_xdp on a veth): a DPDK process on it takes one lcore and one queue
    single_queue: ClassVar[bool] = False

    @property
    def port_kind(self) -> str:
        """The ``topology.port_kind`` a port with this end belongs to (queue counts follow it)."""
        return self.name

    @property
    def eal_option(self) -> str:
        """The EAL option that takes :meth:`dpdk_devargs`."""
        return "-a" if self.pci_device else "--vdev"

    def dpdk_devargs(self, ref: PortRef, index: int, queues: int = 1) -> str:
        """The device argument of ``ref`` for a DPDK process (its ``index``-th port, with
        ``queues`` queue pairs)."""
        raise Unsupported(f"port {ref.name}: a {self.name} end has no DPDK device argument")

    def creates_socket(self) -> bool:
        """This end creates the Unix socket the two ends meet on (the DUT then registers it for
        cleanup); False for the connecting end and for ends without a socket."""
        return False

    def ovs_interface(self, ref: PortRef, index: int, queues: int) -> tuple[str, dict[str, str]]:
        """(OVS Interface type, ``add_ovs_port`` keywords) of ``ref`` on an OVS-DPDK bridge, or
        :class:`Unsupported` with the reason."""
        return "dpdk", {"devargs": self.dpdk_devargs(ref, index, queues)}

    def kernel_ifname(self, ref: PortRef, dut: str) -> str:
        """The kernel interface a kernel DUT (``dut``: its name, for the message) bridges, or
        :class:`Unsupported`."""
        raise Unsupported(f"{dut} can only bridge kernel interfaces, not {self.name}")

    def dpdk_mtu_refusal(self, ref: PortRef) -> Optional[str]:
        """Why a DPDK PMD cannot carry ``ref.mtu`` on this end (None: it can)."""
        return None


@dataclass(frozen=True)
class KernelIf(PortEnd):
    """A kernel interface (a veth end); a DPDK process opens it with the subclass's ``driver``
    (:class:`AfPacketIf`, :class:`AfXdpIf`; :meth:`of` picks one by name)."""

    name: ClassVar[str] = "veth"
    kernel: ClassVar[bool] = True
    #: the DPDK driver (``net_<driver>``) and the ``topology.port_kind`` of its PHY ports
    driver: ClassVar[str] = "abstract"

    def __post_init__(self) -> None:
        if type(self) is KernelIf:
            raise TypeError("KernelIf is the base of AfPacketIf and AfXdpIf: make one of those, or KernelIf.of(driver)")

    @staticmethod
    def of(driver: str) -> KernelIf:
        """The end of a kernel interface opened with ``driver`` (``af_packet`` or ``af_xdp``)."""
        ends = {cls.driver: cls for cls in (AfPacketIf, AfXdpIf)}
        if driver not in ends:
            raise ValueError(f"KernelIf.driver: {driver!r} is not a DPDK driver of a kernel "
                             f"interface; use one of {', '.join(ends)}")
        return ends[driver]()

    @property
    def port_kind(self) -> str:
        return self.driver

    def kernel_ifname(self, ref: PortRef, dut: str) -> str:
        if not ref.ifname:
            raise Unsupported(f"{dut}: port {ref.name} is a kernel end without an interface name")
        return ref.ifname


@dataclass(frozen=True)
class AfPacketIf(KernelIf):
    """A kernel interface opened with net_af_packet: one socket per queue pair."""

    driver: ClassVar[str] = "af_packet"
    kinds: ClassVar[tuple[str, ...]] = ("af_packet",)
    rx_queue_per_lcore: ClassVar[bool] = True

    def dpdk_devargs(self, ref: PortRef, index: int, queues: int = 1) -> str:
        # qdisc_bypass: frames go straight to the driver; framecnt*framesz = ring memory;
        # a frame must fit one ring slot, so jumbo MTUs get 16 KB slots
        ring = ("blocksz=16384,framesz=16384,framecnt=512" if ref.mtu > 1500
                else "blocksz=4096,framesz=2048,framecnt=1024")
        return f"net_af_packet{index},iface={ref.ifname},qpairs={queues},{ring},qdisc_bypass=1"

    def dpdk_mtu_refusal(self, ref: PortRef) -> Optional[str]:
        if ref.mtu > 1500:
            return (f"port {ref.name}: net_af_packet (DPDK 22.11) carries frames up to 1518 B, MTU "
                    f"{ref.mtu} cannot work; jumbo frames need port_kind vhost or pci")
        return None


@dataclass(frozen=True)
class AfXdpIf(KernelIf):
    """A kernel interface opened with net_af_xdp: a veth has one queue."""

    driver: ClassVar[str] = "af_xdp"
    kinds: ClassVar[tuple[str, ...]] = ("af_xdp",)
    single_queue: ClassVar[bool] = True

    def dpdk_devargs(self, ref: PortRef, index: int, queues: int = 1) -> str:
        return f"net_af_xdp{index},iface={ref.ifname},start_queue=0,queue_count={queues}"


@dataclass(frozen=True)
class PciNic(PortEnd):
    """A NIC bound to vfio-pci at ``PortRef.pci``."""

    name: ClassVar[str] = "pci"
    kinds: ClassVar[tuple[str, ...]] = ("pci",)
    pci_device: ClassVar[bool] = True

    def dpdk_devargs(self, ref: PortRef, index: int, queues: int = 1) -> str:
        return str(ref.pci)


@dataclass(frozen=True)
class VhostFrontend(PortEnd):
    """The virtio-user side of a vhost-user socket (a VNF's or the generator's NIC): with
    ``server`` it creates the socket and waits for the backend; ``queue_size``: its virtqueues'
    entries (DPDK's default 256).  OVS attaches such a socket as ``dpdkvhostuserclient``."""

    server: bool = False
    queue_size: Optional[int] = None
    name: ClassVar[str] = "vhost-user"
    shares_memory: ClassVar[bool] = True

    def dpdk_devargs(self, ref: PortRef, index: int, queues: int = 1) -> str:
        args = f"net_virtio_user{index},path={ref.socket},queues={queues}"
        if self.server:
            args += ",server=1"
        if self.queue_size:
            args += f",queue_size={int(self.queue_size)}"
        if ref.mac:
            args += f",mac={ref.mac}"
        return args

    def creates_socket(self) -> bool:
        return self.server

    def ovs_interface(self, ref: PortRef, index: int, queues: int) -> tuple[str, dict[str, str]]:
        return "dpdkvhostuserclient", {"sock": str(ref.socket)}


@dataclass(frozen=True)
class VhostBackend(PortEnd):
    """The backend side of a vhost-user socket (what a vSwitch is to a VM): DPDK's net_vhost,
    creating the socket or, with ``client``, connecting to the frontend's."""

    client: bool = False
    name: ClassVar[str] = "vhost-backend"
    kinds: ClassVar[tuple[str, ...]] = ("vhost",)
    shares_memory: ClassVar[bool] = True

    @property
    def port_kind(self) -> str:
        return "vhost"

    def dpdk_devargs(self, ref: PortRef, index: int, queues: int = 1) -> str:
        return f"net_vhost{index},iface={ref.socket},queues={queues},client={int(self.client)}"

    def creates_socket(self) -> bool:
        return not self.client

    def ovs_interface(self, ref: PortRef, index: int, queues: int) -> tuple[str, dict[str, str]]:
        if not self.client:
            raise Unsupported(f"OVS-DPDK cannot attach a port of kind {self.name!r} as vhost-user "
                              "server (give VhostBackend(client=True))")
        return "dpdkvhostuserclient", {"sock": str(ref.socket)}


@dataclass(frozen=True)
class MemifEnd(PortEnd):
    """DPDK's net_memif on a socket file; ``role``: ``server`` creates the socket, ``client``
    connects.  ``zero_copy`` (a client only): the client's own mbufs are the shared buffers, so
    the server does the copies (``zero-copy=yes``; the process needs ``--single-file-segments``)."""

    role: Literal["server", "client"] = "server"
    zero_copy: bool = False
    name: ClassVar[str] = "memif"
    kinds: ClassVar[tuple[str, ...]] = ("memif",)
    fixed_rings: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.zero_copy and self.role != "client":
            raise ValueError("memif zero_copy is a client's (DPDK net_memif: zero-copy=yes with role=client)")

    def dpdk_devargs(self, ref: PortRef, index: int, queues: int = 1) -> str:
        args = f"net_memif{index},role={self.role},socket={ref.socket},socket-abstract=no,id=0"
        if self.zero_copy:
            args += ",zero-copy=yes"
        if ref.mac:
            args += f",mac={ref.mac}"
        return args

    def creates_socket(self) -> bool:
        return self.role == "server"


def phy_end(port_kind: str) -> type[PortEnd]:
    """The class of the DUT end of a PHY port of ``topology.port_kind`` (what an adapter built
    from a spec knows of its ports before they are added)."""
    for cls in (AfPacketIf, AfXdpIf, PciNic, VhostBackend, MemifEnd):
        if port_kind in cls.kinds:
            return cls
    raise ValueError(f"topology.port_kind {port_kind!r} has no DUT port end (af_packet, af_xdp, "
                     f"pci, vhost, memif)")
