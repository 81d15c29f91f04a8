"""Issue 8 on a real DUT: ``nfvperf run --tg tgen`` on p-ovs-p with a few thousand flows, each
its own OpenFlow rule (so each its own datapath flow), short trials.  The search starts with a
discarded warm-up trial that is stored (phase ``warmup``, not used), and the OVS PMD counters
stored with a trial are that trial's deltas: the warm-up sets the datapath flows up (one upcall
per flow), the first measured trial after it finds them cached (few or no upcalls).  With
cumulative counters its upcall count would be at least the warm-up's."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_runs import export, run_suite

pytestmark = pytest.mark.root

if os.geteuid() != 0 or not os.path.exists("/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"):
    pytest.skip("needs root and openvswitch-switch-dpdk", allow_module_level=True)

FLOWS = 2048

SUITE = f"""\
name: hygiene-p-ovs-p
topology: {{kind: p-ovs-p, ports: 2, ovs: {{socket_mem_mb: 512, rules: {FLOWS}}}}}
traffic: {{frame_sizes: [64], flows_per_port: {FLOWS}, bidirectional: true, link_speed: 100M}}
profile: quick
tests:
  - {{method: throughput, name: tput, trial_duration_s: 0.5, resolution_pct: 10, calibrate: false}}
"""


def _upcalls(trial: dict) -> int:
    total = trial["detail"]["dut_counters"]["pmd"]["total"]
    return int(total.get("miss_with_success_upcall", 0)) + int(total.get("miss_with_failed_upcall", 0))


def test_warmup_stored_and_pmd_counters_are_per_trial(tmp_path: Path, leak_check) -> None:
    from nfvperf.tg.tgen import find_tgen_binary
    try:
        find_tgen_binary()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    suite = tmp_path / "hygiene.yaml"
    suite.write_text(SUITE)
    # no harness ceiling (test_harness_ceiling's subject; a testpmd p2p and its search, asserted
    # nowhere here)
    _, run_id, db = run_suite(suite, tmp_path, leak_check, "--no-ceiling")
    (test,) = export(run_id, db)["tests"]
    assert test["status"] == "passed", test
    trials = test["trials"]
    warm = trials[0]
    assert warm["context"]["phase"] == "warmup" and warm["context"]["warmup"] is True
    assert warm["context"]["used"] is False
    assert [t["context"]["phase"] for t in trials].count("warmup") == 1
    data = test["results"][0]["data"]
    assert data["warmup"]["duration_s"] == warm["duration_s"] >= 1.0
    assert len(data["trace"]) == data["trials"] == len([t for t in trials if t["context"].get("used")])
    assert all(t["phase"] != "warmup" for t in data["trace"])
    assert "invalid_trials" in data and "invalid_reasons" in data
    first = next(t for t in trials[1:] if t["context"].get("used"))
    for t in (warm, first):
        assert t["detail"]["dut_counters"]["scope"] == "trial", t["detail"]["dut_counters"]
    # the warm-up reached every flow: one datapath flow set up per (direction, flow)
    assert _upcalls(warm) >= FLOWS, warm["detail"]["dut_counters"]["pmd"]
    # the first measured trial's counters are its own: the flows were already cached
    assert _upcalls(first) < _upcalls(warm) / 10, (_upcalls(first), _upcalls(warm))
    # and its packets are this trial's only: at least what it forwarded, at most what it sent
    # (a few learning frames aside), far from the warm-up's on top
    rx = first["detail"]["dut_counters"]["pmd"]["total"]["packets_received"]
    assert first["received"] <= rx <= first["sent"] + 100, (rx, first["received"], first["sent"])
