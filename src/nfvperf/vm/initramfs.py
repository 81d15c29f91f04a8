"""An initramfs as a file tree (path without the leading ``/`` -> :class:`_Entry`): entries taken
from .deb packages (merged-/usr paths), the shared libraries a set of ELF binaries needs (DT_NEEDED,
walked to a closure), and the tree written as a reproducible gzip'd cpio (newc) archive (sorted
entries, fixed mtimes, uid 0).  The guest image (:mod:`nfvperf.vm.image`) and the PCI guest's
overlay (:mod:`nfvperf.vm.pci_overlay`) are built with it."""
from __future__ import annotations

import dataclasses
import gzip
import io
import os
import struct
import subprocess
import tarfile
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple


# Fixed timestamp for every initramfs entry (and the gzip header carries 0).
EPOCH = 0


class ImageError(RuntimeError):
    pass


@dataclasses.dataclass
class _Entry:
    kind: str                 # "file" | "dir" | "symlink" | "chr"
    mode: int = 0o644
    data: bytes = b""
    target: str = ""
    rdev: Tuple[int, int] = (0, 0)


_MERGED = {"lib": "usr/lib", "lib64": "usr/lib64", "bin": "usr/bin", "sbin": "usr/sbin"}


def _norm(path: str) -> str:
    """Member path -> merged-/usr path without leading './' or '/'."""
    p = os.path.normpath("/" + path).lstrip("/")
    if p == ".":
        return ""
    head, _, rest = p.partition("/")
    if head in _MERGED:
        p = _MERGED[head] + ("/" + rest if rest else "")
    return p


def _extract_deb(deb: Path, want=None) -> Dict[str, _Entry]:
    """Regular files and symlinks of a .deb's data, keyed by merged path. `want(path)` filters."""
    proc = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
    out: Dict[str, _Entry] = {}
    try:
        with tarfile.open(fileobj=proc.stdout, mode="r|") as tf:
            for m in tf:
                p = _norm(m.name)
                if not p or (want is not None and not want(p)):
                    continue
                if m.isfile():
                    f = tf.extractfile(m)
                    out[p] = _Entry("file", mode=m.mode & 0o7777, data=f.read() if f else b"")
                elif m.issym():
                    out[p] = _Entry("symlink", mode=0o777, target=m.linkname)
    finally:
        if proc.stdout is not None:
            proc.stdout.close()
        if proc.wait() != 0:
            raise ImageError(f"dpkg-deb failed on {deb.name}")
    return out


def _resolve(tree: Dict[str, _Entry], path: str, depth: int = 0) -> Optional[str]:
    """Follow symlinks (in any component) inside the tree; return the final path or None."""
    if depth > 40:
        return None
    parts = path.split("/")
    cur = ""
    for i, part in enumerate(parts):
        nxt = f"{cur}/{part}" if cur else part
        e = tree.get(nxt)
        if e is not None and e.kind == "symlink":
            t = e.target
            base = "" if t.startswith("/") else os.path.dirname(nxt)
            joined = _norm((base + "/" + t) if base else t)
            rest = "/".join(parts[i + 1:])
            return _resolve(tree, joined + ("/" + rest if rest else ""), depth + 1)
        cur = nxt
    return cur if cur in tree else None


def elf_needed(data: bytes) -> Optional[List[str]]:
    """DT_NEEDED names of an ELF64 little-endian object, or None if it is not one."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    phoff = struct.unpack_from("<Q", data, 0x20)[0]
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    loads = []
    dyn = None
    for i in range(phnum):
        p_type, _fl, off, vaddr, _pa, filesz, _msz, _al = struct.unpack_from(
            "<IIQQQQQQ", data, phoff + i * phentsize)
        if p_type == 1:
            loads.append((vaddr, off, filesz))
        elif p_type == 2:
            dyn = (off, filesz)
    if dyn is None:
        return []
    needed, strtab = [], None
    for j in range(dyn[1] // 16):
        tag, val = struct.unpack_from("<qQ", data, dyn[0] + 16 * j)
        if tag == 0:
            break
        if tag == 1:
            needed.append(val)
        elif tag == 5:
            strtab = val
    if strtab is None:
        return []
    for vaddr, off, filesz in loads:
        if vaddr <= strtab < vaddr + filesz:
            stroff = strtab - vaddr + off
            break
    else:
        return []
    return [data[stroff + n:data.index(b"\0", stroff + n)].decode() for n in needed]


def _closure(tree: Dict[str, _Entry], roots: Iterable[str], lib_dirs: List[str]) -> List[str]:
    """Paths (files and the symlinks leading to them) needed to run the roots."""
    keep: List[str] = []
    seen = set()
    todo = list(roots)
    missing = []

    def add_chain(path: str) -> Optional[str]:
        # Keep every symlink on the way to the real file.
        p, depth = path, 0
        while depth < 40:
            e = tree.get(p)
            if e is None:
                real = _resolve(tree, p)
                if real is None:
                    return None
                p = real
                continue
            if p not in seen:
                seen.add(p)
                keep.append(p)
            if e.kind != "symlink":
                return p
            base = "" if e.target.startswith("/") else os.path.dirname(p)
            p = _norm((base + "/" + e.target) if base else e.target)
            depth += 1
        return None

    while todo:
        path = todo.pop()
        real = add_chain(path)
        if real is None:
            missing.append(path)
            continue
        needed = elf_needed(tree[real].data) or []
        for soname in needed:
            for d in lib_dirs:
                cand = f"{d}/{soname}"
                if _resolve(tree, cand) is not None:
                    if cand not in seen:
                        todo.append(cand)
                    break
            else:
                missing.append(f"{soname} (needed by {real})")
    if missing:
        raise ImageError("image is missing: " + "; ".join(sorted(set(missing))))
    return keep


def _cpio(entries: Dict[str, _Entry]) -> bytes:
    buf = io.BytesIO()
    ino = 1000

    def hdr(name: str, mode: int, size: int, nlink: int, rdev=(0, 0)) -> None:
        nonlocal ino
        ino += 1
        nb = name.encode() + b"\0"
        fields = [ino, mode, 0, 0, nlink, EPOCH, size, 0, 0, rdev[0], rdev[1], len(nb), 0]
        buf.write(b"070701" + b"".join(b"%08X" % f for f in fields))
        buf.write(nb)
        buf.write(b"\0" * ((4 - (110 + len(nb)) % 4) % 4))

    def pad() -> None:
        buf.write(b"\0" * ((4 - buf.tell() % 4) % 4))

    for name in sorted(entries):
        e = entries[name]
        if e.kind == "dir":
            hdr(name, 0o040000 | e.mode, 0, 2)
        elif e.kind in ("file", "symlink"):       # a symlink's data is its target
            body = e.data if e.kind == "file" else e.target.encode()
            hdr(name, 0o100000 | e.mode if e.kind == "file" else 0o120777, len(body), 1)
            buf.write(body)
            pad()
        elif e.kind == "chr":
            hdr(name, 0o020000 | e.mode, 0, 1, e.rdev)
    hdr("TRAILER!!!", 0, 0, 1)
    pad()
    return buf.getvalue()


def _gzip(data: bytes) -> bytes:
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=6, mtime=0, filename="") as g:
        g.write(data)
    return out.getvalue()
