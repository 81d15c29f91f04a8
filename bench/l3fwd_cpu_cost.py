#!/usr/bin/env python3
"""What build B of the CI gate costs l3fwd per packet, measured in CPU time (issue 29 item 4).

l3fwd A (build/l3fwd/l3fwd) and B (build/l3fwd-b/l3fwd: l3fwd/patches/urpf-flowstats.patch, a
uRPF lookup and a per-flow accounting lookup per packet) forward the same 64 B IPv4 frames, in
alternating rounds (ABBA order), one lcore on CPU 1, with l3fwd's default LPM routes, on one of
two paths (``--port-kind``):

- ``vhost`` (the default; the path of suites/ab-l3fwd.yaml): two net_vhost ports (server)
  whose peer is ``dpdk-testpmd`` in ``flowgen`` mode on two virtio-user ports on CPU 0: it sends
  64 B UDP frames (198.18.0.1 -> 198.18.0.2, routed back out of the port they came in on) as
  fast as the rings take them and frees what comes back, so l3fwd does the vhost copies both
  ways as in the suite.  testpmd offers more than l3fwd takes: its TX drops (``feeder_drop_pct``,
  from its exit statistics) say l3fwd's rings were full, i.e. l3fwd was the bottleneck.
- ``pcap``: a ``net_pcap`` port that replays a capture in memory (``infinite_rx=1``: 256 frames,
  198.18.0.x -> 198.18.1.x) to a ``net_null`` port (TX frees, no RX), no hugepages: l3fwd's
  forwarding work alone, no copies.

The figure is packets forwarded (the ports' ``opackets`` from DPDK telemetry) per second of
l3fwd's CPU time (its threads' schedstat), over a window after start-up: CPU time counts only
while l3fwd runs, so other processes on the host move it far less than they move packets per
wall-clock second.  ``b_over_a`` pairs each round's two figures; its median is B's throughput
relative to A per unit of CPU, the cost ``nfvperf gate --ab`` must catch (``bench/ab_gate.py``
measures the same builds through tgen and gates them).

Prints a line per measurement and, as the LAST line, one JSON object.
JSON keys: port_kind, a_mpps_per_cpu_s, b_mpps_per_cpu_s, b_over_a, b_over_a_median, cost_pct,
  extra_ns_per_packet, feeder_drop_pct, rounds, window_s
Needs root (DPDK's runtime directory; vhost: hugepages, dpdk-testpmd) and both builds
(``bench/ab_gate.py`` or docs/ci-gate.md builds them; this bench builds them too).
``--quick``: 2 rounds of 1 s windows; default 10 rounds of 6 s; ``--rounds``, ``--window-s``,
``--port-kind vhost|pcap``.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
from nfvperf.host import hugepages  # noqa: E402
EXAMPLES = Path(os.environ.get("DPDK_EXAMPLES", "/usr/share/dpdk/examples")) / "l3fwd"
BUILDS = {"a": REPO / "build" / "l3fwd" / "l3fwd", "b": REPO / "build" / "l3fwd-b" / "l3fwd"}
#: flows the vhost feeder cycles through (testpmd flowgen: one address per flow, the same on both
#: ports), as many as B sees in suites/ab-l3fwd.yaml (1024 per direction)
FLOWS = 2048
#: the window is sampled every SAMPLE_S; the figure is the 90th percentile of the samples' rates
#: (on a shared host l3fwd polls empty rings while its feeder waits for a CPU: the fastest
#: samples are those where both ran)
SAMPLE_S = 0.1
PATCH = "l3fwd/patches/urpf-flowstats.patch"


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


def l3fwd_argv(binary: Path, prefix: str, ports: list[str]) -> list[str]:
    config = ",".join(f"({i},0,0)" for i in range(len(ports)))
    argv = [str(binary), "--lcores", "0@1", "--no-pci", "--file-prefix", prefix, "--log-level", "lib.eal:notice"]
    for p in ports:
        argv += ["--vdev", p]
    return argv + ["--", "-p", hex((1 << len(ports)) - 1), "-P", "--lookup=lpm", "--config", config,
                   "--parse-ptype", f"--rule_ipv4={EXAMPLES}/lpm_default_v4.cfg",
                   f"--rule_ipv6={EXAMPLES}/lpm_default_v6.cfg"]


def feeder_argv(prefix: str, socks: list[Path], flows: int) -> list[str]:
    """testpmd flowgen on virtio-user ports (clients of l3fwd's vhost sockets), both lcores on CPU 0."""
    argv = ["dpdk-testpmd", "--lcores", "0@0,1@0", "--file-prefix", prefix, "-m", "256", "--no-pci",
            "--single-file-segments", "--log-level", "lib.eal:notice"]
    for i, s in enumerate(socks):
        argv += ["--vdev", f"net_virtio_user{i},path={s},queues=1"]
    return argv + ["--", "--forward-mode=flowgen", "--auto-start", "--burst=32", "--txpkts=64",
                   f"--flowgen-flows={flows}"]


def measure(binary: Path, tmp: Path, prefix: str, window_s: float, port_kind: str,
            flows: int = FLOWS) -> tuple[float, float]:
    """Packets forwarded per CPU-second of one l3fwd run, and the feeder's TX drops in percent
    of what it offered (vhost; 0 for pcap)."""
    if port_kind == "pcap":
        ports = [f"net_pcap0,rx_pcap={tmp / 'frames.pcap'},infinite_rx=1", "net_null0,no-rx=1"]
        argv = l3fwd_argv(binary, prefix, ports)
        argv[1:1] = ["--no-huge", "-m", "512"]
        counted = [1]
    else:
        socks = [tmp / f"{prefix}-{i}.sock" for i in range(2)]
        argv = l3fwd_argv(binary, prefix, [f"net_vhost{i},iface={s},client=0" for i, s in enumerate(socks)])
        argv[1:1] = ["-m", "512", "--huge-unlink"]                # no hugepage files left behind
        counted = [0, 1]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    feeder = None
    try:
        if port_kind == "vhost":
            while not all(s.exists() for s in socks):
                if p.poll() is not None:
                    raise SystemExit(f"l3fwd_cpu_cost: {binary} exited before opening its vhost sockets")
                time.sleep(0.1)
            feeder = subprocess.Popen(feeder_argv(f"{prefix}-feeder", socks, flows), stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        seen, t0 = "", time.monotonic()
        while "entering main loop" not in seen:
            line = p.stdout.readline() if p.stdout else ""
            if not line and p.poll() is not None or time.monotonic() - t0 > 60:
                raise SystemExit(f"l3fwd_cpu_cost: {binary} did not start:\n{seen[-2000:]}")
            seen += line
        while sum(opackets(prefix, i) for i in counted) == 0:   # vhost: the feeder's links are up
            if time.monotonic() - t0 > 60:
                raise SystemExit(f"l3fwd_cpu_cost: {binary} forwarded nothing in 60 s")
            time.sleep(0.1)
        time.sleep(0.5)                                        # past the first bursts
        samples = [(cpu_ns(p.pid), sum(opackets(prefix, i) for i in counted))]
        for _ in range(max(1, round(window_s / SAMPLE_S))):
            time.sleep(SAMPLE_S)
            samples.append((cpu_ns(p.pid), sum(opackets(prefix, i) for i in counted)))
    finally:
        drop = 0.0
        if feeder is not None:
            out, _ = feeder.communicate("\n", timeout=30)     # "Press enter to exit": its totals
            m = re.search(r"Accumulated forward statistics.*?TX-packets: +(\d+) +TX-dropped: +(\d+)", out, re.S)
            drop = 100.0 * int(m.group(2)) / (int(m.group(1)) + int(m.group(2))) if m else float("nan")
        p.terminate()
        p.wait(15)
        hugepages.remove_leftovers(prefix)      # both processes' hugepage files and runtime dirs
    rates = sorted((o1 - o0) / ((c1 - c0) / 1e9) for (c0, o0), (c1, o1) in zip(samples, samples[1:]) if c1 > c0)
    return rates[int(0.9 * (len(rates) - 1))], drop


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 rounds of 1 s windows")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--window-s", type=float)
    ap.add_argument("--flows", type=int, default=FLOWS, help=f"vhost: flows the feeder sends (default {FLOWS})")
    ap.add_argument("--port-kind", choices=("vhost", "pcap"), default="vhost",
                    help="vhost: the suite's path, fed by testpmd flowgen (default); pcap: pcap to null, no copies")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("l3fwd_cpu_cost: needs root (DPDK's runtime directory)", file=sys.stderr)
        return 2
    if args.port_kind == "vhost" and shutil.which("dpdk-testpmd") is None:
        print("l3fwd_cpu_cost: --port-kind vhost needs dpdk-testpmd (apt-get install dpdk; make deps)", file=sys.stderr)
        return 2
    rounds = args.rounds or (2 if args.quick else 10)
    window = args.window_s or (1.0 if args.quick else 6.0)
    subprocess.run(["bash", "scripts/build-l3fwd.sh"], cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["bash", "scripts/build-l3fwd.sh"], cwd=REPO, check=True, stdout=subprocess.DEVNULL,
                   env=dict(os.environ, L3FWD_PATCH=PATCH, L3FWD_BUILD=str(BUILDS["b"].parent)))
    figs: dict[str, list[float]] = {"a": [], "b": []}
    drops: list[float] = []
    with tempfile.TemporaryDirectory(prefix="nfvperf-l3fwd-cost-") as d:
        tmp = Path(d)
        write_pcap(tmp / "frames.pcap")
        for r in range(rounds):
            for k in ("ab" if r % 2 == 0 else "ba"):
                fig, drop = measure(BUILDS[k], tmp, f"nfvperf-cost-{os.getpid()}-{k}", window, args.port_kind,
                                    args.flows)
                figs[k].append(fig)
                drops.append(drop)
                print(f"round {r + 1}/{rounds} {k.upper()}: {fig / 1e6:.2f} Mpps per CPU-second"
                      + (f" (feeder's TX drops {drop:.0f} %)" if args.port_kind == "vhost" else ""), flush=True)
    ratios = [b / a for a, b in zip(figs["a"], figs["b"])]
    med = statistics.median(ratios)
    extra_ns = 1e9 / statistics.median(figs["b"]) - 1e9 / statistics.median(figs["a"])
    print(f"{args.port_kind}: B / A per CPU-second: median {med:.3f} over {rounds} rounds ({100 * (1 - med):.1f} % "
          f"less throughput per CPU for B; {extra_ns:.1f} ns more CPU per packet)")
    print(json.dumps({"port_kind": args.port_kind, "a_mpps_per_cpu_s": [round(x / 1e6, 3) for x in figs["a"]],
                      "b_mpps_per_cpu_s": [round(x / 1e6, 3) for x in figs["b"]],
                      "b_over_a": [round(x, 4) for x in ratios], "b_over_a_median": round(med, 4),
                      "cost_pct": round(100 * (1 - med), 2), "extra_ns_per_packet": round(extra_ns, 1),
                      "feeder_drop_pct": round(min(drops), 1) if args.port_kind == "vhost" else None,
                      "rounds": rounds, "window_s": window}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
