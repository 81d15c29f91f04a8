"""Run context and resource tracking.

Every resource a run creates (netns, veth, bridge, processes, hugepage files, sockets) is named with
the run's *tag* and registered with a :class:`ResourceTracker`, which releases everything in reverse
order on normal exit, on failure and on Ctrl-C / SIGTERM.  What a killed run leaves behind is found
by its tag and removed by ``nfvperf cleanup`` (:mod:`nfvperf.host.cleanup`).

Tags
----
A tag is ``nfv`` followed by exactly six lowercase hex digits (``nfv3a9f1c``).  That makes every
derived name short enough for Linux interface names (15 chars: ``nfv3a9f1cp0``, ``nfv3a9f1cbr0``)
and easy to recognise in netns names, link names, DPDK ``--file-prefix`` values (hugepage files),
process command lines and socket paths.  Any other string given as a tag is turned into a valid tag
deterministically (``nfv`` + the first six hex digits of its SHA-1), and kept as ``label``.
"""
from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import logging
import os
import re
import secrets
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

log = logging.getLogger(__name__)

TAG_PREFIX = "nfv"
TAG_RE = re.compile(r"nfv[0-9a-f]{6}")
#: where live runs announce themselves (owner pid), so cleanup can tell a killed run from a live one
REGISTRY_DIR = Path(os.environ.get("NFVPERF_REGISTRY_DIR", "/run/nfvperf/runs"))
DEFAULT_RUN_ROOT = Path(os.environ.get("NFVPERF_RUN_ROOT", "/run/nfvperf"))
#: INFO lines on this logger are progress of long set-up steps (e.g. installing 2M OpenFlow
#: rules); ``nfvperf run`` prints them with its progress (:func:`nfvperf.runner.progress_logs`)
PROGRESS_LOGGER = "nfvperf.progress"


def new_tag() -> str:
    return TAG_PREFIX + secrets.token_hex(3)


def normalize_tag(tag: Optional[str]) -> str:
    """A valid tag for ``tag`` (itself when valid, else ``nfv`` + sha1(tag)[:6]); new if None."""
    if not tag:
        return new_tag()
    if TAG_RE.fullmatch(tag):
        return tag
    return TAG_PREFIX + hashlib.sha1(tag.encode()).hexdigest()[:6]


def _proc_stat(pid: int) -> Optional[list[str]]:
    """The fields of /proc/<pid>/stat after the parenthesised comm (which may contain spaces):
    [0] the state, [19] field 22, starttime; None when the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _proc_starttime(pid: int) -> Optional[int]:
    rest = _proc_stat(pid)
    return int(rest[19]) if rest else None


def pid_alive(pid: int, starttime: Optional[int] = None) -> bool:
    rest = _proc_stat(pid)
    return rest is not None and rest[0] not in ("Z", "X") and \
        (starttime is None or int(rest[19]) == starttime)


@dataclass(init=False)
class RunContext:
    """Names and places of one run.  ``tag`` names every resource; ``run_dir`` holds logs, sockets,
    databases of the run's processes.  ``run_dir`` defaults to ``/run/nfvperf/<tag>``."""

    tag: str
    run_dir: Path
    label: str = ""

    # Written out (not the dataclass __init__) so that tag and run_dir may be omitted yet are
    # typed as always set afterwards.
    def __init__(self, tag: Optional[str] = None, run_dir: Optional[str | os.PathLike[str]] = None,
                 label: str = "") -> None:
        self.tag = normalize_tag(tag)
        self.label = label or tag or self.tag
        self.run_dir = Path(run_dir) if run_dir is not None else DEFAULT_RUN_ROOT / self.tag
        self._claimed = False

    # -- names -------------------------------------------------------------------------------
    def ifname(self, suffix: str) -> str:
        """Interface name ``<tag><suffix>``; at most 15 characters."""
        name = f"{self.tag}{suffix}"
        if len(name) > 15:
            raise ValueError(f"interface name {name!r} longer than 15 characters (suffix {suffix!r})")
        return name

    def netns(self, role: str) -> str:
        """Network namespace name ``<tag>-<role>``."""
        return f"{self.tag}-{role}"

    def file_prefix(self, role: str) -> str:
        """DPDK ``--file-prefix`` (hugepage files, /var/run/dpdk/<prefix>) for one process."""
        return f"{self.tag}{role}"

    def path(self, name: str) -> Path:
        """A file in the run directory (created on first use)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        return self.run_dir / name

    def env(self) -> dict[str, str]:
        """Environment entries that mark a child process as belonging to this run."""
        return {"NFVPERF_TAG": self.tag}

    # -- registry of live runs ---------------------------------------------------------------
    def claim(self) -> None:
        """Announce this run as live (owner = this process), so cleanup without --tag spares it."""
        if self._claimed:
            return
        REGISTRY_DIR.mkdir(parents=True, exist_ok=True)
        rec = {"tag": self.tag, "label": self.label, "pid": os.getpid(),
               "starttime": _proc_starttime(os.getpid()), "run_dir": str(self.run_dir),
               "started": time.time()}
        (REGISTRY_DIR / self.tag).write_text(json.dumps(rec))
        self._claimed = True

    def release_claim(self) -> None:
        if self._claimed:
            with contextlib.suppress(FileNotFoundError):
                (REGISTRY_DIR / self.tag).unlink()
            self._claimed = False

    @staticmethod
    def live_tags() -> set[str]:
        """Tags whose owner process is still running."""
        out: set[str] = set()
        if not REGISTRY_DIR.is_dir():
            return out
        for f in REGISTRY_DIR.iterdir():
            try:
                rec = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            if pid_alive(int(rec.get("pid", -1)), rec.get("starttime")):
                out.add(rec.get("tag", f.name))
        return out


_LIVE_TRACKERS: set[int] = set()
_INSTALLED: dict[int, Any] = {}


@dataclass
class _Resource:
    kind: str
    name: str
    release: Callable[[], object]
    created: float = field(default_factory=time.time)


class ResourceTracker:
    """Registers created resources and releases them all, newest first.

    Use as a context manager; :meth:`release_all` also runs at interpreter exit and is reached on
    SIGINT / SIGTERM (the handlers turn the signal into KeyboardInterrupt / SystemExit in the main
    thread, so ``with`` blocks unwind).  A release that fails is logged and recorded in
    :attr:`errors`; the others still run.
    """

    def __init__(self, run: Optional[RunContext] = None, install_signal_handlers: bool = True):
        self.run = run
        self._items: list[_Resource] = []
        self._lock = threading.RLock()
        self.errors: list[str] = []
        self.released: list[str] = []
        self._closed = False
        # Forked children (pyroute2 forks helpers to open sockets in a namespace; subprocess
        # pre-exec) inherit this object, its atexit hook and the signal handlers: only the
        # process that created the tracker may release anything.
        self._owner_pid = os.getpid()
        if run is not None:
            run.claim()
        atexit.register(self.release_all)
        if install_signal_handlers and threading.current_thread() is threading.main_thread():
            self._install_handlers()

    # -- registration ------------------------------------------------------------------------
    def add(self, kind: str, name: str, release: Callable[[], object]) -> None:
        with self._lock:
            self._items.append(_Resource(kind, name, release))

    def callback(self, name: str, release: Callable[[], object]) -> None:
        self.add("callback", name, release)

    def forget(self, kind: str, name: str) -> None:
        """Drop a resource that was released by other means."""
        with self._lock:
            self._items = [r for r in self._items if not (r.kind == kind and r.name == name)]

    def items(self) -> list[tuple[str, str]]:
        with self._lock:
            return [(r.kind, r.name) for r in self._items]

    def release(self, kind: str, name: str) -> None:
        """Release one resource now."""
        with self._lock:
            found = [r for r in self._items if r.kind == kind and r.name == name]
            self._items = [r for r in self._items if r not in found]
        for r in reversed(found):
            self._do_release(r)

    def _do_release(self, r: _Resource) -> None:
        try:
            r.release()
            self.released.append(f"{r.kind}:{r.name}")
        except Exception as e:  # noqa: BLE001 - every release must be attempted
            msg = f"releasing {r.kind} {r.name}: {e}"
            log.warning(msg)
            self.errors.append(msg)

    def release_all(self) -> None:
        if os.getpid() != self._owner_pid:
            return
        # A second Ctrl-C / SIGTERM must not cut the release short: while releasing, those
        # signals are only noted (Python-level handlers, so exec'd children get the defaults and
        # forked helpers are not left with blocked signals).
        saved: dict[signal.Signals, Any] = {}
        noted: list[int] = []
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                try:
                    saved[sig] = signal.getsignal(sig)
                    signal.signal(sig, lambda signum, frame: noted.append(signum))
                except (ValueError, OSError):
                    saved.pop(sig, None)
        try:
            self._release_all()
        finally:
            for sig, old in saved.items():
                with contextlib.suppress(ValueError, OSError):
                    signal.signal(sig, old if old is not None else signal.SIG_DFL)
            if noted:
                log.warning("signal(s) %s arrived while releasing resources; release completed",
                            sorted(set(noted)))
        if self._closed:
            self._restore_handlers()

    def _release_all(self) -> None:
        while True:
            with self._lock:
                if not self._items:
                    break
                r = self._items.pop()
            self._do_release(r)
        if not self._closed:
            self._closed = True
            if self.run is not None:
                self.run.release_claim()
                # the default run dir (/run/nfvperf/<tag>) goes when nothing was written to it
                if self.run.run_dir == DEFAULT_RUN_ROOT / self.run.tag:
                    with contextlib.suppress(OSError):
                        self.run.run_dir.rmdir()
            with contextlib.suppress(Exception):
                atexit.unregister(self.release_all)

    # -- signals -----------------------------------------------------------------------------
    # One process-wide handler for SIGTERM/SIGHUP while at least one tracker is live: it turns
    # the signal into SystemExit so every `with` block (and so every tracker) unwinds.
    def _install_handlers(self) -> None:
        _LIVE_TRACKERS.add(id(self))
        if _INSTALLED:
            return
        owner = self._owner_pid

        def on_term(signum, frame):  # noqa: ARG001
            if os.getpid() != owner:          # a forked child: die as if no handler were set
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)
                return
            raise SystemExit(128 + signum)

        for sig in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(ValueError, OSError):
                old = signal.getsignal(sig)
                # keep a handler somebody else installed on purpose
                if old in (signal.SIG_DFL, None):
                    signal.signal(sig, on_term)
                    _INSTALLED[sig] = old
        # SIGINT: Python's default handler already raises KeyboardInterrupt.

    def _restore_handlers(self) -> None:
        _LIVE_TRACKERS.discard(id(self))
        if _LIVE_TRACKERS or threading.current_thread() is not threading.main_thread() \
                or os.getpid() != self._owner_pid:
            return
        for sig, old in list(_INSTALLED.items()):
            with contextlib.suppress(ValueError, OSError):
                signal.signal(sig, old if old is not None else signal.SIG_DFL)
        _INSTALLED.clear()

    def __enter__(self) -> "ResourceTracker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release_all()
