"""Running the nfvperf CLI from integration tests: the command as a subprocess, and a real run of
a suite whose tag the leak check watches, with its stored export."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def nfvperf(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    return subprocess.run([sys.executable, "-m", "nfvperf", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=timeout, env=env)


def run_suite(suite: Path, tmp_path: Path, leak_check: Any, *extra: str, tg: str = "tgen",
              timeout: float = 300) -> tuple[subprocess.CompletedProcess, str, str]:
    """``nfvperf run`` of ``suite`` into a store under ``tmp_path``; the run's tag is handed to
    the leak check before the exit status is asserted.  Returns (process, run id, store URL)."""
    db = f"sqlite:///{tmp_path / 'store.db'}"
    p = nfvperf("run", str(suite), "--tg", tg, "--db", db, "--out", str(tmp_path / "out"),
                "--no-progress", *extra, timeout=timeout)
    m = re.search(r"run (\d+) \((nfv[0-9a-f]{6})\)", p.stdout + p.stderr)
    assert m, f"no run line:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    leak_check.watch(m.group(2))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p, m.group(1), db


def export(run_id: str, db: str) -> dict[str, Any]:
    """The run as ``nfvperf export --format json`` gives it (``run``, ``tests`` with trials)."""
    e = nfvperf("export", run_id, "--format", "json", "--db", db, timeout=60)
    assert e.returncode == 0, e.stderr
    return json.loads(e.stdout)
