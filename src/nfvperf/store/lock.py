"""One testbed, one job (issue 10, item 4): a lock row per testbed in the results store.

* **Taking** the lock inserts the row with the testbed's name as primary key: on SQLite and on
  PostgreSQL exactly one of two concurrent inserts commits, the other gets an integrity error and
  reads who holds the testbed.
* **Waiting**: with ``wait_s`` > 0 the taker polls until the holder releases (a progress line names
  the holder now and then), else it fails at once with :class:`TestbedLocked` naming the run, the
  controller host, the pid and since when.
* **Stale** locks of dead runs are taken over (with a note): a holder on *this* controller whose
  process is gone (pid gone or reused, as for ``nfvperf history``'s killed runs), or a holder on
  any controller whose heartbeat is older than ``stale_after_s``.  A live process on this controller
  keeps its lock however old its heartbeat.  The take-over is one conditional UPDATE on the row as
  it was read, so two takers cannot both win.
* **Heartbeat**: the holder refreshes ``heartbeat_at`` every ``heartbeat_s`` from a thread
  (:class:`HeldLock`); times are the database server's clock, so controllers with skewed clocks
  still agree on the age of a heartbeat.
* **Release** deletes the row if it is still ours (the runner does it in a ``finally``: at the
  run's end, on failure and on Ctrl-C/SIGTERM; after ``kill -9`` the lock goes stale instead).
"""
from __future__ import annotations

import datetime as dt
import getpass
import os
import socket
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Optional, cast

from sqlalchemy import delete, func, select, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from nfvperf.store.db import Store, process_gone, process_starttime
from nfvperf.store.models import TestbedLock

#: a holder on another controller whose heartbeat is older than this is taken as dead
DEFAULT_STALE_AFTER_S = 120.0
#: how often the holder refreshes its heartbeat
DEFAULT_HEARTBEAT_S = 10.0


class LockError(RuntimeError):
    """The testbed lock could not be taken or was lost."""


@dataclass
class LockHolder:
    """Who holds (or held) a testbed: read from the lock row."""

    testbed: str
    run_uid: str
    hostname: str
    pid: int
    pid_starttime: Optional[int]
    user: Optional[str]
    acquired_at: dt.datetime
    heartbeat_at: dt.datetime
    heartbeat_age_s: Optional[float] = None     # at the time it was read, database clock

    def describe(self) -> str:
        age = f", last heartbeat {self.heartbeat_age_s:.0f} s ago" if self.heartbeat_age_s is not None else ""
        who = f"{self.user}@" if self.user else ""
        return (f"run nfv{self.run_uid} (pid {self.pid} on controller {who}{self.hostname}, since "
                f"{self.acquired_at:%Y-%m-%d %H:%M:%S} UTC{age})")


class TestbedLocked(LockError):
    """The testbed is held by a live run (and waiting, if asked, did not see it released)."""

    __test__ = False

    def __init__(self, holder: LockHolder, waited_s: float = 0.0):
        self.holder = holder
        self.waited_s = waited_s
        waited = f" after waiting {waited_s:.0f} s" if waited_s > 0 else ""
        super().__init__(f"testbed {holder.testbed!r} is locked by {holder.describe()}{waited}; "
                         f"nothing was run. Wait for it with --wait-lock SECONDS, or, if that run is "
                         f"dead on another controller, its lock goes stale {DEFAULT_STALE_AFTER_S:.0f} s "
                         f"after its last heartbeat")


def db_now(s: Session) -> dt.datetime:
    """The database server's current time, naive UTC (SQLite: UTC already; PostgreSQL: aware)."""
    v = s.scalar(select(func.current_timestamp()))
    if isinstance(v, str):                       # a SQLite driver without type detection
        v = dt.datetime.fromisoformat(v)
    if not isinstance(v, dt.datetime):
        raise LockError(f"the database returned {v!r} for CURRENT_TIMESTAMP")
    if v.tzinfo is not None:
        v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return v


def _holder(row: TestbedLock, now: Optional[dt.datetime]) -> LockHolder:
    age = (now - row.heartbeat_at).total_seconds() if now is not None else None
    return LockHolder(testbed=row.testbed, run_uid=row.run_uid, hostname=row.hostname, pid=row.pid,
                      pid_starttime=row.pid_starttime, user=row.user, acquired_at=row.acquired_at,
                      heartbeat_at=row.heartbeat_at, heartbeat_age_s=age)


def read_holder(store: Store, testbed: str) -> Optional[LockHolder]:
    """Who holds ``testbed`` now (None: free)."""
    with store.session() as s:
        row = s.get(TestbedLock, testbed)
        return _holder(row, db_now(s)) if row is not None else None


def list_locks(store: Store) -> list[LockHolder]:
    with store.session() as s:
        now = db_now(s)
        return [_holder(r, now) for r in s.scalars(select(TestbedLock).order_by(TestbedLock.testbed))]


def force_release(store: Store, holder: LockHolder) -> bool:
    """Delete ``holder``'s lock row if it is still that run's (``nfvperf testbed unlock``)."""
    with store.session() as s:
        res = cast(CursorResult, s.execute(delete(TestbedLock).where(TestbedLock.testbed == holder.testbed,
                                                                     TestbedLock.run_uid == holder.run_uid)))
        s.commit()
    return res.rowcount == 1


def staleness(holder: LockHolder, stale_after_s: float = DEFAULT_STALE_AFTER_S,
              hostname: Optional[str] = None) -> Optional[str]:
    """None if the holder may be alive, else why its lock is stale."""
    here = hostname or socket.gethostname()
    if holder.hostname == here:
        if process_gone(holder.pid, holder.pid_starttime):
            return f"its process {holder.pid} on this controller ({here}) is gone"
        return None
    if holder.heartbeat_age_s is not None and holder.heartbeat_age_s > stale_after_s:
        return (f"its last heartbeat is {holder.heartbeat_age_s:.0f} s old (limit {stale_after_s:.0f} s) "
                f"and it runs on another controller ({holder.hostname})")
    return None


@dataclass
class Claim:
    """Who is taking the lock: this process on this controller for run ``run_uid``."""

    run_uid: str
    hostname: str
    pid: int
    pid_starttime: Optional[int]
    user: Optional[str]

    @classmethod
    def here(cls, run_uid: str) -> "Claim":
        try:
            user: Optional[str] = getpass.getuser()
        except (KeyError, OSError):
            user = None
        return cls(run_uid=run_uid, hostname=socket.gethostname(), pid=os.getpid(),
                   pid_starttime=process_starttime(os.getpid()), user=user)


def _try_insert(store: Store, testbed: str, claim: Claim) -> Optional[dt.datetime]:
    """Insert the lock row; its acquired_at on success, None when someone holds the testbed."""
    with store.session() as s:
        now = db_now(s)
        s.add(TestbedLock(testbed=testbed, **asdict(claim), acquired_at=now, heartbeat_at=now))
        try:
            s.commit()
        except IntegrityError:
            s.rollback()
            return None
        return now


def _take_over(store: Store, holder: LockHolder, claim: Claim) -> Optional[dt.datetime]:
    """Replace a stale holder's row by ours if it is still exactly the row we judged; else None."""
    with store.session() as s:
        now = db_now(s)
        res = cast(CursorResult, s.execute(
            update(TestbedLock)
            .where(TestbedLock.testbed == holder.testbed, TestbedLock.run_uid == holder.run_uid,
                   TestbedLock.heartbeat_at == holder.heartbeat_at)
            .values(**asdict(claim), acquired_at=now, heartbeat_at=now)))
        s.commit()
        return now if res.rowcount == 1 else None


def acquire(store: Store, testbed: str, run_uid: str, *, wait_s: float = 0.0, poll_s: float = 1.0,
            stale_after_s: float = DEFAULT_STALE_AFTER_S, heartbeat_s: float = DEFAULT_HEARTBEAT_S,
            say: Optional[Callable[[str], None]] = None, report_every_s: float = 10.0,
            claim: Optional[Claim] = None) -> "HeldLock":
    """Take the lock on ``testbed`` for run ``run_uid`` (see the module doc); returns the held
    lock with its heartbeat running.  Raises :class:`TestbedLocked` when a live run holds it
    (after ``wait_s`` seconds of waiting)."""
    say = say or (lambda _m: None)
    claim = claim or Claim.here(run_uid)
    t0 = time.monotonic()
    last_report = -1e9
    took_over: Optional[str] = None
    while True:
        got = _try_insert(store, testbed, claim)
        holder = None if got else read_holder(store, testbed)
        if got is None and holder is not None:
            note = staleness(holder, stale_after_s, claim.hostname)
            if note:
                got = _take_over(store, holder, claim)
                if got is not None:
                    took_over = f"took over the stale lock of {holder.describe()}: {note}"
                    say(f"testbed {testbed}: {took_over}")
        if got is not None:
            lock = HeldLock(store, testbed, claim, got, heartbeat_s=heartbeat_s,
                            waited_s=time.monotonic() - t0, took_over=took_over)
            lock.start()
            return lock
        if holder is None:              # released between our insert and our read: try again
            continue
        waited = time.monotonic() - t0
        if waited >= wait_s:
            raise TestbedLocked(holder, waited)
        if waited - last_report >= report_every_s:
            say(f"testbed {testbed} is locked by {holder.describe()}; waiting "
                f"(up to {wait_s - waited:.0f} s more)")
            last_report = waited
        time.sleep(min(poll_s, max(0.05, wait_s - waited)))


class HeldLock:
    """A lock this process holds: a heartbeat thread keeps it fresh until :meth:`release`."""

    def __init__(self, store: Store, testbed: str, claim: Claim, acquired_at: dt.datetime, *,
                 heartbeat_s: float = DEFAULT_HEARTBEAT_S, waited_s: float = 0.0,
                 took_over: Optional[str] = None):
        self.store, self.testbed, self.claim = store, testbed, claim
        self.acquired_at, self.heartbeat_s = acquired_at, heartbeat_s
        self.waited_s, self.took_over = waited_s, took_over
        self.lost: Optional[str] = None       # set when the row was no longer ours at a heartbeat
        self.released = False
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._beat, name=f"lock-{self.testbed}", daemon=True)
        self._thread.start()

    def heartbeat(self) -> bool:
        """Refresh the heartbeat now; False (and :attr:`lost` set) when the row is not ours."""
        with self.store.session() as s:
            res = cast(CursorResult, s.execute(
                update(TestbedLock).where(TestbedLock.testbed == self.testbed,
                                          TestbedLock.run_uid == self.claim.run_uid)
                .values(heartbeat_at=db_now(s))))
            s.commit()
        if res.rowcount != 1:
            self.lost = (f"the lock on testbed {self.testbed} is no longer held by run "
                         f"nfv{self.claim.run_uid} (taken over as stale?)")
            return False
        return True

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            try:
                if not self.heartbeat():
                    return
            except Exception:  # noqa: BLE001 - a database hiccup: try again at the next beat
                continue

    def release(self) -> bool:
        """Stop the heartbeat and delete the row if it is still ours; True if it was deleted."""
        if os.getpid() != self.claim.pid:      # a forked child never frees its parent's lock
            return False
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.heartbeat_s + 5)
        if self.released:
            return False
        self.released = True
        with self.store.session() as s:
            res = cast(CursorResult, s.execute(
                delete(TestbedLock).where(TestbedLock.testbed == self.testbed,
                                          TestbedLock.run_uid == self.claim.run_uid)))
            s.commit()
        return res.rowcount == 1

    def record(self) -> dict[str, Any]:
        """What the run keeps about its lock (environment["testbed_lock"])."""
        return {"testbed": self.testbed, "acquired_at": self.acquired_at.isoformat(),
                "waited_s": round(self.waited_s, 3), "took_over": self.took_over}

    def __enter__(self) -> "HeldLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
