"""A/B gate: two DUT builds (or any two configurations) in one run, interleaved (``nfvperf gate --ab``).

The run holds an interleaved study (issue 16: ``rounds``) whose baseline unit is build A and
whose other unit(s) are build B — e.g. an axis of two ``ovs.vswitchd`` / ``testpmd.binary``
paths, which can only be interleaved by restarting the DUT every round (the report says so).
Each round divides B's figure by A's figure of the same round; the study stores the median of
those paired ratios with its 95 % exact rank interval (:func:`nfvperf.stats.ratio_interval`).

The gate reads those intervals and fails a unit when the whole interval lies below
``1 − threshold`` (B is slower than A beyond the threshold, with 95 % confidence).  An interval
that reaches above it passes ("no regression measured"); a study with too few rounds for a 95 %
interval cannot be judged (exit 2: give it ``rounds: 6`` or more).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from nfvperf.stats import rounds_needed
from sqlalchemy import select
from nfvperf.store.models import Result, Run, Test


class AbError(ValueError):
    """The run cannot be A/B-gated (exit 2)."""


@dataclass
class AbVerdict:
    unit: str
    baseline: str
    metric: str
    median: float
    lo: float
    hi: float
    n: int
    enough: bool
    regressed: bool

    def line(self, threshold: float) -> str:
        iv = f"{self.median:.3f}× ({self.lo:.3f}–{self.hi:.3f}, 95 % CI, {self.n} rounds)"
        if not self.enough:
            return (f"NOT JUDGED  {self.unit} vs {self.baseline} [{self.metric}]: {iv}; {self.n} rounds give no "
                    f"95 % interval ({rounds_needed(0.95)} do)")
        if self.regressed:
            return (f"REGRESSION  {self.unit} vs {self.baseline} [{self.metric}]: {iv} lies wholly below "
                    f"{1 - threshold:.3f} (threshold {100 * threshold:.1f} %)")
        return (f"OK          {self.unit} vs {self.baseline} [{self.metric}]: {iv} reaches "
                f"{1 - threshold:.3f} or above")


@dataclass
class AbResult:
    run: int
    tag: str
    threshold: float
    verdicts: list[AbVerdict] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if any(v.regressed for v in self.verdicts):
            return 1
        return 2 if any(not v.enough for v in self.verdicts) else 0

    def lines(self) -> list[str]:
        out = [v.line(self.threshold) for v in self.verdicts]
        bad = sum(v.regressed for v in self.verdicts)
        out.append(f"gate --ab run {self.run} ({self.tag}): {len(self.verdicts)} paired ratio(s), {bad} "
                   f"wholly below {1 - self.threshold:.3f}"
                   + (" → FAIL" if bad else " → cannot judge" if self.exit_code == 2 else " → pass"))
        return out


def gate_ab(store: Any, run: Any = "latest", threshold: float = 0.02, metric: Optional[str] = None) -> AbResult:
    """Judge every paired ratio of the run's interleaved studies (``metric``: only that one)."""
    rid = store.resolve(run)
    with store.session() as s:
        tag, status = s.execute(select(Run.tag, Run.status).where(Run.id == rid)).one()
        rows = s.execute(select(Test.name, Test.frame_size_b, Result.data)
                         .join(Result, Result.test_id == Test.id)
                         .where(Test.run_id == rid, Result.kind == "rounds").order_by(Test.id)).all()
    if status in ("running", "aborted", "interrupted"):
        raise AbError(f"run {rid} ({tag}) is {status}: only a finished run can be gated")
    if not rows:
        raise AbError(f"run {rid} ({tag}) has no interleaved study: --ab gates the paired ratios of a study "
                      "with rounds (e.g. study: {axes: {build: {a: ..., b: ...}}, rounds: 10}); see docs/trending.md")
    res = AbResult(rid, tag, threshold)
    for name, size, data in rows:
        data = data or {}
        for m, r in (data.get("ratios") or {}).items():
            if not r or (metric and m != metric):
                continue
            unit = f"{name} {size or 'IMIX'} B"
            res.verdicts.append(AbVerdict(unit, str(data.get("baseline_unit") or "baseline"), m,
                                          float(r["median"]), float(r["lo"]), float(r["hi"]), int(r["n"]),
                                          bool(r.get("enough")),
                                          bool(r.get("enough")) and float(r["hi"]) < 1.0 - threshold))
    if not res.verdicts:
        raise AbError(f"run {rid} ({tag}): its interleaved studies have no paired ratio"
                      + (f" of metric {metric}" if metric else "") + " (no unit besides the baseline, or no "
                      "round gave a figure)")
    return res
