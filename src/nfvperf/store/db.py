"""The Store: one engine, short sessions, a commit per trial (results survive a crash)."""
from __future__ import annotations

import dataclasses
import datetime as dt
import math
import os
import secrets
import socket
from pathlib import Path
from typing import Any, Iterable, Optional, Union, cast

from sqlalchemy import create_engine, event, func, inspect, select, text, update
from sqlalchemy.engine import CursorResult, Engine, make_url
from sqlalchemy.orm import Session, defer, selectinload, sessionmaker

from nfvperf.store.models import SCHEMA_VERSION, Base, Result, Run, Test, Trial, utcnow
from nfvperf.host.run import pid_alive
from nfvperf.host.run import _proc_starttime
import json

DEFAULT_DB_PATH = Path("results") / "nfvperf.db"


def default_url() -> str:
    return resolve_url(os.environ.get("NFVPERF_DB") or str(DEFAULT_DB_PATH))


def resolve_url(value: str) -> str:
    """A SQLAlchemy URL, or a file path taken as SQLite.  ``postgresql://`` means psycopg 3."""
    if "://" not in value:
        return "sqlite:///" + str(Path(value).expanduser().resolve())
    if value.startswith("postgresql://") or value.startswith("postgres://"):
        value = "postgresql+psycopg://" + value.split("://", 1)[1]
    return value


def jsonable(obj: Any) -> Any:
    """Plain JSON: dataclasses/pydantic to dicts, tuples to lists, NaN/inf to None, keys to str."""
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set)):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "to_dict"):
        return jsonable(obj.to_dict())
    if hasattr(obj, "model_dump"):
        return jsonable(obj.model_dump(mode="json"))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return jsonable(dataclasses.asdict(obj))
    if isinstance(obj, (dt.datetime, dt.date)):
        return obj.isoformat()
    return str(obj)


class RunNotFound(LookupError):
    pass


def _get_test(s: Session, test_id: int) -> Test:
    t = s.get(Test, test_id)
    if t is None:
        raise LookupError(f"no test with id {test_id}")
    return t


class Store:
    def __init__(self, url: Optional[str] = None, create: bool = True):
        self.url = resolve_url(url) if url else default_url()
        u = make_url(self.url)
        kwargs: dict[str, Any] = {"future": True}
        if u.get_backend_name() == "sqlite" and u.database and u.database != ":memory:":
            if create:
                Path(u.database).parent.mkdir(parents=True, exist_ok=True)
            kwargs["connect_args"] = {"timeout": 30}
        self.engine: Engine = create_engine(self.url, **kwargs)
        if u.get_backend_name() == "sqlite":
            @event.listens_for(self.engine, "connect")
            def _fk(dbapi_conn, _rec):  # noqa: ANN001
                cur = dbapi_conn.cursor()
                cur.execute("PRAGMA foreign_keys=ON")
                cur.execute("PRAGMA journal_mode=WAL")
                cur.close()
        if create:
            Base.metadata.create_all(self.engine)
            add_missing_columns(self.engine)
            add_missing_indexes(self.engine)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    def session(self) -> Session:
        return self._sessions()

    def close(self) -> None:
        self.engine.dispose()

    # ------------------------------------------------------------------ writing
    def create_run(self, *, suite: str, suite_path: Optional[str], topology: str, dut: str, tg: str,
                   profile: str, config: dict, run_dir: Optional[str] = None,
                   uid: Optional[str] = None, environment: Optional[dict] = None,
                   testbed: Optional[str] = None) -> Run:
        with self.session() as s:
            uid = uid or secrets.token_hex(3)
            run = Run(uid=uid, tag=f"nfv{uid}", suite=suite, suite_path=suite_path, topology=topology,
                      dut=dut, tg=tg, profile=profile, status="running", config=jsonable(config),
                      environment=jsonable(environment or {}), run_dir=run_dir, testbed=testbed,
                      schema_version=SCHEMA_VERSION)
            s.add(run)
            s.commit()
            return run

    def update_run(self, run_id: int, **fields: Any) -> None:
        with self.session() as s:
            run = s.get(Run, run_id)
            for k, v in fields.items():
                setattr(run, k, jsonable(v) if k in ("config", "environment") else v)
            s.commit()

    def finish_run(self, run_id: int, status: str, reason: Optional[str] = None,
                   headline: Optional[str] = None) -> None:
        self.update_run(run_id, status=status, reason=reason, headline=headline, finished_at=utcnow())

    def start_test(self, run_id: int, *, name: str, method: str, frame_size_b: Optional[int],
                   params: dict, traffic: Any, topology: Optional[dict] = None,
                   study: Optional[dict] = None) -> Test:
        """``traffic``: the unit's TrafficProfile (stored as its ``to_dict()``) or that dict;
        ``topology``: kind, ports, switching_operations, directions and the ``overrides`` of the
        suite's topology (the spec itself is in the run's config); ``study``: the unit's study
        name, axis values and whether it is the baseline (see :class:`Test`)."""
        with self.session() as s:
            t = Test(run_id=run_id, name=name, method=method, frame_size_b=frame_size_b,
                     status="running", params=jsonable(params), traffic=jsonable(traffic),
                     topology=jsonable(topology or {}), study=jsonable(study) if study else None)
            s.add(t)
            s.commit()
            return t

    def update_test(self, test_id: int, **fields: Any) -> None:
        """Replace JSON fields of a test row: ``params``, or ``topology`` (a rounds study opens its
        rows before any build, and learns e.g. ``generator_cpu_overlap`` from the builds)."""
        with self.session() as s:
            t = _get_test(s, test_id)
            for k, v in fields.items():
                setattr(t, k, jsonable(v))
            s.commit()

    def finish_test(self, test_id: int, status: str, reason: Optional[str] = None) -> None:
        with self.session() as s:
            t = _get_test(s, test_id)
            t.status = status
            t.reason = reason
            t.finished_at = utcnow()
            s.commit()

    def add_trial(self, test_id: int, trial: Any, context: Optional[dict] = None) -> int:
        """Write one trial and commit at once.  ``trial`` is a TrialResult (or its dict)."""
        d = jsonable(trial)
        if not isinstance(d, dict):
            d = {"value": d}
        with self.session() as s:
            seq = s.scalar(select(func.count(Trial.id)).where(Trial.test_id == test_id)) or 0
            lr = d.get("loss_ratio")
            if lr is None and hasattr(trial, "loss_ratio"):
                lr = trial.loss_ratio
            row = Trial(test_id=test_id, seq=seq + 1, duration_s=float(d.get("duration_s") or 0.0),
                        load_pps=float(d.get("load_pps") or 0.0), sent=int(d.get("sent") or 0),
                        received=int(d.get("received") or 0), loss_ratio=float(lr or 0.0),
                        valid=bool(d.get("valid", True)), context=jsonable(context or {}), detail=d)
            s.add(row)
            s.commit()
            return row.id

    def add_result(self, test_id: int, kind: str, data: Any, value_pps: Optional[float] = None) -> int:
        with self.session() as s:
            r = Result(test_id=test_id, kind=kind, data=jsonable(data),
                       value_pps=value_pps if value_pps is None or math.isfinite(value_pps) else None)
            s.add(r)
            s.commit()
            return r.id

    def stale_runs(self) -> list[tuple[Run, str]]:
        """Runs marked ``running`` whose process is gone (this host only), with the reason."""
        with self.session() as s:
            runs = list(s.scalars(select(Run).where(Run.status == "running").order_by(Run.id)))
        return [(r, note) for r in runs if (note := run_liveness(r))]

    def mark_aborted_runs(self) -> list[tuple[Run, str]]:
        """Mark every stale run (see :meth:`stale_runs`) and its running tests ``aborted`` with the
        reason; their trials stay.  Returns the runs marked.  A run whose status changed meanwhile
        is left alone."""
        marked = []
        for run, note in self.stale_runs():
            with self.session() as s:
                # an UPDATE gives a CursorResult; Session.execute's overloads say Result (sqlalchemy#9185)
                res = cast(CursorResult, s.execute(update(Run).where(Run.id == run.id, Run.status == "running")
                                                   .values(status="aborted", reason=note, finished_at=utcnow())))
                n = res.rowcount
                if n:
                    s.execute(update(Test).where(Test.run_id == run.id, Test.status == "running")
                              .values(status="aborted", reason=note, finished_at=utcnow()))
                s.commit()
            if n:
                run.status, run.reason = "aborted", note
                marked.append((run, note))
        return marked

    # ------------------------------------------------------------------ reading
    def list_runs(self, limit: int = 50, testbed: Optional[str] = None) -> list[Run]:
        """The newest ``limit`` runs; ``testbed``: only the runs on that testbed.  A listing's
        runs come without their ``config`` (not loaded: 10,000 runs' configurations and
        environments are half a GB of objects) and with their ``environment`` only when still
        marked running (:func:`run_liveness` reads it); use :meth:`load_run` for a whole run."""
        with self.session() as s:
            q = (select(Run).options(defer(Run.config, raiseload=True), defer(Run.environment))
                 .order_by(Run.id.desc()).limit(limit))
            if testbed is not None:
                q = q.where(Run.testbed == testbed)
            runs = list(s.scalars(q))
            for r in runs:
                if r.status == "running":
                    r.environment       # noqa: B018 - loaded while the session is open
            return runs

    def resolve(self, ref: Union[str, int], testbed: Optional[str] = None) -> int:
        """Run id from ``12``, ``nfv1a2b3c4d``, ``1a2b`` (uid prefix), ``latest``/``last``, ``-2``.
        ``testbed``: among the runs on that testbed only (``latest`` is its newest run; a run given
        by id that ran elsewhere is refused, saying where it ran)."""
        ref = str(ref).strip()
        on = f" on testbed {testbed}" if testbed is not None else ""
        scope = select(Run.id) if testbed is None else select(Run.id).where(Run.testbed == testbed)
        with self.session() as s:
            if ref in ("latest", "last", "-1"):
                rid = s.scalar(select(func.max(scope.subquery().c.id)))
                if rid is None:
                    raise RunNotFound(f"the store has no runs{on} yet")
                return rid
            if ref.startswith("-") and ref[1:].isdigit():
                ids = list(s.scalars(scope.order_by(Run.id.desc()).limit(int(ref[1:]))))
                if len(ids) < int(ref[1:]):
                    raise RunNotFound(f"no run {ref}: the store holds {len(ids)} run(s){on}")
                return ids[-1]
            rows: list[int] = []
            if ref.isdigit() and s.get(Run, int(ref)) is not None:
                rows = [int(ref)]
            else:
                key = ref[3:] if ref.startswith("nfv") else ref
                rows = list(s.scalars(select(Run.id).where(Run.uid.like(key + "%"))))
            if len(rows) > 1:
                raise RunNotFound(f"run {ref!r} is ambiguous ({len(rows)} runs match); give more of the id")
            if len(rows) == 1:
                where = s.scalar(select(Run.testbed).where(Run.id == rows[0]))
                if testbed is not None and where != testbed:
                    raise RunNotFound(f"run {ref!r} ran on {f'testbed {where}' if where else 'the local host'}"
                                      f", not on testbed {testbed}")
                return rows[0]
        raise RunNotFound(f"no run {ref!r} in the store; see `nfvperf history`")

    def load_run(self, ref: Union[str, int], testbed: Optional[str] = None) -> Run:
        rid = self.resolve(ref, testbed)
        with self.session() as s:
            q = (select(Run).where(Run.id == rid)
                 .options(selectinload(Run.tests).selectinload(Test.trials),
                          selectinload(Run.tests).selectinload(Test.results)))
            return s.scalars(q).one()

    def count(self, model: type) -> int:
        with self.session() as s:
            return s.scalar(select(func.count()).select_from(model)) or 0

    # ------------------------------------------------------------------ export / import
    def run_to_dict(self, ref: Union[str, int]) -> dict[str, Any]:
        return run_to_dict(self.load_run(ref))

    def import_dict(self, data: dict[str, Any], new_uid: bool = False) -> int:
        """Load an exported run (``export --format json``) into this store; returns the run id."""
        r = data["run"]
        with self.session() as s:
            uid = secrets.token_hex(3) if new_uid else r["uid"]
            run = Run(uid=uid, tag=f"nfv{uid}", suite=r["suite"], suite_path=r.get("suite_path"),
                      topology=r.get("topology", ""), dut=r.get("dut", ""), tg=r.get("tg", ""),
                      profile=r.get("profile", ""), status=r.get("status", "completed"),
                      reason=r.get("reason"), started_at=_parse_dt(r.get("started_at")) or utcnow(),
                      finished_at=_parse_dt(r.get("finished_at")), run_dir=r.get("run_dir"),
                      config=r.get("config") or {}, environment=r.get("environment") or {},
                      headline=r.get("headline"), testbed=r.get("testbed"),
                      schema_version=data.get("schema_version", SCHEMA_VERSION))
            s.add(run)
            s.flush()
            for t in data.get("tests", []):
                test = Test(run_id=run.id, name=t["name"], method=t["method"],
                            frame_size_b=t.get("frame_size_b"), status=t.get("status", "passed"),
                            reason=t.get("reason"), started_at=_parse_dt(t.get("started_at")) or utcnow(),
                            finished_at=_parse_dt(t.get("finished_at")), params=t.get("params") or {},
                            traffic=t.get("traffic") or {}, topology=t.get("topology") or {},
                            study=t.get("study"))
                s.add(test)
                s.flush()
                for tr in t.get("trials", []):
                    s.add(Trial(test_id=test.id, seq=tr["seq"], at=_parse_dt(tr.get("at")) or utcnow(),
                                duration_s=tr["duration_s"], load_pps=tr["load_pps"], sent=tr["sent"],
                                received=tr["received"], loss_ratio=tr["loss_ratio"], valid=tr["valid"],
                                context=tr.get("context") or {}, detail=tr.get("detail") or {}))
                for res in t.get("results", []):
                    s.add(Result(test_id=test.id, kind=res["kind"], value_pps=res.get("value_pps"),
                                 data=res.get("data") or {}))
            s.commit()
            return run.id


def add_missing_columns(engine: Engine) -> None:
    """Columns added to the models after a store was created (schema 1 -> 2: ``tests.study``,
    ``runs.testbed``) are added in place, nullable, so an older store keeps working."""
    insp = inspect(engine)
    with engine.begin() as conn:
        for table in Base.metadata.sorted_tables:
            have = {c["name"] for c in insp.get_columns(table.name)}
            for col in table.columns:
                if col.name not in have and col.nullable:
                    ctype = col.type.compile(dialect=engine.dialect)
                    conn.execute(text(f'ALTER TABLE {table.name} ADD COLUMN {col.name} {ctype}'))


def add_missing_indexes(engine: Engine) -> None:
    """Indexes added to the models after a store was created (``ix_tests_name_size``, for
    ``nfvperf trend``) are created in place."""
    insp = inspect(engine)
    for table in Base.metadata.sorted_tables:
        have = {ix["name"] for ix in insp.get_indexes(table.name)}
        for ix in table.indexes:
            if ix.name not in have:
                ix.create(engine)


def _parse_dt(v: Any) -> Optional[dt.datetime]:
    if not v:
        return None
    if isinstance(v, dt.datetime):
        return v
    return dt.datetime.fromisoformat(v)


def _iso(v: Optional[dt.datetime]) -> Optional[str]:
    return v.isoformat() if v else None


RUN_FIELDS = ("id", "uid", "tag", "suite", "suite_path", "topology", "dut", "tg", "profile", "status",
              "reason", "run_dir", "headline", "testbed")
TEST_FIELDS = ("id", "name", "method", "frame_size_b", "status", "reason")
TRIAL_FIELDS = ("seq", "duration_s", "load_pps", "sent", "received", "loss_ratio", "valid")

def run_liveness(run: Any) -> Optional[str]:
    """For a run still marked running: None if its process lives (or cannot be judged: another
    host, no pid recorded), else a note (killed/crashed).  A pid now used by another process (its
    start time differs from the recorded ``pid_starttime``) counts as gone."""
    if run.status != "running":
        return None
    env = run.environment or {}
    pid, host = env.get("pid"), env.get("hostname")
    if not pid or host != socket.gethostname():
        return None
    if not process_gone(int(pid), env.get("pid_starttime")):
        return None
    return f"its process {pid} is gone: the run was killed or crashed; its trials are kept"


def aborted_notice(run: Any, note: str) -> str:
    """One line for a run just marked ``aborted`` (``nfvperf history``, ``nfvperf cleanup``)."""
    return f"run {run.id} ({run.tag}) was still marked running (killed?): {note}; marked aborted"


def process_gone(pid: int, starttime: Optional[int] = None) -> bool:
    """True when ``pid`` is not running (a zombie counts as gone) or, given ``starttime`` (field 22
    of /proc/<pid>/stat), has been reused by another process."""
    if Path("/proc/self/stat").exists():
        return not pid_alive(pid, starttime)
    try:                     # no /proc: only "no such process" is sure
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def process_starttime(pid: int) -> Optional[int]:
    """Start time of ``pid`` (clock ticks since boot), recorded so a reused pid is recognised."""
    try:
        return _proc_starttime(pid)
    except (IndexError, ValueError):
        return None


def run_to_dict(run: Run) -> dict[str, Any]:
    out: dict[str, Any] = {"schema": "nfvperf-run", "schema_version": run.schema_version or SCHEMA_VERSION}
    rd = {k: getattr(run, k) for k in RUN_FIELDS}
    rd.update(started_at=_iso(run.started_at), finished_at=_iso(run.finished_at),
              config=run.config or {}, environment=run.environment or {})
    out["run"] = rd
    tests = []
    for t in run.tests:
        td = {k: getattr(t, k) for k in TEST_FIELDS}
        td.update(started_at=_iso(t.started_at), finished_at=_iso(t.finished_at), params=t.params or {},
                  traffic=t.traffic or {}, topology=t.topology or {}, study=t.study)
        td["trials"] = [dict({k: getattr(tr, k) for k in TRIAL_FIELDS}, at=_iso(tr.at),
                             context=tr.context or {}, detail=tr.detail or {}) for tr in t.trials]
        td["results"] = [{"kind": r.kind, "value_pps": r.value_pps, "data": r.data or {}} for r in t.results]
        tests.append(td)
    out["tests"] = tests
    return out


CSV_COLUMNS = ("run_uid", "suite", "test", "method", "frame_size_b", "test_status", "seq", "at",
               "duration_s", "load_pps", "sent", "received", "lost", "loss_ratio", "valid",
               "latency_min_ns", "latency_avg_ns", "latency_max_ns", "context")


def run_to_csv_rows(run: Run) -> Iterable[dict[str, Any]]:
    for t in run.tests:
        for tr in t.trials:
            lat = (tr.detail or {}).get("latency") or {}
            yield {"run_uid": run.uid, "suite": run.suite, "test": t.name, "method": t.method,
                   "frame_size_b": t.frame_size_b, "test_status": t.status, "seq": tr.seq,
                   "at": _iso(tr.at), "duration_s": tr.duration_s, "load_pps": tr.load_pps,
                   "sent": tr.sent, "received": tr.received,
                   "lost": (tr.detail or {}).get("lost", max(0, tr.sent - tr.received)),
                   "loss_ratio": tr.loss_ratio, "valid": int(bool(tr.valid)),
                   "latency_min_ns": lat.get("min_ns"), "latency_avg_ns": lat.get("avg_ns"),
                   "latency_max_ns": lat.get("max_ns"),
                   "context": json.dumps(tr.context or {}, sort_keys=True)}
