"""A study on real parts: the shipped suites/study-flows.yaml (one throughput test, flows per port
1 / 10,000 / 100,000, PHY-OVS-PHY through OVS-DPDK on vhost-user ports, 64 B) run through the CLI
with tgen, short trials and a coarse binary search.  The store must hold one test row per unit,
each with its axis values in ``tests.study`` (the baseline marked), and a positive throughput;
tgen's own stream table (read back in every trial) holds each unit's flow count.
The values are printed, not compared: on two shared cores their order is noise-prone.
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


def _short(suite: Path, out: Path) -> Path:
    """The shipped study with 0.5 s trials and a coarse search (seconds, not minutes): what is
    asserted is the stored structure and a positive rate per unit, which need no longer trial."""
    data = yaml.safe_load(suite.read_text())
    data["profile"] = {"name": "custom", "trial_s": 0.5, "drain_s": 0.1, "settle_s": 0.0, "learning_s": 0.1}
    data["ceiling"] = {"enabled": False}
    test = data["tests"][0]
    # a coarse search from 10 % of the nominal 10G down to 0.25 % of it (37 kfps); 1 % loss
    # allowed, since with many flows OVS on shared cores loses a few frames per thousand even at
    # low loads (no zero-loss rate found)
    test.update(resolution_pct=0.25, max_load_pct=10, loss_ratio=0.01)
    p = out / "study-flows-short.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def test_flows_study_stores_one_result_per_unit(tmp_path, leak_check) -> None:
    from nfvperf.tg.tgen import find_tgen_binary
    try:
        find_tgen_binary()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    if not HAVE_OVS:
        pytest.skip("openvswitch-switch-dpdk not installed")
    suite = _short(REPO / "suites" / "study-flows.yaml", tmp_path)
    db = tmp_path / "study.db"
    t0 = time.monotonic()
    seen = tmp_path / "tgen-streams.jsonl"
    proc = subprocess.run([sys.executable, "-c", SPY, "run", str(suite), "--tg", "tgen", "--db", str(db),
                           "--out", str(tmp_path / "out"), "--no-progress", "--no-ceiling"], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, COLUMNS="200", SEEN=str(seen)))
    wall = time.monotonic() - t0
    tag = re.search(r"run \d+ \((nfv[0-9a-f]{6})\)", proc.stdout + proc.stderr)
    if tag:       # the machine may be shared: watch this run's resources only
        leak_check.watch(tag.group(1))
    assert proc.returncode == 0, f"rc={proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    # one topology for the three units: flows is a traffic axis
    log = proc.stdout + proc.stderr
    assert "3 test unit(s) on 1 topology" in log, log[:2000]
    con = sqlite3.connect(db)
    rows = con.execute("select t.name, t.status, t.study, r.value_pps from tests t join results r on "
                       "r.test_id = t.id where r.kind = 'throughput' order by t.id").fetchall()
    assert len(rows) == 3, rows
    by_flows = {}
    for name, status, study, pps in rows:
        st = json.loads(study)
        assert status == "passed", (name, status)
        assert st["name"] == "p-ovs-p-flows" and set(st["axes"]) == {"flows"}, st
        assert name == f"p-ovs-p-flows[flows={st['axes']['flows']}]"
        assert st["baseline"] is (st["axes"]["flows"] == 1), st
        by_flows[st["axes"]["flows"]] = pps
    assert sorted(by_flows) == [1, 10000, 100000]
    # the traffic each unit stored: its own flow count
    traffic = [json.loads(t)["flows_per_port"] for (t,) in con.execute("select traffic from tests order by id")]
    assert traffic == [1, 10000, 100000], traffic
    _tgen_sent_the_flows(con, seen)
    print(f"\nstudy p-ovs-p-flows on vhost, 64 B, 1 % loss goal ({wall:.0f} s):")
    for flows, pps in sorted(by_flows.items()):
        print(f"  flows={flows:>6}: {pps:>12,.0f} fps per interface ({pps / by_flows[1]:.2f}x baseline)")
    assert all(pps > 0 for pps in by_flows.values()), by_flows



#: runs ``nfvperf run`` as the CLI does, with each tgen trial's streams read back from tgen
#: (``stream.list``: the generator's own stream table) into the file ``$SEEN``, one line a trial
SPY = """
import json, os, sys
from nfvperf.tg.tgen import TgenMeasurer
orig = TgenMeasurer.measure
def measure(self, duration_s, load_pps):
    flows = sorted({s["flows"] for s in self.proc.rpc("stream.list")})
    with open(os.environ["SEEN"], "a") as f:
        f.write(json.dumps(flows) + "\\n")
    return orig(self, duration_s, load_pps)
TgenMeasurer.measure = measure
from nfvperf.cli import main
sys.argv[0] = "nfvperf"
sys.exit(main())
"""


def _tgen_sent_the_flows(con: sqlite3.Connection, seen: Path) -> None:
    """What tgen was sending in each trial, read back from tgen itself: in the order the units
    ran, each unit's trials had streams of its own flow count and no other, one stored trial per
    trial tgen ran.  A flows axis that reached the store but not the generator fails here."""
    per_trial = [json.loads(ln) for ln in seen.read_text().splitlines()]
    want = []
    for tid, traffic in con.execute("select id, traffic from tests order by id"):
        (n,) = con.execute("select count(*) from trials where test_id = ?", (tid,)).fetchone()
        want += [[json.loads(traffic)["flows_per_port"]]] * n
    assert per_trial == want, (per_trial, want)
