"""Change detection over a series: CSIT's ``jumpavg`` groups, labelled, checked against noise.

1. **Groups.**  The counted points (completed runs, passed tests, a value) go, oldest first, to
   jumpavg's bit-counting group list (:class:`jumpavg.BitCountingGroupList`, the minimum
   description length partition CSIT trends its MRR results with): every run enters as its
   statistics — its value, and, for a unit of an interleaved study, its per-round figures'
   spread over that many samples (``AvgStdevStats(size=rounds, avg=median, stdev=…)``), so a run
   whose rounds scatter is weighed as the scattered sample it is.  The partition with the fewest
   bits wins: a new group costs bits for its mean and its spread, so it is only opened when the
   values after a point are better described apart than together.
2. **Labels.**  Each group after the first is a change at its first run: ``regression`` when its
   mean is lower than the previous group's, ``progression`` when higher; ``ratio`` = mean /
   previous mean.
3. **Noise.**  A change is kept only when ``|ratio − 1|`` exceeds the noise of the runs on both
   sides (the larger of the two groups' median point noise, :mod:`nfvperf.trend.noise`): the
   resolution of a search, the spread of repetitions or rounds, the host steadiness probe.  A
   group that fails this is merged into the one before it and the next group is compared with
   the merged one: a run whose host was unsteady does not fake a change, and neither does the
   return from it.

Points of running, aborted or interrupted runs (and failed tests) are shown but never enter.
jumpavg's cost is quadratic in the number of points, so detection runs over the newest
``window`` counted points (default :data:`DEFAULT_WINDOW`); older points are still listed.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from jumpavg import AvgStdevStats, BitCountingGroupList

#: counted points given to jumpavg per series (its cost grows with the square of this)
from nfvperf.trend.defaults import DEFAULT_WINDOW  # noqa: E402 (re-exported)
#: a step must exceed this many standard errors of the two groups' means (an outlier run at
#: the start of a window is a group of its own for jumpavg, not a change of the DUT)
Z_SCORE = 3.0
#: jumpavg's default resolution: the largest value is this many significant bits
SIGNIFICANT_BITS = 12.0


@dataclass
class Group:
    start: int                       # index into the counted points
    end: int                         # inclusive
    stats: AvgStdevStats
    noise: float = 0.0               # median relative noise of its points

    @property
    def mean(self) -> float:
        return float(self.stats.avg)


@dataclass
class Change:
    index: int                       # first counted point of the new group
    kind: str                        # regression | progression
    ratio: float
    noise: float
    previous_mean: float
    mean: float


@dataclass
class Detection:
    groups: list[Group] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    offset: int = 0                  # counted points before the window (not classified)
    merged: int = 0                  # jumpavg groups merged back as within the noise


def run_stats(value: float, samples: Sequence[float] = ()) -> AvgStdevStats:
    """One run as jumpavg statistics: its value, with its samples' spread when it has ≥ 2."""
    if len(samples) >= 2:
        return AvgStdevStats(size=len(samples), avg=float(value), stdev=statistics.pstdev(samples))
    return AvgStdevStats(size=1, avg=float(value), stdev=0.0)


def partition(runs: Sequence[AvgStdevStats]) -> list[int]:
    """jumpavg's minimum-bit partition of ``runs``: the size (in runs) of each group."""
    if not runs:
        return []
    max_value = max(r.avg + r.stdev for r in runs)
    if max_value <= 0:
        return [len(runs)]
    unit = max_value / (2.0 ** (SIGNIFICANT_BITS + 1.0) - 1.0)
    record = BitCountingGroupList(max_value=max_value, unit=unit)
    open_lists: list[Any] = []
    for r in runs:     # every split point considered: keep the cheapest list ending here
        fresh = record.copy_fast().append_group_of_runs([r])
        record = fresh
        for old in open_lists:
            old.append_run_to_to_last_group(r)
            if old.bits < record.bits:
                record = old
        open_lists.append(fresh)
    return [len(g.run_list) for g in record]


def detect(values: Sequence[float], samples: Optional[Sequence[Sequence[float]]] = None,
           noise: Optional[Sequence[float]] = None, window: int = DEFAULT_WINDOW) -> Detection:
    """Groups and changes of a series of counted values (oldest first); ``samples[i]`` are run
    i's own samples (may be empty), ``noise[i]`` its relative noise (see the module docstring)."""
    n = len(values)
    samples = list(samples) if samples is not None else [[] for _ in range(n)]
    noise = list(noise) if noise is not None else [0.0] * n
    off = max(0, n - window) if window and window > 0 else 0
    stats = [run_stats(values[i], samples[i]) for i in range(off, n)]
    out = Detection(offset=off)

    def group(start: int, end: int) -> Group:
        return Group(start, end, AvgStdevStats.for_runs(stats[start - off:end - off + 1]),
                     _median(noise[start:end + 1]))

    start = off
    for size in partition(stats):
        out.groups.append(group(start, start + size - 1))
        start += size
    while True:            # merge the step most within its noise, until every step exceeds it
        steps = [(abs(_ratio(a, b) - 1.0) / max(bound(a, b), 1e-12), i)
                 for i, (a, b) in enumerate(zip(out.groups, out.groups[1:]))
                 if abs(_ratio(a, b) - 1.0) <= bound(a, b)]
        if not steps:
            break
        _, i = min(steps)
        out.groups[i:i + 2] = [group(out.groups[i].start, out.groups[i + 1].end)]
        out.merged += 1
    for a, b in zip(out.groups, out.groups[1:]):
        r = _ratio(a, b)
        out.changes.append(Change(b.start, "regression" if r < 1 else "progression", r, bound(a, b), a.mean, b.mean))
    return out


def _ratio(a: Group, b: Group) -> float:
    return b.mean / a.mean if a.mean else float("inf")


def standard_error(a: Group, b: Group) -> float:
    """The standard error of b's mean − a's mean, relative to a's mean (Welch); a group of one
    sample borrows the other's spread (one value has none of its own)."""
    sa, sb = float(a.stats.stdev), float(b.stats.stdev)
    na, nb = max(1, a.stats.size), max(1, b.stats.size)
    if na < 2:
        sa = sb
    if nb < 2:
        sb = sa
    return math.sqrt(sa * sa / na + sb * sb / nb) / a.mean if a.mean else 0.0


def bound(a: Group, b: Group) -> float:
    """How far two neighbouring groups' means may differ without a change: the larger of the
    runs' own noise and :data:`Z_SCORE` standard errors of the difference."""
    return max(a.noise, b.noise, Z_SCORE * standard_error(a, b))


def _median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs)) if xs else 0.0
