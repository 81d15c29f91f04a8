#!/usr/bin/env python3
"""Benchmark: tgen's own TX cost per frame, without a forwarder or a PMD that copies: two
``net_null`` ports (TX frees the mbufs, RX not polled), one stream at full speed, ``--oneshot``.

The figure is the tgen process's CPU time (user + system, from ``wait4``) divided by the frames it
sent: CPU time counts only while tgen runs, so another process on the same CPU changes it far less
than it changes frames per wall-clock second (a noisy shared host moves the latter 2x).  Start-up
(EAL, TSC calibration) is in it too, the same for every build.

A/B: ``BENCH_TGEN_B=/path/to/other/tgen`` runs that build in every round right after the first;
``b_over_a_median_of_rounds`` pairs each round's two figures.  ``BENCH_ROUNDS`` (3),
``BENCH_DURATION_S`` (1.5), ``BENCH_SIZES`` (64,1518).  Prints one line per run and, as its LAST
line, one JSON object: ``ns_per_frame`` per build and size (median of rounds).  Needs root.
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

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
DURATION_S = float(os.environ.get("BENCH_DURATION_S", "1.5"))
SIZES = tuple(int(x) for x in os.environ.get("BENCH_SIZES", "64,1518").split(","))
LCORES = "0@1,1@1" if (os.cpu_count() or 1) >= 2 else "0@0,1@0"


def one(binary: str, size: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="tgen-txcost-") as d:
        argv = [binary, "--lcores", LCORES, "--no-pci", "--in-memory", "--file-prefix", Path(d).name,
                "--vdev", "net_null0", "--vdev", "net_null1", "--log-level", "lib.eal:error", "--",
                "--socket", str(Path(d) / "ctl.sock"),
                "--port", "0:speed=10000G,rx=0", "--port", "1:speed=10000G,rx=0", "--oneshot",
                "--stream", f"port=0,rx_port=1,size={size},pps=5e8",
                "--duration", str(DURATION_S), "--drain", "0", "--learning", "0", "--no-latency"]
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert p.stdout is not None
        out = p.stdout.read()
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError(f"{binary} exited {p.returncode}")
    res = json.loads(out)
    st = res["streams"][0]
    cpu_s = ru.ru_utime + ru.ru_stime
    return {"sent": st["sent"], "mpps": st["achieved_pps"] / 1e6, "cpu_s": cpu_s,
            "ns_per_frame": cpu_s * 1e9 / st["sent"] if st["sent"] else float("inf")}


def main() -> int:
    if os.geteuid() != 0:
        print(json.dumps({"skipped": "needs root"}))
        return 0
    builds = {"a": str(find_tgen_binary())}
    if os.environ.get("BENCH_TGEN_B"):
        builds["b"] = os.environ["BENCH_TGEN_B"]
    runs: dict[str, dict[int, list[dict[str, float]]]] = {k: {s: [] for s in SIZES} for k in builds}
    for r in range(ROUNDS):
        for size in SIZES:
            for k, b in builds.items():
                x = one(b, size)
                runs[k][size].append(x)
                print(f"round {r + 1} {size:5d} B {k}: {x['mpps']:7.2f} Mpps  {x['ns_per_frame']:6.2f} CPU ns/frame",
                      file=sys.stderr, flush=True)
    res: dict[str, object] = {"builds": builds, "rounds": ROUNDS, "duration_s": DURATION_S,
                              "load_avg_1m": os.getloadavg()[0],
                              "ns_per_frame": {k: {str(s): round(statistics.median(x["ns_per_frame"] for x in v), 2)
                                                   for s, v in per.items()} for k, per in runs.items()}}
    if "b" in builds:
        res["b_over_a_median_of_rounds"] = {
            str(s): round(statistics.median(b["ns_per_frame"] / a["ns_per_frame"]
                                            for a, b in zip(runs["a"][s], runs["b"][s])), 3) for s in SIZES}
    print(json.dumps(res, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
