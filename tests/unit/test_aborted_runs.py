"""A run whose process died without closing its books (kill -9, OOM, power) is marked ``aborted``
by ``nfvperf history`` and ``nfvperf cleanup``; a live run, another host's run and a run without
a recorded pid are left alone; a reused pid (other start time) counts as gone."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from nfvperf.cli import main as cli_main
from nfvperf.store import cleanup
from nfvperf.store import Store
from nfvperf.store.db import process_starttime
from nfvperf.trial import TrialResult


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()                  # reaped: the pid is gone (until the kernel hands it out again)
    return p.pid


def _run(store: Store, **env) -> int:
    run = store.create_run(suite="s", suite_path=None, topology="p-ovs-p", dut="ovs-dpdk", tg="sim",
                           profile="quick", config={"name": "s"}, environment=env)
    t = store.start_test(run.id, name="throughput", method="throughput", frame_size_b=64, params={},
                         traffic={"frame_size_b": 64})
    store.add_trial(t.id, TrialResult(duration_s=1.0, load_pps=1e5, sent=100000, received=100000,
                                      expected=100000))
    return run.id


@pytest.fixture
def runs(tmp_path):
    db = str(tmp_path / "r.db")
    store = Store(db)
    host = socket.gethostname()
    ids = {
        "dead": _run(store, pid=_dead_pid(), hostname=host),
        "live": _run(store, pid=os.getpid(), hostname=host, pid_starttime=process_starttime(os.getpid())),
        "reused": _run(store, pid=os.getpid(), hostname=host,
                       pid_starttime=(process_starttime(os.getpid()) or 0) + 12345),
        "other_host": _run(store, pid=_dead_pid(), hostname=host + "-elsewhere"),
        "no_pid": _run(store),
    }
    yield db, store, ids
    store.close()


def _statuses(store: Store, ids: dict[str, int]) -> dict[str, str]:
    return {k: store.load_run(v).status for k, v in ids.items()}


def test_store_marks_runs_whose_process_is_gone(runs) -> None:
    _db, store, ids = runs
    marked = store.mark_aborted_runs()
    assert sorted(r.id for r, _ in marked) == sorted([ids["dead"], ids["reused"]])
    assert _statuses(store, ids) == {"dead": "aborted", "live": "running", "reused": "aborted",
                                     "other_host": "running", "no_pid": "running"}
    run = store.load_run(ids["dead"])
    assert "is gone" in run.reason and run.finished_at is not None
    (t,) = run.tests
    assert t.status == "aborted" and len(t.trials) == 1        # the finished trial is kept
    assert store.mark_aborted_runs() == []                      # once


def test_history_marks_and_shows_aborted(runs, capsys) -> None:
    db, store, ids = runs
    assert cli_main(["history", "--db", db]) == 0
    out = capsys.readouterr().out
    assert f"run {ids['dead']} (" in out and "marked aborted" in out and "aborted" in out
    assert _statuses(store, ids)["dead"] == "aborted"
    assert cli_main(["history", "--json", "--db", db]) == 0
    hist = {h["id"]: h for h in json.loads(capsys.readouterr().out)}
    assert hist[ids["dead"]]["status"] == "aborted" and "is gone" in hist[ids["dead"]]["reason"]
    assert hist[ids["live"]]["status"] == "running"


def test_cleanup_marks_aborted(runs, capsys) -> None:
    db, store, ids = runs
    rep = cleanup.CleanupReport()
    cleanup.mark_aborted_runs(rep, db, dry_run=True)
    assert len(rep.aborted_runs) == 2 and _statuses(store, ids)["dead"] == "running"
    assert "would mark 2 run(s) aborted" in rep.format(dry_run=True)
    tag = store.load_run(ids["dead"]).tag
    # --tag: as root the host part only looks at this (simulated, resource-less) run's tag
    rc = cleanup.main(["--tag", tag, "--db", db])
    assert rc in (0, 2)          # 2: not root (the store part needs no root and has run)
    assert "marked 2 run(s) aborted" in capsys.readouterr().out
    assert _statuses(store, ids) == {"dead": "aborted", "live": "running", "reused": "aborted",
                                     "other_host": "running", "no_pid": "running"}


def test_cleanup_does_not_create_a_store(tmp_path) -> None:
    rep = cleanup.CleanupReport()
    cleanup.mark_aborted_runs(rep, str(tmp_path / "none.db"))
    assert not (tmp_path / "none.db").exists() and rep.errors and not rep.aborted_runs
