"""Does a topology fit this host, and ``--fit-host``: the same topology scaled down to the host.

A seed suite asks for the seed's server: PMD cores with their hyper-threads, socket memory on two
NUMA sockets, a PMD mask of CPUs 2-5.  On a smaller host those topologies cannot be built.
:func:`fit_topology` says what would have to change, one :class:`FitChange` per option, and
returns the changed spec; the changes are the reason a unit is skipped without ``--fit-host``
(:mod:`nfvperf.plan`) and the list a fitted run stores and reports with it.

The rules, in this order (each named in its change's ``why``):

1. **Hyper-threads.** ``ht: true`` of any core count (``ovs.ht``, ``testpmd.ht``, ``tgen_ht``)
   on a host without SMT becomes ``false``.
2. **NUMA sockets.** ``ovs.socket_mem`` memory on a NUMA node the host lacks is dropped (the
   host's nodes keep theirs; if none had any, the first node gets the largest amount):
   ``'11264,1024'`` becomes ``'11264'`` on one node.  ``ovs.pmd_cpu_mask`` keeps only CPUs the
   host has (or its last CPU when none is left).
3. **Cores.** The core counts (``ovs.pmd_cores``, ``testpmd.cores``, ``tgen_cores``) are lowered,
   the largest first and one core at a time, until the topology's own CPU plan
   (:meth:`nfvperf.topo.base.Topology.plan_cpus`, the code that builds it) resolves them on the
   host.  A count is never lowered below 1; when that is not enough the topology does not fit.
4. **The generator's cores.** With the generator on this host (``--tg tgen``), no DUT or VNF
   polling core may be one of the generator's polling CPUs: a DUT that time-slices with the
   generator measures neither (seed 002's l3fwd-vs-OVS on 2 CPUs put both DUTs' second core on
   the generator's CPU and printed l3fwd at 0.21x OVS).  The DUT's and VNFs' core counts are
   lowered, the largest first, until the plan keeps them off the generator's CPUs (a count never
   below 1; a role given as a mask cannot be lowered), then ``tgen_cores`` when the DUT is down to
   one core.  Unlike the rules above this is not a
   reason to skip a unit: without ``--fit-host`` it runs as given, and ``nfvperf validate`` says
   which units would share (:attr:`Fit.shares`); these changes carry ``sharing``.
5. **Hugepage memory.** What the topology's DPDK processes take (generator, DUT, VNFs: the
   topology's own :meth:`~nfvperf.topo.base.Topology.hugepage_demand_mb`) must stay within
   half of the host's RAM (:data:`HUGEPAGE_RAM_SHARE`); the OVS socket memory is lowered to fit
   (whole 256 MB, at least :data:`MIN_SOCKET_MEM_MB`).

Only host facts that do not change while a run goes (CPUs, NUMA nodes, RAM size) decide, so
``nfvperf validate`` and ``nfvperf run`` a minute later decide the same.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from nfvperf.host.cpu import CpuTopology, cpu_mask, format_cpulist
from nfvperf.host.polling_overlap import generator_overlap
from nfvperf.topo.spec import TopologySpec
import nfvperf.topo as topo
from nfvperf.topo.base import HostTooSmall
from nfvperf.study import axis_paths
from nfvperf.units import cores_from_mask

#: the share of the host's RAM a run's hugepages may take (``--fit-host`` keeps the demand within it)
HUGEPAGE_RAM_SHARE = 0.5
#: the least OVS socket memory a fitted topology gets (MB)
MIN_SOCKET_MEM_MB = 512
_STEP_MB = 256


@dataclass
class HostFacts:
    """What fitting reads of a host: its CPUs (sibling map, NUMA nodes, allowed CPUs) and RAM."""

    cpus: CpuTopology
    mem_total_mb: int

    @classmethod
    def read(cls, meminfo: Path = Path("/proc/meminfo")) -> "HostFacts":
        """This host (sysfs and ``/proc/meminfo``)."""
        total = 0
        try:
            for line in meminfo.read_text().splitlines():
                if line.startswith("MemTotal:"):
                    total = int(line.split()[1]) // 1024
        except (OSError, ValueError, IndexError):
            pass
        return cls(CpuTopology.read(), total)

    @property
    def smt(self) -> bool:
        return self.cpus.hyperthreading

    @property
    def nodes(self) -> list[int]:
        return self.cpus.nodes() or [0]

    @property
    def hugepage_limit_mb(self) -> int:
        return int(self.mem_total_mb * HUGEPAGE_RAM_SHARE)

    def describe(self) -> str:
        """'2 CPUs (2 cores × 1 thread, no SMT), 1 NUMA node, 24,105 MB RAM'."""
        cores = len(self.cpus.physical_cores())
        tpc = self.cpus.threads_per_core()
        n = len(self.nodes)
        return (f"{len(self.cpus.online)} CPUs ({cores} core{'s' if cores != 1 else ''} × {tpc} "
                f"thread{'s' if tpc != 1 else ''}{', no SMT' if not self.smt else ''}), {n} NUMA "
                f"node{'s' if n != 1 else ''}, {self.mem_total_mb:,} MB RAM")

    def to_dict(self) -> dict[str, Any]:
        return {"cpus": self.cpus.to_dict(), "mem_total_mb": self.mem_total_mb,
                "hugepage_limit_mb": self.hugepage_limit_mb, "describe": self.describe()}


@dataclass(frozen=True)
class FitChange:
    """One option ``--fit-host`` changes: ``field`` relative to the topology (``ovs.ht``)."""

    field: str
    old: Any
    new: Any
    why: str
    #: made only to keep a DUT's polling off the generator's CPUs (rule 4): not a reason to skip
    sharing: bool = False

    def text(self) -> str:
        """'ovs.ht true→false (no SMT: ...)'."""
        return f"{self.field} {_show(self.old)}→{_show(self.new)} ({self.why})"

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "from": self.old, "to": self.new, "why": self.why,
                "text": self.text(), "sharing": self.sharing}


@dataclass
class Fit:
    """A topology fitted to a host: the spec to build, what changed, and what still does not
    fit (``problem``; None: the fitted spec fits)."""

    spec: TopologySpec
    changes: list[FitChange] = field(default_factory=list)
    problem: Optional[str] = None
    #: the spec as given would put a DUT's or VNF's polling on the generator's CPUs: which roles
    #: and CPUs (rule 4; None: it would not, or the generator is not on this host)
    shares: Optional[str] = None

    @property
    def fits_as_given(self) -> bool:
        return not [c for c in self.changes if not c.sharing] and self.problem is None

    def sharing_note(self) -> Optional[str]:
        """'dut (topology.l3fwd.cores 2) would poll on CPU 0, the generator's; --fit-host would
        change l3fwd.cores 2→1' (None: no sharing)."""
        if not self.shares:
            return None
        fix = [c.text() for c in self.changes if c.sharing]
        return self.shares + ("; --fit-host would change " + ", ".join(fix) if fix else
                              "; no core count to lower (give the DUT's cores as a count, or a "
                              "larger host)")

    def unfit_reason(self) -> Optional[str]:
        """Why the spec as given cannot run on the host (None: it fits), with what
        ``--fit-host`` would change."""
        if self.fits_as_given:
            return None
        out = "does not fit this host"
        unfit = [c for c in self.changes if not c.sharing]
        if unfit:
            out += ("; --fit-host would change " + ", ".join(c.text() for c in unfit))
        if self.problem:
            out += ("; even then " if unfit else ": ") + self.problem
        return out


def _pct(x: float) -> str:
    return f"{x * 100:.0f} %"


def _show(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "'" + ",".join(str(x) for x in v) + "'"
    return str(v)


# ------------------------------------------------------------------------------- the spec as a dict

def _get(d: dict[str, Any], path: str) -> Any:
    cur: Any = d
    for part in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def _set(d: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    cur = d
    for part in parts[:-1]:
        cur = cur.setdefault(part, {})
    cur[parts[-1]] = value


def _rel(option: str) -> str:
    """'topology.ovs.pmd_cores' -> 'ovs.pmd_cores' (CoreRequest names the suite's field)."""
    return option[len("topology."):] if option.startswith("topology.") else option


def _topology(spec: TopologySpec, start_tgen: bool) -> Any:
    """The topology object for ``spec``, not built (its CPU plan, demands, requests)."""
    return topo.topology_class(spec.kind)(spec, topo.RunContext(tag="nfv000000"), start_tgen=start_tgen)


# ------------------------------------------------------------------------------- the rules

def _fit_ht(d: dict[str, Any], topo: Any, host: HostFacts) -> list[FitChange]:
    if host.smt:
        return []
    out = []
    for req in topo.core_requests().values():
        ht_field = _rel(req.ht_field or req.field.rsplit(".", 1)[0] + ".ht")
        if req.ht and _get(d, ht_field) is True:
            _set(d, ht_field, False)
            out.append(FitChange(ht_field, True, False, "no SMT: this host has one thread per core"))
    return out


def _fit_numa(d: dict[str, Any], topo: Any, host: HostFacts) -> list[FitChange]:
    out: list[FitChange] = []
    if topo.dut_class().options_key != "ovs":       # only OVS reads the ovs: section
        return out
    nodes = host.nodes
    mem = _get(d, "ovs.socket_mem")
    if isinstance(mem, list) and any(mb and i not in nodes for i, mb in enumerate(mem)):
        new = [mb if i in nodes else 0 for i, mb in enumerate(mem)]
        while len(new) > 1 and not new[-1]:
            new.pop()
        if not any(new):
            new = [0] * nodes[0] + [max(mem)]
        _set(d, "ovs.socket_mem", new)
        out.append(FitChange("ovs.socket_mem", mem, new,
                             f"NUMA node(s) {', '.join(map(str, nodes))} only"))
    mask = _get(d, "ovs.pmd_cpu_mask")
    if mask:
        cpus = cores_from_mask(str(mask))
        allowed = [c for c in host.cpus.allowed if c in host.cpus.cpus] or host.cpus.online
        keep = [c for c in cpus if c in allowed] or allowed[-1:]
        if keep != cpus:
            new_mask = cpu_mask(keep)
            _set(d, "ovs.pmd_cpu_mask", new_mask)
            out.append(FitChange("ovs.pmd_cpu_mask", mask, new_mask,
                                 f"this host has CPU(s) {format_cpulist(allowed)}"))
    return out


def _fit_cores(d: dict[str, Any], start_tgen: bool, host: HostFacts) -> tuple[list[FitChange], Optional[str]]:
    """Lower the core counts, largest first, until the topology's CPU plan resolves them."""
    before: dict[str, int] = {}
    problem: Optional[str] = None
    for _ in range(4096):
        topo = _topology(TopologySpec.model_validate(d), start_tgen)
        try:
            topo.plan_cpus(host.cpus)
            problem = None
            break
        except HostTooSmall as e:
            problem = str(e)
        counts: dict[str, int] = {}
        for req in topo.core_requests().values():
            counts.setdefault(_rel(req.field), int(req.cores))
        for f, n in counts.items():
            before.setdefault(f, n)
        big = [(n, f) for f, n in counts.items() if n > 1]
        if not big:
            break
        n, f = max(reversed(big), key=lambda x: x[0])     # a tie: the later role (VNF, tgen) first
        _set(d, f, n - 1)
    cores = len(host.cpus.physical_cores())
    why = (f"this host has {cores} physical core{'s' if cores != 1 else ''} (CPUs "
           f"{format_cpulist(host.cpus.allowed)}) for the topology's core counts together")
    changes = [FitChange(f, n, _get(d, f), why) for f, n in before.items() if _get(d, f) != n]
    return changes, problem


def _generator_sharing(topo: Any, host: HostFacts) -> Optional[tuple[list[int], list[str]]]:
    """(CPUs, roles) where the topology's plan puts a DUT's or VNF's polling on the generator's
    polling CPUs; None when it does not (or the plan does not resolve)."""
    try:
        plan = topo.plan_cpus(host.cpus)
    except HostTooSmall:
        return None
    over = generator_overlap({"pinning": {"roles": plan.roles}})
    return ([int(c) for c in over["cpus"]], [str(r) for r in over["roles"]]) if over else None


def _fit_sharing(d: dict[str, Any], start_tgen: bool, host: HostFacts
                 ) -> tuple[list[FitChange], Optional[str]]:
    """Rule 4: lower the DUT's / VNFs' core counts until none polls on the generator's CPUs.
    Returns the changes and what the spec as given would share (None: nothing)."""
    if not start_tgen:
        return [], None
    first = _generator_sharing(_topology(TopologySpec.model_validate(d), start_tgen), host)
    if first is None:
        return [], None
    cpus, roles = first
    t0 = _topology(TopologySpec.model_validate(d), start_tgen)
    reqs = t0.core_requests()
    named = [f"{r} ({reqs[r].field} {reqs[r].cores})" if r in reqs else r for r in roles]
    shares = (f"{', '.join(named)} would busy-poll on CPU {format_cpulist(cpus)}, the generator's "
              "polling CPU: the DUT and the generator would time-slice")
    before: dict[str, int] = {}
    for _ in range(256):
        t = _topology(TopologySpec.model_validate(d), start_tgen)
        over = _generator_sharing(t, host)
        if over is None:
            break
        reqs = t.core_requests()
        counts = {_rel(req.field): int(req.cores) for role, req in reqs.items()
                  if role in over[1] and int(req.cores) > 1}
        if not counts and "tgen" in reqs and int(reqs["tgen"].cores) > 1:
            # the DUT is down to one core: the generator gives one of its own up
            counts = {_rel(reqs["tgen"].field): int(reqs["tgen"].cores)}
        if not counts:
            break
        f, n = max(counts.items(), key=lambda x: x[1])
        before.setdefault(f, n)
        _set(d, f, n - 1)
    why = f"a DUT's polling would otherwise share the generator's CPU {format_cpulist(cpus)}"
    return [FitChange(f, n, _get(d, f), why, sharing=True) for f, n in before.items()], shares


def _fit_memory(d: dict[str, Any], start_tgen: bool, host: HostFacts) -> tuple[list[FitChange], Optional[str]]:
    topo = _topology(TopologySpec.model_validate(d), start_tgen)
    demand, limit = int(topo.hugepage_demand_mb()), host.hugepage_limit_mb
    if demand <= limit or not host.mem_total_mb:
        return [], None
    need = (f"the topology's DPDK processes need {demand:,} MB of hugepages, more than "
            f"{_pct(HUGEPAGE_RAM_SHARE)} of this host's {host.mem_total_mb:,} MB RAM ({limit:,} MB)")
    ovs = topo.dut_class().options(topo.spec)
    if topo.dut_class().options_key != "ovs" or ovs is None or \
            topo.dut_class().hugepage_demand_mb(topo.spec) == 0:
        return [], need
    per_socket = ovs.socket_mem_list()
    socket = sum(per_socket)
    room = (limit - (demand - socket)) // _STEP_MB * _STEP_MB
    if room < MIN_SOCKET_MEM_MB:
        return [], need
    why = f"hugepages within {_pct(HUGEPAGE_RAM_SHARE)} of the RAM: {limit:,} MB"
    if _get(d, "ovs.socket_mem") is not None:
        new = [max(0, mb * room // socket // _STEP_MB * _STEP_MB) for mb in per_socket]
        biggest = per_socket.index(max(per_socket))
        new[biggest] += room - sum(new)
        _set(d, "ovs.socket_mem", new)
        return [FitChange("ovs.socket_mem", per_socket, new, why)], None
    _set(d, "ovs.socket_mem_mb", room)
    return [FitChange("ovs.socket_mem_mb", socket, room, why)], None


def fit_topology(spec: TopologySpec, host: HostFacts, start_tgen: bool = True) -> Fit:
    """``spec`` fitted to ``host`` (see the module doc); ``start_tgen``: the generator runs
    (its ``tgen_cores`` count and hugepages count)."""
    d = spec.model_dump(mode="json")
    topo = _topology(spec, start_tgen)
    changes = _fit_ht(d, topo, host)
    changes += _fit_numa(d, topo, host)
    more, problem = _fit_cores(d, start_tgen, host)
    changes += more
    shares = None
    if problem is None:
        more, shares = _fit_sharing(d, start_tgen, host)
        changes += more
        more, problem = _fit_memory(d, start_tgen, host)
        changes += more
    fitted = TopologySpec.model_validate(d) if changes else spec
    return Fit(fitted, _merged(changes), problem, shares)


def _merged(changes: list[FitChange]) -> list[FitChange]:
    """One change per field: the first value, the last, every reason."""
    out: dict[str, FitChange] = {}
    for c in changes:
        old = out.get(c.field)
        out[c.field] = c if old is None else FitChange(c.field, old.old, c.new, f"{old.why}; {c.why}",
                                                       sharing=old.sharing and c.sharing)
    return list(out.values())


def fitted_axes(study: Optional[dict[str, Any]], changes: list[FitChange]) -> dict[str, dict[str, Any]]:
    """The study axes of a unit whose field ``--fit-host`` changed: ``{axis: {"from", "to"}}``
    (``pmd_cores`` 4 ran as 2), for the report's study labels.  An axis whose paths are not
    topology fields, or a named-variant axis (its name is no field), is left out."""
    axes = (study or {}).get("axes") if isinstance(study, dict) else None
    if not isinstance(axes, dict) or not changes:
        return {}
    by_field = {"topology." + c.field: c for c in changes}
    out: dict[str, dict[str, Any]] = {}
    for axis in axes:
        for path in axis_paths(str(axis)):
            c = by_field.get(path)
            if c is not None:
                out[str(axis)] = {"from": c.old, "to": c.new}
                break
    return out


def spec_key(spec: Any) -> str:
    """A topology spec as a cache key."""
    return json.dumps(spec.model_dump(mode="json"), sort_keys=True, default=str)
