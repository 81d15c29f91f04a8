"""The tgen process (``tgen/``): its EAL and application command line, its life cycle and its
JSON-RPC client (:meth:`TgenProcess.rpc`).  Wire protocol: ``tgen/PROTOCOL.md`` (JSON-RPC 2.0,
one JSON object per line, Unix socket)."""
from __future__ import annotations

import contextlib
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
from typing import Any, Optional, Sequence

from nfvperf.host.base import Popened
from nfvperf.host.cpu import parse_cpulist
from nfvperf.host.hugepages import no_pci_option
from nfvperf.host.proc import LOCAL, Process, ProcessError
from nfvperf.host.run import ResourceTracker
from nfvperf.trial import MeasurerError

log = logging.getLogger(__name__)

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


class TgenError(MeasurerError):
    """tgen answered a request with a JSON-RPC error (``code``, ``message``, ``data``)."""

    def __init__(self, message: str, code: Optional[int] = None, data: Any = None,
                 method: Optional[str] = None):
        super().__init__(message)
        self.code = code
        self.data = data
        self.method = method


def _repo_root() -> Path:
    # src/nfvperf/tg/tgen_proc.py -> repository root
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
        args += ["--in-memory"] if self.hugepages else ["--no-huge", "-m", str(self.mem_mb)]
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

    def spawn(self) -> None:
        """Start the process without waiting for it (:meth:`start` then waits for its ready
        line): a topology spawns tgen before a DPDK DUT whose vhost-user clients connect to tgen's
        sockets, so that they find the first one listening instead of retrying once a second."""
        if self.process is not None:
            return
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

    def _start(self) -> "TgenProcess":
        if self.process is not None and self.ready:
            return self
        self.spawn()
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
                with contextlib.suppress(MeasurerError, OSError):
                    self.rpc("shutdown", _timeout=2.0)
            # asked to shut down: timeout_s for that, then SIGTERM (3 s), then SIGKILL
            rc = self.process.stop(timeout=3.0, grace=timeout_s)
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
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
                # else a notification (no id) or a stale answer to an earlier, timed-out request: skip it

    def _died_or(self, msg: str) -> None:
        if self.process is not None:
            self.process.wait(0.5)
        self.check_alive()
        raise MeasurerError(msg)


def _lcore_cpus(lcores: str) -> dict[int, set[int]]:
    """Parse an EAL --lcores string ("0@0,1@0", "0-3", "(0,1)@(0,1)", "1@(2-3)") into
    {lcore: {cpus}}.  Unknown shapes map an lcore to itself."""
    def rng(txt: str) -> list[int]:
        return parse_cpulist(txt.strip("()"))

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
