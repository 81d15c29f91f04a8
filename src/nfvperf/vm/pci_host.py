"""A PCI guest as a :class:`nfvperf.host.base.Host` (:class:`GuestPciHost`): processes, files and
``connect_unix`` over the guest's shell and RPC serial ports, so code written for a testbed host
(tgen on ``-a <pci>``, the NIC preflight) runs in :class:`nfvperf.vm.pci_guest.PciGuest` unchanged."""
from __future__ import annotations

import base64
import contextlib
import fnmatch
import itertools
import os
import shlex
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from nfvperf.dut.base import DutFailure
from nfvperf.host.base import Host, PathLike, Stream
from nfvperf.host.proc import CommandError, Process
from nfvperf.host.run import ResourceTracker, RunContext

from .guest import env_prefix
from .pci_overlay import GUEST_SOCAT, GUEST_WORK
from .qemu import connect_unix_retry

if TYPE_CHECKING:
    from .pci_guest import PciGuest


class GuestPopen:
    """A process in the guest as :class:`nfvperf.host.proc.Process` drives it: ``pid``,
    ``poll()``, ``wait()``; its stdout/stderr files in the guest copied into the local files it
    was given, as they grow."""

    POLL_S = 0.25

    def __init__(self, host: "GuestPciHost", pid: int, files: dict[str, Any], rc_path: str,
                 on_close: Optional[Callable[[], None]] = None):
        self.host = host
        self._on_close = on_close
        self.pid = pid
        self.returncode: Optional[int] = None
        self.lost: Optional[str] = None
        self._files = files          # guest path -> local file object (or None)
        self._offsets = {p: 0 for p in files}
        self._rc_path = rc_path
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, name=f"guest-pid-{pid}", daemon=True)
        self._thread.start()

    def _refresh(self) -> None:
        """Copy new output and learn whether the process ended (one shell line)."""
        with self._lock:
            if self.returncode is not None:
                return
            parts = [f"echo -n '@@F'; tail -c +{self._offsets[p] + 1} {shlex.quote(p)} 2>/dev/null"
                     for p in self._files]
            parts.append(f"echo -n '@@R'; if [ -e {self._rc_path} ]; then cat {self._rc_path}; "
                         f"elif kill -0 {self.pid} 2>/dev/null; then echo run; else echo gone; fi")
            try:
                rc, out = self.host.guest.shell_line("; ".join(parts), timeout=20)
            except DutFailure as e:
                self.lost = str(e)
                self.returncode = -signal.SIGKILL
                return
            body, _, state = out.rpartition("@@R")
            chunks = body.split("@@F")[1:]
            for p, chunk in zip(self._files, chunks):
                data = chunk.encode()
                self._offsets[p] += len(data)
                f = self._files[p]
                if f is not None and data:
                    with contextlib.suppress(Exception):
                        f.write(data)
            state = state.strip()
            if state not in ("run", ""):
                self.returncode = int(state) if state.lstrip("-").isdigit() else -signal.SIGKILL

    def _follow(self) -> None:
        while not self._stop.is_set() and self.returncode is None:
            self._refresh()
            self._stop.wait(self.POLL_S)

    def poll(self) -> Optional[int]:
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"guest pid {self.pid}", timeout or 0)
            self._refresh()
            time.sleep(0.1)
        return self.returncode

    def close(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(5)
        if self._on_close is not None:
            self._on_close()
            self._on_close = None


class _TtyPump:
    """Copies bytes both ways between a local pty slave (``fd``) and a connected socket."""

    def __init__(self, fd: int, conn: socket.socket):
        self.fd, self.conn = fd, conn
        self._closed = threading.Event()
        self._threads = [threading.Thread(target=self._pump, args=(read, write), daemon=True,
                                          name=f"guest-tty-{n}")
                         for n, read, write in (("in", lambda: os.read(fd, 4096), conn.sendall),
                                                ("out", lambda: conn.recv(4096), lambda d: os.write(fd, d)))]
        for t in self._threads:
            t.start()

    def _pump(self, read: Callable[[], bytes], write: Callable[[bytes], object]) -> None:
        """Copy what ``read`` returns to ``write`` until the end of input, an error or close()."""
        while not self._closed.is_set():
            try:
                data = read()
                if not data:
                    return
                write(data)
            except OSError:
                return

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self.conn.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.conn.close()
        with contextlib.suppress(OSError):
            os.close(self.fd)


class GuestPciHost:
    """A :class:`PciGuest` as a :class:`nfvperf.host.base.Host` (see the module doc): ``remote``,
    so tgen's control socket is in the guest's work directory and ``connect_unix`` reaches it
    through the RPC serial port and socat in the guest."""

    remote = True
    work_dir = GUEST_WORK

    def __init__(self, guest: PciGuest):
        self.guest = guest
        self.name = f"vm:{guest.vnf_name}"
        self._ids = itertools.count(1)
        self._relay_pid: Optional[int] = None
        self._conn: Optional[socket.socket] = None
        self._tty: Optional[GuestPopen] = None

    # -- processes -------------------------------------------------------------------------
    def wrap(self, argv: Sequence[str], netns: Optional[str] = None) -> list[str]:
        if netns:
            raise ValueError(f"{self.name}: the guest has no network namespaces (netns {netns!r})")
        return [str(a) for a in argv]

    def popen(self, cmd: Sequence[str], *, stdin: Stream = None, stdout: Stream = None,
              stderr: Stream = None, env: Optional[dict[str, str]] = None,
              cwd: Optional[Path] = None, start_new_session: bool = False, close_fds: bool = True,
              preexec_fn: Optional[Callable[[], object]] = None) -> GuestPopen:
        """Start ``cmd`` in the guest in its own session; its output goes to guest files that
        :class:`GuestPopen` copies into ``stdout``/``stderr`` (local files)."""
        if isinstance(stdin, int) and stdin >= 0 and stdin == stdout:
            return self._popen_tty(cmd, stdin, env)
        if stdin not in (None, subprocess.DEVNULL):
            raise OSError(f"{self.name}: a process in the guest reads no stdin but a terminal's")
        n = next(self._ids)
        base = f"{GUEST_WORK}/p{n}"
        out, err, rcp = f"{base}.out", f"{base}.err", f"{base}.rc"
        redirect = f">{out} 2>&1" if stderr == subprocess.STDOUT else f">{out} 2>{err}"
        inner = f"{env_prefix(env)}{shlex.join([str(a) for a in cmd])} {redirect} </dev/null; " \
                f"echo $? > {rcp}"
        line = (f"mkdir -p {GUEST_WORK}; rm -f {out} {err} {rcp}; busybox setsid sh -c "
                f"{shlex.quote(inner)} </dev/null >/dev/null 2>&1 & echo PID=$!")
        rc, text = self.guest.shell_line(line)
        pid = next((int(w[4:]) for w in text.split() if w.startswith("PID=")), None)
        if rc != 0 or pid is None:
            raise OSError(f"{self.name}: cannot start {' '.join(map(str, cmd))}: {text[-300:]}")
        files: dict[str, Any] = {out: stdout if _is_file(stdout) else None}
        if stderr != subprocess.STDOUT:
            files[err] = stderr if _is_file(stderr) else None
        return GuestPopen(self, pid, files, rcp)

    def _popen_tty(self, cmd: Sequence[str], tty_fd: int, env: Optional[dict[str, str]]
                   ) -> "GuestPopen":
        """An interactive process (``Process(interactive=True)``: stdin/stdout are the slave end
        of a pty here): it runs in the guest on a pty of socat's, whose other side is the guest's
        fourth serial port, copied both ways to ``tty_fd``.  One at a time."""
        if self._tty is not None and self._tty.returncode is None:
            raise OSError(f"{self.name}: one interactive process at a time (the guest has one "
                          "terminal port)")
        n = next(self._ids)
        base = f"{GUEST_WORK}/t{n}"
        script = f"{base}.sh"
        exports = "".join(f"export {a}\n" for a in env_prefix(env).split())
        self.write_text(script, "#!/bin/sh\n" + exports + "exec " +
                        shlex.join([str(a) for a in cmd]) + "\n", mode=0o755)
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(str(self.guest.tty_sock))      # before the guest writes: else it is lost
        inner = f"{GUEST_SOCAT} /dev/ttyS3,raw,echo=0 EXEC:{script},pty,raw,echo=0,stderr " \
                f"2>{base}.err; echo $? > {base}.rc"
        rc, text = self.guest.shell_line(f"mkdir -p {GUEST_WORK}; rm -f {base}.rc; busybox setsid "
                                         f"sh -c {shlex.quote(inner)} </dev/null >/dev/null 2>&1 & "
                                         "echo PID=$!")
        pid = next((int(w[4:]) for w in text.split() if w.startswith("PID=")), None)
        if rc != 0 or pid is None:
            conn.close()
            raise OSError(f"{self.name}: cannot start {' '.join(map(str, cmd))}: {text[-300:]}")
        fd = os.dup(tty_fd)                 # Process closes its copy of the slave at once
        pump = _TtyPump(fd, conn)
        p = GuestPopen(self, pid, {f"{base}.err": None}, f"{base}.rc", on_close=pump.close)
        self._tty = p
        return p

    def spawn(self, argv: Sequence[str], *, name: str, run: Optional[RunContext] = None,
              tracker: Optional[ResourceTracker] = None, **kw: Any) -> Process:
        return Process(name, argv, run, tracker, host=self, **kw).start()

    def run(self, argv: Sequence[str], *, netns: Optional[str] = None, check: bool = True,
            timeout: float = 30.0, input: Optional[str] = None,
            env: Optional[dict[str, str]] = None, cwd: Optional[Path] = None
            ) -> subprocess.CompletedProcess[str]:
        if input is not None:
            raise CommandError(f"{self.name}: no stdin for commands in the guest")
        return self.guest.run_argv(self.wrap(argv, netns), check=check, timeout=timeout, env=env)

    def environment(self, extra: dict[str, str]) -> dict[str, str]:
        """Only ``extra``: nothing of this host's environment goes into the guest."""
        return dict(extra)

    def killpg(self, pid: int, sig: int) -> None:
        self.guest.shell_line(f"kill -{int(sig)} -{int(pid)} 2>/dev/null; true")

    # -- the host itself ---------------------------------------------------------------------
    def check(self) -> None:
        self.guest.alive()

    def public(self) -> dict[str, object]:
        return {"via": "vm guest shell", "vm": self.guest.vnf_name, "accel": self.guest.accel}

    def cleanup_tag(self, tag: str, dry_run: bool = False) -> dict[str, object]:
        """Kill the guest's processes whose environment carries ``NFVPERF_TAG=tag``."""
        rc, out = self.guest.shell_line(
            "for p in /proc/[0-9]*; do grep -q " + shlex.quote(f"NFVPERF_TAG={tag}")
            + " $p/environ 2>/dev/null && echo ${p#/proc/}; done")
        pids = [int(w) for w in out.split() if w.isdigit()]
        if not dry_run:
            for p in pids:
                self.guest.shell_line(f"kill -9 {p} 2>/dev/null; true")
        return {"host": self.name, "processes": pids, "dry_run": dry_run}

    def leftovers(self, tag: str) -> dict[str, Any]:
        """What a run ``tag`` left in the guest: processes whose environment carries its
        ``NFVPERF_TAG``, files named after it where runs put theirs (the work directory,
        hugetlbfs, DPDK's runtime directory, /tmp), and 2 MB hugepages still in use (a DPDK
        process or file holding them)."""
        q = shlex.quote(tag)
        rc, out = self.guest.shell_line(
            "for p in /proc/[0-9]*; do grep -q " + shlex.quote(f"NFVPERF_TAG={tag}")
            + " $p/environ 2>/dev/null && echo P=${p#/proc/}; done; for f in "
            f"{GUEST_WORK}/*{q}* /dev/hugepages/*{q}* /var/run/dpdk/*{q}* /tmp/*{q}*; do "
            "[ -e \"$f\" ] && echo F=$f; done; grep -E '^HugePages_(Total|Free):' /proc/meminfo")
        words = out.split()
        pages = {w.rstrip(":"): int(n) for w, n in zip(words, words[1:])
                 if w.startswith("HugePages_") and n.isdigit()}
        return {"processes": [int(w[2:]) for w in words if w.startswith("P=") and w[2:].isdigit()],
                "files": [w[2:] for w in words if w.startswith("F=")],
                "hugepages_in_use": pages.get("HugePages_Total", 0) - pages.get("HugePages_Free", 0)}

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.close()
            self._conn = None
        if self._relay_pid is not None:
            with contextlib.suppress(Exception):
                self.killpg(self._relay_pid, signal.SIGKILL)
            self._relay_pid = None

    # -- files ---------------------------------------------------------------------------------
    def _ok(self, line: str) -> tuple[int, str]:
        return self.guest.shell_line(line)

    def exists(self, path: PathLike) -> bool:
        return self._ok(f"test -e {shlex.quote(str(path))}")[0] == 0

    def read_text(self, path: PathLike) -> str:
        p = shlex.quote(str(path))
        rc, out = self._ok(f"test -r {p} && {{ echo -n '@@B'; cat {p}; echo -n '@@E'; }}")
        if rc != 0 or "@@B" not in out:
            raise FileNotFoundError(f"{self.name}: {path}")
        return out.split("@@B", 1)[1].rsplit("@@E", 1)[0]

    def write_text(self, path: PathLike, text: str, mode: int = 0o644) -> None:
        b64 = base64.b64encode(text.encode()).decode()
        p = shlex.quote(str(path))
        rc, out = self._ok(f"echo {b64} | busybox base64 -d > {p} && chmod {mode:o} {p}")
        if rc != 0:
            raise OSError(f"{self.name}: cannot write {path}: {out}")

    def mkdir(self, path: PathLike, mode: int = 0o755) -> None:
        rc, out = self._ok(f"mkdir -p {shlex.quote(str(path))}")
        if rc != 0:
            raise OSError(f"{self.name}: cannot create {path}: {out}")

    def remove(self, path: PathLike) -> None:
        self._ok(f"rm -f {shlex.quote(str(path))}")

    def rmtree(self, path: PathLike) -> None:
        self._ok(f"rm -rf {shlex.quote(str(path))}")

    def glob(self, directory: PathLike, pattern: str) -> list[str]:
        rc, out = self._ok(f"ls -1 {shlex.quote(str(directory))} 2>/dev/null")
        return sorted(f"{directory}/{n}" for n in out.split() if fnmatch.fnmatch(n, pattern))

    def put(self, local: PathLike, remote: PathLike) -> None:
        data = Path(local).read_bytes()
        p = shlex.quote(str(remote))
        self._ok(f"rm -f {p}")
        for i in range(0, len(data), 3000):
            b64 = base64.b64encode(data[i:i + 3000]).decode()
            rc, out = self._ok(f"echo {b64} | busybox base64 -d >> {p}")
            if rc != 0:
                raise OSError(f"{self.name}: cannot write {remote}: {out}")

    def get(self, remote: PathLike, local: PathLike) -> None:
        rc, out = self._ok(f"busybox base64 {shlex.quote(str(remote))}")
        if rc != 0:
            raise FileNotFoundError(f"{self.name}: {remote}: {out}")
        Path(local).write_bytes(base64.b64decode("".join(out.split())))

    def connect_unix(self, path: PathLike, timeout: float = 10.0) -> socket.socket:
        """A connection to the Unix socket ``path`` in the guest: socat there relays it to the
        guest's third serial port, which QEMU offers on this host as a Unix socket."""
        self.close()
        if not self.exists(path):
            raise FileNotFoundError(f"{self.name}: no {path}")
        inner = shlex.join([GUEST_SOCAT, "/dev/ttyS2,raw,echo=0", f"UNIX-CONNECT:{path}"])
        rc, text = self.guest.shell_line(
            f"busybox setsid sh -c {shlex.quote(inner + ' 2>' + GUEST_WORK + '/relay.err')} "
            "</dev/null >/dev/null 2>&1 & echo PID=$!")
        pid = next((int(w[4:]) for w in text.split() if w.startswith("PID=")), None)
        if pid is None:
            raise OSError(f"{self.name}: cannot start the RPC relay: {text[-300:]}")
        self._relay_pid = pid
        deadline = time.monotonic() + timeout
        # connect only once socat holds both ends: it sets the serial port up (raw, flushed)
        # after opening it, and a byte that arrives before that is lost (measured: the '{' of
        # the first request)
        while True:
            rc, fds = self.guest.shell_line(f"ls -l /proc/{pid}/fd 2>/dev/null")
            if "ttyS2" in fds and "socket:" in fds:
                break
            if rc != 0 and not self.exists(f"/proc/{pid}"):
                _, err = self.guest.shell_line(f"cat {GUEST_WORK}/relay.err")
                raise OSError(f"{self.name}: the RPC relay (socat) exited: {err[-300:]}")
            if time.monotonic() > deadline:
                raise OSError(f"{self.name}: the RPC relay did not connect to {path} within "
                              f"{timeout:.0f} s")
            time.sleep(0.1)
        self._conn = connect_unix_retry(self.guest.rpc_sock, deadline, 0.1)
        return self._conn


def _is_file(s: Stream) -> bool:
    return s is not None and not isinstance(s, int) and hasattr(s, "write")


def _conforms(h: GuestPciHost) -> "Any":
    x: Host = h                        # mypy: GuestPciHost implements the Host protocol
    return x
