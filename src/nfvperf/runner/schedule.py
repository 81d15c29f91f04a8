"""What the run loop runs, in which order: a :class:`Schedule` yields :class:`Build` s (one
topology build each: its spec, its measurer kind, its entry in the run's environment) and, once
a build is up, the :class:`Visit` s that run on it, in order.  The run loop
(:class:`nfvperf.runner.RunLoop`) is the one loop over test units: it builds, runs every visit
(:meth:`~nfvperf.runner.RunLoop.run_visit`), keeps the run's state (status, reason, the running
test) and handles a failed build.  Two policies: :class:`Sequential` (each unit once;
consecutive units on one topology and measurer share a build) and :class:`.rounds.Rounds`
(a study's units round after round, in the orders its seed draws)."""
from __future__ import annotations

import functools
import time
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Optional, Protocol

from nfvperf.config import TestConfig
from nfvperf.fit import fitted_axes
from nfvperf.host.polling_overlap import generator_overlap
from nfvperf.methods import REGISTRY, runs_on_iperf3
from nfvperf.plan import unit_label
from nfvperf.topo import tx_pairs
from nfvperf.topo.spec import TopologySpec
from nfvperf.trial import DutFailure, Measurer, Unsupported
from nfvperf.units import directions

from .groups import Unit, by_measurer
from .recorder import Recorder
from .results import UnitResult, result_dict

if TYPE_CHECKING:
    from . import RunLoop

__all__ = ["Visit", "Build", "Schedule", "Sequential", "UnitVisit", "TopologyInfo"]

#: a build's entry in the run's ``environment.topologies`` (JSON: the topology fills it as it builds)
TopologyInfo = dict[str, object]


class Visit(Protocol):
    """One turn of one test unit on a built topology."""

    #: what the progress bar shows while it runs
    label: str

    def open(self) -> int:
        """The unit's test row id (made now, or before the first visit)."""

    def measure(self, measurer: Measurer) -> None:
        """Run and store it; raises :class:`DutFailure` when the DUT died."""

    def dut_failed(self, e: DutFailure) -> str:
        """Store the DUT failure on the unit; returns the run's reason (the run stops)."""

    def failed(self, e: Exception) -> None:
        """Store the visit's error; the run goes on."""


@dataclass
class Build:
    """One topology build of a schedule: ``visits(measurer, info)`` gives, once it is up and
    ``info`` (its kind and overrides, ``extra``, then its environment) is filled, what runs on it."""

    spec: TopologySpec
    tg: str                               # the measurer kind it is built for
    units: list[Unit]                     # its units (harness ceiling, the rows of a failed build)
    visits: Callable[[Measurer, TopologyInfo], Iterable[Visit]]
    extra: TopologyInfo


class Schedule(Protocol):
    """A scheduling policy over the run loop."""

    def builds(self) -> Iterator[Build]:
        """The builds, in order (a generator: it may read what earlier builds stored)."""

    def close(self, status: str) -> None:
        """After the last build, also after Ctrl-C (``interrupted``) or a DUT failure (``failed``)."""


class Sequential:
    """Each unit once, in the suite's order: one build per run of consecutive units on the
    topology ``spec`` and one measurer (:func:`.groups.by_measurer`)."""

    def __init__(self, loop: RunLoop, spec: TopologySpec, units: list[Unit]):
        self.loop, self.spec, self.units = loop, spec, units

    def builds(self) -> Iterator[Build]:
        loop, spec = self.loop, self.spec
        for tg, units in by_measurer(self.units, loop.plan, loop.tg):
            extra: TopologyInfo = {}
            fitted = [c.text() for t, s in units for c in loop.fit_changes(t, s)]
            if fitted:
                extra["fitted_to_host"] = list(dict.fromkeys(fitted))
            if tg != loop.tg:
                extra["measurer_tg"] = tg
            yield Build(spec, tg, units, functools.partial(self.visits, units), extra)

    def visits(self, units: list[Unit], _measurer: Measurer, info: TopologyInfo) -> Iterator[Visit]:
        # the test rows keep what reports read; the spec itself is run.config.topology + overrides
        row: dict[str, object] = {"kind": self.spec.kind, "ports": self.spec.ports,
                                  "switching_operations": info.get("switching_operations"),
                                  "overrides": info["overrides"]}
        env = info.get("environment")
        overlap = generator_overlap(env if isinstance(env, dict) else None)   # DUT polling on the generator's CPUs
        if overlap is not None:
            row["generator_cpu_overlap"] = overlap
        for test, size in units:
            yield UnitVisit(self.loop, self.spec, row, test, size)

    def close(self, status: str) -> None:
        pass


class UnitVisit:
    """A unit run once (:class:`Sequential`): its row opened, its method run (``repeat`` times)
    and its result stored, or its error."""

    def __init__(self, loop: RunLoop, spec: TopologySpec, topo_row: dict[str, object], test: TestConfig,
                 size: Optional[int]):
        self.loop, self.spec, self.topo_row, self.test, self.size = loop, spec, topo_row, test, size
        self.label = unit_label(test, size)
        self.profile = loop.suite.traffic_profile(test, size)
        self.ndir = directions(test.traffic.model_dump(), spec.ports, tx_pairs(spec))
        self.test_id = 0
        self.t0 = time.monotonic()

    def open(self) -> int:
        loop, test, size = self.loop, self.test, self.size
        row = dict(self.topo_row, directions=self.ndir)
        changes = loop.fit_changes(test, size)
        if changes:
            row["fitted_to_host"] = [c.text() for c in changes]
            axes = fitted_axes(test.study, changes)     # a study axis that ran fitted (pmd_cores 4→2)
            if axes:
                row["fitted_axes"] = axes
        trow = loop.books.open_row(row, test, size)
        self.test_id = trow.id
        self.rec = Recorder(loop.store, trow.id, loop.interrupts, loop.progress, self.label)
        self.t0 = time.monotonic()
        return trow.id

    def measure(self, measurer: Measurer) -> None:
        """The method's run and its stored result (:class:`.results.UnitResult`)."""
        loop, test, size, label, rec = self.loop, self.test, self.size, self.label, self.rec
        if loop.group_tg == "iperf3" and not runs_on_iperf3(test.method):
            raise Unsupported(f"method {test.method} needs --tg tgen or sim "
                              "(--tg iperf3 runs only the tcp method)")
        run_fn = REGISTRY[test.method].run
        params, reused = loop.reuse.params(test, size, self.spec)
        if reused:
            loop.store.update_test(self.test_id, params=params.model_dump(mode="json"))
            loop.progress.log(f"  {label}: using the Throughput measured earlier in this run "
                              f"({reused:,.0f} fps per interface)")
        measurer.set_profile(self.profile)
        loop.configure_unit(measurer, self.spec, test, size)
        reps = max(1, test.repeat)
        datas = []
        for i in range(reps):
            if reps > 1:
                rec.repetition = i + 1
                loop.progress.log(f"  {label}: repetition {i + 1} of {reps}")
            datas.append(result_dict(run_fn(measurer, self.profile, params, rec)))
        rec.repetition = None
        res = UnitResult.of(test.method, datas, self.profile, self.ndir)
        loop.reuse.note(test, size, self.spec, res)
        with loop.interrupts.critical():
            loop.store.add_result(self.test_id, test.method, res.data, value_pps=res.value_pps)
            loop.store.finish_test(self.test_id, "failed" if res.failed else "passed", res.reason)
        if res.failed:
            loop.outcome.failed_tests.append(label)
        loop.progress.log(f"  {label}: {res.text} [{rec.trials} trials, {time.monotonic() - self.t0:.1f} s]")
        loop.progress.unit_done()

    def dut_failed(self, e: DutFailure) -> str:
        self.loop.books.failed(self.test_id, self.label, f"DUT failure: {e}")
        self.loop.progress.log(f"  {self.label}: DUT FAILURE: {e}; stopping the run")
        return f"DUT failure in {self.label}: {e}"

    def failed(self, e: Exception) -> None:
        loop = self.loop
        tb = traceback.format_exc(limit=8)
        loop.books.failed(self.test_id, self.label, f"{type(e).__name__}: {e}")
        with (loop.run_dir / "errors.log").open("a") as fh:
            fh.write(f"== {self.label}\n{tb}\n")
        loop.progress.log(f"  {self.label}: FAILED: {type(e).__name__}: {e}")
        loop.progress.unit_done()
