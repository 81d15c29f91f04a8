#!/usr/bin/env python3
"""What each throughput goal costs in trial time and how stable its result is (issue 8).

One noisy simulated DUT (10GbE, 64 B, capacity 5 Mfps; Poisson loss that rises near the
capacity plus rare loss spikes), each goal repeated N times with a different seed, as
``nfvperf run --repeat N`` would.  For each goal: mean trial seconds per search (warm-up
included), the median result, and its spread over the repetitions: relative range
(max − min) / median and the coefficient of variation.

Goals (every one through ``nfvperf.methods.throughput``, the way a suite runs it):

* ``binary 1 s``: strict zero loss, one 1 s trial decides (``search: binary``, the quick profile);
* ``binary 60 s``: the same with RFC 2544 §24 60 s trials;
* ``rfc2544``: MLR preset, zero loss, exceed 0, 60 s final trials;
* ``loss_tolerant``: MLR preset, zero loss, exceed 50 %, 1 s trials, 21 s duration sum;
* ``csit_pdr``: MLR preset, loss ≤ 0.5 %, exceed 50 %, 1 s trials, 21 s sum.

Prints a table, then as the LAST line one JSON object: per goal the mean trial seconds and the
relative range.  The simulated DUT never sleeps, so this takes seconds.  ``--repeats``, ``--spikes`` (loss
spikes per second), ``--noise`` (Poisson noise at capacity, lost frames per second); ``--quick``: 2
repeats (the shape of the output, for ``make test``).

JSON keys: binary 1 s, binary 60 s, rfc2544, loss_tolerant, csit_pdr
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from nfvperf.methods import REGISTRY, ThroughputParams  # noqa: E402
from nfvperf.tg.sim import SimMeasurer  # noqa: E402
from nfvperf.trial import TrafficProfile  # noqa: E402

GOALS = {
    "binary 1 s": dict(search="binary", trial_duration_s=1.0, resolution_pct=0.1),
    "binary 60 s": dict(search="binary", trial_duration_s=60.0, resolution_pct=0.1),
    "rfc2544": dict(preset="rfc2544"),
    "loss_tolerant": dict(preset="loss_tolerant"),
    "csit_pdr": dict(preset="csit_pdr"),
}


def measure(goal: dict, seed: int, noise: float, spikes: float) -> tuple[float, float]:
    m = SimMeasurer(5e6, loss_model="poisson", noise_pps=noise, spike_rate_per_s=spikes,
                    spike_frames=50, seed=seed)
    m.set_profile(TrafficProfile(frame_size_b=64, bidirectional=False, latency=False))
    run = REGISTRY["throughput"].run
    r = run(m, m.profile, ThroughputParams(**goal), None)
    return r.throughput_pps or 0.0, r.total_trial_s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--noise", type=float, default=100.0)
    ap.add_argument("--spikes", type=float, default=0.01)
    ap.add_argument("--quick", action="store_true", help="2 repeats: seconds, for make test")
    a = ap.parse_args()
    if a.quick:
        a.repeats = 2
    print(f"noisy sim: capacity 5 Mfps, poisson noise {a.noise:g} fps at capacity, "
          f"{a.spikes:g} loss spikes/s (50 frames), {a.repeats} repeats")
    print(f"{'goal':<14} {'trial s/search':>15} {'median fps':>12} {'min fps':>12} {'max fps':>12} "
          f"{'range %':>8} {'CV %':>6}")
    summary = {}
    for name, goal in GOALS.items():
        vals, secs = zip(*(measure(goal, seed, a.noise, a.spikes) for seed in range(1, a.repeats + 1)))
        med = statistics.median(vals)
        rng = f"{100 * (max(vals) - min(vals)) / med:.2f}" if med else "n/a"
        cv = statistics.pstdev(vals) / statistics.fmean(vals) if statistics.fmean(vals) else 0.0
        print(f"{name:<14} {statistics.fmean(secs):>15.1f} {med:>12,.0f} {min(vals):>12,.0f} "
              f"{max(vals):>12,.0f} {rng:>8} {100 * cv:>6.2f}")
        summary[name] = {"trial_s": round(statistics.fmean(secs), 1),
                         "relative_range": round((max(vals) - min(vals)) / med, 4) if med else None}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
