"""Client and measurer for nfvperf's own DPDK traffic generator (``tgen/``).

* :class:`TgenProcess` starts ``tgen`` (argument list, never a shell string), waits until its
  JSON-RPC socket answers, and is the RPC client (:meth:`TgenProcess.rpc`).
* :class:`TgenMeasurer` is the :class:`~nfvperf.trial.Measurer` on top of it: one stream per
  direction, a trial per ``measure()``, results converted to :class:`TrialResult`.

Wire protocol: ``tgen/PROTOCOL.md`` (JSON-RPC 2.0, one JSON object per line, Unix socket).
"""
from __future__ import annotations

import itertools
import json
import logging
import os
import re
import shutil
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

from nfvperf.host.base import Popened
from nfvperf.host.hugepages import no_pci_option
from nfvperf.host.proc import LOCAL, Process, ProcessError
from nfvperf.host.run import ResourceTracker
from nfvperf.tg.telemetry import NA, TelemetryProbe, generator_telemetry, loss_account
from nfvperf.tg.tgen_split import flow_slices, merge_streams, split_frames, split_stream
from nfvperf.trial import (
    MAX_DURATION_STRETCH,  # noqa: F401  (re-exported: the rule itself lives in nfvperf.trial)
    MIN_SENT_RATIO,  # noqa: F401  (re-exported: the rule itself lives in nfvperf.trial)
    DutFailure,
    LatencySummary,
    Measurer,
    MeasurerError,
    Segment,
    StreamResult,
    TrafficProfile,
    TrialResult,
    Unsupported,
    counter_deltas,
    negative_loss_reason,
    sent_short_reason,
    stretched,
)

log = logging.getLogger(__name__)

__all__ = [
    "TgenError",
    "PortSpec",
    "TgenProcess",
    "TgenMeasurer",
    "find_tgen_binary",
    "merge_latency",
    "percentiles_from_histogram",
]

# Trial validity thresholds (DESIGN "a trial that cannot be trusted ... is marked invalid").
# (sent < 99.9 % of intended and negative loss: nfvperf.trial.sent_short / negative_loss)
# (effective duration > 110 % of intended -> invalid: nfvperf.trial.stretched)
PERCENTILES = ("50", "90", "99", "99.9", "99.99")

#: ``dpdk`` (DPDK's TSC frequency, rounded to 10 MHz), a frequency in Hz, or ``calibrate`` (the
#: default: tgen measures its TSC against CLOCK_MONOTONIC_RAW at start-up, PROTOCOL.md §1)
TSC_HZ_ENV = "NFVPERF_TGEN_TSC_HZ"


def tsc_hz_option(value: Optional[str]) -> Optional[str]:
    """The ``--tsc-hz`` value to give tgen for ``value`` (None: tgen's default, calibrate)."""
    if value is None or value.strip() in ("", "calibrate"):
        return None
    v = value.strip()
    if v == "dpdk":
        return v
    try:
        hz = float(v)
    except ValueError:
        hz = 0.0
    if not 1e6 <= hz <= 1e11:
        raise ValueError(f"{TSC_HZ_ENV}/tsc_hz: {value!r} is not 'calibrate', 'dpdk' or a frequency "
                         "in Hz (1e6..1e11)")
    return str(int(round(hz)))


def tsc_calibration_record(ping: dict[str, Any]) -> dict[str, Any]:
    """What tgen said about its clock (``ping``: PROTOCOL.md §3), for the run's environment: the
    frequency DPDK reported, the one tgen uses, the correction in ppm and how it was measured."""
    used, dpdk = ping.get("tsc_hz"), ping.get("tsc_hz_dpdk")
    cal = ping.get("tsc_calibration")
    if dpdk is None or not isinstance(cal, dict):
        # a tgen from before the calibration used DPDK's value (rounded to 10 MHz)
        return {"method": "dpdk", "tsc_hz": used, "tsc_hz_dpdk": used, "correction_ppm": 0.0,
                "reason": "tgen without TSC calibration"}
    rec: dict[str, Any] = {"method": cal.get("method"), "tsc_hz": used, "tsc_hz_dpdk": dpdk,
                           "correction_ppm": (float(used) / float(dpdk) - 1.0) * 1e6
                           if used and dpdk else None}
    rec.update({k: v for k, v in cal.items() if k not in rec and k != "correction_ppm"})
    return rec


def split_not_sent(raw: dict[str, Any]) -> tuple[dict[int, int], list[str]]:
    """Frames tgen's workers handed a port that the port's own counters did not count out
    (``ports[].tx.not_sent``, PROTOCOL.md §6), split over the streams sending on that port in
    proportion to what each handed it (largest remainder, so the shares add up).  Returns
    {stream id: frames not sent} and one note per such port."""
    streams = [s for s in raw.get("streams") or [] if "id" in s]
    cut: dict[int, int] = {}
    notes: list[str] = []
    for p in raw.get("ports") or []:
        tx = p.get("tx")
        if not isinstance(tx, dict) or not int(tx.get("not_sent") or 0) or "id" not in p:
            continue
        port = int(p["id"])
        mine = [(int(s["id"]), int(s.get("sent") or 0)) for s in streams
                if int(s.get("tx_port", -1)) == port]
        total = sum(n for _, n in mine)
        if total <= 0:
            continue
        n = min(int(tx["not_sent"]), total)
        shares = {sid: n * sent // total for sid, sent in mine}
        rest = n - sum(shares.values())
        for sid, _ in sorted(mine, key=lambda x: -((n * x[1]) % total))[:rest]:
            shares[sid] += 1
        for sid, k in shares.items():
            if k:
                cut[sid] = cut.get(sid, 0) + k
        counted = [f"the PMD counted {int(tx['port_opackets']):,} out"
                   if tx.get("port_opackets") is not None else None,
                   f"kernel interface {tx.get('iface')} transmitted {int(tx['iface_tx_packets']):,}"
                   f" (tx_dropped {int(tx.get('iface_tx_dropped') or 0):,})"
                   if tx.get("iface_tx_packets") is not None else None]
        notes.append(f"generator's port {port} dropped {n:,} frames at TX: tgen handed it "
                     f"{total:,}, " + ", ".join(c for c in counted if c)
                     + "; counted as not sent")
    return cut, notes


class TgenError(MeasurerError):
    """tgen answered a request with a JSON-RPC error (``code``, ``message``, ``data``)."""

    def __init__(self, message: str, code: Optional[int] = None, data: Any = None,
                 method: Optional[str] = None):
        super().__init__(message)
        self.code = code
        self.data = data
        self.method = method


def _repo_root() -> Path:
    # src/nfvperf/tg/tgen.py -> repository root
    return Path(__file__).resolve().parents[3]


def find_tgen_binary() -> Path:
    """``$NFVPERF_TGEN``, else ``tgen/build/tgen`` of this checkout (or of the cwd)."""
    env = os.environ.get("NFVPERF_TGEN")
    if env:
        p = Path(env)
        if not (p.is_file() and os.access(p, os.X_OK)):
            raise FileNotFoundError(f"NFVPERF_TGEN={env} is not an executable file")
        return p
    for base in (_repo_root(), Path.cwd()):
        p = base / "tgen" / "build" / "tgen"
        if p.is_file() and os.access(p, os.X_OK):
            return p
    w = shutil.which("tgen")
    if w:
        return Path(w)
    raise FileNotFoundError(
        "tgen binary not found: build it with `make build` (tgen/build/tgen) or set NFVPERF_TGEN")


_PCI_RE = re.compile(r"^([0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")


@dataclass
class PortSpec:
    """One generator port: a vdev devargs string (``net_ring0``, ``net_af_packet0,iface=x``,
    ``net_af_xdp0,iface=x``) or a PCI address with optional devargs (``0000:3b:00.0``)."""

    devargs: str
    speed_bps: Optional[float] = None
    rx_queues: int = 1
    tx_queues: int = 1
    rxd: int = 1024
    txd: int = 1024
    mtu: int = 1500
    promisc: bool = True
    rx: Optional[bool] = None      # poll this port's RX queues (None: tgen's default - off for net_null)
    #: another core or device writes and reads this port's mbufs (a zero-copy memif client's
    #: server): tgen prefetches their lines a burst at a time; None: tgen's default by driver
    prefetch: Optional[bool] = None
    #: the address tgen puts on the wire for this port (its frames' source, the default destination
    #: of streams to it); None: the device's own.  A kernel interface (af_packet) is given another
    #: address, so that frames to this one stop at the kernel's first IP check instead of being
    #: routed one by one (topo.ports.veth: AfPacket.tg_wire_mac, kernel_mac)
    mac: Optional[str] = None

    @property
    def is_pci(self) -> bool:
        return bool(_PCI_RE.match(self.devargs))

    def eal_args(self) -> list[str]:
        return ["-a", self.devargs] if self.is_pci else ["--vdev", self.devargs]

    @property
    def driver(self) -> str:
        if self.is_pci:
            return "pci"
        return re.sub(r"\d+$", "", self.devargs.split(",", 1)[0])


# ---------------------------------------------------------------------------------------------
# Latency helpers
# ---------------------------------------------------------------------------------------------

def percentiles_from_histogram(hist: Sequence[tuple[float, int]], pcts: Iterable[str] = PERCENTILES,
                               min_ns: Optional[float] = None, max_ns: Optional[float] = None
                               ) -> dict[str, float]:
    """Percentiles from a histogram of (bucket upper bound ns, count), sorted by bound.

    The value is interpolated linearly inside the bucket that holds the rank and clamped to the
    observed [min, max]; a bucket's lower bound is the previous bucket's upper bound (or min)."""
    buckets = sorted((float(b), int(c)) for b, c in hist if int(c) > 0)
    total = sum(c for _, c in buckets)
    out: dict[str, float] = {}
    if total <= 0:
        return out
    for p in pcts:
        rank = float(p) / 100.0 * total
        cum = 0
        prev: Optional[float] = None
        val = buckets[-1][0]
        for bound, cnt in buckets:
            lo = prev if prev is not None else min(float(min_ns or 0.0), bound)
            if cum + cnt >= rank:
                val = lo + (bound - lo) * (rank - cum) / cnt
                break
            cum += cnt
            prev = bound
        if min_ns is not None:
            val = max(val, float(min_ns))
        if max_ns is not None:
            val = min(val, float(max_ns))
        out[p] = val
    return out


def merge_histograms(hists: Iterable[Sequence[tuple[float, int]]]) -> list[tuple[float, int]]:
    acc: dict[float, int] = {}
    for h in hists:
        for b, c in h:
            acc[float(b)] = acc.get(float(b), 0) + int(c)
    return sorted((b, c) for b, c in acc.items() if c)


def _merge_var(parts: list[tuple[int, dict[str, float]]]) -> dict[str, float]:
    """Merge PDV/IPDV dicts (min/avg/max/p99) of several streams: min of mins, count-weighted
    average, max of maxes, and the largest per-stream p99 (a conservative bound)."""
    parts = [(n, d) for n, d in parts if d and n > 0]
    if not parts:
        return {}
    out: dict[str, float] = {}
    mins = [d["min"] for _, d in parts if "min" in d]
    maxs = [d["max"] for _, d in parts if "max" in d]
    avgs = [(n, d["avg"]) for n, d in parts if "avg" in d]
    p99 = [d["p99"] for _, d in parts if "p99" in d]
    if mins:
        out["min"] = min(mins)
    if avgs:
        out["avg"] = sum(n * a for n, a in avgs) / sum(n for n, _ in avgs)
    if maxs:
        out["max"] = max(maxs)
    if p99:
        out["p99"] = max(p99)
    return out


def merge_latency(summaries: Iterable[Optional[LatencySummary]]) -> Optional[LatencySummary]:
    """Merge per-stream latency: min of mins, count-weighted mean, max of maxes, the histograms
    summed and the percentiles recomputed from the merged histogram."""
    ls = [s for s in summaries if s is not None and s.count > 0]
    if not ls:
        return None
    count = sum(s.count for s in ls)
    mn = min(s.min_ns for s in ls)
    mx = max(s.max_ns for s in ls)
    avg = sum(s.avg_ns * s.count for s in ls) / count
    hist = merge_histograms(s.histogram for s in ls)
    if len(ls) == 1 and ls[0].percentiles_ns:
        pct = dict(ls[0].percentiles_ns)     # one stream: the generator's own figures
    else:
        pct = percentiles_from_histogram(hist, min_ns=mn, max_ns=mx) if hist else {}
    return LatencySummary(count=count, min_ns=mn, avg_ns=avg, max_ns=mx, percentiles_ns=pct,
                          histogram=hist,
                          pdv_ns=_merge_var([(s.count, s.pdv_ns) for s in ls]),
                          ipdv_ns=_merge_var([(s.count, s.ipdv_ns) for s in ls]),
                          definition=ls[0].definition)


# ---------------------------------------------------------------------------------------------
# The process and its JSON-RPC client
# ---------------------------------------------------------------------------------------------

class TgenProcess:
    """One tgen process in RPC mode.

    Every resource carries ``tag``: the EAL file prefix ``nfvperf-<tag>``, the control socket
    ``<run_dir>/tgen-<tag>.sock``, the log ``<run_dir>/tgen-<tag>.log`` (stderr) and
    ``<run_dir>/tgen-<tag>.out`` (stdout, the ready line).  The process itself is a
    :class:`nfvperf.host.proc.Process` on ``host`` (default: this machine), registered with
    ``tracker`` when one is given.
    """

    START_TIMEOUT_S = 60.0
    RPC_TIMEOUT_S = 30.0

    def __init__(self, ports: list[PortSpec], lcores: str = "0@0,1@0", *, run_dir: Path,
                 tag: str, binary: Optional[Path] = None, hugepages: bool = True,
                 extra_eal: Sequence[str] = (), extra_args: Sequence[str] = (),
                 mem_mb: int = 512, netns: Optional[str] = None,
                 tracker: Optional[ResourceTracker] = None, host: Any = None,
                 tsc_hz: Optional[str] = None):
        if not ports:
            raise ValueError("TgenProcess needs at least one port")
        # tgen's TSC frequency: calibrated at start-up unless this (or $NFVPERF_TGEN_TSC_HZ)
        # says "dpdk" or gives a frequency
        self.tsc_hz = tsc_hz_option(tsc_hz if tsc_hz is not None else os.environ.get(TSC_HZ_ENV))
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", tag):
            raise ValueError(f"tag {tag!r}: only letters, digits, '_', '.', '-'")
        self.ports = list(ports)
        self.lcores = lcores
        self.run_dir = Path(run_dir)
        self.tag = tag
        self.binary = Path(binary) if binary else None
        self.hugepages = hugepages
        self.extra_eal = list(extra_eal)
        self.extra_args = list(extra_args)
        self.mem_mb = mem_mb
        # run tgen inside this network namespace (its kernel ports - af_packet/af_xdp - live
        # there); the control socket is a file, reachable from any namespace
        self.netns = netns
        self.file_prefix = f"nfvperf-{tag}"
        self.host = host if host is not None else LOCAL
        # a remote tgen (a testbed's tester host) listens on that host; the controller reaches
        # the socket through an SSH-forwarded connection (SshHost.connect_unix)
        self.remote = bool(getattr(self.host, "remote", False))
        sock = (Path(self.host.work_dir) if self.remote else self.run_dir) / f"tgen-{tag}.sock"
        if len(str(sock)) > 100:   # sun_path is 108 bytes
            sock = Path("/tmp") / f"nfvperf-tgen-{tag}.sock"
        self.socket_path = sock
        self.log_path = self.run_dir / f"tgen-{tag}.log"      # stderr (logs, DPDK messages)
        self.out_path = self.run_dir / f"tgen-{tag}.out"      # stdout (the ready line)
        self.ready: dict[str, Any] = {}
        self.tracker = tracker
        self.process: Optional[Process] = None
        self._sock: Optional[socket.socket] = None
        self._rbuf = b""
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self.info: dict[str, Any] = {}

    # -- command line -----------------------------------------------------------------------
    def eal_args(self) -> list[str]:
        args = ["--lcores", self.lcores, "--file-prefix", self.file_prefix,
                "--log-level", "lib.eal:warning"]
        if self.hugepages:
            args.append("--in-memory")
        else:
            args += ["--no-huge", "-m", str(self.mem_mb)]
        args += no_pci_option(p.is_pci for p in self.ports)
        for p in self.ports:
            args += p.eal_args()
        return args + self.extra_eal

    def app_args(self) -> list[str]:
        args = ["--socket", str(self.socket_path)]
        for i, p in enumerate(self.ports):
            kv = [f"rxq={p.rx_queues}", f"txq={p.tx_queues}", f"rxd={p.rxd}", f"txd={p.txd}",
                  f"mtu={p.mtu}", f"promisc={1 if p.promisc else 0}"]
            if p.speed_bps:
                kv.insert(0, f"speed={int(p.speed_bps)}")
            if p.rx is not None:
                kv.append(f"rx={1 if p.rx else 0}")
            if p.prefetch is not None:
                kv.append(f"prefetch={1 if p.prefetch else 0}")
            if p.mac:
                kv.append(f"mac={p.mac}")
            args += ["--port", f"{i}:" + ",".join(kv)]
        if self.tsc_hz is not None:
            args += ["--tsc-hz", self.tsc_hz]
        return args

    def base_argv(self) -> list[str]:
        """tgen's own command line (without the namespace prefix)."""
        binary = self.binary or find_tgen_binary()
        return [str(binary)] + self.eal_args() + ["--"] + self.app_args() + self.extra_args

    def argv(self) -> list[str]:
        """The command line started (``ip netns exec <ns>`` first when ``netns`` is set)."""
        return self.host.wrap(self.base_argv(), self.netns)

    @property
    def proc(self) -> Optional[Popened]:
        """The running tgen's Popen (pid, poll(), returncode), None before start()."""
        return self.process.proc if self.process is not None else None

    # -- life cycle -------------------------------------------------------------------------
    #: DPDK 22.11's af_packet PMD derives its PACKET_FANOUT group id from the pid and the
    #: interface index; another process's group with the same id makes the socket option fail
    #: with EINVAL and the port does not probe.  A new process gets a new pid, so start again.
    FANOUT_RETRIES = 2

    def start(self) -> "TgenProcess":
        for attempt in range(self.FANOUT_RETRIES + 1):
            try:
                return self._start()
            except MeasurerError as e:
                if "could not set PACKET_FANOUT" not in str(e) or attempt == self.FANOUT_RETRIES:
                    raise
                log.warning("tgen: af_packet PACKET_FANOUT group clash at start, starting again")
                self.process = None          # _start() already stopped and cleaned up that one
        raise AssertionError("unreachable")

    def _start(self) -> "TgenProcess":
        if self.process is not None:
            return self
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self.remote:
            self.host.mkdir(self.socket_path.parent)
        self.host.remove(self.socket_path)
        self.process = Process("tgen", self.base_argv(), None, self.tracker, netns=self.netns,
                               host=self.host, log_path=self.log_path, stdout_path=self.out_path,
                               append=False, tag=self.tag, died=MeasurerError)
        self.argv_used = self.process.cmd
        try:
            self.process.start()
        except ProcessError as e:
            self.process = None
            raise MeasurerError(str(e)) from None
        try:
            self._wait_ready(self.START_TIMEOUT_S)
            self._connect(10.0)
            self.info = {"ping": self.rpc("ping"), "ports": self.rpc("ports.list")}
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        """Wait for tgen's one ready line on stdout: {"ready": true, "socket": ..., ...}."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                text = self.out_path.read_text(errors="replace")
            except OSError:
                text = ""
            for line in text.splitlines():
                line = line.strip()
                if line.startswith("{"):
                    try:
                        msg = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(msg, dict) and msg.get("ready"):
                        self.ready = msg
                        if msg.get("socket"):
                            self.socket_path = Path(msg["socket"])
                        return
            self.check_alive()
            time.sleep(0.05)
        raise MeasurerError(f"tgen printed no ready line within {timeout_s:.0f} s; log tail:\n"
                            f"{self.log_tail()}")

    def _connect(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        last: Optional[Exception] = None
        while time.monotonic() < deadline:
            self.check_alive()
            if self.host.exists(self.socket_path):
                try:
                    self._sock = self.host.connect_unix(self.socket_path)
                    self._rbuf = b""
                    return
                except OSError as e:
                    last = e
            time.sleep(0.05)
        raise MeasurerError(f"tgen did not open {self.socket_path} within {timeout_s:.0f} s "
                            f"({last}); log tail:\n{self.log_tail()}")

    def alive(self) -> bool:
        return self.process is not None and self.process.running()

    def check_alive(self) -> None:
        if self.process is None:
            raise MeasurerError("tgen is not started")
        rc = self.process.returncode()
        if rc is not None:
            how = self.process.describe_exit()
            how = how if how.startswith("unreachable") else f"exited with status {rc}"
            raise MeasurerError(f"tgen {how}; log tail:\n{self.log_tail()}")

    def log_tail(self, nbytes: int = 3000) -> str:
        if self.process is not None:
            return self.process.log_tail(nbytes=nbytes)
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - nbytes))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout_s: float = 10.0) -> Optional[int]:
        """Ask tgen to shut down, then SIGTERM, then SIGKILL.  Returns the exit status."""
        rc = None
        if self.process is not None:
            if self.process.running() and self._sock is not None:
                try:
                    self.rpc("shutdown", _timeout=2.0)
                except (MeasurerError, OSError):
                    pass
            # asked to shut down: timeout_s for that, then SIGTERM (3 s), then SIGKILL
            rc = self.process.stop(timeout=3.0, grace=timeout_s)
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
            self._sock = None
        try:
            self.host.remove(self.socket_path)
            self.host.rmtree(f"/var/run/dpdk/{self.file_prefix}")
        except Exception as e:  # noqa: BLE001 - the host may be gone; cleanup by tag remains
            log.warning("tgen: cannot remove its files on %s: %s", self.host.name, e)
        return rc

    def __enter__(self) -> "TgenProcess":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- JSON-RPC ---------------------------------------------------------------------------
    def rpc(self, method: str, _timeout: Optional[float] = None, **params: Any) -> Any:
        """Call ``method`` with named ``params``; return its ``result`` or raise TgenError."""
        return self.call(method, params, timeout_s=_timeout)

    def call(self, method: str, params: Any = None, timeout_s: Optional[float] = None) -> Any:
        req: dict[str, Any] = {"jsonrpc": "2.0", "id": next(self._ids), "method": method}
        if params is not None and params != {}:
            req["params"] = params
        resp = self.raw(json.dumps(req, separators=(",", ":")).encode() + b"\n", req["id"],
                        timeout_s)
        if "error" in resp and resp["error"] is not None:
            err = resp["error"]
            if isinstance(err, dict):
                raise TgenError(f"tgen {method}: {err.get('message', err)}", err.get("code"),
                                err.get("data"), method)
            raise TgenError(f"tgen {method}: {err}", None, None, method)
        if "result" not in resp:
            raise MeasurerError(f"tgen {method}: malformed response {resp!r}")
        return resp["result"]

    def raw(self, data: bytes, want_id: Any = None, timeout_s: Optional[float] = None
            ) -> dict[str, Any]:
        """Send raw bytes, return the next response (the one with ``want_id`` if given)."""
        timeout_s = self.RPC_TIMEOUT_S if timeout_s is None else timeout_s
        with self._lock:
            self.check_alive()
            if self._sock is None:
                raise MeasurerError("tgen: not connected")
            try:
                self._sock.sendall(data)
            except OSError as e:
                self._died_or(f"tgen: send failed: {e}")
            deadline = time.monotonic() + timeout_s
            while True:
                while b"\n" not in self._rbuf:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        self._died_or(f"tgen: no answer within {timeout_s} s")
                    self._sock.settimeout(min(left, 0.5))
                    try:
                        chunk = self._sock.recv(1 << 20)
                    except socket.timeout:
                        self.check_alive()
                        continue
                    except OSError as e:
                        self._died_or(f"tgen: receive failed: {e}")
                    if not chunk:
                        self._died_or("tgen closed the control connection")
                    self._rbuf += chunk
                line, _, self._rbuf = self._rbuf.partition(b"\n")
                if not line.strip():
                    continue
                try:
                    msg = json.loads(line)
                except ValueError:
                    raise MeasurerError(f"tgen sent invalid JSON: {line[:200]!r}") from None
                if not isinstance(msg, dict):
                    raise MeasurerError(f"tgen sent a non-object: {line[:200]!r}")
                if want_id is None or msg.get("id") == want_id:
                    return msg
                if "id" not in msg:
                    continue        # a notification
                # a stale answer to an earlier, timed-out request: skip it

    def _died_or(self, msg: str) -> None:
        if self.process is not None:
            self.process.wait(0.5)
        self.check_alive()
        raise MeasurerError(msg)


# ---------------------------------------------------------------------------------------------
# The measurer
# ---------------------------------------------------------------------------------------------

def _lcore_cpus(lcores: str) -> dict[int, set[int]]:
    """Parse an EAL --lcores string ("0@0,1@0", "0-3", "(0,1)@(0,1)", "1@(2-3)") into
    {lcore: {cpus}}.  Unknown shapes map an lcore to itself."""
    def rng(txt: str) -> list[int]:
        out: list[int] = []
        for part in txt.strip("()").split(","):
            part = part.strip()
            if not part:
                continue
            if "-" in part:
                a, b = part.split("-", 1)
                out += list(range(int(a), int(b) + 1))
            else:
                out.append(int(part))
        return out

    res: dict[int, set[int]] = {}
    for item in re.findall(r"\([^)]*\)(?:@\([^)]*\)|@\d+(?:-\d+)?)?|[^,]+", lcores):
        item = item.strip().strip(",")
        if not item:
            continue
        if "@" in item:
            ls, cs = item.split("@", 1)
            cpus = set(rng(cs))
            for lc in rng(ls):
                res[lc] = cpus
        else:
            for lc in rng(item):
                res[lc] = {lc}
    return res


def _latency_from_wire(d: Optional[dict[str, Any]]) -> Optional[LatencySummary]:
    if not d:
        return None
    count = int(d.get("count") or 0)
    if count <= 0:
        return LatencySummary(count=0)
    hist = [(float(b), int(c)) for b, c in (d.get("histogram") or [])]
    pct = {str(k): float(v) for k, v in (d.get("percentiles_ns") or {}).items() if v is not None}
    return LatencySummary(
        count=count, min_ns=float(d.get("min_ns") or 0.0), avg_ns=float(d.get("avg_ns") or 0.0),
        max_ns=float(d.get("max_ns") or 0.0), percentiles_ns=pct, histogram=hist,
        pdv_ns={k: float(v) for k, v in (d.get("pdv_ns") or {}).items() if v is not None},
        ipdv_ns={k: float(v) for k, v in (d.get("ipdv_ns") or {}).items() if v is not None},
        definition=TgenMeasurer.LATENCY_DEFINITION)


def _opt_float(v: Any) -> Optional[float]:
    return None if v is None else float(v)


#: drivers whose TX ring is the DUT's RX ring (virtio-user on vhost-user, memif): a full ring
#: holds the generator back instead of dropping frames, so the frames the DUT did not take at the
#: offered rate are its loss, not a generator shortfall (``TgenMeasurer._convert``)
BACKPRESSURE_DRIVERS = frozenset({"net_virtio_user", "net_memif", "net_vhost"})


class TgenMeasurer(Measurer):
    """The Measurer on a running :class:`TgenProcess`.

    ``pairs`` are (tx_port, rx_port) directions.  With a bidirectional profile the directions
    are ``pairs`` followed by each pair reversed; ``stream_params[i]`` (if given) is merged into
    the ``stream.add`` object of direction ``i`` in that order (MACs, IPs, ``vxlan`` endpoints,
    ``vary``...), so a topology can supply what its DUT needs.

    ``rx_groups``: receive groups of generator ports (e.g. ``[[0, 2], [1, 3]]``: the members of
    two OVS bonds): a direction whose rx port is in a group is received on every port of the
    group (tgen's ``rx_ports``, PROTOCOL.md §4), so a frame the DUT sends out of another member
    is the stream's, not misrouted.  Groups must not overlap.
    """

    name = "tgen"
    rate_limited = True
    warmup_default = True
    LATENCY_DEFINITION = ("tgen: tx timestamp (TSC, written as the frame is queued for TX) to rx "
                          "poll time on the generator clock; includes both generator ports' "
                          "queueing; RFC 1242 store-and-forward approximation")
    #: trial.status polls (and DUT checks) while a trial runs
    POLL_S = 0.2
    #: polls once the trial's schedule (learning wait, traffic, drain) should be over: at POLL_S
    #: every trial would end up to 0.2 s late (0.1 s on average, on every trial of a search)
    END_POLL_S = 0.02

    def __init__(self, proc: TgenProcess, pairs: list[tuple[int, int]],
                 dut_counters: Optional[Callable[[], dict]] = None,
                 dut_alive: Optional[Callable[[], None]] = None,
                 stream_params: Optional[list[dict]] = None,
                 learning_wait_s: Optional[float] = None, learning_frames: int = 3,
                 rx_groups: Optional[Sequence[Sequence[int]]] = None,
                 topology_environment: Optional[Callable[[], dict]] = None,
                 dut_telemetry: Optional[Callable[[], dict]] = None,
                 cores: int = 1):
        if not pairs:
            raise ValueError("TgenMeasurer needs at least one (tx_port, rx_port) pair")
        self.proc = proc
        # the topology's own record (DUT, versions, pinning), kept under "topology" in environment()
        self.topology_environment = topology_environment
        self.pairs = [(int(a), int(b)) for a, b in pairs]
        self.rx_groups = [[int(p) for p in g] for g in (rx_groups or [])]
        seen: dict[int, int] = {}
        for i, g in enumerate(self.rx_groups):
            if len(set(g)) != len(g) or not g:
                raise ValueError(f"rx_groups[{i}]: {g} must list distinct ports")
            for p in g:
                if p in seen:
                    raise ValueError(f"rx_groups: port {p} is in groups {seen[p]} and {i}; a port "
                                     f"belongs to one receive group")
                seen[p] = i
        self.dut_counters = dut_counters
        self.dut_alive = dut_alive
        #: the DUT's telemetry, read before and after every trial (outside its measured interval);
        #: None: the trials store the generator's side only (``telemetry_enabled`` off)
        self.dut_telemetry = TelemetryProbe(dut_telemetry) if dut_telemetry is not None else None
        self.telemetry_enabled = True
        self.stream_params = stream_params
        self.learning_wait_s = learning_wait_s
        self.learning_frames = learning_frames
        if int(cores) < 1:
            raise ValueError(f"cores: {cores} must be >= 1 (generator cores per direction)")
        #: generator cores (TX queues / worker lcores) each direction is split over (tgen_split)
        self.cores = int(cores)
        self.profile: Optional[TrafficProfile] = None
        self.stream_ids: list[int] = []
        self.directions: list[tuple[int, int]] = []
        #: sub-streams per direction (1: no split), each direction's positions in stream_ids, and
        #: what the split used (notes, each direction's TX/RX lcores): set_profile
        self.split_n = 1
        self.split_groups: list[list[int]] = []
        self.split_info: dict[str, Any] = {}
        self.last_raw: Optional[dict[str, Any]] = None
        self._dut_before: Optional[dict[str, Any]] = None
        self._dut_before_error: Optional[str] = None

    def _backpressure_ports(self) -> set[int]:
        """Indices of the generator ports whose driver is in :data:`BACKPRESSURE_DRIVERS`."""
        return {i for i, p in enumerate(getattr(self.proc, "ports", None) or [])
                if getattr(p, "driver", None) in BACKPRESSURE_DRIVERS}

    # -- streams ----------------------------------------------------------------------------
    def directions_for(self, profile: TrafficProfile) -> list[tuple[int, int]]:
        dirs = list(self.pairs)
        if profile.bidirectional:
            dirs += [(b, a) for a, b in self.pairs]
        return dirs

    def rx_group(self, rx: int) -> Optional[list[int]]:
        """The receive group port ``rx`` is in (its first member first: ``rx`` itself), or None."""
        for g in self.rx_groups:
            if rx in g and len(g) > 1:
                return [rx] + [p for p in g if p != rx]
        return None

    def stream_object(self, profile: TrafficProfile, index: int, tx: int, rx: int) -> dict:
        s: dict[str, Any] = {"port": tx, "rx_port": rx, "name": f"p{tx}->p{rx}",
                             "flows": int(profile.flows_per_port), "rate": {"pps": 1}}
        group = self.rx_group(rx)
        if group is not None:
            s["rx_ports"] = group
            s["name"] = f"p{tx}->p{'+'.join(str(p) for p in group)}"
        if profile.imix:
            s["imix"] = [[int(sz), int(w)] for sz, w in profile.imix]
        else:
            s["size_b"] = int(profile.frame_size_b)
        if profile.vlan is not None:
            s["vlan"] = int(profile.vlan)
        if profile.ip_version == 6:
            s["ipv6"] = True
        elif profile.ip_version != 4:
            raise ValueError(f"ip_version must be 4 or 6, not {profile.ip_version}")
        if profile.vxlan:
            s["vxlan"] = {}
        if index >= len(self.pairs):
            # a reverse direction: swap tgen's default addresses so replies look like replies
            # (RFC 2544 198.18.0.0/15; VXLAN outer 10.0.0.1/2)
            if profile.ip_version == 6:
                s.update(src_ip="2001:2:0:1::1", dst_ip="2001:2::1")
            else:
                s.update(src_ip="198.19.0.1", dst_ip="198.18.0.1")
            if profile.vxlan:
                s["vxlan"].update(outer_src_ip="10.0.0.2", outer_dst_ip="10.0.0.1")
        extra = (self.stream_params[index] if self.stream_params and index < len(self.stream_params)
                 else None) or {}
        for k, v in extra.items():
            if k == "vxlan" and isinstance(v, dict):
                if profile.vxlan:
                    s["vxlan"] = {**s.get("vxlan", {}), **v}
            else:
                s[k] = v
        return s

    def set_profile(self, profile: TrafficProfile) -> None:
        self.proc.rpc("stream.remove", all=True)
        self.stream_ids = []
        self.split_groups = []
        self.directions = self.directions_for(profile)
        self.profile = profile
        objs = [self.stream_object(profile, i, tx, rx) for i, (tx, rx) in enumerate(self.directions)]
        # every direction is split the same way (tgen's trial-level rate is per stream)
        flows = min(int(o.get("flows", 1)) for o in objs)
        self.split_n = len(flow_slices(flows, self.cores))
        try:
            for o in objs:
                group = []
                for sub in (split_stream(o, self.split_n) if self.split_n > 1 else [o]):
                    r = self.proc.call("stream.add", sub)
                    group.append(len(self.stream_ids))
                    self.stream_ids.append(int(r["stream_id"]))
                self.split_groups.append(group)
            self.split_info = self._split_record(objs, flows)
        except BaseException:
            self.profile = None
            raise

    @staticmethod
    def split_base_name(name: str) -> str:
        """A direction's name from a sub-stream's (``p0->p1#1`` -> ``p0->p1``)."""
        return re.sub(r"#\d+$", "", name)

    def _split_record(self, objs: list[dict], flows: int) -> dict[str, Any]:
        """Which lcores each direction uses (tgen's stream.list txq and ports.list tx_lcores /
        rx_lcores) and what the split could not do, for the result (``extra["tgen_cores"]``)."""
        notes: list[str] = []
        if self.cores > 1 and self.split_n < self.cores:
            notes.append(f"{flows} flow(s) per direction cannot be split over {self.cores} "
                         f"generator cores: each direction uses {self.split_n} core(s) "
                         "(give more flows to use them all)")
        try:
            txq = {int(s["id"]): int(s.get("txq", 0)) for s in self.proc.rpc("stream.list")}
            ports = {int(p["id"]): p for p in self.proc.rpc("ports.list")}
        except (MeasurerError, KeyError, TypeError, ValueError):
            return {"cores": self.cores, "sub_streams": self.split_n, "notes": notes}
        lc = _lcore_cpus(getattr(self.proc, "lcores", "") or "")
        dirs: dict[str, Any] = {}
        for o, group, (tx, rx) in zip(objs, self.split_groups, self.directions):
            tx_l = ports.get(tx, {}).get("tx_lcores") or []
            queues = [txq.get(self.stream_ids[j], 0) for j in group]
            lcores = [int(tx_l[q]) for q in queues if q < len(tx_l)]
            if len(set(queues)) < len(queues):
                notes.append(f"{o.get('name')}: port {tx} has {ports.get(tx, {}).get('txq')} TX "
                             f"queue(s) for {len(queues)} sub-streams: some share a queue and core")
            rx_l = sorted({int(x) for x in ports.get(rx, {}).get("rx_lcores") or []})
            dirs[str(o.get("name"))] = {
                "sub_streams": len(group), "tx_queues": queues, "tx_lcores": lcores,
                "tx_cpus": sorted({c for x in lcores for c in lc.get(x, ())}),
                "rx_lcores": rx_l, "rx_cpus": sorted({c for x in rx_l for c in lc.get(x, ())})}
        return {"cores": self.cores, "sub_streams": self.split_n, "directions": dirs,
                "notes": notes}

    # -- trials -----------------------------------------------------------------------------
    def _need_profile(self) -> TrafficProfile:
        if self.profile is None or not self.stream_ids:
            raise MeasurerError("TgenMeasurer: set_profile() first")
        return self.profile

    def _trial_base(self, profile: TrafficProfile, drain_s: Optional[float] = None) -> dict:
        t: dict[str, Any] = {"streams": list(self.stream_ids),
                             "drain_s": float(profile.drain_s if drain_s is None else drain_s),
                             "latency": bool(profile.latency)}
        if profile.learning:
            # the wait after the learning frames: the profile's (RFC 2544 §23; quick: 0.1 s)
            # unless the measurer was given its own
            wait = profile.learning_s if self.learning_wait_s is None else self.learning_wait_s
            t.update(learning=True, learning_frames=int(self.learning_frames),
                     learning_wait_s=float(wait))
        return t

    def _check_dut(self) -> None:
        if self.dut_alive is not None:
            self.dut_alive()

    def _run(self, trial: dict, expect_s: float, on_running: Optional[Callable[[float], None]] = None,
             dut_checks: Optional[Callable[[], bool]] = None) -> dict:
        """Start a trial, poll it to the end (checking the DUT every poll), return trial.result."""
        self._check_dut()
        self._snapshot_dut()
        try:
            self.proc.call("trial.start", trial)
        except TgenError as e:
            if e.code != -32000:        # not "wrong state": a real error in the request
                raise
            self._abort()               # a previous trial is still winding down
            self.proc.call("trial.start", trial)
        learn_s = float(trial.get("learning_wait_s", 2.0)) if trial.get("learning") else 0.0
        # tgen's watchdog ends a trial at the latest max(5 s, its length) after the schedule
        budget = expect_s * 2.2 + float(trial.get("drain_s", 2.0)) + learn_s + 20.0
        started = time.monotonic()
        deadline = started + budget
        ends_at = started + learn_s + expect_s + float(trial.get("drain_s", 2.0))
        next_dut_check = started        # the DUT is checked every POLL_S, not every poll
        try:
            while True:
                st = self.proc.rpc("trial.status")
                state = st.get("state")
                if state == "done":
                    break
                if state == "idle":
                    raise MeasurerError("tgen: trial went idle without finishing")
                if on_running is not None and state in ("running", "draining"):
                    # elapsed_s counts from trial.start, learning included
                    on_running(max(0.0, float(st.get("elapsed_s") or 0.0) - learn_s))
                now = time.monotonic()
                if (dut_checks is None or dut_checks()) and now >= next_dut_check:
                    self._check_dut()
                    next_dut_check = now + self.POLL_S
                if now > deadline:
                    raise MeasurerError(f"tgen: trial not done after {budget:.1f} s "
                                        f"(state {state}, {st})")
                time.sleep(self._poll_gap(ends_at - now))
        except BaseException:
            self._abort()
            raise
        res = self.proc.rpc("trial.result")
        self.last_raw = res
        return res

    def _poll_gap(self, left_s: float) -> float:
        """The wait before the next trial.status, ``left_s`` before the trial's scheduled end:
        POLL_S while more is left, then up to that end, then END_POLL_S until tgen says done."""
        if left_s >= self.POLL_S:
            return self.POLL_S
        return max(self.END_POLL_S, left_s)

    def _snapshot_dut(self) -> None:
        """Read the DUT's counters before the trial starts (before its learning frames), so
        the trial stores its own deltas: DUT counters are cumulative (OVS PMD statistics since
        the topology came up, port counters since start)."""
        self._dut_before, self._dut_before_error = None, None
        if self.dut_telemetry is not None and self.telemetry_enabled:
            self.dut_telemetry.before()
        if self.dut_counters is None:
            return
        try:
            self._dut_before = dict(self.dut_counters() or {})
        except DutFailure:
            raise
        except Exception as e:  # noqa: BLE001 - the trial then stores cumulative counters
            self._dut_before_error = f"{type(e).__name__}: {e}"

    def _dut_trial_counters(self) -> dict[str, Any]:
        """The DUT's counters for the trial that just ended: read after the generator reported
        ``done`` (traffic stopped and the drain over), minus the reading before the trial
        (:func:`nfvperf.trial.counter_deltas`).  ``scope`` says which it is."""
        if self.dut_counters is None:
            return {}
        try:
            after = dict(self.dut_counters() or {})
        except DutFailure:
            raise
        except Exception as e:   # a counter read failure must not lose the trial
            return {"error": f"{type(e).__name__}: {e}"}
        if self._dut_before is None:
            after["scope"] = "cumulative"
            if self._dut_before_error:
                after["scope_error"] = f"reading before the trial failed: {self._dut_before_error}"
            return after
        out = counter_deltas(self._dut_before, after)
        out["scope"] = "trial"
        return out

    def _abort(self) -> None:
        """Stop a running trial after a failure, so the next one can start."""
        if not self.proc.alive():
            return
        try:
            self.proc.rpc("trial.stop", _timeout=5.0)
            end = time.monotonic() + 10.0
            while time.monotonic() < end:
                if self.proc.rpc("trial.status", _timeout=5.0).get("state") in ("done", "idle"):
                    break
                time.sleep(0.1)
        except MeasurerError:
            pass

    def _convert(self, raw: dict, duration_s: float, load_pps: float,
                 expected_per_stream: list[int]) -> TrialResult:
        streams: list[StreamResult] = []
        by_id = {int(s["id"]): s for s in raw.get("streams") or []}
        reasons: list[str] = []
        pushed_back: list[str] = []
        expected = 0
        # frames the workers handed a port that the port did not count out were not sent
        # (PROTOCOL.md §6 ports[].tx): taken off the streams' `sent`, so they are neither offered
        # load nor the DUT's loss
        not_sent, tx_notes = split_not_sent(raw)
        for sid, exp in zip(self.stream_ids, expected_per_stream):
            s = by_id.get(sid)
            if s is None:
                raise MeasurerError(f"tgen: trial.result has no stream {sid}")
            cut = not_sent.get(sid, 0)
            if cut:
                s = dict(s, sent=int(s.get("sent") or 0) - cut)
                s["lost"] = max(0, int(s["sent"]) - int(s.get("received") or 0))
            sr = StreamResult(
                name=str(s.get("name") or f"stream{sid}"), tx_port=int(s.get("tx_port", 0)),
                rx_port=int(s.get("rx_port", 0)), intended_pps=float(s.get("intended_pps") or 0.0),
                achieved_pps=float(s.get("achieved_pps") or 0.0), sent=int(s.get("sent") or 0),
                received=int(s.get("received") or 0), lost=int(s.get("lost") or 0),
                duplicates=int(s.get("duplicates") or 0), reordered=int(s.get("reordered") or 0),
                reorder_extent_max=int(s.get("reorder_extent_max") or 0),
                seq_gaps=int(s.get("seq_gaps") or 0), latency=_latency_from_wire(s.get("latency")),
                first_loss_ns=_opt_float(s.get("first_loss_ns")),
                last_loss_ns=_opt_float(s.get("last_loss_ns")),
                max_rx_gap_ns=_opt_float(s.get("max_rx_gap_ns")),
                misrouted=int(s.get("misrouted") or 0),
                rx_ports=[int(p) for p in s.get("rx_ports") or []] if len(s.get("rx_ports") or []) > 1 else [],
                rx_by_port={str(k): int(v) for k, v in (s.get("rx_by_port") or {}).items()}
                if len(s.get("rx_ports") or []) > 1 else {})
            streams.append(sr)
            # The frames the generator's schedule asked for (PROTOCOL.md §6: ceil(duration x
            # rate) per timed segment) are what was offered; it differs from round(load x
            # duration) by at most one frame per segment, and using the smaller number could
            # hide a lost frame.
            if s.get("intended_frames") is not None:
                exp = int(s["intended_frames"])
            expected += exp
            short = sent_short_reason(sr.sent, exp, sr.name)
            retries = int(s.get("tx_retries") or 0)
            if short and cut:
                short += (f" (the generator's port {sr.tx_port} dropped {cut:,} of this stream's "
                          "frames at TX)")
            elif short and retries > 0 and sr.tx_port in self._backpressure_ports():
                pushed_back.append(f"{sr.name}: took {sr.sent:,} of {exp:,} frames (TX ring full "
                                   f"{retries:,} times)")
                short = None
            reasons += [r for r in (short, negative_loss_reason(sr.received, sr.sent, "sent", sr.name))
                        if r]
            if sr.duplicates > 0:
                reasons.append(f"{sr.name}: {sr.duplicates} duplicate frames")
        # tgen counts a stream's frames that arrive on another port than its rx_port as
        # `misrouted`, not received (PROTOCOL.md §6): they are loss, and the trial stays valid;
        # the notes say so, for the report.
        notes: list[str] = list(tx_notes)
        misrouted = sum(sr.misrouted for sr in streams)
        if misrouted:
            per = ", ".join(f"{sr.name}: {sr.misrouted}" for sr in streams if sr.misrouted)
            notes.append(f"{misrouted} frames misrouted (arrived on a port outside the stream's "
                         f"rx port; counted as lost): {per}")
        if any("misrouted" not in s for s in raw.get("streams") or []):
            # a tgen older than the `misrouted` field counted a frame on whatever port it
            # arrived: a port cannot have received fewer frames than the streams expecting it
            # say they received.
            port_rx = {int(p["id"]): p.get("stats", {}).get("ipackets")
                       for p in raw.get("ports") or [] if "id" in p}
            for rxp in sorted({sr.rx_port for sr in streams}):
                got = port_rx.get(rxp)
                want = sum(sr.received for sr in streams if sr.rx_port == rxp)
                if got is not None and want > int(got):
                    reasons.append(f"streams to port {rxp} received {want} test frames but the "
                                   f"port received only {int(got)} frames: frames arrived on "
                                   "another port")
        if pushed_back:
            notes.append("backpressure: the DUT's ring was full and held the generator back; the "
                         "frames it did not take at the offered load count as lost: " + "; ".join(pushed_back))
        if self.split_n > 1 and len(self.split_groups) * self.split_n == len(streams):
            # one result per direction from its sub-streams (tgen_split: sums, histogram merged)
            streams = [merge_streams(self.split_base_name(streams[g[0]].name),
                                     [streams[j] for j in g]) for g in self.split_groups]
        if self.split_info.get("notes"):
            notes += [f"tgen_cores: {n}" for n in self.split_info["notes"]]
        eff = float(raw.get("effective_duration_s") or 0.0)
        if stretched(eff, duration_s) and not pushed_back:
            # (held back by the DUT, the generator stops at its time limit: that is the DUT's loss)
            reasons.append(f"effective duration {eff:.6f} s > 110 % of intended {duration_s:g} s")
        stopped_by = raw.get("stopped_by")
        if stopped_by:
            reasons.append(f"traffic stopped early by {stopped_by}")
        late_rx = int(raw.get("late_rx") or 0)
        if late_rx > 0:
            reasons.append(f"{late_rx} test frames arrived after the drain (counters not settled)")
        ports = raw.get("ports") or []
        tg_counters = {f"port{p.get('id')}": {"stats": p.get("stats", {}),
                                               "xstats": p.get("xstats", {})} for p in ports}
        dut = self._dut_trial_counters()
        lat = merge_latency(s.latency for s in streams) if (self.profile and self.profile.latency) \
            else None
        res = TrialResult(
            duration_s=float(duration_s), load_pps=float(load_pps),
            sent=sum(s.sent for s in streams), received=sum(s.received for s in streams),
            expected=expected, effective_duration_s=eff, streams=streams, latency=lat,
            valid=not reasons, invalid_reasons=reasons, tg_counters=tg_counters,
            dut_counters=dut, non_test_rx=int(raw.get("non_test_rx") or 0),
            pacer_late_max_ns=float(raw.get("pacer_late_max_ns") or 0.0),
            extra={"late_rx": late_rx, "stopped_by": stopped_by,
                   "foreign_test_rx": int(raw.get("foreign_test_rx") or 0),
                   "tx_retries": sum(int(s.get("tx_retries") or 0) for s in raw.get("streams") or []),
                   "tx_nombuf": sum(int(s.get("tx_nombuf") or 0) for s in raw.get("streams") or []),
                   "tsc_hz": raw.get("tsc_hz"), "tsc_hz_dpdk": raw.get("tsc_hz_dpdk"),
                   "tx_not_sent": sum(not_sent.values()),
                   "misrouted": misrouted, "notes": notes, "tgen_cores": self.split_info or None,
                   "backpressure": bool(pushed_back)})
        res.telemetry = self._trial_telemetry(raw, res, sum(not_sent.values()))
        return res

    def _trial_telemetry(self, raw: dict, res: TrialResult, not_sent_at_tx: int) -> dict[str, Any]:
        """The trial's telemetry (``nfvperf.tg.telemetry``): the DUT's difference of the readings
        before and after it, the generator's own counts, and the loss account."""
        dut = (self.dut_telemetry.after() if self.dut_telemetry is not None and self.telemetry_enabled
               else {"available": NA})
        held = bool(res.extra.get("backpressure"))
        tel: dict[str, Any] = {"dut": dut, "generator": generator_telemetry(raw, res.sent, res.expected,
                                                                            not_sent_at_tx, held_back=held)}
        tel["loss"] = loss_account({"expected": res.expected, "sent": res.sent, "received": res.received,
                                    "telemetry": tel, "extra": {"misrouted": res.extra.get("misrouted"),
                                                                "backpressure": held}})
        return tel

    def measure(self, duration_s: float, load_pps: float) -> TrialResult:
        profile = self._need_profile()
        if duration_s <= 0 or load_pps <= 0:
            raise ValueError("measure() needs duration_s > 0 and load_pps > 0")
        trial = self._trial_base(profile)
        n = self.split_n        # a split direction: each sub-stream 1/n of the rate (tgen_split)
        trial.update(duration_s=float(duration_s), pps=float(load_pps) / n)
        raw = self._run(trial, duration_s)
        exp = [int(round(load_pps / n * duration_s))] * len(self.stream_ids)
        return self._convert(raw, duration_s, load_pps, exp)

    def measure_frames(self, frames: int, load_pps: float) -> TrialResult:
        """A constant-load trial of exactly ``frames`` frames per stream."""
        profile = self._need_profile()
        trial = self._trial_base(profile)
        n = self.split_n
        trial.update(frames=split_frames(frames, n), pps=float(load_pps) / n)
        dur = frames / load_pps
        raw = self._run(trial, dur)
        return self._convert(raw, dur, load_pps, [split_frames(frames, n)] * len(self.stream_ids))

    def measure_segments(self, segments: list[Segment]) -> TrialResult:
        profile = self._need_profile()
        if not segments:
            raise ValueError("measure_segments() needs at least one segment")
        trial = self._trial_base(profile)
        n = self.split_n
        trial["segments"] = [{"duration_s": float(s.duration_s), "pps": float(s.load_pps) / n}
                             for s in segments]
        total = sum(s.duration_s for s in segments)
        frames = sum(int(round(s.load_pps / n * s.duration_s)) for s in segments)
        raw = self._run(trial, total)
        res = self._convert(raw, total, frames * n / total if total else 0.0,
                            [frames] * len(self.stream_ids))
        res.extra["segments"] = [{"duration_s": s.duration_s, "load_pps": s.load_pps}
                                 for s in segments]
        return res

    def measure_burst(self, burst_frames: int, burst_pps: float, drain_s: float = 2.0
                      ) -> TrialResult:
        profile = self._need_profile()
        trial = self._trial_base(profile, drain_s=drain_s)
        n = self.split_n
        trial.update(mode="burst", burst_frames=split_frames(burst_frames, n), bursts=1,
                     pps=float(burst_pps) / n)
        dur = burst_frames / burst_pps
        raw = self._run(trial, dur)
        res = self._convert(raw, dur, burst_pps,
                            [split_frames(burst_frames, n)] * len(self.stream_ids))
        res.extra["burst_frames"] = int(burst_frames)
        return res

    def measure_reset(self, duration_s: float, load_pps: float, reset_at_s: float) -> TrialResult:
        profile = self._need_profile()
        if self.reset_hook is None:
            raise Unsupported("tgen measure_reset needs a reset_hook (set by the runner)")
        if not 0 <= reset_at_s < duration_s:
            raise ValueError("reset_at_s must be inside the trial")
        hook = self.reset_hook
        state: dict[str, Any] = {"timer": None, "done": False, "error": None, "t": None}

        def fire() -> None:
            state["t"] = time.monotonic()
            try:
                hook()
            except BaseException as e:   # reported after the trial
                state["error"] = e
            finally:
                state["done"] = True

        def on_running(elapsed: float) -> None:
            if state["timer"] is None:
                t = threading.Timer(max(0.0, reset_at_s - elapsed), fire)
                t.daemon = True
                state["timer"] = t
                t.start()

        def dut_checks() -> bool:
            # the DUT is expected to be down while it resets: check it only before and after
            return state["timer"] is None or state["done"]

        trial = self._trial_base(profile)
        n = self.split_n
        trial.update(duration_s=float(duration_s), pps=float(load_pps) / n)
        try:
            raw = self._run(trial, duration_s, on_running=on_running, dut_checks=dut_checks)
        finally:
            if state["timer"] is not None:
                state["timer"].join(60)
        if state["error"] is not None:
            raise MeasurerError(f"reset hook failed: {state['error']}") from state["error"]
        if state["timer"] is None:
            raise MeasurerError("tgen: the trial ended before the reset could be triggered")
        res = self._convert(raw, duration_s, load_pps,
                            [int(round(load_pps / n * duration_s))] * len(self.stream_ids))
        res.extra["reset_at_s"] = reset_at_s
        return res

    # -- environment ------------------------------------------------------------------------
    def environment(self) -> dict[str, Any]:
        env = self.generator_environment()
        if self.topology_environment is not None:
            env["topology"] = self.topology_environment()
        return env

    def generator_environment(self) -> dict[str, Any]:
        env: dict[str, Any] = {"measurer": self.name}
        try:
            ping = self.proc.rpc("ping")
            ports = self.proc.rpc("ports.list")
        except MeasurerError as e:
            return {**env, "error": str(e)}
        lc = _lcore_cpus(self.proc.lcores)
        cpus = [c for s in lc.values() for c in s]
        workers = sorted(lc)[1:] if len(lc) > 1 else sorted(lc)
        worker_cpus = [c for w in workers for c in lc[w]]
        env.update({
            "tgen_version": ping.get("version"), "tsc_hz": ping.get("tsc_hz"),
            # DPDK's TSC frequency (rounded to 10 MHz), the calibrated one tgen paces and times
            # with, the correction in ppm and how it was measured
            "tsc_calibration": tsc_calibration_record(ping),
            "binary": str(self.proc.binary or find_tgen_binary()),
            "netns": self.proc.netns,
            "lcores": self.proc.lcores, "lcore_cpus": {str(k): sorted(v) for k, v in lc.items()},
            "ports": [{k: p.get(k) for k in ("id", "name", "driver", "mac", "link_up",
                                            "link_speed_bps", "speed_bps", "rxq", "txq", "mtu",
                                            "tx_lcores", "rx_lcores", "socket", "pool_socket",
                                            "tx_offloads_offered", "tx_offloads_used")}
                      for p in ports],
            "pairs": self.pairs,
            "rx_groups": self.rx_groups,
            # each direction's sub-streams and the lcores/CPUs they ran on (tgen_cores)
            "tgen_cores": self.split_info or None,
            # shared: two lcores on one CPU, or a worker on the control lcore's CPU, or fewer
            # host CPUs than lcores
            "cores_shared": (len(cpus) != len(set(cpus))
                             or len(set(worker_cpus)) < len(worker_cpus)
                             or (os.cpu_count() or 1) < len(lc)),
            "host_cpus": os.cpu_count(),
        })
        return env

    def close(self) -> None:
        if self.proc.alive() and self.stream_ids:
            try:
                self.proc.rpc("stream.remove", all=True, _timeout=5.0)
            except MeasurerError:
                pass
        self.stream_ids = []
