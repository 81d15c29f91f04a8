"""The CI gate: the newest run against the history of the same series (``nfvperf gate``).

For every selected series the gated run has a counted value in, the series' history up to and
including that run goes through the change detection (:mod:`nfvperf.trend.detect`, noise
included).  The series *regressed* when the gated run's group is a regression against the
group before it by more than the threshold: ``ratio < 1 − threshold``.  A regression that began
some runs ago and has not recovered still fails the gate (the level is still lower); to accept
a new level, gate ``--since`` a run at or after the change.

Exit codes (:class:`GateResult`): 0 nothing regressed beyond the noise and the threshold; 1 at
least one series regressed (one line per series says which, by how much, from which run, with
its noise); 2 the run cannot be gated (still running, aborted, interrupted; no series).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from nfvperf.trend.compute import SeriesTrend, trend_series
from nfvperf.trend.defaults import DEFAULT_THRESHOLD, DEFAULT_WINDOW
from nfvperf.trend.render import _f
from sqlalchemy import select
from nfvperf.store.db import run_liveness
from nfvperf.store.models import Run
from types import SimpleNamespace

#: run statuses that cannot be gated (the run is not a finished measurement)
UNGATED = ("running", "aborted", "interrupted")


class GateError(ValueError):
    """The run cannot be gated (exit 2)."""


@dataclass
class Verdict:
    series: str
    label: str
    kind: str                       # regression | progression | same | no history
    ratio: Optional[float] = None
    value: Optional[float] = None
    previous_mean: Optional[float] = None
    since_run: Optional[int] = None
    noise: float = 0.0

    def line(self, threshold: float) -> str:
        if self.kind == "no history":
            return f"NO HISTORY  {self.label} [{self.series}]: the gated run is its first counted value"
        if self.ratio is None:
            return f"SAME        {self.label} [{self.series}]"
        pct = 100.0 * (self.ratio - 1.0)
        tag = {"regression": "REGRESSION", "progression": "PROGRESSION", "same": "SAME"}[self.kind]
        text = (f"{tag:<11} {self.label} [{self.series}]: {pct:+.1f} % ({_f(self.previous_mean)} → "
                f"{_f(self.value)} fps/if)")
        if self.kind != "same":
            text += f" since run {self.since_run}"
        return text + f"; noise ±{100 * self.noise:.1f} %, threshold {100 * threshold:.1f} %"


@dataclass
class GateResult:
    run: int
    tag: str
    threshold: float
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def regressed(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.kind == "regression"]

    @property
    def exit_code(self) -> int:
        return 1 if self.regressed else 0

    def lines(self, verbose: bool = False) -> list[str]:
        out = [v.line(self.threshold) for v in self.verdicts if verbose or v.kind == "regression"]
        n = len(self.regressed)
        out.append(f"gate run {self.run} ({self.tag}): {len(self.verdicts)} series against their history, "
                   f"{n} regressed beyond the noise and the {100 * self.threshold:.1f} % threshold"
                   + (" → FAIL" if n else " → pass"))
        return out


def verdict(t: SeriesTrend, run: int, threshold: float) -> Optional[Verdict]:
    """The gated run's verdict in one series (None: the run has no counted value in it)."""
    idx = next((i for i, r in enumerate(t.runs) if r.run == run), None)
    if idx is None:
        return None
    v = Verdict(t.id, t.label, "same", value=t.runs[idx].value)
    if len(t.runs) < 2:
        v.kind = "no history"
        return v
    gi = t.group_of(run)
    if gi is None or gi == 0:          # in the first group: the same level as its history
        g = t.detection.groups[gi] if gi is not None else None
        v.ratio = 1.0
        v.previous_mean = g.mean if g else None
        v.noise = g.noise if g else 0.0
        return v
    prev, g = t.detection.groups[gi - 1], t.detection.groups[gi]
    v.ratio, v.previous_mean, v.noise = g.mean / prev.mean, prev.mean, max(prev.noise, g.noise)
    v.since_run = t.runs[g.start].run
    if v.ratio < 1.0 - threshold:
        v.kind = "regression"
    elif v.ratio > 1.0 + threshold:
        v.kind = "progression"
    return v


def gate(store: Any, selector: Any = None, *, run: Any = "latest", threshold: float = DEFAULT_THRESHOLD,
         since: Optional[int] = None, window: int = DEFAULT_WINDOW) -> GateResult:
    """Gate ``run`` (a run reference, default the newest) against its series' history."""
    rid = store.resolve(run)
    with store.session() as s:
        r = s.execute(select(Run.id, Run.tag, Run.status, Run.environment["hostname"], Run.environment["pid"],
                             Run.environment["pid_starttime"]).where(Run.id == rid)).one()
        status = r.status
        if status == "running":
            env = {"hostname": r[3], "pid": r[4], "pid_starttime": r[5]}
            if run_liveness(SimpleNamespace(status=status, environment=env)):
                status = "aborted"
        if status in UNGATED:
            raise GateError(f"run {rid} ({r.tag}) is {status}: only a finished run can be gated "
                            "(its values are never counted in a trend)")
        trends = trend_series(s, selector, since=since, until=rid, window=window)
    res = GateResult(run=rid, tag=r.tag, threshold=threshold)
    for t in trends:
        v = verdict(t, rid, threshold)
        if v is not None:
            res.verdicts.append(v)
    if not res.verdicts:
        raise GateError(f"run {rid} ({r.tag}) has no counted value in the selected series: nothing to gate "
                        "(its tests failed, or the selector names other tests)")
    return res
