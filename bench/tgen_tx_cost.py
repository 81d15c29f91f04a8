#!/usr/bin/env python3
"""Benchmark: tgen's own CPU cost per frame, without a forwarder.

Modes (``BENCH_MODES``, default ``tx,loop``):

- ``tx``: two ``net_null`` ports (TX frees the mbufs, RX not polled), one stream at full speed,
  ``--oneshot``, latency off: the TX path alone (frame build, pacing, mbuf get, PMD free).
- ``loop``: one ``net_ring`` port that receives what it sends, one worker lcore doing TX and RX,
  latency ON (as every trial runs): TX plus the RX accounting (signature parse, stream lookup,
  sequence/loss/reorder state, latency histogram and IPDV), per frame received.  The RX share is
  about ``loop - tx`` (the ring's enqueue/dequeue is in it, the null PMD's free is not).  The
  ring gives the TX pool's mbufs back to tgen's RX, so each TX copies the whole frame again (its
  zero payload is no longer known): at 1518 B ``loop`` has a full copy per frame that no real port
  causes.
- ``memif`` (not in the default): two memif ports of the same process connected to each other
  (server and client on one socket), one stream 0 -> 1 with latency on, one worker doing both: the
  harness's memif ends without a forwarder, the memif PMD's copies, mbuf allocation and frees
  included.  Its figure is per frame received.

The figure is the tgen process's CPU time (user + system, from ``wait4``) divided by the frames it
sent (``tx``) or received (``loop``, ``memif``): CPU time counts only while tgen runs, so another
process on the same CPU changes it far less than it changes frames per wall-clock second (a noisy
shared host moves the latter 2x). Start-up (EAL, TSC calibration, ~0.15 s of CPU) is in it too, the
same for every build; ``net_ns_per_frame`` subtracts it (a 10 ms trial's CPU time, median of 3 per
build and mode).

A/B: ``BENCH_TGEN_B=/path/to/other/tgen`` runs that build in every round right after the first;
``b_over_a_median_of_rounds`` pairs each round's two figures. ``BENCH_ROUNDS`` (3),
``BENCH_DURATION_S`` (1.5), ``BENCH_SIZES`` (64,1518; a size in bytes or ``imix`` for
64:7/570:4/1518:1). ``BENCH_TGEN_A`` replaces the first build (default: the repository's
tgen/build). Prints one line per run and, as its LAST line, one JSON object: ``ns_per_frame`` and
``net_ns_per_frame`` per build and "mode size" (median of rounds), the net figures' min/max over
rounds, and with two builds the B/A ratios. Needs root.  ``--quick``: one round of 0.2 s at 64 B
(the shape of the output, for ``make test``).

JSON keys: builds, rounds, duration_s, load_avg_1m, ns_per_frame, fixed_cpu_s, net_ns_per_frame,
net_ns_per_frame_min_max
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

QUICK = "--quick" in sys.argv[1:]       # one round of 0.2 s at 64 B, for make test
ROUNDS = 1 if QUICK else int(os.environ.get("BENCH_ROUNDS", "3"))
DURATION_S = 0.2 if QUICK else float(os.environ.get("BENCH_DURATION_S", "1.5"))
SIZES = ("64",) if QUICK else tuple(os.environ.get("BENCH_SIZES", "64,1518").split(","))
IMIX = "64:7/570:4/1518:1"     # BENCH_SIZES token "imix": the classic 7:4:1 IMIX
LCORES = "0@1,1@1" if (os.cpu_count() or 1) >= 2 else "0@0,1@0"


MODES = tuple(os.environ.get("BENCH_MODES", "tx,loop").split(","))


def frames_spec(size: str) -> str:
    if size == "imix":
        return f"imix={IMIX}"
    if not size.isdigit():
        raise SystemExit(f"BENCH_SIZES: {size!r} is not a frame size in bytes or 'imix'")
    return f"size={size}"


def tgen_argv(binary: str, mode: str, size: str, d: str, duration_s: float = DURATION_S) -> list[str]:
    eal = [binary, "--lcores", LCORES, "--no-pci", "--in-memory", "--file-prefix", Path(d).name,
           "--log-level", "lib.eal:error"]
    trial = ["--duration", str(duration_s), "--drain", "0", "--learning", "0"]
    if mode == "tx":
        return eal + ["--vdev", "net_null0", "--vdev", "net_null1", "--",
                      "--socket", str(Path(d) / "ctl.sock"),
                      "--port", "0:speed=10000G,rx=0", "--port", "1:speed=10000G,rx=0", "--oneshot",
                      "--stream", f"port=0,rx_port=1,{frames_spec(size)},pps=5e8"] + trial + ["--no-latency"]
    if mode == "loop":
        return eal + ["--vdev", "net_ring0", "--", "--socket", str(Path(d) / "ctl.sock"),
                      "--port", "0:speed=10000G", "--oneshot",
                      "--stream", f"port=0,rx_port=0,{frames_spec(size)},flows=1000,pps=5e8"] + trial
    if mode == "memif":
        sock = str(Path(d) / "memif.sock")
        return eal + ["--vdev", f"net_memif0,role=server,socket={sock},id=0",
                      "--vdev", f"net_memif1,role=client,socket={sock},id=0", "--",
                      "--socket", str(Path(d) / "ctl.sock"),
                      "--port", "0:speed=10000G", "--port", "1:speed=10000G", "--oneshot",
                      "--stream", f"port=0,rx_port=1,{frames_spec(size)},flows=1000,pps=5e8"] + trial
    raise SystemExit(f"BENCH_MODES: unknown mode {mode!r} (tx, loop, memif)")


def one(binary: str, mode: str, size: str, duration_s: float = DURATION_S) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="tgen-txcost-") as d:
        argv = tgen_argv(binary, mode, size, d, duration_s)
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
    frames = st["sent"] if mode == "tx" else st["received"]
    # loop: every frame comes back (the ring holds what is in flight when TX stops); memif: with no
    # drain (its polling would add CPU time but no frames) the last frames in the ring may be lost
    lost_ok = 0 if mode == "loop" else st["sent"] // 1000
    if mode != "tx" and (st["sent"] - st["received"] > lost_ok or not st.get("latency", {}).get("count")):
        raise RuntimeError(f"{binary} loop: sent {st['sent']} received {st['received']} lost {st['lost']} "
                           f"latency {st.get('latency')}: not every frame came back and was accounted")
    return {"sent": st["sent"], "frames": frames, "mpps": frames / res["effective_duration_s"] / 1e6,
            "cpu_s": cpu_s, "ns_per_frame": cpu_s * 1e9 / frames if frames else float("inf")}


def main() -> int:
    if os.geteuid() != 0:
        print(json.dumps({"skipped": "needs root"}))
        return 0
    builds = {"a": os.environ.get("BENCH_TGEN_A") or str(find_tgen_binary())}
    if os.environ.get("BENCH_TGEN_B"):
        builds["b"] = os.environ["BENCH_TGEN_B"]
    # start-up and shutdown (EAL, TSC calibration): a 10 ms trial's CPU time, the median of 3 per
    # build and mode, subtracted for the net figure (it is ~0.15 s, i.e. ~3 ns/frame of a 1.5 s run)
    fixed = {k: {m: statistics.median(one(b, m, "64", 0.01)["cpu_s"] for _ in range(3)) for m in MODES}
             for k, b in builds.items()}
    cases = [(m, s) for m in MODES for s in SIZES]
    runs: dict[str, dict[tuple[str, str], list[dict[str, float]]]] = {k: {c: [] for c in cases} for k in builds}
    for r in range(ROUNDS):
        for mode, size in cases:
            for k, b in builds.items():
                x = one(b, mode, size)
                x["net_ns_per_frame"] = (x["cpu_s"] - fixed[k][mode]) * 1e9 / x["frames"]
                runs[k][(mode, size)].append(x)
                print(f"round {r + 1} {mode:5s} {size:>5s} B {k}: {x['mpps']:7.2f} Mpps  "
                      f"{x['ns_per_frame']:6.2f} CPU ns/frame  {x['net_ns_per_frame']:6.2f} net",
                      file=sys.stderr, flush=True)

    def key(c: tuple[str, str]) -> str:
        return f"{c[0]} {c[1]}"

    def med(v: list[dict[str, float]], f: str) -> float:
        return round(statistics.median(x[f] for x in v), 2)
    res: dict[str, object] = {"builds": builds, "rounds": ROUNDS, "duration_s": DURATION_S,
                              "load_avg_1m": os.getloadavg()[0],
                              "ns_per_frame": {k: {key(c): round(statistics.median(x["ns_per_frame"] for x in v), 2)
                                                   for c, v in per.items()} for k, per in runs.items()},
                              "fixed_cpu_s": fixed,
                              "net_ns_per_frame": {k: {key(c): med(v, "net_ns_per_frame") for c, v in per.items()}
                                                   for k, per in runs.items()},
                              "net_ns_per_frame_min_max": {
                                  k: {key(c): [round(min(x["net_ns_per_frame"] for x in v), 2),
                                               round(max(x["net_ns_per_frame"] for x in v), 2)]
                                      for c, v in per.items()} for k, per in runs.items()}}
    if "b" in builds:
        for f in ("ns_per_frame", "net_ns_per_frame"):
            res[f"b_over_a_median_of_rounds{'_net' if f.startswith('net') else ''}"] = {
                key(c): round(statistics.median(b[f] / a[f] for a, b in zip(runs["a"][c], runs["b"][c])), 3)
                for c in cases}
    print(json.dumps(res, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
