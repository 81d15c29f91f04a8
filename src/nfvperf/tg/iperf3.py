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
or in a standalone :class:`~nfvperf.tg.veth_topo.VethTopology` (:meth:`Iperf3Measurer.standalone`).

Every subprocess is a :class:`nfvperf.host.proc.Process` with an argument list (never a shell
string)::

    ip netns exec <srv-ns> [taskset -c CPU] iperf3 -s -p PORT -1 -J
    ip netns exec <cli-ns> [taskset -c CPU] iperf3 -c SERVER -p PORT -t DURATION -P STREAMS -J
                                                   [-R | --bidir] [-l LEN] [-M MSS] [-Z]

``measure(duration_s, load_pps)`` raises :class:`Unsupported`: TCP has no offered load.
"""
from __future__ import annotations

import contextlib
import math
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from nfvperf.host.base import Popened
from nfvperf.host.proc import LOCAL, Process, ProcessError
from nfvperf.host.run import TAG_RE, ResourceTracker, RunContext
from nfvperf.tg import ifsettings
from nfvperf.tg.iperf3_result import (LAYER, LAYER_NOTE, TcpProcessResult, TcpResult, _parse_json,  # noqa: F401
                                      aggregate, parse_end)
from nfvperf.tg.veth_topo import VethTopology
from nfvperf.trial import Measurer, MeasurerError, TrafficProfile, TrialResult, Unsupported


def tcp_listens(lines: Iterable[str], port: int) -> bool:
    """True when a line of ``/proc/net/tcp{,6}`` (its heading never matches) is a socket in LISTEN
    on ``port``."""
    hexport = f":{port:04X}"
    return any(len(p) > 3 and p[1].endswith(hexport) and p[3] == "0A" for p in (ln.split() for ln in lines))


def _listening(pid: int, port: int) -> bool:
    """True when the process ``pid`` has a TCP socket in LISTEN on ``port`` in its namespace
    (reads /proc/<pid>/net/tcp{,6}, which shows the process's own network namespace; a probe
    connection would use up a ``-1`` server)."""
    for fn in ("tcp6", "tcp"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/net/{fn}") as f:
            if tcp_listens(f, port):
                return True
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

    def running(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        """SIGTERM (its process group), 2 s, SIGKILL; then close the files."""
        if self.process.running():
            self.killed = True
        self.process.stop(timeout=2.0)

    def output(self) -> tuple[str, str]:
        return (self.out_path.read_text(errors="replace"), self.err_path.read_text(errors="replace"))


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
        self._tmp: Optional[tempfile.TemporaryDirectory[str]] = None
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
        cpus = self._cpus(list(pin_cores or []), processes)
        res = TcpResult(duration_s=duration_s, streams=streams, processes=processes,
                        reverse=reverse, bidir=bidir, server=self.server_ip,
                        client_ns=self.client_ns, server_ns=self.server_ns,
                        iperf3_version=self.version, path=dict(self.path_info))
        before = self._read_dut_counters()
        limit = duration_s + omit_s + self.connect_timeout_ms / 1000.0 + self.timeout_margin_s
        opts = dict(duration_s=duration_s, streams=streams, reverse=reverse, bidir=bidir, length_b=length_b,
                    mss=mss, zerocopy=zerocopy, omit_s=omit_s, interval_s=interval_s, congestion=congestion)
        t0 = time.monotonic()
        servers: list[_Proc] = []     # or vm.tcp's GuestProcs: argv, running(), output(), kill()
        clients: list[_Proc] = []
        try:
            self._begin_trial()
            # 1. servers, each checked to be listening before any client starts
            for i in range(processes):
                servers.append(self._server(i, cpus[i], limit))
                res.commands.append(servers[-1].argv)
            for i, p in enumerate(servers):
                self._wait_listening(p, self.base_port + i)
            # 2. clients, all at once
            res.started_at = time.time()
            for i in range(processes):
                clients.append(self._client(i, cpus[i], limit, opts))
                res.commands.append(clients[-1].argv)
            # 3. wait: duration + omit + connect timeout + margin, then kill what is left
            timed_out = self._wait_all(clients, time.monotonic() + limit + self.CLIENT_GRACE_S, self.POLL_S[0])
            # a server finishes right after its client (-1); give those whose client succeeded a
            # moment for their JSON, and do not wait for the others (nobody will connect)
            # (iperf3 3.12 -J exits 0 even after "unable to connect", so look at its JSON)
            self._wait_all([s for s, c in zip(servers, clients) if c not in timed_out
                            and _parse_json(*c.output(), "")[1] is None],
                           time.monotonic() + 3.0, self.POLL_S[1])
            for p in clients + servers:
                p.kill()
            # 4. parse
            for i, (c, srv) in enumerate(zip(clients, servers)):
                pr = TcpProcessResult(index=i, port=self.base_port + i, cpu=cpus[i], client_cmd=c.argv,
                                      server_cmd=srv.argv)
                self._parse_process(pr, c, srv, bidir, timed_out=c in timed_out)
                res.per_process.append(pr)
                if pr.error:
                    res.errors.append(pr.error)
            aggregate(res)
        finally:
            for p in clients + servers:
                with contextlib.suppress(Exception):   # a guest may be gone; the trial already failed
                    p.kill()
                if p in self._procs:
                    self._procs.remove(p)
            self._end_trial()
            res.wall_s = time.monotonic() - t0
            if self.dut_counters_fn is not None:
                res.dut_counters = {"before": before, "after": self._read_dut_counters()}
        if self.dut_alive_fn is not None:
            self.dut_alive_fn()
        if not [p for p in res.per_process if p.error is None]:
            err = MeasurerError(f"iperf3 could not measure {self._where(processes)}: " + "; ".join(res.errors))
            err.result = res  # type: ignore[attr-defined]
            raise err
        if res.errors:
            res.valid = False
        return res

    # -- where the processes run (VmTcpMeasurer: in guests) ----------------------------------
    #: seconds between polls of the clients and of the servers while a trial ends
    POLL_S = (0.05, 0.05)
    #: how long after duration + omit + connect timeout + margin the clients may still run
    CLIENT_GRACE_S = 0.0

    def _cpus(self, cores: list[int], processes: int) -> list[Optional[int]]:
        """Process i's CPU: ``pin_cores`` round-robin (None: not pinned)."""
        return [cores[i % len(cores)] if cores else None for i in range(processes)]

    def _begin_trial(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="nfvperf-iperf3-", dir=self._workdir)

    def _end_trial(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def _host_proc(self, argv: list[str], wd: Path, name: str) -> _Proc:
        p = _Proc(argv, wd, name, self.host, self.tag)
        self._procs.append(p)
        return p

    def _server(self, i: int, cpu: Optional[int], limit_s: float) -> Any:
        assert self._tmp is not None
        return self._host_proc(self.server_cmd(self.base_port + i, cpu), Path(self._tmp.name), f"server{i}")

    def _client(self, i: int, cpu: Optional[int], limit_s: float, opts: dict[str, Any]) -> Any:
        assert self._tmp is not None
        return self._host_proc(self.client_cmd(self.base_port + i, cpu, **opts), Path(self._tmp.name),
                               f"client{i}")

    def _where(self, processes: int) -> str:
        ns = f" (client netns {self.client_ns}, server netns {self.server_ns})" \
            if self.client_ns or self.server_ns else ""
        return f"against server {self.server_ip} ports {self.base_port}-{self.base_port + processes - 1}{ns}"

    def _wait_listening(self, p: _Proc, port: int) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if p.popen.poll() is not None:
                out, err = p.output()
                raise MeasurerError(f"iperf3 server on port {port} (netns {self.server_ns}) exited "
                                    f"with {p.popen.returncode} before listening: "
                                    f"{(err or out).strip()[-500:]}")
            if _listening(p.popen.pid, port):
                return
            time.sleep(0.02)
        raise MeasurerError(f"iperf3 server on port {port} (netns {self.server_ns}) not listening "
                            f"after {self.ready_timeout_s} s")

    @staticmethod
    def _wait_all(procs: list[Any], deadline: float, poll_s: float) -> list[Any]:
        """Wait for all to exit until ``deadline``; return those still running (not killed)."""
        pending = [p for p in procs if p.running()]
        while pending and time.monotonic() < deadline:
            time.sleep(poll_s)
            pending = [p for p in pending if p.running()]
        return pending

    def _parse_process(self, pr: TcpProcessResult, client: Any, server: Any, bidir: bool,
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
        parse_end(pr, doc, bidir, f"{what}: iperf3 JSON has no end summary (stderr: {err.strip()[-300:]})")

    def close(self) -> None:
        for p in list(self._procs):
            p.kill()
        self._procs.clear()
        if self.topology is not None:
            self.topology.delete()
