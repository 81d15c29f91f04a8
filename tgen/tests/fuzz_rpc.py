#!/usr/bin/env python3
"""Throw random, wrongly typed and hostile JSON-RPC requests at a tgen over net_ring; it must answer
every request with a result or a JSON-RPC error and stay alive.   python3 tgen/tests/fuzz_rpc.py [N]"""
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile

BIN = os.environ.get("TGEN_BIN") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "tgen")
N = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
METHODS = ["ping", "ports.list", "port.stats", "port.xstats", "stats.reset", "stream.add", "stream.modify",
           "stream.remove", "stream.list", "stream.stats", "trial.start", "trial.status", "trial.stop",
           "trial.result", "auth", "bogus"]
KEYS = ["port", "rx_port", "size_b", "imix", "flows", "vary", "src_mac", "dst_mac", "src_ip", "dst_ip", "src_port",
        "dst_port", "vlan", "ipv6", "vxlan", "rate", "id", "all", "duration_s", "frames", "pps", "mode",
        "burst_frames", "bursts", "burst_interval_s", "segments", "learning", "learning_wait_s", "drain_s",
        "latency", "streams", "name", "learning_frames", "token"]


def rval(depth=0):
    r = random.random()
    if depth > 3 or r < 0.25:
        return random.choice([0, 1, -1, 64, 1518, 9216, 65536, 2**63, -2**63, 1e308, -1e-300, 0.5, 1e6,
                              True, False, None, "", "x" * 300, "198.18.0.1", "2001:2::1", "02:00:00:00:00:01",
                              "src_ip", "burst", "continuous", "\u0000", "\ud7ff"])
    if r < 0.5:
        return [rval(depth + 1) for _ in range(random.randint(0, 4))]
    if r < 0.75:
        return {random.choice(KEYS + ["pps", "percent", "l1_bps", "vni", "scale"]): rval(depth + 1)
                for _ in range(random.randint(0, 4))}
    return random.randint(-5, 2000)


def main():
    random.seed(int(os.environ.get("SEED", "1")))
    tmp = tempfile.mkdtemp(prefix="tgen-fuzz-")
    sock = os.path.join(tmp, "s")
    prefix = f"tgfz{os.getpid()}"
    p = subprocess.Popen([BIN, "--no-huge", "-m", "512", "--no-pci", f"--file-prefix={prefix}",
                          "--lcores", "0@0,1@0", "--vdev", "net_ring0", "--log-level", "1", "--",
                          "--socket", sock, "--port", "0:speed=10G"], stdout=subprocess.PIPE, stderr=open(os.path.join(tmp, "err"), "w"))
    json.loads(p.stdout.readline())
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    f = s.makefile("rwb")
    answered = 0
    try:
        for i in range(N):
            m = random.choice(METHODS)
            if m in ("trial.start",) and random.random() < 0.7:
                params = {"frames": random.randint(1, 50), "drain_s": 0.0}
                params.update({random.choice(KEYS): rval() for _ in range(random.randint(0, 2))})
            else:
                params = {random.choice(KEYS): rval() for _ in range(random.randint(0, 5))}
            req = {"jsonrpc": "2.0", "id": i, "method": m, "params": params}
            if random.random() < 0.05:
                req["params"] = rval()
            if random.random() < 0.03:
                req["id"] = rval()
            line = json.dumps(req)
            if random.random() < 0.05:
                line = line[: random.randint(1, len(line))]
            if os.environ.get("FUZZ_DEBUG"):
                print(line[:300], file=sys.stderr, flush=True)
            f.write(line.encode() + b"\n")
            f.flush()
            resp = f.readline()
            if not resp:
                raise SystemExit(f"connection closed after {line!r}")
            r = json.loads(resp)
            assert ("result" in r) != ("error" in r), r
            answered += 1
        f.write(b'{"jsonrpc":"2.0","id":1,"method":"shutdown"}\n')
        f.flush()
        f.readline()
        p.wait(20)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
            # killed: tgen removes its EAL runtime directory itself only when it exits
            shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)
    ok = p.returncode == 0
    print(f"{answered} requests answered, exit code {p.returncode}; {'1 passed, 0 failed' if ok else '0 passed, 1 failed'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
