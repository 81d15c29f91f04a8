"""The :class:`Host` interface: what the topology, DUT adapters, tgen and the VM code may ask of
the machine they run on, as Open vSwitch's ``netdev_class`` declares a provider's operations.

Two implementations: :class:`nfvperf.host.proc.LocalHost` (this machine) and
:class:`nfvperf.host.ssh.SshHost` (a testbed host over SSH).  Both are checked against this
protocol by mypy (the assignments at the end of ``proc.py`` and ``ssh.py``), so a method added to
one and forgotten in the other, or a signature that drifts, fails ``make lint``.

Error contracts:

- :meth:`Host.run` raises :class:`nfvperf.host.proc.CommandError` when the command cannot start,
  times out, or (``check``) exits non-zero; an SSH host whose connection is gone raises
  ``HostLost`` (a :class:`nfvperf.trial.DutFailure`) instead.
- :meth:`Host.check` raises ``HostLost`` when the host is gone; the local host never is.
- File operations raise ``OSError`` (``FileNotFoundError`` for a missing path) except
  :meth:`Host.remove` and :meth:`Host.rmtree`, which ignore a missing path.
- :meth:`Host.killpg` never raises for a process group that is already gone.
"""
from __future__ import annotations

from pathlib import Path
from typing import IO, TYPE_CHECKING, Callable, Optional, Protocol, Sequence, TypedDict, Union

if TYPE_CHECKING:
    import subprocess

    from typing_extensions import Unpack

    from .proc import Process
    from .run import ResourceTracker, RunContext

PathLike = Union[str, Path]
#: what a process's stdin/stdout/stderr may be given as (a binary file, a descriptor, DEVNULL/STDOUT)
Stream = Union[IO[bytes], int, None]


class ProcessOptions(TypedDict, total=False):
    """The keyword arguments of :class:`nfvperf.host.proc.Process` that :meth:`Host.spawn` passes on."""

    netns: Optional[str]
    env: Optional[dict[str, str]]
    interactive: bool
    cwd: Optional[Path]
    die_with_parent: bool
    log_path: Optional[Path]
    stdout_path: Optional[Path]
    append: bool
    header: bool
    tag: Optional[str]
    died: type[Exception]


class Popened(Protocol):
    """A started process as :class:`nfvperf.host.proc.Process` drives it (``subprocess.Popen``
    locally, ``RemotePopen`` over SSH)."""

    pid: int
    returncode: Optional[int]

    def poll(self) -> Optional[int]: ...

    def wait(self, timeout: Optional[float] = None) -> int: ...


class Connection(Protocol):
    """A connected stream socket (a Unix socket locally, a paramiko channel over SSH)."""

    def sendall(self, data: bytes) -> None: ...

    def recv(self, n: int) -> bytes: ...

    def settimeout(self, timeout: Optional[float]) -> None: ...

    def close(self) -> None: ...


class Host(Protocol):
    """A machine nfvperf runs processes and keeps files on."""

    name: str
    remote: bool
    work_dir: str

    # -- processes -------------------------------------------------------------------------
    def wrap(self, argv: Sequence[str], netns: Optional[str] = None) -> list[str]:
        """The command that runs ``argv`` inside ``netns`` on this host."""
        ...

    def popen(self, cmd: Sequence[str], *, stdin: Stream = None, stdout: Stream = None,
              stderr: Stream = None, env: Optional[dict[str, str]] = None,
              cwd: Optional[Path] = None, start_new_session: bool = False, close_fds: bool = True,
              preexec_fn: Optional[Callable[[], object]] = None) -> Popened:
        """Start ``cmd`` (already wrapped)."""
        ...

    def spawn(self, argv: Sequence[str], *, name: str, run: Optional[RunContext] = None,
              tracker: Optional[ResourceTracker] = None, **kw: Unpack[ProcessOptions]) -> Process:
        """Start a tracked :class:`Process` (``kw``: its keyword arguments)."""
        ...

    def run(self, argv: Sequence[str], *, netns: Optional[str] = None, check: bool = True,
            timeout: float = 30.0, input: Optional[str] = None,
            env: Optional[dict[str, str]] = None, cwd: Optional[Path] = None
            ) -> subprocess.CompletedProcess[str]:
        """Run a short command to completion, text output captured."""
        ...

    def environment(self, extra: dict[str, str]) -> dict[str, str]:
        """The environment of a process started here."""
        ...

    def killpg(self, pid: int, sig: int) -> None:
        """Signal a process group (nothing when it is gone)."""
        ...

    # -- the host itself ---------------------------------------------------------------------
    def check(self) -> None:
        """Raise ``HostLost`` when the host is gone."""
        ...

    def public(self) -> dict[str, object]:
        """What a result may record about the host (never a key)."""
        ...

    def cleanup_tag(self, tag: str, dry_run: bool = False) -> dict[str, object]:
        """Remove (or only list) what run ``tag`` left on the host."""
        ...

    def close(self) -> None:
        """End the connection (every remote process of this controller dies with it)."""
        ...

    # -- files ---------------------------------------------------------------------------------
    def exists(self, path: PathLike) -> bool: ...

    def read_text(self, path: PathLike) -> str: ...

    def write_text(self, path: PathLike, text: str, mode: int = 0o644) -> None: ...

    def mkdir(self, path: PathLike, mode: int = 0o755) -> None: ...

    def remove(self, path: PathLike) -> None: ...

    def rmtree(self, path: PathLike) -> None: ...

    def glob(self, directory: PathLike, pattern: str) -> list[str]: ...

    def put(self, local: PathLike, remote: PathLike) -> None: ...

    def get(self, remote: PathLike, local: PathLike) -> None: ...

    def connect_unix(self, path: PathLike, timeout: float = 10.0) -> Connection:
        """A stream connection to the Unix socket ``path`` on the host."""
        ...
