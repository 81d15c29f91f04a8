"""``nfvperf report | history | compare | trend | gate | export | import | site``: the commands on
the results store."""
from __future__ import annotations

import argparse
import csv
import json
import sys
from contextlib import closing
from functools import partial
from pathlib import Path
from typing import Any, Callable, Optional

from nfvperf.cli_base import EXIT_OK, CliError, _load, _open_store, _store_url
from nfvperf.trend.commands import CommandError, add_gate_options, add_trend_options, gate_command, trend_command


def cmd_report(args: argparse.Namespace) -> int:
    from nfvperf.report.terminal import print_report
    with closing(_open_store(args)) as store:
        run = _load(store, args.run)
        net = args.latency_net_of_harness or None
        if not args.quiet and args.markdown != "-":
            print_report(run, net_of_harness=net)
        html = None
        if args.markdown:
            from nfvperf.report.markdown import render_markdown
            text = render_markdown(run, net_of_harness=net)
            if args.markdown == "-":
                sys.stdout.write(text)
            else:
                Path(args.markdown).write_text(text, encoding="utf-8")
                print(f"Markdown report: {args.markdown}")
        if args.html:
            from nfvperf.report.html import write_html
            html = write_html(run, Path(args.html), net_of_harness=net)
            print(f"HTML report: {html}")
        if args.plots is not None or html is not None:
            _write_plots(run, args.plots or None, html, net)
    return EXIT_OK


def _write_plots(run: Any, directory: Optional[str], html: Optional[Path],
                 net_of_harness: Optional[bool] = None) -> None:
    """The study plots and throughput vs size as PNG and SVG files (default: the run's
    ``report/`` directory); study latency net of the harness as the report."""
    from nfvperf.report.plots import plots_dir, write_plot_files
    where = Path(directory) if directory else plots_dir(run, html)
    try:
        files = write_plot_files(run, where, net_of_harness)
    except OSError as e:
        print(f"plots not written to {where}: {e}", file=sys.stderr)
        return
    if files:
        print(f"plots: {len(files)} files (PNG and SVG) in {where}")


def cmd_history(args: argparse.Namespace) -> int:
    from rich.table import Table

    from nfvperf.report.terminal import console_for
    from nfvperf.store.db import aborted_notice
    with closing(_open_store(args)) as store:
        aborted = store.mark_aborted_runs()
        runs = store.list_runs(args.limit, testbed=args.testbed)
    for r, note in aborted:      # on stderr with --json: stdout stays one JSON document
        print(aborted_notice(r, note), file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps([{"id": r.id, "tag": r.tag, "started_at": r.started_at.isoformat(), "suite": r.suite,
                           "topology": r.topology, "dut": r.dut, "tg": r.tg, "status": r.status,
                           "reason": r.reason, "headline": r.headline, "testbed": r.testbed} for r in runs],
                         indent=2))
        return EXIT_OK
    on = f" on testbed {args.testbed}" if args.testbed else ""
    if not runs:
        print(f"no runs{on} in the store yet")
        return EXIT_OK
    t = Table(title=f"nfvperf runs{on} (newest first)", title_justify="left")
    for c in ("ID", "Run", "Date (UTC)", "Suite", "Topology", "DUT", "TG", "Testbed", "Status", "Headline"):
        t.add_column(c)
    from nfvperf.store.db import run_liveness
    for r in runs:
        status = r.status + (" (killed?)" if run_liveness(r) else "")
        t.add_row(str(r.id), r.tag, r.started_at.strftime("%Y-%m-%d %H:%M"), r.suite, r.topology, r.dut, r.tg,
                  r.testbed or "(local)", status, r.headline or "—")
    console_for().print(t)
    return EXIT_OK


def cmd_compare(args: argparse.Namespace) -> int:
    from nfvperf.report.compare import compare_many, render
    from nfvperf.report.terminal import console_for
    refs = [args.a] + (list(args.others) or ["latest"])
    with closing(_open_store(args)) as store:
        runs = [_load(store, r, args.testbed) for r in refs]
    cmp = compare_many(runs, threshold=args.threshold / 100.0)
    render(cmp, console_for())
    return EXIT_OK


def _trend_store(args: argparse.Namespace) -> Any:
    """The store, migrated in place when older (Store() adds missing columns and indexes); refused
    with the way to migrate it when that fails (e.g. a read-only copy or role)."""
    from sqlalchemy.exc import SQLAlchemyError
    try:
        return _open_store(args)
    except SQLAlchemyError as e:
        raise CliError(f"cannot open the store {_store_url(args)} (an older schema is migrated in place on "
                       f"open, which needs write access): {type(e).__name__}: {str(e).splitlines()[0]}; migrate "
                       f"it once with write access: nfvperf history --db URL") from None


def _trend_command(args: argparse.Namespace, command: Callable[[Any, argparse.Namespace], int]) -> int:
    """``nfvperf trend`` / ``gate``: ``command`` (from nfvperf.trend.commands) on the store."""
    store = _trend_store(args)
    try:
        return command(store, args)
    except CommandError as e:
        raise CliError(str(e)) from None
    finally:
        store.close()


def cmd_export(args: argparse.Namespace) -> int:
    from nfvperf.store.db import CSV_COLUMNS, run_to_csv_rows, run_to_dict
    with closing(_open_store(args)) as store:
        run = _load(store, args.run)
    out = open(args.output, "w", newline="", encoding="utf-8") if args.output else sys.stdout
    try:
        if args.format == "json":
            json.dump(run_to_dict(run), out, indent=2, sort_keys=False)
            out.write("\n")
        else:
            w = csv.DictWriter(out, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
            w.writeheader()
            w.writerows(run_to_csv_rows(run))
    finally:
        if args.output:
            out.close()
    if args.output:
        print(f"wrote {args.output}", file=sys.stderr)
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    try:
        data = json.loads(Path(args.file).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CliError(f"cannot read {args.file}: {e}") from None
    if not isinstance(data, dict) or data.get("schema") != "nfvperf-run":
        raise CliError(f"{args.file} is not an nfvperf run export (schema 'nfvperf-run')")
    with closing(_open_store(args, must_exist=False)) as store:
        rid = store.import_dict(data, new_uid=args.new_id)
    print(f"imported as run {rid}")
    return EXIT_OK


def cmd_site(args: argparse.Namespace) -> int:
    """``nfvperf site DIR``: build or update the static results site (docs/site.md)."""
    from nfvperf.site import PARTS, build_site
    out = Path(args.dir)
    if out.exists() and not out.is_dir():
        raise CliError(f"site DIR: {out} is a file; give a directory (created if missing)")
    with closing(_open_store(args)) as store:
        rep = build_site(store, out, parts=args.only or tuple(PARTS),
                         log=lambda m: print(m, file=sys.stderr, flush=True))
    if args.json:
        print(json.dumps(rep.to_dict(), indent=2))
        return EXIT_OK
    for n in rep.notes:
        print(f"note: {n}")
    print(f"site {out}: {len(rep.written)} page(s) written, {rep.unchanged} unchanged, {len(rep.removed)} removed "
          f"in {rep.seconds:.1f} s; open {out / 'index.html'}")
    return EXIT_OK


def _add_site_parser(sub: Any, db: argparse.ArgumentParser) -> None:
    """``nfvperf site DIR``: the static results site (issue 17 item 4)."""
    st = sub.add_parser("site", parents=[db], help="write a static results site (runs, reports, studies, "
                        "comparisons, trends) to DIR; incremental", description="Build or update a static site "
                        "from the store: an index of runs (filterable), each run's report, study and comparison "
                        "pages, and trend pages. Works from file:// and any web server. Only pages whose inputs "
                        "changed are written again (DIR/manifest.json). See docs/site.md.")
    st.add_argument("dir", metavar="DIR", help="output directory (created if missing)")
    st.add_argument("--only", action="append", choices=("index", "runs", "studies", "compare", "trends"),
                    help="build only this part (repeatable); the other parts' pages are left as they are")
    st.add_argument("--json", action="store_true", help="print what was written as JSON")
    st.set_defaults(func=cmd_site)


def _add_trend_parsers(sub: Any, db: argparse.ArgumentParser) -> None:
    tr = sub.add_parser("trend", parents=[db], help="series by configuration over the runs: values, groups "
                        "and changes (regression/progression) found by jumpavg; see docs/trending.md")
    add_trend_options(tr)
    tr.add_argument("--json", action="store_true", help="print one JSON object (the shape in docs/trending.md)")
    tr.add_argument("--points", action="store_true", help="list every series' points (default: when one series)")
    tr.set_defaults(func=partial(_trend_command, command=trend_command))
    gt = sub.add_parser("gate", parents=[db], help="CI gate: exit 1 when the newest run regressed against the "
                        "history of its series beyond the noise (--ab: two builds in one interleaved run)")
    add_gate_options(gt)
    gt.set_defaults(func=partial(_trend_command, command=gate_command))
