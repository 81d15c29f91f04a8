#!/usr/bin/env python3
"""Does a comparison hold on this host? (issue 16)

The flows study of suites/compare-flows.yaml (1 vs 100,000 flows per port, PHY-OVS-PHY through
OVS-DPDK on vhost-user ports, 64 B) run three times the old way and three times the new way, in
the same run, alternating (S I S I S I) so that both meet the same host:

* sequential (today's way without ``rounds``): each unit's zero-loss throughput by binary search,
  the units one after the other; ratio = 100k / 1 flow;
* interleaved: ``rounds`` (default 30, as the suite) rounds, each measuring both units once in a
  fresh random order with a short MRR trial (default 0.5 s); ratio = the median of per-round
  ratios, with its 95 % exact rank interval.

Prints each run's ratio (and interval), then as the LAST line one JSON object with
``sequential_ratios``, ``interleaved_ratios``, ``interleaved_ci_width_pct`` (the widest interval,
(hi − lo) / median in %), ``interleaved_max_over_min``, ``sequential_max_over_min``,
``interleaved_study_s`` (the longest interleaved run, set-up included) and the host's CPU
steadiness around each run.  Goals on a 2-vCPU host: interleaved max/min ≤ 1.05, interval width
≤ 10 %, an interleaved study ≤ 5 minutes.  Needs root, tgen built and OVS-DPDK (as make demo).
Takes about 9.5–11.5 minutes with the defaults: an interleaved run of 30 rounds of 0.5 s trials
took about 65 s on a quiet 2-vCPU host (20 rounds: 46 s; 10 rounds of 1 s trials: 37 s, when the
whole bench took 8–10 minutes).  ``--runs``, ``--rounds``, ``--trial-s``; ``--quick``: one run of
each way, 3 rounds of 0.2 s trials and a coarse sequential search with 0.3 s trials (the shape of
the output, for ``make test``; its ratios mean nothing).

JSON keys: sequential_ratios, interleaved_ratios, interleaved_intervals, interleaved_ci_width_pct,
interleaved_max_over_min, sequential_max_over_min, interleaved_study_s, rounds, round_trial_s,
host_cpu_steadiness, goals
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

import yaml

REPO = Path(__file__).resolve().parents[1]


def suite_file(d: Path, interleaved: bool, rounds: int, trial_s: float, quick: bool = False) -> Path:
    data = yaml.safe_load((REPO / "suites" / "compare-flows.yaml").read_text())
    study = data["tests"][0]["study"]
    if quick:
        data["profile"] = {"name": "custom", "trial_s": 0.3, "drain_s": 0.1, "settle_s": 0.0, "learning_s": 0.1}
        data["tests"][0]["resolution_pct"] = 10
    if interleaved:
        study.update(rounds=rounds, round_trial_s=trial_s)
    else:
        for k in ("rounds", "metrics", "round_trial_s", "seed", "overload_pct"):
            study.pop(k, None)
    p = d / ("interleaved.yaml" if interleaved else "sequential.yaml")
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def run(suite: Path, db: Path, out: Path) -> tuple[int, float, str]:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "nfvperf", "run", str(suite), "--tg", "tgen", "--db", str(db),
                           "--out", str(out), "--no-progress", "--no-ceiling"], cwd=REPO,
                          capture_output=True, text=True, timeout=1200)
    wall = time.monotonic() - t0
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise SystemExit(f"run of {suite.name} failed (rc {proc.returncode}):\n{log[-3000:]}")
    m = re.findall(r"run (\d+) \(nfv", log)
    return int(m[-1]), wall, log


def steadiness(log: str) -> list[str]:
    return re.findall(r"host CPU steadiness: speed moved (\d+ %)", log)


def sequential_ratio(con: sqlite3.Connection, run_id: int) -> Optional[float]:
    v: dict[int, float] = {}
    for study, pps in con.execute("select t.study, r.value_pps from tests t join results r on r.test_id = t.id "
                                  "where t.run_id = ? and r.kind = 'throughput'", (run_id,)):
        v[json.loads(study)["axes"]["flows"]] = pps
    return v[100000] / v[1] if v.get(1) and v.get(100000) else None


def interleaved_ratio(con: sqlite3.Connection, run_id: int) -> Optional[dict[str, Any]]:
    for study, data in con.execute("select t.study, r.data from tests t join results r on r.test_id = t.id "
                                   "where t.run_id = ? and r.kind = 'rounds'", (run_id,)):
        if json.loads(study)["axes"]["flows"] == 100000:
            return (json.loads(data).get("ratios") or {}).get("mrr")
    return None


def spread(xs: list[float]) -> Optional[float]:
    xs = [x for x in xs if x]
    return max(xs) / min(xs) if len(xs) >= 2 else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=30, help="interleaved rounds per run (default 30)")
    ap.add_argument("--trial-s", type=float, default=0.5, help="seconds per round trial (default 0.5)")
    ap.add_argument("--quick", action="store_true", help="1 run, 3 rounds of 0.2 s: for make test")
    a = ap.parse_args()
    if a.quick:
        a.runs, a.rounds, a.trial_s = 1, 3, 0.2
        os.environ["NFVPERF_STEADINESS_S"] = "0.2"     # the runs' CPU steadiness probes (2 s each)
    if os.geteuid() != 0:
        print("comparison_stability needs root (OVS-DPDK, hugepages, network namespaces)", file=sys.stderr)
        return 2
    seq: list[Optional[float]] = []
    inter: list[dict[str, Any]] = []
    walls: list[float] = []
    steady: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix="nfvperf-cmp-") as tmp:
        d = Path(tmp)
        db = d / "cmp.db"
        files = {i: suite_file(d, i, a.rounds, a.trial_s, a.quick) for i in (False, True)}
        for i in range(a.runs):
            for interleaved in (False, True):
                rid, wall, log = run(files[interleaved], db, d / "out")
                steady.append(steadiness(log))
                con = sqlite3.connect(db)
                if interleaved:
                    r = interleaved_ratio(con, rid)
                    inter.append(r or {})
                    walls.append(wall)
                    print(f"interleaved run {i + 1}: 100k / 1 flow MRR = "
                          f"{(r or {}).get('median', 0):.3f} ({(r or {}).get('text', 'no ratio')}); "
                          f"{wall:.0f} s; host moved {', '.join(steady[-1])}", flush=True)
                else:
                    s = sequential_ratio(con, rid)
                    seq.append(s)
                    print(f"sequential run {i + 1}: 100k / 1 flow zero-loss = "
                          f"{s if s is None else f'{s:.3f}'}; {wall:.0f} s; host moved {', '.join(steady[-1])}",
                          flush=True)
                con.close()
    ir = [r.get("median") for r in inter if r.get("median")]
    widths = [100.0 * (r["hi"] - r["lo"]) / r["median"] for r in inter if r.get("median")]
    out = {"sequential_ratios": seq, "interleaved_ratios": ir,
           "interleaved_intervals": [[r.get("lo"), r.get("hi")] for r in inter],
           "interleaved_ci_width_pct": max(widths) if widths else None,
           "interleaved_max_over_min": spread(ir), "sequential_max_over_min": spread([s for s in seq if s]),
           "interleaved_study_s": max(walls) if walls else None, "rounds": a.rounds, "round_trial_s": a.trial_s,
           "host_cpu_steadiness": steady,
           "goals": {"interleaved_max_over_min": 1.05, "interleaved_ci_width_pct": 10.0, "interleaved_study_s": 300}}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
