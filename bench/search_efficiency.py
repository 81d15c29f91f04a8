#!/usr/bin/env python3
"""Search efficiency: our MLR-style search vs MLRsearch 1.2.1 vs plain binary search.

Same simulated DUTs (Poisson loss rising with load plus a hard capacity, a range of
capacities, the same seeds), same goals (CSIT NDR/PDR preset: 1 s trials, duration sum 21 s,
exceed 50 %, width 0.5 %, loss 0 % / 0.5 %).  For each search: total trial seconds (warm-up
included) and the relative error of the result (RLB) against the DUT's true value for each goal:

* NDR truth: the load where a 1 s trial is loss-free with probability 0.5 (exceed ratio 0.5);
* PDR truth: the load where the expected loss ratio reaches 0.5 %.

Binary search runs twice (zero loss, then loss ≤ 0.5 %), 1 s trials, resolution 0.25 % of line
rate (≈ 0.5 % of the result), the RFC 2544 way: one trial decides.

Prints a table, then as the LAST line one JSON object with the ratios (ours / peer).
The simulated DUT never sleeps, so this takes seconds.

``--strategy NAME`` runs our search with another named load-selection strategy
(nfvperf.search.mlr.STRATEGIES; the JSON then says which); ``--strategies`` adds one row per
named strategy to both tables (the JSON stays about the default).  ``--quick``: 2 seeds x 2
capacities (the shape of the output, for ``make test``).

JSON keys: bench, dut, goals, runs_per_search, ours_trial_s, ours_err_pct, binary_trial_s,
binary_err_pct, trial_s_ratio_ours_vs_binary, err_ratio_ours_vs_binary
"""
from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from nfvperf.search.binary import binary_search  # noqa: E402
from nfvperf.search.mlr import PRESETS, STRATEGIES, mlr_search  # noqa: E402
from nfvperf.search.validity import TrialRunner  # noqa: E402
from nfvperf.trial import TrafficProfile  # noqa: E402
from nfvperf.tg.sim import SimMeasurer  # noqa: E402

try:
    from nfvperf.search.mlrsearch_engine import available, mlrsearch_search  # noqa: E402
    HAVE_MLRSEARCH = available()
except ImportError:  # pragma: no cover
    HAVE_MLRSEARCH = False

GOALS = PRESETS["csit_ndr_pdr"]
SEEDS = list(range(1, 41))
CAP_FRACTIONS = [0.25, 0.3, 0.4, 0.5, 0.54, 0.6, 0.7, 0.8, 0.85, 0.95]
NOISE_PPS, SOFTNESS = 10.0, 0.05


def dut(frac: float, seed: int) -> SimMeasurer:
    prof = TrafficProfile(frame_size_b=64, bidirectional=False, latency=False)
    m = SimMeasurer(prof.max_load_pps * frac, loss_model="poisson", seed=seed,
                    noise_pps=NOISE_PPS, softness=SOFTNESS)
    m.set_profile(prof)
    return m


def truth(m: SimMeasurer) -> dict[str, float]:
    C = m.capacity_pps()
    # NDR: P(no loss in 1 s) = exp(-lambda(L)) = 0.5, lambda = noise × exp((L/C − 1)/softness)
    ndr = min(C, C * (1 + SOFTNESS * math.log(math.log(2) / NOISE_PPS)))

    def exp_loss_ratio(L: float) -> float:
        lam = min(NOISE_PPS * math.exp(min(50.0, (L / C - 1) / SOFTNESS)), 0.001 * L)
        return (max(0.0, L - C) + lam) / L

    lo, hi = C * 0.9, C / 0.99
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if exp_loss_ratio(mid) <= 0.005 else (lo, mid)
    return {"ndr": ndr, "pdr": lo}


def run_ours(m, strategy="default"):
    r = mlr_search(TrialRunner(m), GOALS, m.profile.max_load_pps, strategy=strategy)
    return r.total_trial_s, len(r.trials) + 1, {g.name: g.lower_bound_pps for g in r.goals}


def run_mlrsearch(m):
    r = mlrsearch_search(TrialRunner(m), GOALS, m.profile.max_load_pps)
    return r.total_trial_s, len(r.trials) + 1, {g.name: g.lower_bound_pps for g in r.goals}


def run_binary(m):
    line = m.profile.max_load_pps
    out, secs, n = {}, 0.0, 0
    for g in GOALS:
        r = binary_search(TrialRunner(m), line, trial_duration_s=1.0, resolution_pct=0.25,
                          loss_ratio=g.loss_ratio)
        out[g.name] = r.load_pps
        secs += r.total_trial_s
        n += r.trials_used
    return secs, n, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--strategy", default="default", choices=list(STRATEGIES),
                    help="our search's load-selection strategy (default: default)")
    ap.add_argument("--strategies", action="store_true",
                    help="also one row per named strategy")
    ap.add_argument("--quick", action="store_true", help="2 seeds x 2 capacities: seconds, for make test")
    args = ap.parse_args(argv)
    seeds, fractions = (SEEDS[:2], CAP_FRACTIONS[3:5]) if args.quick else (SEEDS, CAP_FRACTIONS)
    searches = [("ours (mlr)", functools.partial(run_ours, strategy=args.strategy))]
    if HAVE_MLRSEARCH:
        searches.append(("MLRsearch 1.2.1", run_mlrsearch))
    searches.append(("binary x2", run_binary))
    if args.strategies:
        searches += [(f"ours [{n}]", functools.partial(run_ours, strategy=n))
                     for n in STRATEGIES if n != args.strategy]
    stats: dict[str, dict[str, list[float]]] = {}
    t0 = time.monotonic()
    for name, fn in searches:
        st = stats.setdefault(name, {"secs": [], "trials": [], "err_ndr": [], "err_pdr": [],
                                     "over_ndr": [], "over_pdr": [], "cpu": []})
        for frac in fractions:
            for seed in seeds:
                m = dut(frac, seed)
                tr = truth(m)
                c0 = time.process_time()
                secs, n, res = fn(m)
                st["cpu"].append(time.process_time() - c0)
                st["secs"].append(secs)
                st["trials"].append(n)
                for g in ("ndr", "pdr"):
                    v = res.get(g)
                    err = 1.0 if v is None else abs(v - tr[g]) / tr[g]
                    st[f"err_{g}"].append(err)
                    st[f"over_{g}"].append(1.0 if v is not None and v > tr[g] * 1.005 else 0.0)
    wall = time.monotonic() - t0
    mean = statistics.fmean
    print(f"Search efficiency on the Poisson sim DUT ({wall:.0f} s wall): {len(seeds)} seeds x "
          f"{len(fractions)} capacities, goals CSIT NDR/PDR (1 s, sum 21 s, exceed 50 %, "
          f"width 0.5 %)")
    nw = max(18, max(len(n) + 1 for n, _ in searches))
    hdr = f"{'search':<{nw}}{'trial s (mean)':>15}{'trial s (max)':>14}{'trials':>8}" \
          f"{'NDR err %':>11}{'PDR err %':>11}{'>truth+w %':>12}{'cpu ms':>8}"
    print(hdr)
    print("-" * len(hdr))
    summary = {}
    for name, st in stats.items():
        err = (mean(st["err_ndr"]) + mean(st["err_pdr"])) / 2
        over = (mean(st["over_ndr"]) + mean(st["over_pdr"])) / 2
        summary[name] = {"trial_s": mean(st["secs"]), "err": err}
        print(f"{name:<{nw}}{mean(st['secs']):>15.1f}{max(st['secs']):>14.1f}"
              f"{mean(st['trials']):>8.1f}{mean(st['err_ndr']) * 100:>11.3f}"
              f"{mean(st['err_pdr']) * 100:>11.3f}{over * 100:>12.1f}{mean(st['cpu']) * 1e3:>8.1f}")
    # a second, deterministic DUT: hard limit (loses iff load > C), truth exactly known
    hard: dict[str, list[float]] = {}
    hard_err: dict[str, list[float]] = {}
    for name, fn in searches:
        for frac in fractions:
            m = dut(frac, 1)
            m.loss_model = "threshold"
            C = m.capacity_pps()
            secs, n, res = fn(m)
            hard.setdefault(name, []).append(secs)
            e = [abs((res.get("ndr") or 0) - C) / C, abs((res.get("pdr") or 0) - C / 0.995) / (C / 0.995)]
            hard_err.setdefault(name, []).append(sum(e) / 2)
    print(f"Hard-limit DUT (loses iff load > C), {len(fractions)} capacities:")
    for name in hard:
        print(f"{name:<{nw}}{mean(hard[name]):>15.1f}{max(hard[name]):>14.1f}{'':>8}"
              f"{'':>11}{'':>11}{'':>12}   mean err {mean(hard_err[name]) * 100:.3f} %")
    print(f"(bench wall time {time.monotonic() - t0:.1f} s; the simulated DUT never sleeps)")
    ours = summary["ours (mlr)"]
    out = {"bench": "search_efficiency", "dut": "sim poisson", "goals": "csit_ndr_pdr",
           "runs_per_search": len(seeds) * len(fractions),
           "ours_trial_s": round(ours["trial_s"], 2), "ours_err_pct": round(ours["err"] * 100, 4)}
    if args.strategy != "default":
        out["ours_strategy"] = args.strategy
    if "MLRsearch 1.2.1" in summary:
        peer = summary["MLRsearch 1.2.1"]
        out.update({"mlrsearch_trial_s": round(peer["trial_s"], 2),
                    "mlrsearch_err_pct": round(peer["err"] * 100, 4),
                    "trial_s_ratio_ours_vs_mlrsearch": round(ours["trial_s"] / peer["trial_s"], 4),
                    "err_ratio_ours_vs_mlrsearch": round(ours["err"] / peer["err"], 4)
                    if peer["err"] else None})
    b = summary["binary x2"]
    out.update({"binary_trial_s": round(b["trial_s"], 2), "binary_err_pct": round(b["err"] * 100, 4),
                "trial_s_ratio_ours_vs_binary": round(ours["trial_s"] / b["trial_s"], 4),
                "err_ratio_ours_vs_binary": round(ours["err"] / b["err"], 4) if b["err"] else None})
    if "MLRsearch 1.2.1" in hard:
        out["hard_limit_trial_s_ratio_ours_vs_mlrsearch"] = round(
            mean(hard["ours (mlr)"]) / mean(hard["MLRsearch 1.2.1"]), 4)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
