"""A process on a host reached over SSH (:class:`RemotePopen`, what ``SshHost.popen`` gives
:class:`~nfvperf.host.proc.Process`), under the agent's guard, its output copied as it comes."""
from __future__ import annotations

import contextlib
import os
import select
import socket
import subprocess
import threading
import time
from typing import TYPE_CHECKING, Callable, Optional, Protocol

import paramiko

from .proc import ProcessError, read_fd

if TYPE_CHECKING:
    from .ssh import SshHost


class _Sink(Protocol):
    """Where a remote process's output is copied: a binary file or :class:`_FdWriter`."""

    def write(self, data: bytes, /) -> object: ...


class RemotePopen:
    """A remote process under the agent's guard, with the :class:`subprocess.Popen` methods
    :class:`Process` uses: ``pid`` (the remote pid, also its process group), ``poll()``,
    ``wait()``, ``returncode``.  A lost connection reads as exit status 255 and sets ``lost``."""

    def __init__(self, host: "SshHost", chan: paramiko.Channel, stdout: Optional[_Sink],
                 stderr: Optional[_Sink], timeout: float = 15.0, console: Optional[int] = None):
        self.host = host
        self.chan = chan
        self.returncode: Optional[int] = None
        self._lost: Optional[str] = None
        self.pid = self._read_pid(timeout)
        if console is not None:
            # an interactive process (agent guard-pty): the local pty slave ``console`` (a dup
            # of the one Process gave) stands for the remote terminal, both ways
            stdout = stderr = _FdWriter(console)
        self._output_done = threading.Event()
        self._threads = [threading.Thread(target=self._pump, args=(chan.recv, stdout,
                                                                   self._output_done), daemon=True),
                         threading.Thread(target=self._pump, args=(chan.recv_stderr, stderr),
                                          daemon=True)]
        for t in self._threads:
            t.start()
        if console is not None:
            threading.Thread(target=self._console_input, args=(console,), daemon=True).start()

    def _console_input(self, fd: int) -> None:
        """What :class:`Process` writes to its pty goes to the remote terminal.  The slave ``fd``
        is closed once the channel's output ended (the process exited or was stopped: the local
        pty then reads EOF as with a local process) or the local side closed."""
        while not self._output_done.is_set():
            ready, _, _ = select.select([fd], [], [], 0.1)
            if not ready:
                continue
            data = read_fd(fd, 4096)
            if not data:
                break
            try:
                self.chan.sendall(data)
            except Exception:  # noqa: BLE001 - the channel went away
                break
        for t in self._threads:
            t.join(2.0)
        with contextlib.suppress(OSError):
            os.close(fd)

    def _read_pid(self, timeout: float) -> int:
        buf = b""
        deadline = time.monotonic() + timeout
        self.chan.settimeout(0.2)
        while b"\n" not in buf:
            if time.monotonic() > deadline:
                raise ProcessError(f"{self.host.name}: the remote process did not start within "
                                   f"{timeout:g} s")
            try:
                data = self.chan.recv(1)
            except socket.timeout:
                continue
            if not data:
                err = b""
                with contextlib.suppress(Exception):
                    while self.chan.recv_stderr_ready():
                        err += self.chan.recv_stderr(4096)
                raise ProcessError(f"{self.host.name}: the remote process did not start "
                                   f"(status {self.chan.recv_exit_status()}): "
                                   f"{err.decode(errors='replace').strip()}")
            buf += data
        line = buf.decode(errors="replace").strip()
        if not line.startswith("NFVPERF-PID "):
            raise ProcessError(f"{self.host.name}: unexpected agent output {line[:80]!r}")
        self.chan.settimeout(None)
        return int(line.split()[1])

    @staticmethod
    def _pump(recv: Callable[[int], bytes], out: Optional[_Sink], done: Optional[threading.Event] = None) -> None:
        try:
            with contextlib.suppress(Exception):        # the channel went away
                while data := recv(65536):
                    if out is not None:
                        with contextlib.suppress(Exception):
                            out.write(data)
        finally:
            if done is not None:
                done.set()

    def poll(self) -> Optional[int]:
        if self.returncode is not None:
            return self.returncode
        if self.chan.exit_status_ready():
            rc = self.chan.recv_exit_status()
            # the guard exits with 128 + signal for a signalled child: Popen says -signal
            self.returncode = -(rc - 128) if 128 < rc < 160 else rc
            for t in self._threads:
                t.join(1.0)
            return self.returncode
        lost = self.host.lost_reason()
        if lost is not None or self.chan.closed:
            self._lost = lost or "the channel closed"
            self.returncode = 255
            return 255
        return None

    @property
    def lost(self) -> Optional[str]:
        """Why the process's host became unreachable (its exit status then says little: the
        host's sshd going away also ends the process)."""
        return self._lost or self.host.lost_reason()

    def wait(self, timeout: Optional[float] = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            rc = self.poll()
            if rc is not None:
                return rc
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"{self.host.name}:{self.pid}", timeout or 0)
            time.sleep(0.05)

    def close(self) -> None:
        """Close the channel: the guard kills the process group."""
        with contextlib.suppress(Exception):
            self.chan.close()


class _FdWriter:
    """``write(data)`` of all of ``data`` to a file descriptor (a pty slave)."""

    def __init__(self, fd: int):
        self.fd = fd

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]
