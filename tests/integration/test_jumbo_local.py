"""Seed 003's jumbo zero-loss cases on this machine (``suites/jumbo-local.yaml``): the shipped
suite, cut to one case (the single OVS-DPDK bridge) and one size (9000 B) so it fits CI, runs
end to end with ``nfvperf run``: a zero-loss binary search whose result is above zero, whose last
passing trial lost nothing, and whose frames OVS counted at 9000 B (8996 B without the FCS) on
both its ports.  Nothing is left behind (``leak_check``)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.root

REPO = Path(__file__).resolve().parents[2]


def _nfvperf(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nfvperf", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=timeout)


@pytest.fixture(autouse=True)
def _needs_ovs():
    if not shutil.which("ovs-vswitchd") or not shutil.which("dpdk-testpmd"):
        pytest.skip("OVS-DPDK or dpdk-testpmd not installed")


def test_jumbo_local_runs_a_9000_b_zero_loss_search_through_ovs(tmp_path, leak_check) -> None:
    suite = yaml.safe_load((REPO / "suites" / "jumbo-local.yaml").read_text())
    assert suite["topology"]["mtu"] == 9000 and suite["traffic"]["frame_sizes"] == [4096, 8192, 9000]
    test = suite["tests"][0]
    variants = test["study"]["axes"]["variant"]
    assert {"1-testpmd", "3-single-bridge", "4-dual-bridge", "pvp-container"} <= set(variants)
    test["study"]["axes"]["variant"] = {"3-single-bridge": variants["3-single-bridge"]}
    suite["traffic"]["frame_sizes"] = [9000]
    test["resolution_pct"] = 2          # a few trials, not the suite's 0.1 %
    path = tmp_path / "jumbo.yaml"
    path.write_text(yaml.safe_dump(suite))
    db = f"sqlite:///{tmp_path / 'store.db'}"
    p = _nfvperf("run", str(path), "--tg", "tgen", "--db", db, "--out", str(tmp_path / "out"),
                 "--no-progress", "--no-ceiling")
    m = re.search(r"run (\d+) \((nfv[0-9a-f]{6})\)", p.stdout + p.stderr)
    assert m, p.stdout + p.stderr
    leak_check.watch(m.group(2))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    e = _nfvperf("export", m.group(1), "--format", "json", "--db", db)
    (t,) = json.loads(e.stdout)["tests"]
    assert t["status"] == "passed" and t["frame_size_b"] == 9000, t["status"]
    fps = t["results"][0]["value_pps"]
    assert fps > 0, t["results"]
    passed = [tr for tr in t["trials"] if tr["valid"] and tr["loss_ratio"] == 0 and tr["sent"] > 0]
    last = max(passed, key=lambda tr: tr["load_pps"])
    assert last["load_pps"] == pytest.approx(fps, rel=1e-6)
    ports = last["detail"]["dut_counters"]["ports"]
    rx = ports["phy0"]["rx_packets"]
    assert rx == last["sent"] and ports["phy1"]["tx_packets"] == rx, ports
    assert ports["phy0"]["rx_bytes"] == rx * 8996 and ports["phy1"]["tx_bytes"] == rx * 8996, ports
