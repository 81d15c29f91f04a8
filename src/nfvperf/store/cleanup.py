"""``nfvperf cleanup [--tag T] [--dry-run] [--force] [--db URL]``: remove what killed runs left behind.

Two parts:

* on this host (root), everything a run named with its tag: processes, network namespaces, links,
  hugepage files, DPDK runtime directories, sockets (:func:`nfvperf.host.cleanup.cleanup`);
* in the results store, runs still marked ``running`` whose process is gone (same host, pid gone or
  reused) are marked ``aborted`` (their trials stay); this part needs no root.

It lives in ``store/`` because it is the one command that joins the two: the store may use the
host layer, never the reverse.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Optional, Sequence

from nfvperf.host.cleanup import CleanupReport, cleanup
from sqlalchemy.engine import make_url
from nfvperf.store.db import Store, default_url, resolve_url

def mark_aborted_runs(rep: CleanupReport, db: Optional[str] = None, dry_run: bool = False) -> None:
    """Runs the results store still marks ``running`` whose process is gone (this host): mark them
    ``aborted`` (their trials stay).  ``db``: URL or path, else $NFVPERF_DB or
    ./results/nfvperf.db; a SQLite store that does not exist is not created."""
    url = resolve_url(db) if db else default_url()
    try:
        u = make_url(url)
        if u.get_backend_name() == "sqlite" and u.database and u.database != ":memory:" \
                and not Path(u.database).exists():
            if db:
                rep.errors.append(f"results store: no store at {u.database}")
            return
        store = Store(url, create=False)
        try:
            found = store.stale_runs() if dry_run else store.mark_aborted_runs()
        finally:
            store.close()
    except Exception as e:  # noqa: BLE001 - the store is one part of the clean-up
        rep.errors.append(f"results store {url}: {type(e).__name__}: {e}")
        return
    rep.aborted_runs += [f"run {r.id} ({r.tag}): {note}" for r, note in found]


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="nfvperf cleanup",
                                description="Remove what killed nfvperf runs left behind: processes, "
                                            "network namespaces, veth links, hugepage files, sockets; "
                                            "mark their runs aborted in the results store.")
    p.add_argument("--tag", help="only this run's tag (nfv + 6 hex digits, or the label it was "
                                 "derived from); cleaned even if its owner still runs")
    p.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    p.add_argument("--force", action="store_true", help="also clean runs whose owner is alive")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--db", metavar="URL", help="results store whose killed runs are marked aborted "
                                               "(default $NFVPERF_DB or ./results/nfvperf.db)")
    argv = [a for a in (argv or []) if a != "--"]
    args = p.parse_args(argv)
    store_rep = CleanupReport()
    mark_aborted_runs(store_rep, args.db, dry_run=args.dry_run)    # needs no root
    if os.geteuid() != 0:
        if store_rep.aborted_runs or store_rep.errors:
            print(store_rep.format(args.dry_run))
        print("nfvperf cleanup: needs root (namespaces, links, other users' processes)",
              file=sys.stderr)
        return 2
    rep = cleanup(args.tag, dry_run=args.dry_run, force=args.force)
    rep.aborted_runs, rep.errors = store_rep.aborted_runs, store_rep.errors + rep.errors
    if args.json:
        print(json.dumps(rep.to_dict(), indent=2))
    else:
        print(rep.format(args.dry_run))
    return 1 if rep.errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
