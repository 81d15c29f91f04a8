#!/usr/bin/env python3
"""What build B of the CI gate costs l3fwd per packet, measured in CPU time (issue 29 item 4).

l3fwd A (build/l3fwd/l3fwd) and B (build/l3fwd-b/l3fwd: l3fwd/patches/urpf-lookup.patch, one more
LPM lookup per packet, timed per packet into shared statistics) forward the same 64 B IPv4
frames, in alternating rounds (ABBA order), from a ``net_pcap`` port that replays a capture in memory (``infinite_rx=1``: 256 frames,
198.18.0.x -> 198.18.1.x) to a ``net_null`` port (TX frees, no RX), with l3fwd's default LPM
routes, one lcore on CPU 1, no hugepages.  The figure is packets forwarded (the null port's
``opackets`` from DPDK telemetry) per second of l3fwd's CPU time (its threads' schedstat), over a
window after start-up: CPU time counts only while l3fwd runs, so other processes on the host move
it far less than they move packets per wall-clock second.  ``b_over_a`` pairs each round's two
figures; its median is B's throughput relative to A per unit of CPU, the cost ``nfvperf gate
--ab`` must catch (``bench/ab_gate.py`` measures the same builds through tgen and gates them).

Prints a line per measurement and, as the LAST line, one JSON object.
JSON keys: a_mpps_per_cpu_s, b_mpps_per_cpu_s, b_over_a, b_over_a_median, cost_pct, rounds, window_s
Needs root (DPDK's runtime directory) and both builds (``bench/ab_gate.py`` or docs/ci-gate.md
builds them; this bench builds them too).  ``--quick``: 2 rounds of 1 s windows; default 10
rounds of 6 s; ``--rounds``, ``--window-s``.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = Path(os.environ.get("DPDK_EXAMPLES", "/usr/share/dpdk/examples")) / "l3fwd"
BUILDS = {"a": REPO / "build" / "l3fwd" / "l3fwd", "b": REPO / "build" / "l3fwd-b" / "l3fwd"}
PATCH = "l3fwd/patches/urpf-lookup.patch"


def write_pcap(path: Path, n: int = 256) -> None:
    """``n`` 64 B (60 + FCS) IPv4/UDP frames, 198.18.0.x -> 198.18.1.x (l3fwd's route to port 1)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i in range(n):
            eth = bytes.fromhex("020000000001" "020000000002" "0800")
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 46, i, 0, 64, 17, 0, bytes([198, 18, 0, i % 256]),
                             bytes([198, 18, 1, (7 * i) % 256]))
            s = sum(struct.unpack("!10H", ip))
            s = (s & 0xFFFF) + (s >> 16)
            s = (s & 0xFFFF) + (s >> 16)
            ip = ip[:10] + struct.pack("!H", ~s & 0xFFFF) + ip[12:]
            frame = eth + ip + struct.pack("!HHHH", 1024 + i, 5000, 26, 0) + bytes(18)
            f.write(struct.pack("<IIII", 0, 0, len(frame), len(frame)) + frame)


def opackets(prefix: str, port: int) -> int:
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        s.connect(f"/var/run/dpdk/{prefix}/dpdk_telemetry.v2")
        s.recv(1024)
        s.send(f"/ethdev/stats,{port}".encode())
        return int(json.loads(s.recv(65536))["/ethdev/stats"]["opackets"])


def cpu_ns(pid: int) -> int:
    return sum(int(Path(t, "schedstat").read_text().split()[0]) for t in glob.glob(f"/proc/{pid}/task/*"))


def measure(binary: Path, pcap: Path, prefix: str, window_s: float) -> float:
    """Packets forwarded per CPU-second of one l3fwd run."""
    argv = [str(binary), "--lcores", "0@1", "--no-huge", "-m", "512", "--no-pci", "--file-prefix", prefix,
            "--vdev", f"net_pcap0,rx_pcap={pcap},infinite_rx=1", "--vdev", "net_null0,no-rx=1",
            "--", "-p", "0x3", "-P", "--lookup=lpm", "--config", "(0,0,0)", "--parse-ptype",
            f"--rule_ipv4={EXAMPLES}/lpm_default_v4.cfg", f"--rule_ipv6={EXAMPLES}/lpm_default_v6.cfg"]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        seen, t0 = "", time.monotonic()
        while "entering main loop" not in seen:
            line = p.stdout.readline() if p.stdout else ""
            if not line and p.poll() is not None or time.monotonic() - t0 > 60:
                raise SystemExit(f"l3fwd_cpu_cost: {binary} did not start:\n{seen[-2000:]}")
            seen += line
        time.sleep(0.5)                                        # past the first bursts
        c0, o0 = cpu_ns(p.pid), opackets(prefix, 1)
        time.sleep(window_s)
        c1, o1 = cpu_ns(p.pid), opackets(prefix, 1)
    finally:
        p.terminate()
        p.wait(15)
    return (o1 - o0) / ((c1 - c0) / 1e9)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 rounds of 1 s windows")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--window-s", type=float)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("l3fwd_cpu_cost: needs root (DPDK's runtime directory)", file=sys.stderr)
        return 2
    rounds = args.rounds or (2 if args.quick else 10)
    window = args.window_s or (1.0 if args.quick else 6.0)
    subprocess.run(["bash", "scripts/build-l3fwd.sh"], cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["bash", "scripts/build-l3fwd.sh"], cwd=REPO, check=True, stdout=subprocess.DEVNULL,
                   env=dict(os.environ, L3FWD_PATCH=PATCH, L3FWD_BUILD=str(BUILDS["b"].parent)))
    figs: dict[str, list[float]] = {"a": [], "b": []}
    with tempfile.TemporaryDirectory(prefix="nfvperf-l3fwd-cost-") as d:
        pcap = Path(d) / "frames.pcap"
        write_pcap(pcap)
        for r in range(rounds):
            for k in ("ab" if r % 2 == 0 else "ba"):
                figs[k].append(measure(BUILDS[k], pcap, f"nfvperf-cost-{os.getpid()}-{k}", window))
                print(f"round {r + 1}/{rounds} {k.upper()}: {figs[k][-1] / 1e6:.2f} Mpps per CPU-second", flush=True)
    ratios = [b / a for a, b in zip(figs["a"], figs["b"])]
    med = statistics.median(ratios)
    print(f"B / A per CPU-second: median {med:.3f} over {rounds} rounds ({100 * (1 - med):.1f} % more CPU per packet "
          "for B, roughly)")
    print(json.dumps({"a_mpps_per_cpu_s": [round(x / 1e6, 3) for x in figs["a"]],
                      "b_mpps_per_cpu_s": [round(x / 1e6, 3) for x in figs["b"]],
                      "b_over_a": [round(x, 4) for x in ratios], "b_over_a_median": round(med, 4),
                      "cost_pct": round(100 * (1 - med), 2), "rounds": rounds, "window_s": window}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
