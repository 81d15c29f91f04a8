"""The site's manifest (``DIR/manifest.json``): the hash of every page's inputs, so a rebuild
writes only the pages whose inputs changed.

A page's hash covers what it is made from (the run rows, the series, the asset text) and
:data:`FORMAT` with the nfvperf version, so a new renderer rewrites every page once.  Each build
records what it did in ``last_build`` (pages written, how many were unchanged, pages removed);
the tests and ``nfvperf site`` read it from there.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from nfvperf import __version__

#: bump when the pages' shape changes: every page is then rewritten once
FORMAT = 1
MANIFEST = "manifest.json"
SCHEMA = "nfvperf-site"


def input_hash(*parts: Any) -> str:
    """sha256 of the inputs as canonical JSON (dates and other objects as their ``str``)."""
    blob = json.dumps([FORMAT, __version__, *parts], sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass
class BuildReport:
    written: list[str] = field(default_factory=list)
    unchanged: int = 0
    removed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"written": sorted(self.written), "unchanged": self.unchanged, "removed": sorted(self.removed),
                "notes": self.notes, "seconds": round(self.seconds, 3)}


class Manifest:
    """``DIR/manifest.json``: ``{"schema", "format", "pages": {path: hash}, "last_build": {...}}``.

    :meth:`write_page` writes a page (atomically) only when its hash differs from the recorded
    one or the file is missing; :meth:`finish` removes the pages this build no longer produced
    and saves the manifest.  A manifest of another format or an unreadable one counts as empty
    (every page is written again)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.path = self.root / MANIFEST
        self.pages: dict[str, str] = {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and data.get("schema") == SCHEMA and data.get("format") == FORMAT:
                self.pages = {str(k): str(v) for k, v in (data.get("pages") or {}).items()}
        except (OSError, ValueError):
            pass
        self.seen: set[str] = set()
        self.report = BuildReport()
        self.t0 = time.monotonic()

    def fresh(self, rel: str, digest: str) -> bool:
        """True when ``rel`` was written from these inputs and is still there (nothing to do);
        the page counts as produced by this build either way."""
        self.seen.add(rel)
        if self.pages.get(rel) == digest and (self.root / rel).is_file():
            self.report.unchanged += 1
            return True
        return False

    def write_page(self, rel: str, digest: str, text: str) -> None:
        """Write ``text`` to ``rel`` (call after :meth:`fresh` said False)."""
        self.seen.add(rel)
        write_atomic(self.root / rel, text)
        self.pages[rel] = digest
        self.report.written.append(rel)

    def page(self, rel: str, digest: str, render: Any) -> bool:
        """Write ``render()`` to ``rel`` unless it is fresh; True when written."""
        if self.fresh(rel, digest):
            return False
        self.write_page(rel, digest, render())
        return True

    def finish(self, owned: Callable[[str], bool] = lambda _rel: True) -> BuildReport:
        """Remove the pages of an earlier build this one did not produce (a run deleted from the
        store) among those it was responsible for (``owned(rel)``: a build of some parts leaves
        the others alone), then save the manifest with this build's counters."""
        for rel in sorted(r for r in set(self.pages) - self.seen if owned(r)):
            (self.root / rel).unlink(missing_ok=True)
            del self.pages[rel]
            self.report.removed.append(rel)
        self.report.seconds = time.monotonic() - self.t0
        data = {"schema": SCHEMA, "format": FORMAT, "nfvperf": __version__, "pages": dict(sorted(self.pages.items())),
                "last_build": dict(self.report.to_dict(), at=dt.datetime.now(dt.timezone.utc).isoformat())}
        write_atomic(self.path, json.dumps(data, indent=1))
        return self.report


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".site-", dir=str(path.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
