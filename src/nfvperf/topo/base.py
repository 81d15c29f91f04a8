"""The Topology base: host ports + DUT + VNFs + the generator, brought up and torn down as one.

A concrete topology (``p2p.py``, ``povsp.py``, ``pvp.py`` ...) subclasses :class:`Topology`,
registers itself with :func:`nfvperf.topo.register` and implements :meth:`Topology.setup` (create
ports, start the DUT/VNFs, program forwarding).  Everything else is shared:

* ``with topo:`` creates a :class:`ResourceTracker`, runs preflight, plans CPU pinning, calls
  ``setup()``, starts tgen on the generator ends of the ports; on exit (also Ctrl-C, SIGTERM,
  failure) releases everything in reverse order.
* :meth:`measurer` returns a ``TgenMeasurer`` over ``tg_pairs()`` with ``dut_alive`` /
  ``dut_counters`` wired to the DUT adapter.
* :meth:`environment` reports DUT/VNF versions, pinning (``cores_shared`` + warnings), preflight.

PHY ports
---------
``add_ports_from_spec()`` asks the spec's port kind (:mod:`nfvperf.topo.ports`: ``af_packet``,
``af_xdp``, ``vhost``, ``memif``, ``pci``) for the ports; each :class:`HostPort` gives its
generator end (``tg_port_spec()``) and its DUT end (``dut_portref()``).  Nothing here branches on
the kind: what differs (tgen's EAL options, TCP endpoints, MTU limits, namespaces, PCI devices
for preflight) is declared by the kind class.
"""
from __future__ import annotations

import contextlib
import inspect
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Optional, Sequence

from nfvperf.dut.base import DutAdapter, create_dut, dut_class
from nfvperf.host import hugepages as hp, netns as N, preflight as pf
from nfvperf.host.base import Host
from nfvperf.host.cpu import (CoreRequest, CoreRequestError, CpuTopology, PinningPlan, ResolvedCores, plan_pinning,
                              resolve_cores)
from nfvperf.host.polling_overlap import generator_overlap
from nfvperf.host.preflight import Needs
from nfvperf.host.proc import LOCAL
from nfvperf.host.run import ResourceTracker, RunContext
from nfvperf.tg.tgen import TgenMeasurer, TgenProcess
from nfvperf.topo.preflight import run_checks, tgen_check
from nfvperf.trial import Measurer, MeasurerError

from .errors import TopologyError
from .host_cpus import HostCpuHints, plan_host, read_host_topology
from .inplace import in_place_difference, restart_fields, restart_reason
from .ports import CabledLink, HostPort, PortKind, port_kind_class
from .spec import TopologySpec, allowed_duts, allowed_port_kinds
from .tcp_ends import TcpEnds, tcp_endpoints

if TYPE_CHECKING:
    from nfvperf.tg.tgen import PortSpec

__all__ = ["HostPort", "RestartRequired", "Topology", "TopologyError"]

log = logging.getLogger(__name__)


class HostTooSmall(TopologyError):
    """The topology asks for more than this host has (cores, NUMA sockets, CPUs in a mask) or for
    hardware it lacks (SR-IOV VFs and an IOMMU, the openvswitch kernel module); found before
    anything starts.  The runner skips the topology's units, naming why, and goes on
    with the next topology (a seed suite written for a 2-socket server still runs its other
    units on a laptop)."""


class RestartRequired(TopologyError):
    """:meth:`Topology.reconfigure` was asked for a spec that differs in a field the running DUT
    cannot change in place (another DUT, port kind, ...): build the topology anew."""

    def __init__(self, message: str, fields: Sequence[str]):
        super().__init__(message)
        self.fields = list(fields)


#: preflight checks whose failure means "this host is too small or lacks the hardware" rather
#: than "this host is broken": by name, or by prefix (``sriov:<pci>``, ``kmod:openvswitch``)
HOST_CAPACITY_CHECKS = ("ovs.socket_mem", "ovs.pmd_cpu_mask", "sriov:iommu")
HOST_HARDWARE_PREFIXES = ("kmod:", "sriov:0")


def host_lacks(check_name: str) -> bool:
    return check_name in HOST_CAPACITY_CHECKS or check_name.startswith(HOST_HARDWARE_PREFIXES)


class Topology:
    """Base class; see the module doc.  Subclasses set ``kind`` and implement ``setup()``."""

    kind: str = "abstract"
    #: per-frame DUT traversals (seed 000 Table 5-1); subclasses override or compute
    base_switching_operations: int = 1
    #: the DUT adapters (``topology.dut``) this topology can drive; None = every registered one
    duts: ClassVar[Optional[tuple[str, ...]]] = None
    #: the port kinds (``topology.port_kind``) it can build; None = all
    port_kinds: ClassVar[Optional[tuple[str, ...]]] = None
    #: hugepage memory of the generator (tgen's mbuf pools)
    TGEN_HUGEPAGES_MB: ClassVar[int] = 512
    #: can run on a testbed of several hosts (generator on the tester host, DUT on the DUT host,
    #: the testbed's cabled ports; issue 10)
    testbed_ready: ClassVar[bool] = False

    def __init__(self, spec: TopologySpec, run: RunContext, *, preflight: bool = True,
                 tgen_binary: Optional[Path] = None, start_tgen: bool = True,
                 tgen_hugepages: bool = True, tg_host: Optional[Host] = None,
                 dut_host: Optional[Host] = None,
                 testbed_links: Optional[Sequence[CabledLink]] = None,
                 cpu_hints: Optional[Mapping[str, Mapping[str, object]]] = None):
        self.spec = spec
        # where the generator and the DUT run (issue 10): this machine, or the tester and DUT
        # hosts of a testbed (nfvperf.host.ssh.SshHost); ``testbed_links`` are the cabled links the
        # ports are made of
        self.tg_host = tg_host if tg_host is not None else LOCAL
        self.dut_host = dut_host if dut_host is not None else LOCAL
        self.testbed_links = list(testbed_links or [])
        # the testbed's cpu: hints of the tester and DUT hosts ({"tester": {"host": "tester1",
        # "isolated": "2-11", "housekeeping": "0-1", "numa": 0}, "dut": {...}})
        self.cpu_hints = dict(cpu_hints or {})
        self.run = run if isinstance(run, RunContext) else RunContext(getattr(run, "tag", None),
                                                                     getattr(run, "run_dir", None))
        self.do_preflight = preflight and spec.preflight
        self.tgen_binary = tgen_binary
        self.want_tgen = start_tgen
        self.tgen_hugepages = tgen_hugepages
        self.tracker: Optional[ResourceTracker] = None
        self.ports: list[HostPort] = []
        self.dut: Optional[DutAdapter] = None
        self.vnfs: list[Any] = []           # objects with alive()/stop()/counters()/environment()
        self.tgen: Any = None               # nfvperf.tg.tgen.TgenProcess
        self.plan: Optional[PinningPlan] = None
        #: the tester host's plan (tgen) when the generator runs on another host than the DUT
        self.tg_plan: Optional[PinningPlan] = None
        self.preflight_results: list[dict[str, Any]] = []
        self.dut_netns: Optional[str] = None
        self.tg_netns: Optional[str] = None
        self._measurer: Optional[Measurer] = None
        self._spawned: Optional[TgenProcess] = None      # spawn_tgen's process, not yet ready
        self.hugepages: dict[str, Any] = {}
        self.up = False

    # ------------------------------------------------------------------------------ life cycle
    def __enter__(self) -> "Topology":
        self.bring_up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def check_spec(self) -> None:
        """The spec validated against the registries (TopologySpec does this already; a spec
        built without validation, e.g. ``model_construct``, is caught here)."""
        if self.spec.dut not in allowed_duts(self.kind):
            raise TopologyError(f"{self.kind} cannot use dut {self.spec.dut!r}; allowed: "
                                f"{', '.join(allowed_duts(self.kind))}")
        if self.spec.port_kind not in allowed_port_kinds(self.kind, self.spec.dut):
            raise TopologyError(f"{self.kind} with dut {self.spec.dut} cannot use port_kind "
                                f"{self.spec.port_kind!r}; allowed: "
                                f"{', '.join(allowed_port_kinds(self.kind, self.spec.dut))}")
        why = self.port_kind_class().check_mtu(self.spec_mtu(), generator=self.want_tgen)
        if why:
            raise TopologyError(f"topology.mtu: {why}")
        why = self.spec_refusal(self.spec)
        if why:
            raise TopologyError(why)
        if self.on_testbed():
            self.check_testbed()
        else:
            why = self.port_kind_class().local_refusal(self.spec)
            if why:
                raise TopologyError(why)

    def on_testbed(self) -> bool:
        """The generator or the DUT runs on another host (a testbed)."""
        return bool(self.tg_host.remote or self.dut_host.remote or self.testbed_links)

    def check_testbed(self) -> None:
        """What a testbed run of this topology needs: a topology and port kind that run across
        hosts, and enough cabled links."""
        if not self.testbed_ready:
            raise TopologyError(f"topology kind {self.kind} does not run on a testbed of several "
                                f"hosts yet (p2p, p-ovs-p, pvp and pvvp do); run it without --testbed")
        if self.dut_host.remote and not self.dut_class().runs_remote:
            raise TopologyError(f"topology.dut {self.spec.dut} runs on this machine only; on a "
                                f"testbed's DUT host use a DUT adapter that runs over SSH (runs_remote)")
        if self.dut_host.remote and not all(v.runs_remote for v in self.vnf_classes_for(self.spec)):
            raise TopologyError(f"topology.vnf {self.spec.vnf}: this VNF runs on "
                                f"this machine only; on a testbed's DUT host use vnf: container")
        why = self.port_kind_class().testbed_refusal(self.spec.ports, self.testbed_links)
        if why:
            raise TopologyError(why)

    def bring_up(self) -> None:
        self.check_spec()
        self.tracker = ResourceTracker(self.run)
        try:
            self.run.run_dir.mkdir(parents=True, exist_ok=True)
            self.plan = self.plan_cpus()
            if self.on_testbed():
                # hosts are prepared by `nfvperf testbed prepare`, checked by the runner's
                # testbed preflight (nfvperf.testbed.hosts.check_testbed) on each host
                info: dict[str, Any] = {"demand_mb": self.hugepage_demand_mb(),
                                        "testbed": "prepared and checked on each host"}
                self.hugepages = info
            else:
                self.prepare_hugepages()
                if self.do_preflight:
                    self.preflight()
            self.setup()
            if self.want_tgen:
                self.start_tgen()
            if self.dut is not None:
                self.dut.await_ready()    # a DUT launched short of its link wait (DutAdapter.launch)
            self.up = True
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._measurer is not None:
            with contextlib.suppress(Exception):
                self._measurer.close()
            self._measurer = None
        if self.tracker is not None:
            self.tracker.release_all()
        self.up, self._spawned = False, None

    # ------------------------------------------------------------------------------ overrides
    def setup(self) -> None:
        """Create ports, DUT, VNFs; program forwarding.  Register everything with self.tracker."""
        raise NotImplementedError

    def dut_class(self) -> type[DutAdapter]:
        """The adapter class of ``spec.dut`` (what it declares: options, demands, needs)."""
        return dut_class(self.spec.dut)

    def cpu_demands(self) -> dict[str, int]:
        """Polling CPUs per role, in priority order (the first roles get dedicated CPUs first):
        what the DUT adapter declares (``polling_cpus``), then the generator."""
        return {"dut": int(self.dut_class().polling_cpus), "tgen": 1}

    def required_checks(self) -> Sequence[str]:
        """Preflight checks that must pass (others only warn): hugepages when a DPDK process of
        the run (the generator, the DUT, a VNF) needs them."""
        req = ["root", "tgen"]
        if self.want_tgen or self.hugepage_demand_mb() > self.TGEN_HUGEPAGES_MB:
            req.append("hugepages")
        return req

    @classmethod
    def preflight_needs(cls, spec: TopologySpec) -> Needs:
        """What the host must offer (nfvperf.host.preflight.Needs): the DUT adapter's and the
        VNFs' binaries, the generator, the PCI devices of ``port_kind: pci``."""
        needs = Needs(checks=[tgen_check])
        needs.merge(dut_class(spec.dut).preflight_needs(spec))
        for vnf in cls.vnf_classes_for(spec):
            needs.merge(vnf.preflight_needs(spec))
        pci = port_kind_class(spec.port_kind).pci_addresses(spec)
        if pci:
            needs.pci = pci
        return needs

    @classmethod
    def vnf_classes_for(cls, spec: TopologySpec) -> list[type[DutAdapter]]:
        """The VNF classes a topology of this class starts for ``spec`` (none here)."""
        return []

    @classmethod
    def spec_refusal(cls, spec: TopologySpec) -> Optional[str]:
        """Why this kind cannot build ``spec`` (a field combination it refuses, naming the field
        and the fix), or None; checked when a TopologySpec is validated, before anything starts."""
        return None

    @classmethod
    def tx_pair_count(cls, spec: TopologySpec) -> int:
        """How many port pairs :meth:`tg_pairs` gives for ``spec`` (before the ports exist)."""
        return max(1, int(spec.ports) // 2)

    def tg_pairs(self) -> list[tuple[int, int]]:
        """Generator (tx_port, rx_port) directions: 0->1, 2->3, ... (reverse added when bidir)."""
        return [(i, i + 1) for i in range(0, len(self.ports) - 1, 2)]

    def stream_params(self) -> Optional[list[dict[str, object]]]:
        """Per-direction extra stream fields for tgen (MACs, VXLAN ...); None = tgen defaults."""
        return None

    def rx_groups(self) -> list[list[int]]:
        """Receive groups of generator ports: a stream whose rx port is in a group may come back
        on any port of it (the members of a bond: tgen's ``rx_ports``); [] = none."""
        return []

    def switching_operations(self, bidirectional: bool = True) -> int:
        """Switching operations per frame (seed 000 Table 5-1): how many times one frame is
        switched between entering and leaving the system under test.  The same in both directions,
        so ``bidirectional`` does not change it; aggregate switching rate = throughput x this."""
        return int(self.base_switching_operations)

    def hugepage_demand_mb(self) -> int:
        """Hugepage memory this topology's DPDK processes need: the generator, the DUT and each
        VNF, as their classes declare it (OVS socket memory, a container testpmd, a guest's RAM)."""
        return (self.TGEN_HUGEPAGES_MB + self.dut_class().hugepage_demand_mb(self.spec) +
                sum(v.hugepage_demand_mb(self.spec) for v in self.vnf_classes_for(self.spec)))

    # ------------------------------------------------------------------------------ building blocks
    def prepare_hugepages(self) -> None:
        """On a fresh host: mount hugetlbfs and reserve 2 MB pages for this topology (never
        shrinking the pool).  Failure is left to preflight, which says what to do."""
        self.hugepages = {"demand_mb": self.hugepage_demand_mb()}
        try:
            self.hugepages.update(hp.prepare(self.hugepages["demand_mb"]))
        except OSError as e:
            self.hugepages["error"] = str(e)

    def preflight(self) -> None:
        required = [c for c in self.required_checks() if self.want_tgen or c != "tgen"]
        cpus = sorted({c for cs in (self.plan.roles.values() if self.plan else []) for c in cs})
        results = run_checks(self.spec, required=required, cpus=cpus)
        self.preflight_results = [r.to_dict() for r in results]
        failed = [r for r in results if r.required and r.status == "fail"]
        if failed and all(host_lacks(r.name) for r in failed):
            raise HostTooSmall("; ".join(r.detail + (f" (fix: {r.fix})" if r.fix else "") for r in failed))
        pf.raise_on_failure(results)

    def core_requests(self) -> dict[str, CoreRequest]:
        """Roles whose polling cores the spec gives as a count (``ovs.pmd_cores``/``ht``, the
        VNFs' ``testpmd.cores``, ``tgen_cores``): role -> CoreRequest, resolved in this order."""
        out: dict[str, CoreRequest] = {}
        req = self.dut_class().core_request(self.spec)
        if req is not None:
            out["dut"] = req
        for j, vnf in enumerate(self.vnf_classes_for(self.spec)):
            req = vnf.core_request(self.spec)
            if req is not None:
                out[f"vnf{j}"] = req
        n = self.spec.tgen_cores
        if n is not None and self.want_tgen:
            out["tgen"] = CoreRequest("topology.tgen_cores", int(n),
                                      self.spec.tgen_ht, "topology.tgen_ht")
        return out

    def plan_cpus(self, topo: Optional[CpuTopology] = None) -> PinningPlan:
        """The CPU plan: core counts resolved from the host's sibling map first (a count the
        host cannot give is a TopologyError naming the option), then the other roles' CPUs.
        Generator and DUT on different hosts: one plan per host (:meth:`plan_host_cpus`)."""
        if topo is None and self.tg_host is not self.dut_host:
            return self.plan_host_cpus()
        numa = self.port_kind_class().numa_node(self.spec)
        topo = topo or CpuTopology.read()
        fixed: dict[str, ResolvedCores] = {}
        taken: list[int] = []
        for role, req in self.core_requests().items():
            try:
                res = resolve_cores(req.cores, req.ht, field=req.field, ht_field=req.ht_field,
                                    topo=topo, exclude=taken, numa_node=numa)
            except CoreRequestError as e:
                raise HostTooSmall(str(e)) from None
            fixed[role] = res
            taken += res.cpus
        plan = plan_pinning(self.cpu_demands(), topo, numa_node=numa, fixed=fixed)
        self.dut_class().adjust_plan(plan, self.spec)
        return plan

    def plan_host_cpus(self, dut_topo: Optional[CpuTopology] = None,
                       tg_topo: Optional[CpuTopology] = None) -> PinningPlan:
        """Testbed (issue 10): the DUT's and VNFs' polling CPUs planned on the DUT host and tgen's
        on the tester host, each from that host's own sysfs (read through its host object) and
        the testbed's cpu: hints; sets ``self.tg_plan``, returns the DUT host's plan."""
        hints = {r: HostCpuHints.from_dict(dict(self.cpu_hints.get(r) or {"host": h.name}))
                 for r, h in (("dut", self.dut_host), ("tester", self.tg_host))}
        requests = self.core_requests()
        demands = self.cpu_demands()
        try:
            plan = plan_host(dut_topo or read_host_topology(self.dut_host),
                             {r: n for r, n in demands.items() if r != "tgen"},
                             {r: q for r, q in requests.items() if r != "tgen"}, hints["dut"],
                             adjust=lambda p: self.dut_class().adjust_plan(p, self.spec))
            self.tg_plan = plan_host(tg_topo or read_host_topology(self.tg_host),
                                     {"tgen": demands.get("tgen", 1)},
                                     {r: q for r, q in requests.items() if r == "tgen"},
                                     hints["tester"])
        except CoreRequestError as e:
            raise HostTooSmall(str(e)) from None
        return plan

    def make_netns(self, role: str) -> str:
        name = self.run.netns(role)
        N.create_netns(name, self.tracker)
        return name

    def port_kind_class(self) -> type[PortKind]:
        """The class of ``spec.port_kind`` (what the kind declares: MTU limit, TCP, EAL needs)."""
        return port_kind_class(self.spec.port_kind)

    def port_kind(self) -> PortKind:
        """The spec's port kind (one object per topology: it makes every port)."""
        pk = getattr(self, "_port_kind", None)
        if pk is None or pk.name != self.spec.port_kind:
            pk = self._port_kind = self.port_kind_class()()
        return pk

    def add_ports(self, n: int, dut_netns: Optional[str] = None, tg_netns: Optional[str] = None,
                  mtu: Optional[int] = None, kind: Optional[str] = None) -> list[HostPort]:
        """``n`` PHY ports of the spec's port kind (or ``kind``), appended to ``self.ports``."""
        pk = port_kind_class(kind)() if kind else self.port_kind()
        return pk.create(self, n, dut_netns=dut_netns, tg_netns=tg_netns,
                         mtu=self.spec_mtu() if mtu is None else mtu)

    def add_ports_from_spec(self, dut_netns: Optional[str] = None) -> list[HostPort]:
        """The spec's ports of the spec's kind (``ports``; pci: one per address pair)."""
        pk = self.port_kind()
        return self.add_ports(pk.port_count(self.spec), dut_netns=dut_netns, tg_netns=self.tg_netns)

    def spec_mtu(self) -> int:
        return self.spec.mtu

    def make_dut(self, name: Optional[str] = None, netns: Optional[str] = None,
                 **options: object) -> DutAdapter:
        assert self.tracker is not None and self.plan is not None
        if self.dut_host.remote:
            options.setdefault("host", self.dut_host)
        dut = self.dut = create_dut(name or self.spec.dut, self.run, self.tracker, cpus=self.plan.cpus("dut"),
                                    netns=netns, plan=self.plan, spec=self.spec, **options)
        return dut

    # ------------------------------------------------------------------------------ generator
    def tgen_lcores(self) -> str:
        if self.spec.tgen_lcores:
            return self.spec.tgen_lcores
        plan = self.tg_plan or self.plan
        assert plan is not None
        return plan.dpdk_lcores("tgen")

    def tgen_workers(self) -> int:
        """tgen's worker lcores when the spec gives them: ``topology.tgen_cores`` (the CPUs the plan
        resolved for it: N, or 2N with tgen_ht) or ``tgen_lcores`` (every EAL lcore but the main
        one; the harness ceiling measures with the run's lcores this way).  Each port of a
        multi-queue kind gets that many TX and RX queues and each direction that many sub-streams
        (docs/tgen.md); 1 otherwise (one queue per port)."""
        if self.spec.tgen_lcores:
            return self.spec.tgen_worker_count()
        if self.spec.tgen_cores is None:
            return 1
        plan = self.tg_plan or self.plan
        cpus = plan.cpus("tgen") if plan is not None else []
        return max(1, len(cpus) or int(self.spec.tgen_cores))

    def tgen_port_specs(self) -> list[PortSpec]:
        txq = self.dut.tx_queues() if self.dut is not None else 1
        return [p.tg_port_spec(i, dut_tx_queues=txq, workers=self.tgen_workers()) for i, p in enumerate(self.ports)]

    def spawn_tgen(self) -> TgenProcess:
        """The generator's process, started without waiting for it (:meth:`start_tgen` waits)."""
        kinds = {p._kind().__class__ for p in self.ports}
        if not self.tgen_hugepages and any(k.tgen_hugepages for k in kinds):
            raise TopologyError("port_kind " + ", ".join(sorted(k.name for k in kinds)) +
                                " needs the generator on hugepage memory (tgen_hugepages=True)")
        kwargs: dict[str, Any] = dict(run_dir=self.run.run_dir, tag=self.run.tag, binary=self.tgen_binary,
                                      hugepages=self.tgen_hugepages,
                                      extra_eal=sorted({a for k in kinds for a in k.tgen_eal}))
        if self.tgen_workers() > 1 and self.rx_groups():
            # a receive group (a bond's members) is polled by one lcore (tgen/PROTOCOL.md §4):
            # with tgen_cores the TX side is split, every RX queue goes to the first worker
            kwargs["extra_args"] = ["--rx-lcores", "1"]
        if self.tg_netns and "netns" in inspect.signature(TgenProcess).parameters:
            kwargs["netns"] = self.tg_netns
        if self.tg_host.remote:
            kwargs["host"] = self.tg_host
        specs = self.tgen_port_specs()
        for p in self.ports:
            p._kind().before_tgen(p)
        proc = self._spawned = TgenProcess(specs, self.tgen_lcores(), **kwargs)
        assert self.tracker is not None
        self.tracker.add("tgen", self.run.tag, proc.stop)
        proc.spawn()
        return proc

    def start_tgen(self) -> None:
        proc, self._spawned = self._spawned or self.spawn_tgen(), None     # a spawned process starts once
        try:
            proc.start()
        except MeasurerError as e:
            if self.tgen_workers() > 1 and "but the device allows at most" in str(e):
                field = ("topology.tgen_cores", self.spec.tgen_cores) if self.spec.tgen_cores else \
                    ("topology.tgen_lcores", repr(self.spec.tgen_lcores))
                raise TopologyError(
                    f"{field[0]}: {field[1]} gives tgen {self.tgen_workers()} workers (EAL lcores "
                    f"{self.tgen_lcores()}), one TX and one RX queue each per port, but a generator "
                    f"port has fewer queues ({e}); lower {field[0]} or give the NIC more queues") from e
            raise
        self.tgen = proc
        if any(p._kind().wait_link for p in self.ports):
            self.wait_tgen_links()

    def wait_tgen_links(self, timeout_s: float = 20.0) -> None:
        """Wait until tgen sees every port's link up (vhost-user / memif connect asynchronously)."""
        self.wait_none_down(lambda: [p.get("id") for p in self.tgen.rpc("ports.list") if not p.get("link_up")],
                            timeout_s, lambda down: TopologyError(
                                f"generator ports {down} ({self.spec.port_kind}) not up after {timeout_s:.0f} s; "
                                f"tgen log: {self.tgen.log_tail(1500)}"))

    def wait_none_down(self, down: Callable[[], Sequence[object]], timeout_s: float,
                       late: Callable[[Sequence[object]], Exception], interval_s: float = 0.1) -> None:
        """Poll ``down()`` (what is not up yet) until it is empty, the DUT checked alive between
        polls; past ``timeout_s`` raise ``late(what is still down)``."""
        deadline = time.monotonic() + timeout_s
        while still := down():
            self.dut_alive()
            if time.monotonic() > deadline:
                raise late(still)
            time.sleep(interval_s)

    def measurer(self) -> Measurer:
        """A TgenMeasurer over this topology's ports, wired to the DUT's alive()/counters()."""
        if self.tgen is None:
            raise TopologyError("the generator is not running (topology not brought up?)")
        kwargs: dict[str, Any] = dict(dut_counters=self.dut_counters, dut_alive=self.dut_alive,
                                      dut_telemetry=self.dut_telemetry if self.dut is not None else None)
        sp = self.stream_params()
        if sp is not None:
            kwargs["stream_params"] = sp
        groups = self.rx_groups()
        if groups:
            kwargs["rx_groups"] = groups
        # a direction over tgen_cores cores: one sub-stream per TX queue (multi-queue kinds)
        cores = self.tgen_workers() if self.port_kind_class().tg_multiqueue else 1
        m = TgenMeasurer(self.tgen, self.tg_pairs(), topology_environment=self.environment,
                         cores=cores, **kwargs)
        if self.dut is not None:
            m.reset_hook = self.reset_dut     # RFC 6201 reset trials
        self._measurer = m
        return m

    def reconfigure(self, new_spec: TopologySpec) -> dict[str, object]:
        """Turn the running topology into one of ``new_spec`` without a restart: the fields that
        differ (:func:`nfvperf.topo.inplace.in_place_difference`) go to the DUT adapter's
        ``reconfigure()``, which applies them and waits until the DUT has settled; then
        ``self.spec`` is ``new_spec`` (so :meth:`environment` reports it).  Returns ``{"changes":
        {path: value}, "dut": what the adapter did, "generator_cpu_overlap": whether the DUT's
        polling threads now share the generator's CPUs}`` ({} when the specs are equal; the last
        key only where the environment says, :func:`nfvperf.host.polling_overlap.generator_overlap`).

        Raises :class:`RestartRequired` (nothing changed) when a differing field needs a restart.
        When the adapter fails part-way the DUT may be half-changed: the error says so, the spec
        stays the old one, and the caller should restart the topology."""
        if not self.up:
            raise TopologyError("reconfigure(): the topology is not up")
        changes = in_place_difference(self.spec, new_spec)
        if changes is None:
            raise RestartRequired(f"topology {self.kind}: cannot change in place: "
                                  f"{restart_reason(self.spec, new_spec)}; restart the topology",
                                  restart_fields(self.spec, new_spec))
        if not changes:
            self.spec = new_spec
            return {}
        if self.dut is None:
            raise RestartRequired(f"topology {self.kind} has no DUT adapter to change "
                                  f"{', '.join(changes)}", list(changes))
        old, self.spec = self.spec, new_spec     # the adapter's forwarding reads the new spec
        try:
            done = self.dut.reconfigure(changes)
        except ValueError as e:          # refused before anything was applied
            self.spec = old
            raise RestartRequired(f"topology {self.kind}: {e}", list(changes)) from e
        except Exception as e:
            self.spec = old
            raise TopologyError(f"topology {self.kind}: changing {', '.join(changes)} in place "
                                f"failed, the DUT may be half-changed (restart the topology): "
                                f"{e}") from e
        out: dict[str, object] = {"changes": changes, "dut": done}
        try:
            overlap = generator_overlap(dict(self._cpu_facts(), hosts=self._hosts()))
        except Exception:  # noqa: BLE001 - a fact that cannot be read must not fail the change
            overlap = None
        if overlap is not None:
            out["generator_cpu_overlap"] = overlap
        return out

    def reset_dut(self) -> None:
        """RFC 6201 software reset: the DUT adapter stops and starts again with the same ports
        and forwarding (testpmd: a new process; Linux bridge: bridges deleted and re-created)."""
        if self.dut is None:
            raise TopologyError("no DUT to reset")
        self.dut.reset()

    # ------------------------------------------------------------------------------ TCP endpoints
    def tcp_refusal(self) -> Optional[str]:
        """Why this topology (as configured) cannot carry kernel TCP between its generator ends,
        or None.  Topologies that forward only the generator's own traffic say so."""
        return None

    def tcp_endpoints(self, net: str = "198.18.0", client_port: int = 0, server_port: int = 1) -> TcpEnds:
        """Turn the generator ends of two ports into kernel TCP endpoints (:func:`.tcp_ends.tcp_endpoints`)."""
        return tcp_endpoints(self, net, client_port, server_port)

    # ------------------------------------------------------------------------------ DUT views
    def dut_alive(self) -> None:
        """Raise DutFailure if the DUT or any VNF died (or the host of the DUT or the generator
        was lost: :class:`nfvperf.host.ssh.HostLost`)."""
        for h in {id(self.dut_host): self.dut_host, id(self.tg_host): self.tg_host}.values():
            h.check()
        if self.dut is not None:
            self.dut.alive()
        for v in self.vnfs:
            v.alive()

    def dut_counters(self) -> dict[str, object]:
        out: dict[str, Any] = {}
        if self.dut is not None:
            out = dict(self.dut.counters())
        if self.vnfs:
            # keyed by each VNF's own name (vnf0, vnf1, ...); the class-level ``name``
            # ("testpmd-vnf", "vm-vnf") is the same for all of them
            out["vnfs"] = {getattr(v, "vnf_name", None) or f"vnf{i}": v.counters()
                           for i, v in enumerate(self.vnfs)}
        return out

    def dut_telemetry(self) -> dict[str, object]:
        """One telemetry reading of the DUT (:meth:`DutAdapter.telemetry`) with its VNFs' readings
        under ``vnfs`` (keyed like :meth:`dut_counters`), read before and after every trial."""
        out: dict[str, Any] = dict(self.dut.telemetry()) if self.dut is not None else {}
        if self.vnfs:
            out["vnfs"] = {getattr(v, "vnf_name", None) or f"vnf{i}": v.telemetry()
                           for i, v in enumerate(self.vnfs)}
        return out

    def _path_facts(self, port: HostPort) -> dict[str, object]:
        """``{"path": {...}}`` when the port's kind reads back what its running path is (AF_XDP:
        the XDP mode of each end, busy polling), else {}; a failure to read is recorded."""
        try:
            facts = port._kind().path_facts(port, self)
        except Exception as e:  # noqa: BLE001 - a fact that cannot be read must not fail a run
            facts = {"error": f"{type(e).__name__}: {e}"}
        return {"path": facts} if facts else {}

    def _hosts(self) -> dict[str, object]:
        """The environment's ``hosts``: where the generator and the DUT run."""
        hosts: dict[str, Any] = {"tester": self.tg_host.public(), "dut": self.dut_host.public(),
                                 "generator_on": self.tg_host.name, "dut_on": self.dut_host.name,
                                 "latency_clock": f"{self.tg_host.name} (both ends of every stream on "
                                                  f"the generator's host)"}
        if self.testbed_links:
            hosts["links"] = [dict(lk) for lk in self.testbed_links]
        return hosts

    def _cpu_facts(self) -> dict[str, object]:
        """The environment's CPU part: ``pinning`` (the DUT's role where it polls now: an explicit
        mask's CPUs, else the plan's), ``cores``, ``cores_shared``, ``warnings`` and, one plan per
        host, ``pinning_hosts``; {} without a plan.  Cheap: :meth:`reconfigure` reads it after
        every in-place change."""
        env: dict[str, Any] = {}
        if self.plan is not None:
            env["pinning"] = self.plan.to_dict()
            explicit = self.dut_class().polling_cpus_of(self.spec)
            if explicit is not None:
                # the DUT polls where its options say (a raw mask), not on the plan's CPUs
                env["pinning"]["roles"] = dict(env["pinning"]["roles"], dut=list(explicit))
                env["pinning"]["dut_cpus_from"] = "the DUT's options (e.g. ovs.pmd_cpu_mask)"
            if self.plan.resolved:
                # core counts -> CPUs and masks (e.g. dut: pmd_cores 2, ht -> mask 0xc0c)
                env["cores"] = dict(self.plan.resolved)
            env["cores_shared"] = self.plan.cores_shared
            env["warnings"] = list(self.plan.warnings)
        if self.tg_plan is not None and self.plan is not None:
            # one plan per host: the DUT's and VNFs' on the DUT host, tgen's on the tester
            env["pinning_hosts"] = {"dut": self.plan.to_dict(), "tester": self.tg_plan.to_dict()}
            env["cores_shared"] = self.plan.cores_shared or self.tg_plan.cores_shared
            env["warnings"] = list(self.plan.warnings) + list(self.tg_plan.warnings)
            if self.tg_plan.resolved:
                env.setdefault("cores", {}).update(self.tg_plan.resolved)
        return env

    def environment(self) -> dict[str, object]:
        env: dict[str, Any] = {
            "topology": self.kind, "tag": self.run.tag, "run_dir": str(self.run.run_dir),
            "spec": self.spec.model_dump() if hasattr(self.spec, "model_dump") else dict(self.spec),
            "ports": [dict(p.to_dict(), **self._path_facts(p)) for p in self.ports],
            "switching_operations": self.switching_operations(True),
            "hosts": self._hosts(),
        }
        env.update(self._cpu_facts())
        if self.dut is not None:
            try:
                env["dut"] = self.dut.environment()
            except Exception as e:  # noqa: BLE001
                env["dut"] = {"error": str(e)}
        if self.vnfs:
            env["vnfs"] = []
            for v in self.vnfs:
                try:
                    env["vnfs"].append(v.environment())
                except Exception as e:  # noqa: BLE001
                    env["vnfs"].append({"error": str(e)})
        if self.tgen is not None:
            env["tgen"] = {"lcores": getattr(self.tgen, "lcores", None),
                           "argv": getattr(self.tgen, "argv_used", None),
                           "info": getattr(self.tgen, "info", None)}
        env["preflight"] = self.preflight_results
        env["hugepages"] = getattr(self, "hugepages", {})
        bad = [r for r in self.preflight_results if r.get("status") == "warn"]
        if bad:
            env.setdefault("warnings", []).extend(f"preflight {r['name']}: {r['detail']}" for r in bad)
        return env
