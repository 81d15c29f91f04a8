#!/usr/bin/env python3
"""Hand-run self-test of the tgen binary over net_ring loopback (no NIC needed).

    python3 tgen/tests/selftest.py [path/to/tgen]

Starts tgen with one net_ring port (TX loops back to RX) and --no-huge, drives it over the Unix
socket with JSON-RPC, checks exact counts and the error handling, and shuts it down.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "build", "tgen")
fails = 0
passes = 0


def check(cond, what):
    global fails, passes
    if cond:
        passes += 1
    else:
        fails += 1
        print("FAIL:", what)


class Client:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.f = self.s.makefile("rwb")
        self.n = 0

    def raw(self, line: bytes):
        self.f.write(line + b"\n")
        self.f.flush()
        return json.loads(self.f.readline())

    def call(self, method, **params):
        self.n += 1
        r = self.raw(json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}).encode())
        return r

    def ok(self, method, **params):
        r = self.call(method, **params)
        if "error" in r:
            raise RuntimeError(f"{method}: {r['error']}")
        return r["result"]


def wait_done(c, timeout=30):
    t = time.time()
    while time.time() - t < timeout:
        st = c.ok("trial.status")
        if st["state"] == "done":
            return c.ok("trial.result")
        time.sleep(0.05)
    raise RuntimeError("trial did not finish")


def main():
    tmp = tempfile.mkdtemp(prefix="tgen-selftest-")
    sock = os.path.join(tmp, "tgen.sock")
    prefix = f"tgst{os.getpid()}"
    cmd = [BIN, "--no-huge", "-m", "512", "--no-pci", f"--file-prefix={prefix}", "--lcores", "0@0,1@0",
           "--vdev", "net_ring0", "--log-level", "4", "--", "--socket", sock, "--port", "0:speed=10G"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        ready = json.loads(p.stdout.readline())
        check(ready.get("ready") is True and ready["socket"] == sock, f"ready line {ready}")
        check(oct(os.stat(sock).st_mode & 0o777) == "0o600", "socket mode 0600")
        c = Client(sock)
        check(c.ok("ping")["pong"] is True, "ping")
        ports = c.ok("ports.list")
        check(len(ports) == 1 and ports[0]["speed_bps"] == 10e9, f"ports.list {ports}")
        # hostile / malformed
        r = c.raw(b"{not json")
        check(r["error"]["code"] == -32700, f"bad json {r}")
        r = c.raw(b"[1,2]")
        check(r["error"]["code"] == -32600, f"batch {r}")
        r = c.raw(b'{"jsonrpc":"2.0","id":1,"method":"nope"}')
        check(r["error"]["code"] == -32601, f"unknown method {r}")
        r = c.raw(b'{"jsonrpc":"2.0","id":1,"method":5}')
        check(r["error"]["code"] == -32600, f"method type {r}")
        r = c.raw(b'{"jsonrpc":"2.0","id":1,"method":"stream.add","params":"x"}')
        check(r["error"]["code"] == -32602, f"params type {r}")
        for params, field in [({"port": 0, "size_b": 40}, "size_b"), ({"port": 9}, "port"), ({"port": 0, "flows": 0}, "flows"),
                              ({"port": 0, "rate": {"pps": 2e7}}, "rate.pps"), ({"port": 0, "size_b": 1519}, "size_b"),
                              ({"port": "0"}, "port"), ({"port": 0, "rate": {"percent": 101}}, "rate.percent")]:
            r = c.call("stream.add", **params)
            want = -32001 if params.get("port") == 9 else -32602
            check("error" in r and r["error"]["code"] == want and r["error"].get("data", {}).get("field") == field,
                  f"refusal {params} -> {r}")
        r = c.call("trial.result")
        check(r.get("error", {}).get("code") == -32000, f"result before trial {r}")
        # huge line on a second connection: error then close, server keeps running
        c2 = Client(sock)
        c2.f.write(b"x" * (1 << 20) + b"yyyy")
        c2.f.flush()
        r = json.loads(c2.f.readline())
        check(r["error"]["code"] == -32600, f"huge line {r}")
        check(c.ok("ping")["pong"], "alive after huge line")

        # 1) constant rate, exact counts
        sid = c.ok("stream.add", port=0, rx_port=0, size_b=64, flows=1000, rate={"pps": 200000})["stream_id"]
        c.ok("trial.start", duration_s=1.0, drain_s=0.2)
        res = wait_done(c)
        s = res["streams"][0]
        print(f"constant 200 kpps 1 s: sent {s['sent']} received {s['received']} lost {s['lost']} "
              f"achieved {s['achieved_pps']:.1f} lat p50 {s['latency']['percentiles_ns']['50']} ns pacer_late_max {res['pacer_late_max_ns']:.0f} ns")
        check(s["sent"] == 200000 and s["received"] == 200000 and s["lost"] == 0, "exact 200000")
        check(s["duplicates"] == 0 and s["reordered"] == 0 and s["seq_gaps"] == 0, "no dup/reorder")
        check(s["first_loss_ns"] is None and res["non_test_rx"] == 0, "no loss times")
        check(res["ports"][0]["stats"]["opackets"] == 200000, "port opackets")
        check(abs(s["achieved_pps"] - 200000) / 200000 < 0.01, "achieved rate")
        lat = s["latency"]
        check(lat["count"] == 200000 and set(lat["percentiles_ns"]) == {"50", "90", "99", "99.9", "99.99"}, "latency keys")
        check(sum(b[1] for b in lat["histogram"]) == 200000, "histogram sums to count")
        # 2) frames mode, IMIX, VLAN, VXLAN streams together
        c.ok("stream.remove", all=True)
        c.ok("stream.add", port=0, imix=[[64, 7], [576, 4], [1500, 1]], rate={"pps": 50000})
        c.ok("stream.add", port=0, size_b=128, vlan=10, flows=7, vary=["src_port", "dst_port"], rate={"pps": 50000})
        c.ok("stream.add", port=0, size_b=256, ipv6=True, rate={"pps": 50000})
        c.ok("stream.add", port=0, size_b=128, vxlan={"vni": 42}, rate={"pps": 50000})
        c.ok("trial.start", frames=12345, drain_s=0.2, learning=True, learning_wait_s=0.1)
        res = wait_done(c)
        for s in res["streams"]:
            check(s["sent"] == 12345 and s["received"] == 12345, f"frames mode stream {s['id']}: {s['sent']} {s['received']}")
        check(res["non_test_rx"] == 4 * 3, f"learning frames counted as non-test: {res['non_test_rx']}")
        print(f"4 streams (imix, vlan, ipv6, vxlan) x 12345 frames: received {[s['received'] for s in res['streams']]}, non_test_rx {res['non_test_rx']}")
        # 3) segments (system recovery shape): 100 kpps x 0.5 s then 50 % for 0.5 s
        c.ok("stream.remove", all=True)
        c.ok("stream.add", port=0, size_b=64, rate={"pps": 100000})
        c.ok("trial.start", segments=[{"duration_s": 0.5, "scale": 1.0}, {"duration_s": 0.5, "scale": 0.5}], drain_s=0.2)
        res = wait_done(c)
        s = res["streams"][0]
        check(s["sent"] == 75000 and s["received"] == 75000, f"segments sent {s['sent']}")
        check(abs(s["intended_pps"] - 75000) < 1, f"segments intended {s['intended_pps']}")
        print(f"segments 100k/50k pps x 0.5 s: sent {s['sent']} received {s['received']}")
        # 4) burst mode
        c.ok("trial.start", mode="burst", burst_frames=5000, bursts=3, burst_interval_s=0.1, pps=1e6, drain_s=0.2)
        res = wait_done(c)
        s = res["streams"][0]
        check(s["sent"] == 15000 and s["received"] == 15000, f"burst sent {s['sent']}")
        print(f"3 bursts x 5000 at 1 Mpps: sent {s['sent']} received {s['received']}")
        # 5) line-rate refusal at trial level, stop
        r = c.call("trial.start", duration_s=1, pps=2e7)
        check(r.get("error", {}).get("data", {}).get("field") == "pps", f"trial pps above line rate {r}")
        c.ok("trial.start", duration_s=30, drain_s=0.1)
        time.sleep(0.3)
        r = c.call("stream.add", port=0)
        check(r.get("error", {}).get("code") == -32000, "stream.add refused while running")
        c.ok("trial.stop")
        res = wait_done(c, 5)
        s = res["streams"][0]
        check(s["sent"] == s["received"] and 0 < s["sent"] < 3000000, f"stopped early {s['sent']}")
        st = c.ok("stream.stats", id=0)
        check(st["sent"] == s["sent"], "stream.stats")
        xs = c.ok("port.xstats", port=0)
        check(isinstance(xs["xstats"], dict), "xstats")
        c.ok("stats.reset")
        check(c.ok("port.stats", port=0)["stats"]["opackets"] == 0, "stats.reset")
        check(c.ok("shutdown")["ok"], "shutdown")
        p.wait(10)
        check(p.returncode == 0, f"exit code {p.returncode}")
        check(not os.path.exists(sock), "socket removed")
    finally:
        if p.poll() is None:
            p.terminate()
            p.wait(10)
        if p.returncode not in (0, 1, 2):
            # killed: tgen removes its EAL runtime directory itself only when it exits
            shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)
        err = p.stderr.read().decode(errors="replace")
        if fails:
            print(err[-3000:])
    print(f"{passes} passed, {fails} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
