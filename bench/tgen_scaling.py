#!/usr/bin/env python3
"""Benchmark: does tgen scale with its worker cores?  (issue 27: a direction over N cores)

Two figures, each with 1 and with 2 worker lcores, interleaved in every round (tx1, tx2, rx1,
rx2, then the next round in the opposite order), so a disturbance of the shared host hits both
layouts alike:

- ``tx``: TX alone on two ``net_null`` ports (the PMD frees what it is given, RX not polled),
  64 B, latency off, as fast as tgen can build and send: one stream on one TX queue and worker, or
  the direction split as nfvperf splits it (``tgen_cores: 2``): two sub-streams with half of the
  flows each, on TX queues 0 and 1 of port 0, worker lcores 1 and 2.
- ``rx``: RX analysis on ``net_ring`` loopback (each port receives what it sends), 64 B, latency
  ON as in every trial: one worker looping one port, or two workers each looping its own port
  (worker q sends and receives on ``net_ring`` port q): frames received and accounted per second.
- ``rx1p`` (not in the goal): the same with two workers on two queues of ONE ``net_ring`` port.
  net_ring keeps its queues' packet counters in one array of 24-byte structs (DPDK 22.11
  ``struct ring_queue``: ring pointer, rx_pkts, tx_pkts), so queues 0 and 1 share a cache line and
  every RX and TX burst of each worker writes the line the other writes: the PMD's false sharing,
  not tgen's (a NIC's queues do not share lines).  It is reported so the difference stays visible.

A figure is frames per wall-clock second (``tx``: sent; ``rx``: received), from tgen's own result
(``--oneshot``: sum of the streams' achieved rates).  1 worker runs on CPU 1, 2 workers on CPUs 0
and 1 (the control lcore sleeps in poll() on CPU 0).  ``*_scaling_2_over_1`` is the median over
rounds of each round's 2-worker / 1-worker ratio (goal on a quiet 2-CPU host: >= 1.8).

``--quick`` (or ``BENCH_QUICK=1``): one round of 0.3 s runs (seconds; for ``make test``).
``BENCH_ROUNDS`` (5), ``BENCH_DURATION_S`` (2.0).  Needs root (EAL ``--in-memory``).

JSON keys: tx_scaling_2_over_1, rx_scaling_2_over_1, rx_one_port_scaling_2_over_1, tx_pps, rx_pps, per_core_pps, rounds, duration_s, quick
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from nfvperf.tg.tgen import find_tgen_binary  # noqa: E402

QUICK = "--quick" in sys.argv[1:] or os.environ.get("BENCH_QUICK") == "1"
ROUNDS = 1 if QUICK else int(os.environ.get("BENCH_ROUNDS", "5"))
DURATION_S = 0.3 if QUICK else float(os.environ.get("BENCH_DURATION_S", "2.0"))
FLOWS = 1000
LCORES = {1: "0@0,1@1", 2: "0@0,1@0,2@1"} if (os.cpu_count() or 1) >= 2 else \
    {1: "0@0,1@0", 2: "0@0,1@0,2@0"}


def argv(binary: str, mode: str, workers: int, d: str) -> list[str]:
    eal = [binary, "--lcores", LCORES[workers], "--no-pci", "--in-memory", "--file-prefix",
           Path(d).name, "--log-level", "lib.eal:error"]
    q = f"txq={workers},rxq={workers}"
    trial = ["--duration", str(DURATION_S), "--drain", "0.1", "--learning", "0"]
    # the direction's flows split over the workers' TX queues (nfvperf.tg.tgen_split)
    per = FLOWS // workers
    if mode == "tx":
        streams = [a for i in range(workers) for a in
                   ("--stream", f"port=0,rx_port=1,size=64,flows={per},src_ip=198.18.{i}.1,pps=5e8")]
        return eal + ["--vdev", "net_null0", "--vdev", "net_null1", "--",
                      "--socket", str(Path(d) / "ctl.sock"),
                      "--port", f"0:speed=10000G,rx=0,{q}", "--port", "1:speed=10000G,rx=0",
                      "--oneshot"] + streams + trial + ["--no-latency"]
    if mode == "rx1p":
        streams = [a for i in range(workers) for a in
                   ("--stream", f"port=0,rx_port=0,size=64,flows={per},src_ip=198.18.{i}.1,pps=5e8")]
        return eal + ["--vdev", "net_ring0", "--", "--socket", str(Path(d) / "ctl.sock"),
                      "--port", f"0:speed=10000G,{q}", "--oneshot"] + streams + trial
    # one net_ring port per worker (port q on worker q: ports are dealt to workers round-robin)
    streams = [a for i in range(workers) for a in
               ("--stream", f"port={i},rx_port={i},size=64,flows={per},src_ip=198.18.{i}.1,pps=5e8")]
    vdevs = [a for i in range(workers) for a in ("--vdev", f"net_ring{i}")]
    ports = [a for i in range(workers) for a in ("--port", f"{i}:speed=10000G")]
    return eal + vdevs + ["--", "--socket", str(Path(d) / "ctl.sock")] + ports + ["--oneshot"] + streams + trial


def run_one(binary: str, mode: str, workers: int) -> tuple[float, list[float]]:
    """(frames per second in all, per stream = per worker) of one oneshot run."""
    with tempfile.TemporaryDirectory(prefix="tgsc") as d:
        p = subprocess.run(argv(binary, mode, workers, d), capture_output=True, text=True,
                           timeout=60 + 5 * DURATION_S)
    if p.returncode != 0:
        raise SystemExit(f"tgen {mode} x{workers} failed ({p.returncode}): {p.stderr[-1500:]}")
    res = json.loads(p.stdout.strip().splitlines()[-1])
    per = []
    for s in res["streams"]:
        eff = float(s["effective_duration_s"]) or DURATION_S
        n = int(s["sent"] if mode == "tx" else s["received"])
        per.append(n / eff)
    return sum(per), per


def main() -> int:
    if os.geteuid() != 0:
        raise SystemExit("needs root (DPDK EAL)")
    binary = str(find_tgen_binary())
    modes = ("tx", "rx", "rx1p")
    figs: dict[str, dict[int, list[float]]] = {m: {1: [], 2: []} for m in modes}
    per_core: dict[str, dict[int, list[float]]] = {m: {1: [], 2: []} for m in modes}
    ratios: dict[str, list[float]] = {m: [] for m in modes}
    for r in range(ROUNDS):
        order = [1, 2] if r % 2 == 0 else [2, 1]
        for mode in modes:
            got = {}
            for w in order:
                total, per = run_one(binary, mode, w)
                got[w] = total
                figs[mode][w].append(total)
                per_core[mode][w] += per
                print(f"round {r + 1} {mode} {w} worker(s): {total / 1e6:8.3f} Mpps  per core "
                      + " ".join(f"{x / 1e6:.3f}" for x in per), flush=True)
            ratios[mode].append(got[2] / got[1])
    out = {
        "tx_scaling_2_over_1": round(statistics.median(ratios["tx"]), 4),
        "rx_scaling_2_over_1": round(statistics.median(ratios["rx"]), 4),
        "rx_one_port_scaling_2_over_1": round(statistics.median(ratios["rx1p"]), 4),
        "tx_pps": {str(w): statistics.median(v) for w, v in figs["tx"].items()},
        "rx_pps": {str(w): statistics.median(v) for w, v in figs["rx"].items()},
        "per_core_pps": {m: {str(w): statistics.median(v) for w, v in d.items()}
                         for m, d in per_core.items()},
        "rounds": ROUNDS, "duration_s": DURATION_S, "quick": QUICK,
    }
    print(f"tx scaling 2/1: {out['tx_scaling_2_over_1']}  rx scaling 2/1: {out['rx_scaling_2_over_1']}  "
          f"(rx on 2 queues of one net_ring port: {out['rx_one_port_scaling_2_over_1']})")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
