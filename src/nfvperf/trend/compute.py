"""A trend: the selected series, their points, groups and changes (``nfvperf trend``).

:func:`trend_json` is the one public shape (``nfvperf trend --json`` prints exactly it, the
results site draws it)::

    {"series": [{"id", "identity", "label", "tests",
                 "points": [{"run", "tag", "time", "value", "status", "noise", "noise_source",
                             "dut_version", "test"}],
                 "groups": [{"start_run", "end_run", "mean", "stdev", "runs"}],
                 "changes": [{"run", "tag", "kind", "ratio", "noise", "previous_mean", "mean"}]}],
     "selector": "...", "window": N}

``run`` is the run's id (``nfvperf report RUN``), ``time`` its start (ISO 8601, UTC), ``value``
the figure in frames/s per interface (None when the run has none), ``status`` ``ok`` for a
counted point, else the run's status (running, aborted, interrupted) or ``test failed``: such
points are listed, never grouped nor counted as a change.
"""
from __future__ import annotations

import statistics
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from sqlalchemy.orm import Session

from nfvperf.store.db import jsonable
from nfvperf.trend.detect import DEFAULT_WINDOW, Detection, detect
from nfvperf.trend.points import Point, Series, fill_values, select_series
from nfvperf.trend.series import label
from nfvperf.store.db import Store
from nfvperf.trend.selector import Selector


@dataclass
class RunPoint:
    """The counted points of one run in one series, as one value (a configuration measured
    twice in a run is one run's value: the median, its noise the larger)."""

    run: int
    tag: str
    value: float
    samples: list[float] = field(default_factory=list)
    noise: float = 0.0


@dataclass
class SeriesTrend:
    series: Series
    runs: list[RunPoint]
    detection: Detection

    @property
    def id(self) -> str:
        return self.series.id

    @property
    def label(self) -> str:
        return label(self.series.identity, self.series.tests)

    def group_of(self, run: int) -> Optional[int]:
        for i, g in enumerate(self.detection.groups):
            if any(self.runs[j].run == run for j in range(g.start, g.end + 1)):
                return i
        return None

    def to_dict(self) -> dict[str, Any]:
        d = self.detection
        return {
            "id": self.id, "identity": self.series.identity, "label": self.label, "tests": self.series.tests,
            "points": [point_dict(p) for p in self.series.points],
            "groups": [{"start_run": self.runs[g.start].run, "end_run": self.runs[g.end].run,
                        "mean": g.mean, "stdev": float(g.stats.stdev), "runs": g.end - g.start + 1,
                        "noise": g.noise} for g in d.groups],
            "changes": [{"run": self.runs[c.index].run, "tag": self.runs[c.index].tag, "kind": c.kind,
                         "ratio": c.ratio, "noise": c.noise, "previous_mean": c.previous_mean,
                         "mean": c.mean} for c in d.changes],
            "window": {"counted_runs": len(self.runs), "classified_from_run":
                       self.runs[d.offset].run if self.runs else None, "merged_within_noise": d.merged},
        }


def point_dict(p: Point) -> dict[str, Any]:
    return {"run": p.run, "tag": p.tag, "time": p.time.isoformat() if p.time else None, "value": p.value,
            "status": p.status, "noise": p.noise, "noise_source": p.noise_source, "dut_version": p.dut_version,
            "test": p.test_name, "samples": len(p.samples) or None}


def run_points(points: list[Point]) -> list[RunPoint]:
    """The counted points, one per run, oldest first."""
    by_run: dict[int, list[Point]] = {}
    for p in points:
        if p.counted:
            by_run.setdefault(p.run, []).append(p)
    out = []
    for ps in by_run.values():
        vals = [float(p.value) for p in ps if p.value is not None]
        out.append(RunPoint(ps[0].run, ps[0].tag, float(statistics.median(vals)),
                            [x for p in ps for x in p.samples], max(p.noise for p in ps)))
    return out


def trend_series(s: Session, selector: Any = None, *, since: Optional[int] = None, until: Optional[int] = None,
                 window: int = DEFAULT_WINDOW) -> list[SeriesTrend]:
    """Every selected series with its detection (SelectorError when the selector names none)."""
    series = select_series(s, selector, since=since, until=until)
    fill_values(s, series)
    out = []
    for ser in series:
        rp = run_points(ser.points)
        det = detect([r.value for r in rp], [r.samples for r in rp], [r.noise for r in rp], window=window)
        out.append(SeriesTrend(ser, rp, det))
    return out


@contextmanager
def session_of(store_or_session: Any) -> Iterator[Session]:
    """A session from a Store, a Session, or a store URL / SQLite path (opened and closed here)."""
    if isinstance(store_or_session, Session):
        yield store_or_session
        return
    if hasattr(store_or_session, "session"):
        with store_or_session.session() as s:
            yield s
        return
    store = Store(str(store_or_session))
    try:
        with store.session() as s:
            yield s
    finally:
        store.close()


def trend_json(store_or_session: Any, selector: Any = None, *, since: Optional[int] = None,
               window: int = DEFAULT_WINDOW) -> dict[str, Any]:
    """What ``nfvperf trend --json`` prints (see the module docstring).  ``selector``: None (every
    series), a :class:`~nfvperf.trend.selector.Selector`, a dict of its fields or a string of
    its options (``"--test flows --size 64 --metric mrr"``); ``since``: the first run id."""
    sel = Selector.parse(selector)
    with session_of(store_or_session) as s:
        trends = trend_series(s, sel, since=since, window=window)
    return jsonable({"series": [t.to_dict() for t in trends], "selector": sel.text(), "window": window})
