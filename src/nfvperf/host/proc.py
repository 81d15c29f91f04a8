"""One way to run a process: :class:`Process` (long-running, tracked) and :class:`LocalHost`.

Every process nfvperf starts — DUTs (testpmd, ovsdb-server, ovs-vswitchd, QEMU), the generator
(tgen), iperf3 clients and servers, the testpmd peer of the tgen tests — goes through
:class:`Process`:

* an argument list, never a shell string; optionally inside a network namespace
  (``ip netns exec <ns> argv...``);
* output in a log file (by default ``<run_dir>/<name>.log``, stdout and stderr merged; or stdout
  and stderr in two files), the command line written at its top;
* optional interaction over a pty (``interactive=True``): :meth:`Process.send`,
  :meth:`Process.expect`, :meth:`Process.command` — testpmd's ``testpmd>`` prompt;
* ``NFVPERF_TAG=<tag>`` in its environment (``nfvperf cleanup`` finds it by that), its own
  session (stop signals the whole group) and, by default, SIGTERM when the thread that started it
  dies (PR_SET_PDEATHSIG), so a run killed with SIGKILL leaves no busy-polling process behind;
* :meth:`Process.check` / :meth:`Process.running` / :meth:`Process.log_tail`;
* :meth:`Process.stop`: optionally a grace for a process that was asked to exit (a ``quit``
  command, an RPC), then SIGTERM, then SIGKILL; idempotent;
* registered with the run's :class:`~nfvperf.host.run.ResourceTracker` (kind ``process``) when
  one is given, so the tracker stops it on exit, failure, Ctrl-C and SIGTERM.

*Where* it runs is one parameter, ``host``: an object with ``wrap(argv, netns)``,
``popen(cmd, **kw)``, ``spawn(argv, ...)`` and ``run(argv, ...)``.  :data:`LOCAL` (a
:class:`LocalHost`) is the default; a remote host (SSH) goes behind the same four methods.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import pty
import re
import signal
import subprocess
import threading
import time
import tty
from pathlib import Path
import socket
from typing import IO, TYPE_CHECKING, Any, Callable, Optional, Sequence

from nfvperf.trial import DutFailure

from .base import Host, Popened, ProcessOptions, Stream
from .netns import netns_argv
from .run import TAG_RE, ResourceTracker, RunContext
import shutil
from .cleanup import cleanup

if TYPE_CHECKING:
    from typing_extensions import Unpack

log = logging.getLogger(__name__)

__all__ = ["Process", "ProcessError", "CommandError", "LocalHost", "LOCAL"]


def read_fd(fd: int, n: int) -> bytes:
    """Up to ``n`` bytes from ``fd``; b"" at its end or when it is gone (a closed pty)."""
    try:
        return os.read(fd, n)
    except OSError:
        return b""


class ProcessError(RuntimeError):
    """A process could not be started, did not come up, or did not answer in time."""


class CommandError(ProcessError):
    """A short command (:meth:`LocalHost.run`) failed; the message carries it and its output."""

    def __init__(self, msg: str, completed: Optional[subprocess.CompletedProcess] = None):
        super().__init__(msg)
        self.completed = completed


# ------------------------------------------------------------------------- die with parent
def _load_prctl():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl
    except Exception:  # noqa: BLE001
        return None


_PRCTL = _load_prctl()          # resolved before any fork: the child only calls it
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """preexec_fn: SIGTERM this child when the thread that started it dies (even by SIGKILL)."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


# ------------------------------------------------------------------------------------ hosts
class LocalHost:
    """This machine.  The seam for remote hosts: :class:`Process` only calls :meth:`wrap` and
    :meth:`popen`; callers use :meth:`spawn` (long-running, tracked) and :meth:`run` (short
    commands to completion)."""

    name = "local"
    remote = False
    #: where nfvperf keeps files on a testbed host (a remote one; here only for the interface)
    work_dir = "/var/lib/nfvperf"

    def wrap(self, argv: Sequence[str], netns: Optional[str] = None) -> list[str]:
        """The command that runs ``argv`` inside ``netns`` on this host."""
        return netns_argv(netns, argv)

    def popen(self, cmd: Sequence[str], *, stdin: Stream = None, stdout: Stream = None,
              stderr: Stream = None, env: Optional[dict[str, str]] = None,
              cwd: Optional[Path] = None, start_new_session: bool = False, close_fds: bool = True,
              preexec_fn: Optional[Callable[[], object]] = None) -> "subprocess.Popen[bytes]":
        """Start ``cmd`` (already wrapped), as :class:`subprocess.Popen` does."""
        return subprocess.Popen(list(cmd), stdin=stdin, stdout=stdout, stderr=stderr, env=env, cwd=cwd,
                                start_new_session=start_new_session, close_fds=close_fds,
                                preexec_fn=preexec_fn)

    def spawn(self, argv: Sequence[str], *, name: str, run: Optional[RunContext] = None,
              tracker: Optional[ResourceTracker] = None, **kw: Unpack[ProcessOptions]) -> "Process":
        """Start a :class:`Process` on this host (see its arguments) and return it."""
        return Process(name, argv, run, tracker, host=self, **kw).start()

    def run(self, argv: Sequence[str], *, netns: Optional[str] = None, check: bool = True,
            timeout: float = 30.0, input: Optional[str] = None,
            env: Optional[dict[str, str]] = None, cwd: Optional[Path] = None
            ) -> subprocess.CompletedProcess:
        """Run a short command to completion (text output captured).  Raises
        :class:`CommandError` when it cannot start, times out or (``check``) exits non-zero."""
        cmd = self.wrap(argv, netns)
        try:
            cp = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input,
                                env=self.environment(env) if env is not None else None, cwd=cwd)
        except subprocess.TimeoutExpired:
            raise CommandError(f"{' '.join(cmd)}: no exit within {timeout:g} s") from None
        except OSError as e:
            raise CommandError(f"cannot run {' '.join(cmd)}: {e}") from None
        if check and cp.returncode != 0:
            raise CommandError(f"{' '.join(cmd)} failed ({cp.returncode}): "
                               f"{cp.stderr.strip() or cp.stdout.strip()}", cp)
        return cp

    # -- what SshHost offers too: environment, signals, files, connections, cleanup ------------
    def environment(self, extra: dict[str, str]) -> dict[str, str]:
        """The environment of a process started here: ours plus ``extra``."""
        return {**os.environ, **extra}

    def killpg(self, pid: int, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)

    def check(self) -> None:
        """The local host is never lost."""

    def public(self) -> dict[str, object]:
        return {"name": self.name, "via": "local", "hostname": socket.gethostname()}

    def exists(self, path: "str | Path") -> bool:
        return os.path.lexists(path)

    def read_text(self, path: "str | Path") -> str:
        return Path(path).read_text(errors="replace")

    def write_text(self, path: "str | Path", text: str, mode: int = 0o644) -> None:
        Path(path).write_text(text)
        os.chmod(path, mode)

    def mkdir(self, path: "str | Path", mode: int = 0o755) -> None:
        Path(path).mkdir(parents=True, exist_ok=True, mode=mode)

    def remove(self, path: "str | Path") -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)

    def rmtree(self, path: "str | Path") -> None:
        shutil.rmtree(path, ignore_errors=True)

    def glob(self, directory: "str | Path", pattern: str) -> list[str]:
        return sorted(str(p) for p in Path(directory).glob(pattern))

    def put(self, local: "str | Path", remote: "str | Path") -> None:
        shutil.copyfile(local, remote)

    def get(self, remote: "str | Path", local: "str | Path") -> None:
        shutil.copyfile(remote, local)

    def connect_unix(self, path: "str | Path", timeout: float = 10.0) -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(str(path))
        except OSError:
            s.close()
            raise
        s.settimeout(None)
        return s

    def cleanup_tag(self, tag: str, dry_run: bool = False) -> dict[str, object]:
        return cleanup(tag, dry_run=dry_run, force=True).to_dict()

    def close(self) -> None:
        """Nothing to close."""

    def __repr__(self) -> str:
        return "LocalHost()"


LOCAL = LocalHost()


def _conforms(h: LocalHost) -> Host:
    """mypy checks here that LocalHost implements :class:`nfvperf.host.base.Host`."""
    return h


# ---------------------------------------------------------------------------------- process
class Process:
    """A tagged subprocess (see the module doc).

    ``Process(name, argv, run, tracker, netns=, env=, interactive=, cwd=, die_with_parent=)``
    then :meth:`start`.  Without ``run``, give ``log_path``.  Keyword-only extras:

    * ``host``: where it runs (default :data:`LOCAL`);
    * ``log_path``: the log (default ``run.path(f"{name}.log")``); ``stdout_path``: stdout in its
      own file (stderr then goes to ``log_path``); ``append``: False truncates them; ``header``:
      False leaves out the command line at the top of the log (a log that is parsed);
    * ``tag``: the run tag put in ``NFVPERF_TAG`` (default ``run.tag``; ignored unless it is a
      valid tag);
    * ``died``: the exception :meth:`check` / :meth:`expect` raise when the process exited
      (default :class:`~nfvperf.trial.DutFailure`).

    ``proc`` is the :class:`subprocess.Popen` (``pid``, ``poll()``, ``wait()``); ``argv`` the
    command without the namespace prefix, ``cmd`` the one started.
    """

    def __init__(self, name: str, argv: Sequence[str], run: Optional[RunContext] = None,
                 tracker: Optional[ResourceTracker] = None, netns: Optional[str] = None,
                 env: Optional[dict[str, str]] = None, interactive: bool = False,
                 cwd: Optional[Path] = None, die_with_parent: bool = True, *,
                 host: Optional[Host] = None, log_path: Optional[Path] = None,
                 stdout_path: Optional[Path] = None, append: bool = True, header: bool = True,
                 tag: Optional[str] = None, died: type[Exception] = DutFailure):
        if isinstance(argv, (str, bytes)):
            raise TypeError(f"{name}: argv must be an argument list, not a string")
        if not argv:
            raise ValueError(f"{name}: empty argv")
        self.name = name
        self.argv = [str(a) for a in argv]
        self.run = run
        self.tracker = tracker
        self.netns = netns
        self.env = dict(env or {})
        self.interactive = interactive
        self.cwd = cwd
        self.host = host if host is not None else LOCAL
        # PR_SET_PDEATHSIG follows the *thread* that forks: only from the main thread
        self.die_with_parent = die_with_parent and \
            threading.current_thread() is threading.main_thread()
        if log_path is None:
            if run is None:
                raise ValueError(f"{name}: give a RunContext or a log_path")
            log_path = run.path(f"{name}.log")
        self.log_path = Path(log_path)
        self.stdout_path = Path(stdout_path) if stdout_path is not None else None
        self.append = append
        self.header = header
        self.tag = tag if tag is not None else (run.tag if run is not None else None)
        self.died = died
        self.cmd: list[str] = self.host.wrap(self.argv, self.netns)
        self.proc: Optional[Popened] = None
        self._master_fd: Optional[int] = None
        self._buf = ""
        self._buf_lock = threading.Condition()
        self._reader: Optional[threading.Thread] = None
        self._logf: Optional[IO[Any]] = None
        self._outf: Optional[IO[Any]] = None
        self._reg: Optional[str] = None

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc else None

    def start(self) -> "Process":
        if self.proc is not None:
            raise ProcessError(f"{self.name} already started (pid {self.proc.pid})")
        extra: dict[str, str] = {}
        if self.tag and TAG_RE.fullmatch(self.tag):
            extra["NFVPERF_TAG"] = self.tag
        extra.update(self.env)
        env = self.host.environment(extra)
        mode = "ab" if self.append else "wb"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._logf = open(self.log_path, mode, buffering=0)
        if self.header:
            self._logf.write(("$ " + " ".join(self.cmd) + "\n").encode())
        if self.stdout_path is not None:
            self._outf = open(self.stdout_path, mode, buffering=0)
        log.info("starting %s: %s", self.name, " ".join(self.cmd))
        kw: dict[str, Any] = dict(env=env, cwd=self.cwd, start_new_session=True, close_fds=True,
                                  preexec_fn=_die_with_parent if self.die_with_parent else None)
        slave = None
        try:
            if self.interactive:
                master, slave = pty.openpty()
                self._master_fd = master
                tty.setraw(slave)  # no echo, no line discipline surprises
                self.proc = self.host.popen(self.cmd, stdin=slave, stdout=slave, stderr=slave, **kw)
            else:
                self.proc = self.host.popen(self.cmd, stdin=subprocess.DEVNULL,
                                            stdout=self._outf or self._logf,
                                            stderr=subprocess.STDOUT if self._outf is None
                                            else self._logf, **kw)
        except OSError as e:
            self._close_fds()
            raise ProcessError(f"cannot start {self.name} ({' '.join(self.cmd)}): {e}") from None
        finally:
            if slave is not None:
                os.close(slave)
        if self.interactive:
            self._reader = threading.Thread(target=self._read_pty, name=f"{self.name}-pty",
                                            daemon=True)
            self._reader.start()
        if self.tracker is not None:
            self._reg = f"{self.name}:{self.proc.pid}"
            self.tracker.add("process", self._reg, self.stop)
        return self

    # -- interactive console ----------------------------------------------------------------
    def _read_pty(self) -> None:
        fd = self._master_fd
        assert fd is not None
        while data := read_fd(fd, 65536):
            with contextlib.suppress(Exception):
                if self._logf is not None:
                    self._logf.write(data)
            with self._buf_lock:
                self._buf += data.decode(errors="replace")
                self._buf_lock.notify_all()
        with self._buf_lock:
            self._buf_lock.notify_all()

    def send(self, line: str) -> None:
        """Write ``line`` and a newline to the console."""
        if self._master_fd is None:
            raise ProcessError(f"{self.name} is not interactive (or already stopped)")
        os.write(self._master_fd, (line + "\n").encode())

    def expect(self, pattern: str, timeout: float = 10.0, consume: bool = True) -> str:
        """Wait until ``pattern`` (regex) appears in the console output; return the output up to
        and including the match (and drop it from the buffer when ``consume``).  Raises
        ``died`` when the process exits first, :class:`ProcessError` after ``timeout``."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._buf_lock:
            while True:
                m = rx.search(self._buf)
                if m:
                    out = self._buf[: m.end()]
                    if consume:
                        self._buf = self._buf[m.end():]
                    return out
                if not self.running() and not (self._reader and self._reader.is_alive()):
                    raise self.died(f"{self.name} exited ({self.returncode()}) while waiting for "
                                    f"{pattern!r}; log {self.log_path}:\n{self.log_tail()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ProcessError(f"{self.name}: no {pattern!r} within {timeout:g} s; "
                                       f"log {self.log_path}:\n{self.log_tail()}")
                self._buf_lock.wait(min(left, 0.2))

    def command(self, line: str, prompt: str, timeout: float = 10.0) -> str:
        """Send a console command and return its output up to and including the next prompt."""
        with self._buf_lock:
            self._buf = ""
        self.send(line)
        return self.expect(prompt, timeout)

    @property
    def buffer(self) -> str:
        """Console output not consumed by :meth:`expect` yet."""
        with self._buf_lock:
            return self._buf

    # -- state ---------------------------------------------------------------------------------
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    alive = running

    def returncode(self) -> Optional[int]:
        return None if self.proc is None else self.proc.poll()

    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        """Wait up to ``timeout`` s for the process to exit; its status, or None if it runs."""
        if self.proc is None:
            return None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def log_tail(self, lines: int = 20, nbytes: Optional[int] = None) -> str:
        """The last ``lines`` lines of the log (or its last ``nbytes`` bytes)."""
        try:
            if nbytes is not None:
                with open(self.log_path, "rb") as f:
                    f.seek(0, os.SEEK_END)
                    f.seek(max(0, f.tell() - nbytes))
                    return f.read().decode(errors="replace")
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def describe_exit(self) -> str:
        rc = self.returncode()
        if rc is None:
            return "running"
        lost = getattr(self.proc, "lost", None)
        if lost:
            return f"unreachable: {lost}"
        return f"killed by signal {-rc}" if rc < 0 else f"exited with status {rc}"

    def check(self) -> None:
        """Raise ``died`` (DutFailure by default) when the process is not running."""
        if self.proc is None:
            raise self.died(f"{self.name} was never started")
        if self.proc.poll() is not None:
            raise self.died(f"{self.name} (pid {self.proc.pid}) {self.describe_exit()}; "
                            f"log {self.log_path}:\n{self.log_tail()}")

    def wait_for_log(self, pattern: str, timeout: float = 20.0) -> None:
        """Wait until ``pattern`` appears in the log file (non-interactive processes)."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                if rx.search(self.log_path.read_text(errors="replace")):
                    return
            self.check()
            time.sleep(0.05)
        raise ProcessError(f"{self.name}: no {pattern!r} in its log within {timeout:g} s:\n"
                           f"{self.log_tail()}")

    def stop(self, timeout: float = 5.0, sig: int = signal.SIGTERM, grace: float = 0.0
             ) -> Optional[int]:
        """Wait ``grace`` s for a process that was asked to exit, then signal its process group
        with ``sig``, wait ``timeout`` s, then SIGKILL.  Returns the exit status.  Idempotent."""
        if self.proc is None:
            return None
        if grace > 0 and self.proc.poll() is None:
            self.wait(grace)
        if self.proc.poll() is None:
            self._killpg(sig)
            if self.wait(timeout) is None:
                self._killpg(signal.SIGKILL)
                self.wait(5)
        # the group may hold children that outlived the leader
        self._killpg(signal.SIGKILL)
        with contextlib.suppress(Exception):
            getattr(self.proc, "close", lambda: None)()     # a remote process: its channel
        self._close_fds()
        if self.tracker is not None and self._reg is not None:
            self.tracker.forget("process", self._reg)
            self._reg = None
        return self.proc.poll()

    def _killpg(self, sig: int) -> None:
        assert self.proc is not None
        self.host.killpg(self.proc.pid, sig)

    def _close_fds(self) -> None:
        if self._master_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._master_fd)
            self._master_fd = None
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(2)
        for f in (self._logf, self._outf):
            if f is not None:
                with contextlib.suppress(Exception):
                    f.close()
        self._logf = self._outf = None

    def __enter__(self) -> "Process":
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"Process({self.name!r}, pid={self.pid}, {self.describe_exit()})"
