"""iperf3 with its ends in TCP guests (seed 001's scenarios): the ``tcp`` method's measurer on the
``host-vm`` / ``vm-vm`` / ``vm-link-vm`` topologies.

An end is a :class:`~nfvperf.vm.guest.TcpGuest` (iperf3 started through the guest's shell on its
control port) or, for seed 001's external clients, a host network namespace (iperf3 started as a
host process, as :class:`nfvperf.tg.iperf3.Iperf3Measurer` does).  A trial is the seed's Table 5::

    server end:  iperf3 -s -p 5201 -1 -J [-A 0]      iperf3 -s -p 5202 -1 -J [-A 1]   ...
    client end:  iperf3 -c SERVER -p 5201 -t T -P STREAMS -J [-A 0]   (one process per port)

one iperf3 process per port, process *i* pinned with ``-A`` to CPU ``pin_cores[i]`` of its end
(the guest's vCPU; the seed's ``-A0,0 -p2000``, ``-A1,1 -p3000``), all clients started together.
In a guest every iperf3 runs under busybox ``timeout -s KILL`` (it cannot outlive the trial),
writes its JSON to ``/tmp`` and the JSON is read back over the control port; iperf3's own JSON
gives the Gbit/s (TCP payload goodput, :data:`nfvperf.tg.iperf3.LAYER`), parsed and summed as for
host namespaces.

TSO and multi-queue (the method's ``tso`` / ``multiqueue``) are set inside the guests with
``ethtool -K <if> tso on|off`` and ``ethtool -L <if> combined N`` and read back (``ethtool -k`` /
``-l``) into every result (:mod:`nfvperf.tg.ifsettings`, the guest as the "host").
"""
from __future__ import annotations

import math
import re
import shlex
import time
from typing import Any, Optional, Sequence, Union

from nfvperf.tg import ifsettings
from nfvperf.tg.iperf3 import Iperf3Measurer, TcpResult, _parse_json, _Proc, check_tcp_args, client_argv
from nfvperf.trial import MeasurerError

from .guest import TcpGuest
from pathlib import Path

#: iperf3's files in a guest: /tmp/<PREFIX><name>.json / .err
PREFIX = "nfvperf-iperf3-"


def guest_argv(role: str, port: int, cpu: Optional[int], server_ip: str = "",
               duration_s: int = 0, streams: int = 1, reverse: bool = False, bidir: bool = False,
               mss: Optional[int] = None, omit_s: int = 0, interval_s: float = 1.0,
               length_b: Optional[int] = None, connect_timeout_ms: int = 3000) -> list[str]:
    """The iperf3 command of one end in a guest: ``role`` "server" or "client"; ``cpu`` pins it
    with iperf3's own ``-A`` (the seed's Table 5)."""
    pin = ["-A", str(int(cpu))] if cpu is not None else []
    if role == "server":
        return ["iperf3", "-s", "-p", str(port), "-1", "-J", *pin]
    if role != "client":
        raise ValueError(f"role must be server or client, not {role!r}")
    return client_argv(server_ip, port, duration_s, streams, interval_s=interval_s,
                       connect_timeout_ms=connect_timeout_ms, reverse=reverse, bidir=bidir,
                       length_b=length_b, mss=mss, omit_s=omit_s) + pin


def guest_line(argv: Sequence[str], name: str, limit_s: float) -> str:
    """The guest shell line that starts ``argv`` in the background under ``timeout -s KILL``
    (it cannot outlive ``limit_s``), output to /tmp files, and prints its pid."""
    base = f"/tmp/{PREFIX}{name}"
    return (f"timeout -s KILL {int(math.ceil(limit_s))} {shlex.join(list(argv))} </dev/null "
            f">{base}.json 2>{base}.err & echo PID=$!")


class GuestProc:
    """One iperf3 process in a guest (what :class:`nfvperf.tg.iperf3._Proc` is on the host)."""

    def __init__(self, guest: TcpGuest, argv: list[str], name: str, limit_s: float):
        self.guest = guest
        self.name = name
        self.argv = [guest.iface, *argv]        # recorded with where it ran
        self.killed = False
        self.exited = False
        rc, out = guest.shell_line(guest_line(argv, name, limit_s))
        m = re.search(r"PID=(\d+)", out)
        if rc != 0 or not m:
            raise MeasurerError(f"{guest.iface}: could not start {shlex.join(argv)}: {out[-300:]}")
        self.pid = int(m.group(1))

    def running(self) -> bool:
        if self.exited:
            return False
        rc, out = self.guest.shell_line(f"cat /proc/{self.pid}/stat 2>/dev/null")
        state = out.split(")")[-1].split()[:1] if rc == 0 and out else []
        self.exited = not state or state[0] in ("Z", "X")
        return not self.exited

    def kill(self) -> None:
        if self.running():
            self.killed = True
            # not a child of the shell (the guest's init runs each line in a subshell): init,
            # PID 1, reaps it
            self.guest.shell_line(f"kill -9 {self.pid} 2>/dev/null; true")
            self.exited = True

    def output(self) -> tuple[str, str]:
        base = f"/tmp/{PREFIX}{self.name}"
        _, out = self.guest.shell_line(f"cat {base}.json 2>/dev/null", timeout=60)
        _, err = self.guest.shell_line(f"cat {base}.err 2>/dev/null")
        return out, err


def guest_listening(guest: TcpGuest, port: int) -> bool:
    """A TCP socket in LISTEN on ``port`` in the guest (/proc/net/tcp{,6})."""
    _, out = guest.shell_line("cat /proc/net/tcp /proc/net/tcp6 2>/dev/null")
    hexport = f":{port:04X}"
    for line in out.splitlines():
        parts = line.split()
        if len(parts) > 3 and parts[1].endswith(hexport) and parts[3] == "0A":
            return True
    return False


End = Union[TcpGuest, str]          # a guest, or a host network namespace's name


class VmTcpMeasurer(Iperf3Measurer):
    """iperf3 between ``client`` and ``server`` ends (TcpGuests, or a namespace name for the
    client), the server at ``server_ip``.  ``path``: what the topology says about the path
    (scenario, kind, bridges; the guests' accelerator is added here) for every result."""

    name = "iperf3"

    def __init__(self, client: End, server: TcpGuest, server_ip: str, *,
                 path: Optional[dict[str, Any]] = None, dut_counters: Any = None,
                 dut_alive: Any = None, **kw: Any) -> None:
        client_ns = client if isinstance(client, str) else None
        super().__init__(None, client_ns, server_ip, **kw)
        self.client = client
        self.server = server
        self.guests = [g for g in (client, server) if isinstance(g, TcpGuest)]
        self.tag = server.run.tag
        self.path_info = dict(path or {})
        accel = sorted({g.accel for g in self.guests if g.accel})
        self.path_info.update(
            guest_accel=", ".join(accel) or None,
            guest_accel_reason="; ".join(sorted({g.accel_reason for g in self.guests
                                                 if g.accel_reason})) or None,
            guests={g.vnf_name: {"vcpus": g.vcpus, "queues": g.queues, "memory_mb": g.hugepage_mb,
                                 "ip": g.ip, "ifname": g.ifname} for g in self.guests})
        self.dut_counters_fn = dut_counters
        self.dut_alive_fn = dut_alive
        self.ifaces = [(g.iface, g.ifname) for g in self.guests]

    # -- settings inside the guests ---------------------------------------------------------------
    def apply_tcp_settings(self, tso: Optional[bool] = None,
                           multiqueue: ifsettings.Queues = None) -> dict[str, dict[str, Any]]:
        """TSO / queue count on every guest's NIC (ethtool in the guest), read back."""
        if tso is None and multiqueue is None:
            return {}
        if tso and self.tso_refusal:
            raise MeasurerError(f"params.tso: true: {self.tso_refusal}")
        applied: dict[str, dict[str, Any]] = {}
        for g in self.guests:
            applied.update(ifsettings.apply([(g.iface, g.ifname)], tso=tso, multiqueue=multiqueue,
                                            host=g.host))
        self.path_info["interface_settings"] = applied
        return applied

    def environment(self) -> dict[str, Any]:
        env = super().environment()
        env.update(path=self.path_info, client=getattr(self.client, "iface", self.client),
                   server=self.server.iface)
        return env

    # -- the trial -------------------------------------------------------------------------------
    def measure_tcp(self, duration_s: float, streams: int = 1, processes: int = 1,
                    reverse: bool = False, bidir: bool = False,
                    pin_cores: Optional[list[int]] = None, mss: Optional[int] = None,
                    zerocopy: bool = False, length_b: Optional[int] = None, omit_s: int = 0,
                    interval_s: float = 1.0, congestion: Optional[str] = None) -> TcpResult:
        """``processes`` iperf3 pairs x ``streams`` connections for ``duration_s`` between the
        ends; process i pinned (``-A``) to ``pin_cores[i]`` in each guest end (a host-namespace
        client is not pinned)."""
        duration_s = check_tcp_args(duration_s, streams, processes, reverse, bidir)
        cores = list(pin_cores or [])
        for g in self.guests:
            bad = [c for c in cores if not 0 <= c < g.vcpus]
            if bad:
                raise MeasurerError(f"params.pin_cores: {bad} are not vCPUs of {g.iface} "
                                    f"({g.vcpus} vCPUs: 0..{g.vcpus - 1})")
        res = TcpResult(duration_s=duration_s, streams=streams, processes=processes,
                        reverse=reverse, bidir=bidir, server=self.server_ip,
                        client_ns=self.client_ns, server_ns=None, iperf3_version=self.version,
                        path=dict(self.path_info))
        before = self._read_dut_counters()
        limit = duration_s + omit_s + self.connect_timeout_ms / 1000.0 + self.timeout_margin_s
        t0 = time.monotonic()
        servers: list[GuestProc] = []
        clients: list[Any] = []
        try:
            self.server.shell_line(f"rm -f /tmp/{PREFIX}*")
            if isinstance(self.client, TcpGuest):
                self.client.shell_line(f"rm -f /tmp/{PREFIX}*")
            for i in range(processes):
                cpu = cores[i] if i < len(cores) else None
                p = GuestProc(self.server, guest_argv("server", self.base_port + i, cpu),
                              f"server{i}", limit + self.ready_timeout_s + 5)
                servers.append(p)
                res.commands.append(p.argv)
            for i, p in enumerate(servers):
                self._wait_guest_listening(p, self.base_port + i)
            res.started_at = time.time()
            for i in range(processes):
                port = self.base_port + i
                cpu = cores[i] if i < len(cores) else None
                if isinstance(self.client, TcpGuest):
                    argv = guest_argv("client", port, cpu, self.server_ip, duration_s, streams,
                                      reverse, bidir, mss, omit_s, interval_s, length_b,
                                      self.connect_timeout_ms)
                    c: Any = GuestProc(self.client, argv, f"client{i}", limit)
                else:
                    c = _Proc(self.client_cmd(port, None, duration_s, streams, reverse, bidir,
                                              length_b, mss, zerocopy, omit_s, interval_s,
                                              congestion), self._wd(), f"client{i}", self.host,
                              self.tag)
                    self._procs.append(c)
                clients.append(c)
                res.commands.append(c.argv)
            timed_out = self._wait_clients(clients, time.monotonic() + limit + 5)
            ok_clients = [c for c in clients if c not in timed_out]
            deadline = time.monotonic() + 3.0
            for s, c in zip(servers, clients):
                c_out, c_err = c.output() if c in ok_clients else ("", "")
                if c in ok_clients and _parse_json(c_out, c_err, "")[1] is None:
                    while s.running() and time.monotonic() < deadline:
                        time.sleep(0.2)
            for p in clients + servers:
                p.kill()
            # servers duck-typed like _Proc: argv, killed, output()
            self._collect(res, clients, list(servers), [cores[i] if i < len(cores) else None
                                                        for i in range(processes)], bidir, timed_out)
        finally:
            for p in clients + servers:
                try:
                    p.kill()
                except Exception:  # noqa: BLE001 - the guest may be gone; the trial already failed
                    pass
                if p in self._procs:
                    self._procs.remove(p)
            res.wall_s = time.monotonic() - t0
            if self.dut_counters_fn is not None:
                res.dut_counters = {"before": before, "after": self._read_dut_counters()}
        return self._conclude(res, f"from {getattr(self.client, 'iface', self.client)} to {self.server.iface} "
                              f"({self.server_ip}) ports {self.base_port}-{self.base_port + processes - 1}")

    def _wd(self) -> Any:
        d = Path(self._workdir or self.server.run.run_dir) / "iperf3"
        d.mkdir(parents=True, exist_ok=True)
        return d

    def _wait_guest_listening(self, p: GuestProc, port: int) -> None:
        deadline = time.monotonic() + max(self.ready_timeout_s, 10.0)
        while time.monotonic() < deadline:
            if not p.running():
                out, err = p.output()
                raise MeasurerError(f"iperf3 server on port {port} ({self.server.iface}) exited "
                                    f"before listening: {(err or out).strip()[-500:]}")
            if guest_listening(self.server, port):
                return
            time.sleep(0.1)
        raise MeasurerError(f"iperf3 server on port {port} ({self.server.iface}) not listening "
                            f"after {max(self.ready_timeout_s, 10.0):g} s")

    @staticmethod
    def _wait_clients(clients: list[Any], deadline: float) -> list[Any]:
        """Wait until every client exited (guest: polled through the shell); return those still
        running at ``deadline``."""
        pending = list(clients)
        while pending and time.monotonic() < deadline:
            time.sleep(0.5)
            pending = [c for c in pending if (c.running() if isinstance(c, GuestProc)
                                              else c.popen.poll() is None)]
        return pending

    def close(self) -> None:
        for p in list(self._procs):
            p.kill()
        self._procs.clear()
