#!/usr/bin/env python3
"""Benchmark: the harness ceiling per port kind — tgen through testpmd io, against the same path
driven by testpmd itself, measured in the same run on the same cores.

For each port kind available (af_packet and af_xdp on veth pairs; vhost: tgen net_virtio_user <->
testpmd net_vhost; memif: tgen net_memif (zero-copy client) <-> testpmd net_memif (server), as
nfvperf opens them (topo.ports.memif: the DUT is the server)) and 64 / 1518 B:

* the forwarder: dpdk-testpmd ``--forward-mode=io`` on two ports (paired: 0 <-> 1) on CPU 0;
* the generator on CPU 1, its two ports cabled to the forwarder's:
  - **tgen**: one stream each way at full speed (signature, sequence, timestamps: it receives and
    accounts every frame it gets back);
  - **testpmd**: ``--forward-mode=flowgen`` (the reference: a generator that sends *and* receives
    on the same core, as tgen does; txonly would leave the received frames to the PMD);
* the figure: frames/s the forwarder transmits on that generator's two ports (its TX counters
  against the host clock over ``SAMPLE_S``, after ``WARM_S``) — one instrument for every
  generator.  tgen's own received and sent rates are reported too.

**A duet, not a relay.**  Every generator of the comparison (tgen, testpmd, and ``BENCH_TGEN_B``
when given) runs at once, each on its own path (its own two veth pairs / vhost sockets / memif
sockets) into ONE forwarder that polls all of them (paired: generator g's ports are the
forwarder's 2g and 2g + 1).  Only one generator sends at a time: a round switches them on one
after another in ABBA order (A B B A; three: A B C C B A), a chunk of ``WARM_S`` + ``SAMPLE_S``
each, and a generator's figure of the round is the mean of its two chunks.  No process starts
between the chunks of a round, so the chunks lie ~1 s apart: this host's slow stretches (its
vCPUs' speed changes for seconds at a time; at 1518 B the path's copies run 2.5x slower in them)
meet the generators of a round nearly alike.  Measured one after the other with restarts in
between (~5 s per figure), the same generator's figure moved 2-4.5x between rounds and the
ratios were luck.  The forwarder also polls the silent generators' ports: the same small extra
work for each generator.  ``silent_ports_max_pps`` checks they were silent.  The paths are not
quite alike, so the rounds are split over ``BENCH_BUILDS`` (2) set-ups, the generators moved one
path on in each.

Per kind and size: ``ratio_median_of_rounds`` (each round's tgen / testpmd, the median over
rounds) and ``ratio_interval`` (its exact 95 % rank interval, nfvperf.stats; ``enough`` is
False below 6 rounds); ``ratio`` is best round against best round.

AF_XDP A/B (issue 8 item 5): ``BENCH_AFXDP_DEVARGS`` (appended to every net_af_xdp devargs, e.g.
``,busy_budget=0``) and ``BENCH_AFXDP_SYSFS`` (``napi_defer_hard_irqs=2,gro_flush_timeout=200000``:
written to the bench's own veths, which are deleted afterwards); ``af_xdp_xdp_modes`` in the JSON
line is the XDP mode the sockets ran in.

A/B of two tgen builds: ``BENCH_TGEN_B=/path/to/other/tgen`` joins the duet as a third
generator; ``b_over_a_median_of_rounds`` / ``b_over_a_interval`` pair each round's two figures.
``dead_rounds`` names, per generator, the rounds where it carried under 1 % of the round's best
(a set-up where its ports never passed traffic): they give no ratio, and a line says so.

``cpu_steadiness_pct``: how much the host's CPU speed moved on its own in a 2 s probe before and
after (nfvperf.host.steadiness).  Floors: vhost >= 8 Mpps at 64 B, ratio >= 0.9.
Prints a table and, as its LAST line, one JSON object (``vhost_mpps``, ``vhost_ratio_vs_testpmd``,
``af_packet_mpps``, ... at 64 B; ``per_kind`` with everything).  Needs root.  Defaults: 10 rounds,
0.3 s + 0.5 s chunks over 2 set-ups (``BENCH_ROUNDS``, ``BENCH_WARM_S``, ``BENCH_SAMPLE_S``,
``BENCH_BUILDS``): under a minute per kind and size, ~6 minutes for all.  ``--quick``: 64 B, one
round of 0.1 s + 0.2 s chunks on one set-up per kind (the shape of the output in seconds, for
``make test``; its figures mean nothing).  Exits 1 when a kind or size failed (its ``error`` is in
``per_kind``).

JSON keys: tgen, tgen_b, host_cpus, forwarder_lcores, generator_lcores, load_avg_1m_start, sample_s,
rounds, per_kind, cpu_steadiness_pct, cpu_steadiness_probes_pct, wall_s, load_avg_1m_end
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
from nfvperf.stats import ratio_interval  # noqa: E402
from nfvperf.topo.ports.veth import kernel_mac  # noqa: E402

CPUS = os.cpu_count() or 1
FWD_LCORES = "0@0,1@0"
GEN_LCORES = "0@1,1@1" if CPUS >= 2 else "0@0,1@0"
QUICK = "--quick" in sys.argv[1:]
SIZES = (64,) if QUICK else tuple(int(x) for x in os.environ.get("BENCH_SIZES", "64,1518").split(","))
WARM_S = 0.1 if QUICK else float(os.environ.get("BENCH_WARM_S", "0.3"))
SAMPLE_S = 0.2 if QUICK else float(os.environ.get("BENCH_SAMPLE_S", "0.5"))
ROUNDS = 1 if QUICK else int(os.environ.get("BENCH_ROUNDS", "10"))
# set-ups per kind and size, the generators moved one path on in each (measure_duet)
BUILDS = 1 if QUICK else int(os.environ.get("BENCH_BUILDS", "2"))
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


def veth_path(run: RunContext, tracker: ResourceTracker, driver: str, g: int = 0) -> dict[str, Any]:
    """Generator ``g``'s two veth pairs: its ends (devargs 0, 1 of its own process) and the
    forwarder's (devargs ``2g``, ``2g + 1`` of the forwarder's)."""
    gen, fwd = [], []
    for i in range(2):
        j = 2 * g + i
        a, b = run.ifname(f"g{j}"), run.ifname(f"f{j}")
        N.create_veth(a, b, None, None, mtu=1500, tracker=tracker)
        for name, lst, idx in ((a, gen, i), (b, fwd, j)):
            if driver == "af_xdp":
                for key, value in AFXDP_SYSFS:
                    (Path("/sys/class/net") / name / key).write_text(value)
                lst.append(f"net_af_xdp{idx},iface={name},start_queue=0,queue_count=1{AFXDP_DEVARGS}")
            else:
                lst.append(f"net_af_packet{idx},iface={name},qpairs=1,blocksz=4096,framesz=2048,"
                           "framecnt=1024,qdisc_bypass=1")
    out: dict[str, Any] = {"gen": gen, "fwd": fwd, "eal": ()}
    if driver == "af_packet":
        # as nfvperf drives it (topo.ports.veth.AfPacket): tgen keeps the interface's address on
        # the wire and the kernel interface takes another, so tgen's frames are not routed by the
        # kernel on their way into its socket (testpmd flowgen's go to an address nobody has)
        names = [run.ifname(f"g{2 * g + i}") for i in range(2)]
        out["wire_macs"] = [N.link_mac(n) for n in names]
        out["gen_ifnames"] = names
    return out


def vhost_path(run: RunContext, g: int = 0) -> dict[str, Any]:
    socks = [run.run_dir / f"{run.tag}-vhu{2 * g + i}.sock" for i in range(2)]
    return {"gen": [f"net_virtio_user{i},path={s},queues=1" for i, s in enumerate(socks)],
            "fwd": [f"net_vhost{2 * g + i},iface={s},queues=1,client=0" for i, s in enumerate(socks)],
            "eal": VHOST_EAL, "fwd_first": True, "sockets": socks}


def memif_path(run: RunContext, g: int = 0) -> dict[str, Any]:
    """As nfvperf drives memif (topo.ports.memif, dut.base.MemifEnd): the generator is a
    zero-copy client (its mbufs are the shared buffers; ``--single-file-segments``), the
    forwarder (the DUT's place) the server that creates the socket and does the copies."""
    socks = [run.run_dir / f"{run.tag}-memif{2 * g + i}.sock" for i in range(2)]
    return {"gen": [f"net_memif{i},role=client,socket={s},socket-abstract=no,id=0,zero-copy=yes"
                    for i, s in enumerate(socks)],
            "fwd": [f"net_memif{2 * g + i},role=server,socket={s},socket-abstract=no,id=0"
                    for i, s in enumerate(socks)],
            "eal": VHOST_EAL, "fwd_first": True, "sockets": socks, "tg_prefetch": True}


def paths(kind: str, n: int, run: RunContext, tracker: ResourceTracker) -> list[dict[str, Any]]:
    """One path per generator; generator g's ports are the forwarder's ports 2g and 2g + 1."""
    if kind in ("af_packet", "af_xdp"):
        return [veth_path(run, tracker, kind, g) for g in range(n)]
    return [(vhost_path if kind == "vhost" else memif_path)(run, g) for g in range(n)]


# -- measuring ---------------------------------------------------------------------------------

def read_fwd(tp: TestpmdPeer) -> tuple[float, dict[int, dict[str, int]]]:
    """The forwarder's port counters and the host clock's time of the read (mid-command)."""
    t = time.monotonic()
    st = tp.port_stats()
    return (t + time.monotonic()) / 2, st


def rates(a: tuple[float, dict[int, dict[str, int]]], b: tuple[float, dict[int, dict[str, int]]],
          ports: tuple[int, ...]) -> dict[str, float]:
    """Between two :func:`read_fwd` reads, over ``ports``: TX frames/s, RX frames/s and the mean
    bytes per TX frame (checks the generator's frame size)."""
    dt = b[0] - a[0]

    def d(key: str) -> int:
        return sum(b[1][p].get(key, 0) - a[1][p].get(key, 0) for p in ports)

    tx = d("tx_packets")
    return {"pps": tx / dt, "fwd_rx_pps": d("rx_packets") / dt,
            "bytes_per_frame": d("tx_bytes") / tx if tx > 0 else 0.0}


def wait_link(fn: Callable[[], bool], timeout_s: float = 15.0) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if fn():
            return
        time.sleep(0.1)
    raise RuntimeError("the generator's ports did not come up")


class Gen:
    """One generator of the duet on its own path: started once, its traffic switched on and off.

    ``tgen`` / ``tgen_b``: two streams (port 0 -> 1, 1 -> 0) at full speed, one trial per
    chunk; ``testpmd``: flowgen, ``start`` / ``stop``.  ``ports``: the forwarder's ports that
    carry this generator's traffic."""

    def __init__(self, which: str, g: int, path: dict[str, Any], run: RunContext, size: int):
        self.which, self.size, self.ports = which, size, (2 * g, 2 * g + 1)
        self.proc: Any
        if which == "testpmd":
            self.proc = Peer(path["gen"], run.tag + f"g{g}", run.run_dir, forward_mode="flowgen",
                             lcores=GEN_LCORES, hugepages=True, eal=tuple(path["eal"]),
                             # flowgen counts 4 B less than it is given
                             app_args=(f"--txpkts={size}", "--port-topology=paired"))
        else:
            macs = path.get("wire_macs") or [None] * len(path["gen"])
            specs = [PortSpec(d, speed_bps=1e12, mac=m, prefetch=path.get("tg_prefetch"))
                     for d, m in zip(path["gen"], macs)]
            for ifname, m in zip(path.get("gen_ifnames", []), macs):
                N.set_link(ifname, None, address=kernel_mac(m))
            self.proc = TgenProcess(specs, lcores=GEN_LCORES, run_dir=run.run_dir, tag=f"{run.tag}-{g}",
                                    hugepages=True, extra_eal=list(path["eal"]),
                                    binary=TGEN_B if which == "tgen_b" else None)
        self._s1: Any = None

    def __enter__(self) -> "Gen":
        self.proc.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.proc.__exit__(*exc)

    def ready(self) -> None:
        if self.which != "testpmd":
            wait_link(lambda: all(p["link_up"] for p in self.proc.rpc("ports.list")))
            for tx, rx in ((0, 1), (1, 0)):
                self.proc.rpc("stream.add", port=tx, rx_port=rx, size_b=self.size, rate={"percent": 100})

    def on(self) -> None:
        if self.which == "testpmd":
            self.proc.cmd("start")
        else:
            self.proc.rpc("trial.start", duration_s=60.0, drain_s=0.05, latency=True)

    def mark(self) -> Any:
        """tgen's own counters now (start and end of a sample): its RX and TX rates."""
        return None if self.which == "testpmd" else (self.proc.rpc("trial.status"), time.monotonic())

    def off(self) -> None:
        if self.which == "testpmd":
            self.proc.cmd("stop")
            return
        self.proc.rpc("trial.stop")
        t0 = time.monotonic()
        while self.proc.rpc("trial.status")["state"] != "done":
            if time.monotonic() - t0 > 30:
                raise RuntimeError(f"{self.which}: its trial did not end within 30 s of trial.stop")
            time.sleep(0.02)
        if time.monotonic() - t0 > 1.0:
            log(f"{self.which}: its trial took {time.monotonic() - t0:.1f} s to end after trial.stop")


def chunk(gen: Gen, fwd: TestpmdPeer, all_ports: tuple[int, ...]) -> dict[str, float]:
    """One figure: ``gen``'s traffic on for WARM_S + SAMPLE_S, the forwarder's TX over its ports
    in the SAMPLE_S window; the other generators' ports must stay silent meanwhile."""
    gen.on()
    try:
        time.sleep(WARM_S)
        m1, a = gen.mark(), read_fwd(fwd)
        time.sleep(SAMPLE_S)
        b, m2 = read_fwd(fwd), gen.mark()
    finally:
        gen.off()
    fig = rates(a, b, gen.ports)
    others = tuple(p for p in all_ports if p not in gen.ports)
    fig["other_ports_pps"] = rates(a, b, others)["pps"] if others else 0.0
    if m1 is not None:
        (s1, t1), (s2, t2) = m1, m2
        fig["tgen_rx_pps"] = (int(s2["received"]) - int(s1["received"])) / (t2 - t1)
        fig["tgen_tx_pps"] = (int(s2["sent"]) - int(s1["sent"])) / (t2 - t1)
    return fig


def measure_duet(kind: str, size: int, gens: tuple[str, ...], rounds: int, run: RunContext,
                 tracker: ResourceTracker) -> dict[str, list[dict[str, float]]]:
    """Every generator of ``gens`` on its own path through ONE forwarder, all started together;
    each round switches their traffic on one at a time in ABBA order (A B B A; three: A B C C B A)
    for a chunk of WARM_S + SAMPLE_S, and a generator's figure of the round is the mean of its
    two chunks.  The chunks of a round lie within a few seconds of each other, with no start-up
    between them, so a slow stretch of this host (seconds long; at 1518 B the path's copies run
    2.5x slower in it) meets both generators of a pair nearly alike.  The forwarder polls every
    generator's ports, the silent ones too: the same extra polling for each generator.

    The paths are not quite alike (af_packet 1518 B: one run gave the generator on the first
    path 0.90x of the other's for 10 rounds, the next run 1.01x), so the rounds are split over
    BUILDS set-ups, each with the generators moved one path on (two generators: swapped)."""
    n = len(gens)
    builds = max(1, min(BUILDS, rounds))
    fig: dict[str, list[dict[str, float]]] = {w: [] for w in gens}
    done = 0
    for b in range(builds):
        todo = (rounds - done) // (builds - b)
        placed = gens[b % n:] + gens[:b % n]          # placed[g] runs on path g
        for w, f in duet_build(kind, size, gens, placed, todo, done, rounds, run, tracker).items():
            fig[w].extend(f)
        done += todo
    return fig


def duet_build(kind: str, size: int, gens: tuple[str, ...], placed: tuple[str, ...], rounds: int,
               first: int, total: int, run: RunContext,
               tracker: ResourceTracker) -> dict[str, list[dict[str, float]]]:
    """One set-up of :func:`measure_duet`: ``placed[g]`` on path g, ``rounds`` rounds."""
    ps = paths(kind, len(placed), run, tracker)
    fwd_devs = [d for p in ps for d in p["fwd"]]
    fwd = Peer(fwd_devs, run.tag + "f", run.run_dir, forward_mode="io", lcores=FWD_LCORES,
               hugepages=True, eal=tuple(ps[0]["eal"]),
               app_args=("--port-topology=paired", f"--max-pkt-len={max(1518, size)}"))
    all_ports = tuple(range(len(fwd_devs)))
    fig: dict[str, list[dict[str, float]]] = {w: [] for w in gens}
    try:
        with contextlib.ExitStack() as stack:
            objs = [Gen(w, g, p, run, size) for g, (w, p) in enumerate(zip(placed, ps))]
            if ps[0].get("fwd_first", True):
                stack.enter_context(fwd)
            for o in objs:
                stack.enter_context(o)
            if not ps[0].get("fwd_first", True):
                stack.enter_context(fwd)
            fwd.cmd("start")
            for o in objs:
                o.ready()
            if kind == "af_xdp":
                from nfvperf.host.xdp import xdp_mode
                XDP_MODES.update({n: xdp_mode(n) for p in ps for d in p["fwd"] + p["gen"]
                                  for n in [d.split("iface=")[1].split(",")[0]]})
            for o in objs:          # a first chunk each, not counted: links, caches, pools
                chunk(o, fwd, all_ports)
            by = dict(zip(placed, objs))
            for r in range(rounds):
                order = gens + tuple(reversed(gens))
                log(f"{kind} {size} B: round {first + r + 1}/{total} (paths: {', '.join(placed)}): "
                    f"{', '.join(order)} through testpmd io ...")
                got = [(w, chunk(by[w], fwd, all_ports)) for w in order]
                for w in gens:
                    fig[w].append(_mean_figure([f for x, f in got if x == w]))
    finally:
        tracker.release_all()
        for p in ps:
            for s in p.get("sockets", []):
                Path(s).unlink(missing_ok=True)
    return fig


def _mean_figure(figs: list[dict[str, float]]) -> dict[str, float]:
    """A generator's figures of one round (ABBA: two) averaged key by key."""
    return {k: statistics.fmean(f[k] for f in figs) for k in figs[0]}


def _median_ratio(fig: dict[str, list[dict[str, float]]], a: str = "tgen", b: str = "testpmd") -> Any:
    rs = [t["pps"] / p["pps"] for t, p in zip(fig[a], fig[b]) if p["pps"]]
    return round(statistics.median(rs), 3) if rs else None


def _ratio_iv(fig: dict[str, list[dict[str, float]]], a: str = "tgen", b: str = "testpmd") -> Any:
    """The paired ratios' median with its exact 95 % rank interval (nfvperf.stats)."""
    iv = ratio_interval([t["pps"] for t in fig[a]], [p["pps"] for p in fig[b]])
    return None if iv is None else {"median": round(iv.median, 3), "lo": round(iv.lo, 3),
                                    "hi": round(iv.hi, 3), "n": iv.n,
                                    "confidence": round(iv.confidence, 3), "enough": iv.enough}


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
                try:
                    fig = measure_duet(kind, size, gens, ROUNDS, run, tracker)
                except Exception as e:  # noqa: BLE001 - one kind's failure must not hide the others
                    per[str(size)] = {"error": f"{type(e).__name__}: {e}"}
                    log(f"{kind} {size} B: FAILED: {e}")
                    continue
                # a generator that carried (next to) nothing in a round, while another of the
                # same round did, was broken there (a set-up whose socket never came up): its
                # rounds give no ratio (ratio_interval leaves them out) and are named here
                dead = {g: [i + 1 for i, x in enumerate(fig[g])
                            if x["pps"] < 0.01 * max(fig[o][i]["pps"] for o in gens)] for g in gens}
                dead = {g: r for g, r in dead.items() if r}
                for g, r in dead.items():
                    log(f"{kind} {size} B: {g} carried nothing in rounds {r}: those rounds give no ratio")
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
                                  "ratio_interval": _ratio_iv(fig),
                                  # the other generators' ports while one ran: ~0, else their
                                  # traffic was counted as nobody's and skewed the round
                                  "silent_ports_max_pps": max(x["other_ports_pps"] for g in gens
                                                              for x in fig[g]),
                                  "tgen_runs": [x["pps"] for x in fig["tgen"]],
                                  "testpmd_runs": [x["pps"] for x in fig["testpmd"]],
                                  # what reached the forwarder (its RX): above its TX, it dropped
                                  "tgen_fwd_rx_runs": [x["fwd_rx_pps"] for x in fig["tgen"]],
                                  # what tgen handed its ports: above the forwarder's RX, the path dropped it
                                  "tgen_tx_runs": [x["tgen_tx_pps"] for x in fig["tgen"]],
                                  "testpmd_fwd_rx_runs": [x["fwd_rx_pps"] for x in fig["testpmd"]],
                                  "dead_rounds": dead}
                if TGEN_B:
                    per[str(size)].update({
                        "tgen_b_runs": [x["pps"] for x in fig["tgen_b"]],
                        "tgen_b_pps": max(x["pps"] for x in fig["tgen_b"]),
                        "tgen_b_ratio_median_of_rounds": _median_ratio(fig, "tgen_b", "testpmd"),
                        # the A/B itself: each round's B over its A, measured back to back
                        "b_over_a_median_of_rounds": _median_ratio(fig, "tgen_b", "tgen"),
                        "b_over_a_interval": _ratio_iv(fig, "tgen_b", "tgen")})
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
    return 1 if any("error" in r for per in res["per_kind"].values() for r in per.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
