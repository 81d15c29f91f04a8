"""Reading series out of the store with SQL, never a whole run and never a trial.

Two queries per call:

1. the tests the selector's SQL side allows (:meth:`Selector.where`), joined with the few run
   columns a series needs (status, time, DUT, testbed, host name, the topology part of the
   config, the host steadiness probe, the DUT version: JSON paths read by the database), streamed
   and turned into series identities (:mod:`nfvperf.trend.series`); the identity side of the
   selector keeps the matching ones;
2. the results of the kept tests only (their rate result or, for a unit of an interleaved study,
   its ``rounds`` summary; never the per-round rows nor the trials), in chunks.

Memory is then one small record per point of the selected series.
"""
from __future__ import annotations

import datetime as dt
import functools
import json
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from sqlalchemy import Text, cast, select
from sqlalchemy.orm import Session

from nfvperf.report.extract import RATE_METHODS
from nfvperf.store.models import Result, Run, Test
from nfvperf.trend.selector import Selector, no_match_error
from nfvperf.trend.series import RunInfo, StoredTest, identity, series_id
from nfvperf.store.db import run_liveness
from nfvperf.trend.noise import point_value

#: run statuses whose passed tests are measurements a trend counts
COUNTED_RUN_STATUS = ("completed", "failed")
CHUNK = 500


@dataclass
class Point:
    """One run's value of one series."""

    run: int
    uid: str
    tag: str
    time: Optional[dt.datetime]
    run_status: str
    test_id: int
    test_name: str
    test_status: str
    dut_version: Optional[str] = None
    value: Optional[float] = None
    samples: list[float] = field(default_factory=list)     # per-round figures of an interleaved unit
    noise: float = 0.0                                       # relative: ± this is not a change
    noise_source: str = ""
    data: dict[str, Any] = field(default_factory=dict)      # the result (not kept in the output)

    @property
    def status(self) -> str:
        """``ok`` when the point counts; else why not (the run's or the test's status)."""
        if self.run_status not in COUNTED_RUN_STATUS:
            return self.run_status
        if self.test_status != "passed":
            return f"test {self.test_status}"
        if self.value is None:
            return "no value"
        return "ok"

    @property
    def counted(self) -> bool:
        return self.status == "ok"


@dataclass
class Series:
    id: str
    identity: dict[str, Any]
    tests: list[str] = field(default_factory=list)          # the test names it was stored under
    points: list[Point] = field(default_factory=list)


def _text(col: Any) -> Any:
    """A JSON column or path as its text (parsed here, once per distinct text: 10,000 runs of one
    suite share one topology)."""
    return cast(col, Text)


@functools.lru_cache(maxsize=4096)
def _parsed(text: Optional[str]) -> Any:
    """A JSON text parsed (shared: callers never mutate it)."""
    if text is None:
        return None
    v = json.loads(text)
    if isinstance(v, str) and v[:1] in "{[":          # a JSON path's text may be quoted once more
        v = json.loads(v)
    return v


def _dict(text: Optional[str]) -> dict[str, Any]:
    v = _parsed(text)
    return v if isinstance(v, dict) else {}


def _run_info(row: Any) -> RunInfo:
    rid, uid, tag, status, started, suite, dut, testbed, topo, host, steady, version, pid, pst = row[:14]
    return RunInfo(id=rid, uid=uid, tag=tag, status=status, started_at=started, suite=suite, dut=dut,
                   testbed=testbed, hostname=host if isinstance(host, str) else None,
                   config_topology=_dict(topo), cpu_steadiness=_dict(steady) or None,
                   dut_version=str(version) if version else None,
                   pid=pid if isinstance(pid, int) else None, pid_starttime=pst if isinstance(pst, int) else None)


def candidate_rows(s: Session, sel: Selector, since: Optional[int] = None,
                   until: Optional[int] = None) -> Iterator[tuple[RunInfo, StoredTest, tuple[Any, ...]]]:
    """Every stored test the selector's SQL side allows, with its run, oldest run first, and the
    key its identity depends on (equal keys: equal identities)."""
    q = (select(Run.id, Run.uid, Run.tag, Run.status, Run.started_at, Run.suite, Run.dut, Run.testbed,   # _run_info
                _text(Run.config["topology"]), Run.environment["hostname"], _text(Run.environment["cpu_steadiness"]),
                Run.environment[("measurer", "topology", "dut", "version")], Run.environment["pid"],
                Run.environment["pid_starttime"], Test.id, Test.name, Test.method, Test.frame_size_b, Test.status,
                _text(Test.topology), _text(Test.traffic), _text(Test.study)).join(Run, Test.run_id == Run.id)
         .where(*sel.where(Test, Run)).order_by(Run.started_at, Run.id, Test.id))
    if since is not None:
        q = q.where(Run.id >= since)
    if until is not None:
        q = q.where(Run.id <= until)
    run: Optional[RunInfo] = None
    for row in s.execute(q.execution_options(yield_per=CHUNK)):
        if run is None or run.id != row[0]:
            run = _run_info(row)
        tid, name, method, size, tstatus, topo, traffic, study = row[14:]
        key = (row[8], run.dut, run.testbed, run.hostname, method, size, topo, traffic, study)
        st = StoredTest(tid, name, method, size, tstatus, _dict(topo), _dict(traffic), _dict(study) or None,
                        run.config_topology)
        yield run, st, key


def select_series(s: Session, selector: Any = None, since: Optional[int] = None,
                  until: Optional[int] = None) -> list[Series]:
    """The series the selector names, with their points (values not yet read: see
    :func:`fill_values`).  A selector that names nothing raises SelectorError."""
    sel = Selector.parse(selector)
    out: dict[str, Series] = {}
    seen: dict[str, set[Any]] = {k: set() for k in ("metric", "dut", "host", "topology", "port_kind",
                                                     "flows", "axis", "series")}
    known: dict[tuple[Any, ...], tuple[str, dict[str, Any]]] = {}
    for run, test, key in candidate_rows(s, sel, since, until):
        for metric in test.metrics():
            if metric == test.method and not test.is_rounds and test.method not in RATE_METHODS:
                continue               # a trend is of rates: latency, back-to-back... are not trended
            got = known.get(key + (metric,))
            if got is None:
                ident = identity(test, run, metric)
                got = known[key + (metric,)] = (series_id(ident), ident)
                _remember(seen, got[0], ident)
            sid, ident = got
            if not sel.matches(sid, ident):
                continue
            ser = out.get(sid)
            if ser is None:
                ser = out[sid] = Series(sid, ident)
            if test.name not in ser.tests:
                ser.tests.append(test.name)
            ser.points.append(Point(run=run.id, uid=run.uid, tag=run.tag, time=run.started_at,
                                    run_status=_status(run), test_id=test.id, test_name=test.name,
                                    test_status=test.status, dut_version=run.dut_version,
                                    data={"metric": metric, "run_env": run.environment}))
    if not out and not sel.is_empty():
        raise no_match_error(sel, {**_stored_sql_values(s, sel), **seen})
    return list(out.values())


def _status(run: RunInfo) -> str:
    """The run's status; a run still marked running whose process is gone reads ``aborted``."""
    return "aborted" if run.status == "running" and run_liveness(run) else run.status


def _remember(seen: dict[str, set[Any]], sid: str, ident: dict[str, Any]) -> None:
    for k in ("metric", "dut", "host", "topology", "port_kind", "flows"):
        seen[k].add(ident.get(k))
    seen["series"].add(sid)
    for k, v in (ident.get("axes") or {}).items():
        seen["axis"].add(f"{k}={v}")


def _stored_sql_values(s: Session, sel: Selector) -> dict[str, set[Any]]:
    """The stored values of the SQL-side fields the selector uses (distinct, by the database)."""
    out: dict[str, set[Any]] = {}
    if sel.test:
        names = set(s.scalars(select(Test.name).distinct()))
        out["test"] = names | {n.split("[", 1)[0] for n in names}
    if sel.size is not None:
        out["size"] = {("imix" if v is None else str(v)) for v in s.scalars(select(Test.frame_size_b).distinct())}
    for key, col in (("method", Test.method), ("suite", Run.suite), ("testbed", Run.testbed)):
        if getattr(sel, key):
            out[key] = set(s.scalars(select(col).distinct()))
    return out


def fill_values(s: Session, series: list[Series]) -> None:
    """Read each point's value and noise from its test's results (chunks of test ids)."""
    by_test: dict[int, list[Point]] = {}
    for ser in series:
        for p in ser.points:
            by_test.setdefault(p.test_id, []).append(p)
    ids = sorted(by_test)
    for i in range(0, len(ids), CHUNK):
        chunk = ids[i:i + CHUNK]
        q = (select(Result.test_id, Result.kind, Result.value_pps, Result.data)
             .where(Result.test_id.in_(chunk), Result.kind != "round").order_by(Result.test_id, Result.id))
        last: dict[int, tuple[str, Optional[float], dict[str, Any]]] = {}
        for tid, kind, value, data in s.execute(q):
            prev = last.get(tid)
            if prev is None or prev[0] != "rounds":      # a unit's rounds summary wins
                last[tid] = (kind, value, data if isinstance(data, dict) else {})
        for tid in chunk:
            kind, value, data = last.get(tid, ("", None, {}))
            for p in by_test[tid]:
                point_value(p, kind, value, data)
