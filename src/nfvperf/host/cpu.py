"""CPU / NUMA topology from sysfs and a pinning plan for the busy-polling threads of a run.

Seed 000 (§ tuning) picks PMD cores from ``thread_siblings_list``, keeps core 0 for the OS and
isolates the data-plane cores (``isolcpus``).  The plan here does the same with what the host has:

* housekeeping CPUs (the control threads: tgen's main lcore, testpmd's main lcore, ovsdb-server,
  ovs-vswitchd's non-PMD threads, this Python process) — the first CPU by default;
* one or more *dedicated* CPUs per busy-polling role (tgen workers, switch PMDs, each VNF's forwarding
  cores), whole physical cores first (both hyper-threads of a core go to the same role), on the
  NUMA node of the NICs when known.

When the host has too few CPUs the roles share and the plan says so: ``cores_shared=True`` and a
human-readable ``warnings`` entry that the runner carries into every result's environment —
a throughput measured with the generator and the DUT on the same core is a lower bound of the
DUT, not its capacity.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

SYS_CPU = Path("/sys/devices/system/cpu")
SYS_NODE = Path("/sys/devices/system/node")


def parse_cpulist(text: str) -> list[int]:
    """'0-3,8,10-11' -> [0, 1, 2, 3, 8, 10, 11].  '(null)' is empty: Debian 12's kernel (6.1)
    prints that in /sys/devices/system/cpu/nohz_full when it booted without nohz_full=."""
    out: list[int] = []
    if text.strip() == "(null)":
        return out
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-", 1)
            out.extend(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
    return sorted(set(out))


def format_cpulist(cpus: Iterable[int]) -> str:
    cpus = sorted(set(cpus))
    parts, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        parts.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(parts)


def cpu_mask(cpus: Iterable[int]) -> str:
    """Hex mask (``pmd-cpu-mask``, ``-c``): [1, 2] -> '0x6'."""
    m = 0
    for c in cpus:
        m |= 1 << int(c)
    return hex(m)


def read_stripped(p: str | Path, default: str = "") -> str:
    """The text of file ``p`` without surrounding blanks; ``default`` when it cannot be read."""
    try:
        return Path(p).read_text().strip()
    except OSError:
        return default


@dataclass
class Cpu:
    id: int
    core_id: int
    package_id: int
    node: int
    siblings: list[int]


@dataclass
class CpuTopology:
    cpus: dict[int, Cpu]
    online: list[int]
    allowed: list[int]           # this process's affinity
    isolated: list[int]          # /sys/devices/system/cpu/isolated (isolcpus=)
    nohz_full: list[int]

    @classmethod
    def read(cls, root: Path = SYS_CPU, reader: Optional[Callable[[Path], str]] = None,
             node_root: Path = SYS_NODE) -> "CpuTopology":
        """The topology under ``root`` (``/sys/devices/system/cpu``).  ``reader(path) -> text``
        reads the files of another host (e.g. ``SshHost.read_text``; a file it cannot read is
        absent): the NUMA node of each CPU then comes from ``node_root/node<N>/cpulist`` (no
        directory listing needed) and ``allowed`` is every online CPU of that host, never this
        process's affinity."""
        rd: Callable[[Path, str], str] = read_stripped
        node_of: dict[int, int] = {}
        if reader is not None:
            def rd(p: Path, default: str = "") -> str:
                try:
                    return (reader(p) or "").strip() or default
                except OSError:
                    return default

            for n in parse_cpulist(rd(node_root / "online", "")):
                for c in parse_cpulist(rd(node_root / f"node{n}" / "cpulist", "")):
                    node_of[c] = n
        online = parse_cpulist(rd(root / "online", "0"))
        cpus: dict[int, Cpu] = {}
        for c in online:
            t = root / f"cpu{c}" / "topology"
            if reader is None:
                for d in (root / f"cpu{c}").glob("node*"):
                    with contextlib.suppress(ValueError):
                        node_of[c] = int(d.name[4:])
            sib = parse_cpulist(rd(t / "thread_siblings_list", str(c))) or [c]
            cpus[c] = Cpu(c, int(rd(t / "core_id", str(c)) or c),
                          int(rd(t / "physical_package_id", "0") or 0), node_of.get(c, 0), sib)
        allowed = list(online)
        if reader is None and root == SYS_CPU:
            # this process's affinity applies to this host's sysfs, not to a copy of another's
            with contextlib.suppress(AttributeError, OSError):
                allowed = sorted(os.sched_getaffinity(0))
        return cls(cpus, online, allowed, parse_cpulist(rd(root / "isolated", "")),
                   parse_cpulist(rd(root / "nohz_full", "")))

    @classmethod
    def from_siblings(cls, siblings: dict[int, Sequence[int]], nodes: Optional[dict[int, int]] = None,
                      allowed: Optional[Sequence[int]] = None,
                      isolated: Sequence[int] = ()) -> "CpuTopology":
        """A topology from a sibling map ``{cpu: [its thread siblings]}`` (what
        ``thread_siblings_list`` says per CPU), e.g. for a host other than this one."""
        nodes = nodes or {}
        cpus: dict[int, Cpu] = {}
        for c, sib in sorted(siblings.items()):
            group = sorted(set(sib) | {c})
            cpus[c] = Cpu(c, group[0], nodes.get(c, 0), nodes.get(c, 0), group)
        online = sorted(cpus)
        return cls(cpus, online, sorted(allowed) if allowed is not None else list(online),
                   sorted(isolated), [])

    def threads_per_core(self) -> int:
        """Hardware threads per physical core (1 without hyper-threading / SMT)."""
        return max((len(g) for g in self.physical_cores()), default=1)

    def describe(self, cpus: Iterable[int]) -> list[str]:
        """One line per physical core that ``cpus`` use: 'core 1 (node 0): CPUs 1,9 [both]'."""
        want = set(cpus)
        out = []
        for group in self.physical_cores():
            used = [c for c in group if c in want]
            if not used:
                continue
            node = self.cpus[group[0]].node
            which = "both threads" if len(used) == len(group) > 1 else \
                (f"sibling(s) {format_cpulist(set(group) - set(used))} unused" if len(group) > 1
                 else "no sibling")
            out.append(f"CPU {format_cpulist(used)} (node {node}, siblings "
                       f"{format_cpulist(group)}: {which})")
        missing = sorted(want - set(self.cpus))
        if missing:
            out.append(f"CPU {format_cpulist(missing)}: not on this host")
        return out

    @property
    def hyperthreading(self) -> bool:
        return any(len(c.siblings) > 1 for c in self.cpus.values())

    def nodes(self) -> list[int]:
        return sorted({c.node for c in self.cpus.values()})

    def physical_cores(self) -> list[list[int]]:
        """Groups of hyper-thread siblings, in CPU order."""
        seen: set[int] = set()
        out = []
        for c in sorted(self.cpus):
            if c in seen:
                continue
            group = [s for s in self.cpus[c].siblings if s in self.cpus]
            seen.update(group)
            out.append(group)
        return out

    def to_dict(self) -> dict[str, object]:
        return {"online": format_cpulist(self.online), "allowed": format_cpulist(self.allowed),
                "isolated": format_cpulist(self.isolated), "nohz_full": format_cpulist(self.nohz_full),
                "numa_nodes": self.nodes(), "hyperthreading": self.hyperthreading,
                "physical_cores": len(self.physical_cores()), "logical_cpus": len(self.online)}


@dataclass
class PinningPlan:
    """Which CPUs each role polls on.  ``roles[name]`` lists CPUs; ``housekeeping`` the control CPUs."""

    housekeeping: list[int]
    roles: dict[str, list[int]] = field(default_factory=dict)
    cores_shared: bool = False
    warnings: list[str] = field(default_factory=list)
    topology: dict[str, object] = field(default_factory=dict)
    #: roles whose CPUs came from a core count: role -> ResolvedCores.to_dict() (field, cores,
    #: ht, cpus, mask, siblings)
    resolved: dict[str, dict[str, object]] = field(default_factory=dict)

    def cpus(self, role: str) -> list[int]:
        return list(self.roles.get(role, []))

    def dpdk_lcores(self, role: str, workers: Optional[int] = None) -> str:
        """EAL ``--lcores`` for a DPDK process of ``role``: lcore 0 (main) on the first
        housekeeping CPU, lcores 1..n on the role's CPUs (cycled when ``workers`` exceeds them).
        E.g. '0@0,1@1' or, on one CPU, '0@0,1@0'."""
        cpus = self.cpus(role) or self.housekeeping
        n = workers if workers is not None else len(cpus)
        return ",".join([f"0@{self.housekeeping[0]}"] + [f"{i + 1}@{cpus[i % len(cpus)]}" for i in range(n)])

    def mask(self, role: str) -> str:
        return cpu_mask(self.cpus(role))

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def plan_pinning(demands: dict[str, int], topo: Optional[CpuTopology] = None,
                 housekeeping: Optional[Sequence[int]] = None,
                 numa_node: Optional[int] = None,
                 fixed: Optional[dict[str, ResolvedCores]] = None) -> PinningPlan:
    """Give each role in ``demands`` ({"tgen": 1, "dut": 1, "vnf0": 1}) its number of dedicated
    polling CPUs, in the order given.

    Dedicated CPUs come from the allowed CPUs minus housekeeping (isolated CPUs first, whole
    physical cores, the NIC's NUMA node first).  If that pool is too small the housekeeping CPUs
    join it; if still too small, roles share CPUs round-robin and the plan says so.

    ``fixed``: roles whose CPUs were resolved from a core count (:func:`resolve_cores`); they keep
    exactly those CPUs (whatever ``demands`` says for them), which leave the pool of the others.
    """
    topo = topo or CpuTopology.read()
    fixed = dict(fixed or {})
    allowed_all = [c for c in topo.allowed if c in topo.cpus] or list(topo.online)
    hk = [c for c in (housekeeping if housekeeping is not None else allowed_all[:1])
          if c in allowed_all]
    hk = hk or allowed_all[:1]
    pinned = {c for r in fixed.values() for c in r.cpus}
    allowed = [c for c in allowed_all if c not in pinned or c in hk]
    demands = {r: n for r, n in demands.items() if r not in fixed}

    def ordered(cands: list[int]) -> list[int]:
        # isolated first, then the wanted NUMA node, keeping hyper-thread siblings adjacent
        order = list(dict.fromkeys(c for group in topo.physical_cores() for c in group if c in cands))
        # hyper-thread siblings of housekeeping CPUs last: they share a core with the OS
        return sorted(order, key=lambda c: (any(s in hk for s in topo.cpus[c].siblings),
                                            c not in topo.isolated,
                                            numa_node is not None and topo.cpus[c].node != numa_node))

    need = sum(max(0, n) for n in demands.values())
    pool = ordered([c for c in allowed if c not in hk])
    warnings: list[str] = []
    shared = False
    if len(pool) < need:
        pool = ordered([c for c in allowed if c not in hk]) + [c for c in hk]
        if need > 0 and any(c in hk for c in pool[:need]):
            shared = True
            warnings.append(
                f"busy-polling threads share CPU(s) with housekeeping (control threads, OS): "
                f"{need} polling CPU(s) wanted, {len(allowed) - len(hk)} free of housekeeping")
    roles = _deal(demands, pool)
    if need > len(pool):
        shared = True
        users: dict[int, list[str]] = {}
        for role, cpus in roles.items():
            for c in cpus:
                users.setdefault(c, []).append(role)
        detail = "; ".join(f"CPU {c}: {', '.join(r)}" for c, r in sorted(users.items()) if len(r) > 1)
        tg_alone = bool(roles.get("tgen")) and all(users[c] == ["tgen"] for c in roles["tgen"])
        who = ("the DUT's roles share cores while the generator keeps its own" if tg_alone
               else "generator and DUT compete for the same cores")
        warnings.append(f"CORES SHARED: {need} busy-polling CPU(s) wanted, {len(pool)} available "
                        f"({detail}); {who}, so results are lower bounds of the DUT's capacity, "
                        f"not comparable to dedicated-core reports")
    for role, res in fixed.items():
        roles[role] = list(res.cpus)
        warnings += res.warnings
        if any(c in hk for c in res.cpus):
            shared = True
    if numa_node is not None:
        off = [c for cpus in roles.values() for c in cpus if topo.cpus[c].node != numa_node]
        if off:
            warnings.append(f"CPU(s) {format_cpulist(off)} are not on the NIC's NUMA node {numa_node}")
    return PinningPlan(housekeeping=hk, roles=roles, cores_shared=shared, warnings=warnings,
                       topology=topo.to_dict(),
                       resolved={role: res.to_dict() for role, res in fixed.items()})


def _deal(demands: dict[str, int], pool: list[int]) -> dict[str, list[int]]:
    """CPUs of ``pool`` to each role, in order.  When there are enough, every role gets its own.
    When roles must share, the generator (``tgen``) still gets CPUs of its own if the pool has
    more than it asks for — the last ones, housekeeping's when they had to join — and the DUT's
    roles (switch PMDs, VNFs) share the rest round-robin: a DUT squeezed onto fewer cores is
    still measured by a generator that runs beside it, not in its time slices, and the harness
    ceiling (the generator through a forwarder on the other CPUs) stays a ceiling."""
    need = sum(max(0, n) for n in demands.values())
    ntg = max(0, demands.get("tgen", 0))
    if need > len(pool) and "tgen" in demands and 0 < ntg < len(pool):
        own, rest = pool[len(pool) - ntg:], pool[:len(pool) - ntg]
        out = _deal({r: n for r, n in demands.items() if r != "tgen"}, rest)
        return {r: (list(own) if r == "tgen" else out[r]) for r in demands}
    roles: dict[str, list[int]] = {}
    i = 0
    for role, n in demands.items():
        roles[role] = [pool[(i + k) % len(pool)] for k in range(max(0, n))]
        i += max(0, n)
    return roles


@dataclass(frozen=True)
class CoreRequest:
    """A core count as people say it: ``cores`` physical cores, ``ht`` both hyper-threads of
    each; ``field`` is the option that asked (named in errors), e.g. 'topology.ovs.pmd_cores'."""

    field: str
    cores: int
    ht: bool = False
    ht_field: str = ""         # the option that asked for ``ht`` (default: <section>.ht)


class CoreRequestError(ValueError):
    """A core count the host cannot give (the message names the field and what the host has)."""


@dataclass
class ResolvedCores:
    """What a core count (``pmd_cores: 2, ht: true``) resolved to on one host."""

    field: str                 # e.g. "topology.ovs.pmd_cores"
    cores: int                 # physical cores asked for
    ht: bool                   # both sibling threads of each core
    cpus: list[int]            # the logical CPUs (threads), sorted
    mask: str                  # hex mask of ``cpus``, e.g. '0x606'
    siblings: list[str] = dataclasses.field(default_factory=list)   # CpuTopology.describe(cpus)
    warnings: list[str] = dataclasses.field(default_factory=list)

    @property
    def threads(self) -> int:
        return len(self.cpus)

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["cpu_list"] = format_cpulist(self.cpus)
        return d


def resolve_cores(cores: int, ht: bool = False, *, field: str = "cores", ht_field: str = "",
                  topo: Optional[CpuTopology] = None, housekeeping: Optional[Sequence[int]] = None,
                  exclude: Iterable[int] = (), numa_node: Optional[int] = None) -> ResolvedCores:
    """``cores`` physical cores of the host (``ht``: both hyper-threads of each, as seed 000 §10.3
    picks the PMD mask from ``thread_siblings_list``; else one thread per core, its sibling left
    idle), as a CPU list and mask.

    Whole cores only: a core any of whose threads is in ``exclude`` (taken by another request)
    is not used.  Cores holding a ``housekeeping`` CPU (default: the first allowed CPU, i.e. core
    0) come last and only when the host has no other (then a warning says so); isolated CPUs and
    the ``numa_node`` come first.  Raises :class:`CoreRequestError` naming ``field`` when the host
    has fewer cores (or no hyper-threads for ``ht``)."""
    if cores < 1:
        raise CoreRequestError(f"{field}: must be at least 1, not {cores}")
    topo = topo or CpuTopology.read()
    allowed = [c for c in topo.allowed if c in topo.cpus] or list(topo.online)
    hk = set(housekeeping if housekeeping is not None else allowed[:1])
    taken = set(exclude)
    groups = [[c for c in g if c in allowed] for g in topo.physical_cores()]
    groups = [g for g in groups if g and not (set(g) & taken)]
    tpc = topo.threads_per_core()
    what = f"{cores} physical core{'s' if cores != 1 else ''}" + \
        (" with both hyper-threads" if ht else "")
    host = (f"this host has {len(topo.physical_cores())} physical core(s) × {tpc} thread(s) "
            f"(CPUs {format_cpulist(allowed)} allowed)")
    if ht:
        if tpc < 2:
            raise CoreRequestError(
                f"{ht_field or field.rsplit('.', 1)[0] + '.ht'}: true uses both hyper-threads of "
                f"each core, but {host}, one thread per core (no hyper-threading/SMT); set it "
                f"false")
        groups = [g for g in groups if len(g) > 1]
    if len(groups) < cores:
        free = f"{len(groups)} usable" + (f" (CPUs {format_cpulist(taken)} already taken by other "
                                          f"roles)" if taken else "")
        raise CoreRequestError(f"{field}: {cores} wanted ({what}), but {host}: {free}; "
                               f"lower {field} or run on a larger host")

    def key(g: list[int]) -> tuple[bool, bool, bool, int, int]:
        return (bool(set(g) & hk), not any(c in topo.isolated for c in g),
                numa_node is not None and topo.cpus[g[0]].node != numa_node,
                topo.cpus[g[0]].node, g[0])

    chosen = sorted(groups, key=key)[:cores]
    cpus = sorted(c for g in chosen for c in (g if ht else g[:1]))
    warnings = []
    shared = sorted(c for g in chosen for c in g if c in hk)
    if shared:
        warnings.append(f"{field}: {what} take the housekeeping core (CPU {format_cpulist(shared)}, "
                        f"the OS and control threads); the host has no other free core")
    return ResolvedCores(field, cores, ht, cpus, cpu_mask(cpus), topo.describe(cpus), warnings)
