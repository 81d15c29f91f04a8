#!/usr/bin/env python3
"""Benchmark: the harness ceiling per port kind — tgen through testpmd io, against the same path
driven by testpmd itself, measured in the same run on the same cores.

For each port kind available (af_packet and af_xdp on veth pairs; vhost: tgen net_virtio_user <->
testpmd net_vhost; memif: tgen net_memif (server) <-> testpmd net_memif (client)) and 64 / 1518 B:

* the forwarder: dpdk-testpmd ``--forward-mode=io`` on two ports (paired: 0 <-> 1) on CPU 0;
* the generator on CPU 1, its two ports cabled to the forwarder's:
  - **tgen**: one stream each way at full speed (signature, sequence, timestamps: it receives and
    accounts every frame it gets back);
  - **testpmd**: ``--forward-mode=flowgen`` (the reference: a generator that sends *and* receives
    on the same core, as tgen does; txonly would leave the received frames to the PMD);
* the figure: frames/s the forwarder transmits (both ports, its TX counters against the host
  clock over ``SAMPLE_S``, after ``WARM_S``) — one instrument for both generators.  tgen's own
  received rate is reported too.

AF_XDP A/B (issue 8 item 5): ``BENCH_AFXDP_DEVARGS`` (appended to every net_af_xdp devargs, e.g.
``,busy_budget=0``) and ``BENCH_AFXDP_SYSFS`` (``napi_defer_hard_irqs=2,gro_flush_timeout=200000``:
written to the bench's own veths, which are deleted afterwards); ``af_xdp_xdp_modes`` in the JSON
line is the XDP mode the sockets ran in.

A/B of two tgen builds: ``BENCH_TGEN_B=/path/to/other/tgen`` measures that binary too, in every
round right after the first one; ``b_over_a_median_of_rounds`` pairs each round's two figures
(a whole-bench best against best moves with the host by more than a code change does).

A round (``BENCH_ROUNDS``) measures the generators in ABBA order (tgen, testpmd, testpmd, tgen),
against one forwarder build on af_packet, af_xdp and vhost (a new generator reconnects), on a fresh
path per figure on memif; a generator's figure of the round is the mean of its two.
ratio = tgen / testpmd per kind and size (best round of each).  ``cpu_steadiness_pct``: how much
the host's CPU speed moved on its own in a 2 s probe before and after (nfvperf.host.steadiness):
a ratio between rounds measured minutes apart cannot be read more closely than that;
``ratio_median_of_rounds`` pairs each round's two figures instead.  Floors: vhost >= 8 Mpps at
64 B, ratio >= 0.9.
Prints a table and, as its LAST line, one JSON object (``vhost_mpps``, ``vhost_ratio_vs_testpmd``,
``af_packet_mpps``, ... at 64 B; ``per_kind`` with everything).  Needs root.  ~2 minutes.
"""
from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from nfvperf.host import netns as N  # noqa: E402
from nfvperf.host.run import ResourceTracker, RunContext  # noqa: E402
from nfvperf.tg.tgen import PortSpec, TgenProcess, find_tgen_binary  # noqa: E402
from nfvperf.tg.tgen_testpmd import TestpmdPeer, find_testpmd  # noqa: E402
from nfvperf.topo.ports.veth import kernel_mac  # noqa: E402

CPUS = os.cpu_count() or 1
FWD_LCORES = "0@0,1@0"
GEN_LCORES = "0@1,1@1" if CPUS >= 2 else "0@0,1@0"
SIZES = tuple(int(x) for x in os.environ.get("BENCH_SIZES", "64,1518").split(","))
WARM_S = float(os.environ.get("BENCH_WARM_S", "1.0"))
SAMPLE_S = float(os.environ.get("BENCH_SAMPLE_S", "2.0"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "1"))
KINDS = tuple(os.environ.get("BENCH_KINDS", "af_packet,af_xdp,vhost,memif").split(","))
VHOST_EAL = ("--single-file-segments",)
XDP_MODES: dict[str, Any] = {}     # veth -> the XDP mode its AF_XDP program ran in
# A/B of two tgen builds: a second binary measured in the same rounds, right after the first
TGEN_B = os.environ.get("BENCH_TGEN_B") or None


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Peer(TestpmdPeer):
    """TestpmdPeer with extra EAL arguments (vhost/virtio-user want --single-file-segments)."""

    def __init__(self, *a: Any, eal: tuple[str, ...] = (), **kw: Any):
        super().__init__(*a, **kw)
        self.eal = list(eal)

    def argv(self) -> list[str]:
        argv = super().argv()
        i = argv.index("--")
        return argv[:i] + self.eal + argv[i:]


# -- the paths: (generator devargs, forwarder devargs, EAL extras) ------------------------------

#: A/B knobs for AF_XDP (issue 8 item 5): extra net_af_xdp devargs (",busy_budget=0"), and
#: per-interface sysfs settings applied to the bench's own veths ("napi_defer_hard_irqs=2,
#: gro_flush_timeout=200000"; gone with the veths)
AFXDP_DEVARGS = os.environ.get("BENCH_AFXDP_DEVARGS", "")
AFXDP_SYSFS = [kv.split("=", 1) for kv in os.environ.get("BENCH_AFXDP_SYSFS", "").split(",") if "=" in kv]


def veth_path(run: RunContext, tracker: ResourceTracker, driver: str) -> dict[str, Any]:
    gen, fwd = [], []
    for i in range(2):
        a, b = run.ifname(f"g{i}"), run.ifname(f"f{i}")
        N.create_veth(a, b, None, None, mtu=1500, tracker=tracker)
        for name, lst in ((a, gen), (b, fwd)):
            j = len(lst)
            if driver == "af_xdp":
                for key, value in AFXDP_SYSFS:
                    (Path("/sys/class/net") / name / key).write_text(value)
                lst.append(f"net_af_xdp{j},iface={name},start_queue=0,queue_count=1{AFXDP_DEVARGS}")
            else:
                lst.append(f"net_af_packet{j},iface={name},qpairs=1,blocksz=4096,framesz=2048,"
                           "framecnt=1024,qdisc_bypass=1")
    out: dict[str, Any] = {"gen": gen, "fwd": fwd, "eal": ()}
    if driver == "af_packet":
        # as nfvperf drives it (topo.ports.veth.AfPacket): tgen keeps the interface's address on
        # the wire and the kernel interface takes another, so tgen's frames are not routed by the
        # kernel on their way into its socket (testpmd flowgen's go to an address nobody has)
        out["wire_macs"] = [N.link_mac(run.ifname(f"g{i}")) for i in range(2)]
        out["gen_ifnames"] = [run.ifname(f"g{i}") for i in range(2)]
    return out


def vhost_path(run: RunContext) -> dict[str, Any]:
    socks = [run.run_dir / f"{run.tag}-vhu{i}.sock" for i in range(2)]
    return {"gen": [f"net_virtio_user{i},path={s},queues=1" for i, s in enumerate(socks)],
            "fwd": [f"net_vhost{i},iface={s},queues=1,client=0" for i, s in enumerate(socks)],
            "eal": VHOST_EAL, "fwd_first": True, "sockets": socks}


def memif_path(run: RunContext) -> dict[str, Any]:
    socks = [run.run_dir / f"{run.tag}-memif{i}.sock" for i in range(2)]
    return {"gen": [f"net_memif{i},role=server,socket={s}" for i, s in enumerate(socks)],
            "fwd": [f"net_memif{i},role=client,socket={s}" for i, s in enumerate(socks)],
            "eal": (), "fwd_first": False, "sockets": socks}


# -- measuring ---------------------------------------------------------------------------------

def fwd_tx_rate(tp: TestpmdPeer) -> tuple[float, float, float]:
    """Frames/s the forwarder transmitted (both ports) over SAMPLE_S, by its counters and the
    host clock, the mean bytes per frame it counted (checks the generator's frame size) and the
    frames/s it received (what the generator got onto the path)."""
    def read() -> tuple[float, int, int, int]:
        t = time.monotonic()
        st = tp.port_stats()
        return ((t + time.monotonic()) / 2, sum(p.get("tx_packets", 0) for p in st.values()),
                sum(p.get("tx_bytes", 0) for p in st.values()), sum(p.get("rx_packets", 0) for p in st.values()))

    t1, c1, b1, r1 = read()
    time.sleep(SAMPLE_S)
    t2, c2, b2, r2 = read()
    return (c2 - c1) / (t2 - t1), ((b2 - b1) / (c2 - c1) if c2 > c1 else 0.0), (r2 - r1) / (t2 - t1)


def wait_link(fn: Callable[[], bool], timeout_s: float = 15.0) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if fn():
            return
        time.sleep(0.1)
    raise RuntimeError("the generator's ports did not come up")


def tgen_gen(path: dict[str, Any], run: RunContext, size: int, binary: Any = None) -> TgenProcess:
    macs = path.get("wire_macs") or [None] * len(path["gen"])
    ports = [PortSpec(d, speed_bps=1e12, mac=m) for d, m in zip(path["gen"], macs)]
    for ifname, m in zip(path.get("gen_ifnames", []), macs):
        N.set_link(ifname, None, address=kernel_mac(m))
    return TgenProcess(ports, lcores=GEN_LCORES, run_dir=run.run_dir, tag=run.tag, hugepages=True,
                       extra_eal=list(path["eal"]), binary=binary)


def testpmd_gen(path: dict[str, Any], run: RunContext, size: int) -> Peer:
    return Peer(path["gen"], run.tag + "g", run.run_dir, forward_mode="flowgen", lcores=GEN_LCORES,
                hugepages=True, eal=tuple(path["eal"]),
                app_args=(f"--txpkts={size}", "--port-topology=paired"))  # flowgen counts 4 B less than it is given


def run_tgen(proc: TgenProcess, size: int, fwd: TestpmdPeer) -> dict[str, float]:
    wait_link(lambda: all(p["link_up"] for p in proc.rpc("ports.list")))
    for tx, rx in ((0, 1), (1, 0)):
        proc.rpc("stream.add", port=tx, rx_port=rx, size_b=size, rate={"percent": 100})
    proc.rpc("trial.start", duration_s=60.0, drain_s=0.1, latency=True)
    try:
        time.sleep(WARM_S)
        s1, t1 = proc.rpc("trial.status"), time.monotonic()
        pps, byts, fwd_rx = fwd_tx_rate(fwd)
        s2, t2 = proc.rpc("trial.status"), time.monotonic()
        r1, r2 = int(s1["received"]), int(s2["received"])
    finally:
        proc.rpc("trial.stop")
        end = time.monotonic() + 30
        while proc.rpc("trial.status")["state"] != "done" and time.monotonic() < end:
            time.sleep(0.1)
    return {"pps": pps, "bytes_per_frame": byts, "tgen_rx_pps": (r2 - r1) / (t2 - t1), "fwd_rx_pps": fwd_rx,
            "tgen_tx_pps": (int(s2["sent"]) - int(s1["sent"])) / (t2 - t1)}


def run_testpmd(gen: Peer, size: int, fwd: TestpmdPeer) -> dict[str, float]:
    gen.cmd("start")
    time.sleep(WARM_S)
    pps, byts, fwd_rx = fwd_tx_rate(fwd)
    gen.cmd("stop")
    return {"pps": pps, "bytes_per_frame": byts, "fwd_rx_pps": fwd_rx}


def measure(kind: str, size: int, which: str, run: RunContext, tracker: ResourceTracker) -> dict[str, float]:
    """One figure on a fresh path: the forwarder and the generator ``which`` (the side that
    creates the sockets first: vhost's backend is the forwarder, memif's server the generator)."""
    if kind in ("af_packet", "af_xdp"):
        path = veth_path(run, tracker, kind)
    elif kind == "vhost":
        path = vhost_path(run)
    else:
        path = memif_path(run)
    fwd = Peer(path["fwd"], run.tag + "f", run.run_dir, forward_mode="io", lcores=FWD_LCORES,
               hugepages=True, eal=tuple(path["eal"]),
               app_args=("--port-topology=paired", f"--max-pkt-len={max(1518, size)}"))
    if which == "testpmd":
        gen: Any = testpmd_gen(path, run, size)
    else:
        gen = tgen_gen(path, run, size, binary=TGEN_B if which == "tgen_b" else None)
    try:
        with contextlib.ExitStack() as stack:
            for part in ((fwd, gen) if path.get("fwd_first", True) else (gen, fwd)):
                stack.enter_context(part)
            fwd.cmd("start")
            if kind == "af_xdp":
                from nfvperf.host.xdp import xdp_mode
                XDP_MODES.update({n: xdp_mode(n) for p in path["fwd"] + path["gen"]
                                  for n in [p.split("iface=")[1].split(",")[0]]})
            if which == "testpmd":
                return run_testpmd(gen, size, fwd)
            return run_tgen(gen, size, fwd)
    finally:
        tracker.release_all()
        for s in path.get("sockets", []):
            Path(s).unlink(missing_ok=True)


#: kinds whose forwarder and path outlive a generator (a new one reconnects): one build per round,
#: both generators against it; memif's socket belongs to its server, the generator, so a memif path
#: is rebuilt for every figure
ONE_BUILD_PER_ROUND = ("af_packet", "af_xdp", "vhost")


def measure_round(kind: str, size: int, order: tuple[str, ...], run: RunContext,
                  tracker: ResourceTracker) -> list[tuple[str, dict[str, float]]]:
    """One round: the generators of ``order`` one after the other, each measured once, against one
    forwarder on one path (:data:`ONE_BUILD_PER_ROUND`), or each on a fresh path (memif).  One
    build keeps a pair's two figures ~3 s closer in time: this host's slow stretches last seconds
    (at 1518 B the path's copies run 2.5x slower in them, for either generator)."""
    if kind not in ONE_BUILD_PER_ROUND:
        return [(w, measure(kind, size, w, run, tracker)) for w in order]
    path = veth_path(run, tracker, kind) if kind in ("af_packet", "af_xdp") else vhost_path(run)
    fwd = Peer(path["fwd"], run.tag + "f", run.run_dir, forward_mode="io", lcores=FWD_LCORES,
               hugepages=True, eal=tuple(path["eal"]),
               app_args=("--port-topology=paired", f"--max-pkt-len={max(1518, size)}"))
    out: list[tuple[str, dict[str, float]]] = []
    try:
        with fwd:
            fwd.cmd("start")
            for which in order:
                gen: Any = (testpmd_gen(path, run, size) if which == "testpmd" else
                            tgen_gen(path, run, size, binary=TGEN_B if which == "tgen_b" else None))
                with gen:
                    if kind == "af_xdp":
                        from nfvperf.host.xdp import xdp_mode
                        XDP_MODES.update({n: xdp_mode(n) for p in path["fwd"] + path["gen"]
                                          for n in [p.split("iface=")[1].split(",")[0]]})
                    out.append((which, run_testpmd(gen, size, fwd) if which == "testpmd"
                                else run_tgen(gen, size, fwd)))
    finally:
        tracker.release_all()
        for s in path.get("sockets", []):
            Path(s).unlink(missing_ok=True)
    return out


def _mean_figure(figs: list[dict[str, float]]) -> dict[str, float]:
    """A generator's figures of one round (ABBA: two) averaged key by key."""
    return {k: statistics.fmean(f[k] for f in figs) for k in figs[0]}


def _median_ratio(fig: dict[str, list[dict[str, float]]], a: str = "tgen", b: str = "testpmd") -> Any:
    rs = [t["pps"] / p["pps"] for t, p in zip(fig[a], fig[b]) if p["pps"]]
    return round(statistics.median(rs), 3) if rs else None


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
    from nfvperf.host import hugepages as hp
    hp.prepare(2048)
    t0 = time.monotonic()
    res: dict[str, Any] = {"tgen": str(binary), "tgen_b": TGEN_B, "host_cpus": CPUS, "forwarder_lcores": FWD_LCORES,
                           "generator_lcores": GEN_LCORES, "load_avg_1m_start": os.getloadavg()[0],
                           "sample_s": SAMPLE_S, "rounds": ROUNDS, "per_kind": {}}
    from nfvperf.host.steadiness import combine, probe_cpus
    steady = [dict(probe_cpus(), when="before the bench")]
    run = RunContext(run_dir=Path("/tmp") / "nfvperf-bench-ceiling")
    run.run_dir.mkdir(parents=True, exist_ok=True)
    tracker = ResourceTracker(run)
    try:
        for kind in KINDS:
            per: dict[str, Any] = {}
            for size in SIZES:
                gens = ("tgen", "tgen_b", "testpmd") if TGEN_B else ("tgen", "testpmd")
                fig: dict[str, list[dict[str, float]]] = {g: [] for g in gens}
                try:
                    for r in range(ROUNDS):
                        # ABBA inside the round (each generator twice, its figure the mean of the
                        # two): a host that speeds up or slows down across the round does not
                        # favour whichever generator goes first
                        order = gens + tuple(reversed(gens))
                        log(f"{kind} {size} B: round {r + 1}: {', '.join(order)} through testpmd io ...")
                        got = measure_round(kind, size, order, run, tracker)
                        for which in gens:
                            fig[which].append(_mean_figure([f for w, f in got if w == which]))
                except Exception as e:  # noqa: BLE001 - one kind's failure must not hide the others
                    per[str(size)] = {"error": f"{type(e).__name__}: {e}"}
                    log(f"{kind} {size} B: FAILED: {e}")
                    continue
                best_t = max(fig["tgen"], key=lambda x: x["pps"])
                best_p = max(fig["testpmd"], key=lambda x: x["pps"])
                per[str(size)] = {"tgen_pps": best_t["pps"], "tgen_rx_pps": best_t["tgen_rx_pps"],
                                  "testpmd_pps": best_p["pps"],
                                  "tgen_bytes_per_frame": best_t["bytes_per_frame"],
                                  "testpmd_bytes_per_frame": best_p["bytes_per_frame"],
                                  "ratio": best_t["pps"] / best_p["pps"] if best_p["pps"] else None,
                                  # each round's tgen / testpmd, measured back to back: a slow
                                  # stretch of the host hits both of a round, not two rounds
                                  "ratio_median_of_rounds": _median_ratio(fig),
                                  "tgen_runs": [x["pps"] for x in fig["tgen"]],
                                  "testpmd_runs": [x["pps"] for x in fig["testpmd"]],
                                  # what reached the forwarder (its RX): above its TX, it dropped
                                  "tgen_fwd_rx_runs": [x["fwd_rx_pps"] for x in fig["tgen"]],
                                  # what tgen handed its ports: above the forwarder's RX, the path dropped it
                                  "tgen_tx_runs": [x["tgen_tx_pps"] for x in fig["tgen"]],
                                  "testpmd_fwd_rx_runs": [x["fwd_rx_pps"] for x in fig["testpmd"]]}
                if TGEN_B:
                    per[str(size)].update({
                        "tgen_b_runs": [x["pps"] for x in fig["tgen_b"]],
                        "tgen_b_pps": max(x["pps"] for x in fig["tgen_b"]),
                        "tgen_b_ratio_median_of_rounds": _median_ratio(fig, "tgen_b", "testpmd"),
                        # the A/B itself: each round's B over its A, measured back to back
                        "b_over_a_median_of_rounds": _median_ratio(fig, "tgen_b", "tgen")})
            res["per_kind"][kind] = per
    finally:
        tracker.release_all()
    steady.append(dict(probe_cpus(), when="after it"))
    st = combine(steady)
    # the host's own CPU speed spread: a ratio between two rounds cannot be trusted closer than this
    res["cpu_steadiness_pct"] = st.get("spread_pct")
    res["cpu_steadiness_probes_pct"] = [p.get("spread_pct") for p in steady]
    res["wall_s"] = round(time.monotonic() - t0, 1)
    res["load_avg_1m_end"] = os.getloadavg()[0]
    print(f"{'kind':10s} {'size B':>6s} {'tgen Mpps':>10s} {'testpmd Mpps':>13s} {'ratio':>6s} "
          f"{'tgen rx Mpps':>13s}")
    for kind, per in res["per_kind"].items():
        for size, r in per.items():
            if "error" in r:
                print(f"{kind:10s} {size:>6s} error: {r['error']}")
                continue
            print(f"{kind:10s} {size:>6s} {r['tgen_pps'] / 1e6:10.3f} {r['testpmd_pps'] / 1e6:13.3f} "
                  f"{(r['ratio'] or 0):6.2f} {r['tgen_rx_pps'] / 1e6:13.3f}")
        r64 = per.get("64") or {}
        if "tgen_pps" in r64:
            res[f"{kind}_mpps"] = round(r64["tgen_pps"] / 1e6, 3)
            res[f"{kind}_testpmd_mpps"] = round(r64["testpmd_pps"] / 1e6, 3)
            res[f"{kind}_ratio_vs_testpmd"] = round(r64["ratio"], 3) if r64["ratio"] else None
            res[f"{kind}_ratio_median_of_rounds"] = r64.get("ratio_median_of_rounds")
        r1518 = per.get("1518") or {}
        if "tgen_pps" in r1518:
            res[f"{kind}_1518_mpps"] = round(r1518["tgen_pps"] / 1e6, 3)
            res[f"{kind}_1518_ratio_vs_testpmd"] = round(r1518["ratio"], 3) if r1518["ratio"] else None
    if XDP_MODES:
        res["af_xdp_xdp_modes"] = sorted({str(m) for m in XDP_MODES.values()})
        res["af_xdp_settings"] = {"devargs": AFXDP_DEVARGS, "sysfs": dict(AFXDP_SYSFS)}
    if "vhost_mpps" in res:
        res["vhost_floor_8mpps_ok"] = res["vhost_mpps"] >= 8.0
        res["vhost_ratio_floor_0.9_ok"] = (res.get("vhost_ratio_vs_testpmd") or 0) >= 0.9
    print(json.dumps(res, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
