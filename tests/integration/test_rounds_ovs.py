"""Interleaved rounds on real parts (issue 16): the shipped suites/compare-flows.yaml (1 vs 100,000
flows per port, PHY-OVS-PHY through OVS-DPDK on vhost-user ports, 64 B) with 6 rounds of short
MRR trials, run through the CLI with tgen.  The store must hold every round of both units with its
round number and position (each round's two positions are 1 and 2, the orders as the run's seed
drew them), the trials carrying the round too, and the report must print the paired ratio with its
95 % interval (or "no difference measured").  The ratio itself is printed, not asserted: on two
shared cores its value is the host's as much as OVS's; its interval is what says so.
"""
from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.root
REPO = Path(__file__).resolve().parents[2]
HAVE_OVS = os.path.exists("/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk")
ROUNDS = 6


def _short(out: Path) -> Path:
    data = yaml.safe_load((REPO / "suites" / "compare-flows.yaml").read_text())
    data["profile"] = {"name": "custom", "trial_s": 0.5, "drain_s": 0.1, "settle_s": 0.0, "learning_s": 0.1}
    data["ceiling"] = {"enabled": False}
    data["tests"][0]["study"].update(rounds=ROUNDS, round_trial_s=0.5, seed=42)
    p = out / "compare-flows-short.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


@pytest.mark.usefixtures("need_tgen")
def test_flows_study_runs_interleaved_and_stores_every_round(tmp_path, leak_check) -> None:
    from nfvperf.rounds import round_orders
    if not HAVE_OVS:
        pytest.skip("openvswitch-switch-dpdk not installed")
    suite = _short(tmp_path)
    db = tmp_path / "rounds.db"
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "nfvperf", "run", str(suite), "--tg", "tgen", "--db", str(db),
                           "--out", str(tmp_path / "out"), "--no-progress", "--no-ceiling", "--report"],
                          cwd=REPO, capture_output=True, text=True, timeout=400,
                          env=dict(os.environ, COLUMNS="240"))
    wall = time.monotonic() - t0
    log = proc.stdout + proc.stderr
    tag = re.search(r"run \d+ \((nfv[0-9a-f]{6})\)", log)
    if tag:
        leak_check.watch(tag.group(1))
    assert proc.returncode == 0, f"rc={proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert f"2 units in {ROUNDS} interleaved rounds (seed 42" in log, log[:3000]
    assert "units switch by traffic alone (one topology)" in log
    con = sqlite3.connect(db)
    tests = {tid: (name, json.loads(study)) for tid, name, study in
             con.execute("select id, name, study from tests order by id")}
    assert len(tests) == 2
    rounds: dict[int, dict[int, str]] = {}
    for tid, data in con.execute("select test_id, data from results where kind = 'round'"):
        d = json.loads(data)
        assert d["figures"]["mrr"]["value_pps"] > 0, d
        rounds.setdefault(d["round"], {})[d["position"]] = tests[tid][0]
    assert sorted(rounds) == list(range(1, ROUNDS + 1))
    assert all(sorted(p) == [1, 2] for p in rounds.values()), rounds
    # the orders are the seed's: unit i (suite order) at the position round_orders gives it
    names = [tests[t][0] for t in sorted(tests)]
    for r, order in enumerate(round_orders(2, ROUNDS, 42), 1):
        assert [rounds[r][p] for p in (1, 2)] == [names[i] for i in order], (r, rounds[r])
    # every trial of a round carries its round and position
    ctx = [json.loads(c) for (c,) in con.execute("select context from trials")]
    assert {c.get("round") for c in ctx} == set(range(1, ROUNDS + 1))
    summ = {tests[tid][0]: json.loads(d) for tid, d in
            con.execute("select test_id, data from results where kind = 'rounds'")}
    other = summ["flows[flows=100000]"]
    ratio = other["ratios"]["mrr"]
    assert ratio["n"] == ROUNDS and ratio["lo"] <= ratio["median"] <= ratio["hi"]
    m = re.search(r"│ flows=100000 .*│\s*(\S.*?)\s*│[^│]*│[^│]*│\s*$", log, re.M)
    assert m and (re.match(r"\d\.\d\d× \(\d\.\d\d–\d\.\d\d, 95 % CI, 6 rounds\)", m.group(1))
                  or m.group(1).startswith("no difference measured (±")), m.group(1) if m else log[-3000:]
    print(f"\ncompare-flows on vhost, {ROUNDS} rounds of 0.5 s MRR trials ({wall:.0f} s): "
          f"100k / 1 flow = {ratio['text']}")
