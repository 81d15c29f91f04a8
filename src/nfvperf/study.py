"""Studies: one test entry compared along axes (issue 9).

A test entry may carry ``study: {axes: {...}, baseline?: {...}, only?: [...]}``; :func:`expand`
turns it into one plain test entry per configuration (a *unit*), which config validates exactly
like a hand-written entry.  An axis is

- an alias (``flows: [1, 1000]``, see :data:`ALIASES`) or a dotted path into the entry
  (``topology.ovs.n_rxq: [1, 2]``; roots ``topology.``, ``traffic.``, ``params.`` for the
  method's params, ``sim.``), with a list of values; or
- a named-variant axis (any name): a mapping ``{value name: overrides of the entry}``, the
  overrides written like the entry itself (``{topology: {ovs: {n_rxq: 2}}}``) or with aliases and
  dotted paths as keys (``{pmd_cores: 2, ht: true}``).

A unit is named ``"<name>[axis=value,...]"`` (axes in the order written) and carries
``{"name": <name>, "axes": {axis: value}, "baseline": bool}`` (TestConfig.study, stored in
``tests.study``).  Without ``only:`` the units are the cross product; ``only:`` lists a subset, an
axis left out of an ``only:`` item taking its baseline value.  The baseline defaults to the first
value of every axis.  The overrides of the axes are applied in the order the axes are written
(a later axis wins where two set the same field).  Units are ordered so that units with the same
values on the topology-changing axes are consecutive (topology axes outermost): the runner brings
each distinct topology up once.

This module works on the raw YAML data only; the schema checks are config's.
"""
from __future__ import annotations

import copy
import itertools
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from nfvperf.validation import deep_merge

#: the most units a cross product may have; larger studies list their units with ``only:``
MAX_STUDY_UNITS = 256

#: the roots a dotted axis path may start with; ``params.`` addresses the method's params, which
#: are written at the top level of the entry
PATH_ROOTS = ("topology", "traffic", "params", "sim")

#: short axis names -> the schema paths they set (one value sets every listed path)
ALIASES: dict[str, tuple[str, ...]] = {
    "dut": ("topology.dut",),
    "kind": ("topology.kind",),
    "port_kind": ("topology.port_kind",),
    "pmd_cores": ("topology.ovs.pmd_cores",),
    "ht": ("topology.ovs.ht",),
    "pmd_mask": ("topology.ovs.pmd_cpu_mask",),
    "rxq": ("topology.ovs.n_rxq",),
    "descriptors": ("topology.ovs.n_rxq_desc", "topology.ovs.n_txq_desc"),
    "rules": ("topology.ovs.rules",),
    "socket_mem": ("topology.ovs.socket_mem",),   # MB per NUMA socket: 2048 or "11264,1024"
    "mtu": ("topology.mtu",),
    "vnf": ("topology.vnf",),
    "flows": ("traffic.flows_per_port",),
    "link_speed": ("traffic.link_speed",),
    "streams": ("params.streams",),
    "processes": ("params.processes",),
    "tso": ("params.tso",),               # tcp method: ethtool -K tso on|off on the path's interfaces
    "multiqueue": ("params.multiqueue",),  # tcp method: queues of the path's interfaces (ethtool -L)
}


def _vxlan(v: Any) -> dict[str, Any]:
    """``vxlan: true`` runs the vxlan topology with VXLAN-encapsulated traffic; ``false`` the
    entry's own topology with plain traffic."""
    out: dict[str, Any] = {"traffic": {"vxlan": v}}
    if v is True:
        out["topology"] = {"kind": "vxlan"}
    return out


#: aliases whose value sets more than a path
ALIAS_FUNCS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "frame_size": lambda v: {"frame_sizes": [v]},
    "vxlan": _vxlan,               # traffic.vxlan (+ topology.kind vxlan when true)
}

#: aliases of the contract with no field in the schema yet (a clear error instead of "unknown")
MISSING_ALIASES: dict[str, str] = {}


def axis_paths(name: str) -> tuple[str, ...]:
    """The schema paths a value axis sets (``pmd_cores`` -> ``topology.ovs.pmd_cores``; a dotted
    path: itself); () for an alias that sets more than paths (``vxlan``) and for a named-variant
    axis (its name is no field)."""
    if name in ALIASES:
        return ALIASES[name]
    if name in ALIAS_FUNCS or "." not in name:
        return ()
    return (name,)


@dataclass
class Axis:
    name: str
    values: list[Any]                       # the values (a variant axis: the variant names)
    overrides: list[dict[str, Any]]         # per value: the nested entry fragment it applies
    variant: bool = False
    paths: tuple[str, ...] = ()             # what a value axis sets (for duplicate detection)

    def index(self, value: Any) -> Optional[int]:
        for i, v in enumerate(self.values):
            if same_value(v, value):
                return i
        return None

    @property
    def changes_topology(self) -> bool:
        return any("topology" in o for o in self.overrides)


@dataclass
class Unit:
    name: str
    entry: dict[str, Any]                   # the plain test entry (no ``study:``)
    study: dict[str, Any]                   # {"name", "axes": {axis: value}, "baseline": bool}


@dataclass
class StudySummary:
    """What ``nfvperf validate`` prints per study (gathered back from the expanded tests)."""

    name: str
    axes: dict[str, list[Any]] = field(default_factory=dict)
    units: int = 0
    baseline: Optional[dict[str, Any]] = None


def same_value(a: Any, b: Any) -> bool:
    """Equality as YAML means it: ``true`` is not ``1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


def format_value(v: Any) -> str:
    if isinstance(v, list):            # a list value (socket memory per NUMA socket): 11264/1024
        return "/".join(format_value(x) for x in v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def unit_name(name: str, axes: dict[str, Any]) -> str:
    return f"{name}[" + ",".join(f"{k}={format_value(v)}" for k, v in axes.items()) + "]"


def path_override(path: str, value: Any) -> dict[str, Any]:
    """``topology.ovs.n_rxq`` = 2 -> ``{"topology": {"ovs": {"n_rxq": 2}}}``; ``params.x`` -> ``{"x": ..}``."""
    parts = path.split(".")
    if parts[0] == "params":
        parts = parts[1:]
    out: Any = value
    for p in reversed(parts):
        out = {p: out}
    return dict(out)


def key_override(key: str, value: Any) -> dict[str, Any]:
    """An alias or a dotted path (already checked) with its value -> the entry fragment."""
    if key in ALIAS_FUNCS:
        return ALIAS_FUNCS[key](value)
    out: dict[str, Any] = {}
    for p in ALIASES.get(key, (key,)):
        out = deep_merge(out, path_override(p, value))
    return out


def check_key(key: Any) -> Optional[str]:
    """Why ``key`` is neither an alias nor a usable dotted path (None when it is one)."""
    if not isinstance(key, str) or not key:
        return f"axis names are strings, got {key!r}"
    if key in ALIASES or key in ALIAS_FUNCS:
        return None
    if key in MISSING_ALIASES:
        return f"alias {key!r} has no field in the schema: {MISSING_ALIASES[key]}"
    if "." not in key:
        return (f"unknown axis {key!r}: not an alias ({', '.join(sorted([*ALIASES, *ALIAS_FUNCS]))}) nor a dotted path "
                f"starting with {', '.join(r + '.' for r in PATH_ROOTS)}; a named-variant axis "
                "takes a mapping {value name: overrides}")
    parts = key.split(".")
    if parts[0] not in PATH_ROOTS:
        return (f"unknown path root {parts[0]!r} in {key!r}; a path starts with "
                f"{', '.join(r + '.' for r in PATH_ROOTS)}")
    if any(not p for p in parts[1:]) or len(parts) < 2:
        return f"path {key!r} has an empty part"
    return None


def _variant_overrides(where: str, over: Any, problems: list[str]) -> Optional[dict[str, Any]]:
    """A variant's overrides: entry keys deep-merged as written, aliases and dotted paths translated."""
    if not isinstance(over, dict):
        problems.append(f"{where}: a variant is a mapping of overrides of the entry, e.g. "
                        "{topology: {ovs: {n_rxq: 2}}} or {pmd_cores: 2, ht: true}, got "
                        f"{type(over).__name__}")
        return None
    out: dict[str, Any] = {}
    for k, v in over.items():
        if isinstance(k, str) and (k in ALIASES or k in ALIAS_FUNCS or "." in k):
            why = check_key(k)
            if why:
                problems.append(f"{where}.{k}: {why}")
                continue
            frag = key_override(k, v)
        elif k == "study":
            problems.append(f"{where}.study: a study cannot nest another study")
            continue
        else:
            frag = {k: copy.deepcopy(v)}
        out = deep_merge(out, frag)
    return out


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def _is_value(v: Any) -> bool:
    """An axis value: a scalar, or a list of scalars (a field that takes a list)."""
    return _is_scalar(v) or (isinstance(v, list) and all(_is_scalar(x) for x in v))


def parse_axes(where: str, axes: Any, problems: list[str]) -> list[Axis]:
    if not isinstance(axes, dict) or not axes:
        problems.append(f"{where}: give at least one axis, e.g. axes: {{flows: [1, 1000]}}")
        return []
    out: list[Axis] = []
    for name, spec in axes.items():
        w = f"{where}.{name}"
        if isinstance(spec, dict):
            if not isinstance(name, str) or not name or any(c in name for c in "=,[]"):
                problems.append(f"{w}: a variant axis name is a word without '=', ',', '[' or ']'")
                continue
            if not spec:
                problems.append(f"{w}: empty axis; give at least one variant {{name: overrides}}")
                continue
            n_before = len(problems)
            overrides = [_variant_overrides(f"{w}.{vn}", ov, problems) for vn, ov in spec.items()]
            bad_names = [vn for vn in spec if not isinstance(vn, str) or any(c in vn for c in "=,[]")]
            if bad_names:
                problems.append(f"{w}: variant names are words without '=', ',', '[' or ']'; got {bad_names}")
            if len(problems) == n_before:
                out.append(Axis(str(name), list(spec), [o or {} for o in overrides], variant=True))
            continue
        why = check_key(name)
        if why:
            problems.append(f"{w}: {why}")
            continue
        if not isinstance(spec, list) or not spec:
            problems.append(f"{w}: empty axis; give a list of at least one value, e.g. [1, 2]"
                            if isinstance(spec, list) or spec is None else
                            f"{w}: an axis is a list of values (or a mapping of named variants), got {spec!r}")
            continue
        bad = [v for v in spec if not _is_value(v)]
        if bad:
            problems.append(f"{w}: values are numbers, strings, booleans or lists of them (a mapping "
                            f"makes a named-variant axis), got {bad[0]!r}")
            continue
        dups = [v for i, v in enumerate(spec) if any(same_value(v, u) for u in spec[:i])]
        if dups:
            problems.append(f"{w}: value {format_value(dups[0])} repeats; list each value once")
            continue
        paths = ALIASES.get(name, ()) if name in ALIASES else (() if name in ALIAS_FUNCS else (name,))
        out.append(Axis(name, list(spec), [key_override(name, v) for v in spec], paths=paths))
    _same_target(where, out, problems)
    return out


def _same_target(where: str, axes: list[Axis], problems: list[str]) -> None:
    seen: dict[str, str] = {}
    for ax in axes:
        for p in ax.paths:
            p = p[len("params."):] if p.startswith("params.") else p
            if p in seen:
                problems.append(f"{where}.{ax.name}: sets {p} as axis {seen[p]} does; keep one of them")
            seen[p] = ax.name


def _point(where: str, axes: list[Axis], sel: Any, fill: dict[str, Any],
           problems: list[str]) -> Optional[dict[str, Any]]:
    """A mapping {axis: value} completed from ``fill``; None (and a problem) when it names an axis
    or a value the study does not have."""
    if not isinstance(sel, dict):
        problems.append(f"{where}: must be a mapping {{axis: value}}, got {sel!r}")
        return None
    by_name = {a.name: a for a in axes}
    ok = True
    for k, v in sel.items():
        ax = by_name.get(k)
        if ax is None:
            problems.append(f"{where}.{k}: not an axis of this study; axes: {', '.join(by_name)}")
            ok = False
        elif ax.index(v) is None:
            problems.append(f"{where}.{k}: {format_value(v)} is not on axis {k} "
                            f"({', '.join(format_value(x) for x in ax.values)})")
            ok = False
    if not ok:
        return None
    out = {}
    for a in axes:
        given = next((v for k, v in sel.items() if k == a.name), _UNSET)
        out[a.name] = a.values[a.index(given)] if given is not _UNSET else fill[a.name]   # type: ignore[index]
    return out


_UNSET = object()

#: the keys of a study block that set its interleaved rounds (issue 16)
ROUND_KEYS = ("rounds", "metrics", "seed", "round_trial_s", "overload_pct")
#: the per-round capacity figures: forwarding rate at a fixed overload (CSIT's MRR), a
#: loss-tolerant conditional throughput (MLR goal: loss ratio 0.5 %, exceed ratio 0.5, CSIT's
#: PDR), and the RFC 2544 zero-loss throughput found by the entry's own search
ROUND_METRICS = ("mrr", "pdr", "ndr")
DEFAULT_ROUND_METRICS = ["mrr", "pdr"]
MAX_ROUNDS = 100
#: rounds a 95 % exact rank interval of the median needs (min..max covers 1 - 2 * 0.5**6)
ROUNDS_FOR_95 = 6
#: seconds per round trial when a study does not say (``round_trial_s``): short, so that a round's
#: units run close together in time (a host whose speed switches every few seconds then moves
#: both alike); docs/methods.md "Comparing on a noisy host" has the measurements behind 0.5 s
DEFAULT_ROUND_TRIAL_S = 0.5


def round_settings(rounds: int, metrics: Optional[list[str]] = None, seed: Optional[int] = None,
                   round_trial_s: float = DEFAULT_ROUND_TRIAL_S, overload_pct: float = 100.0) -> dict[str, Any]:
    """The ``rounds`` block stored with every unit of an interleaved study (``tests.study``)."""
    return {"rounds": rounds, "metrics": list(metrics or DEFAULT_ROUND_METRICS),
            "seed": seed if seed is not None else random.SystemRandom().randrange(1, 2**31),
            "round_trial_s": float(round_trial_s), "overload_pct": float(overload_pct)}


def _whole(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def parse_rounds(w: str, study: dict[str, Any], problems: list[str]) -> Optional[dict[str, Any]]:
    """A study's round settings (None: no rounds, the units run one after the other)."""
    given = [k for k in ROUND_KEYS if k in study]
    if not given:
        return None
    if "rounds" not in study:
        problems.append(f"{w}.{given[0]}: a round setting without rounds; add rounds: N ({ROUNDS_FOR_95} or "
                        f"more give a 95 % interval; 20-30 keep it narrow on a noisy host)")
        return None
    n = study["rounds"]
    if not _whole(n) or not 2 <= n <= MAX_ROUNDS:
        problems.append(f"{w}.rounds: a whole number 2..{MAX_ROUNDS} (one round is the sequential "
                        f"run; {ROUNDS_FOR_95} or more give a 95 % interval), got {n!r}")
        return None
    metrics = study.get("metrics", DEFAULT_ROUND_METRICS)
    if isinstance(metrics, str):
        metrics = [metrics]
    if (not isinstance(metrics, list) or not metrics
            or any(m not in ROUND_METRICS for m in metrics) or len(set(metrics)) != len(metrics)):
        problems.append(f"{w}.metrics: a list of distinct figures from {', '.join(ROUND_METRICS)} "
                        f"(mrr: forwarding rate at a fixed overload; pdr: loss-tolerant throughput, "
                        f"loss 0.5 %, exceed ratio 0.5; ndr: the zero-loss search), got {metrics!r}")
        return None
    seed = study.get("seed")
    if seed is not None and (not _whole(seed) or seed < 0):
        problems.append(f"{w}.seed: a whole number >= 0 (the seed of the rounds' random orders), got {seed!r}")
        return None
    dur = study.get("round_trial_s", DEFAULT_ROUND_TRIAL_S)
    if isinstance(dur, bool) or not isinstance(dur, (int, float)) or not 0.05 <= dur <= 60:
        problems.append(f"{w}.round_trial_s: seconds per round trial, 0.05..60, got {dur!r}")
        return None
    over = study.get("overload_pct", 100.0)
    if isinstance(over, bool) or not isinstance(over, (int, float)) or not 0 < over <= 100:
        problems.append(f"{w}.overload_pct: the MRR load in % of the max load (line rate), above 0 and at "
                        f"most 100 (the generator offers no more than line rate), got {over!r}")
        return None
    return round_settings(n, metrics, seed, dur, over)


def _key(point: dict[str, Any]) -> tuple[str, ...]:
    return tuple(f"{k}={format_value(v)}:{type(v).__name__}" for k, v in point.items())


#: how a unit's ``topology:`` override is merged into the entry's (config passes
#: ``topo.spec.merge_override``: ``pmd_cores`` then replaces an entry's ``pmd_cpu_mask``)
TopologyMerge = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]


def _apply(entry: dict[str, Any], over: dict[str, Any], merge_topology: Optional[TopologyMerge]) -> dict[str, Any]:
    topo, over_topo = entry.get("topology"), over.get("topology")
    out = deep_merge(entry, over)
    if merge_topology is not None and isinstance(topo, dict) and isinstance(over_topo, dict):
        out["topology"] = merge_topology(topo, over_topo)
    return out


def expand(entry: dict[str, Any], where: str,
           merge_topology: Optional[TopologyMerge] = None) -> tuple[list[Unit], list[str]]:
    """The units of ``entry`` (which has ``study:``), ordered topology axes outermost; or the
    problems of the study block (each naming ``<where>.study.<field>``).  ``merge_topology``
    merges an axis's ``topology:`` into the entry's (default: a deep merge)."""
    problems: list[str] = []
    w = f"{where}.study"
    study = entry.get("study")
    if not isinstance(study, dict):
        return [], [f"{w}: must be a mapping {{axes: {{axis: [values]}}, baseline?: {{}}, only?: [...]}}"]
    for k in study:
        if k not in ("axes", "baseline", "only", *ROUND_KEYS):
            problems.append(f"{w}.{k}: unknown key; a study has axes, baseline, only and the round "
                            f"settings {', '.join(ROUND_KEYS)}")
    rounds = parse_rounds(w, study, problems)
    if "axes" not in study:
        problems.append(f"{w}.axes: required, e.g. axes: {{flows: [1, 1000]}}")
        return [], problems
    axes = parse_axes(f"{w}.axes", study["axes"], problems)
    if problems:
        return [], problems
    first = {a.name: a.values[0] for a in axes}
    baseline = first
    if study.get("baseline") is not None:
        baseline = _point(f"{w}.baseline", axes, study["baseline"], first, problems) or first
    points = _points(w, axes, study, baseline, problems)
    if problems:
        return [], problems
    name = entry.get("name") or entry.get("method")
    base = {k: copy.deepcopy(v) for k, v in entry.items() if k != "study"}
    units = []
    for p in _ordered(axes, points):
        e = base
        for a in axes:
            e = _apply(e, copy.deepcopy(a.overrides[a.index(p[a.name])]), merge_topology)   # type: ignore[index]
        e["name"] = unit_name(str(name), p)
        info: dict[str, Any] = {"name": name, "axes": dict(p), "baseline": _key(p) == _key(baseline)}
        if rounds:
            info["rounds"] = dict(rounds)
        units.append(Unit(e["name"], e, info))
    return units, problems


def _points(w: str, axes: list[Axis], study: dict[str, Any], baseline: dict[str, Any],
            problems: list[str]) -> list[dict[str, Any]]:
    only = study.get("only")
    if only is None:
        total = 1
        for a in axes:
            total *= len(a.values)
        if total > MAX_STUDY_UNITS:
            problems.append(f"{w}.axes: the cross product has {total} units (more than "
                            f"{MAX_STUDY_UNITS}); list the units you want with only: [...]")
            return []
        return [dict(zip([a.name for a in axes], combo))
                for combo in itertools.product(*[a.values for a in axes])]
    if not isinstance(only, list) or not only:
        problems.append(f"{w}.only: a non-empty list of {{axis: value}} mappings (axes left out take "
                        "their baseline value)")
        return []
    if len(only) > MAX_STUDY_UNITS:
        problems.append(f"{w}.only: {len(only)} units; at most {MAX_STUDY_UNITS}")
        return []
    points: list[dict[str, Any]] = []
    seen: dict[tuple[str, ...], int] = {}
    for i, sel in enumerate(only):
        p = _point(f"{w}.only[{i}]", axes, sel, baseline, problems)
        if p is None:
            continue
        k = _key(p)
        if k in seen:
            problems.append(f"{w}.only[{i}]: the same unit as only[{seen[k]}] ({unit_name('', p)[1:-1]})")
            continue
        seen[k] = i
        points.append(p)
    if not problems and _key(baseline) not in seen:
        problems.append(f"{w}.baseline: {unit_name('', baseline)[1:-1]} is not one of the only: units; "
                        "add it to only: or pick one of them as baseline")
    return points


def _ordered(axes: list[Axis], points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stable sort by the topology axes' value positions: equal topologies are consecutive."""
    topo = [a for a in axes if a.changes_topology]
    return sorted(points, key=lambda p: tuple(a.index(p[a.name]) or 0 for a in topo))


def summaries(tests: list[Any]) -> list[StudySummary]:
    """The studies among validated tests (TestConfig.study), in suite order."""
    out: dict[str, StudySummary] = {}
    for t in tests:
        st = getattr(t, "study", None)
        if not st:
            continue
        s = out.setdefault(st["name"], StudySummary(st["name"]))
        s.units += 1
        for k, v in st["axes"].items():
            vals = s.axes.setdefault(k, [])
            if not any(same_value(v, x) for x in vals):
                vals.append(v)
        if st.get("baseline"):
            s.baseline = dict(st["axes"])
    return list(out.values())


def describe(s: StudySummary) -> str:
    axes = "; ".join(f"{k}: {', '.join(format_value(v) for v in vals)}" for k, vals in s.axes.items())
    base = ", ".join(f"{k}={format_value(v)}" for k, v in (s.baseline or {}).items())
    return f"study {s.name}: {s.units} unit(s); axes {axes}; baseline {base}"

