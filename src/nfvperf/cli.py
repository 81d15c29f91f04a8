"""The ``nfvperf`` command line.

Exit codes: 0 ok, 1 a test failed, 2 bad input (suite, arguments, unknown run), 130 interrupted.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import sys
from contextlib import closing
from pathlib import Path
from typing import Any, Optional, Sequence

from nfvperf import __version__, units
from nfvperf.cli_base import (EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, CliError,  # noqa: F401
                              _err, _store_url, _suite_path)
from nfvperf.cli_calc import _add_calc_parser
from nfvperf.cli_results import (_add_site_parser, _add_trend_parsers, _write_plots, cmd_compare, cmd_export,
                                 cmd_history, cmd_import, cmd_report)
from nfvperf.cli_testbed import _add_testbed_filters, _add_testbed_parsers
from nfvperf.report.ceiling import LOWER_BOUND_NOTE, ceiling_text, is_lower_bound

DEMO_SUITES = ("quick.yaml", "quick-pvp.yaml")


def cmd_validate(args: argparse.Namespace) -> int:
    """The suite checked, then the run plan on this host: the units ``nfvperf run`` with the same
    options would skip, and why (:func:`nfvperf.plan.plan_run`, which the run calls too)."""
    from nfvperf.suite_load import load_suite
    path = _suite_path(args.suite)
    suite = load_suite(path, quick=args.quick, port_kind=args.port_kind)
    if args.test:
        suite.select_tests(args.test)                                 # SuiteError naming --test
    from nfvperf.plan import plan_run, plan_text
    from nfvperf.runner import test_units
    from nfvperf.study import describe, summaries
    testbed = _validate_testbed(args, suite)
    # tgen's per-core self-test (cached next to the results, like the harness ceiling): what a
    # line-rate trial needs of the generator (docs/tgen.md)
    plan = plan_run(suite, args.tg, fit_host=args.fit_host, on_testbed=testbed is not None,
                    rate_dir=Path("results"))
    if args.json:
        print(json.dumps(dict(plan.record(), suite=str(path), **(
            {"testbed": testbed} if testbed else {})), indent=2, default=str))
        return EXIT_USAGE if testbed and testbed["problems"] else EXIT_OK
    if testbed and testbed["problems"]:
        raise CliError(f"{path} on testbed {testbed['name']} ({args.testbed}): "
                       f"{len(testbed['problems'])} problem(s):\n  " + "\n  ".join(testbed["problems"]))
    units = len(test_units(suite))
    on = f" on port_kind {suite.spec.topology.port_kind}" if args.port_kind else ""
    print(f"{path}: ok — suite {suite.name!r}, topology {suite.spec.topology.kind}{on}, "
          f"{len(suite.tests)} test(s), {units} test unit(s), profile {suite.timing.name}")
    for s in summaries(suite.tests):
        print("  " + describe(s))
    for line in plan_text(plan):
        print(line)
    if testbed:
        print(f"testbed {testbed['name']} ({args.testbed}): ok — " + "; ".join(testbed["hosts"]))
    return EXIT_OK


def _validate_testbed(args: argparse.Namespace, suite: Any) -> Optional[dict[str, Any]]:
    """``validate --testbed FILE``: the file checked (TestbedError: exit 2), then what stops the
    suite's topologies on it, found without reaching a host (nfvperf.testbed.hosts.suite_problems)."""
    if not getattr(args, "testbed", None):
        return None
    from nfvperf.runner import test_units, topology_groups
    from nfvperf.testbed.hosts import suite_problems
    from nfvperf.testbed.spec import load_testbed
    from nfvperf.topo.spec import TopologySpec
    tb = load_testbed(args.testbed)                                   # TestbedError -> exit 2
    specs = [t for t, _ in topology_groups(test_units(suite), suite.spec.topology)
             if isinstance(t, TopologySpec)] or [suite.spec.topology]
    problems = list(dict.fromkeys(p for t in specs for p in suite_problems(tb, t)))
    hosts = [f"{n}: {h.role}, " + (f"guest booted for the run, {h.guest.nics} PCI NIC(s)" if h.guest
                                   else f"ssh {h.ssh.address}" if h.ssh else "this machine")
             for n, h in tb.hosts.items()]
    return {"name": tb.name, "problems": problems, "hosts": hosts}


def cmd_run(args: argparse.Namespace) -> int:
    from nfvperf.suite_load import load_suite
    from nfvperf.runner import execute
    from nfvperf.store import Store
    suite = load_suite(_suite_path(args.suite), quick=args.quick,        # SuiteError -> exit 2, nothing written
                       port_kind=args.port_kind)
    if args.test:
        suite.select_tests(args.test)                                 # SuiteError naming --test
    if getattr(args, "repeat", None) is not None:
        suite.set_repeat(args.repeat)                                 # SuiteError naming --repeat
    if getattr(args, "rounds", None) is not None:
        suite.set_rounds(args.rounds)                                 # SuiteError naming --rounds
    problem = {"tgen": _tgen_problem, "iperf3": _iperf3_problem}.get(args.tg, lambda: None)()
    if problem:
        raise CliError(problem)
    testbed = None
    if args.testbed:
        from nfvperf.testbed.spec import load_testbed
        testbed = load_testbed(args.testbed)                          # TestbedError -> exit 2
        from nfvperf.testbed.hosts import suite_problems
        # a testbed with guest: hosts: what `validate --testbed` refuses (the guests cannot boot
        # here, or the suite's topology cannot run on them), before anything is written
        problems = suite_problems(testbed, suite.spec.topology) \
            if testbed.guests() and args.tg != "sim" else []
        if problems:
            raise CliError(f"testbed {testbed.name} ({args.testbed}): the suite cannot run on "
                           "it:\n  " + "\n  ".join(problems))
    if args.wait_lock is not None and (testbed is None or args.wait_lock < 0):
        raise CliError("--wait-lock SECONDS: give --testbed FILE too, and SECONDS >= 0")
    if testbed is not None and getattr(args, "fit_host", False):
        raise CliError("--fit-host fits the suite to this machine; a testbed's hosts are checked by "
                       "`nfvperf testbed check FILE`: drop --fit-host or --testbed")
    url = _store_url(args, suite.spec.store)
    out = Path(args.out or suite.spec.output or "results")
    from nfvperf.runner import CeilingOptions
    ceiling = CeilingOptions(enabled=not args.no_ceiling, refresh=args.refresh_ceiling)
    with closing(Store(url)) as store:
        outcome = _execute_on_testbed(execute, suite, store, args, out, ceiling, testbed)
        run = store.load_run(outcome.run_id)
        if args.report and outcome.status != "interrupted":
            from nfvperf.report.terminal import print_report
            print_report(run, net_of_harness=args.latency_net_of_harness or None)
        html = None
        if args.html:
            from nfvperf.report.html import write_html
            html = write_html(run, Path(args.html), net_of_harness=args.latency_net_of_harness or None)
            print(f"HTML report: {html}")
        if html is not None or any(t.study for t in run.tests):
            _write_plots(run, None, html, args.latency_net_of_harness or None)
        print(f"run {outcome.run_id} ({run.tag}) {outcome.status}; store {url}")
        print(f"see: nfvperf report {outcome.run_id}" + (f" --db {args.db}" if args.db else ""))
        return outcome.exit_code


def _execute_on_testbed(execute: Any, suite: Any, store: Any, args: argparse.Namespace, out: Path,
                        ceiling: Any, testbed: Any) -> Any:
    """``execute`` with the testbed options; a locked or unusable testbed is bad input (exit 2,
    nothing run)."""
    from nfvperf.runner import TestbedUnusable
    from nfvperf.store.lock import TestbedLocked
    try:
        return execute(suite, store=store, tg=args.tg, out_dir=out, show_progress=not args.no_progress,
                       exiting=True, ceiling=ceiling, testbed=testbed, wait_lock_s=args.wait_lock or 0.0,
                       fit_host=bool(getattr(args, "fit_host", False)))
    except (TestbedLocked, TestbedUnusable) as e:
        raise CliError(str(e)) from None


def _iperf3_problem() -> Optional[str]:
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return ("--tg iperf3 needs root (netns, the DUT): run it with sudo, or try --tg sim")
    if not shutil.which("iperf3"):
        return "--tg iperf3 needs iperf3 (apt-get install iperf3)"
    return None


def _tgen_problem() -> Optional[str]:
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return ("--tg tgen needs root (netns, hugepages, DPDK, OVS): run it with sudo, "
                "or try `nfvperf demo --tg sim` / `nfvperf run SUITE --tg sim`")
    try:
        from nfvperf.tg.tgen import find_tgen_binary
    except Exception as e:  # noqa: BLE001
        return f"the tgen client is not available ({e}); try --tg sim"
    try:
        find_tgen_binary()
    except Exception as e:  # noqa: BLE001
        return (f"the traffic generator is not built ({e}): run `make build` (or `make demo`), "
                "or set NFVPERF_TGEN; or try --tg sim")
    return None


def cmd_demo(args: argparse.Namespace) -> int:
    from nfvperf.suite_load import load_suite
    from nfvperf.report.html import write_html
    from nfvperf.report.terminal import print_report
    from nfvperf.runner import execute
    from nfvperf.store import Store
    problem = _tgen_problem() if args.tg == "tgen" else None
    if problem:
        raise CliError(problem)
    suites = [load_suite(_suite_path(s), quick=True) for s in DEMO_SUITES if _suite_path(s).exists()]
    if not suites:
        raise CliError("the shipped demo suites (suites/quick.yaml) are missing")
    out = Path(args.out or "results")
    worst = EXIT_OK
    ids: list[int] = []
    with closing(Store(_store_url(args))) as store:
        for suite in suites:
            outcome = execute(suite, store=store, tg=args.tg, out_dir=out, show_progress=not args.no_progress,
                          exiting=True)
            run = store.load_run(outcome.run_id)
            if outcome.status == "interrupted":
                return EXIT_INTERRUPTED
            print_report(run)
            html = write_html(run, outcome.run_dir / "report.html")
            print(f"HTML report: {html}")
            ids.append(outcome.run_id)
            worst = max(worst, outcome.exit_code)
    db = f" --db {args.db}" if args.db else ""
    print(f"demo done: runs {', '.join(map(str, ids))}; next: nfvperf history{db}"
          + (f"; nfvperf compare {ids[0]} {ids[-1]}{db}" if len(ids) > 1 else ""))
    return worst


def cmd_baseline(args: argparse.Namespace) -> int:
    """``nfvperf baseline``: the harness ceiling alone (tgen through testpmd io), cached."""
    from nfvperf.config import ProfileSpec, TrafficSpec, parse_link_speed
    from nfvperf.suite_load import load_suite
    from nfvperf.store.ceiling import CeilingCache
    from nfvperf.topo import RunContext, TopologySpec
    from nfvperf.topo.ceiling import default_cache_path, harness_ceiling
    problem = _tgen_problem()
    if problem:
        raise CliError(problem.replace("--tg tgen", "baseline"))
    if args.suite:
        suite = load_suite(_suite_path(args.suite))
        topo, traffic, cfg = suite.spec.topology, suite.spec.traffic, suite.spec.ceiling
    else:
        from nfvperf.config import CeilingSpec
        topo, traffic, cfg = TopologySpec(kind="p2p", dut="testpmd"), TrafficSpec(), CeilingSpec()
    upd = {k: getattr(args, k) for k in ("port_kind", "mtu", "tgen_lcores") if getattr(args, k)}
    try:
        topo = TopologySpec.model_validate(dict(topo.model_dump(), **upd))
        if args.link_speed:
            parse_link_speed(args.link_speed)
            traffic = traffic.model_copy(update={"link_speed": args.link_speed})
        sizes = args.size or list(traffic.frame_sizes)
        # the suite's own checks, which --size/--mtu/--port-kind would otherwise skip: sizes in
        # range, an MTU tgen carries on the kind, and every frame within the MTU
        traffic = TrafficSpec.model_validate(dict(traffic.model_dump(), frame_sizes=sizes))
        _baseline_fits(topo, traffic, sizes)
    except ValueError as e:
        raise CliError(f"baseline: {e}") from None
    timing = ProfileSpec(name="quick")
    profiles = {s: traffic.model_copy(update={"frame_sizes": [s]}).profile(s, timing) for s in sizes}
    out = Path(args.out or "results")
    max_age_h = cfg.max_age_h if args.max_age_h is None else args.max_age_h
    cache = CeilingCache(default_cache_path(out), max_age_s=max_age_h * 3600.0, refresh=args.refresh)
    run = RunContext(tag=args.tag)
    run.run_dir = (out / "baseline" / run.tag).resolve()
    print(f"baseline {run.tag}: logs in {run.run_dir}", file=sys.stderr)
    res = harness_ceiling(topo, run, profiles, cache=cache, trial_s=args.trial_s or cfg.trial_s,
                          resolution=cfg.resolution, log=lambda m: print(m, file=sys.stderr, flush=True))
    if args.json:
        print(json.dumps(res, default=str))
    else:
        _print_baseline(res, profiles, cache)
    return EXIT_FAILED if res.get("error") else EXIT_OK


def _baseline_fits(topo: Any, traffic: Any, sizes: list[int]) -> None:
    """ValueError naming the option when tgen cannot carry ``topo.mtu`` on the port kind, or a
    frame size (with VXLAN/VLAN overhead) is above the MTU + 18 B."""
    from nfvperf.suite_load import ETH_OVERHEAD_B, frames_over_mtu
    from nfvperf.topo.ports import port_kind_class
    mtu = int(topo.mtu)
    why = port_kind_class(topo.port_kind).check_mtu(mtu, generator=True)
    if why:
        raise ValueError(f"--mtu / topology.mtu: {why} (tgen drives the ports); lower the MTU or "
                         "choose another --port-kind")
    big, extra = frames_over_mtu(sizes, mtu, traffic)
    if big:
        raise ValueError(f"--size: frames of {', '.join(map(str, big))} B do not fit MTU {mtu} (the "
                         f"largest frame is mtu + 18 = {mtu + ETH_OVERHEAD_B - extra} B); raise --mtu "
                         f"to at least {max(big) + extra - ETH_OVERHEAD_B} or drop those sizes")


def _print_baseline(res: dict[str, Any], profiles: dict[int, Any], cache: Any) -> None:
    lower = False
    print(f"harness ceiling: tgen through testpmd io on {res.get('port_kind')}, tgen lcores "
          f"{res.get('tgen_lcores')}, MTU {res.get('mtu')}")
    print(f"{'Frame B':>8} {'ceiling fps':>14} {'% line (L1)':>12} {'self-latency min/p50/p99 us':>30} {'source':>10}")
    for s in sorted(profiles):
        p = (res.get("per_size") or {}).get(str(s))
        if not p:
            print(f"{s:>8} {'—':>14}")
            continue
        sl = p.get("self_latency_ns") or {}
        lat = "/".join("—" if sl.get(k) is None else f"{sl[k] / 1e3:.1f}" for k in ("min", "p50", "p99"))
        pct = units.pct_line_rate(p["fps"], s, profiles[s].link_speed_bps)
        lower = lower or is_lower_bound(p)
        print(f"{s:>8} {ceiling_text(p['fps'], is_lower_bound(p)):>14} {pct:>12.2f} {lat:>30} "
              f"{'cached' if p.get('cached') else 'measured':>10}")
    if lower:
        print(LOWER_BOUND_NOTE)
    if res.get("error"):
        print(f"error: {res['error']}")
    print(f"cache: {cache.path} (max age {cache.max_age_s / 3600:g} h)")


# Commands whose options belong to another module: their argv is handed over untouched
# (argparse's REMAINDER would refuse leading options such as `cleanup --tag X`).
DELEGATES = {
    "preflight": ("nfvperf.topo.preflight", "check the host (hugepages, cores, DPDK, OVS)"),
    "cleanup": ("nfvperf.store.cleanup", "remove leftovers of killed runs (netns, veth, processes)"),
    "image": ("nfvperf.vm.image", "build the VM VNF guest image (nfvperf image build)"),
}


def _delegate(name: str, rest: Sequence[str]) -> int:
    modname = DELEGATES[name][0]
    try:
        mod = importlib.import_module(modname)
    except ImportError as e:
        _err(f"`{name}` is not available in this build ({modname}: {e})")
        return EXIT_USAGE
    fn = getattr(mod, "main", None)
    if fn is None:
        _err(f"`{name}` is not available: {modname} has no main()")
        return EXIT_USAGE
    try:
        rc = fn(list(rest))
    except SystemExit as e:   # the module's argparse: 2 on bad usage, 0 on --help
        return int(e.code or 0)
    return int(rc or 0)


# --------------------------------------------------------------------------- parser

FIT_HOST_HELP = ("scale the suite's demands down to this host: ht off without SMT, core counts and "
                 "OVS socket memory within what it has, socket memory on its NUMA nodes only; every "
                 "change is printed, stored with the run and shown in the report (without it, a unit "
                 "that does not fit is skipped, naming what --fit-host would change)")


TEST_HELP = ("run only the tests named NAME (repeatable; shell-style globs such as 'throughput*'; a "
             "study's name selects all its units); a NAME no test has is refused, listing the tests")


def _add_run_parser(sub: Any, db: argparse.ArgumentParser) -> None:
    """``nfvperf run``: the command with the most options."""
    r = sub.add_parser("run", parents=[db], help="run a suite", description="Run a suite and store every trial.")
    r.add_argument("suite", help="suite YAML path, or a shipped suite name (quick, sim-tour, ...)")
    r.add_argument("--tg", choices=("sim", "tgen", "iperf3"), default="tgen", help="traffic generator: tgen (real, "
                   "root), sim (modelled DUT, runs anywhere) or iperf3 (tcp method only: iperf3 through the "
                   "topology's DUT, root); default tgen")
    r.add_argument("--quick", action="store_true", help="apply the quick profile (short trials; not RFC 2544)")
    r.add_argument("--port-kind", metavar="KIND", help="run every test on this port kind (e.g. vhost): "
                   "replaces port_kind in the suite, its tests and studies and drops the pci: lists, so a "
                   "suite written for NICs runs on emulated ports")
    r.add_argument("--test", action="append", metavar="NAME", help=TEST_HELP)
    r.add_argument("--out", metavar="DIR", help="output directory (run dirs under DIR/runs); default ./results")
    r.add_argument("--repeat", type=int, metavar="N", help="run each search (throughput, rfc2889_forwarding) N "
                   "times and report the median and spread (overrides the suite's repeat:)")
    r.add_argument("--rounds", type=int, metavar="N", help="run every study's units in N interleaved rounds "
                   "(each round measures every unit once, in a fresh random order; ratios are paired per "
                   "round, with a 95 %% interval; 6 or more give the interval, 20-30 keep it narrow on a noisy "
                   "host; trials of 0.5 s unless a study sets round_trial_s); "
                   "overrides the suite's and the studies' rounds:")
    r.add_argument("--report", action="store_true", help="print the report when the run ends")
    r.add_argument("--html", metavar="PATH", help="also write the HTML report to PATH")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.add_argument("--no-ceiling", action="store_true", help="do not measure the harness ceiling "
                   "(tgen through testpmd io in place of the DUT) before the run")
    r.add_argument("--refresh-ceiling", action="store_true", help="measure the harness ceiling even "
                   "if a fresh one is cached")
    r.add_argument("--latency-net-of-harness", action="store_true", help="report latency net of the "
                   "generator's self-latency on the harness path")
    r.add_argument("--testbed", metavar="FILE", help="run on the testbed described in FILE (hosts, SSH, NICs, "
                   "cabling); the run takes the testbed's lock in the results store")
    r.add_argument("--wait-lock", type=float, metavar="SECONDS", help="when another run holds the testbed, "
                   "wait up to SECONDS for it (default: fail at once, naming the holder)")
    r.add_argument("--fit-host", action="store_true", help=FIT_HOST_HELP)
    r.set_defaults(func=cmd_run)


def _add_baseline_parser(sub: Any) -> None:
    """``nfvperf baseline``: the harness ceiling alone."""
    bl = sub.add_parser("baseline", help="measure the harness ceiling alone (cached per host, port kind, "
                        "core plan, frame size)", description="tgen through testpmd io in place of the "
                        "DUT: the zero-loss rate per frame size and the generator's self-latency on the "
                        "path; cached in OUT/harness-ceiling.json, which runs reuse. Needs root.")
    bl.add_argument("suite", nargs="?", help="take port kind, MTU, link speed, sizes and the CPU plan "
                    "from this suite (default: p2p)")
    bl.add_argument("--port-kind", help="port kind (af_packet, af_xdp, pci, ...)")
    bl.add_argument("--size", type=int, action="append", help="frame size B (repeatable)")
    bl.add_argument("--link-speed", help="nominal link speed per port (10G, 1G, ...)")
    bl.add_argument("--mtu", type=int)
    bl.add_argument("--tgen-lcores", help="EAL lcores of the generator (default: the topology's plan)")
    bl.add_argument("--trial-s", type=float, help="search trial duration (default 0.5 s)")
    bl.add_argument("--max-age-h", type=float, help="reuse a cached ceiling up to this age (default 24)")
    bl.add_argument("--refresh", action="store_true", help="measure even if a fresh ceiling is cached")
    bl.add_argument("--out", metavar="DIR", help="results directory (cache file, logs); default ./results")
    bl.add_argument("--json", action="store_true", help="print the stored shape as JSON")
    bl.add_argument("--tag", help="run tag naming every resource (nfv + 6 hex; default: a new one)")
    bl.set_defaults(func=cmd_baseline)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nfvperf", description="Automated, repeatable data-plane benchmarks for NFV "
                                "infrastructure (RFC 2544 family, MLRsearch).",
                                epilog="Exit codes: 0 ok, 1 a test failed, 2 bad input, 130 interrupted. "
                                "Store: --db URL, else $NFVPERF_DB, else ./results/nfvperf.db.")
    p.add_argument("--version", action="version", version=f"nfvperf {__version__}")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")
    db = argparse.ArgumentParser(add_help=False)
    db.add_argument("--db", metavar="URL", help="results store: SQLAlchemy URL or SQLite file path "
                    "(default $NFVPERF_DB or ./results/nfvperf.db)")

    _add_run_parser(sub, db)

    _add_baseline_parser(sub)

    v = sub.add_parser("validate", help="check a suite without running it; list the units a run here "
                       "would skip, and why", description="Check a suite, then list the test units "
                       "`nfvperf run` with the same options would skip on this host and why (the run "
                       "decides with the same function). Exit 0 for a valid suite, 2 for a bad one.")
    v.add_argument("suite")
    v.add_argument("--quick", action="store_true")
    v.add_argument("--port-kind", metavar="KIND", help="check the suite as `nfvperf run --port-kind KIND` runs it")
    v.add_argument("--test", action="append", metavar="NAME", help=TEST_HELP)
    v.add_argument("--tg", choices=("sim", "tgen", "iperf3"), default="tgen", help="the measurer the run "
                   "will use (default tgen, as for run): tgen and iperf3 build on this host, so a topology "
                   "that does not fit it or cannot be built here is listed; sim builds nothing")
    v.add_argument("--fit-host", action="store_true", help=FIT_HOST_HELP)
    v.add_argument("--testbed", metavar="FILE", help="check the testbed file too, and that the suite's "
                   "topologies run on it (kind, DUT adapter, port kind, cabled links, its guests' "
                   "image and programs), without reaching its hosts")
    v.add_argument("--json", action="store_true", help="print the plan as JSON (every skipped unit and "
                   "its reason, every --fit-host change and its units, the host)")
    v.set_defaults(func=cmd_validate)

    d = sub.add_parser("demo", parents=[db], help="set up and run the shipped quick suites, then report",
                       description="Runs suites/quick.yaml (PHY-OVS-PHY) and suites/quick-pvp.yaml (PVP) "
                       "with the quick profile and prints the reports. --tg tgen needs root and a built tgen "
                       "(make build); --tg sim works anywhere.")
    d.add_argument("--tg", choices=("sim", "tgen"), default="tgen")
    d.add_argument("--out", metavar="DIR")
    d.add_argument("--no-progress", action="store_true")
    d.set_defaults(func=cmd_demo)

    rp = sub.add_parser("report", parents=[db], help="print a run's report; --html writes the HTML report")
    rp.add_argument("run", help="run id, tag (nfv1a2b3c4d), uid prefix, 'latest' or -N (N-th newest)")
    rp.add_argument("--html", metavar="PATH", help="write the self-contained HTML report to PATH")
    rp.add_argument("-q", "--quiet", action="store_true", help="no terminal report (with --html/--markdown)")
    rp.add_argument("--markdown", metavar="PATH", help="write the report as Markdown tables to PATH ('-': stdout)")
    rp.add_argument("--plots", metavar="DIR", nargs="?", const="",
                    help="write the study and throughput plots as PNG and SVG to DIR (default: the run's "
                    "report/ directory; --html writes them too)")
    rp.add_argument("--latency-net-of-harness", action="store_true", help="latency net of the generator's "
                    "self-latency on the harness path (default: the suite's ceiling.latency_net_of_harness)")
    rp.set_defaults(func=cmd_report)

    c = sub.add_parser("compare", parents=[db], help="two or more runs side by side, matched by configuration; "
                       "ratios and noise flags against the first")
    c.add_argument("a", nargs="?", default="-2", help="baseline run (the ratios are against it; default -2: "
                   "the run before the newest)")
    c.add_argument("others", nargs="*", metavar="run", help="runs to compare with the baseline (default latest)")
    c.add_argument("--threshold", type=float, default=2.0, metavar="PCT",
                   help="default noise threshold in %% (raised per row by the search width and repeat spread)")
    c.set_defaults(func=cmd_compare)
    _add_trend_parsers(sub, db)

    h = sub.add_parser("history", parents=[db], help="list the runs in the store")
    h.add_argument("--limit", type=int, default=30)
    h.add_argument("--json", action="store_true")
    _add_testbed_filters(h, c)
    h.set_defaults(func=cmd_history)

    e = sub.add_parser("export", parents=[db], help="export a run as JSON or CSV (docs/results-schema.md)")
    e.add_argument("run")
    e.add_argument("--format", choices=("json", "csv"), default="json")
    e.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    e.set_defaults(func=cmd_export)

    im = sub.add_parser("import", parents=[db], help="load a JSON export into the store")
    im.add_argument("file")
    im.add_argument("--new-id", action="store_true", help="give the run a new id (to import twice)")
    im.set_defaults(func=cmd_import)

    _add_calc_parser(sub)

    _add_testbed_parsers(sub, db)
    _add_site_parser(sub, db)

    for name, (_modname, text) in DELEGATES.items():
        sp = sub.add_parser(name, help=text, description=f"{text}; see `nfvperf {name} --help`",
                            add_help=False)
        sp.add_argument("rest", nargs=argparse.REMAINDER, help="arguments passed on")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    from nfvperf.config import SuiteError
    from nfvperf.testbed.spec import TestbedError
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "cleanup" and any(a == "--testbed" or a.startswith("--testbed=")
                                             for a in argv[1:]):
        from nfvperf.testbed.hosts import cleanup_main
        return cleanup_main(argv[1:])
    if argv and argv[0] in DELEGATES:
        return _delegate(argv[0], argv[1:])
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:   # argparse: 2 on bad usage, 0 on --help
        return int(e.code or 0)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    if args.cmd == "testbed" and not getattr(args, "testbed_cmd", None):
        _err("testbed: choose what to do: check (see nfvperf testbed --help)")
        return EXIT_USAGE
    if args.cmd == "calc" and not getattr(args, "calc", None):
        _err("calc: choose what to calculate: rate, socket-mem, pmd-mask or buffer (see nfvperf calc --help)")
        return EXIT_USAGE
    try:
        return args.func(args)
    except (SuiteError, TestbedError) as e:
        head = f"{e.source}: " if e.source else ""
        what = "suite" if isinstance(e, SuiteError) else "testbed"
        print(f"nfvperf: error: {head}the {what} is not valid ({len(e.problems)} problem(s)); nothing was run:",
              file=sys.stderr)
        for prob in e.problems:
            print(f"  {prob}", file=sys.stderr)
        return EXIT_USAGE
    except CliError as e:
        _err(str(e))
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
