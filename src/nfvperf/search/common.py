"""Small helpers shared by the searches."""
from __future__ import annotations

from typing import Any, Optional

from nfvperf.trial import TrialResult

from .result import TrialRecord

#: RFC 2544 §23 per-trial overhead for a bridge: learning 2 s + drain 2 s + restabilise 5 s
RFC2544_TRIAL_OVERHEAD_S = 9.0

#: absolute slack on loss-ratio comparisons (float noise on exact ratios such as 0.005)
LOSS_EPS = 1e-12


def passes(tr: TrialResult, loss_ratio: float) -> bool:
    """Trial meets a loss goal.  For a zero-loss goal one lost frame fails (exact counts)."""
    if loss_ratio <= 0.0:
        return tr.lost == 0 and tr.loss_ratio == 0.0
    return tr.loss_ratio <= loss_ratio + LOSS_EPS


def record(tr: TrialResult, phase: str, passed: Optional[bool] = None) -> TrialRecord:
    return TrialRecord(load_pps=tr.load_pps, duration_s=tr.duration_s, loss_ratio=tr.loss_ratio,
                       forwarding_rate_pps=tr.forwarding_rate_pps, phase=phase, passed=passed)


class BudgetExceeded(RuntimeError):
    """The search used up its trial-time budget before reaching its goals."""


def check_budget(spent_s: float, next_s: float, budget_s: Optional[float], what: Any = "search") -> None:
    if budget_s is not None and spent_s + next_s > budget_s + 1e-9:
        raise BudgetExceeded(f"{what}: next trial ({next_s:g} s) would exceed the trial-time "
                             f"budget ({spent_s:g} of {budget_s:g} s used)")
