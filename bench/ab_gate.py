#!/usr/bin/env python3
"""The CI gate on two real DUT builds (issue 29 item 4): DPDK's l3fwd as shipped (A) and with a
patch that costs forwarding work (B: l3fwd/patches/urpf-flowstats.patch, a uRPF check with
per-flow accounting: a source LPM lookup and a flow-table lookup per packet;
``bench/l3fwd_cpu_cost.py`` measures what it costs per packet on this path), measured in one
interleaved run and gated by ``nfvperf gate --ab``; then A against a copy of itself (A'),
measured and gated the same way.  Expected: the gate exits 1 for B and 0 for A', in the same
bench run.

Steps: ``scripts/build-l3fwd.sh`` builds A (build/l3fwd/) and B (build/l3fwd-b/, with
``L3FWD_PATCH``); A is copied to build/l3fwd-a2/ (a second path, so that A vs A' restarts l3fwd
between its units exactly as A vs B does); suites/ab-l3fwd.yaml is run twice through the real CLI
(``nfvperf run ab-l3fwd --tg tgen --rounds N``: B vs A, then with B's path replaced by A''s), and
``nfvperf gate --ab --threshold T`` judges each run.  Each run's paired ratio and its 95 %
interval are read back from the store, with the per-round figures: ``a_mpps``/``b_mpps`` are
the MRR medians of the B-vs-A run (per interface), ``a_vs_a_width_by_rounds`` the A/A' interval
width (percent) over the run's first 6, 8, ... rounds, and ``rounds_for_threshold`` the fewest
rounds from which that width stays within 2 x threshold (A/A' within ±threshold: fewer rounds,
and A against itself could fail the gate by chance; null when even all rounds are wider).
``seconds_per_round`` is what a round costs (both units, with their l3fwd restarts).

Prints a line per gate and, as the LAST line, one JSON object.
JSON keys: b_vs_a_ratio, b_vs_a_interval, b_vs_a_interval_width_pct, gate_b_exit, a_vs_a_ratio,
  a_vs_a_interval, a_vs_a_interval_width_pct, gate_a_exit, expected, rounds, round_trial_s,
  threshold_pct, seconds, run_seconds, seconds_per_round, a_mpps, b_mpps, generator_bound_rounds,
  a_vs_a_width_by_rounds, rounds_for_threshold
``expected`` is true when gate_b_exit is 1 and gate_a_exit is 0.  Needs root, tgen and dpdk-doc
(as ``make build``).  ``--quick``: 6 rounds of 0.2 s trials (the fewest that give a 95 %
interval; checks the mechanics, not the figures) and no harness ceiling (``--no-ceiling``, as
comparison_stability's runs).  Defaults: the suite's 30 rounds of 0.5 s
trials; ``--rounds``, ``--trial-s``, ``--threshold`` (percent, default 2).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

import yaml

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "suites" / "ab-l3fwd.yaml"
PATCH = "l3fwd/patches/urpf-flowstats.patch"
BUILDS = {"a": REPO / "build" / "l3fwd", "b": REPO / "build" / "l3fwd-b", "a2": REPO / "build" / "l3fwd-a2"}
ENV = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           COLUMNS="200")


def build() -> dict[str, Path]:
    """A and B built (each skipped when up to date), A copied to A'."""
    subprocess.run(["bash", "scripts/build-l3fwd.sh"], cwd=REPO, check=True)
    subprocess.run(["bash", "scripts/build-l3fwd.sh"], cwd=REPO, check=True,
                   env=dict(os.environ, L3FWD_PATCH=PATCH, L3FWD_BUILD=str(BUILDS["b"])))
    BUILDS["a2"].mkdir(parents=True, exist_ok=True)
    shutil.copy2(BUILDS["a"] / "l3fwd", BUILDS["a2"] / "l3fwd")
    return {k: v / "l3fwd" for k, v in BUILDS.items()}


def suite_file(tmp: Path, name: str, a: Path, b: Path, trial_s: float) -> Path:
    """suites/ab-l3fwd.yaml with the two builds' absolute paths (``b``: the unit gated against A)."""
    data = yaml.safe_load(SUITE.read_text())
    study = data["tests"][0]["study"]
    study["axes"]["build"] = {"a": {"topology": {"l3fwd": {"binary": str(a)}}},
                              "b": {"topology": {"l3fwd": {"binary": str(b)}}}}
    study["round_trial_s"] = trial_s
    out = tmp / f"{name}.yaml"
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def nfv(*args: str, timeout: float = 3600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nfvperf", *args], cwd=REPO, env=ENV, text=True,
                          capture_output=True, timeout=timeout)


def run_and_gate(suite: Path, db: Path, out: Path, rounds: int, threshold: float,
                 quick: bool = False) -> dict[str, Any]:
    t0 = time.monotonic()
    r = nfv("run", str(suite), "--tg", "tgen", "--rounds", str(rounds), "--db", str(db), "--out", str(out),
            "--no-progress", *(["--no-ceiling"] if quick else []))
    secs = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"ab_gate: nfvperf run {suite.name} failed (rc={r.returncode}):\n{r.stdout[-3000:]}\n"
                         f"{r.stderr[-3000:]}")
    g = nfv("gate", "--ab", "latest", "--threshold", str(threshold), "--db", str(db))
    print(g.stdout.strip())
    if g.returncode not in (0, 1):
        raise SystemExit(f"ab_gate: nfvperf gate --ab could not judge the run (rc={g.returncode}):\n"
                         f"{g.stdout}\n{g.stderr}")
    sys.path.insert(0, str(REPO / "src"))
    from sqlalchemy import select
    from nfvperf.stats import ratio_interval
    from nfvperf.store import Store
    from nfvperf.store.models import Result, Test
    from nfvperf.trend.ab import gate_ab
    store = Store(f"sqlite:///{db}")
    try:
        gate = gate_ab(store, "latest", threshold / 100.0, metric="mrr")
        (v,) = gate.verdicts
        with store.session() as s:
            rows = s.execute(select(Result.data).join(Test, Result.test_id == Test.id)
                             .where(Test.run_id == gate.run, Result.kind == "rounds").order_by(Test.id)).all()
    finally:
        store.close()
    (base,) = [d["metrics"]["mrr"] for (d,) in rows if not d.get("ratios")]      # A: no ratio to itself
    (unit,) = [d["metrics"]["mrr"] for (d,) in rows if d.get("ratios")]
    widths = {}
    for k in sorted({*range(6, rounds, 2), rounds}):                  # the run cut after its first k rounds
        iv = ratio_interval(unit["values_pps"][:k], base["values_pps"][:k])
        if iv is not None and iv.enough:
            widths[k] = round(100 * (iv.hi - iv.lo) / iv.median, 2)
    return {"exit": g.returncode, "ratio": round(v.median, 4), "interval": [round(v.lo, 4), round(v.hi, 4)],
            "width_pct": round(100 * (v.hi - v.lo) / v.median, 2), "n": v.n, "seconds": round(secs, 1),
            "a_mpps": round(base["median_pps"] / 1e6, 3) if base["median_pps"] else None,
            "unit_mpps": round(unit["median_pps"] / 1e6, 3) if unit["median_pps"] else None,
            "generator_bound_rounds": int(base["generator_bound_rounds"]) + int(unit["generator_bound_rounds"]),
            "widths": widths}


def rounds_for(widths: dict[int, float], threshold: float) -> Optional[int]:
    """The fewest rounds from which on A/A' stayed within ±threshold (interval width at most
    2 x threshold at that count and at every larger one measured): fewer, and A against itself
    could fail the gate by chance.  None when even the whole run's interval is wider."""
    ok = None
    for k in sorted(widths, reverse=True):
        if widths[k] > 2 * threshold:
            break
        ok = k
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="6 rounds of 0.2 s trials, no harness ceiling: the mechanics, not the figures")
    ap.add_argument("--rounds", type=int, help="rounds per run (default: the suite's 30; --quick 6)")
    ap.add_argument("--trial-s", type=float, help="round trial seconds (default: the suite's 0.5; --quick 0.2)")
    ap.add_argument("--threshold", type=float, default=2.0, help="the gate's threshold in percent (default 2)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("ab_gate: needs root (hugepages, DPDK, vhost-user ports)", file=sys.stderr)
        return 2
    study = yaml.safe_load(SUITE.read_text())["tests"][0]["study"]
    rounds = args.rounds or (6 if args.quick else int(study["rounds"]))
    trial_s = args.trial_s or (0.2 if args.quick else float(study["round_trial_s"]))
    t0 = time.monotonic()
    paths = build()
    with tempfile.TemporaryDirectory(prefix="nfvperf-ab-") as d:
        tmp = Path(d)
        b = run_and_gate(suite_file(tmp, "ab-b", paths["a"], paths["b"], trial_s), tmp / "ab.db", tmp / "out",
                         rounds, args.threshold, args.quick)
        a = run_and_gate(suite_file(tmp, "ab-a", paths["a"], paths["a2"], trial_s), tmp / "ab.db", tmp / "out",
                         rounds, args.threshold, args.quick)
    print(f"B vs A:  {b['ratio']:.3f}x [{b['interval'][0]:.3f}, {b['interval'][1]:.3f}], gate exit {b['exit']}; "
          f"A' vs A: {a['ratio']:.3f}x [{a['interval'][0]:.3f}, {a['interval'][1]:.3f}], gate exit {a['exit']} "
          f"({rounds} rounds of {trial_s} s, threshold {args.threshold} %)")
    need = rounds_for(a["widths"], args.threshold)
    per_round = round((a["seconds"] + b["seconds"]) / (2 * rounds), 2)
    print(f"A: {b['a_mpps']} Mpps, B: {b['unit_mpps']} Mpps (MRR medians, per interface); A'/A interval width by "
          f"rounds: {a['widths']}; within ±{args.threshold} % from {need} rounds on; {per_round} s per round")
    print(json.dumps({
        "b_vs_a_ratio": b["ratio"], "b_vs_a_interval": b["interval"], "b_vs_a_interval_width_pct": b["width_pct"],
        "gate_b_exit": b["exit"], "a_vs_a_ratio": a["ratio"], "a_vs_a_interval": a["interval"],
        "a_vs_a_interval_width_pct": a["width_pct"], "gate_a_exit": a["exit"],
        "expected": b["exit"] == 1 and a["exit"] == 0, "rounds": rounds, "round_trial_s": trial_s,
        "threshold_pct": args.threshold, "seconds": round(time.monotonic() - t0, 1),
        "run_seconds": {"b_vs_a": b["seconds"], "a_vs_a": a["seconds"]}, "seconds_per_round": per_round,
        "a_mpps": b["a_mpps"], "b_mpps": b["unit_mpps"],
        "generator_bound_rounds": {"b_vs_a": b["generator_bound_rounds"], "a_vs_a": a["generator_bound_rounds"]},
        "a_vs_a_width_by_rounds": a["widths"], "rounds_for_threshold": need}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
