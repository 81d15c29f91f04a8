"""What every ``nfvperf`` command shares: exit codes, bad input (:class:`CliError`), the results
store named by ``--db`` and a run named by id, tag or ``latest``."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Optional

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class CliError(Exception):
    """Bad input: printed as ``error: ...`` with exit code 2."""


def _err(msg: str) -> None:
    print(f"nfvperf: error: {msg}", file=sys.stderr)


def _store_url(args: argparse.Namespace, suite_url: Optional[str] = None) -> str:
    from nfvperf.store import default_url, resolve_url
    if getattr(args, "db", None):
        return resolve_url(args.db)
    if suite_url and not os.environ.get("NFVPERF_DB"):
        return resolve_url(suite_url)
    return default_url()


def _open_store(args: argparse.Namespace, must_exist: bool = True) -> Any:
    from sqlalchemy.engine import make_url

    from nfvperf.store import Store
    url = _store_url(args)
    u = make_url(url)
    if must_exist and u.get_backend_name() == "sqlite" and u.database and u.database != ":memory:" \
            and not Path(u.database).exists():
        raise CliError(f"no results store at {u.database}; run a suite first (nfvperf run ...) or pass --db URL")
    return Store(url)


def _load(store: Any, ref: str, testbed: Optional[str] = None) -> Any:
    from nfvperf.store.db import RunNotFound
    try:
        return store.load_run(ref, testbed) if testbed else store.load_run(ref)
    except RunNotFound as e:
        raise CliError(str(e)) from None


def _suite_path(name: str) -> Path:
    from nfvperf.suite_load import find_suite
    return find_suite(name)
