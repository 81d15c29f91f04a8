"""NDR and PDR found in one pass.

Two intervals are kept, one per goal (NDR: zero loss; PDR: loss ≤ ``pdr_loss_ratio``).
Every trial updates both: zero loss raises both lower bounds; loss within the PDR goal lowers
the NDR upper bound and raises the PDR lower bound; more loss lowers both upper bounds.

Start at max load; if it fails, the forwarding rate measured there (MRR) is the next load
(it is where a DUT with a hard limit stops losing), then the search bisects, PDR first (it is
higher, so its trials also tell the NDR interval something), until each interval is narrower
than ``relative_width`` of its upper bound.  An optional full-length verification at each
result follows G10.
"""
from __future__ import annotations

from typing import Mapping, Optional

from nfvperf.trial import TrialResult

from .common import RFC2544_TRIAL_OVERHEAD_S, Progress, TrialBook, passes
from .result import GoalResult, SearchResult
from .validity import ValidityRunner


def ndrpdr_search(runner: ValidityRunner, max_load_pps: float, *, pdr_loss_ratio: float = 0.005,
                  trial_duration_s: float = 1.0, final_duration_s: Optional[float] = None,
                  relative_width: float = 0.005, min_load_pps: float = 0.0,
                  overhead_s: float = RFC2544_TRIAL_OVERHEAD_S,
                  time_budget_s: Optional[float] = None, progress: Optional[Progress] = None,
                  context: Optional[Mapping[str, object]] = None) -> SearchResult:
    if not 0.0 < pdr_loss_ratio < 1.0:
        raise ValueError("pdr_loss_ratio must be in (0, 1)")
    final = final_duration_s if final_duration_s is not None else trial_duration_s
    s = _NdrPdr(TrialBook(runner, max_load_pps, "ndrpdr", overhead_s, time_budget_s, progress, dict(context or {})),
                max_load_pps, min_load_pps, pdr_loss_ratio, relative_width)
    s.initial(trial_duration_s)
    s.bisect(trial_duration_s)
    if final > trial_duration_s:
        s.verify(final)
    return s.result(final)


class _NdrPdr:
    """The two intervals (NDR, PDR) and the trials that narrow them."""

    def __init__(self, book: TrialBook, max_load: float, min_load: float, pdr_loss_ratio: float,
                 width: float):
        self.book = book
        self.max_load, self.min_load, self.width = max_load, min_load, width
        self.ratios = {"ndr": 0.0, "pdr": pdr_loss_ratio}
        self.iv = {"ndr": [min_load, max_load], "pdr": [min_load, max_load]}
        self.seen_ub = {"ndr": False, "pdr": False}
        self.seen_lb = {"ndr": False, "pdr": False}
        self.steps = {"ndr": [0, 0], "pdr": [0, 0]}   # consecutive expansion steps (up, down)
        self.floor = max(min_load, max_load * 1e-6)
        self.no_pass: set[str] = set()

    def trial(self, load: float, dur: float, phase: str) -> TrialResult:
        self.book.check_budget(dur)
        tr = self.book.measure(load, dur, phase, lambda t: passes(t, 0.0), True,
                               ndr_interval=list(self.iv["ndr"]),
                               pdr_interval=list(self.iv["pdr"]))
        if not phase.startswith("verify"):
            self.update(load, tr)
        return tr

    def update(self, load: float, tr: TrialResult) -> None:
        """Zero loss raises both lower bounds; loss within the PDR goal lowers the NDR upper
        bound and raises the PDR lower bound; more loss lowers both upper bounds."""
        iv = self.iv
        for k, lr in self.ratios.items():
            if passes(tr, lr):
                iv[k][0] = max(iv[k][0], load)
                self.seen_lb[k] = True
            else:
                iv[k][1] = min(iv[k][1], load)
                self.seen_ub[k] = True
        for k, lr in self.ratios.items():   # a lower bound above an upper bound: noise; trust the newer trial
            if iv[k][0] > iv[k][1]:
                if passes(tr, lr):
                    iv[k][1] = self.max_load
                else:
                    iv[k][0] = self.min_load

    def done(self, k: str) -> bool:
        lo, hi = self.iv[k]
        if lo >= self.max_load or hi <= self.floor:
            return True
        return hi - lo <= self.width * hi

    def initial(self, dur: float) -> None:
        """Max load; if it loses frames, the forwarding rate measured there (MRR)."""
        tr = self.trial(self.max_load, dur, "search")
        if not passes(tr, 0.0):
            mrr = max(self.min_load, tr.forwarding_rate_pps)
            if self.iv["pdr"][0] < mrr < self.max_load:
                self.trial(mrr, dur, "search")

    def bisect(self, dur: float) -> None:
        """PDR first, then NDR, until both intervals are narrower than the width."""
        while not (self.done("pdr") and self.done("ndr")):
            k = "pdr" if not self.done("pdr") else "ndr"
            lo, hi = self.iv[k]
            nxt = self.next_load(k)
            self.book.report(0.5, f"ndrpdr: {k} interval {lo:,.0f}..{hi:,.0f} pps")
            self.trial(nxt, dur, "search")

    def next_load(self, k: str) -> float:
        """Max load until it has an upper bound, else the middle of the interval or, while it
        is wide, an external step around the last trial (MRR hint), doubling the step."""
        lo, hi = self.iv[k]
        w = self.width
        if not self.seen_ub[k] and lo < self.max_load:
            return self.max_load
        nxt = (lo + hi) / 2.0
        if hi - lo > 2 * w * hi:
            last = self.book.trials[-1].load_pps
            up, down = self.steps[k]
            if lo <= self.min_load or last == hi:
                cand = hi * (1 - min(0.5, w * 2 ** min(60, down)))
                self.steps[k] = [0, down + 1]
                if cand > nxt:
                    nxt = cand
            elif last == lo:
                cand = lo * (1 + w * 2 ** min(60, up))
                self.steps[k] = [up + 1, 0]
                if cand < nxt:
                    nxt = cand
        return nxt

    def verify(self, final: float) -> None:
        """G10: verify each result with a full-length trial; on failure search below it at full
        length (step down, doubling the step, then bisect)."""
        for k, lr in self.ratios.items():
            lo = self.iv[k][0]
            if lo <= self.min_load or passes(self.trial(lo, final, f"verify-{k}"), lr):
                continue
            hi, step, good = lo, 4 * self.width, None
            while good is None:
                cand = hi * (1 - step)
                if cand < max(self.min_load, self.max_load * 1e-4):
                    break
                if passes(self.trial(cand, final, f"verify-{k}"), lr):
                    good = cand
                else:
                    hi, step = cand, min(0.5, step * 2)
            if good is None:
                self.iv[k] = [self.min_load, hi]
                self.book.notes.append(f"{k}: no load passed a full-length verification trial")
                self.no_pass.add(k)
                continue
            while hi - good > self.width * hi:
                mid = (good + hi) / 2.0
                if passes(self.trial(mid, final, f"verify-{k}"), lr):
                    good = mid
                else:
                    hi = mid
            self.iv[k] = [good, hi]

    def result(self, final: float) -> SearchResult:
        goals = []
        for k, lr in self.ratios.items():
            lo, hi = self.iv[k]
            irr = lo >= self.max_load or k in self.no_pass or \
                (lo <= self.min_load and not self.seen_lb[k])
            why = ("max load is a lower bound" if lo >= self.max_load else
                   "no load passed" if irr else "")
            goals.append(GoalResult(
                name=k, loss_ratio=lr, relative_width=self.width, final_trial_duration_s=final,
                duration_sum_s=final, lower_bound_pps=lo,
                upper_bound_pps=None if lo >= self.max_load else hi,
                conditional_throughput_pps=lo, irregular=irr, irregular_reason=why))
        return self.book.result(goals)
