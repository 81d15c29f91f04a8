"""Seed 004's scale on a real OVS-DPDK (issue 9 item 7): 1M flows per port through the in_port
cross-connect (``p-ovs-p-1m-flows``, the 1M count of its pvp-flows study) and 1M src/dst-IP rules
per direction, 2M in all, 1:1 with 1M flows per port (``rules-1m``, the 1M unit of its
rules-p-ovs-p study), taken from suites/seed004-ovs-scaling.yaml, run with
``nfvperf run --tg tgen`` on vhost ports (no NICs here) in the quick profile's timing with 0.5 s
trials (a custom profile: ``--quick`` would force its 1 s trials over the tests' own).

Asserts: both pass with a positive throughput; OVS counts the 2M rules it was given; the install
(rules, seconds, rules/s) is stored with the run and printed in the report; the install logged
its progress; the warm-up of ``rules-1m`` lasted long enough to send each of the 1M flows 3 times
at its load and sent a million distinct flows to OVS's slow path.  About 5 minutes on a busy
2-core host (rule generation + install 1-1.5 min, rules-1m's warm-up 70-85 s)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nfvperf.config import PROFILE_PRESETS

pytestmark = [pytest.mark.root, pytest.mark.slow]

if os.geteuid() != 0 or not os.path.exists("/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"):
    pytest.skip("needs root and openvswitch-switch-dpdk", allow_module_level=True)

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "suites" / "seed004-ovs-scaling.yaml"
FLOWS = 1_000_000
TRIAL_S = 0.5


def _suite(tmp_path: Path) -> Path:
    """Seed 004's 1M-rule unit (study rules-p-ovs-p, rules=1000000) and its 1M-flow count (study
    pvp-flows, flows=1000000, here on p-ovs-p's in_port cross-connect), as two plain tests."""
    seed = yaml.safe_load(SEED.read_text())
    tests = {t["name"]: dict(t) for t in seed["tests"]}
    assert FLOWS in tests["pvp-flows"]["study"]["axes"]["flows"]
    big = tests["rules-p-ovs-p"].pop("study")["axes"]["rules"][str(FLOWS)]
    assert big == {"rules": FLOWS, "flows": FLOWS}, big         # 1:1 with the flows
    flows = {"method": "throughput", "name": "p-ovs-p-1m-flows", "traffic": {"flows_per_port": FLOWS}}
    rules = dict(tests["rules-p-ovs-p"], name="rules-1m", topology={"ovs": {"rules": FLOWS}},
                 traffic={"flows_per_port": FLOWS})
    # binary search to 0.02 % of the 25G line rate (7.4k fps): a dozen 0.5 s trials per test
    # (nothing asserted depends on a trial's length: each test passes with a positive rate)
    short = {"trial_duration_s": TRIAL_S, "resolution_pct": 0.02}
    # the cross-connect is one datapath flow whatever the flow count: a short warm-up does
    flows.update(short, frame_sizes=[64], warmup_s=2)
    rules.update(short)                   # default warm-up: every flow 3 times at the warm-up load
    suite = {"name": "seed004-1m-scale", "description": "seed 004's 1M-flow and 1M-rule tests on vhost",
             "topology": {"kind": "p-ovs-p", "ports": 2, "port_kind": "vhost", "ovs": {"socket_mem_mb": 1024}},
             "traffic": dict(seed["traffic"], link_speed="25G"),
             "profile": dict(PROFILE_PRESETS["quick"], name="custom", trial_s=TRIAL_S),
             "tests": [flows, rules]}
    path = tmp_path / "seed004-1m.yaml"
    path.write_text(yaml.safe_dump(suite, sort_keys=False))
    return path


def _nfvperf(*args: str, timeout: float) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    return subprocess.run([sys.executable, "-m", "nfvperf", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=timeout, env=env)


def test_seed004_1m_flows_and_1m_rules(tmp_path: Path, leak_check) -> None:
    from nfvperf.tg.tgen import find_tgen_binary
    try:
        find_tgen_binary()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    db = f"sqlite:///{tmp_path / 'store.db'}"
    p = _nfvperf("run", str(_suite(tmp_path)), "--tg", "tgen", "--no-ceiling", "--db", db,
                 "--out", str(tmp_path / "out"), "--no-progress", timeout=1500)
    log = p.stdout + p.stderr
    m = re.search(r"run (\d+) \((nfv[0-9a-f]{6})\)", log)
    assert m, log
    leak_check.watch(m.group(2))
    assert p.returncode == 0, log
    # progress of the 2M-rule install, then its result line
    assert re.search(r"installing 2,000,000 OpenFlow rules on \S+ \(bundle, 20 file\(s\)", log), log
    assert re.search(r"installed 2,000,000 OpenFlow rules on \S+ in [\d.]+ s \([\d,]+ rules/s\); "
                     r"OVS counts 2,000,000", log), log

    e = _nfvperf("export", m.group(1), "--format", "json", "--db", db, timeout=120)
    assert e.returncode == 0, e.stderr
    data = json.loads(e.stdout)
    tests = {t["name"]: t for t in data["tests"]}
    for name in ("p-ovs-p-1m-flows", "rules-1m"):
        t = tests[name]
        assert t["status"] == "passed", t
        assert t["results"][0]["value_pps"] > 0, t["results"]
        assert t["traffic"]["flows_per_port"] == FLOWS

    # the install is a result of its own, stored with the run: per topology, in the DUT's environment
    installs = {tuple(sorted((i.get("overrides") or {}).get("ovs", {}).items())):
                i["environment"]["dut"]["rule_installs"] for i in data["run"]["environment"]["topologies"]}
    (big,) = installs[(("rules", FLOWS),)]
    assert (big["rules"], big["installed"], big["method"], big["chunks"]) == (2 * FLOWS, 2 * FLOWS, "bundle", 20)
    assert big["seconds"] > 0 and big["rules_per_s"] == pytest.approx(2 * FLOWS / big["seconds"], rel=0.01)
    (xc,) = installs[()]
    assert (xc["rules"], xc["installed"]) == (2, 2)      # the 1M-flow test: in_port cross-connect

    # rules-1m's warm-up scaled to the flow count and reached the flows (a DUT that held the
    # generator back gets a second pass at the rate it took)
    warm = [tr for tr in tests["rules-1m"]["trials"] if tr["context"].get("phase") == "warmup"]
    wu = tests["rules-1m"]["results"][0]["data"]["warmup"]
    assert wu["duration_s"] >= 0.95 * 3 * FLOWS / wu["load_pps"], wu
    assert len(warm) == wu["passes"] in (1, 2), wu
    upcalls = sum(int(p.get("miss_with_success_upcall", 0)) + int(p.get("miss_with_failed_upcall", 0))
                  for p in (tr["detail"]["dut_counters"]["pmd"]["total"] for tr in warm))
    assert upcalls >= FLOWS, [tr["detail"]["dut_counters"]["pmd"]["total"] for tr in warm]

    r = _nfvperf("report", m.group(1), "--db", db, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "OpenFlow rule installation" in r.stdout and "2,000,000" in r.stdout, r.stdout
