"""Run a validated suite: run record + run dir, a measurer, tests x frame sizes, every trial stored.

The runner owns the life cycle around the methods:

* a run row (status ``running``) and a run directory tagged ``nfv<uid>`` exist before the first
  trial; every trial is committed as it ends (``Recorder.trial``), so Ctrl-C or a crash keeps it;
* the measurer comes from :func:`measurer_for` (:mod:`nfvperf.topo.measurers`: ``sim``, or
  ``tgen`` / ``iperf3`` through a built topology; ``iperf3`` runs only the ``tcp`` method),
  entered as a context manager so the topology is released on every exit path;
* what runs is the plan's (:func:`nfvperf.plan.plan_run`, the decision ``nfvperf validate``
  prints too): a unit the plan skips (its topology does not fit this host or cannot be built
  here, or the measurer cannot run its method) is stored ``skipped`` with the reason before
  anything is built, and with ``fit_host`` the suite's topologies are the fitted ones;
* an error in one test marks that test ``failed`` with the reason and the run goes on; a
  topology group whose build fails its preflight is ``skipped`` with the reason, one whose
  build fails otherwise has its units ``failed``, and the run goes on with the next group;
  a :class:`DutFailure` ends the run (``failed``); a run where nothing ran is ``failed``;
* Ctrl-C (SIGINT) or SIGTERM marks the running test and the run ``interrupted``; the CLI exits 130.

The runner only runs; its collaborators are its modules: :mod:`.books` (run row and dir, plan,
outcome), :mod:`.interrupts`, :mod:`.progress`, :mod:`.recorder`, :mod:`.groups`, :mod:`.results`
(repetitions, throughput reuse), :mod:`.ceilings`, :mod:`.testbed`, :mod:`.factory`; host facts:
:mod:`nfvperf.host.facts`.
"""
from __future__ import annotations

import contextlib
import functools
import sys
import traceback
from pathlib import Path
from typing import Any, Callable, Optional

from nfvperf.config import Suite, TestConfig, topology_overrides
from nfvperf.fit import FitChange
from nfvperf.host.facts import host_environment, record_cpu_steadiness
from nfvperf.host.preflight import PreflightError
from nfvperf.host.run import RunContext
from nfvperf.plan import RunPlan, plan_run, test_units
from nfvperf.report.extract import headline_of_run
from nfvperf.store import Store
from nfvperf.testbed.spec import TestbedSpec
from nfvperf.topo.base import HostTooSmall
from nfvperf.testbed.hosts import TestbedHosts
from nfvperf.topo.measurers import configure_unit
from nfvperf.topo.spec import TopologySpec
from nfvperf.trial import DutFailure, Measurer

from .books import (EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK, EXIT_TEST_FAILED, RunOutcome, TestbedUnusable,
                    UnitBooks, closing_status, create_run, record_measurer, record_plan)
from .ceilings import CeilingOptions, HarnessCeilings
from .factory import MeasurerFactory, measurer_for
from .groups import Group, Unit, topology_groups
from .interrupts import Interrupts, only_owner
from .progress import Progress, progress_logs
from .results import ThroughputReuse
from .rounds import Rounds
from .schedule import Build, Schedule, Sequential, TopologyInfo, Visit
from .testbed import holding, open_testbed

__all__ = ["execute", "RunLoop", "RunOutcome", "TestbedUnusable", "CeilingOptions", "MeasurerFactory",
           "measurer_for", "test_units", "topology_groups", "progress_logs", "EXIT_OK", "EXIT_TEST_FAILED",
           "EXIT_BAD_INPUT", "EXIT_INTERRUPTED"]


class RunLoop:
    """One run while it executes: topology groups, test units, the books (see :func:`execute`)."""

    def __init__(self, suite: Suite, store: Store, tg: str, run: Any, run_dir: Path, env: dict[str, Any],
                 progress: Progress, interrupts: Interrupts, factory: MeasurerFactory):
        self.suite, self.store, self.tg, self.run, self.run_dir, self.env = suite, store, tg, run, run_dir, env
        self.progress, self.interrupts, self.factory = progress, interrupts, factory
        self.outcome = RunOutcome(run_id=run.id, uid=run.uid, status="running", run_dir=run_dir)
        self.status = "completed"
        self.reason: Optional[str] = None
        self.current_test: Optional[int] = None
        self.reuse = ThroughputReuse()     # zero-loss throughput found so far, for prerequisite reuse
        self.ceilings = HarnessCeilings(CeilingOptions(), suite, run.tag, run_dir, env, progress, self.save_env)
        self.hosts: Optional[TestbedHosts] = None     # a testbed run's hosts
        self.plan: Optional[RunPlan] = None     # what runs and what is skipped (nfvperf.plan)
        self.books = UnitBooks(store, run, suite, interrupts, progress, self.outcome)
        self.group_tg = tg             # the measurer of the topology group being run (by_measurer)

    # ------------------------------------------------------------------ lent to the visits
    def configure_unit(self, measurer: Measurer, spec: TopologySpec, test: TestConfig, size: Optional[int]) -> None:
        """A simulated DUT takes the unit's configuration: the suite's ``sim:`` with the test's
        on top, the unit's topology spec and method params (a real DUT was built for it)."""
        configure_unit(measurer, test.sim or self.suite.spec.sim, spec, test.params_for(size))

    def save_env(self) -> None:
        """Commit the run's environment (never cut by Ctrl-C)."""
        with self.interrupts.critical():
            self.store.update_run(self.run.id, environment=self.env)

    # ------------------------------------------------------------------ testbed (issue 10)
    def use_testbed(self, testbed: TestbedSpec) -> None:
        """Build on ``testbed``'s hosts (:func:`.testbed.open_testbed`); no harness ceiling there."""
        self.hosts, kw = open_testbed(testbed, self.tg, self.suite, self.env, self.progress,
                                      RunContext(self.run.tag, self.run_dir))
        self.factory = functools.partial(self.factory, topo_kwargs=kw)
        self.ceilings.options.enabled = False
        self.env["harness_ceiling_off"] = "testbed run: the ceiling is measured on one machine"
        self.save_env()

    def close_testbed(self) -> None:
        if self.hosts is not None:
            self.hosts.close()
            self.hosts = None

    # ------------------------------------------------------------------ the one loop
    def run_groups(self, groups: list[Group]) -> None:
        """Every group through :meth:`run_schedule`: a study in rounds by :class:`~nfvperf.runner.rounds.Rounds`,
        any other group by :class:`.schedule.Sequential`."""
        self.env["host"] = host_environment()
        self.cpu_steadiness("before the run")
        for topo_spec, group in groups:
            if self.status != "completed":
                break
            group = self.books.skip_planned(self.plan, group)
            if group:
                self.run_schedule(Rounds(self, group) if topo_spec is None else Sequential(self, topo_spec, group))
        self.cpu_steadiness("after it")

    def run_schedule(self, schedule: Schedule) -> None:
        """The schedule's builds, one after the other, until the run stops; then its close."""
        status = "completed"
        try:
            for build in schedule.builds():
                if self.status != "completed":
                    break
                self.run_build(build)
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        finally:
            schedule.close(status if status != "completed" else self.status)

    def run_build(self, build: Build) -> None:
        """Build one topology (the measurer's context), run its visits, release it; a failed build
        skips (preflight, host too small) or fails its units that have no row; a DUT failure ends the run."""
        self.group_tg = build.tg
        self.ceilings.before_group(build.tg, build.spec, build.units)
        info = {"kind": build.spec.kind, "overrides": topology_overrides(build.spec, self.suite.spec.topology),
                **build.extra}
        try:
            self.env["topologies"].append(info)
            with self.factory(self.suite, build.tg, self.run.tag, self.run_dir, info, build.spec) as measurer:
                self.record_measurer(info, measurer)
                for visit in build.visits(measurer, info):
                    if self.status != "completed" or not self.run_visit(measurer, visit):
                        break
        except (HostTooSmall, PreflightError) as e:
            self.books.skip_topology(build.spec, self.books.not_stored(build.units), str(e), self.env)
        except DutFailure:
            raise                       # a DUT (or its host) that died ends the run
        except Exception:  # noqa: BLE001 - one topology's failed build must not end the run
            self.group_failed(build.spec, build.units)

    def run_visit(self, measurer: Measurer, visit: Visit) -> bool:
        """The unit runner: one visit of one unit.  An error fails this visit only; a DUT failure
        stops the run (returns False); KeyboardInterrupt goes up to :func:`execute`."""
        self.progress.unit(visit.label)
        self.current_test = visit.open()
        try:
            visit.measure(measurer)
        except DutFailure as e:
            self.status, self.reason = "failed", visit.dut_failed(e)
            return False
        except KeyboardInterrupt:
            raise
        except Exception as e:  # noqa: BLE001 - one visit's error must not end the run
            visit.failed(e)
        finally:
            if sys.exc_info()[0] is not KeyboardInterrupt:
                self.current_test = None
        return True

    def cpu_steadiness(self, when: str) -> None:
        """Before a real run on this machine builds anything, and after its last topology is
        down: how much the CPUs' speed moves on its own (:func:`~nfvperf.host.facts.record_cpu_steadiness`)."""
        if self.tg == "sim" or self.hosts is not None or (self.plan is not None and not self.plan.running):
            return
        self.progress.log(f"host CPU steadiness: {record_cpu_steadiness(self.env, when)}")
        self.save_env()

    def fit_changes(self, test: TestConfig, size: Optional[int]) -> list[FitChange]:
        """What ``--fit-host`` changed in this unit's topology (nfvperf.fit.FitChange)."""
        u = self.plan.unit(test, size) if self.plan is not None else None
        return list(u.changes) if u is not None else []

    def group_failed(self, topo_spec: TopologySpec, group: list[Unit]) -> None:
        """Called in the ``except`` of a topology build that failed otherwise (its build, its
        release): the units that have no row are ``failed`` with the reason; the run goes on."""
        exc = sys.exc_info()[1]
        why = f"{type(exc).__name__}: {exc}"
        with (self.run_dir / "errors.log").open("a") as fh:
            fh.write(f"== topology {topo_spec.kind}\n{traceback.format_exc()}\n")
        self.progress.log(f"topology {topo_spec.kind} FAILED: {why} (details in "
                          f"{self.run_dir / 'errors.log'}); the run goes on")
        self.books.group_failed(topo_spec, group, why)

    def record_measurer(self, info: TopologyInfo, measurer: Measurer) -> None:
        record_measurer(self.env, info, measurer)
        self.store.update_run(self.run.id, environment=self.env)

    # ------------------------------------------------------------------ endings
    def interrupted(self) -> None:
        self.status, self.reason = "interrupted", "interrupted by signal (Ctrl-C)"
        with contextlib.suppress(Exception):
            if self.current_test is not None:
                self.store.finish_test(self.current_test, "interrupted", self.reason)

    def setup_failed(self) -> None:
        """Called in the ``except`` of a set-up failure (topology, measurer)."""
        exc = sys.exc_info()[1]
        self.status, self.reason = "failed", f"{type(exc).__name__}: {exc}"
        with (self.run_dir / "errors.log").open("a") as fh:
            fh.write(traceback.format_exc())
        self.progress.log(f"run set-up failed: {self.reason} (details in {self.run_dir / 'errors.log'})")

    def finish(self, n_units: int) -> None:
        """Close the books: final status and reason (:func:`.books.closing_status`), environment,
        headline."""
        self.status, self.reason = closing_status(self.status, self.reason, self.outcome, n_units,
                                                  self.books.first_failure)
        self.store.update_run(self.run.id, environment=self.env)
        headline = None
        with contextlib.suppress(Exception):
            headline = headline_of_run(self.store.load_run(self.run.id))
        self.store.finish_run(self.run.id, self.status, self.reason, headline)
        self.outcome.status, self.outcome.reason = self.status, self.reason


def execute(suite: Suite, *, store: Store, tg: str = "sim", out_dir: Path = Path("results"),
            show_progress: bool = True, log: Callable[[str], None] | None = None,
            measurer_factory: Optional[MeasurerFactory] = None, exiting: bool = False,
            ceiling: Optional[CeilingOptions] = None, testbed: Optional[TestbedSpec] = None,
            wait_lock_s: float = 0.0, fit_host: bool = False) -> RunOutcome:
    """Run the suite; returns the outcome (never raises KeyboardInterrupt unless forced by a third
    Ctrl-C).  ``exiting``: the caller exits after this (the CLI); after an interrupt, further
    Ctrl-Cs stay ignored.  ``ceiling``: how the harness ceiling is got (``--tg tgen`` only;
    default: measured or taken from ``<out_dir>/harness-ceiling.json``).

    ``testbed``: run on that testbed: its lock is taken first (waiting up to ``wait_lock_s``;
    :class:`nfvperf.store.lock.TestbedLocked` naming the holder, and nothing written, when a live
    run holds it) and released when the books are closed, also after a failure or Ctrl-C;
    :class:`TestbedUnusable` when this build cannot drive its hosts.

    ``fit_host``: run the suite fitted to this host (``--fit-host``, :mod:`nfvperf.fit`); the
    changes are stored in ``environment.fit_host`` and on each unit's test row."""
    run = functools.partial(_execute, suite, store=store, tg=tg, out_dir=out_dir, show_progress=show_progress,
                            log=log, measurer_factory=measurer_factory, exiting=exiting, ceiling=ceiling,
                            fit_host=fit_host)
    if testbed is None:
        return run()
    return holding(store, testbed, tg, wait_lock_s, log,
                   lambda uid, lock: run(uid=uid, testbed=testbed, testbed_lock=lock))


def _execute(suite: Suite, *, store: Store, tg: str, out_dir: Path, show_progress: bool,
             log: Callable[[str], None] | None, measurer_factory: Optional[MeasurerFactory], exiting: bool,
             ceiling: Optional[CeilingOptions], uid: Optional[str] = None, testbed: Optional[TestbedSpec] = None,
             testbed_lock: Optional[dict[str, Any]] = None, fit_host: bool = False) -> RunOutcome:
    plan = plan_run(suite, tg, fit_host=fit_host, on_testbed=testbed is not None, rate_dir=out_dir,
                    builds=tg != "sim" and testbed is None and measurer_factory is None)
    suite = plan.suite
    run, run_dir, env = create_run(suite, store, tg, out_dir, uid=uid, testbed=testbed, testbed_lock=testbed_lock)
    record_plan(store, run, env, plan)
    units = test_units(suite)
    groups = topology_groups(units, suite.spec.topology)
    progress = Progress(len(units), enabled=show_progress)
    say = log or progress.log
    say(f"run {run.id} ({run.tag}): suite {suite.spec.name!r}, {len(units)} test unit(s) on "
        f"{len(groups)} topolog{'y' if len(groups) == 1 else 'ies'}, tg={tg}, profile={suite.timing.name}, "
        + (f"testbed {testbed.name}, " if testbed is not None else "") + f"run dir {run_dir}")
    interrupts = Interrupts()
    interrupts.keep_ignoring = exiting
    loop = RunLoop(suite, store, tg, run, run_dir, env, progress, interrupts, measurer_factory or measurer_for)
    loop.plan = plan
    if plan.fit_host:
        say(f"fitted to host ({plan.host.describe() if plan.host else 'this host'}): "
            + (plan.fitted_summary() or "nothing to change"))
    for g in plan.generator:       # what line rate needs of the generator (tgen_cores)
        say(f"generator ({g['kind']} on {g['port_kind']}): {g['text']}")
    if plan.skipped:
        say(f"{len(plan.skipped)} of {len(units)} test unit(s) will be skipped (reasons below and in "
            f"the report; `nfvperf validate` with the same options lists them)")
    if ceiling is not None:
        loop.ceilings.options = ceiling
    # the handler stays installed until the books are closed: a second Ctrl-C while the topology
    # is released or the run is marked must not cut that short (Interrupts ignores it)
    interrupts.__enter__()
    try:
        with progress, progress_logs(progress.log):
            if testbed is not None and tg != "sim":
                loop.use_testbed(testbed)
            loop.run_groups(groups)
    except KeyboardInterrupt:
        only_owner(interrupts.owner)
        interrupts.hit = True          # from now on further signals are only noted
        loop.interrupted()
    except Exception:  # noqa: BLE001 - set-up failed (topology, measurer)
        only_owner(interrupts.owner)
        loop.setup_failed()
    finally:
        only_owner(interrupts.owner)
        try:
            loop.close_testbed()
            loop.finish(len(units))
        finally:
            interrupts.__exit__(None, None, None)
    outcome = loop.outcome
    say(f"run {run.id} ({run.tag}) {outcome.status}" + (f": {outcome.reason}" if outcome.reason else ""))
    return outcome
