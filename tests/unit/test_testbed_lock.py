"""The testbed lock (issue 10 item 4) on SQLite and on a real PostgreSQL cluster (pg_url fixture):
atomic take, refusal naming the holder, waiting, stale locks of dead runs taken over, heartbeat."""
from __future__ import annotations

import datetime as dt
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import update

from nfvperf.store import Store
from nfvperf.store.lock import (Claim, TestbedLocked, acquire, list_locks, read_holder, staleness)
from nfvperf.store.models import TestbedLock

SRC = str(Path(__file__).resolve().parents[2] / "src")


@pytest.fixture
def lock_store(any_store):
    return any_store


def test_testbed_lock_take_and_release(lock_store: Store) -> None:
    lock = acquire(lock_store, "lab1", "aa11bb")
    h = read_holder(lock_store, "lab1")
    assert h is not None and h.run_uid == "aa11bb" and h.pid == os.getpid()
    assert h.hostname == socket.gethostname() and h.heartbeat_age_s is not None and h.heartbeat_age_s < 30
    assert [x.testbed for x in list_locks(lock_store)] == ["lab1"]
    other = acquire(lock_store, "lab2", "cc22dd")       # another testbed is independent
    assert lock.release() is True
    assert read_holder(lock_store, "lab1") is None
    assert lock.release() is False                       # twice is harmless
    assert [x.testbed for x in list_locks(lock_store)] == ["lab2"]
    other.release()


def test_testbed_lock_second_run_refused_naming_holder(lock_store: Store) -> None:
    lock = acquire(lock_store, "lab1", "aa11bb")
    try:
        with pytest.raises(TestbedLocked) as ei:
            acquire(lock_store, "lab1", "ff00ff")
        msg = str(ei.value)
        assert "nfvaa11bb" in msg and f"pid {os.getpid()}" in msg and socket.gethostname() in msg
        assert "since" in msg and "--wait-lock" in msg
        assert ei.value.holder.run_uid == "aa11bb"
        assert read_holder(lock_store, "lab1").run_uid == "aa11bb"     # the holder keeps it
    finally:
        lock.release()


def test_testbed_lock_waits_for_release(lock_store: Store) -> None:
    lock = acquire(lock_store, "lab1", "aa11bb")
    timer = threading.Timer(1.5, lock.release)
    timer.start()
    said: list[str] = []
    t0 = time.monotonic()
    try:
        second = acquire(lock_store, "lab1", "ff00ff", wait_s=20, poll_s=0.2, say=said.append)
    finally:
        timer.join()
    waited = time.monotonic() - t0
    assert 1.0 < waited < 15
    assert said and "nfvaa11bb" in said[0] and "waiting" in said[0]
    assert read_holder(lock_store, "lab1").run_uid == "ff00ff"
    assert second.record()["waited_s"] >= 1.0
    second.release()


def test_testbed_lock_wait_times_out(lock_store: Store) -> None:
    lock = acquire(lock_store, "lab1", "aa11bb")
    t0 = time.monotonic()
    try:
        with pytest.raises(TestbedLocked) as ei:
            acquire(lock_store, "lab1", "ff00ff", wait_s=1.0, poll_s=0.2)
    finally:
        lock.release()
    assert time.monotonic() - t0 >= 1.0
    assert "after waiting" in str(ei.value)


_HOLDER = """
import sys, time
from nfvperf.store import Store
from nfvperf.store.lock import acquire
lock = acquire(Store(sys.argv[1]), "lab1", "dead01")
print("held", flush=True)
time.sleep(600)
"""


def test_testbed_lock_of_killed_run_taken_over(lock_store: Store) -> None:
    """A real process takes the lock and is killed -9 (no release): the next run on this controller
    sees the holder's process gone and takes the lock over, saying so."""
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.Popen([sys.executable, "-c", _HOLDER, lock_store.url], stdout=subprocess.PIPE, text=True,
                         env=env)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "held"
        with pytest.raises(TestbedLocked):            # alive: refused
            acquire(lock_store, "lab1", "ff00ff")
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
    assert read_holder(lock_store, "lab1").pid == p.pid        # kill -9 left the row
    said: list[str] = []
    lock = acquire(lock_store, "lab1", "ff00ff", say=said.append)
    try:
        assert lock.took_over and "nfvdead01" in lock.took_over and "gone" in lock.took_over
        assert said and "stale" in said[0] and f"process {p.pid}" in said[0]
        assert read_holder(lock_store, "lab1").run_uid == "ff00ff"
    finally:
        lock.release()


def _foreign_holder(store: Store, age_s: float) -> None:
    """A lock row of a run on another controller whose last heartbeat is ``age_s`` old."""
    claim = Claim(run_uid="0fe1a2", hostname="controller-elsewhere", pid=4242, pid_starttime=1, user="ci")
    lock = acquire(store, "lab1", "0fe1a2", claim=claim, heartbeat_s=3600)
    lock._stop.set()                        # that controller died: no more heartbeats
    h = read_holder(store, "lab1")
    with store.session() as s:
        s.execute(update(TestbedLock).where(TestbedLock.testbed == "lab1")
                  .values(heartbeat_at=h.heartbeat_at - dt.timedelta(seconds=age_s)))
        s.commit()


def test_testbed_lock_other_controller_fresh_heartbeat_kept(lock_store: Store) -> None:
    _foreign_holder(lock_store, 5)
    with pytest.raises(TestbedLocked) as ei:
        acquire(lock_store, "lab1", "ff00ff", stale_after_s=120)
    assert "controller-elsewhere" in str(ei.value) and "ci@" in str(ei.value)


def test_testbed_lock_other_controller_old_heartbeat_taken_over(lock_store: Store) -> None:
    _foreign_holder(lock_store, 600)
    h = read_holder(lock_store, "lab1")
    assert h.heartbeat_age_s is not None and h.heartbeat_age_s > 590
    assert "another controller" in (staleness(h, 120) or "")
    lock = acquire(lock_store, "lab1", "ff00ff", stale_after_s=120)
    try:
        assert lock.took_over and "heartbeat" in lock.took_over and "controller-elsewhere" in lock.took_over
    finally:
        lock.release()


def test_testbed_lock_heartbeat_and_loss(lock_store: Store) -> None:
    lock = acquire(lock_store, "lab1", "aa11bb", heartbeat_s=0.3)
    try:
        first = read_holder(lock_store, "lab1").heartbeat_at
        time.sleep(2.2)                      # SQLite's CURRENT_TIMESTAMP has 1 s resolution
        assert read_holder(lock_store, "lab1").heartbeat_at > first
        with lock_store.session() as s:      # someone took it over as stale
            s.execute(update(TestbedLock).where(TestbedLock.testbed == "lab1").values(run_uid="beef00"))
            s.commit()
        assert lock.heartbeat() is False and lock.lost and "nfvaa11bb" in lock.lost
        assert lock.release() is False       # not ours any more: the new holder's row stays
        assert read_holder(lock_store, "lab1").run_uid == "beef00"
    finally:
        lock.release()


def test_testbed_lock_race_has_one_winner(lock_store: Store) -> None:
    """Eight threads take the same testbed at once: exactly one wins, the others are refused."""
    start = threading.Barrier(8)
    won: list[str] = []
    held = []
    refused: list[str] = []

    def take(i: int) -> None:
        start.wait()
        try:
            held.append(acquire(lock_store, "lab1", f"r{i:05d}", heartbeat_s=3600))
            won.append(held[-1].claim.run_uid)
        except TestbedLocked as e:
            refused.append(e.holder.run_uid)

    threads = [threading.Thread(target=take, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(won) == 1 and len(refused) == 7
    assert set(refused) == set(won)          # every loser names the winner
    assert read_holder(lock_store, "lab1").run_uid == won[0]
    held[0].release()
