"""A client of DPDK's telemetry socket (v2): the counters of a DPDK process that has no console.

Every DPDK 22.11 process (EAL telemetry on by default, ``--in-memory`` too) listens on
``/var/run/dpdk/<file-prefix>/dpdk_telemetry.v2``, a ``SOCK_SEQPACKET`` Unix socket: on connect it
sends one JSON object (``{"version", "pid", "max_output_len"}``), then answers each command
(``/ethdev/stats,0``) with one JSON object keyed by the command (``{"/ethdev/stats": {...}}``).

``DpdkTelemetry(path).command("/ethdev/stats,0")`` returns the inner object;
:func:`ethdev_counters` maps ``/ethdev/stats`` onto nfvperf's port counter names.
"""
from __future__ import annotations

import contextlib
import json
import shlex
import socket
import time
from pathlib import Path
from typing import Optional

from .base import Host

#: DPDK's runtime directory of a process started as root with ``--file-prefix <prefix>``
RUNTIME_ROOT = Path("/var/run/dpdk")
SOCKET_NAME = "dpdk_telemetry.v2"


class TelemetryError(RuntimeError):
    """The socket is missing, refused the connection, or answered with something unexpected."""


def socket_path(file_prefix: str, root: Path = RUNTIME_ROOT) -> Path:
    return root / file_prefix / SOCKET_NAME


class DpdkTelemetry:
    """One connection to a DPDK process's telemetry socket."""

    def __init__(self, path: "str | Path", timeout_s: float = 5.0):
        self.path = Path(path)
        self.timeout_s = timeout_s
        self.sock: Optional[socket.socket] = None
        self.info: dict[str, object] = {}
        self.max_len = 16384

    def connect(self, wait_s: float = 0.0) -> dict[str, object]:
        """Connect (retrying for ``wait_s`` s while the socket is not there yet); returns the
        greeting (``version``, ``pid``, ``max_output_len``)."""
        deadline = time.monotonic() + wait_s
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.settimeout(self.timeout_s)
            try:
                s.connect(str(self.path))
                greeting = s.recv(65536)
                break
            except OSError as e:
                s.close()
                if time.monotonic() >= deadline:
                    raise TelemetryError(f"DPDK telemetry socket {self.path}: {e}") from None
                time.sleep(0.1)
        self.sock = s
        try:
            self.info = json.loads(greeting.decode())
        except ValueError:
            self.close()
            raise TelemetryError(f"DPDK telemetry socket {self.path}: not a telemetry greeting: "
                                 f"{greeting[:200]!r}") from None
        self.max_len = int(str(self.info.get("max_output_len") or 16384))
        return dict(self.info)

    def command(self, cmd: str) -> object:
        """The answer to ``cmd`` (the value under its command name)."""
        if self.sock is None:
            self.connect()
        assert self.sock is not None
        try:
            self.sock.send(cmd.encode())
            raw = self.sock.recv(max(self.max_len, 65536))
        except OSError as e:
            self.close()
            raise TelemetryError(f"DPDK telemetry {self.path}: {cmd}: {e}") from None
        if not raw:
            self.close()
            raise TelemetryError(f"DPDK telemetry {self.path}: {cmd}: the process closed the socket")
        try:
            reply = json.loads(raw.decode())
        except ValueError:
            raise TelemetryError(f"DPDK telemetry {self.path}: {cmd}: not JSON: {raw[:200]!r}") from None
        return self._answer(cmd, reply)

    def _answer(self, cmd: str, reply: object) -> object:
        """The value under ``cmd``'s name in ``reply``."""
        key = cmd.split(",", 1)[0]
        if not isinstance(reply, dict) or key not in reply:
            raise TelemetryError(f"DPDK telemetry {self.path}: {cmd}: unexpected answer {reply!r:.200}")
        return reply[key]

    def close(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.sock = None

    def __enter__(self) -> "DpdkTelemetry":
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class HostTelemetry(DpdkTelemetry):
    """The telemetry socket of a DPDK process on another host (a testbed host over SSH, a guest):
    each command is one ``socat`` there (``UNIX-CONNECT:<path>,type=5``, SOCK_SEQPACKET), whose
    output is the greeting then the answer.  Same interface as :class:`DpdkTelemetry`."""

    def __init__(self, host: Host, path: "str | Path", timeout_s: float = 5.0):
        super().__init__(path, timeout_s)
        self.host = host

    def _ask(self, cmd: str) -> list[object]:
        """The JSON objects socat printed for ``cmd`` ("" : the greeting alone)."""
        line = f"printf %s {shlex.quote(cmd)} | socat -t 1 - UNIX-CONNECT:{self.path},type=5"
        try:
            cp = self.host.run(["sh", "-c", line], check=False, timeout=self.timeout_s + 10)
        except Exception as e:      # noqa: BLE001 - the host's own errors (SSH, guest shell)
            raise TelemetryError(f"DPDK telemetry {self.path} on {self.host.name}: {e}") from None
        out, objs, i = cp.stdout.strip(), [], 0
        dec = json.JSONDecoder()
        while i < len(out):
            try:
                obj, i = dec.raw_decode(out, i)
            except ValueError:
                break
            objs.append(obj)
            while i < len(out) and out[i].isspace():
                i += 1
        if not objs:
            raise TelemetryError(f"DPDK telemetry {self.path} on {self.host.name}: no answer "
                                 f"({cp.returncode}): {(cp.stdout + cp.stderr).strip()[-200:]}")
        return objs

    def connect(self, wait_s: float = 0.0) -> dict[str, object]:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self.info = g if isinstance(g := self._ask("")[0], dict) else {}
                return dict(self.info)
            except TelemetryError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.5)

    def command(self, cmd: str) -> object:
        return self._answer(cmd, self._ask(cmd)[-1])

    def close(self) -> None:
        """Nothing held open."""


def ethdev_counters(stats: object) -> dict[str, int]:
    """``/ethdev/stats`` (a JSON object) as nfvperf's port counters (rx/tx packets, bytes, dropped,
    errors; ``rx_dropped`` = missed + no mbuf, ``tx_dropped`` = the PMD's TX errors)."""
    def g(k: str) -> int:
        v = stats.get(k, 0) if isinstance(stats, dict) else 0
        return int(v) if isinstance(v, (int, float)) else 0

    return {"rx_packets": g("ipackets"), "tx_packets": g("opackets"), "rx_bytes": g("ibytes"),
            "tx_bytes": g("obytes"), "rx_missed": g("imissed"), "rx_nombuf": g("rx_nombuf"),
            "rx_errors": g("ierrors"), "tx_errors": g("oerrors"),
            "rx_dropped": g("imissed") + g("rx_nombuf"), "tx_dropped": g("oerrors")}
