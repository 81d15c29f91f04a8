"""Interleaved rounds: a study's units measured round after round, in random order (issue 16).

On a host whose CPUs slow down for seconds at a time, two configurations measured minutes apart
meet two different hosts.  A study with ``rounds: N`` therefore measures every unit once per
round, in a fresh order drawn from the study's seed (stored), N times; each unit's figure is then
divided by the baseline's figure *of the same round*, and the median of those paired ratios is
reported with a 95 % exact rank interval (:mod:`nfvperf.stats`).

How units switch inside a round:

- units on one topology (they differ in traffic: flows, frame size, VLAN/VXLAN, rate) share one
  build and switch by traffic alone;
- units whose topologies differ only in settings the DUT changes while it runs (the adapter's
  ``in_place`` fields: OVS rule sets, rx queues, EMC/SMC, ...) share one build too, and the DUT is
  reconfigured between them (``measurer.reconfigure_topology``);
- anything else (DUT kind, port kind, VM vs container) can only be interleaved by restarting:
  each round builds every topology once, in random order, and the report says which units
  switched that way;
- on the simulated DUT every unit switches in place (one simulated host for the whole study).

Every round's figures are stored as they are measured (a result of kind ``round`` with its round
number and position); a round whose trial fails is stored with its error and counted, never
dropped.  The unit's summary (kind ``rounds``) is written when the rounds end, also after Ctrl-C
or a DUT failure, from the rounds measured until then.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from nfvperf.methods.capacity import METRIC_TITLES, WARM_FOR_S, RoundSettings, measure_round
from nfvperf.stats import median_interval, ratio_interval
from nfvperf.trial import DutFailure
from nfvperf.topo import tx_pairs
from nfvperf.topo.inplace import in_place_difference, restart_fields
from nfvperf.units import directions
from nfvperf.config import topology_overrides
from nfvperf.host.polling_overlap import generator_overlap


@dataclass
class RoundUnit:
    test: Any
    size: Optional[int]
    label: str
    spec: Any                               # its topology spec
    test_id: int = 0
    rec: Any = None
    profile: Any = None                     # its TrafficProfile and directions (set with its row)
    ndir: int = 1
    rounds: list[dict[str, Any]] = field(default_factory=list)
    last_end: Optional[float] = None        # monotonic time its traffic last stopped
    topology_row: dict[str, Any] = field(default_factory=dict)   # its test row's topology
    #: DUT/VNF polling threads on the generator's CPUs in a build of its own spec or after a switch
    #: to it (report.polling marks the figure); None: unknown (neither said, or nothing stored)
    overlap: Optional[dict[str, Any]] = None

    @property
    def baseline(self) -> bool:
        return bool((self.test.study or {}).get("baseline"))


def round_orders(n_units: int, rounds: int, seed: int) -> list[list[int]]:
    """Per round, the unit indices in that round's order: a fresh permutation from ``seed``."""
    out = []
    for r in range(1, rounds + 1):
        order = list(range(n_units))
        random.Random(f"nfvperf-rounds:{seed}:{r}").shuffle(order)
        out.append(order)
    return out


def _in_place_difference(a: Any, b: Any) -> Optional[dict[str, Any]]:
    """{field: b's value} when the DUT of ``a`` can switch to ``b`` in place, None if it cannot."""
    if a == b:
        return {}
    return in_place_difference(a, b)


def restart_reason(a: Any, b: Any) -> str:
    fields = restart_fields(a, b)
    return ", ".join(fields) or "the topology differs"


def build_groups(units: list[RoundUnit], sim: bool) -> list[list[int]]:
    """Indices of the units that share one build (the first unit's spec is the group's)."""
    if sim:
        return [list(range(len(units)))]
    groups: list[list[int]] = []
    for i, u in enumerate(units):
        for g in groups:
            if _in_place_difference(units[g[0]].spec, u.spec) is not None:
                g.append(i)
                break
        else:
            groups.append([i])
    return groups


def baseline_of(units: list[RoundUnit], u: RoundUnit) -> Optional[RoundUnit]:
    """The study's baseline unit at ``u``'s frame size (the only baseline when frame size is an axis)."""
    bases = [b for b in units if b.baseline]
    same = [b for b in bases if b.size == u.size]
    found = same or bases
    return found[0] if found else None


def figures_of(u: RoundUnit, metric: str, n: int) -> list[Optional[float]]:
    """The unit's figure of ``metric`` in rounds 1..n (None: the round failed or did not run)."""
    out: list[Optional[float]] = [None] * n
    for rd in u.rounds:
        r = int(rd.get("round") or 0)
        if 1 <= r <= n:
            out[r - 1] = ((rd.get("figures") or {}).get(metric) or {}).get("value_pps")
    return out


def figure_notes(metric: str, mm: dict[str, Any], measured: int) -> list[str]:
    """What qualifies a unit's figure over its rounds, said once (not once per round)."""
    out = []
    name = metric.upper()
    if mm["failed_rounds"]:
        out.append(f"{name}: {mm['failed_rounds']} of {measured} rounds gave no figure (their errors are "
                   "stored with the rounds); they are left out of the median and of every ratio")
    if mm["generator_bound_rounds"]:
        out.append(f"{name}: in {mm['generator_bound_rounds']} of {measured} rounds the DUT lost no frame "
                   "at the overload: the figure there is what the generator offered, a lower bound of "
                   "the DUT's")
    if mm["line_bound_rounds"]:
        out.append(f"{name}: in {mm['line_bound_rounds']} of {measured} rounds the search reached the max "
                   "load (line rate): a lower bound of the DUT's")
    return out


class RoundsRun:
    """One interleaved study inside a run.  ``loop`` is the runner's RunLoop: its store, run,
    progress, interrupts, measurer factory and harness ceiling, and the three things it lends
    (``recorder``, ``configure_unit``, ``label``), so this module never imports the runner."""

    def __init__(self, loop: Any, pairs: list[tuple[Any, Optional[int]]]):
        self.loop = loop
        suite = loop.suite
        self.units = [RoundUnit(t, s, loop.label(t, s), t.topology or suite.spec.topology) for t, s in pairs]
        st = pairs[0][0].study
        self.name = st["name"]
        self.rounds_cfg: dict[str, Any] = dict(st["rounds"])
        self.settings = RoundSettings.from_study(self.rounds_cfg)
        self.n = int(self.rounds_cfg["rounds"])
        self.seed = int(self.rounds_cfg["seed"])
        self.groups = build_groups(self.units, loop.tg == "sim")
        self.orders = round_orders(len(self.units), self.n, self.seed)
        #: id(measurer) -> the spec its topology is in now, for measurers that reconfigure in place
        self.live_spec: dict[int, Any] = {}
        self.info: dict[str, Any] = {"study": self.name, "rounds": self.n, "seed": self.seed,
                                     "metrics": self.settings.metrics, "round_trial_s": self.settings.trial_s,
                                     "overload_pct": self.settings.overload_pct,
                                     "units": [u.label for u in self.units], "orders": [],
                                     "switching": self.switching()}
        self.current: Optional[int] = None

    # ------------------------------------------------------------------ plan
    def switching(self) -> dict[str, Any]:
        """How units switch inside a round (stored with the run, printed by the report)."""
        if self.loop.tg == "sim":
            return {"how": "in place (simulated DUT)", "restart_units": []}
        if len(self.groups) == 1:
            g = self.groups[0]
            inplace = any(_in_place_difference(self.units[g[0]].spec, self.units[i].spec) for i in g)
            return {"how": "in place (the DUT reconfigured while running)" if inplace
                    else "by traffic alone (one topology)", "restart_units": []}
        first = self.units[self.groups[0][0]].spec
        restart = [self.units[i].label for g in self.groups[1:] for i in g]
        reasons = sorted({restart_reason(first, self.units[g[0]].spec) for g in self.groups[1:]})
        return {"how": "by restarting the topology between units", "builds_per_round": len(self.groups),
                "restart_units": restart, "restart_reason": "; ".join(reasons)}

    # ------------------------------------------------------------------ run
    def run(self) -> None:
        loop = self.loop
        loop.env.setdefault("rounds", []).append(self.info)
        loop.progress.log(f"study {self.name}: {len(self.units)} units in {self.n} interleaved rounds "
                          f"(seed {self.seed}; {', '.join(self.settings.metrics)}; units switch "
                          f"{self.info['switching']['how']})")
        self.open_rows()
        for g in self.groups:
            loop.harness_ceiling(self.units[g[0]].spec, [(self.units[i].test, self.units[i].size) for i in g])
        status = "completed"
        try:
            if len(self.groups) == 1:
                with self.build(self.groups[0]) as measurer:
                    for r in range(1, self.n + 1):
                        self.run_round(r, measurer, self.orders[r - 1])
            else:
                for r in range(1, self.n + 1):
                    order = self.orders[r - 1]
                    gorder = list(range(len(self.groups)))
                    random.Random(f"nfvperf-rounds:{self.seed}:{r}:builds").shuffle(gorder)
                    for gi in gorder:
                        members = [i for i in order if i in self.groups[gi]]
                        with self.build(self.groups[gi]) as measurer:
                            for i in members:          # a fresh build (the DUT restarted): warm up again
                                self.units[i].last_end = None
                            self.run_round(r, measurer, members)
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        except DutFailure as e:
            status = "failed"
            loop.status, loop.reason = "failed", f"DUT failure in study {self.name}: {e}"
            loop.progress.log(f"  study {self.name}: DUT FAILURE: {e}; stopping the run")
        finally:
            self.close_rows(status)

    def build(self, group: list[int]) -> Any:
        """The measurer context of one build (the runner's topology life cycle)."""
        loop = self.loop
        spec = self.units[group[0]].spec
        info: dict[str, Any] = {"kind": spec.kind, "overrides": topology_overrides(spec, loop.suite.spec.topology),
                                "rounds_study": self.name}
        loop.env["topologies"].append(info)
        return _Build(loop, spec, info, self.live_spec, on_built=lambda: self.note_overlap(group, spec, info))

    def note_overlap(self, group: list[int], spec: Any, info: dict[str, Any]) -> None:
        """After a build: whether its DUT polling threads ran on the generator's CPUs
        (:func:`generator_overlap` of its environment), for the units of ``group`` built as their
        own spec.  A unit switched to in place gets its own from the switch (:meth:`measure`:
        the topology's ``reconfigure`` says where the DUT polls after it); a switch that cannot
        say leaves it unknown.  One build or switch with the overlap marks the unit."""
        fact = generator_overlap(info.get("environment"))
        if fact is None:
            return
        for i in group:
            u = self.units[i]
            if u.spec == spec:
                self.note_unit_overlap(u, fact)

    @staticmethod
    def note_unit_overlap(u: RoundUnit, fact: Optional[dict[str, Any]]) -> None:
        """A unit's fact from one build or switch: a shared CPU once seen stays."""
        if fact is None:
            return
        if u.overlap is None or (fact.get("cpus") and not u.overlap.get("cpus")):
            u.overlap = fact

    def open_rows(self) -> None:
        loop = self.loop
        for u in self.units:
            u.profile = loop.suite.traffic_profile(u.test, u.size)
            u.ndir = directions(u.test.traffic, u.spec.ports, tx_pairs(u.spec))
            u.topology_row = {"kind": u.spec.kind, "ports": u.spec.ports, "directions": u.ndir}
            with loop.interrupts.critical():
                row = loop.store.start_test(loop.run.id, name=u.test.name, method=u.test.method,
                                            frame_size_b=u.size, params=u.test.params_dict(u.size),
                                            traffic=u.profile, topology=u.topology_row,
                                            study=u.test.study)
            u.test_id = row.id
            u.rec = loop.recorder(row.id, u.label)

    def run_round(self, r: int, measurer: Any, members: list[int]) -> None:
        loop = self.loop
        if len(self.info["orders"]) < r:
            self.info["orders"].append([])
        for i in members:
            if loop.status != "completed":
                return
            pos = len(self.info["orders"][r - 1]) + 1
            self.info["orders"][r - 1].append(self.units[i].label)
            self.measure(r, pos, i, measurer)
        if len(self.info["orders"][r - 1]) == len(self.units):
            loop.progress.log(f"  round {r}/{self.n}: {self.round_text(r)}")
            with loop.interrupts.critical():
                loop.store.update_run(loop.run.id, environment=loop.env)

    def measure(self, r: int, pos: int, i: int, measurer: Any) -> None:
        loop = self.loop
        u = self.units[i]
        self.current = i
        loop.current_test = u.test_id
        loop.progress.unit(f"round {r}/{self.n}: {u.label}")
        reconf = getattr(measurer, "reconfigure_topology", None)
        did: Any = None
        if reconf is not None and self.live_spec.get(id(measurer)) not in (None, u.spec):
            did = reconf(u.spec)
            if isinstance(did, dict):
                self.note_unit_overlap(u, did.get("generator_cpu_overlap"))
        if reconf is not None:
            self.live_spec[id(measurer)] = u.spec
        measurer.set_profile(u.profile)
        loop.configure_unit(measurer, u.spec, u.test, u.size)
        warm = u.last_end is None or time.monotonic() - u.last_end > WARM_FOR_S
        ctx = {"round": r, "position": pos}

        def on_trial(tr: Any, c: dict[str, Any]) -> None:
            u.rec.trial(u.test.name, tr, **c)
        try:
            data = measure_round(measurer, u.profile, u.test.params_for(u.size), self.settings, u.ndir,
                                 on_trial, ctx, warm)
        except (KeyboardInterrupt, DutFailure):
            raise
        except Exception as e:  # noqa: BLE001 - a failed round is stored and counted, the rounds go on
            data = {"figures": {}, "error": f"{type(e).__name__}: {e}"}
            loop.progress.log(f"  round {r}: {u.label}: FAILED: {data['error']}")
        u.last_end = time.monotonic()
        data.update(round=r, position=pos)
        if did:
            data["reconfigured"] = did
        u.rounds.append(data)
        with loop.interrupts.critical():
            loop.store.add_result(u.test_id, "round", data)
        self.current = None

    def round_text(self, r: int) -> str:
        metric = self.settings.metrics[0]
        parts = []
        for u in self.units:
            rd = next((x for x in u.rounds if x.get("round") == r), None)
            v = ((rd or {}).get("figures") or {}).get(metric, {}).get("value_pps")
            parts.append(f"{u.label} {metric} {v / 1e6:.3f} M" if v else f"{u.label} {metric} —")
        return "; ".join(parts) + " fps/if"

    # ------------------------------------------------------------------ the books
    def summary(self, u: RoundUnit) -> dict[str, Any]:
        out: dict[str, Any] = {"study": self.name, "rounds": self.n, "rounds_measured": len(u.rounds),
                               "seed": self.seed, "settings": dict(self.rounds_cfg),
                               "switching": self.info["switching"]["how"],
                               "positions": [rd.get("position") for rd in u.rounds], "metrics": {},
                               "ratios": {}}
        base = baseline_of(self.units, u)
        if base is not None:
            out["baseline_unit"] = base.label
        for m in self.settings.metrics:
            vals = figures_of(u, m, self.n)
            figs = [((rd.get("figures") or {}).get(m) or {}) for rd in u.rounds]
            iv = median_interval([v for v in vals if v is not None])
            out["metrics"][m] = {
                "title": METRIC_TITLES[m], "values_pps": vals,
                "median_pps": iv.median if iv else None,
                "interval": iv.to_dict() if iv is not None else None,
                "failed_rounds": sum(f.get("value_pps") is None for f in figs),
                "generator_bound_rounds": sum(f.get("bound") == "generator" for f in figs),
                "line_bound_rounds": sum(f.get("bound") == "line" for f in figs)}
            out.setdefault("notes", []).extend(figure_notes(m, out["metrics"][m], len(u.rounds)))
            if base is not None and base is not u:
                ri = ratio_interval(vals, figures_of(base, m, self.n))
                out["ratios"][m] = ri.to_dict() if ri is not None else None
        return out

    def close_rows(self, status: str) -> None:
        loop = self.loop
        for u in self.units:
            data = self.summary(u)
            metrics = data["metrics"]
            measured = any(mm.get("median_pps") for mm in metrics.values())
            if status == "completed":
                st = "passed" if measured else "failed"
                reason = None if measured else "no round gave a figure (see the rounds' errors)"
            else:
                st = status
                reason = (f"{status} after {len(u.rounds)} of {self.n} rounds"
                          if status == "interrupted" else loop.reason)
            with loop.interrupts.critical():
                if u.overlap is not None:       # the rows were opened before any build
                    loop.store.update_test_topology(u.test_id, dict(u.topology_row, generator_cpu_overlap=u.overlap))
                loop.store.add_result(u.test_id, "rounds", data)
                loop.store.finish_test(u.test_id, st, reason)
            if st == "failed":
                loop.outcome.failed_tests.append(u.label)
            loop.progress.unit_done()
        loop.current_test = None
        with loop.interrupts.critical():
            loop.store.update_run(loop.run.id, environment=loop.env)


class _Build:
    """``with``: the runner's measurer for one topology build, remembering the spec it was built for."""

    def __init__(self, loop: Any, spec: Any, info: dict[str, Any], live_spec: dict[int, Any],
                 on_built: Any = None):
        self.loop, self.spec, self.info, self.live_spec = loop, spec, info, live_spec
        self.on_built = on_built            # called once the topology's environment is recorded
        self.cm: Any = None
        self.measurer: Any = None

    def __enter__(self) -> Any:
        loop = self.loop
        self.cm = loop.factory(loop.suite, loop.tg, loop.run.tag, loop.run_dir, self.info, self.spec)
        m = self.cm.__enter__()
        loop.record_measurer(self.info, m)
        if self.on_built is not None:
            self.on_built()
        if getattr(m, "reconfigure_topology", None) is not None:
            self.live_spec[id(m)] = self.spec
        self.measurer = m
        return m

    def __exit__(self, *exc: Any) -> Any:
        self.live_spec.pop(id(self.measurer), None)
        return self.cm.__exit__(*exc)
