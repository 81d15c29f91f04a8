"""The harness ceiling on a real path (af_packet veth, tgen through testpmd io): ``nfvperf
baseline`` measures and caches it; a short real run (``--tg tgen``, p2p, one frame size, 0.5 s
trials) measures it before its topology, stores ``environment.harness_ceiling`` and its report
shows the ceiling and bound columns.  Nothing is left behind (``leak_check``)."""
from __future__ import annotations

import json
import re
import secrets
import shutil

import pytest
from cli_runs import export, nfvperf, run_suite

pytestmark = pytest.mark.root


SUITE = """\
name: ceiling-integration
topology: {kind: p2p, dut: testpmd, port_kind: af_packet}
traffic: {frame_sizes: [64], link_speed: 1G}
profile: quick
ceiling: {trial_s: 0.3, resolution: 0.2}
tests:
  - {method: throughput, trial_duration_s: 0.5, resolution_pct: 20}
"""
# coarse searches (ceiling 20 %, throughput 20 %): what is asserted is that a ceiling was measured,
# stored, cached and reported next to the throughput, not how close either search got


@pytest.fixture(autouse=True)
def _needs_testpmd():
    if not shutil.which("dpdk-testpmd"):
        pytest.skip("dpdk-testpmd not installed")


def _check_point(p: dict) -> None:
    assert p["fps"] > 0, p
    sl = p["self_latency_ns"]
    assert 0 < sl["min"] <= sl["p50"] <= sl["p99"], sl


def test_baseline_measures_and_caches(tmp_path, leak_check) -> None:
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE)
    out = tmp_path / "out"
    tag = "nfv" + secrets.token_hex(3)
    leak_check.watch(tag)
    p = nfvperf("baseline", str(suite), "--size", "64", "--out", str(out), "--json", "--tag", tag)
    assert p.returncode == 0, p.stdout + p.stderr
    res = json.loads(p.stdout.strip().splitlines()[-1])
    assert res["port_kind"] == "af_packet" and res["cached"] is False and "error" not in res
    _check_point(res["per_size"]["64"])
    assert "measuring tgen through testpmd io" in p.stderr
    if res["per_size"]["64"].get("unsteady"):
        # the host was slow for the whole search (its recheck carried > 1.25x): not cached
        assert not (out / "harness-ceiling.json").exists() or not json.loads(
            (out / "harness-ceiling.json").read_text())["entries"]
        assert "is not cached" in p.stderr
        return
    cache = json.loads((out / "harness-ceiling.json").read_text())["entries"]
    (key,) = cache
    assert "|af_packet|1000000000|1500|" in key and key.endswith("|64")
    # again: from the cache, nothing measured
    p2 = nfvperf("baseline", str(suite), "--size", "64", "--out", str(out), "--json", "--tag", tag)
    assert p2.returncode == 0, p2.stderr
    res2 = json.loads(p2.stdout.strip().splitlines()[-1])
    assert res2["cached"] is True and res2["per_size"]["64"]["fps"] == res["per_size"]["64"]["fps"]
    assert "from the cache" in p2.stderr


def test_run_records_the_ceiling_and_reports_it(tmp_path, leak_check) -> None:
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE)
    p, run_id, db = run_suite(suite, tmp_path, leak_check, "--report")
    assert "harness ceiling for af_packet at 64 B" in p.stderr
    env = export(run_id, db)["run"]["environment"]
    hc = env["harness_ceiling"]
    assert hc["port_kind"] == "af_packet" and hc["cached"] is False and "error" not in hc, hc
    _check_point(hc["per_size"]["64"])
    r = nfvperf("report", run_id, "--db", db)
    assert r.returncode == 0, r.stderr
    assert "harness ceiling fps" in r.stdout
    row = next(ln for ln in r.stdout.splitlines() if re.match(r"^[│|\s]*64\s", ln))
    assert f"{round(hc['per_size']['64']['fps']):,}" in row
    assert "harness-bound" in row or "DUT-bound" in row or "near line rate" in row
