"""TCP throughput measurer built on iperf3 (seed 001: TCP broadband speed test in an NFV cloud).

What it measures
----------------
iperf3 reports **TCP payload goodput**: application bytes written to (sender) or read from
(receiver) the TCP socket per second.  TCP/IP/Ethernet headers, retransmitted bytes and
ACKs are *not* included, so the figure is below the L2/L1 rate on the wire.  Every bit rate in
:class:`TcpResult` is labelled with that layer (``layer = "tcp_payload_goodput"``).

As in the seed, iperf3 is single-threaded, so the measurer runs ``processes`` iperf3 client /
server pairs, one TCP port per pair, each with ``streams`` parallel TCP connections (``-P``),
optionally each pinned to one CPU (round-robin over ``pin_cores``, ``taskset -c``).  The
aggregate is the sum of the per-process averages (the seed's "accumulative average
throughput").

Where it runs
-------------
Servers and clients run in two network namespaces given by name (a topology built elsewhere),
or in a standalone topology this module builds itself (:class:`VethTopology`: two namespaces
joined by one veth pair, or by two veth pairs and a Linux bridge in a third namespace, with
TSO/GSO/GRO and the veth queue count as options; seed 001's TSO and multi-queue knobs).
:class:`VethTopology` is built with :mod:`nfvperf.host.netns` and named with a run tag
(``<tag>-tcpc`` / ``-tcps`` / ``-tcpb``, links ``<tag>c0`` ...); its namespaces, veths and bridge
are registered with a :class:`~nfvperf.host.run.ResourceTracker`, so they are released like every
other resource and ``nfvperf cleanup`` finds what a killed run left by the tag.

Every subprocess is a :class:`nfvperf.host.proc.Process` with an argument list (never a shell
string)::

    ip netns exec <srv-ns> [taskset -c CPU] iperf3 -s -p PORT -1 -J
    ip netns exec <cli-ns> [taskset -c CPU] iperf3 -c SERVER -p PORT -t DURATION -P STREAMS -J
                                                   [-R | --bidir] [-l LEN] [-M MSS] [-Z]

``measure(duration_s, load_pps)`` raises :class:`Unsupported`: TCP has no offered load.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from nfvperf.host.base import Popened
from nfvperf.host import netns as N
from nfvperf.host.proc import LOCAL, CommandError, Process, ProcessError
from nfvperf.host.run import TAG_RE, ResourceTracker, RunContext, normalize_tag
from nfvperf.tg import ifsettings
from nfvperf.trial import Measurer, MeasurerError, TrafficProfile, TrialResult, Unsupported

LAYER = "tcp_payload_goodput"
LAYER_NOTE = ("iperf3 bit rates are TCP payload goodput (application bytes per second through the "
              "socket); TCP/IP/Ethernet headers, retransmissions and ACKs are not counted")


def _run(argv: Sequence[str], check: bool = True, timeout: float = 20.0,
         netns: Optional[str] = None, host: Any = None) -> subprocess.CompletedProcess:
    """Run a short helper command (ethtool) from an argument list, in ``netns`` on ``host``."""
    try:
        return (host or LOCAL).run(argv, netns=netns, check=check, timeout=timeout)
    except CommandError as e:
        raise MeasurerError(str(e)) from None


# --------------------------------------------------------------------------------------------
# Results


@dataclass
class TcpProcessResult:
    """One iperf3 client/server pair (one port)."""

    index: int
    port: int
    cpu: Optional[int] = None
    streams: int = 0                       # TCP connections iperf3 reported in end.streams
    sender_bps: float = 0.0                # TCP payload goodput, sending side
    receiver_bps: float = 0.0              # TCP payload goodput, receiving side
    sender_bytes: int = 0
    receiver_bytes: int = 0
    # --bidir only: the server->client half (sender_* / receiver_* above are client->server)
    reverse_sender_bps: float = 0.0
    reverse_receiver_bps: float = 0.0
    retransmits: Optional[int] = None      # sender-side TCP retransmits (Linux, from tcp_info)
    seconds: float = 0.0                   # iperf3's measured test length
    cpu_host_pct: Optional[float] = None   # client process CPU utilisation (iperf3 -J)
    cpu_remote_pct: Optional[float] = None  # server process CPU utilisation (iperf3 -J)
    sender_tcp_congestion: Optional[str] = None
    intervals: list[dict[str, float]] = field(default_factory=list)  # [{start_s, end_s, bps, retransmits}]
    client_cmd: list[str] = field(default_factory=list)
    server_cmd: list[str] = field(default_factory=list)
    error: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class TcpResult:
    """One TCP trial: N iperf3 processes x M streams each."""

    duration_s: float
    streams: int                    # per process (-P)
    processes: int
    reverse: bool = False
    bidir: bool = False
    server: str = ""
    client_ns: Optional[str] = None
    server_ns: Optional[str] = None
    layer: str = LAYER
    layer_note: str = LAYER_NOTE
    # Aggregate over processes (sum of per-process averages).  For --bidir these are the
    # client->server half; *_reverse_* the server->client half; total_bps both.
    sender_bps: float = 0.0
    receiver_bps: float = 0.0
    reverse_sender_bps: float = 0.0
    reverse_receiver_bps: float = 0.0
    retransmits: Optional[int] = None
    cpu_host_pct: dict[str, Optional[float]] = field(default_factory=dict)    # mean/max over processes
    cpu_remote_pct: dict[str, Optional[float]] = field(default_factory=dict)
    per_process: list[TcpProcessResult] = field(default_factory=list)
    intervals: list[dict[str, float]] = field(default_factory=list)   # aggregate per interval index
    commands: list[list[str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    valid: bool = True
    started_at: float = 0.0          # unix time the clients were launched
    wall_s: float = 0.0              # wall time of the whole trial (servers up to all down)
    iperf3_version: str = ""
    # where it ran (Iperf3Measurer.in_namespaces: topology, DUT, offloads) and the DUT's
    # counters before/after the trial; empty for the standalone topology
    path: dict[str, Any] = field(default_factory=dict)
    dut_counters: dict[str, Any] = field(default_factory=dict)

    @property
    def total_bps(self) -> float:
        """Receiver goodput of all directions (one direction unless bidir)."""
        return self.receiver_bps + (self.reverse_receiver_bps if self.bidir else 0.0)

    @property
    def receiver_gbps(self) -> float:
        return self.receiver_bps / 1e9

    @property
    def throughput_bps(self) -> float:
        """The headline figure (TCP payload goodput, receivers, all directions)."""
        return self.total_bps

    @property
    def invalid_reasons(self) -> list[str]:
        return list(self.errors)

    @property
    def effective_duration_s(self) -> float:
        secs = [p.seconds for p in self.per_process if p.error is None]
        return max(secs) if secs else 0.0

    @property
    def extra(self) -> dict[str, Any]:
        """The keys ``SimMeasurer.measure_tcp`` puts in ``TrialResult.extra``, plus the full record."""
        return {"throughput_bps": self.throughput_bps, "layer": self.layer,
                "streams": self.streams, "processes": self.processes,
                "retransmits": self.retransmits, "tcp": self.to_dict()}

    def to_trial_result(self) -> TrialResult:
        """The same trial as a :class:`TrialResult` (load 0, no frame counts) for the recorder."""
        return TrialResult(duration_s=self.duration_s, load_pps=0.0,
                           effective_duration_s=self.effective_duration_s, valid=self.valid,
                           invalid_reasons=self.invalid_reasons, extra=self.extra)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["total_bps"] = self.total_bps
        return d


# --------------------------------------------------------------------------------------------
# Standalone topology: two namespaces, direct veth or via a Linux bridge in a third namespace


@dataclass
class VethTopology:
    """Client and server namespaces joined by a veth pair (``bridge=False``) or by two veth
    pairs to a Linux bridge in a third namespace (``bridge=True``, resembles a switch).

    ``tso``/``gso``/``gro``: None leaves the kernel default (on for veth), True/False sets it on
    every veth end.  ``queues`` sets numtxqueues/numrxqueues of every veth end (multi-queue).
    Addresses: client ``<net>.1``, server ``<net>.2`` in a /24 of 198.18.0.0/15.

    Names come from the run tag (``run.tag``; or ``tag``, normalised to ``nfv`` + 6 hex; or a
    new one): namespaces ``<tag>-tcpc``, ``<tag>-tcps``, ``<tag>-tcpb``, links ``<tag>c0``,
    ``<tag>s0``, ``<tag>cb``, ``<tag>sb``, bridge ``<tag>br``.  Everything is registered with
    ``tracker`` (a run's tracker; without one the topology has its own, which claims the tag as a
    live run) and :meth:`delete` releases it through that tracker.
    """

    tag: str = ""
    bridge: bool = False
    tso: Optional[bool] = None
    gso: Optional[bool] = None
    gro: Optional[bool] = None
    queues: int = 1
    mtu: int = 1500
    net: str = "198.18.0"
    up: bool = False
    offload_state: dict[str, dict[str, str]] = field(default_factory=dict)
    run: Optional[RunContext] = field(default=None, repr=False)
    tracker: Optional[ResourceTracker] = field(default=None, repr=False)
    host: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.queues < 1:
            raise ValueError("queues must be >= 1")
        self._own_run = self.run is None
        if self.run is None:
            self.run = RunContext(tag=self.tag or None)
        elif self.tag and normalize_tag(self.tag) != self.run.tag:
            raise ValueError(f"tag {self.tag!r} is not the run's tag {self.run.tag!r}")
        self.tag = self.run.tag
        self.host = self.host or LOCAL
        run = self.run
        self.client_ns = run.netns("tcpc")
        self.server_ns = run.netns("tcps")
        self.bridge_ns = run.netns("tcpb") if self.bridge else None
        self.client_if = run.ifname("c0")
        self.server_if = run.ifname("s0")
        self.bridge_if = run.ifname("br")
        self.bridge_ports = (run.ifname("cb"), run.ifname("sb"))
        self.client_ip = f"{self.net}.1"
        self.server_ip = f"{self.net}.2"
        self._tracker: Optional[ResourceTracker] = None

    # names of all namespaces this topology owns
    @property
    def namespaces(self) -> list[str]:
        return [n for n in (self.client_ns, self.server_ns, self.bridge_ns) if n]

    def _ifaces(self) -> list[tuple[str, str]]:
        out = [(self.client_ns, self.client_if), (self.server_ns, self.server_if)]
        if self.bridge_ns:
            out += [(self.bridge_ns, p) for p in self.bridge_ports]
        return out

    def _resources(self) -> list[tuple[str, str]]:
        """(kind, name) of what create() registers, oldest first."""
        out = [("netns", ns) for ns in self.namespaces]
        out += [("veth", self.client_if), ("veth", self.server_if)]
        if self.bridge_ns:
            out.append(("bridge", self.bridge_if))
        return out

    def create(self) -> "VethTopology":
        if self.up:
            return self
        if self.tracker is not None:
            tr = self.tracker
        else:
            # its own tracker; it claims the tag as a live run only when the run is ours too
            tr = ResourceTracker(self.run if self._own_run else None)
        self._tracker = tr
        veth: dict[str, Any] = dict(mtu=self.mtu, up=True, ipv6=True, offloads_off=False, tracker=tr,
                                    queues=self.queues)
        try:
            for ns in self.namespaces:
                N.create_netns(ns, tr)
            if self.bridge_ns:
                cb, sb = self.bridge_ports
                N.create_veth(self.client_if, cb, self.client_ns, self.bridge_ns, **veth)
                N.create_veth(self.server_if, sb, self.server_ns, self.bridge_ns, **veth)
                N.create_bridge(self.bridge_if, self.bridge_ns, ports=(cb, sb), mtu=self.mtu,
                                tracker=tr)
            else:
                N.create_veth(self.client_if, self.server_if, self.client_ns, self.server_ns,
                              **veth)
            for ns, ifc, ip in ((self.client_ns, self.client_if, self.client_ip),
                                (self.server_ns, self.server_if, self.server_ip)):
                N.add_address(ifc, f"{ip}/24", ns)
            self._set_offloads()
            self.up = True
            return self
        except N.NetnsError as e:
            self.delete()
            raise MeasurerError(f"TCP topology {self.tag}: {e}") from e
        except BaseException:
            self.delete()
            raise

    def _set_offloads(self) -> None:
        feats = [(k, v) for k, v in (("tso", self.tso), ("gso", self.gso), ("gro", self.gro)) if v is not None]
        if feats and not shutil.which("ethtool"):
            raise MeasurerError("ethtool not found (apt-get install ethtool): needed for tso/gso/gro options")
        for ns, ifc in self._ifaces():
            if feats:
                args = []
                for k, v in feats:
                    args += [k, "on" if v else "off"]
                _run(["ethtool", "-K", ifc, *args], netns=ns, host=self.host)
            if shutil.which("ethtool"):
                cp = _run(["ethtool", "-k", ifc], check=False, netns=ns, host=self.host)
                want = {"tcp-segmentation-offload", "generic-segmentation-offload",
                        "generic-receive-offload"}
                st = {}
                for line in cp.stdout.splitlines():
                    k, _, v = line.partition(":")
                    if k.strip() in want:
                        st[k.strip()] = v.strip()
                self.offload_state[f"{ns}/{ifc}"] = st

    def delete(self) -> None:
        """Release what create() made through the tracker: deleting a namespace kills what still
        runs in it and takes its veths and bridge along.  Idempotent."""
        tr = self._tracker
        self._tracker = None
        self.up = False
        if tr is None:
            return
        if tr is not self.tracker:
            tr.release_all()                      # our own tracker: everything in it is ours
            errors = tr.errors
        else:
            n = len(tr.errors)
            for kind, name in reversed(self._resources()):
                tr.release(kind, name)
            errors = tr.errors[n:]
        if errors:
            raise MeasurerError(f"TCP topology {self.tag}: " + "; ".join(errors))

    def describe(self) -> dict[str, Any]:
        return {"kind": "veth+linux-bridge" if self.bridge else "direct-veth",
                "client_ns": self.client_ns, "server_ns": self.server_ns,
                "bridge_ns": self.bridge_ns, "client_ip": self.client_ip,
                "server_ip": self.server_ip, "queues": self.queues, "mtu": self.mtu,
                "tso": self.tso, "gso": self.gso, "gro": self.gro,
                "offloads": self.offload_state}

    def __hash__(self) -> int:
        return id(self)

    def __enter__(self) -> "VethTopology":
        return self.create()

    def __exit__(self, *exc: object) -> None:
        self.delete()


# --------------------------------------------------------------------------------------------
# The measurer


def _listening(pid: int, port: int) -> bool:
    """True when the process ``pid`` has a TCP socket in LISTEN on ``port`` in its namespace
    (reads /proc/<pid>/net/tcp{,6}, which shows the process's own network namespace; a probe
    connection would use up a ``-1`` server)."""
    hexport = f":{port:04X}"
    for fn in ("tcp6", "tcp"):
        try:
            with open(f"/proc/{pid}/net/{fn}") as f:
                next(f, None)
                for line in f:
                    parts = line.split()
                    if len(parts) > 3 and parts[1].endswith(hexport) and parts[3] == "0A":
                        return True
        except OSError:
            continue
    return False


class _Proc:
    """One iperf3 subprocess (a :class:`nfvperf.host.proc.Process`) with its output in files (no
    pipe can fill up and block it): stdout ``<name>.json``, stderr ``<name>.err``."""

    def __init__(self, argv: list[str], workdir: Path, name: str, host: Any = None,
                 tag: Optional[str] = None) -> None:
        self.argv = argv
        self.name = name
        self.killed = False
        self.out_path = workdir / f"{name}.json"
        self.err_path = workdir / f"{name}.err"
        self.process = Process(f"iperf3-{name}", argv, host=host, log_path=self.err_path,
                               stdout_path=self.out_path, append=False, header=False, tag=tag,
                               died=MeasurerError)
        try:
            self.process.start()
        except ProcessError as e:
            raise MeasurerError(str(e)) from None

    @property
    def popen(self) -> Popened:
        assert self.process.proc is not None
        return self.process.proc

    def kill(self) -> None:
        """SIGTERM (its process group), 2 s, SIGKILL; then close the files."""
        if self.process.running():
            self.killed = True
        self.process.stop(timeout=2.0)

    def output(self) -> tuple[str, str]:
        return (self.out_path.read_text(errors="replace"), self.err_path.read_text(errors="replace"))


def _parse_json(text: str, stderr: str, what: str) -> tuple[Optional[dict], Optional[str]]:
    """iperf3 -J output -> (dict, error).  iperf3 puts its own errors in the "error" key."""
    if not text.strip():
        return None, f"{what}: no JSON output (stderr: {stderr.strip()[-500:] or 'empty'})"
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        return None, (f"{what}: cannot parse iperf3 JSON ({e}); stderr: {stderr.strip()[-500:] or 'empty'};"
                      f" stdout starts: {text[:200]!r}")
    if not isinstance(doc, dict):
        return None, f"{what}: iperf3 JSON is not an object"
    if doc.get("error"):
        return doc, f"{what}: iperf3 error: {doc['error']}"
    return doc, None


def check_tcp_args(duration_s: float, streams: int, processes: int, reverse: bool, bidir: bool) -> int:
    """The arguments of a TCP trial checked (ValueError naming the bad one); returns the duration
    rounded up to whole seconds: iperf3 -t parses an integer ("-t 0.5" would mean its 10 s
    default)."""
    if duration_s < 1:
        raise ValueError("duration_s must be >= 1 (iperf3 -t takes whole seconds)")
    if not 1 <= streams <= 128:
        raise ValueError("streams must be 1..128 (iperf3 -P)")
    if processes < 1:
        raise ValueError("processes must be >= 1")
    if reverse and bidir:
        raise ValueError("reverse and bidir are exclusive")
    return int(math.ceil(duration_s))


def client_argv(server_ip: str, port: int, duration_s: float, streams: int, *, binary: str = "iperf3",
                interval_s: float = 1.0, connect_timeout_ms: int = 3000, reverse: bool = False,
                bidir: bool = False, length_b: Optional[int] = None, mss: Optional[int] = None,
                zerocopy: bool = False, omit_s: int = 0, congestion: Optional[str] = None) -> list[str]:
    """An iperf3 client's command (JSON output, per-interval reports), wherever it runs: a
    namespace here (:class:`Iperf3Measurer`) or a guest (:mod:`nfvperf.vm.tcp`)."""
    argv = [binary, "-c", server_ip, "-p", str(port), "-t", str(int(duration_s)), "-P", str(int(streams)),
            "-J", "-i", f"{interval_s:g}", "--connect-timeout", str(int(connect_timeout_ms))]
    if bidir:
        argv.append("--bidir")
    elif reverse:
        argv.append("-R")
    if length_b:
        argv += ["-l", str(int(length_b))]
    if mss:
        argv += ["-M", str(int(mss))]
    if zerocopy:
        argv.append("-Z")
    if omit_s:
        argv += ["-O", str(int(omit_s))]
    if congestion:
        argv += ["-C", congestion]
    return argv


class Iperf3Measurer(Measurer):
    """TCP throughput between two network namespaces with N iperf3 processes x M streams.

    ``server_ns``/``client_ns`` are namespace names (None = the current namespace);
    ``server_ip`` is the address clients connect to.  Use :meth:`standalone` to get one with its
    own :class:`VethTopology` (closed with the measurer).
    """

    name = "iperf3"

    def __init__(self, server_ns: Optional[str], client_ns: Optional[str], server_ip: str, *,
                 base_port: int = 5201, iperf3: str = "iperf3", timeout_margin_s: float = 15.0,
                 connect_timeout_ms: int = 3000, ready_timeout_s: float = 5.0,
                 pin_servers: bool = True, topology: Optional[VethTopology] = None,
                 workdir: Optional[Path] = None, host: Any = None,
                 tso_refusal: Optional[str] = None, path: Optional[dict[str, Any]] = None,
                 dut_counters: Optional[Callable[[], Any]] = None,
                 dut_alive: Optional[Callable[[], None]] = None) -> None:
        binary = shutil.which(iperf3)
        if not binary:
            raise MeasurerError(f"{iperf3} not found (apt-get install iperf3)")
        if (server_ns or client_ns) and not shutil.which("ip"):
            raise MeasurerError("ip (iproute2) not found")
        self.iperf3 = binary
        self.server_ns = server_ns
        self.client_ns = client_ns
        self.server_ip = server_ip
        self.base_port = base_port
        self.timeout_margin_s = timeout_margin_s
        self.connect_timeout_ms = connect_timeout_ms
        self.ready_timeout_s = ready_timeout_s
        self.pin_servers = pin_servers
        self.topology = topology
        self.host = host or (topology.host if topology is not None else None) or LOCAL
        # the run tag (NFVPERF_TAG of every iperf3): the topology's, or the one in the names of
        # the namespaces a topology built
        m = TAG_RE.match(server_ns or client_ns or "")
        self.tag = topology.tag if topology is not None else (m.group(0) if m else None)
        self.profile: Optional[TrafficProfile] = None
        self._workdir = workdir
        self._procs: list[_Proc] = []
        self.version = self._version()
        # what the topology says about the path (topology, DUT, offloads ...): in every result
        self.path_info: dict[str, Any] = dict(path or {})
        self.dut_counters_fn = dut_counters   # read around each trial
        self.dut_alive_fn = dut_alive         # raises DutFailure
        # the kernel interfaces of the TCP path that apply_tcp_settings() sets: (netns, ifname)
        self.ifaces: list[tuple[Optional[str], str]] = list(topology._ifaces()) if topology else [
            (ns, ifc) for ns, ifc in ((client_ns, self.path_info.get("client_if")),
                                      (server_ns, self.path_info.get("server_if"))) if ifc]
        self.tso_refusal: Optional[str] = tso_refusal   # why params.tso true cannot work on this path

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def standalone(cls, *, tag: str = "", bridge: bool = False, tso: Optional[bool] = None,
                   gso: Optional[bool] = None, gro: Optional[bool] = None, queues: int = 1,
                   mtu: int = 1500, run: Optional[RunContext] = None,
                   tracker: Optional[ResourceTracker] = None, **kw: Any) -> "Iperf3Measurer":
        """Build a :class:`VethTopology` (named with ``run``'s tag, registered with ``tracker``)
        and a measurer on it; ``close()`` removes both."""
        topo = VethTopology(tag=tag, bridge=bridge, tso=tso, gso=gso, gro=gro, queues=queues, mtu=mtu,
                            run=run, tracker=tracker, host=kw.get("host"))
        topo.create()
        try:
            return cls(topo.server_ns, topo.client_ns, topo.server_ip, topology=topo, **kw)
        except BaseException:
            topo.delete()
            raise

    @classmethod
    def in_namespaces(cls, client_ns: str, server_ns: str, server_ip: str, *,
                      path: Optional[dict[str, Any]] = None, dut_counters: Optional[Any] = None,
                      dut_alive: Optional[Any] = None, **kw: Any) -> "Iperf3Measurer":
        """A measurer on namespaces a topology built (``Topology.tcp_endpoints()``), which
        stays the topology's to remove.  ``path`` (topology, DUT, offloads ...) goes into
        ``environment()`` and every result; ``dut_counters()`` is read before and after each
        trial; ``dut_alive()`` is checked after each trial (raises DutFailure)."""
        return cls(server_ns, client_ns, server_ip, path=path, dut_counters=dut_counters,
                   dut_alive=dut_alive, **kw)

    def _read_dut_counters(self) -> Any:
        try:
            return self.dut_counters_fn() if self.dut_counters_fn else None
        except Exception as e:  # noqa: BLE001 - counters are best effort
            return {"error": str(e)}

    def _version(self) -> str:
        try:
            cp = subprocess.run([self.iperf3, "--version"], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, timeout=5)
            return cp.stdout.splitlines()[0].strip() if cp.stdout else ""
        except (OSError, subprocess.TimeoutExpired):
            return ""

    # -- Measurer boundary ----------------------------------------------------------------

    def set_profile(self, profile: TrafficProfile) -> None:
        self.profile = profile

    def measure(self, duration_s: float, load_pps: float) -> TrialResult:
        raise Unsupported("iperf3 measures TCP throughput: there is no offered load "
                          "(use measure_tcp)")

    def measure_tcp_supported(self) -> bool:
        return True

    def apply_tcp_settings(self, tso: Optional[bool] = None,
                           multiqueue: ifsettings.Queues = None) -> dict[str, dict[str, Any]]:
        """Set TSO / the queue count on the path's kernel interfaces (:attr:`ifaces`: the
        client and server ends; on a standalone topology every veth end) with ethtool
        (:mod:`nfvperf.tg.ifsettings`); what reads back goes into ``path.interface_settings``
        of every later result and is returned.  None leaves a setting as it is."""
        if tso is None and multiqueue is None:
            return {}
        if not self.ifaces:
            raise MeasurerError("params.tso/params.multiqueue: this iperf3 measurer does not know "
                                "the interfaces of its path (no topology)")
        if tso and self.tso_refusal:
            raise MeasurerError(f"params.tso: true: {self.tso_refusal}")
        applied = ifsettings.apply(self.ifaces, tso=tso, multiqueue=multiqueue, host=self.host)
        self.path_info["interface_settings"] = applied
        return applied

    def environment(self) -> dict[str, Any]:
        env: dict[str, Any] = {"measurer": self.name, "iperf3": self.version, "layer": LAYER,
                               "layer_note": LAYER_NOTE, "server_ns": self.server_ns,
                               "client_ns": self.client_ns, "server_ip": self.server_ip,
                               "cpus": os.cpu_count()}
        if self.topology is not None:
            env["topology"] = self.topology.describe()
        if self.path_info:
            env["path"] = self.path_info
        if (os.cpu_count() or 1) <= 2:
            env["warning"] = ("client, server and the kernel's softirq work share "
                              f"{os.cpu_count()} CPU(s): figures are CPU-bound, not link-bound")
        return env

    # -- commands -------------------------------------------------------------------------

    def server_cmd(self, port: int, cpu: Optional[int]) -> list[str]:
        pin = ["taskset", "-c", str(cpu)] if (cpu is not None and self.pin_servers) else []
        return self.host.wrap(pin + [self.iperf3, "-s", "-p", str(port), "-1", "-J"], self.server_ns)

    def client_cmd(self, port: int, cpu: Optional[int], duration_s: float, streams: int,
                   reverse: bool, bidir: bool, length_b: Optional[int], mss: Optional[int],
                   zerocopy: bool, omit_s: int, interval_s: float,
                   congestion: Optional[str]) -> list[str]:
        pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
        argv = pin + client_argv(self.server_ip, port, duration_s, streams, binary=self.iperf3,
                                 interval_s=interval_s, connect_timeout_ms=self.connect_timeout_ms,
                                 reverse=reverse, bidir=bidir, length_b=length_b, mss=mss,
                                 zerocopy=zerocopy, omit_s=omit_s, congestion=congestion)
        return self.host.wrap(argv, self.client_ns)

    # -- the trial ------------------------------------------------------------------------

    def measure_tcp(self, duration_s: float, streams: int = 1, processes: int = 1,
                    reverse: bool = False, bidir: bool = False,
                    pin_cores: Optional[list[int]] = None, mss: Optional[int] = None,
                    zerocopy: bool = False, length_b: Optional[int] = None, omit_s: int = 0,
                    interval_s: float = 1.0, congestion: Optional[str] = None) -> TcpResult:
        """Run ``processes`` iperf3 pairs with ``streams`` TCP connections each for ``duration_s``.

        Raises :class:`MeasurerError` when no process produced a result (e.g. the server address
        is unreachable) -- the message names the server and quotes iperf3's error.  When only
        some processes failed the result comes back with ``valid=False`` and ``errors``.
        """
        duration_s = check_tcp_args(duration_s, streams, processes, reverse, bidir)
        if self.base_port + processes - 1 > 65535:
            raise ValueError("port range exceeds 65535")
        res = TcpResult(duration_s=duration_s, streams=streams, processes=processes,
                        reverse=reverse, bidir=bidir, server=self.server_ip,
                        client_ns=self.client_ns, server_ns=self.server_ns,
                        iperf3_version=self.version, path=dict(self.path_info))
        before = self._read_dut_counters()
        cores = list(pin_cores) if pin_cores else []
        t0 = time.monotonic()
        tmp = tempfile.TemporaryDirectory(prefix="nfvperf-iperf3-", dir=self._workdir)
        wd = Path(tmp.name)
        servers: list[_Proc] = []
        clients: list[_Proc] = []
        try:
            # 1. servers, each checked to be listening before any client starts
            for i in range(processes):
                port = self.base_port + i
                cpu = cores[i % len(cores)] if cores else None
                p = _Proc(self.server_cmd(port, cpu), wd, f"server{i}", self.host, self.tag)
                self._procs.append(p)
                servers.append(p)
                res.commands.append(p.argv)
            for i, p in enumerate(servers):
                self._wait_listening(p, self.base_port + i)
            # 2. clients, all at once
            res.started_at = time.time()
            for i in range(processes):
                port = self.base_port + i
                cpu = cores[i % len(cores)] if cores else None
                p = _Proc(self.client_cmd(port, cpu, duration_s, streams, reverse, bidir, length_b,
                                          mss, zerocopy, omit_s, interval_s, congestion),
                          wd, f"client{i}", self.host, self.tag)
                self._procs.append(p)
                clients.append(p)
                res.commands.append(p.argv)
            # 3. wait: duration + omit + connect timeout + margin, then kill what is left
            deadline = time.monotonic() + duration_s + omit_s + self.connect_timeout_ms / 1000.0 \
                + self.timeout_margin_s
            timed_out = self._wait_all(clients, deadline)
            # a server finishes right after its client (-1); give those whose client succeeded a
            # moment for their JSON, and do not wait for the others (nobody will connect)
            # (iperf3 3.12 -J exits 0 even after "unable to connect", so look at its JSON)
            self._wait_all([s for s, c in zip(servers, clients) if c not in timed_out
                            and _parse_json(*c.output(), "")[1] is None],
                           time.monotonic() + 3.0)
            for p in clients + servers:
                p.kill()
            # 4. parse
            for i in range(processes):
                cpu = cores[i % len(cores)] if cores else None
                pr = TcpProcessResult(index=i, port=self.base_port + i, cpu=cpu,
                                      client_cmd=clients[i].argv, server_cmd=servers[i].argv)
                self._parse_process(pr, clients[i], servers[i], bidir,
                                    timed_out=clients[i] in timed_out)
                res.per_process.append(pr)
                if pr.error:
                    res.errors.append(pr.error)
            self._aggregate(res)
        finally:
            for p in clients + servers:
                p.kill()
                if p in self._procs:
                    self._procs.remove(p)
            tmp.cleanup()
            res.wall_s = time.monotonic() - t0
            if self.dut_counters_fn is not None:
                res.dut_counters = {"before": before, "after": self._read_dut_counters()}
        if self.dut_alive_fn is not None:
            self.dut_alive_fn()
        ok = [p for p in res.per_process if p.error is None]
        if not ok:
            where = f" (client netns {self.client_ns}, server netns {self.server_ns})" \
                if self.client_ns or self.server_ns else ""
            err = MeasurerError(f"iperf3 could not measure against server {self.server_ip} "
                                f"ports {self.base_port}-{self.base_port + processes - 1}{where}: "
                                + "; ".join(res.errors))
            err.result = res  # type: ignore[attr-defined]
            raise err
        if res.errors:
            res.valid = False
        return res

    def _wait_listening(self, p: _Proc, port: int) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if p.popen.poll() is not None:
                _, err = p.output()
                out = p.out_path.read_text(errors="replace")
                raise MeasurerError(f"iperf3 server on port {port} (netns {self.server_ns}) exited "
                                    f"with {p.popen.returncode} before listening: "
                                    f"{(err or out).strip()[-500:]}")
            if _listening(p.popen.pid, port):
                return
            time.sleep(0.02)
        raise MeasurerError(f"iperf3 server on port {port} (netns {self.server_ns}) not listening "
                            f"after {self.ready_timeout_s} s")

    @staticmethod
    def _wait_all(procs: list[_Proc], deadline: float) -> list[_Proc]:
        """Wait for all to exit until ``deadline``; return those still running (not killed)."""
        pending = [p for p in procs if p.popen.poll() is None]
        while pending and time.monotonic() < deadline:
            time.sleep(0.05)
            pending = [p for p in pending if p.popen.poll() is None]
        return pending

    def _parse_process(self, pr: TcpProcessResult, client: _Proc, server: _Proc, bidir: bool,
                       timed_out: bool) -> None:
        what = f"iperf3 client {pr.index} -> server {self.server_ip}:{pr.port}"
        out, err = client.output()
        doc, error = _parse_json(out, err, what)
        if timed_out:
            error = (f"{what}: no result within duration + connect timeout + {self.timeout_margin_s:g} s; "
                     f"killed" + (f"; {error}" if error else ""))
        if doc is None or error:
            # the server's view may say more (e.g. it saw the client vanish) -- unless we killed it
            if not server.killed:
                sout, serr = server.output()
                _, serror = _parse_json(sout, serr, f"server port {pr.port}")
                if serror:
                    error = f"{error}; {serror}"
            pr.error = error or f"{what}: no result"
            return
        end = doc.get("end") or {}
        ssent = end.get("sum_sent") or {}
        srecv = end.get("sum_received") or {}
        if not ssent and not srecv:
            pr.error = f"{what}: iperf3 JSON has no end summary (stderr: {err.strip()[-300:]})"
            return
        pr.sender_bps = float(ssent.get("bits_per_second", 0.0))
        pr.receiver_bps = float(srecv.get("bits_per_second", 0.0))
        pr.sender_bytes = int(ssent.get("bytes", 0))
        pr.receiver_bytes = int(srecv.get("bytes", 0))
        pr.seconds = float(srecv.get("seconds", ssent.get("seconds", 0.0)))
        rtx = ssent.get("retransmits")
        if bidir:
            rs = end.get("sum_sent_bidir_reverse") or {}
            rr = end.get("sum_received_bidir_reverse") or {}
            pr.reverse_sender_bps = float(rs.get("bits_per_second", 0.0))
            pr.reverse_receiver_bps = float(rr.get("bits_per_second", 0.0))
            if rtx is not None and rs.get("retransmits") is not None:
                rtx = int(rtx) + int(rs["retransmits"])
        pr.retransmits = int(rtx) if rtx is not None else None
        # number of TCP connections: bidir lists each stream once per direction
        n = len(end.get("streams") or [])
        pr.streams = n // 2 if bidir else n
        cpu = end.get("cpu_utilization_percent") or {}
        pr.cpu_host_pct = cpu.get("host_total")
        pr.cpu_remote_pct = cpu.get("remote_total")
        pr.sender_tcp_congestion = end.get("sender_tcp_congestion")
        for iv in doc.get("intervals") or []:
            s = iv.get("sum") or {}
            row = {"start_s": float(s.get("start", 0.0)), "end_s": float(s.get("end", 0.0)),
                   "bps": float(s.get("bits_per_second", 0.0))}
            if s.get("retransmits") is not None:
                row["retransmits"] = int(s["retransmits"])
            if bidir:
                rsum = iv.get("sum_bidir_reverse") or {}
                row["reverse_bps"] = float(rsum.get("bits_per_second", 0.0))
            pr.intervals.append(row)

    @staticmethod
    def _aggregate(res: TcpResult) -> None:
        ok = [p for p in res.per_process if p.error is None]
        res.sender_bps = sum(p.sender_bps for p in ok)
        res.receiver_bps = sum(p.receiver_bps for p in ok)
        res.reverse_sender_bps = sum(p.reverse_sender_bps for p in ok)
        res.reverse_receiver_bps = sum(p.reverse_receiver_bps for p in ok)
        rtx = [p.retransmits for p in ok if p.retransmits is not None]
        res.retransmits = sum(rtx) if rtx else None
        for attr, dst in (("cpu_host_pct", res.cpu_host_pct), ("cpu_remote_pct", res.cpu_remote_pct)):
            vals = [getattr(p, attr) for p in ok if getattr(p, attr) is not None]
            dst["mean"] = sum(vals) / len(vals) if vals else None
            dst["max"] = max(vals) if vals else None
        # aggregate per-interval series by interval index (processes start within ms of each
        # other; the index is the honest alignment -- the start offsets are not shifted)
        n = min((len(p.intervals) for p in ok), default=0)
        for k in range(n):
            rows = [p.intervals[k] for p in ok]
            agg = {"start_s": rows[0]["start_s"], "end_s": rows[0]["end_s"],
                   "bps": sum(r["bps"] for r in rows)}
            if all("retransmits" in r for r in rows):
                agg["retransmits"] = sum(r["retransmits"] for r in rows)
            if res.bidir:
                agg["reverse_bps"] = sum(r.get("reverse_bps", 0.0) for r in rows)
            res.intervals.append(agg)

    def close(self) -> None:
        for p in list(self._procs):
            p.kill()
        self._procs.clear()
        if self.topology is not None:
            self.topology.delete()
