"""RFC 2544 §26.1 throughput by binary search (METHODOLOGY B1, G10, TV4).

lo = 0, hi = max load (line rate); the first trial is at max load.  A trial passes when its
loss is within the goal (zero-loss: not one frame lost).  Bisect until hi − lo ≤ resolution
(default 0.1 % of line rate); the result is lo, the fastest load that passed.

If the search trials are shorter than the final duration (G10 allows it), one full-length
verification trial is run at the result.  If it fails, that load becomes the upper bound and the
search continues *below* it at full length: first stepping down (doubling the step) until a load
passes, then bisecting again, every trial full-length.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Optional

from nfvperf.trial import TrialResult

from .common import RFC2544_TRIAL_OVERHEAD_S, Progress, TrialBook, passes
from .result import GoalResult, SearchResult
from .validity import ValidityRunner


def binary_search(runner: ValidityRunner, max_load_pps: float, *, trial_duration_s: float = 60.0,
                  final_duration_s: Optional[float] = None, resolution_pct: float = 0.1,
                  resolution_pps: Optional[float] = None, loss_ratio: float = 0.0,
                  overhead_s: float = RFC2544_TRIAL_OVERHEAD_S,
                  time_budget_s: Optional[float] = None, progress: Optional[Progress] = None,
                  context: Optional[Mapping[str, object]] = None) -> SearchResult:
    """Run the search through ``runner.measure(duration_s, load_pps, **ctx)``.

    ``resolution_pps`` overrides ``resolution_pct`` (of ``max_load_pps``).
    """
    if max_load_pps <= 0:
        raise ValueError("max_load_pps must be > 0")
    final = final_duration_s if final_duration_s is not None else trial_duration_s
    res = resolution_pps if resolution_pps is not None else max_load_pps * resolution_pct / 100.0
    if res <= 0:
        raise ValueError("resolution must be > 0")
    b = _Bisection(TrialBook(runner, max_load_pps, "binary", overhead_s, time_budget_s, progress, dict(context or {})),
                   loss_ratio, res, hi=max_load_pps)
    if b.trial(max_load_pps, trial_duration_s, "search"):
        b.lo = max_load_pps
    else:
        b.bisect(trial_duration_s, "search")
    if trial_duration_s < final and b.lo > 0 and not b.trial(b.lo, final, "verify"):
        # G10: the final determination is at full length; it failed at the short-trial result
        b.search_below(final)
        b.book.notes.append("full-length verification failed at the short-trial result; "
                         "continued below at full length")
    return _result(b, max_load_pps, final)


class _Bisection:
    """The interval [lo, hi] and the trials that move it."""

    def __init__(self, book: TrialBook, loss_ratio: float, res: float, hi: float):
        self.book, self.loss_ratio, self.res = book, loss_ratio, res
        self.lo, self.hi = 0.0, hi

    def ok(self, tr: TrialResult) -> bool:
        return passes(tr, self.loss_ratio)

    def trial(self, load: float, dur: float, phase: str) -> bool:
        self.book.check_budget(dur)
        tr = self.book.measure(load, dur, phase, self.ok, True, lo_pps=self.lo, hi_pps=self.hi)
        passed = self.ok(tr)
        self.book.report(min(0.99, self.res / max(self.hi - self.lo, self.res)),
                         f"binary: {load:,.0f} pps {'ok' if passed else 'loss'}")
        return passed

    def bisect(self, dur: float, phase: str) -> None:
        while self.hi - self.lo > self.res:
            mid = (self.lo + self.hi) / 2.0
            if self.trial(mid, dur, phase):
                self.lo = mid
            else:
                self.hi = mid

    def search_below(self, final: float) -> None:
        """The full-length trial at ``lo`` failed: step down from it (doubling the step, every
        trial full-length) until a load passes, then bisect at full length."""
        failed = self.hi = self.lo
        step = self.res
        while True:
            cand = max(0.0, failed - step)
            if cand <= 0.0:
                self.lo = 0.0
                break
            if self.trial(cand, final, "verify-expand"):
                self.lo = cand
                break
            self.hi = cand
            step *= 2.0
        self.bisect(final, "verify-bisect")


def _result(b: _Bisection, max_load_pps: float, final: float) -> SearchResult:
    lo, hi = b.lo, b.hi
    goal = GoalResult(name="throughput", loss_ratio=b.loss_ratio, exceed_ratio=0.0,
                      relative_width=b.res / max_load_pps, final_trial_duration_s=final,
                      duration_sum_s=final, lower_bound_pps=lo, upper_bound_pps=hi,
                      conditional_throughput_pps=lo,
                      irregular=lo >= max_load_pps or lo <= 0.0,
                      irregular_reason="max load passed" if lo >= max_load_pps
                      else "no load passed" if lo <= 0.0 else "")
    return replace(b.book.result([goal]), upper_bound_pps=None if lo >= max_load_pps else hi)
