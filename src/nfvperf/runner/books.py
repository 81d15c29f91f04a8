"""A run's books in the store: the run row and run directory made before the first trial
(:func:`create_run`), the plan recorded in its environment (:func:`record_plan`), the rows of
units that did not run (:class:`UnitBooks`), and the outcome with its final status and reason
(:class:`RunOutcome`, :func:`closing_status`)."""
from __future__ import annotations

import json
import os
import platform
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from sqlalchemy.engine import make_url

from nfvperf.config import Suite, TestConfig, format_link_speed
from nfvperf.plan import RunPlan, unit_label
from nfvperf.store import Store
from nfvperf.store.db import process_starttime
from nfvperf.testbed.spec import TestbedSpec
from nfvperf.topo.spec import TopologySpec
from nfvperf.trial import Measurer

from .groups import Unit
from .interrupts import Interrupts
from .progress import Progress

__all__ = ["EXIT_OK", "EXIT_TEST_FAILED", "EXIT_BAD_INPUT", "EXIT_INTERRUPTED", "TestbedUnusable", "RunOutcome",
           "create_run", "run_reference", "record_plan", "closing_status", "record_measurer", "UnitBooks"]

EXIT_OK, EXIT_TEST_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


class TestbedUnusable(RuntimeError):
    """The run cannot use its testbed (nothing was written)."""

    __test__ = False


@dataclass
class RunOutcome:
    run_id: int
    uid: str
    status: str                      # completed | failed | interrupted
    run_dir: Path
    failed_tests: list[str] = field(default_factory=list)
    reason: Optional[str] = None
    skipped_tests: list[str] = field(default_factory=list)   # the plan's skips, and failed preflights

    @property
    def exit_code(self) -> int:
        if self.status == "interrupted":
            return EXIT_INTERRUPTED
        if self.status == "failed" or self.failed_tests:
            return EXIT_TEST_FAILED
        return EXIT_OK


def create_run(suite: Suite, store: Store, tg: str, out_dir: Path, uid: Optional[str] = None,
               testbed: Optional[TestbedSpec] = None,
               testbed_lock: Optional[dict[str, Any]] = None) -> tuple[Any, Path, dict[str, Any]]:
    """The run row (status ``running``, the config, the pid that runs it) and the run directory
    (a copy of the suite file and ``run.json``, a reference to the run in the store).  Returns
    (run row, run dir, the environment dict the run keeps filling).  ``testbed``: recorded as
    the run's ``testbed`` column and ``environment["testbed"]`` (its public form: no secrets)."""
    spec, timing = suite.spec, suite.timing
    kinds = list(dict.fromkeys((t.topology or spec.topology).kind for t in suite.tests))
    duts = list(dict.fromkeys((t.topology or spec.topology).dut for t in suite.tests))
    # pid first: a killed run is recognisable (Store.mark_aborted_runs)
    env: dict[str, Any] = {"host": {}, "tg": tg, "profile_deviations": timing.deviations(),
                           "ports": spec.topology.ports,
                           "link_speed": format_link_speed(spec.traffic.link_speed_bps),
                           "topologies": [], "pid": os.getpid(), "hostname": platform.node(),
                           "pid_starttime": process_starttime(os.getpid())}
    if testbed is not None:
        env["testbed"] = testbed.public()
        env["testbed_lock"] = testbed_lock
    run = store.create_run(suite=spec.name, suite_path=str(suite.source) if suite.source else None,
                           topology="+".join(kinds), dut="+".join(duts) if tg != "sim" else
                           f"sim ({'+'.join(duts)} model)", tg=tg, profile=timing.name,
                           config=suite.to_dict(), environment=env, uid=uid,
                           testbed=testbed.name if testbed is not None else None)
    env["tag"] = run.tag
    run_dir = (out_dir / "runs" / run.tag).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    if suite.source and Path(suite.source).exists():
        shutil.copyfile(suite.source, run_dir / "suite.yaml")
    (run_dir / "run.json").write_text(json.dumps(run_reference(store, run), indent=2) + "\n")
    store.update_run(run.id, run_dir=str(run_dir), environment=env)
    return run, run_dir, env


def run_reference(store: Store, run: Any) -> dict[str, Any]:
    """What ``<run dir>/run.json`` holds: where the run (its resolved config, every trial) is stored."""
    url = make_url(store.url).render_as_string(hide_password=True)
    return {"run_id": run.id, "uid": run.uid, "tag": run.tag, "store": url,
            "export": ["nfvperf", "export", str(run.id), "--db", url]}


def record_plan(store: Store, run: Any, env: dict[str, Any], plan: RunPlan) -> None:
    """The plan in the run's environment: ``plan`` (measurer, host, each skipped unit and its
    reason, each fitted change and its units) and, with ``--fit-host``, ``fit_host`` (the host
    and the changes as text, what the report prints)."""
    env["plan"] = plan.record()
    if plan.fit_host:
        env["fit_host"] = {"host": plan.host.describe() if plan.host else None,
                           "changes": [r["text"] for r in plan.fitted()],
                           "summary": plan.fitted_summary()}
    store.update_run(run.id, environment=env)


def closing_status(status: str, reason: Optional[str], outcome: RunOutcome, n_units: int,
                   first_failure: Optional[str]) -> tuple[str, Optional[str]]:
    """The run's final status and reason: ``failed`` when a unit failed (naming the first few and
    the first failure's reason) or when every unit was skipped; a completed run with skips says
    how many."""
    failed = outcome.failed_tests
    if status == "completed" and failed:
        status = "failed"
        reason = (f"{len(failed)} of {n_units} test unit(s) failed: "
                  + ", ".join(failed[:5]) + (" ..." if len(failed) > 5 else "")
                  + (f" (first: {first_failure})" if first_failure else ""))
    skipped = outcome.skipped_tests
    if status == "completed" and skipped and len(skipped) == n_units:
        status = "failed"
        reason = (f"nothing ran: all {n_units} test unit(s) skipped (see the tests' reasons; "
                  f"`nfvperf validate` with the same options lists them)")
    elif status == "completed" and skipped:
        reason = (f"{len(skipped)} of {n_units} test unit(s) skipped (see the tests' reasons): "
                  + ", ".join(skipped[:3]) + (" ..." if len(skipped) > 3 else ""))
    return status, reason


def record_measurer(env: dict[str, Any], info: dict[str, Any], measurer: Measurer) -> None:
    """What a topology group's measurer says about itself, in the group's ``info`` and the run's
    environment (the first group's switching operations; whether cores are shared)."""
    try:
        info["measurer"] = measurer.environment()
    except Exception as e:  # noqa: BLE001
        info["measurer"] = {"error": str(e)}
    env.setdefault("switching_operations", info.get("switching_operations"))
    env.setdefault("switching_operations_source", info.get("switching_operations_source"))
    env["measurer"] = info["measurer"]
    env["cores_shared"] = _cores_shared(env)


def _cores_shared(env: dict[str, Any]) -> Optional[bool]:
    for info in env.get("topologies", []):
        for part in ("environment", "measurer"):
            v = (info.get(part) or {}).get("cores_shared")
            if v is not None:
                return bool(v)
    return None


class UnitBooks:
    """The test rows of a run's units that did not run: skipped (by the plan, or a topology the
    host cannot build) or failed; which units have a row; the outcome's lists of failed and
    skipped units and the first failure's reason."""

    def __init__(self, store: Store, run: Any, suite: Suite, interrupts: Interrupts, progress: Progress,
                 outcome: RunOutcome):
        self.store, self.run, self.suite = store, run, suite
        self.interrupts, self.progress, self.outcome = interrupts, progress, outcome
        self.stored: set[tuple[int, Optional[int]]] = set()   # units with a test row
        self.said: set[str] = set()             # skip reasons already logged
        self.first_failure: Optional[str] = None   # "<unit>: <reason>" of the first failed unit

    def not_stored(self, group: list[Unit]) -> list[Unit]:
        return [(t, s) for t, s in group if (id(t), s) not in self.stored]

    def skip_planned(self, plan: Optional[RunPlan], group: list[Unit]) -> list[Unit]:
        """Store the group's units the plan skips (``skipped``, with the plan's reason); returns
        the others."""
        if plan is None:
            return group
        todo = []
        for test, size in group:
            why = plan.skip_reason(test, size)
            if why is None:
                todo.append((test, size))
                continue
            spec = test.topology or self.suite.spec.topology
            if why not in self.said:
                self.said.add(why)
                self.progress.log(f"skipped ({spec.kind}): {why}")
            self.skipped(spec, test, size, why)
        return todo

    def open_row(self, topology: dict[str, object], test: TestConfig, size: Optional[int]) -> Any:
        """The unit's test row (``topology``: what reports read of its topology), kept as stored."""
        row = self.store.start_test(self.run.id, name=test.name, method=test.method,
                                    frame_size_b=size, params=test.params_dict(size),
                                    traffic=self.suite.traffic_profile(test, size),
                                    topology=topology, study=test.study)
        self.stored.add((id(test), size))
        return row

    def skipped(self, topo_spec: TopologySpec, test: TestConfig, size: Optional[int], why: str) -> None:
        label = unit_label(test, size)
        with self.interrupts.critical():
            row = self.open_row({"kind": topo_spec.kind}, test, size)
            self.store.finish_test(row.id, "skipped", why)
        self.outcome.skipped_tests.append(label)
        self.progress.unit(label)
        self.progress.unit_done()

    def skip_topology(self, topo_spec: TopologySpec, group: list[Unit], why: str, env: dict[str, Any]) -> None:
        """A topology whose build found, before anything started, that this host cannot run it
        (too small, hardware missing, a required preflight check failed): its units are stored as
        ``skipped`` with the reason (also on the run's last topology entry), and the run goes on."""
        self.progress.log(f"topology {topo_spec.kind} skipped: {why}")
        info = env["topologies"][-1] if env["topologies"] else {}
        info["skipped"] = why
        for test, size in group:
            self.skipped(topo_spec, test, size, why)

    def failed(self, test_id: int, label: str, reason: str) -> None:
        if self.first_failure is None:
            self.first_failure = f"{label}: {reason}"
        with self.interrupts.critical():
            self.store.finish_test(test_id, "failed", reason)
        self.outcome.failed_tests.append(label)

    def group_failed(self, topo_spec: TopologySpec, group: list[Unit], why: str) -> None:
        """The units of a failed topology group that have no row yet: ``failed`` with ``why``."""
        for test, size in self.not_stored(group):
            with self.interrupts.critical():
                row = self.open_row({"kind": topo_spec.kind}, test, size)
            self.failed(row.id, unit_label(test, size), f"topology set-up failed: {why}")
            self.progress.unit_done()
