"""End to end through the real CLI on the simulated DUT (issue 17): 12 runs of one small suite,
the last 6 with the DUT's capacity lowered 15 %; `nfvperf trend --json` names the first lowered
run as a regression and `nfvperf gate` exits 1; with the capacity unchanged it exits 0."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           COLUMNS="200")

#: one zero-loss search at 64 B; at a nominal 1G the binary search's resolution (0.1 % of line
#: rate, 1,488 fps) is about 1.2 % of what the modelled DUT forwards, so 15 % is far above it
SUITE = {
    "name": "trend-e2e",
    "topology": {"kind": "p-ovs-p", "dut": "ovs-dpdk", "ports": 2, "port_kind": "vhost"},
    "traffic": {"frame_sizes": [64], "bidirectional": True, "link_speed": "1G"},
    "profile": "quick",
    "sim": {"capacity_pps": 120000, "seed": 1},
    "tests": [{"method": "throughput", "search": "binary", "resolution_pct": 0.1}],
}


def nfv(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nfvperf", *args], capture_output=True, text=True, cwd=REPO,
                          env=ENV, timeout=timeout)


def run_suites(*jobs: tuple[Path, Path], out: Path) -> None:
    """``nfvperf run SUITE --db DB`` for each (suite, db) at once (different stores), then wait."""
    procs = [subprocess.Popen([sys.executable, "-m", "nfvperf", "run", str(suite), "--tg", "sim", "--db", str(db),
                               "--out", str(out), "--no-progress", "--no-ceiling"], cwd=REPO, env=ENV,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for suite, db in jobs]
    for p in procs:
        text, _ = p.communicate(timeout=120)
        assert p.returncode == 0, text


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """Store ``lowered``: 6 runs as shipped, 6 with capacity × 0.85; store ``same``: the same 6
    first runs (a copy), then 6 more unchanged."""
    tmp = tmp_path_factory.mktemp("trend")
    base, low = tmp / "base.yaml", tmp / "lowered.yaml"
    base.write_text(yaml.safe_dump(SUITE))
    low.write_text(yaml.safe_dump(dict(SUITE, sim={"capacity_pps": 120000 * 0.85, "seed": 1})))
    lowered, same = tmp / "lowered.db", tmp / "same.db"
    for _ in range(6):
        run_suites((base, lowered), out=tmp / "out")
    src, dst = sqlite3.connect(lowered), sqlite3.connect(same)
    src.backup(dst)
    src.close()
    dst.close()
    for _ in range(6):
        run_suites((low, lowered), (base, same), out=tmp / "out")
    return lowered, same


def test_trend_names_the_first_lowered_run_as_a_regression(stores):
    lowered, _ = stores
    p = nfv("trend", "--db", str(lowered), "--json", "--test", "throughput", "--size", "64")
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    (s,) = data["series"]
    assert s["identity"]["metric"] == "throughput" and s["identity"]["dut"] == "ovs-dpdk"
    assert [pt["run"] for pt in s["points"]] == list(range(1, 13))
    assert all(pt["status"] == "ok" and pt["value"] for pt in s["points"])
    assert [(c["run"], c["kind"]) for c in s["changes"]] == [(7, "regression")]
    assert 0.80 < s["changes"][0]["ratio"] < 0.90
    assert [(g["start_run"], g["end_run"]) for g in s["groups"]] == [(1, 6), (7, 12)]
    table = nfv("trend", "--db", str(lowered)).stdout
    assert "7: regression -1" in table


def test_gate_exits_1_on_the_lowered_store(stores):
    lowered, _ = stores
    p = nfv("gate", "--db", str(lowered))
    assert p.returncode == 1, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert len([x for x in lines if x.startswith("REGRESSION")]) == 1
    assert "since run 7" in p.stdout and "gate run 12" in lines[-1] and lines[-1].endswith("FAIL")


def test_gate_exits_0_with_the_capacity_unchanged(stores):
    _, same = stores
    p = nfv("gate", "--db", str(same), "--verbose")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "1 series against their history, 0 regressed" in p.stdout and p.stdout.rstrip().endswith("pass")
    data = json.loads(nfv("trend", "--db", str(same), "--json").stdout)
    assert [s["changes"] for s in data["series"]] == [[]]


def ab_suite(b_capacity: float) -> dict:
    """Two OVS builds (binary paths) as a study axis in interleaved rounds; on the simulated DUT
    build B's capacity stands for what the build does."""
    variant = {"a": {"topology": {"ovs": {"vswitchd": "/usr/sbin/ovs-vswitchd"}}, "sim": {"capacity_pps": 120000}},
               "b": {"topology": {"ovs": {"vswitchd": "/opt/ovs-b/sbin/ovs-vswitchd"}},
                     "sim": {"capacity_pps": b_capacity}}}
    return dict(SUITE, name="ab-builds", tests=[{"method": "throughput", "name": "build", "study": {
        "axes": {"build": variant}, "rounds": 6, "metrics": ["mrr"], "round_trial_s": 0.5}}])


@pytest.mark.parametrize("b_capacity, rc", [(120000 * 0.9, 1), (120000, 0)])
def test_gate_ab_two_builds_in_one_run(tmp_path, b_capacity, rc):
    suite, db = tmp_path / "ab.yaml", tmp_path / "ab.db"
    suite.write_text(yaml.safe_dump(ab_suite(b_capacity)))
    run_suites((suite, db), out=tmp_path / "out")
    p = nfv("gate", "--db", str(db), "--ab")
    assert p.returncode == rc, p.stdout + p.stderr
    first = p.stdout.splitlines()[0]
    assert first.startswith("REGRESSION" if rc else "OK") and "build[build=b] 64 B vs build[build=a] 64 B" in first
