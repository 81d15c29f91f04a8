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
from nfvperf.tg.iperf3 import Iperf3Measurer, client_argv, tcp_listens
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
    return tcp_listens(out.splitlines(), port)


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
        super().__init__(None, client_ns, server_ip, path=path, dut_counters=dut_counters, dut_alive=dut_alive,
                         **kw)
        self.client = client
        self.server = server
        self.guests = [g for g in (client, server) if isinstance(g, TcpGuest)]
        self.tag = server.run.tag
        accel = sorted({g.accel for g in self.guests if g.accel})
        self.path_info.update(
            guest_accel=", ".join(accel) or None,
            guest_accel_reason="; ".join(sorted({g.accel_reason for g in self.guests
                                                 if g.accel_reason})) or None,
            guests={g.vnf_name: {"vcpus": g.vcpus, "queues": g.queues, "memory_mb": g.hugepage_mb,
                                 "ip": g.ip, "ifname": g.ifname} for g in self.guests})
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

    # -- the trial (Iperf3Measurer.measure_tcp) in the guests ---------------------------------
    #: a guest's processes are polled through its shell: less often
    POLL_S = (0.5, 0.2)
    CLIENT_GRACE_S = 5.0

    def _cpus(self, cores: list[int], processes: int) -> list[Optional[int]]:
        """Process i pinned (``-A``) to ``pin_cores[i]`` in each guest end (a host-namespace
        client is not pinned)."""
        for g in self.guests:
            bad = [c for c in cores if not 0 <= c < g.vcpus]
            if bad:
                raise MeasurerError(f"params.pin_cores: {bad} are not vCPUs of {g.iface} "
                                    f"({g.vcpus} vCPUs: 0..{g.vcpus - 1})")
        return [cores[i] if i < len(cores) else None for i in range(processes)]

    def _begin_trial(self) -> None:
        for g in self.guests:
            g.shell_line(f"rm -f /tmp/{PREFIX}*")

    def _server(self, i: int, cpu: Optional[int], limit_s: float) -> Any:
        return GuestProc(self.server, guest_argv("server", self.base_port + i, cpu), f"server{i}",
                         limit_s + self.ready_timeout_s + 5)

    def _client(self, i: int, cpu: Optional[int], limit_s: float, opts: dict[str, Any]) -> Any:
        if not isinstance(self.client, TcpGuest):
            wd = Path(self._workdir or self.server.run.run_dir) / "iperf3"
            wd.mkdir(parents=True, exist_ok=True)
            return self._host_proc(self.client_cmd(self.base_port + i, None, **opts), wd, f"client{i}")
        o = opts
        argv = guest_argv("client", self.base_port + i, cpu, self.server_ip, o["duration_s"], o["streams"],
                          o["reverse"], o["bidir"], o["mss"], o["omit_s"], o["interval_s"], o["length_b"],
                          self.connect_timeout_ms)
        return GuestProc(self.client, argv, f"client{i}", limit_s)

    def _where(self, processes: int) -> str:
        return (f"from {getattr(self.client, 'iface', self.client)} to {self.server.iface} "
                f"({self.server_ip}) ports {self.base_port}-{self.base_port + processes - 1}")

    def _wait_listening(self, p: Any, port: int) -> None:
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
