"""``nfvperf trend`` and ``nfvperf gate``: options to calls (the CLI's parsers stay in cli.py)."""
from __future__ import annotations

import json
import sys
from typing import Any, Optional

from nfvperf.trend.defaults import DEFAULT_THRESHOLD, DEFAULT_WINDOW
from nfvperf.trend.selector import Selector, SelectorError, add_options


class CommandError(ValueError):
    """Bad input to trend/gate (the CLI prints it and exits 2)."""


def add_trend_options(p: Any) -> None:
    add_options(p)
    p.add_argument("--since", metavar="RUN", help="only runs from this one on (id, tag, -N); e.g. after an "
                   "accepted change")
    p.add_argument("--window", type=int, default=DEFAULT_WINDOW, metavar="N",
                   help=f"change detection over the newest N counted runs of each series (default "
                   f"{DEFAULT_WINDOW}; 0: all; jumpavg's cost grows with N²)")


def add_gate_options(p: Any) -> None:
    add_trend_options(p)
    p.add_argument("--run", default="latest", metavar="RUN", help="the run to gate (default: the newest)")
    p.add_argument("--threshold", type=float, default=100 * DEFAULT_THRESHOLD, metavar="PCT",
                   help="a regression must also exceed this %% (default %(default)s)")
    p.add_argument("--ab", nargs="?", const="latest", metavar="RUN",
                   help="A/B mode: gate the paired ratios of RUN's interleaved study (default the newest run): "
                   "fail when a unit's 95 %% interval lies wholly below 1 - threshold")
    p.add_argument("--verbose", "-v", action="store_true", help="one line per series, not only the regressed")


def _resolve(store: Any, ref: Optional[str]) -> Optional[int]:
    if not ref:
        return None
    from nfvperf.store.db import RunNotFound
    try:
        return int(store.resolve(ref))
    except RunNotFound as e:
        raise CommandError(str(e)) from None


def _window(args: Any) -> int:
    if args.window is not None and args.window < 0:
        raise CommandError(f"--window {args.window}: give 0 (all runs) or a positive number of runs")
    return int(args.window)


def trend_command(store: Any, args: Any, console: Any = None) -> int:
    # imported here, not at the top: every nfvperf command builds the parser that imports this
    # module, and the trend machinery (jumpavg, the store, report) costs ~0.4 s to import
    from nfvperf.trend.compute import trend_json, trend_series
    from nfvperf.trend.render import render
    try:
        sel = Selector.parse(args)
        since, window = _resolve(store, args.since), _window(args)
        if args.json:
            print(json.dumps(trend_json(store, sel, since=since, window=window), indent=2))
            return 0
        with store.session() as s:
            trends = trend_series(s, sel, since=since, window=window)
    except SelectorError as e:
        raise CommandError(str(e)) from None
    if console is None:
        from nfvperf.report.terminal import console_for
        console = console_for()
    render(trends, console, points=True if args.points else None)
    return 0


def gate_command(store: Any, args: Any, out: Any = None) -> int:
    from nfvperf.trend.ab import AbError, gate_ab          # (start-up time: see trend_command)
    from nfvperf.trend.gate import GateError, gate
    out = out or sys.stdout
    if args.threshold is None or not 0 <= args.threshold < 100:
        raise CommandError(f"--threshold {args.threshold}: give a percentage in [0, 100), e.g. 2")
    thr = args.threshold / 100.0
    try:
        if args.ab:
            res: Any = gate_ab(store, _resolve(store, args.ab), thr, metric=args.metric)
            lines = res.lines()
        else:
            res = gate(store, Selector.parse(args), run=_resolve(store, args.run), threshold=thr,
                       since=_resolve(store, args.since), window=_window(args))
            lines = res.lines(verbose=args.verbose)
    except (SelectorError, GateError, AbError) as e:
        raise CommandError(str(e)) from None
    for line in lines:
        print(line, file=out)
    return int(res.exit_code)
