"""The run plan: which units of a suite run on this host, which are skipped, and why.

``nfvperf validate`` and ``nfvperf run`` call the same :func:`plan_run` with the same options
(``--tg``, ``--port-kind``, ``--quick``, ``--fit-host``), so what validate lists is what the run
skips.  A unit (a test at one frame size) is skipped, before anything is built, when

* **the measurer cannot run its method** (``--tg iperf3`` runs only ``tcp``; tgen has no RFC 2889
  address trials): :func:`measurer_refusal`.  Under ``--tg tgen`` a ``tcp`` unit runs with iperf3
  through the same topology (:func:`unit_measurer`: the real measurer that has TCP);
* **its topology does not fit this host** (core counts, hyper-threads, NUMA sockets, hugepage
  memory; :func:`nfvperf.fit.fit_topology`): the reason names each option and what ``--fit-host``
  would set it to.  With ``--fit-host`` the unit runs on the fitted topology instead, and the
  change is stored and reported;
* **its topology cannot be built here** (:func:`build_problems`): the topology's own spec checks
  and the required preflight checks of its kind, DUT and VNFs (binaries, SR-IOV VFs on a port
  kind that has none, the openvswitch kernel module, PCI devices ...), the same checks the build
  runs.

``--tg sim`` builds nothing: the model runs the suite as written (the seed's host), so nothing is
skipped for this host, unless ``--fit-host`` asks for this host (then the fitted configuration
is modelled, and a topology that does not fit even fitted is skipped).  A ``--testbed`` run's
hosts are checked by the testbed preflight, not here.

A run goes on past its skipped units and fails only when nothing ran.
"""
from __future__ import annotations

import dataclasses
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from nfvperf.config import Suite
from nfvperf.fit import Fit, FitChange, HostFacts, _topology, fit_topology, spec_key
from nfvperf.methods import REGISTRY as METHODS, is_sizeless, method_info, runs_on_iperf3
from nfvperf.topo.measurers import tso_refusal
from nfvperf.tg.sim import SimMeasurer
from nfvperf.tg.iperf3 import Iperf3Measurer
from nfvperf.store.ceiling import CeilingCache, ceiling_key
from nfvperf.tg.tgen import TgenMeasurer, find_tgen_binary
from nfvperf.tg.tgen_cores import binary_id, line_rate_need, measure_core_rate
from nfvperf.topo.ports import port_kind_class
from nfvperf.units import directions
from nfvperf.topo.base import HostTooSmall, TopologyError
from nfvperf.topo.preflight import run_checks


def measurer_need(method: str) -> str:
    """The measurer call a method needs beyond ``measure`` (the method declares it:
    ``MethodInfo.measurer_call``; "" for none or a method not known)."""
    info = METHODS.get(method)
    return info.measurer_call if info is not None else ""


#: preflight checks the fitting rules already judge (their reason names --fit-host), and the
#: hugepage pool, which the build grows before it checks
_NOT_BUILD_CHECKS = ("ovs.socket_mem", "ovs.pmd_cpu_mask", "hugepages", "hugetlbfs")
MEASURERS = ("sim", "tgen", "iperf3")


def test_units(suite: Suite) -> list[tuple[Any, Optional[int]]]:
    """(test, frame size) in suite order; None for IMIX and size-less methods."""
    return [(t, s) for t in suite.tests
            for s in ([None] if t.traffic.get("imix") or is_sizeless(t.method) else t.frame_sizes)]


def unit_label(test: Any, size: Optional[int]) -> str:
    return (f"{test.name} {size} B" if size else test.name if is_sizeless(test.method)
            else f"{test.name} IMIX")


# ------------------------------------------------------------------------------ the rules

def _measurer_class(tg: str) -> Any:
    return {"sim": SimMeasurer, "iperf3": Iperf3Measurer}.get(tg, TgenMeasurer)


def unit_measurer(test: Any, tg: str) -> str:
    """The measurer that runs this unit: ``tg``, except that a real run (``--tg tgen``) runs a
    method tgen lacks the call for (``tcp``) with iperf3 through the same topology."""
    need = measurer_need(test.method)
    if tg == "tgen" and need and not callable(getattr(_measurer_class(tg), need, None)) \
            and callable(getattr(_measurer_class("iperf3"), need, None)):
        return "iperf3"
    return tg


def measurer_refusal(test: Any, size: Optional[int], tg: str, spec: Any) -> Optional[str]:
    """Why the ``--tg`` measurer cannot run this unit's method (None: it can)."""
    if tg == "iperf3" and not runs_on_iperf3(test.method):
        return f"method {test.method} needs --tg tgen or sim (--tg iperf3 runs only the tcp method)"
    need = measurer_need(test.method)
    if need and not callable(getattr(_measurer_class(tg), need, None)):
        other = "--tg iperf3 or sim" if method_info(test.method).tcp else "--tg sim"
        return f"method {test.method} needs {other} (the {tg} measurer has no {need})"
    if tg == "iperf3" and getattr(test.params_for(size), "tso", None) is True:
        why = tso_refusal(spec)
        if why:
            return f"params.tso: true: {why}"
    return None


def build_problems(spec: Any, tg: str, host: HostFacts) -> list[str]:
    """What stops ``spec`` from being built here for ``--tg tg``: the topology's spec checks
    (DUT, port kind, MTU), its CPU plan, for iperf3 its TCP ends (kernel interfaces, the
    topology's ``tcp_refusal``), and the required preflight checks of its kind, DUT and VNFs
    (what :meth:`nfvperf.topo.base.Topology.preflight` runs), less those the fitting rules judge
    and the hugepage pool the build grows first."""
    topo = _topology(spec, tg == "tgen")
    try:
        topo.check_spec()
    except TopologyError as e:
        return [str(e)]
    try:
        cpus = sorted({c for cs in topo.plan_cpus(host.cpus).roles.values() for c in cs})
    except HostTooSmall:
        cpus = []                       # the fitting rules judge the core counts
    required = [c for c in topo.required_checks() if topo.want_tgen or c != "tgen"]
    out = []
    if tg == "iperf3":                  # what tcp_endpoints() refuses once the topology is up
        if not topo.port_kind_class().tcp:
            out.append(f"TCP endpoints need kernel interfaces at the generator ends, not "
                       f"topology.port_kind {spec.port_kind}")
        why = topo.tcp_refusal()
        if why:
            out.append(f"TCP: {why}")
    for c in run_checks(spec, required=required, cpus=cpus):
        if c.required and c.status == "fail" and c.name not in _NOT_BUILD_CHECKS:
            out.append(f"{c.name}: {c.detail}" + (f" (fix: {c.fix})" if c.fix else ""))
    return out


# ------------------------------------------------------------------------------ the plan

@dataclass
class UnitPlan:
    test: Any
    size: Optional[int]
    label: str
    skip: Optional[str] = None                                # why it is skipped (None: it runs)
    changes: list[FitChange] = field(default_factory=list)    # --fit-host: what its topology got
    measurer: str = "sim"                                     # sim | tgen | iperf3 (unit_measurer)
    #: it runs, but its DUT/VNF polling would share the generator's CPUs (Fit.sharing_note)
    shares: Optional[str] = None

    @property
    def runs(self) -> bool:
        return self.skip is None


@dataclass
class RunPlan:
    """What a run of ``suite`` (the fitted suite with ``--fit-host``) does on this host."""

    suite: Suite
    tg: str
    fit_host: bool
    units: list[UnitPlan]
    host: Optional[HostFacts] = None
    on_testbed: bool = False
    #: what a line-rate trial needs of the generator, per topology (generator_need)
    generator: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._by_unit = {(id(u.test), u.size): u for u in self.units}

    def unit(self, test: Any, size: Optional[int]) -> Optional[UnitPlan]:
        return self._by_unit.get((id(test), size))

    def skip_reason(self, test: Any, size: Optional[int]) -> Optional[str]:
        u = self.unit(test, size)
        return u.skip if u is not None else None

    @property
    def skipped(self) -> list[UnitPlan]:
        return [u for u in self.units if not u.runs]

    @property
    def running(self) -> list[UnitPlan]:
        return [u for u in self.units if u.runs]

    def fitted(self) -> list[dict[str, Any]]:
        """Each distinct change with the units it applies to (in suite order)."""
        out: dict[str, dict[str, Any]] = {}
        for u in self.units:
            for c in u.changes:
                row = out.setdefault(c.text(), dict(c.to_dict(), units=[]))
                row["units"].append(u.label)
        return list(out.values())

    def fitted_summary(self) -> str:
        """'ovs.ht true→false (no SMT ...) [48 units]; ...' (empty without changes)."""
        return "; ".join(f"{r['text']} [{len(r['units'])} unit{'s' if len(r['units']) != 1 else ''}]"
                         for r in self.fitted())

    def record(self) -> dict[str, Any]:
        """What the run stores in its environment (``plan``) and ``nfvperf validate --json`` prints."""
        return {"tg": self.tg, "fit_host": self.fit_host, "on_testbed": self.on_testbed,
                "host": self.host.to_dict() if self.host is not None else None,
                "units": len(self.units), "running": len(self.running),
                "measurers": {m: sum(1 for u in self.running if u.measurer == m)
                              for m in dict.fromkeys(u.measurer for u in self.running)},
                "skipped": [{"unit": u.label, "reason": u.skip} for u in self.skipped],
                "sharing": [{"unit": u.label, "shares": u.shares} for u in self.running if u.shares],
                "generator_cores": self.generator,
                "fitted": self.fitted()}


def plan_run(suite: Suite, tg: str, *, fit_host: bool = False, host: Optional[HostFacts] = None,
             on_testbed: bool = False, builds: Optional[bool] = None,
             core_rate: Optional[dict[str, Any]] = None, rate_dir: Optional[Path] = None) -> RunPlan:
    """The plan of ``nfvperf run SUITE --tg tg [--fit-host]`` on this host (``host``: its facts,
    read when needed).  With ``fit_host`` the plan's ``suite`` is the fitted suite.  ``builds``:
    the run builds nfvperf's topologies on this host (default: ``--tg tgen`` or ``iperf3``, no
    testbed); only then are the host and the builds judged (a caller that brings its own
    measurers, such as a test, builds what it likes).  ``core_rate``: tgen's per-core self-test
    (:func:`nfvperf.tg.tgen_cores.core_rate`): then the plan says what line rate needs of the
    generator (:func:`generator_need`); ``rate_dir``: where it is cached, measured there when the
    run builds with tgen and no ``core_rate`` is given (:func:`generator_core_rate`)."""
    if tg not in MEASURERS:
        raise ValueError(f"--tg {tg!r}: allowed {', '.join(MEASURERS)}")
    if builds is None:
        builds = tg != "sim" and not on_testbed
    if host is None and (builds or fit_host):
        host = HostFacts.read()
    fit_of: dict[int, Fit] = {}
    if fit_host:
        assert host is not None
        suite, fit_of = fitted_suite(suite, host, tg)
    unfit: dict[str, Fit] = {}
    unbuildable: dict[tuple[str, str], list[str]] = {}
    units = []
    for test, size in test_units(suite):
        spec = test.topology or suite.spec.topology
        fit = fit_of.get(id(test))
        u = UnitPlan(test, size, unit_label(test, size), changes=list(fit.changes) if fit else [],
                     measurer=unit_measurer(test, tg))
        u.skip = measurer_refusal(test, size, u.measurer, spec)
        if u.skip is None and host is not None and (builds or fit_host):
            key = spec_key(spec)
            reasons: list[str] = []
            if fit is not None:          # the spec is the fitted one: what still does not fit
                if fit.problem:
                    reasons.append(f"does not fit this host even fitted: {fit.problem}")
            else:
                if key not in unfit:
                    unfit[key] = fit_topology(spec, host, start_tgen=tg == "tgen")
                why = unfit[key].unfit_reason()
                if why:
                    reasons.append(why)
                elif builds and u.measurer == "tgen":
                    u.shares = unfit[key].sharing_note()
            if builds:
                if (key, u.measurer) not in unbuildable:
                    unbuildable[(key, u.measurer)] = build_problems(spec, u.measurer, host)
                reasons += unbuildable[(key, u.measurer)]
            u.skip = "; ".join(reasons) or None
        units.append(u)
    plan = RunPlan(suite, tg, fit_host, units, host, on_testbed)
    if core_rate is None and rate_dir is not None and builds and tg == "tgen":
        core_rate = generator_core_rate(rate_dir)
    if tg == "tgen" and not on_testbed:
        plan.generator = generator_need(plan, core_rate)
    return plan


#: tgen's per-core self-test, cached next to the results store (like the harness ceiling's file)
CORE_RATE_FILE = "tgen-core-rate.json"


def generator_core_rate(out_dir: Path, binary: Optional[Path] = None, measure: bool = True
                        ) -> Optional[dict[str, Any]]:
    """The cached per-core rate of this host's tgen (``{"fps", "measured_at", ...}``), measured
    now when missing or stale and ``measure`` (root and the binary needed); None when unknown."""
    try:
        if binary is None:
            binary = find_tgen_binary()
        bid = binary_id(Path(binary))
    except Exception:  # noqa: BLE001 - no binary: no rate
        return None
    cache = CeilingCache(Path(out_dir) / CORE_RATE_FILE)
    # (the harness ceiling's key fields: the self-test's "port kind", no speed or MTU, the build)
    key = ceiling_key(socket.gethostname(), "net_null-selftest", 0, 0, bid, 64)
    hit = cache.get(key)
    if hit is not None or not measure or os.geteuid() != 0:
        return dict(hit, cached=True) if hit is not None else None
    try:
        fps = measure_core_rate(Path(binary))
    except Exception as e:  # noqa: BLE001 - a failed self-test must not stop a run
        return {"fps": None, "error": f"{type(e).__name__}: {e}"}
    return dict(cache.put(key, {"fps": fps, "method": "net_null 64 B, one worker, 0.5 s"}),
                cached=False)


def generator_need(plan: RunPlan, core_rate: Optional[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per topology of the running tgen units: the generator cores a line-rate trial at its
    smallest frame needs, what the topology gives and whether the host has them
    (:func:`nfvperf.tg.tgen_cores.line_rate_need`); without a measured per-core rate, why not."""
    fps = (core_rate or {}).get("fps")
    groups: dict[tuple[str, float], dict[str, Any]] = {}
    for u in plan.running:
        if u.measurer != "tgen" or u.size is None:
            continue
        spec = u.test.topology or plan.suite.spec.topology
        speed = float(u.test.traffic.link_speed_bps)
        g = groups.setdefault((spec_key(spec), speed), {"spec": spec, "size": u.size, "units": 0,
                                                        "tx": directions(u.test.traffic, spec.ports)})
        g["size"] = min(g["size"], u.size)
        g["units"] += 1
    out = []
    for (_, speed), g in groups.items():
        spec = g["spec"]
        row: dict[str, Any] = {"kind": spec.kind, "port_kind": spec.port_kind, "link_speed_bps": speed,
                               "frame_size_b": g["size"], "units": g["units"]}
        if not fps:
            why = (core_rate or {}).get("error") or ("tgen's per-core self-test has not run (it runs, "
                                                     "as root, at `nfvperf validate` or `run`)")
            row["text"] = f"generator cores for line rate: unknown ({why})"
            out.append(row)
            continue
        workers = int(spec.tgen_cores or 1) * (2 if spec.tgen_cores and spec.tgen_ht else 1)
        free = None
        if plan.host is not None:
            try:
                roles = _topology(spec, True).plan_cpus(plan.host.cpus).roles
                busy = {c for r, cs in roles.items() if r != "tgen" for c in cs}
                free = len([c for c in plan.host.cpus.allowed if c not in busy])
            except (HostTooSmall, TopologyError):
                free = None
        given = (f"topology.tgen_cores: {spec.tgen_cores}" + (", tgen_ht" if spec.tgen_ht else "")
                 if spec.tgen_cores else "one worker: topology.tgen_cores not set")
        need = line_rate_need(speed, g["size"], g["tx"], float(fps), workers,
                              split=port_kind_class(spec.port_kind).tg_multiqueue, free_cpus=free,
                              field=given)
        row.update(need, per_core_fps=float(fps),
                   measured_at=(core_rate or {}).get("measured_at"))
        out.append(row)
    return out


def fitted_suite(suite: Suite, host: HostFacts, tg: str) -> tuple[Suite, dict[int, Fit]]:
    """A copy of ``suite`` whose topologies (the suite's and every test's) are fitted to
    ``host``, and each of its tests' :class:`~nfvperf.fit.Fit` (by ``id()`` of the test)."""
    by_given: dict[str, Fit] = {}

    def fitted(spec: Any) -> Fit:
        key = spec_key(spec)
        if key not in by_given:
            by_given[key] = fit_topology(spec, host, start_tgen=tg == "tgen")
        return by_given[key]

    default = fitted(suite.spec.topology)
    tests, fit_of = [], {}
    for t in suite.tests:
        fit = fitted(t.topology) if t.topology is not None else default
        if t.topology is not None and fit.spec is not t.topology:
            t = dataclasses.replace(t, topology=fit.spec)
        tests.append(t)
        fit_of[id(t)] = fit
    out = Suite(spec=suite.spec.model_copy(update={"topology": default.spec}), tests=tests,
                source=suite.source, raw=suite.raw)
    return out, fit_of


# ------------------------------------------------------------------------------ as text

def compact_units(units: list[UnitPlan]) -> list[str]:
    """'test 64/128/256 B' per test (its units' sizes together), in suite order."""
    by_test: dict[int, tuple[str, list[str]]] = {}
    for u in units:
        name, sizes = by_test.setdefault(id(u.test), (u.test.name, []))
        if u.size is not None:
            sizes.append(str(u.size))
        elif u.label != u.test.name:
            sizes.append(u.label[len(u.test.name) + 1:])
    return [f"{name} {'/'.join(sizes)}{' B' if sizes and sizes[-1].isdigit() else ''}".rstrip()
            for name, sizes in by_test.values()]


def _wrapped(items: list[str], indent: str, width: int = 110) -> list[str]:
    lines, cur = [], indent
    for i, item in enumerate(items):
        piece = item + (", " if i < len(items) - 1 else "")
        if len(cur) + len(piece) > width and cur.strip():
            lines.append(cur.rstrip())
            cur = indent
        cur += piece
    if cur.strip():
        lines.append(cur.rstrip())
    return lines


def plan_text(plan: RunPlan) -> list[str]:
    """What ``nfvperf validate`` prints after the suite's summary: how many units run here, each
    --fit-host change with its unit count, each skip reason with its units."""
    n, running = len(plan.units), len(plan.running)
    opts = f"--tg {plan.tg}" + (" --fit-host" if plan.fit_host else "")
    head = f"on this host ({opts}): {running} of {n} test unit(s) run, {n - running} skipped"
    if plan.tg == "sim" and not plan.fit_host:
        head += " (the simulated DUT builds nothing here; --fit-host models this host)"
    if n and not running:
        head += "; nothing would run, so `nfvperf run` would fail"
    lines = [head]
    other = [u for u in plan.running if u.measurer != plan.tg]
    if other:
        lines.append(f"  {len(other)} unit(s) run with {other[0].measurer} through the same topologies "
                     f"(--tg {plan.tg} has no {measurer_need(other[0].test.method) or 'call for them'})")
    if plan.fit_host:
        host = plan.host.describe() if plan.host else "this host"
        rows = plan.fitted()
        lines.append(f"  fitted to host ({host}): " + ("nothing to change" if not rows else
                                                     f"{len(rows)} change(s)"))
        lines += [f"    {r['text']} [{len(r['units'])} unit(s)]" for r in rows]
    for g in plan.generator:
        lines.append(f"  generator ({g['kind']} on {g['port_kind']}, {g['units']} unit(s)): {g['text']}")
    by_share: dict[str, list[UnitPlan]] = {}
    for u in plan.running:
        if u.shares:
            by_share.setdefault(u.shares, []).append(u)
    for why, units in by_share.items():
        lines.append(f"  sharing the generator's CPUs ({len(units)} unit(s), results marked †): {why}")
        lines += _wrapped(compact_units(units), "      ")
    by_reason: dict[str, list[UnitPlan]] = {}
    for u in plan.skipped:
        by_reason.setdefault(str(u.skip), []).append(u)
    for reason, units in by_reason.items():
        lines.append(f"  skipped ({len(units)} unit(s)): {reason}")
        lines += _wrapped(compact_units(units), "      ")
    return lines
