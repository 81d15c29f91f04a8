"""Hugepages: pools (2 MB / 1 GB), hugetlbfs mounts, reservations and leftover files.

DPDK processes of a run use ``--file-prefix <tag><role>``, so their hugepage files in hugetlbfs
(``/dev/hugepages/<prefix>map_<n>``) and their runtime directory (``/var/run/dpdk/<prefix>``) carry
the run's tag.  A killed DPDK process leaves those files behind and the pages stay allocated;
:func:`remove_leftovers` deletes files that carry a run tag *and* that no live process maps or holds
open — never anybody else's files, never a live process's.

The pool is shared with everything else on the host: :func:`reserve` only ever *raises*
``nr_hugepages``.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Optional

from .run import TAG_RE

if TYPE_CHECKING:
    from .base import Host

SYS_HUGEPAGES = Path("/sys/kernel/mm/hugepages")
DPDK_RUNTIME_DIRS = (Path("/var/run/dpdk"), Path("/run/dpdk"))


@dataclass
class Pool:
    size_kb: int
    total: int
    free: int


@dataclass
class Mount:
    path: str
    pagesize_kb: int


def _int(p: Path) -> int:
    try:
        return int(p.read_text().strip())
    except (OSError, ValueError):
        return 0


def pools() -> list[Pool]:
    out: list[Pool] = []
    if not SYS_HUGEPAGES.is_dir():
        return out
    for d in sorted(SYS_HUGEPAGES.glob("hugepages-*kB")):
        size = int(d.name.split("-")[1][:-2])
        out.append(Pool(size, _int(d / "nr_hugepages"), _int(d / "free_hugepages")))
    return out


def free_mb() -> int:
    return sum(p.free * p.size_kb // 1024 for p in pools())


def default_pagesize_kb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Hugepagesize:"):
            return int(line.split()[1])
    return 2048


def hugetlbfs_mounts() -> list[Mount]:
    out: list[Mount] = []
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        parts = line.split()
        if len(parts) >= 4 and parts[2] == "hugetlbfs":
            m = re.search(r"pagesize=(\d+)([KMG])", parts[3])
            size = int(m.group(1)) * {"K": 1, "M": 1024, "G": 1048576}[m.group(2)] if m else default_pagesize_kb()
            out.append(Mount(parts[1], size))
    return out


def reserve(count: int, size_kb: int = 2048, node: Optional[int] = None) -> int:
    """Make at least ``count`` pages of ``size_kb`` exist (never lowers the pool).
    Returns the total afterwards (may stay below ``count`` if memory is short)."""
    if node is None:
        f = SYS_HUGEPAGES / f"hugepages-{size_kb}kB" / "nr_hugepages"
    else:
        f = Path(f"/sys/devices/system/node/node{node}/hugepages/hugepages-{size_kb}kB/nr_hugepages")
    if not f.exists():
        raise FileNotFoundError(f"{size_kb} kB hugepages not supported here ({f} missing); 1 GB "
                                "pages usually need hugepagesz=1G on the kernel command line")
    cur = _int(f)
    if cur < count:
        f.write_text(str(count))
    return _int(f)


def ensure_mount(path: str = "/dev/hugepages", pagesize: str = "2M") -> str:
    """Mount hugetlbfs at ``path`` for ``pagesize`` unless such a mount exists; returns the path."""
    want = {"2M": 2048, "1G": 1048576}[pagesize]
    for m in hugetlbfs_mounts():
        if m.pagesize_kb == want:
            return m.path
    Path(path).mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "hugetlbfs", "-o", f"pagesize={pagesize}", "nodev", path],
                   check=True, capture_output=True)
    return path


def prepare(min_free_mb: int, size_kb: int = 2048, path: str = "/dev/hugepages") -> dict:
    """Make a fresh host ready for DPDK: mount hugetlbfs for ``size_kb`` pages unless mounted, and
    grow that pool until at least ``min_free_mb`` are free (never shrinks it, never touches pages
    in use).  Returns what it found and did; raises OSError (with what to do) when it cannot."""
    pagesize = {2048: "2M", 1048576: "1G"}[size_kb]
    try:
        mount = ensure_mount(path, pagesize)
    except (OSError, subprocess.CalledProcessError) as e:
        raise OSError(f"cannot mount hugetlbfs at {path} ({e}); run as root, or mount it: "
                      f"mount -t hugetlbfs -o pagesize={pagesize} nodev {path}") from e
    pool = {p.size_kb: p for p in pools()}.get(size_kb)
    total, free = (pool.total, pool.free) if pool else (0, 0)
    need_pages = -(-min_free_mb * 1024 // size_kb)
    added = 0
    if free < need_pages:
        want = total + (need_pages - free)
        try:
            got = reserve(want, size_kb)
        except OSError as e:
            raise OSError(f"cannot reserve {want} hugepages of {size_kb} kB ({e}); run as root, or: "
                          f"echo {want} > {SYS_HUGEPAGES}/hugepages-{size_kb}kB/nr_hugepages") from e
        added = got - total
        pool = {p.size_kb: p for p in pools()}.get(size_kb)
        free = pool.free if pool else 0
    return {"mount": mount, "size_kb": size_kb, "free_mb": free * size_kb // 1024,
            "added_pages": added, "enough": free >= need_pages}


# --------------------------------------------------------------------------------- leftovers
def tag_files(tag: Optional[str] = None) -> list[Path]:
    """Files in hugetlbfs mounts whose name carries ``tag`` (or any run tag when None)."""
    out: list[Path] = []
    for m in hugetlbfs_mounts():
        with contextlib.suppress(OSError):
            out += [Path(e.path) for e in os.scandir(m.path) if e.is_file(follow_symlinks=False)
                    and ((tag and tag in e.name) or (tag is None and TAG_RE.search(e.name)))]
    return sorted(out)


def tag_runtime_dirs(tag: Optional[str] = None) -> list[Path]:
    """DPDK runtime directories (/var/run/dpdk/<file-prefix>) that carry ``tag``."""
    out: list[Path] = []
    for base in DPDK_RUNTIME_DIRS:
        with contextlib.suppress(OSError):
            for e in os.scandir(base):
                if e.is_dir(follow_symlinks=False) and ((tag and tag in e.name) or
                                                        (tag is None and TAG_RE.search(e.name))):
                    p = Path(e.path)
                    if p.resolve() not in [q.resolve() for q in out]:
                        out.append(p)
    return out


def paths_in_use(prefixes: Iterable[str]) -> set[str]:
    """Paths under ``prefixes`` that a live process maps (/proc/*/maps) or holds open (fd)."""
    prefixes = tuple(str(p) for p in prefixes)
    used: set[str] = set()
    if not prefixes:
        return used
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            with open(d / "maps", "r", errors="replace") as f:
                for line in f:
                    i = line.find("/")
                    if i >= 0:
                        path = line[i:].rstrip("\n").replace(" (deleted)", "")
                        if path.startswith(prefixes):
                            used.add(path)
        with contextlib.suppress(OSError):
            for fd in os.scandir(d / "fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(fd.path)
                    if target.startswith(prefixes):
                        used.add(target)
    return used


def remove_leftovers(tag: Optional[str] = None, spare_tags: Iterable[str] = (),
                     dry_run: bool = False) -> list[str]:
    """Delete hugepage files and DPDK runtime dirs of dead runs.

    ``tag``: only that run's; None: any run tag except ``spare_tags`` (live runs).  A file some live
    process maps or holds open is never deleted.  Returns what was (or would be) removed."""
    spare = set(spare_tags)
    files = [f for f in tag_files(tag) if not any(s in f.name for s in spare)]
    dirs = [d for d in tag_runtime_dirs(tag) if not any(s in d.name for s in spare)]
    used = paths_in_use([m.path for m in hugetlbfs_mounts()] + [str(d) for d in dirs] +
                        [str(d.resolve()) for d in dirs])
    removed = []
    for f in files:
        if str(f) in used:
            continue
        if not dry_run:
            with contextlib.suppress(FileNotFoundError):
                f.unlink()
        removed.append(str(f))
    for d in dirs:
        real = str(d.resolve())
        if any(u.startswith(str(d) + "/") or u.startswith(real + "/") for u in used):
            continue
        if not dry_run:
            shutil.rmtree(d, ignore_errors=True)
        removed.append(str(d))
    return removed


def remove_prefix_on(host: "Host", file_prefix: str) -> None:
    """A DPDK process's hugepage files and runtime directory (``--file-prefix``) on ``host``, a
    testbed host reached over SSH or a guest's shell (nothing raised: the host may be gone)."""
    with contextlib.suppress(Exception):
        for f in host.glob("/dev/hugepages", f"{file_prefix}*"):
            host.remove(f)
        host.rmtree(f"/var/run/dpdk/{file_prefix}")


def snapshot_files() -> list[str]:
    """All files in all hugetlbfs mounts (for leak checks)."""
    out = []
    for m in hugetlbfs_mounts():
        with contextlib.suppress(OSError):
            out += [e.path for e in os.scandir(m.path)]
    return sorted(out)

def no_pci_option(pci_devices: Iterable[bool]) -> list[str]:
    """``["--no-pci"]`` unless one of the ports (each given as its end's ``pci_device``) is a PCI
    device: the one place that decides whether a DPDK process (tgen, testpmd, l3fwd, OVS-DPDK)
    keeps off this host's NICs; a PCI port is then probed by its ``-a`` / ``dpdk-devargs``."""
    return [] if any(pci_devices) else ["--no-pci"]
