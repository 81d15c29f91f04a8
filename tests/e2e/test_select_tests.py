"""``nfvperf run SUITE --test NAME`` runs part of a suite (issue 29 item 3): the named tests run
and are stored, the others do not; ``validate`` takes the same option; a name no test has is
refused before anything runs."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           COLUMNS="200")


def nfv(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nfvperf", *args], capture_output=True, text=True,
                          cwd=REPO, env=ENV, timeout=300)


def test_run_one_test_and_a_glob(tmp_path: Path) -> None:
    db = str(tmp_path / "r.db")
    p = nfv("run", "sim-tour", "--tg", "sim", "--quick", "--db", db, "--out", str(tmp_path / "out"),
            "--test", "latency", "--test", "throughput-*-flows")
    assert p.returncode == 0, p.stdout + p.stderr
    names = {n for (n,) in sqlite3.connect(db).execute("select name from tests where run_id=1")}
    assert names == {"latency", "throughput-1k-flows"}, names
    # the suite has 12 tests; the other ten (throughput, reset, back_to_back, ...) did not run
    assert "reset 64 B" not in p.stdout and "back_to_back" not in p.stdout


def test_validate_counts_only_the_selected_tests() -> None:
    p = nfv("validate", "sim-tour", "--quick", "--tg", "sim", "--test", "reset")
    assert p.returncode == 0, p.stderr
    assert "1 test(s)" in p.stdout, p.stdout


def test_unknown_test_is_refused_naming_the_tests(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    p = nfv("run", "sim-tour", "--tg", "sim", "--quick", "--db", str(db), "--test", "throughput-9*")
    assert p.returncode == 2
    assert "--test throughput-9*: no test of suite 'sim-tour'" in p.stderr
    assert "throughput-pvp" in p.stderr                    # the names a user can pick from
    assert not db.exists()                                 # nothing was run or written
