"""The port kind interface and :class:`HostPort`, one PHY port with its two ends.

A kind class declares what it can carry and where it can be used (``max_mtu``, ``tcp``,
``kernel``, ``dut_netns``, ``tgen_eal``) and makes ports (:meth:`PortKind.create`); each
:class:`HostPort` it makes knows its kind and gives its generator end (:meth:`HostPort.tg_portref`,
:meth:`HostPort.tg_port_spec`) and its DUT end (:meth:`HostPort.dut_portref`).
"""
from __future__ import annotations

import contextlib
import functools
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Mapping, Optional, Sequence, TypedDict, Union

from nfvperf.dut.base import PortRef
from nfvperf.host import netns as N, run as R
from nfvperf.plugins import import_plugins
from nfvperf.tg.tgen import PortSpec

if TYPE_CHECKING:
    from ..base import Topology
    from ..spec import TopologyBase

#: Unix socket paths are limited to 108 bytes (sun_path, NUL included)
UNIX_PATH_MAX = 107


class CabledLink(TypedDict):
    """A testbed's cabled tester-DUT link (:func:`nfvperf.testbed.hosts.cabled_links`), one port on the testbed."""

    link: int                       # its index in the testbed file's ``links:``
    tester: str                     # the tester's end, ``host.nic``
    dut: str                        # the DUT's end, ``host.nic``
    tester_iface: Optional[str]     # kernel interface (port kinds af_packet, af_xdp)
    dut_iface: Optional[str]
    tester_pci: Optional[str]       # PCI address (port kind pci)
    dut_pci: Optional[str]
    tester_numa: Optional[int]
    dut_numa: Optional[int]
    speed: str                      # the tester NIC's, e.g. 10G
    tester_vhost: Union[bool, str]  # a vhost-user NIC here cabled to a guest's: True, its socket once booted
    dut_vhost: Union[bool, str]


@dataclass
class HostPort:
    """One emulated or real PHY port: a generator side and a DUT side.

    ``kind`` is the family (``veth``, ``pci``, ``vhost``, ``memif``); ``port_kind`` the kind
    object that made it and answers for its ends."""

    index: int
    kind: str                         # "veth" | "pci" | "vhost" | "memif"
    tg_ifname: Optional[str] = None   # veth: the generator's end
    tg_netns: Optional[str] = None
    dut_ifname: Optional[str] = None  # veth: the DUT's end
    dut_netns: Optional[str] = None
    tg_pci: Optional[str] = None      # pci: the generator's NIC
    dut_pci: Optional[str] = None     # pci: the DUT's NIC
    driver: str = "af_packet"         # how DPDK opens a kernel interface: af_packet | af_xdp
    mtu: int = 1500
    veth: Optional[N.VethPair] = None
    tg_mac: Optional[str] = None
    dut_mac: Optional[str] = None
    socket: Optional[Path] = None     # vhost / memif: the socket between the two ends
    port_kind: Optional["PortKind"] = field(default=None, repr=False)

    def _kind(self) -> "PortKind":
        if self.port_kind is None:
            name = {"veth": self.driver}.get(self.kind, self.kind)
            self.port_kind = port_kind_class(name)()
        return self.port_kind

    def tg_portref(self) -> PortRef:
        """The generator's end as a PortRef (its ``dpdk_devargs`` are tgen's --vdev / -a)."""
        return self._kind().tg_portref(self)

    def dut_portref(self) -> PortRef:
        """The DUT's end, for ``DutAdapter.add_port``."""
        return self._kind().dut_portref(self)

    def tg_devargs(self, dpdk_index: Optional[int] = None, queues: int = 1) -> str:
        i = self.index if dpdk_index is None else dpdk_index
        return self.tg_portref().dpdk_devargs(i, queues)

    def tg_port_spec(self, dpdk_index: Optional[int] = None, dut_tx_queues: int = 1,
                     dut_peer_queues: int = 1, workers: int = 1) -> "PortSpec":
        """tgen's PortSpec of the generator end; ``dut_tx_queues``: how many TX queues the DUT
        sends on (``DutAdapter.tx_queues()``), for kinds whose rings pair up (memif);
        ``dut_peer_queues``: the queue pairs the DUT needs its peer to offer
        (``DutAdapter.peer_queues()``), for kinds whose queue pairs the generator's end creates
        (vhost: virtio-user ``queues=``); ``workers``: tgen's worker lcores with
        ``topology.tgen_cores`` (one TX and one RX queue each, on kinds with ``tg_multiqueue``)."""
        kind = self._kind()
        workers = max(1, int(workers)) if kind.tg_multiqueue else 1
        pairs = max(kind.tg_queue_pairs(dut_peer_queues), workers if kind.tg_queue_pair_per_worker else 1)
        return PortSpec(self.tg_devargs(dpdk_index, pairs), mtu=self.mtu, tx_queues=workers,
                        rx_queues=max(kind.tg_rx_queues(dut_tx_queues), pairs, workers), rxd=kind.tg_rxd,
                        mac=kind.tg_wire_mac(self), prefetch=kind.tg_prefetch)

    def to_dict(self) -> dict[str, object]:
        d = {k: v for k, v in self.__dict__.items() if k not in ("veth", "port_kind")}
        d["socket"] = str(self.socket) if self.socket else None
        d["port_kind"] = self._kind().name
        return d


class PortKind:
    """One way of making PHY ports.  Subclasses set the class attributes and implement
    :meth:`create`, :meth:`tg_portref` and :meth:`dut_portref`."""

    #: ``topology.port_kind`` value
    name: ClassVar[str] = "abstract"
    #: HostPort.kind of its ports
    family: ClassVar[str] = "abstract"
    #: sort key of the listing (veth kinds first)
    order: ClassVar[int] = 50
    #: the DUT end is a kernel interface (a kernel DUT such as a Linux bridge can attach it)
    kernel: ClassVar[bool] = False
    #: the generator ends can become kernel TCP endpoints (iperf3)
    tcp: ClassVar[bool] = False
    #: the DUT end lives in the DUT's network namespace (p2p makes one only for these kinds)
    dut_netns: ClassVar[bool] = False
    #: the largest MTU the generator (tgen, DPDK 22.11) and a DPDK DUT carry on this kind, and why
    #: (a DPDK DUT's own end is held to it at validation, TCP tests too: ``DutAdapter.dpdk_ports``)
    max_mtu: ClassVar[int] = 1500
    mtu_limit_reason: ClassVar[str] = ""
    #: the largest MTU the kind carries without the generator (kernel TCP endpoints, raw frames)
    path_max_mtu: ClassVar[Optional[int]] = None
    #: tgen's EAL needs these with this kind (virtio-user: memory shared by file descriptor)
    tgen_eal: ClassVar[tuple[str, ...]] = ()
    #: tgen must run on hugepage memory (not --no-huge)
    tgen_hugepages: ClassVar[bool] = False
    #: why a kernel DUT cannot use it (userspace kinds)
    kernel_refusal: ClassVar[str] = ""
    #: ports come up asynchronously: wait for the generator's links before the first trial
    wait_link: ClassVar[bool] = False
    #: the generator's end can open one TX and one RX queue per tgen worker (topology.tgen_cores:
    #: docs/tgen.md "A direction over several cores"); kinds without it keep one queue each
    tg_multiqueue: ClassVar[bool] = False
    #: ports are Unix sockets ``<tag>-<stem><index>.sock`` between the two ends (vhost, memif)
    socket_stem: ClassVar[str] = ""
    #: ... and each worker sends on a queue pair of its own, which the DUT must poll (vhost: the
    #: generator's end creates the pairs)
    tg_queue_pair_per_worker: ClassVar[bool] = False
    #: the DUT ends can be SR-IOV VFs that a VM takes over (p2p ``vnf: vm``)
    dut_vfs: ClassVar[bool] = False
    #: on a testbed: the link field each end is made of, how to give it, what the ends are (None:
    #: the kind is not made of a testbed's cables); ``testbed_vhost``: an end may instead be a
    #: vhost-user cable to a guest's NIC (testbed ``nics.vhost``)
    testbed_end: ClassVar[Optional[tuple[str, str, str]]] = None
    testbed_vhost: ClassVar[bool] = False

    def path_facts(self, port: HostPort, topo: Topology) -> dict[str, object]:
        """What the running path of ``port`` turned out to be (read back after bring-up, stored
        with the run's topology environment); {} for kinds with nothing to report."""
        return {}

    # -- declarations (classmethods: validation and preflight need no instance) ----------------
    @classmethod
    def mtu_limit(cls, generator: bool = True) -> int:
        """The largest MTU of this kind when a DPDK PMD opens the ports (``generator``: tgen, or
        a DPDK DUT such as testpmd or OVS-DPDK on its af_packet/af_xdp vdev), else when only the
        kernel path must carry it (iperf3 between kernel veths through a kernel DUT)."""
        return cls.max_mtu if generator or cls.path_max_mtu is None else cls.path_max_mtu

    @classmethod
    def check_mtu(cls, mtu: int, generator: bool = True) -> Optional[str]:
        """Why ``mtu`` cannot work on this kind (None if it can).  ``generator``: a DPDK PMD
        opens the ports — tgen, or a DPDK DUT's end (:meth:`mtu_limit`); else only the kernel
        path, e.g. iperf3 over veth through a Linux bridge, must carry it."""
        limit = cls.mtu_limit(generator)
        if mtu > limit:
            why = f" ({cls.mtu_limit_reason})" if cls.mtu_limit_reason else ""
            return f"port_kind {cls.name} carries an MTU of at most {limit}{why}; mtu {mtu} cannot work"
        return None

    @classmethod
    def port_count(cls, spec: TopologyBase) -> int:
        """How many ports a spec gives (``ports``; pci: the address pairs)."""
        return spec.ports

    @classmethod
    def pci_addresses(cls, spec: TopologyBase) -> list[str]:
        """PCI devices preflight must find (real NICs only)."""
        return []

    @classmethod
    def local_refusal(cls, spec: TopologyBase) -> Optional[str]:
        """Why ``spec`` cannot make this kind's ports on this machine without a testbed (None if
        it can); ``Topology.check_spec`` asks it, so ``nfvperf validate`` and a run say the same."""
        return None

    @classmethod
    def testbed_refusal(cls, ports: int, links: Sequence[Mapping[str, object]]) -> Optional[str]:
        """Why ``ports`` ports of this kind cannot be made of a testbed's cabled ``links`` (None if
        they can): a kind not made of cables, too few links, a link end without the field."""
        if cls.testbed_end is None:
            return (f"topology.port_kind {cls.name}: on a testbed the ports are the cabled links' kernel "
                    f"interfaces (port_kind af_packet or af_xdp) or their PCI NICs (port_kind pci)")
        if len(links) < ports:
            return (f"topology.ports: {ports} ports, but the testbed cables only {len(links)} tester-DUT "
                    f"link(s) (links: in the testbed file)")
        field, how, what = cls.testbed_end
        for lk in links[:ports]:
            for side in ("tester", "dut"):
                if not lk.get(f"{side}_{field}") and not (cls.testbed_vhost and lk.get(f"{side}_vhost")):
                    host, _, nic = str(lk.get(side, "?")).partition(".")
                    return (f"links.{lk.get('link', '?')}: {lk.get('tester')} -> {lk.get('dut')}: "
                            f"topology.port_kind {cls.name} drives the link's {what}, but "
                            f"hosts.{host}.nics.{nic} has no {field}: give it {how}")
        return None

    @classmethod
    def numa_node(cls, spec: TopologyBase) -> Optional[int]:
        """NUMA node the generator's ports sit on (None: unknown / not NUMA)."""
        return None

    #: RX descriptors of the generator's end (tgen ``rxd``): how long the generator may be
    #: descheduled before the DUT's frames to it are dropped (at 1 Mfps, 1024 = 1 ms)
    tg_rxd: ClassVar[int] = 1024
    #: tgen's ``--port prefetch=`` for the generator end (None: tgen's default by driver)
    tg_prefetch: ClassVar[Optional[bool]] = None

    @classmethod
    def tg_rx_queues(cls, dut_tx_queues: int) -> int:
        """RX queues the generator opens on a port whose DUT sends on ``dut_tx_queues``."""
        return 1

    @classmethod
    def tg_queue_pairs(cls, dut_peer_queues: int) -> int:
        """Queue pairs the generator's end opens (its devargs ``queues=``) for a DUT that needs
        ``dut_peer_queues`` (``DutAdapter.peer_queues()``); 1 where the DUT's queues do not
        depend on the generator's (veth, pci) or the rings follow the RX queues (memif)."""
        return 1

    # -- making ports --------------------------------------------------------------------------
    def create(self, topo: Topology, n: int, *, dut_netns: Optional[str], tg_netns: Optional[str],
               mtu: int) -> list[HostPort]:
        """Make ``n`` ports for ``topo`` (a Topology: its ``run``, ``tracker``, ``spec``,
        ``ports``), register every resource with ``topo.tracker`` and return the new ports
        (also appended to ``topo.ports``).  Here: socket kinds (``socket_stem``), MACs from the
        tag and one socket ``<stem><index>`` per port."""
        if not self.socket_stem:
            raise NotImplementedError
        new = []
        for i in range(len(topo.ports), len(topo.ports) + n):
            tg_mac, dut_mac = self.macs(topo.run.tag, i)
            new.append(HostPort(i, self.family, mtu=mtu, tg_mac=tg_mac, dut_mac=dut_mac,
                                socket=self.socket_path(topo, f"{self.socket_stem}{i}")))
        return self._append(topo, new)

    def tg_portref(self, port: HostPort) -> PortRef:
        raise NotImplementedError

    def tg_wire_mac(self, port: HostPort) -> Optional[str]:
        """The address tgen puts on the wire for ``port`` (PortSpec ``mac``) when it must differ
        from the device's own; None: the device's (every kind but af_packet)."""
        return None

    def before_tgen(self, port: HostPort) -> None:
        """Called for each port right before tgen opens the ports (not for iperf3, which uses
        the kernel interface itself)."""

    def dut_portref(self, port: HostPort) -> PortRef:
        raise NotImplementedError

    # -- helpers for the kinds -----------------------------------------------------------------
    @staticmethod
    def macs(tag: str, i: int) -> tuple[str, str]:
        """Deterministic, locally administered MACs of port ``i``: 02:<tag bytes>:a0|d0:<i>
        (generator, DUT)."""
        t = tag[3:]
        return (f"02:{t[0:2]}:{t[2:4]}:{t[4:6]}:a0:{i:02x}",
                f"02:{t[0:2]}:{t[2:4]}:{t[4:6]}:d0:{i:02x}")

    @staticmethod
    def socket_path(topo: Topology, name: str) -> Path:
        """``/run/nfvperf/<tag>/<tag>-<name>.sock`` (the run's runtime directory, where ``nfvperf
        cleanup`` looks for a killed run's sockets, whatever its output directory), or
        ``/tmp/nfvperf-<tag>-<name>.sock`` when that path is too long for a Unix socket.  The
        socket (and the directory, once empty) are registered with the tracker."""
        tag = topo.run.tag
        d = R.DEFAULT_RUN_ROOT / tag
        p = d / f"{tag}-{name}.sock"
        if len(str(p)) > UNIX_PATH_MAX:
            d, p = Path("/tmp"), Path("/tmp") / f"nfvperf-{tag}-{name}.sock"
        if not d.exists():
            d.mkdir(parents=True, exist_ok=True)
            if topo.tracker is not None:
                topo.tracker.add("dir", str(d), functools.partial(_rmdir_if_empty, d))
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
        if topo.tracker is not None:
            topo.tracker.add("socket", str(p), functools.partial(p.unlink, missing_ok=True))
        return p

    def _append(self, topo: Topology, ports: Sequence[HostPort]) -> list[HostPort]:
        for p in ports:
            p.port_kind = self
            topo.ports.append(p)
        return list(ports)


def _rmdir_if_empty(d: Path) -> None:
    with contextlib.suppress(OSError):
        d.rmdir()


#: name -> PortKind subclass
PORT_KIND_REGISTRY: dict[str, type[PortKind]] = {}


def register_port_kind(name: str):
    """Class decorator: ``@register_port_kind("vhost")``; the ``topology.port_kind`` value."""

    def deco(cls: type[PortKind]) -> type[PortKind]:
        cls.name = name
        PORT_KIND_REGISTRY[name] = cls
        return cls

    return deco


# The kinds are this package's modules, imported on first use (the package re-exports these).
_loaded = False


def load_port_kinds() -> None:
    global _loaded
    _loaded = True
    import_plugins("nfvperf.topo.ports", importlib.import_module("nfvperf.topo.ports").__path__, skip=("base",))


def port_kind_names() -> list[str]:
    """The registered port kinds, in registration order of their ``order`` (veth kinds first)."""
    if not _loaded:
        load_port_kinds()
    return sorted(PORT_KIND_REGISTRY, key=lambda k: (PORT_KIND_REGISTRY[k].order, k))


def port_kind_class(name: str) -> type[PortKind]:
    if name not in PORT_KIND_REGISTRY:
        load_port_kinds()
    try:
        return PORT_KIND_REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown port kind {name!r}; known: {', '.join(port_kind_names())}") from None
