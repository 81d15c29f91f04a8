"""``nfvperf testbed check | prepare | locks | unlock``: commands on a testbed file (issue 10)."""
from __future__ import annotations

import argparse
import json
from contextlib import closing
from pathlib import Path
from typing import Any

from nfvperf.cli_base import EXIT_FAILED, EXIT_OK, CliError, _open_store


def cmd_testbed_check(args: argparse.Namespace) -> int:
    """``nfvperf testbed check FILE``: the preflight of every host, one table."""
    from nfvperf.testbed.hosts import check_testbed, format_check_table
    from nfvperf.testbed.spec import TestbedError, load_testbed
    try:
        spec = load_testbed(args.testbed)
    except TestbedError as e:
        raise CliError(str(e)) from None
    rows = check_testbed(spec, dut=args.dut)
    if args.json:
        print(json.dumps([r.to_dict() for r in rows], indent=2))
    else:
        print(f"testbed {spec.name}: {len(spec.hosts)} host(s)")
        print(format_check_table(rows))
    bad = [r for r in rows if r.required and r.status == "fail"]
    return 1 if bad else EXIT_OK


def _add_testbed_parser(sub: Any) -> Any:
    """``nfvperf testbed check|prepare|locks|unlock``: commands on a testbed file (hosts, SSH,
    NICs, cabling); returns the group's subparsers (prepare, locks, unlock are added to it)."""
    tb = sub.add_parser("testbed", help="commands on a testbed file (several hosts over SSH)")
    tsub = tb.add_subparsers(dest="testbed_cmd", metavar="WHAT")
    tc = tsub.add_parser("check", help="run the preflight on every host over SSH; one table")
    tc.add_argument("testbed", help="testbed YAML")
    tc.add_argument("--dut", default="ovs-dpdk", help="the DUT adapter whose binaries the DUT "
                    "host must have (default ovs-dpdk)")
    tc.add_argument("--json", action="store_true", help="the rows as JSON")
    tc.set_defaults(func=cmd_testbed_check)
    return tsub


def _add_testbed_parsers(sub: Any, db: argparse.ArgumentParser) -> None:
    tsub = _add_testbed_parser(sub)
    _add_testbed_prepare_parser(tsub)
    _add_testbed_lock_parsers(tsub, db)


def _add_testbed_filters(history: argparse.ArgumentParser, compare: argparse.ArgumentParser) -> None:
    """``--testbed NAME`` of ``history`` and ``compare`` (issue 10 item 6)."""
    history.add_argument("--testbed", metavar="NAME", help="only the runs on testbed NAME (its name:, not the file)")
    compare.add_argument("--testbed", metavar="NAME", help="runs on testbed NAME only: latest and -N count its "
                         "runs, a run that ran elsewhere is refused")


def _add_testbed_prepare_parser(tsub: Any) -> None:
    p = tsub.add_parser("prepare", help="prepare the testbed's hosts with Ansible (packages, hugepages, "
                        "kernel command line advice, vfio-pci, irqbalance off)",
                        description="Prepare the testbed's hosts with the repository's Ansible playbook "
                        "(ansible/prepare.yml). SSH host keys come from the testbed file only: an unknown "
                        "or changed key is refused. Never reboots; the kernel command line is advice.")
    p.add_argument("testbed", help="testbed YAML file")
    p.add_argument("--check", action="store_true", help="dry run (Ansible check mode): report, change nothing")
    p.add_argument("--limit", metavar="HOST", help="only this host of the testbed")
    p.add_argument("--inventory-dir", metavar="DIR", help="write (and keep) the inventory, known_hosts and "
                   "ansible.cfg in DIR instead of a temporary directory")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more Ansible output (-v ... -vvvv)")
    p.set_defaults(func=cmd_testbed_prepare)


def cmd_testbed_prepare(args: argparse.Namespace) -> int:
    from nfvperf.testbed.prepare import run_prepare, summary_lines
    from nfvperf.testbed.spec import load_testbed
    spec = load_testbed(args.testbed)                       # TestbedError: exit 2, naming the field
    res = run_prepare(spec, check=args.check, limit=args.limit, verbose=args.verbose,
                      inventory_dir=Path(args.inventory_dir) if args.inventory_dir else None)
    for line in summary_lines(spec, res):
        print(line)
    return EXIT_OK if res.ok else EXIT_FAILED


def _add_testbed_lock_parsers(tsub: Any, db: argparse.ArgumentParser) -> None:
    lk = tsub.add_parser("locks", parents=[db], help="which testbeds are locked, by which run")
    lk.set_defaults(func=cmd_testbed_locks)
    ul = tsub.add_parser("unlock", parents=[db], help="free a testbed whose lock is stale (--force: any lock)")
    ul.add_argument("name", help="the testbed's name:")
    ul.add_argument("--force", action="store_true", help="free it even if its holder may be alive")
    ul.set_defaults(func=cmd_testbed_unlock)


def cmd_testbed_locks(args: argparse.Namespace) -> int:
    from nfvperf.store.lock import list_locks, staleness
    with closing(_open_store(args)) as store:
        locks = list_locks(store)
    if not locks:
        print("no testbed is locked")
    for h in locks:
        note = staleness(h)
        print(f"{h.testbed}: {h.describe()}" + (f" — STALE: {note}" if note else ""))
    return EXIT_OK


def cmd_testbed_unlock(args: argparse.Namespace) -> int:
    from nfvperf.store.lock import force_release, read_holder, staleness
    with closing(_open_store(args)) as store:
        h = read_holder(store, args.name)
        if h is None:
            print(f"testbed {args.name} is not locked")
            return EXIT_OK
        note = staleness(h)
        if not note and not args.force:
            raise CliError(f"testbed {args.name} is held by {h.describe()}, which may be alive; "
                           f"--force frees it anyway")
        force_release(store, h)
        print(f"testbed {args.name}: freed the lock of {h.describe()}" + (f" ({note})" if note else " (forced)"))
    return EXIT_OK
