"""Waiting for a run started in a subprocess to store its first trials (shared by the e2e tests)."""
from __future__ import annotations

import sqlite3
import time
from pathlib import Path


def wait_for_trials(db: Path, want: int = 3, timeout_s: float = 60.0) -> int:
    """Poll the SQLite store ``db`` until it holds ``want`` trials or ``timeout_s`` passes; returns
    the count last seen (the store may not exist yet or be mid-creation: counted as 0)."""
    deadline, n = time.monotonic() + timeout_s, 0
    while time.monotonic() < deadline and n < want:
        time.sleep(0.2)
        if db.exists():
            try:
                n = sqlite3.connect(db).execute("select count(*) from trials").fetchone()[0]
            except sqlite3.OperationalError:
                n = 0
    return n
