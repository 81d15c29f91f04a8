"""The harness-ceiling cache: what tgen through a minimal forwarder (testpmd io) carried on this
host, per port kind, link speed, MTU, generator CPU plan and frame size.

A ceiling is measured by ``nfvperf.topo.ceiling`` (``nfvperf baseline``, or the runner before a
real run) and kept here, in a JSON file next to the results store (default
``results/harness-ceiling.json``), so the next run on the same host and plan reuses it until it is
older than ``max_age_s`` (default 24 h) or ``--refresh`` asks for a new one.

One entry per :func:`ceiling_key`::

    {"fps": 1234567.0, "self_latency_ns": {"min": .., "p50": .., "p99": ..},
     "measured_at": "2025-...Z", "measured_at_epoch": 1.7e9, "key": {...the key fields...}, ...}
"""
from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

DEFAULT_MAX_AGE_S = 24 * 3600.0
CACHE_FILE = "harness-ceiling.json"
#: the fields a ceiling depends on; a change in any of them is another ceiling
KEY_FIELDS = ("hostname", "port_kind", "link_speed_bps", "mtu", "tgen_lcores", "frame_size_b")


def ceiling_key(hostname: str, port_kind: str, link_speed_bps: float, mtu: int,
                tgen_lcores: str, frame_size_b: int) -> str:
    """The cache key of one measured ceiling: ``host|kind|speed|mtu|lcores|size``."""
    return "|".join((str(hostname), str(port_kind), f"{float(link_speed_bps):.0f}", str(int(mtu)),
                     str(tgen_lcores), str(int(frame_size_b))))


def key_fields(key: str) -> dict[str, str]:
    return dict(zip(KEY_FIELDS, key.split("|")))


def utc_iso(epoch: Optional[float] = None) -> str:
    t = dt.datetime.fromtimestamp(time.time() if epoch is None else epoch, dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


class CeilingCache:
    """``get(key)`` -> entry or None (missing, expired, or ``refresh``); ``put(key, entry)``.

    The file is rewritten atomically (temp file + rename) on every ``put``; an unreadable file
    counts as empty (it is a cache: the worst case is measuring again)."""

    def __init__(self, path: Path, max_age_s: float = DEFAULT_MAX_AGE_S, refresh: bool = False,
                 clock: Any = time.time):
        self.path = Path(path)
        self.max_age_s = float(max_age_s)
        self.refresh = refresh
        self.clock = clock

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        entries = data.get("entries") if isinstance(data, dict) else None
        return entries if isinstance(entries, dict) else {}

    def age_s(self, entry: dict[str, Any]) -> float:
        return self.clock() - float(entry.get("measured_at_epoch") or 0.0)

    def get(self, key: str) -> Optional[dict[str, Any]]:
        if self.refresh:
            return None
        entry = self._load().get(key)
        if not isinstance(entry, dict) or entry.get("fps") is None:
            return None
        if self.age_s(entry) > self.max_age_s or self.age_s(entry) < -60:
            return None
        return entry

    def get_faster(self, key: str, method: Optional[int] = None) -> Optional[tuple[str, dict[str, Any]]]:
        """(key, entry) of a fresh entry (of ``method``, when given) for the same host, port kind,
        MTU, generator lcores and frame size as ``key`` but measured at a higher nominal link speed
        (the lowest such speed, then the newest), or None.  The caller reads it at ``key``'s speed
        (:func:`nfvperf.topo.ceiling.at_lower_link_speed`): the path is the same, the nominal
        speed only sets the load of the search's first trial."""
        if self.refresh:
            return None
        want = key_fields(key)
        best: Optional[tuple[float, float, str, dict[str, Any]]] = None
        for k in self._load():
            f = key_fields(k)
            if set(f) != set(want) or any(f[n] != want[n] for n in KEY_FIELDS if n != "link_speed_bps"):
                continue
            try:
                speed = float(f["link_speed_bps"])
            except ValueError:
                continue
            if speed <= float(want["link_speed_bps"]):
                continue
            fresh = self.get(k)
            if fresh is None or (method is not None and fresh.get("method") != method):
                continue
            rank = (speed, -float(fresh.get("measured_at_epoch") or 0.0))
            if best is None or rank < best[:2]:
                best = (rank[0], rank[1], k, fresh)
        return None if best is None else (best[2], best[3])

    def put(self, key: str, entry: dict[str, Any]) -> dict[str, Any]:
        entries = self._load()
        entry = dict(entry, key=key_fields(key))
        entry.setdefault("measured_at_epoch", self.clock())
        entry.setdefault("measured_at", utc_iso(entry["measured_at_epoch"]))
        entries[key] = entry
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".ceiling-", dir=str(self.path.parent))
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump({"schema": "nfvperf-harness-ceiling", "entries": entries}, fh, indent=1,
                          sort_keys=True)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return entry

    def entries(self) -> dict[str, Any]:
        return self._load()
