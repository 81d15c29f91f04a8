#!/usr/bin/env python3
"""Benchmark: does reading the DUT's telemetry around each trial change the result? (issue 28)

MRR (the received rate at an overload, one trial) on PHY-OVS-PHY through OVS-DPDK on vhost-user
ports at 64 B, with the DUT's telemetry read before and after each trial (on: pmd-stats-show,
dump-ports, dpctl/show, coverage/show, outside the measured interval) and without it (off), in
interleaved rounds on one topology: every round measures both, in a fresh random order, and the
figure is the median of the per-round ratios on/off with its 95 % exact rank interval
(``nfvperf.stats.ratio_interval``).  Goal: the interval contains 1.0 or the ratio is within ±2 %.

``--quick``: 3 rounds of 0.2 s trials (seconds; checks that the bench runs, not the figure).
Default: 30 rounds of 0.5 s trials.  ``BENCH_ROUNDS``, ``BENCH_TRIAL_S`` override.  Needs root,
OVS-DPDK and tgen.  Prints one line per round and, as its LAST line, one JSON object.

JSON keys: on_over_off_ratio, on_over_off_interval, rounds, trial_s, on_mfps, off_mfps, read_s_median, differs
"""
from __future__ import annotations

import json
import os
import random
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from nfvperf.host.run import ResourceTracker, RunContext  # noqa: E402
from nfvperf.stats import ratio_interval  # noqa: E402
from nfvperf.topo import build  # noqa: E402
from nfvperf.topo.spec import TopologySpec  # noqa: E402
from nfvperf.trial import TrafficProfile  # noqa: E402

QUICK = "--quick" in sys.argv[1:]
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3" if QUICK else "30"))
TRIAL_S = float(os.environ.get("BENCH_TRIAL_S", "0.2" if QUICK else "0.5"))
#: the overload: far above what OVS forwards here (vhost-user ports push back)
LOAD_PPS = 20e6


def mrr(m, on: bool) -> tuple[float, float]:
    """(received fps per interface, telemetry read seconds) of one trial."""
    m.telemetry_enabled = on
    tr = m.measure(TRIAL_S, LOAD_PPS)
    dur = tr.effective_duration_s or tr.duration_s
    return tr.received / dur / 2, float((tr.telemetry.get("dut") or {}).get("read_s") or 0.0)


def main() -> int:
    if os.geteuid() != 0:
        print("needs root (OVS-DPDK, hugepages, tgen)", file=sys.stderr)
        return 2
    run = RunContext(run_dir=Path("/tmp") / f"nfvperf-bench-telemetry-{os.getpid()}")
    tracker = ResourceTracker(run)
    run.tracker = tracker  # type: ignore[attr-defined]
    spec = TopologySpec(kind="p-ovs-p", dut="ovs-dpdk", ports=2, port_kind="vhost", ovs={"socket_mem_mb": 512})
    on, off, reads = [], [], []
    rng = random.Random(28)
    try:
        with build(spec, run) as topo:
            m = topo.measurer()
            m.set_profile(TrafficProfile(frame_size_b=64, flows_per_port=1, learning=False, drain_s=0.1,
                                         latency=False, link_speed_bps=40e9))
            mrr(m, True)                                   # warm-up (vhost rings, flows)
            for r in range(1, ROUNDS + 1):
                order = [True, False]
                rng.shuffle(order)
                got = {}
                for state in order:
                    fps, rs = mrr(m, state)
                    got[state] = fps
                    if state:
                        reads.append(rs)
                on.append(got[True])
                off.append(got[False])
                print(f"round {r}/{ROUNDS}: on {got[True] / 1e6:.3f} Mfps/if, off {got[False] / 1e6:.3f} "
                      f"Mfps/if, ratio {got[True] / got[False]:.3f}", flush=True)
    finally:
        tracker.release_all()
    iv = ratio_interval(on, off)
    out = {"on_over_off_ratio": iv.median if iv else None,
           "on_over_off_interval": [iv.lo, iv.hi] if iv else None,
           "rounds": ROUNDS, "trial_s": TRIAL_S,
           "on_mfps": statistics.median(on) / 1e6, "off_mfps": statistics.median(off) / 1e6,
           "read_s_median": statistics.median(reads) if reads else None,
           "differs": bool(iv.differs) if iv else None}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
