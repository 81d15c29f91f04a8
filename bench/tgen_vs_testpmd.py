#!/usr/bin/env python3
"""Benchmark: nfvperf's tgen against dpdk-testpmd, measured in the same run on the same lcores.

1. TX: 64 B frames per second per core on net_null, tgen with its full signature (stream id,
   sequence, timestamp) and 1k-flow IP variation vs ``testpmd --forward-mode=txonly
   --txonly-multi-flow``.  Floor 0.8x, aim >= 1.0x.
2. RX analysis: frames/s tgen's receive path classifies (signature, per-stream sequence, latency
   histogram) vs ``testpmd --forward-mode=rxonly`` on the same input.  Floor 0.5x.
3. Rate accuracy at 10k/100k/1M pps: the rate that an independent receiver (testpmd rxonly at
   the other end of a veth pair, using its own "Rx-pps since last show") sees.  Aim <= 0.1 %.
4. Self-latency over net_ring loopback (min, p50, p99).

Prints a table, and as the LAST line one JSON object with the figures and ratios.
Run by ``make bench`` (needs root for DPDK/veth).  Total run time about 1-2 minutes.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from nfvperf.tg.tgen import PortSpec, TgenProcess, find_tgen_binary  # noqa: E402
from nfvperf.tg.tgen_testpmd import TestpmdPeer, find_testpmd  # noqa: E402

TAG = f"nfvb{os.getpid() % 100000}"
CPUS = os.cpu_count() or 1
# control lcore and one worker lcore; the worker gets its own CPU when there are two
LCORES = "0@0,1@1" if CPUS >= 2 else "0@0,1@0"
TX_S = 3.0


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def wait_done(proc: TgenProcess, timeout_s: float = 60.0) -> dict:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if proc.rpc("trial.status")["state"] == "done":
            return proc.rpc("trial.result")
        time.sleep(0.1)
    raise RuntimeError("tgen trial did not finish")


def testpmd_rate(tp: TestpmdPeer, port: int, key: str, dur_s: float, warm_s: float = 0.5) -> float:
    """testpmd's own 'since last show' rate over dur_s (its clock, its counters)."""
    time.sleep(warm_s)
    tp.port_stats()
    time.sleep(dur_s)
    return float(tp.port_stats()[port][key])


# -- 1. TX ----------------------------------------------------------------------------------------

def tx_tgen(run_dir: Path) -> dict:
    with TgenProcess([PortSpec("net_null0", speed_bps=1e12)], lcores=LCORES, run_dir=run_dir,
                     tag=TAG + "t", hugepages=True) as proc:
        proc.rpc("stream.add", port=0, rx_port=0, size_b=64, flows=1000, rate={"percent": 100})
        proc.rpc("trial.start", duration_s=TX_S, drain_s=0.1, latency=True)
        res = wait_done(proc)
    s = res["streams"][0]
    eff = res["effective_duration_s"] or TX_S
    return {"pps": s["sent"] / eff, "sent": s["sent"], "effective_s": eff}


def tx_testpmd(run_dir: Path) -> dict:
    with TestpmdPeer(["net_null0"], TAG + "t", run_dir, forward_mode="txonly", lcores=LCORES,
                     hugepages=True, app_args=("--txpkts=60", "--txonly-multi-flow")) as tp:
        tp.cmd("start")
        pps = testpmd_rate(tp, 0, "tx_pps", TX_S - 0.5)
        tp.cmd("stop")
    return {"pps": pps}


# -- 2. RX ----------------------------------------------------------------------------------------

def rx_tgen(run_dir: Path) -> dict:
    """tgen receiving its own signed frames: TX lcore -> net_ring -> RX lcore on another CPU."""
    lc = "0@0,1@0,2@1" if CPUS >= 2 else "0@0,1@0,2@0"
    with TgenProcess([PortSpec("net_ring0", speed_bps=1e12)], lcores=lc, run_dir=run_dir,
                     tag=TAG + "r", hugepages=True,
                     extra_args=["--tx-lcores", "1", "--rx-lcores", "2"]) as proc:
        proc.rpc("stream.add", port=0, rx_port=0, size_b=64, flows=1000, rate={"percent": 100})
        proc.rpc("trial.start", duration_s=TX_S, drain_s=0.2, latency=True)
        res = wait_done(proc)
    s = res["streams"][0]
    eff = res["effective_duration_s"] or TX_S
    return {"pps": s["received"] / eff, "sent": s["sent"], "received": s["received"],
            "lost": s["lost"], "effective_s": eff}


def rx_testpmd(run_dir: Path) -> dict:
    with TestpmdPeer(["net_null0"], TAG + "r", run_dir, forward_mode="rxonly", lcores=LCORES,
                     hugepages=True) as tp:
        tp.cmd("start")
        pps = testpmd_rate(tp, 0, "rx_pps", TX_S - 0.5)
        tp.cmd("stop")
    return {"pps": pps}


# -- 3. rate accuracy -----------------------------------------------------------------------------

def veth(a: str, b: str) -> None:
    subprocess.run(["ip", "link", "del", a], capture_output=True)
    subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b], check=True)
    for i in (a, b):
        p = Path(f"/proc/sys/net/ipv6/conf/{i}/disable_ipv6")
        if p.exists():
            p.write_text("1")
        subprocess.run(["ip", "link", "set", i, "up"], check=True)


def rate_accuracy(run_dir: Path, rates: list[int], dur_s: float = 2.5) -> list[dict]:
    a, b = f"{TAG}a", f"{TAG}b"
    veth(a, b)
    out = []
    try:
        rx_lc = "0@0,1@0"
        tx_lc = "0@1,1@1" if CPUS >= 2 else "0@0,1@0"
        with TestpmdPeer([f"net_af_packet0,iface={b},framecnt=4096"], TAG + "q", run_dir,
                         forward_mode="rxonly", lcores=rx_lc) as tp, \
                TgenProcess([PortSpec(f"net_af_packet0,iface={a}", speed_bps=10e9)], lcores=tx_lc,
                            run_dir=run_dir, tag=TAG + "q", hugepages=False) as proc:
            tp.cmd("start")
            for rate in rates:
                proc.rpc("stream.remove", all=True)
                proc.rpc("stream.add", port=0, rx_port=0, size_b=64, rate={"pps": rate})
                tp.clear()
                proc.rpc("trial.start", duration_s=dur_s, drain_s=0.2, latency=False)
                seen = testpmd_rate(tp, 0, "rx_pps", dur_s - 1.0, warm_s=0.5)
                res = wait_done(proc)
                st = tp.port_stats()[0]
                s = res["streams"][0]
                intended = round(rate * dur_s)
                out.append({
                    "rate_pps": rate, "testpmd_rx_pps": seen,
                    "rate_error_pct": 100.0 * (seen - rate) / rate,
                    "sent": s["sent"], "intended": intended, "testpmd_rx": st["rx_packets"],
                    "count_error_pct": 100.0 * (st["rx_packets"] - intended) / intended,
                    "tgen_effective_s": res["effective_duration_s"]})
            tp.cmd("stop")
    finally:
        subprocess.run(["ip", "link", "del", a], capture_output=True)
    return out


# -- 4. self-latency ------------------------------------------------------------------------------

def self_latency(run_dir: Path) -> dict:
    with TgenProcess([PortSpec("net_ring0")], lcores=LCORES, run_dir=run_dir, tag=TAG + "l",
                     hugepages=True) as proc:
        proc.rpc("stream.add", port=0, rx_port=0, size_b=64, rate={"pps": 100000})
        proc.rpc("trial.start", duration_s=1.5, drain_s=0.2, latency=True)
        res = wait_done(proc)
    lat = res["streams"][0]["latency"]
    return {"count": lat["count"], "min_ns": lat["min_ns"], "p50_ns": lat["percentiles_ns"]["50"],
            "p99_ns": lat["percentiles_ns"]["99"], "max_ns": lat["max_ns"]}


def main() -> int:
    if os.geteuid() != 0:
        print(json.dumps({"skipped": "needs root"}))
        return 0
    try:
        binary = find_tgen_binary()
    except FileNotFoundError as e:
        print(json.dumps({"skipped": str(e)}))
        return 1
    if not find_testpmd():
        print(json.dumps({"skipped": "dpdk-testpmd not found"}))
        return 1
    t0 = time.monotonic()
    res: dict = {"lcores": LCORES, "host_cpus": CPUS, "tgen": str(binary),
                 "load_avg_1m": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix=f"{TAG}-") as d:
        run_dir = Path(d)
        log("TX: tgen on net_null ...")
        res["tx_tgen"] = tx_tgen(run_dir)
        log("TX: testpmd txonly on net_null ...")
        res["tx_testpmd"] = tx_testpmd(run_dir)
        res["tx_ratio"] = res["tx_tgen"]["pps"] / res["tx_testpmd"]["pps"]
        log("RX: tgen over net_ring ...")
        res["rx_tgen"] = rx_tgen(run_dir)
        log("RX: testpmd rxonly on net_null ...")
        res["rx_testpmd"] = rx_testpmd(run_dir)
        res["rx_ratio"] = res["rx_tgen"]["pps"] / res["rx_testpmd"]["pps"]
        log("rate accuracy over veth ...")
        res["rate_accuracy"] = rate_accuracy(run_dir, [10_000, 100_000, 1_000_000])
        log("self-latency over net_ring ...")
        res["self_latency"] = self_latency(run_dir)
    res["wall_s"] = time.monotonic() - t0
    res["tx_floor_ok"] = res["tx_ratio"] >= 0.8
    res["rx_floor_ok"] = res["rx_ratio"] >= 0.5
    res["rate_error_max_pct"] = max(abs(r["rate_error_pct"]) for r in res["rate_accuracy"])

    print(f"{'figure':44s} {'tgen':>14s} {'testpmd':>14s} {'ratio':>7s}")
    print(f"{'TX 64B pps/core (1k flows, signature)':44s} {res['tx_tgen']['pps']:14,.0f} "
          f"{res['tx_testpmd']['pps']:14,.0f} {res['tx_ratio']:7.2f}")
    print(f"{'RX analysis pps/core':44s} {res['rx_tgen']['pps']:14,.0f} "
          f"{res['rx_testpmd']['pps']:14,.0f} {res['rx_ratio']:7.2f}")
    for r in res["rate_accuracy"]:
        print(f"{'rate ' + format(r['rate_pps'], ',') + ' pps: receiver sees':44s} "
              f"{r['testpmd_rx_pps']:14,.0f} {'':14s} {r['rate_error_pct']:+6.3f}%")
    sl = res["self_latency"]
    print(f"{'self-latency net_ring min/p50/p99 ns':44s} "
          f"{sl['min_ns']:.0f}/{sl['p50_ns']:.0f}/{sl['p99_ns']:.0f}")
    print(json.dumps(res, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
