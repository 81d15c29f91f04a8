"""What the site knows about the store without loading any trial: one :class:`RunRow` per run
(the scalar columns, the host from the environment, the studies' names) read with a few SQL
queries, and the run each run is compared with.

A run's :attr:`RunRow.fingerprint` is what its pages depend on: the row's own columns, and for a
run still marked running the number of its trials and results (its pages change as it goes) and
whether its process is gone.  A finished run's trials do not change, so its pages are not read
again until its row does (a status, a reason, a headline).
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Optional

from sqlalchemy import func, select

from nfvperf.store.db import run_liveness
from nfvperf.store.models import Result, Run, Test, Trial


@dataclass
class RunRow:
    id: int
    uid: str
    tag: str
    suite: str
    topology: str
    dut: str
    tg: str
    profile: str
    testbed: Optional[str]
    host: Optional[str]
    status: str
    reason: Optional[str]
    started_at: Optional[dt.datetime]
    finished_at: Optional[dt.datetime]
    headline: Optional[str]
    studies: list[str] = field(default_factory=list)
    #: a run marked running whose process is gone (killed or crashed): the note; None otherwise
    dead: Optional[str] = None
    #: (trials, results) of a run still running; () for a finished run
    progress: tuple[int, ...] = ()
    #: the run this one is compared with on the site (previous run of the suite at the same place)
    previous: Optional[int] = None

    @property
    def where(self) -> str:
        """The testbed's name, else the host the run ran on."""
        return f"testbed {self.testbed}" if self.testbed else (self.host or "(unknown host)")

    @property
    def status_text(self) -> str:
        return "running (killed?)" if self.status == "running" and self.dead else self.status

    @property
    def date(self) -> str:
        return self.started_at.strftime("%Y-%m-%d") if self.started_at else ""

    @property
    def fingerprint(self) -> tuple[Any, ...]:
        return (self.id, self.uid, self.suite, self.topology, self.dut, self.tg, self.testbed, self.host,
                self.status, self.reason, self.started_at, self.finished_at, self.headline, self.studies,
                self.dead, self.progress)


def run_rows(store: Any) -> list[RunRow]:
    """Every run of the store, oldest first, with :attr:`RunRow.previous` set."""
    cols = (Run.id, Run.uid, Run.tag, Run.suite, Run.topology, Run.dut, Run.tg, Run.profile, Run.testbed,
            Run.environment["hostname"].as_string(), Run.status, Run.reason, Run.started_at,
            Run.finished_at, Run.headline)
    with store.session() as s:
        rows = [RunRow(*r) for r in s.execute(select(*cols).order_by(Run.id))]
        by_id = {r.id: r for r in rows}
        q = (select(Test.run_id, Test.study["name"].as_string()).where(Test.study.is_not(None))
             .distinct().order_by(Test.run_id))
        for rid, name in s.execute(q):
            if rid in by_id and name and name not in by_id[rid].studies:
                by_id[rid].studies.append(name)
        running = [r.id for r in rows if r.status == "running"]
        if running:
            _running_details(s, running, by_id)
    _link_previous(rows)
    return rows


def _running_details(s: Any, ids: list[int], by_id: dict[int, RunRow]) -> None:
    """Trials and results so far, and liveness, of the runs still marked running."""
    trials = dict(s.execute(select(Test.run_id, func.count(Trial.id)).join(Trial, Trial.test_id == Test.id)
                            .where(Test.run_id.in_(ids)).group_by(Test.run_id)).all())
    results = dict(s.execute(select(Test.run_id, func.count(Result.id)).join(Result, Result.test_id == Test.id)
                             .where(Test.run_id.in_(ids)).group_by(Test.run_id)).all())
    for run in s.scalars(select(Run).where(Run.id.in_(ids))):
        row = by_id[run.id]
        row.progress = (int(trials.get(run.id, 0)), int(results.get(run.id, 0)))
        row.dead = run_liveness(run)


def _link_previous(rows: list[RunRow]) -> None:
    last: dict[tuple[str, str], int] = {}
    for r in rows:
        key = (r.suite, r.where)
        r.previous = last.get(key)
        last[key] = r.id
