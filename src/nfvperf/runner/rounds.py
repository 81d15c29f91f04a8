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
from typing import TYPE_CHECKING, Any, Iterator, Optional

from nfvperf.config import TestConfig
from nfvperf.host.polling_overlap import generator_overlap
from nfvperf.methods.capacity import METRIC_TITLES, WARM_FOR_S, RoundSettings, measure_round
from nfvperf.plan import unit_label
from nfvperf.search.validity import TrialContext
from nfvperf.stats import median_interval, ratio_interval
from nfvperf.topo import tx_pairs
from nfvperf.topo.inplace import in_place_difference, restart_fields
from nfvperf.topo.spec import TopologySpec
from nfvperf.trial import DutFailure, Measurer, TrafficProfile, TrialResult
from nfvperf.units import directions

from .groups import Unit
from .recorder import Recorder
from .schedule import Build, TopologyInfo, Visit

if TYPE_CHECKING:
    from . import RunLoop

#: a round's stored figures (JSON)
RoundData = dict[str, Any]


@dataclass
class RoundUnit:
    test: TestConfig
    size: Optional[int]
    label: str
    spec: TopologySpec
    test_id: int = 0
    rec: Optional[Recorder] = None
    profile: TrafficProfile = field(default_factory=TrafficProfile)   # set with its row, as ndir
    ndir: int = 1
    rounds: list[RoundData] = field(default_factory=list)
    last_end: Optional[float] = None        # monotonic time its traffic last stopped
    topology_row: dict[str, object] = field(default_factory=dict)   # its test row's topology
    #: DUT/VNF polling threads on the generator's CPUs in a build of its own spec or after a switch
    #: to it (report.polling marks the figure); None: unknown (neither said, or nothing stored)
    overlap: Optional[dict[str, object]] = None

    @property
    def baseline(self) -> bool:
        return bool((self.test.study or {}).get("baseline"))

    def note_overlap(self, fact: object) -> None:
        """A fact from one build or switch: a shared CPU once seen stays."""
        if not isinstance(fact, dict):
            return
        if self.overlap is None or (fact.get("cpus") and not self.overlap.get("cpus")):
            self.overlap = fact


def round_orders(n_units: int, rounds: int, seed: int) -> list[list[int]]:
    """Per round, the unit indices in that round's order: a fresh permutation from ``seed``."""
    out = []
    for r in range(1, rounds + 1):
        order = list(range(n_units))
        random.Random(f"nfvperf-rounds:{seed}:{r}").shuffle(order)
        out.append(order)
    return out


def build_groups(units: list[RoundUnit], sim: bool) -> list[list[int]]:
    """Indices of the units that share one build (the first unit's spec is the group's)."""
    if sim:
        return [list(range(len(units)))]
    groups: list[list[int]] = []
    for i, u in enumerate(units):
        for g in groups:
            if in_place_difference(units[g[0]].spec, u.spec) is not None:
                g.append(i)
                break
        else:
            groups.append([i])
    return groups


def baseline_of(units: list[RoundUnit], u: RoundUnit) -> Optional[RoundUnit]:
    """The study's baseline unit at ``u``'s frame size (the only baseline when frame size is an axis)."""
    bases = [b for b in units if b.baseline]
    return next(iter([b for b in bases if b.size == u.size] or bases), None)


def figures_of(u: RoundUnit, metric: str, n: int) -> list[Optional[float]]:
    """The unit's figure of ``metric`` in rounds 1..n (None: the round failed or did not run)."""
    out: list[Optional[float]] = [None] * n
    for rd in u.rounds:
        r = int(rd.get("round") or 0)
        if 1 <= r <= n:
            out[r - 1] = ((rd.get("figures") or {}).get(metric) or {}).get("value_pps")
    return out


def figure_notes(metric: str, mm: RoundData, measured: int) -> list[str]:
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


class Rounds:
    """The schedule of one interleaved study inside a run (:class:`.schedule.Schedule`): every
    round, each build (in the seed's order when there are several) with its units' visits in
    the round's order; the rows are opened before the first build and closed at the end."""

    def __init__(self, loop: RunLoop, pairs: list[Unit]):
        self.loop = loop
        suite = loop.suite
        self.units = [RoundUnit(t, s, unit_label(t, s), t.topology or suite.spec.topology) for t, s in pairs]
        st = pairs[0][0].study or {}
        self.name = str(st["name"])
        self.rounds_cfg: dict[str, Any] = dict(st["rounds"])
        self.settings = RoundSettings.from_study(self.rounds_cfg)
        self.n = int(self.rounds_cfg["rounds"])
        self.seed = int(self.rounds_cfg["seed"])
        self.groups = build_groups(self.units, loop.tg == "sim")
        self.orders = round_orders(len(self.units), self.n, self.seed)
        self.info: dict[str, Any] = {"study": self.name, "rounds": self.n, "seed": self.seed,
                                     "metrics": self.settings.metrics, "round_trial_s": self.settings.trial_s,
                                     "overload_pct": self.settings.overload_pct,
                                     "units": [u.label for u in self.units], "orders": [],
                                     "switching": self.switching()}

    # ------------------------------------------------------------------ plan
    def switching(self) -> dict[str, object]:
        """How units switch inside a round (stored with the run, printed by the report)."""
        if self.loop.tg == "sim":
            return {"how": "in place (simulated DUT)", "restart_units": []}
        if len(self.groups) == 1:
            g = self.groups[0]
            inplace = any(in_place_difference(self.units[g[0]].spec, self.units[i].spec) for i in g)
            return {"how": "in place (the DUT reconfigured while running)" if inplace
                    else "by traffic alone (one topology)", "restart_units": []}
        first = self.units[self.groups[0][0]].spec
        restart = [self.units[i].label for g in self.groups[1:] for i in g]
        reasons = sorted({", ".join(restart_fields(first, self.units[g[0]].spec)) or "the topology differs"
                          for g in self.groups[1:]})
        return {"how": "by restarting the topology between units", "builds_per_round": len(self.groups),
                "restart_units": restart, "restart_reason": "; ".join(reasons)}

    # ------------------------------------------------------------------ the schedule
    def builds(self) -> Iterator[Build]:
        loop = self.loop
        loop.env.setdefault("rounds", []).append(self.info)
        loop.progress.log(f"study {self.name}: {len(self.units)} units in {self.n} interleaved rounds "
                          f"(seed {self.seed}; {', '.join(self.settings.metrics)}; units switch "
                          f"{self.info['switching']['how']})")
        self.open_rows()
        if len(self.groups) == 1:
            yield self.build(self.groups[0], list(range(1, self.n + 1)))
            return
        for r in range(1, self.n + 1):
            gorder = list(range(len(self.groups)))
            random.Random(f"nfvperf-rounds:{self.seed}:{r}:builds").shuffle(gorder)
            for gi in gorder:
                yield self.build(self.groups[gi], [r])

    def build(self, group: list[int], rounds: list[int]) -> Build:
        """One build of ``group``'s first spec, for ``rounds``."""
        spec = self.units[group[0]].spec
        return Build(spec, self.loop.tg, [(self.units[i].test, self.units[i].size) for i in group],
                     lambda m, info: self.visits(group, rounds, spec, m, info), {"rounds_study": self.name})

    def visits(self, group: list[int], rounds: list[int], spec: TopologySpec, measurer: Measurer,
               info: TopologyInfo) -> Iterator[Visit]:
        """The visits on one build: its units in each round's order.  A fresh build (the DUT
        started): its units warm up again."""
        self.note_overlap(group, spec, info)
        live = [spec]                       # the spec the DUT is in now (switched in place)
        for i in group:
            self.units[i].last_end = None
        for r in rounds:
            if len(self.info["orders"]) < r:
                self.info["orders"].append([])
            for i in [i for i in self.orders[r - 1] if i in group]:
                pos = len(self.info["orders"][r - 1]) + 1
                self.info["orders"][r - 1].append(self.units[i].label)
                yield RoundVisit(self, r, pos, self.units[i], live)

    def round_done(self, r: int) -> None:
        """After each visit: a round whose every unit was visited is logged and saved."""
        loop = self.loop
        if len(self.info["orders"][r - 1]) == len(self.units):
            loop.progress.log(f"  round {r}/{self.n}: {self.round_text(r)}")
            loop.save_env()

    def note_overlap(self, group: list[int], spec: TopologySpec, info: TopologyInfo) -> None:
        """After a build: whether its DUT polling threads ran on the generator's CPUs
        (:func:`generator_overlap` of its environment), for the units of ``group`` built as their
        own spec.  A unit switched to in place gets its own from the switch (:meth:`RoundVisit.measure`:
        the topology's ``reconfigure`` says where the DUT polls after it); a switch that cannot
        say leaves it unknown.  One build or switch with the overlap marks the unit."""
        env = info.get("environment")
        fact = generator_overlap(env if isinstance(env, dict) else None)
        for i in group:
            if self.units[i].spec == spec:
                self.units[i].note_overlap(fact)

    def open_rows(self) -> None:
        loop = self.loop
        for u in self.units:
            u.profile = loop.suite.traffic_profile(u.test, u.size)
            u.ndir = directions(u.test.traffic.model_dump(), u.spec.ports, tx_pairs(u.spec))
            u.topology_row = {"kind": u.spec.kind, "ports": u.spec.ports, "directions": u.ndir}
            with loop.interrupts.critical():
                row = loop.books.open_row(u.topology_row, u.test, u.size)
            u.test_id = row.id
            u.rec = Recorder(loop.store, row.id, loop.interrupts, loop.progress, u.label)

    def round_text(self, r: int) -> str:
        metric = self.settings.metrics[0]
        parts = []
        for u in self.units:
            rd = next((x for x in u.rounds if x.get("round") == r), None)
            v = ((rd or {}).get("figures") or {}).get(metric, {}).get("value_pps")
            parts.append(f"{u.label} {metric} {v / 1e6:.3f} M" if v else f"{u.label} {metric} —")
        return "; ".join(parts) + " fps/if"

    # ------------------------------------------------------------------ the books
    def summary(self, u: RoundUnit) -> RoundData:
        out: RoundData = {"study": self.name, "rounds": self.n, "rounds_measured": len(u.rounds),
                          "seed": self.seed, "settings": dict(self.rounds_cfg),
                          "switching": self.info["switching"]["how"],
                          "positions": [rd.get("position") for rd in u.rounds], "metrics": {}, "ratios": {}}
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

    def close(self, status: str) -> None:
        """The units' summaries (kind ``rounds``) and final status."""
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
                    loop.store.update_test(u.test_id, topology=dict(u.topology_row, generator_cpu_overlap=u.overlap))
                loop.store.add_result(u.test_id, "rounds", data)
                loop.store.finish_test(u.test_id, st, reason)
            if st == "failed":
                loop.outcome.failed_tests.append(u.label)
            loop.progress.unit_done()
        loop.current_test = None
        loop.save_env()


class RoundVisit:
    """One unit in one round (at ``pos`` in the round's order): the DUT switched to its spec in
    place if it can, a warm-up after a pause, every metric, one ``round`` result stored."""

    def __init__(self, rounds: Rounds, r: int, pos: int, u: RoundUnit, live: list[TopologySpec]):
        self.rounds, self.r, self.pos, self.u, self.live = rounds, r, pos, u, live
        self.label = f"round {r}/{rounds.n}: {u.label}"
        self.did: Optional[dict[str, Any]] = None      # the in-place switch, if one ran

    def open(self) -> int:
        return self.u.test_id

    def measure(self, measurer: Measurer) -> None:
        u, loop = self.u, self.rounds.loop
        reconf = measurer.reconfigure_topology
        if reconf is not None and self.live[0] != u.spec:
            did = reconf(u.spec)
            self.live[0] = u.spec
            if isinstance(did, dict):
                self.did = did
                u.note_overlap(did.get("generator_cpu_overlap"))
        measurer.set_profile(u.profile)
        loop.configure_unit(measurer, u.spec, u.test, u.size)
        warm = u.last_end is None or time.monotonic() - u.last_end > WARM_FOR_S
        rec = u.rec
        assert rec is not None, "the rows are opened before the first build"

        def on_trial(tr: TrialResult, c: TrialContext) -> None:
            rec.trial(u.test.name, tr, **c)
        self.store(measure_round(measurer, u.profile, u.test.params_for(u.size), self.rounds.settings, u.ndir,
                                 on_trial, {"round": self.r, "position": self.pos}, warm))

    def store(self, data: RoundData) -> None:
        u, loop = self.u, self.rounds.loop
        u.last_end = time.monotonic()
        data.update(round=self.r, position=self.pos)
        if self.did:
            data["reconfigured"] = self.did
        u.rounds.append(data)
        with loop.interrupts.critical():
            loop.store.add_result(u.test_id, "round", data)
        self.rounds.round_done(self.r)

    def dut_failed(self, e: DutFailure) -> str:
        self.rounds.loop.progress.log(f"  study {self.rounds.name}: DUT FAILURE: {e}; stopping the run")
        return f"DUT failure in study {self.rounds.name}: {e}"

    def failed(self, e: Exception) -> None:
        """A failed round is stored and counted, the rounds go on."""
        data: RoundData = {"figures": {}, "error": f"{type(e).__name__}: {e}"}
        self.rounds.loop.progress.log(f"  round {self.r}: {self.u.label}: FAILED: {data['error']}")
        self.store(data)
