"""The DUT adapter interface (``Process``, the subprocess helper, is :mod:`nfvperf.host.proc`).

In the spirit of Open vSwitch's netdev provider table: one small interface, one file per
implementation (``linux_bridge.py``, ``testpmd.py``, ``ovs_dpdk.py``, ...), and no
``if dut == "ovs"`` anywhere outside the adapters.  Topologies only call these methods.

Life cycle::

    dut = Adapter(run, tracker, cpus=[1], **options)
    dut.add_port(PortRef(...))     # before start(): recorded, attached at start();
                                   # after start(): attached at once (or Unsupported)
    dut.start()
    dut.program([Flow(0, 1), Flow(1, 0)])   # or program(None) = cross-connect port pairs
    dut.counters(); dut.alive()    # alive() raises DutFailure when the process died
    dut.telemetry()                # one reading (nfvperf.tg.telemetry); what it lacks is "not available"
    dut.stop()                     # idempotent; also registered with the tracker

``counters()`` returns ``{"ports": {name: {rx_packets, tx_packets, rx_bytes, tx_bytes,
rx_dropped, tx_dropped, rx_errors, tx_errors}}, ...adapter extras}``.
"""
from __future__ import annotations

import abc
import logging
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Optional, Protocol, Sequence, TypeVar

from pydantic import BaseModel, ConfigDict

from nfvperf.host.cpu import CoreRequest, PinningPlan
from nfvperf.host import hugepages as hp
from nfvperf.host.proc import LOCAL, Process, ProcessError  # noqa: F401 (re-exported)
from nfvperf.host.preflight import Binary, Needs
from nfvperf.host.run import ResourceTracker, RunContext
from nfvperf.tg.sim_model import SimTraits
from nfvperf.tg.telemetry import dut_reading
from nfvperf.trial import DutFailure, Unsupported

from .port_end import AfPacketIf, AfXdpIf, KernelIf, MemifEnd, PciNic, PortEnd, VhostBackend, VhostFrontend
from nfvperf import dut as _pkg

if TYPE_CHECKING:
    from nfvperf.host.base import Host

log = logging.getLogger(__name__)

__all__ = ["AdapterOptions", "dut_class", "DutAdapter", "DutFailure", "Unsupported", "PortRef", "Flow", "Process",
           "PortEnd", "KernelIf", "AfPacketIf", "AfXdpIf", "PciNic",
           "VhostFrontend", "VhostBackend", "MemifEnd", "eal_port_options",
           "ProcessError", "register_dut", "DUT_REGISTRY", "create_dut"]


# ------------------------------------------------------------------------------------- ports
@dataclass
class PortRef:
    """One port as the DUT sees it: where it is (``ifname`` in ``netns``, ``pci``, ``socket``),
    its ``mtu`` and ``mac``, and its ``end`` (:mod:`nfvperf.dut.port_end`), which builds its device
    arguments: a :class:`KernelIf` (af_packet/af_xdp), :class:`PciNic`, :class:`VhostFrontend`,
    :class:`VhostBackend` or :class:`MemifEnd`."""

    name: str
    end: PortEnd = field(default_factory=AfPacketIf)
    ifname: Optional[str] = None
    netns: Optional[str] = None
    pci: Optional[str] = None
    socket: Optional[Path] = None
    mtu: int = 1500
    mac: Optional[str] = None

    def dpdk_devargs(self, index: int, queues: int = 1) -> str:
        """Device argument for a DPDK process (``--vdev`` value, or the PCI address for ``-a``)."""
        return self.end.dpdk_devargs(self, index, queues)

    def eal_args(self, devargs: str) -> list[str]:
        """``devargs`` (this port's, perhaps extended by the process) with its EAL option."""
        return [self.end.eal_option, devargs]


def eal_port_options(ports: Sequence[PortRef]) -> list[str]:
    """The EAL options the ports' ends need together (``--single-file-segments`` for vhost-user
    memory sharing, ``--no-pci`` when no end is a PCI device)."""
    out = ["--single-file-segments"] if any(p.end.shares_memory for p in ports) else []
    return out + hp.no_pci_option(p.end.pci_device for p in ports)


@dataclass
class Flow:
    """Forward what arrives on port ``in_port`` (index in add_port order) to ``out_port``.
    ``match`` narrows it (adapter-specific keys: ``dst_mac``, ``src_ip``, ...)."""

    in_port: int
    out_port: int
    match: dict[str, Any] = field(default_factory=dict)


def cross_connect(n_ports: int) -> list[Flow]:
    """0<->1, 2<->3, ...: the default PHY-PHY programming."""
    return [f for i in range(0, n_ports - 1, 2) for f in (Flow(i, i + 1), Flow(i + 1, i))]


def cross_connect_only(flows: Optional[Sequence[Flow]], n_ports: int, what: str) -> None:
    """:class:`Unsupported` unless ``flows`` (None: nothing asked) are pairs of the cross-connect
    of ``n_ports`` without matches: a DUT that joins port pairs by itself (``what``) can do no other."""
    pairs = {(f.in_port, f.out_port) for f in cross_connect(n_ports)}
    if flows is not None and (not {(f.in_port, f.out_port) for f in flows} <= pairs or any(f.match for f in flows)):
        raise Unsupported(f"{what} port pairs (0<->1, 2<->3); other flows need a switch")


def run_version(argv: Sequence[str], pattern: str = r"(\d+\.\d+[\w.\-]*)") -> str:
    """First version-looking token of ``argv``'s output, or '' (never raises)."""
    try:
        cp = subprocess.run(list(argv), capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    m = re.search(pattern, cp.stdout + cp.stderr)
    return m.group(1) if m else ""


def host_binary(host: Host, remote: bool, given: Optional[str], field: str, build: str,
                find_local: Callable[[], str], binary: Binary) -> str:
    """The path of a DUT's program on ``host``: ``given`` (the suite's ``field``; DutFailure when
    ``host`` has no such file: "give the path of ``build``"), else ``find_local()`` on this machine,
    else the first of ``binary``'s candidates that ``host`` has (its bare name when none)."""
    if given:
        if not host.exists(given):
            raise DutFailure(f"{field}: {given} does not exist on {getattr(host, 'name', 'this host')}; "
                             f"give the path of {build}")
        return given
    if not remote:
        return find_local()
    return next((c for c in binary.candidates if host.exists(c)), binary.name)


# ----------------------------------------------------------------------------------- adapter
class TopologyView(Protocol):
    """What an adapter's declarations may read of the topology spec (``topo.spec.TopologySpec``,
    a layer above, satisfies it); an adapter's own section comes from :meth:`DutAdapter.options`."""

    @property
    def kind(self) -> str: ...

    @property
    def dut(self) -> str: ...

    @property
    def ports(self) -> int: ...

    @property
    def port_kind(self) -> str: ...

    @property
    def pci(self) -> list[str]: ...

    @property
    def mtu(self) -> int: ...

    @property
    def vnf(self) -> str: ...

    def option_section(self, key: str) -> Optional[BaseModel]:
        """The adapter options section ``key`` (``ovs``, ``testpmd`` ...: an adapter's
        ``options_key``), None when the spec has none."""
        ...


_Spec = TypeVar("_Spec", bound=TopologyView)
_Options = TypeVar("_Options", bound=BaseModel)


class AdapterOptions(BaseModel):
    """Base of an adapter's options model (its section of the suite's ``topology:``)."""

    model_config = ConfigDict(extra="forbid")
    #: groups of options that say the same thing two ways (``pmd_cores`` / ``pmd_cpu_mask``):
    #: a test or study override giving one drops the others inherited from the suite
    alternatives: ClassVar[tuple[tuple[str, ...], ...]] = ()

    @classmethod
    def without_alternatives(cls, base: Mapping[str, object], override: Mapping[str, object]
                             ) -> dict[str, object]:
        """``base`` (a dumped section) without the alternatives of the keys ``override`` sets."""
        drop = {k for group in cls.alternatives if set(group) & set(override)
                for k in group if k not in override}
        return {k: v for k, v in base.items() if k not in drop}

    def sim_traits(self) -> SimTraits:
        """What these options say to the simulated DUT's model (``--tg sim``): polling cores, rx
        queues, rules, caches.  Default: nothing; an adapter whose options have them says so."""
        return SimTraits()


class DutAdapter(abc.ABC):
    """One switch or VNF.  Subclasses set ``name`` and implement the abstract methods.

    What the adapter needs and offers is declared here, on the class, so nothing outside it
    names a specific DUT: its options (``options_key`` = the ``topology:`` section, e.g.
    ``ovs``, validated by ``options_model``), the port kinds it can drive, its binaries, its
    hugepage and polling-core demand, and its preflight needs."""

    name: str = "abstract"
    #: how many forwarding operations ("switching operations", seed 000 Table 5-1) one pass makes
    switching_operations: int = 1
    #: the suite's ``topology.<options_key>:`` section and the pydantic model validating it
    options_key: ClassVar[Optional[str]] = None
    options_model: ClassVar[Optional[type[BaseModel]]] = None
    #: TopologySpec.port_kind values the adapter can drive
    port_kinds: ClassVar[tuple[str, ...]] = ("af_packet", "af_xdp", "pci")
    #: topology kinds that list the DUTs they drive (``Topology.duts``) and can drive this one
    #: too: a new adapter declares them here, and no topology module names it
    topologies: ClassVar[tuple[str, ...]] = ()
    #: why it cannot drive a port kind it leaves out (said in the validation error)
    port_kind_notes: ClassVar[dict[str, str]] = {}
    #: it opens its ports with DPDK PMDs, veth ends too (net_af_packet / net_af_xdp vdevs), so a
    #: port kind's DPDK MTU limit (``PortKind.max_mtu``: 1500 on af_packet/af_xdp) holds for it
    #: even in TCP tests, where tgen is not used; False for kernel DUTs, which take the veth
    #: itself and carry what the kernel path does (``PortKind.path_max_mtu``, jumbo frames)
    dpdk_ports: ClassVar[bool] = True
    #: the programs it runs (required by preflight when the adapter is used)
    binaries: ClassVar[tuple[Binary, ...]] = ()
    #: drives its processes and files through a host object (``options["host"]``: a testbed's
    #: DUT host over SSH, issue 10); the others run on this machine only
    runs_remote: ClassVar[bool] = False
    #: busy-polling CPUs it wants (the CPU plan's ``dut`` role); 0 = it forwards in the kernel
    polling_cpus: ClassVar[int] = 1
    #: the topology spec fields (dotted paths relative to the TopologySpec: ``ovs.rules``) that a
    #: running instance can change without a restart (:meth:`reconfigure`); a study interleaves
    #: units differing only in these on one topology build, and restarts between rounds for
    #: anything else (``nfvperf.topo.inplace``)
    in_place: ClassVar[frozenset[str]] = frozenset()
    #: the adapter builds OVS bonds of a side's ports (``ovs.bond_mode``, seed 003)
    builds_bonds: ClassVar[bool] = False
    #: what :meth:`telemetry` reports (names of :mod:`nfvperf.tg.telemetry`: ``pmds``,
    #: ``datapath_flows`` and the port counters of ``PORT_FIELDS`` it has); everything else reads
    #: "not available".  Default: the port counters every adapter's ``counters()`` has.
    telemetry_offers: ClassVar[frozenset[str]] = frozenset(
        {"rx_packets", "tx_packets", "rx_dropped", "tx_dropped", "rx_errors", "tx_errors"})

    @classmethod
    def options(cls, spec: TopologyView) -> Optional[BaseModel]:
        """This adapter's options section of a TopologySpec (None without one): an instance of
        its ``options_model``.  An adapter with options narrows the type by overriding it with
        :meth:`options_as` (``def options(cls, spec) -> Optional[OvsSpec]: return
        cls.options_as(spec, OvsSpec)``); ``TopologySpec.dut_options()`` is the view from above."""
        return cls.options_as(spec, BaseModel)

    @classmethod
    def options_as(cls, spec: TopologyView, model: type[_Options]) -> Optional[_Options]:
        """The section ``options_key`` of ``spec`` (:meth:`TopologyView.option_section`) as
        ``model``; None without a key or a section, a TypeError when the section is another model
        (an adapter whose ``options_model`` is not the model it reads)."""
        if not cls.options_key:
            return None
        section = spec.option_section(cls.options_key)
        if section is None or isinstance(section, model):
            return section
        raise TypeError(f"DUT adapter {cls.name}: topology.{cls.options_key} is a "
                        f"{type(section).__name__}, not the {model.__name__} it reads")

    @classmethod
    def hugepage_demand_mb(cls, spec: TopologyView) -> int:
        """Hugepage memory (MB) one instance needs with ``spec`` (a TopologySpec)."""
        return 0

    @classmethod
    def preflight_needs(cls, spec: TopologyView) -> Needs:
        """What preflight must find on the host for this adapter: its binaries, required."""
        return Needs(hugepages_mb=cls.hugepage_demand_mb(spec)).need(*cls.binaries)

    @classmethod
    def spec_options(cls, spec: TopologyView) -> dict[str, object]:
        """Constructor keywords a topology passes, taken from the adapter's options section."""
        return {}

    @classmethod
    def core_request(cls, spec: TopologyView) -> Optional[CoreRequest]:
        """The polling cores the options ask for as a count (``pmd_cores: 2, ht: true``), which
        the topology resolves from the host's sibling map when it plans CPUs; None = the
        plan's default (``polling_cpus`` CPUs) or a raw mask/lcore list of the options."""
        return None

    @classmethod
    def polling_cpus_of(cls, spec: TopologyView) -> Optional[list[int]]:
        """The CPUs the adapter polls on when ``spec`` names them itself (a raw mask or lcore
        list that does not enter the CPU plan), for the stored pinning; None: the plan's ``dut``
        CPUs are the ones (default)."""
        return None

    @classmethod  # noqa: B027 - optional hook, default: no change
    def adjust_plan(cls, plan: PinningPlan, spec: TopologyView) -> None:
        """Amend the CPU plan (a PinningPlan) with what the adapter knows, e.g. that it forwards
        on the generator's CPUs."""

    @classmethod
    def in_place_for(cls, spec: TopologyView) -> frozenset[str]:
        """The fields of :attr:`in_place` a running instance built from ``spec`` (a TopologySpec)
        can change; an adapter narrows it where the spec ties a field to something else that
        would have to restart (default: :attr:`in_place`)."""
        return cls.in_place

    @classmethod
    def describe_options(cls, section: dict[str, object]) -> list[str]:
        """Short labels for non-default options (a stored options section) for report titles."""
        return []

    @classmethod
    def fit_traffic(cls, spec: _Spec, traffic: object) -> _Spec:
        """The topology spec (a TopologySpec) a test sending ``traffic`` (its TrafficSpec) runs
        on, for adapters whose set-up depends on the traffic (l3fwd: routes for the test's flows);
        a ValueError naming the field when the adapter cannot carry it.  Default: ``spec``."""
        return spec

    def __init__(self, run: RunContext, tracker: Optional[ResourceTracker], cpus: Sequence[int] = (),
                 **options: object):
        self.run = run
        # Optional: OvsDpdk also runs without one; adapters that need it narrow the type
        # (``tracker: ResourceTracker`` in the class body) and require it in their constructor
        self.tracker: Optional[ResourceTracker] = tracker
        self.cpus = list(cpus)
        # the constructor's extra keywords (plan, spec, ...); not ``options``, the classmethod
        # that reads this adapter's section of a TopologySpec
        self.init_options = options
        self.ports: list[PortRef] = []
        self.started = False

    # the table -------------------------------------------------------------------------------
    def add_port(self, port: PortRef) -> int:
        """Attach a port; returns its index (the order of add_port calls)."""
        if self.started:
            self._attach_port(port)
        self.ports.append(port)
        return len(self.ports) - 1

    def _attach_port(self, port: PortRef) -> None:
        raise Unsupported(f"{self.name} cannot add ports after start()")

    def tx_queues(self) -> int:
        """TX queues the DUT sends on per port (a memif peer polls as many RX rings)."""
        return int(getattr(self, "queues", 1) or 1)

    def peer_queues(self) -> int:
        """Queue pairs the generator's end of a shared-ring port (vhost-user) must offer: 1, or
        one per TX queue for a DUT that sends on every TX queue it opens (l3fwd: one per lcore)."""
        return 1

    def stream_params(self) -> Optional[list[dict[str, object]]]:
        """Per-direction tgen stream fields the DUT's forwarding needs (forward pairs, then the
        reverse; l3fwd: addresses its routes send to each port); None = tgen's defaults."""
        return None

    @abc.abstractmethod
    def start(self) -> None:
        """Start the DUT (processes, bridges) with the ports added so far."""

    def launch(self) -> None:
        """Start as far as the DUT can without its peer: a topology calls this, starts the
        generator on the other ends of the ports, then calls :meth:`await_ready`.  A DUT that
        waits for its links before it forwards (l3fwd on vhost-user/memif, whose links come up
        only when the generator attaches) stops short of that wait here.  Default: :meth:`start`."""
        self.start()

    def await_ready(self) -> None:  # noqa: B027 - optional hook
        """Finish a :meth:`launch` once the peer (the generator) is up.  Default: nothing."""

    def program(self, flows: Optional[Sequence[Flow]] = None) -> Optional[Path]:  # noqa: B027 - optional hook
        """Install forwarding (None = cross-connect 0<->1, 2<->3, ...); adapters that write the
        rules to a file return its path."""

    @abc.abstractmethod
    def counters(self) -> dict[str, object]:
        """The DUT's own counters: {"ports": {name: {...}}, ...}."""

    def telemetry(self) -> dict[str, object]:
        """One telemetry reading (:mod:`nfvperf.tg.telemetry`: PMDs, datapath flows, per-port
        counters; cumulative), read before and after each trial.  Default: the port counters of
        :meth:`counters` that :attr:`telemetry_offers` names; PMDs and datapath flows "not
        available".  An adapter with more overrides it and declares it in ``telemetry_offers``."""
        ports = self.counters().get("ports") or {}
        return dut_reading(self.name, ports if isinstance(ports, dict) else {},
                           port_offers=tuple(self.telemetry_offers))

    @abc.abstractmethod
    def alive(self) -> None:
        """Raise DutFailure if the DUT died or stopped answering."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop and release everything start() created.  Idempotent."""

    def version(self) -> str:
        return ""

    def reconfigure(self, changes: dict[str, object]) -> dict[str, object]:
        """Apply ``{field path: new value}`` (paths of :attr:`in_place`, e.g. ``{"ovs.n_rxq": 2}``)
        to the running DUT without a restart, wait until it has settled, and return what was done
        (per field, for the run's stored environment).  A field not in :attr:`in_place` is a
        ValueError naming it (nothing is applied then)."""
        bad = sorted(k for k in changes if k not in self.in_place)
        if bad:
            can = ", ".join(sorted(self.in_place)) or "nothing"
            raise ValueError(f"{self.name} cannot change {', '.join(bad)} while running (it "
                             f"changes in place: {can}); restart it with the new setting")
        if not changes:
            return {}
        if not self.started:
            raise ValueError(f"{self.name} is not running: reconfigure() changes a started DUT")
        return self.apply_in_place(dict(changes))

    def apply_in_place(self, changes: dict[str, object]) -> dict[str, object]:
        """The adapter's part of :meth:`reconfigure` (``changes`` are checked against
        :attr:`in_place` and not empty); adapters declaring :attr:`in_place` implement it."""
        raise NotImplementedError(f"{self.name} declares in_place fields but no apply_in_place()")

    def environment(self) -> dict[str, object]:
        return {"dut": self.name, "version": self.version(), "cpus": self.cpus,
                "ports": [p.name for p in self.ports],
                "options": {k: v for k, v in self.init_options.items()
                            if isinstance(v, (str, int, float, bool, type(None)))}}

    def reset(self) -> None:
        """RFC 6201 reset: stop and start again (adapters may do better)."""
        self.stop()
        self.start()
        self.program(None)

    def __enter__(self) -> "DutAdapter":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class SnapshotCounters:
    """Port counters of a DPDK DUT that cannot clear its own safely (testpmd, l3fwd): the raw
    counters since start (:meth:`raw_port_stats`, {port index: {rx_packets, tx_packets,
    rx_dropped, tx_dropped, ...}}) minus a snapshot taken at :meth:`clear_counters`.  A snapshot,
    not the DUT's own clear: the af_packet PMD adds to its counters on every poll, even an empty
    one, so a clear issued while the forwarding lcore polls can be overwritten by the old value
    (seen: 301 of 300 frames); l3fwd has no console to clear them at all.  A (re)started DUT
    resets ``_baseline`` to {}."""

    name: str
    ports: list[PortRef]
    _baseline: dict[int, dict[str, int]]

    def raw_port_stats(self) -> dict[int, dict[str, int]]:
        raise NotImplementedError

    def counters(self) -> dict[str, object]:
        """Port counters since the last clear_counters() (since start when never cleared)."""
        stats = self.raw_port_stats()
        ports = {self.ports[i].name: {k: v - self._baseline.get(i, {}).get(k, 0) for k, v in s.items()}
                 for i, s in sorted(stats.items()) if i < len(self.ports)}
        tot = {k: sum(s[k] for s in ports.values()) for k in ("rx_packets", "tx_packets",
                                                              "rx_dropped", "tx_dropped")}
        return {"dut": self.name, "ports": ports, "total": tot}

    def clear_counters(self) -> None:
        """Start counting from now."""
        self._baseline = {i: dict(s) for i, s in self.raw_port_stats().items()}


class DpdkProcessDut(SnapshotCounters, DutAdapter):
    """A DPDK application as one interactive process (testpmd, l3fwd), on this machine or on a
    testbed's DUT host (``host=``: over SSH, or in a QEMU guest of the testbed): its process,
    console and counters through that host, its hugepage files and DPDK runtime directory
    (EAL ``--file-prefix``) removed there after it exits."""

    role = "dut"
    #: ethdev counters of its ports, with missed and no-mbuf drops
    telemetry_offers: ClassVar[frozenset[str]] = DutAdapter.telemetry_offers | {"rx_missed", "rx_nombuf"}
    tracker: ResourceTracker        # required here (the base class allows None)
    proc_name: str
    netns: Optional[str]

    def __init__(self, run: RunContext, tracker: ResourceTracker, cpus: Sequence[int] = (),
                 **options: object):
        super().__init__(run, tracker, cpus, **options)
        # where it runs (nfvperf.host.proc.LOCAL, or a testbed's DUT host: its sockets, files and
        # hugepage files are on that host, reached through self.host)
        self.host: Any = options.get("host") or LOCAL
        self.remote = bool(getattr(self.host, "remote", False))
        self.file_prefix = run.file_prefix(self.role)
        self.proc: Optional[Process] = None
        self.port_macs: list[str] = []
        self.rte_version = ""
        self._baseline: dict[int, dict[str, int]] = {}   # counters at the last clear_counters()

    def argv(self) -> list[str]:
        raise NotImplementedError

    def _spawn(self) -> Process:
        """Start the process of :meth:`argv`, registered with the tracker."""
        self.proc = Process(self.proc_name, self.argv(), self.run, self.tracker, netns=self.netns,
                            interactive=True, host=self.host)
        # registered before the process so it runs after the process is gone (LIFO)
        self.tracker.add("hugepage-files", self.file_prefix, self._remove_files)
        self.proc.start()
        self.tracker.add("dut", self.proc_name, self.stop)
        return self.proc

    def _remove_files(self) -> None:
        if self.remote:
            hp.remove_prefix_on(self.host, self.file_prefix)
        else:
            hp.remove_leftovers(self.file_prefix)

    def alive(self) -> None:
        if self.proc is None:
            raise DutFailure(f"{self.proc_name} was never started")
        self.proc.check()

    def version(self) -> str:
        return self.rte_version


# ---------------------------------------------------------------------------------- registry
DUT_REGISTRY: dict[str, type[DutAdapter]] = {}


def register_dut(name: str):
    """Class decorator: ``@register_dut("testpmd")``; the TopologySpec ``dut:`` value."""

    def deco(cls: type[DutAdapter]) -> type[DutAdapter]:
        DUT_REGISTRY[name] = cls
        return cls

    return deco


def dut_class(name: str) -> type[DutAdapter]:
    """The adapter class registered as ``name`` (imports the adapter modules on demand)."""
    if name not in DUT_REGISTRY:
        _pkg.load_adapters()
    try:
        return DUT_REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown DUT {name!r}; known: {sorted(DUT_REGISTRY)}") from None


def create_dut(name: str, run: RunContext, tracker: ResourceTracker, cpus: Sequence[int] = (),
               **options: object) -> DutAdapter:
    return dut_class(name)(run, tracker, cpus=cpus, **options)
