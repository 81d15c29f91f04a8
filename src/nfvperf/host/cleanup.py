"""What killed runs left behind on this host, found by the run tag, and its removal (the host part
of ``nfvperf cleanup``; the command itself, which also marks the store's killed runs aborted, is
:mod:`nfvperf.store.cleanup`).

A run names everything with its tag (``nfv`` + 6 hex digits, see :mod:`nfvperf.host.run`):

* processes whose command line or environment (``NFVPERF_TAG``) carries the tag — tgen, testpmd,
  ovs-vswitchd, ovsdb-server, qemu, iperf3 ...;
* network namespaces ``<tag>-<role>`` and links ``<tag>...`` in the root namespace;
* hugepage files and DPDK runtime directories of ``--file-prefix`` values containing the tag;
* sockets in the run directory ``/run/nfvperf/<tag>/`` and ``/tmp/*<tag>*.sock``;
* the run's entry in the live-run registry ``/run/nfvperf/runs/<tag>``.

Without ``--tag`` only runs that are not live are cleaned: a tag whose owner (registered by its
ResourceTracker) still runs is spared, and so is a tagged process whose parent is alive (it belongs
to somebody's running session).  ``--tag T`` cleans that run even when its owner lives — and
``--force`` also cleans every live run.  Hugepage files a live process maps are never deleted.
"""
from __future__ import annotations

import contextlib
import os
import signal
import stat
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from . import hugepages as hp, netns as N
from .run import DEFAULT_RUN_ROOT, REGISTRY_DIR, TAG_RE, RunContext, normalize_tag


@dataclass
class CleanupReport:
    tags: list[str] = field(default_factory=list)
    processes: list[str] = field(default_factory=list)
    netns: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    hugepage_files: list[str] = field(default_factory=list)
    sockets: list[str] = field(default_factory=list)
    registry: list[str] = field(default_factory=list)
    aborted_runs: list[str] = field(default_factory=list)    # store runs marked aborted (process gone)
    spared_live: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def removed_count(self) -> int:
        return (len(self.processes) + len(self.netns) + len(self.links) + len(self.hugepage_files)
                + len(self.sockets))

    def to_dict(self) -> dict:
        return asdict(self)

    def format(self, dry_run: bool = False) -> str:
        verb = "would remove" if dry_run else "removed"
        lines = []
        for label, items in (("processes", self.processes), ("netns", self.netns),
                             ("links", self.links), ("hugepage files/dirs", self.hugepage_files),
                             ("sockets", self.sockets), ("registry entries", self.registry)):
            if items:
                lines.append(f"{verb} {len(items)} {label}:")
                shown = items if len(items) <= 12 else items[:10] + [f"... and {len(items) - 10} more"]
                lines += [f"  {x}" for x in shown]
        if self.spared_live:
            lines.append(f"spared live run(s): {', '.join(sorted(set(self.spared_live)))} "
                         "(use --tag T or --force to remove them)")
        if self.aborted_runs:
            lines.append(f"{'would mark' if dry_run else 'marked'} {len(self.aborted_runs)} run(s) "
                         "aborted in the results store (their process is gone):")
            lines += [f"  {x}" for x in self.aborted_runs]
        for e in self.errors:
            lines.append(f"error: {e}")
        if not lines:
            lines.append("nothing to clean")
        return "\n".join(lines)


# ---------------------------------------------------------------------------------- processes
def _ancestors() -> set[int]:
    out = set()
    pid = os.getpid()
    while pid > 1:
        out.add(pid)
        try:
            rest = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            pid = int(rest[1])
        except (OSError, IndexError, ValueError):
            break
    return out


def _proc_info(pid: int) -> Optional[tuple[str, Optional[str], int]]:
    """(cmdline, NFVPERF_TAG or None, ppid) of a process, None if it is gone or a kernel thread."""
    d = Path(f"/proc/{pid}")
    try:
        raw = (d / "cmdline").read_bytes()
        if not raw:
            return None
        cmd = raw.rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")
        env_tag = None
        with contextlib.suppress(OSError):
            for kv in (d / "environ").read_bytes().split(b"\0"):
                if kv.startswith(b"NFVPERF_TAG="):
                    env_tag = kv.split(b"=", 1)[1].decode(errors="replace")
        rest = (d / "stat").read_text().rsplit(")", 1)[1].split()
        if rest[0] in ("Z", "X"):
            return None
        return cmd, env_tag, int(rest[1])
    except (OSError, IndexError, ValueError):
        return None


def tagged_processes(tag: Optional[str] = None) -> list[tuple[int, str, str, int]]:
    """[(pid, tag, cmdline, ppid)] of processes carrying ``tag`` (any run tag when None)."""
    skip = _ancestors()
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        pid = int(d.name)
        if pid in skip:
            continue
        info = _proc_info(pid)
        if info is None:
            continue
        cmd, env_tag, ppid = info
        found: Optional[str]
        if tag:
            found = tag if tag in cmd or env_tag == tag else None
        elif env_tag and TAG_RE.fullmatch(env_tag):
            found = env_tag
        else:
            found = m.group(0) if (m := TAG_RE.search(cmd)) else None
        if found:
            out.append((pid, found, cmd, ppid))
    return out


def _alive(pid: int) -> bool:
    return _proc_info(pid) is not None


def kill_processes(pids: Sequence[int], grace_s: float = 2.0) -> None:
    """SIGTERM, ``grace_s`` for them to exit, then SIGKILL for those left (waited for up to 3 s)."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 3.0)):
        for pid in pids:
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.05)


# ---------------------------------------------------------------------------------- discovery
def _tag_of(name: str) -> Optional[str]:
    return m.group(0) if (m := TAG_RE.match(name)) else None


def _netns_tagged(tag: Optional[str]) -> list[tuple[str, str]]:
    return [(ns, t) for ns in N.list_netns() if (t := _tag_of(ns)) and (tag is None or t == tag)
            and (ns == t or ns.startswith(t + "-"))]


def _links_tagged(tag: Optional[str]) -> list[tuple[str, str]]:
    with contextlib.suppress(Exception):
        return [(name, t) for name in N.list_links() if (t := _tag_of(name)) and (tag is None or t == tag)]
    return []


def _sockets_tagged(tag: Optional[str]) -> list[tuple[Path, str]]:
    out = []
    with contextlib.suppress(OSError):
        for d in DEFAULT_RUN_ROOT.iterdir():
            t = _tag_of(d.name)
            if d.is_dir() and t == d.name and (tag is None or t == tag):
                for f in d.rglob("*"):
                    with contextlib.suppress(OSError):
                        if stat.S_ISSOCK(f.lstat().st_mode):
                            out.append((f, t))
    with contextlib.suppress(OSError):
        for f in Path("/tmp").iterdir():
            m = TAG_RE.search(f.name)
            if m and (tag is None or m.group(0) == tag):
                with contextlib.suppress(OSError):
                    if stat.S_ISSOCK(f.lstat().st_mode):
                        out.append((f, m.group(0)))
    return out


# ------------------------------------------------------------------------------------ cleanup
def cleanup(tag: Optional[str] = None, dry_run: bool = False, force: bool = False) -> CleanupReport:
    """Find and (unless ``dry_run``) remove leftovers of ``tag`` (or of every dead run)."""
    if tag is not None:
        tag = normalize_tag(tag)
    rep = CleanupReport()
    live = set() if force else RunContext.live_tags()
    if tag is not None:
        live.discard(tag)        # an explicit --tag is cleaned even if its owner still runs

    # 1. processes (first: they hold links, hugepage files, sockets)
    procs = tagged_processes(tag)
    victims = []
    for pid, t, cmd, ppid in procs:
        if t in live:
            rep.spared_live.append(t)
            continue
        if tag is None and not force and ppid > 1 and _alive(ppid) and \
                ppid not in {p for p, *_ in procs}:
            # its parent (not itself a leftover) is running: somebody's live session
            rep.spared_live.append(t)
            continue
        victims.append(pid)
        rep.processes.append(f"{pid} [{t}] {cmd[:160]}")
        if t not in rep.tags:
            rep.tags.append(t)
    if victims and not dry_run:
        kill_processes(victims)

    # 2. namespaces, then root-namespace links (a link that went with its namespace is no error)
    for what, found, into, delete, gone in (
            ("netns", _netns_tagged, rep.netns, N.delete_netns, lambda _n: False),
            ("link", _links_tagged, rep.links, N.delete_link, lambda n: not N.link_exists(n))):
        if what == "link" and not dry_run and rep.netns:
            time.sleep(0.1)   # veth peers of deleted namespaces disappear asynchronously
        for name, t in found(tag):
            if t in live:
                rep.spared_live.append(t)
                continue
            into.append(name)
            if not dry_run:
                try:
                    delete(name)
                except Exception as e:  # noqa: BLE001
                    if not gone(name):
                        rep.errors.append(f"{what} {name}: {e}")

    # 3. hugepage files / DPDK runtime dirs not used by any live process
    try:
        rep.hugepage_files = hp.remove_leftovers(tag, spare_tags=live, dry_run=dry_run)
    except Exception as e:  # noqa: BLE001
        rep.errors.append(f"hugepages: {e}")

    # 4. sockets, run dirs, registry
    for f, t in _sockets_tagged(tag):
        if t in live:
            continue
        rep.sockets.append(str(f))
        if not dry_run:
            with contextlib.suppress(OSError):
                f.unlink()
    with contextlib.suppress(OSError):
        for d in DEFAULT_RUN_ROOT.iterdir():
            dtag = _tag_of(d.name)
            if d.is_dir() and dtag == d.name and (tag is None or dtag == tag) and dtag not in live \
                    and not dry_run:
                with contextlib.suppress(OSError):
                    d.rmdir()        # only when empty: logs of a killed run are kept
    with contextlib.suppress(OSError):
        for f in REGISTRY_DIR.iterdir():
            if (tag is None or f.name == tag) and f.name not in live:
                rep.registry.append(f.name)
                if not dry_run:
                    with contextlib.suppress(OSError):
                        f.unlink()
    for t in rep.netns + rep.links:
        tt = _tag_of(t)
        if tt and tt not in rep.tags:
            rep.tags.append(tt)
    rep.spared_live = sorted(set(rep.spared_live))
    return rep
