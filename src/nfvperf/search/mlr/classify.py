"""Pure MLR decision functions over the trials at one load (METHODOLOGY §8 pseudocode).

These follow the normative pseudocode, not the prose (which has known errors, §8 list).
Trials are ``(duration_s, loss_ratio)`` pairs, all at the same Trial Load.
"""
from __future__ import annotations

from typing import Iterable, Optional, Protocol

LOWER = "LB"
UPPER = "UB"
UNDECIDED = "U"

#: loss ratios within this of the goal count as "not exceeding" (float noise on exact ratios)
LOSS_EPS = 1e-12


class GoalLike(Protocol):
    # read-only members, so frozen dataclasses (SearchGoal) match too
    @property
    def loss_ratio(self) -> float: ...
    @property
    def exceed_ratio(self) -> float: ...
    @property
    def final_trial_duration(self) -> float: ...
    @property
    def duration_sum(self) -> float: ...


def duration_sums(goal: GoalLike, trials: Iterable[tuple[float, float]]) -> tuple[float, float, float, float]:
    """(full_low, full_high, short_low, short_high) duration sums.

    High-Loss trial: loss ratio > Goal Loss Ratio.  Short trial: duration < Final Duration.
    """
    fl = fh = sl = sh = 0.0
    for dur, loss in trials:
        high = loss > goal.loss_ratio + LOSS_EPS
        if dur >= goal.final_trial_duration:
            if high:
                fh += dur
            else:
                fl += dur
        else:
            if high:
                sh += dur
            else:
                sl += dur
    return fl, fh, sl, sh


def exceed_ratios(goal: GoalLike, trials: Iterable[tuple[float, float]]) -> tuple[float, float]:
    """(optimistic, pessimistic) exceed ratios: effective high sum / whole, (whole − full_low) / whole."""
    fl, fh, sl, sh = duration_sums(goal, trials)
    er = goal.exceed_ratio
    coef = er / (1.0 - er)
    eff_high = fh + max(0.0, sh - sl * coef)
    whole = max(fl + eff_high, goal.duration_sum)
    return eff_high / whole, (whole - fl) / whole


def classify(goal: GoalLike, trials: Iterable[tuple[float, float]]) -> str:
    """``"LB"`` (Lower Bound), ``"UB"`` (Upper Bound) or ``"U"`` (Undecided) for one goal.

    coef = ER/(1−ER); eff_high = full_high + max(0, short_high − short_low × coef)
    whole = max(full_low + eff_high, GDS); q = whole × ER
    LB iff whole − full_low ≤ q (then also eff_high ≤ q); UB iff eff_high > q; else undecided.
    """
    fl, fh, sl, sh = duration_sums(goal, trials)
    er = goal.exceed_ratio
    coef = er / (1.0 - er)
    eff_high = fh + max(0.0, sh - sl * coef)
    whole = max(fl + eff_high, goal.duration_sum)
    q = whole * er
    eps = 1e-9 * max(1.0, whole)
    if whole - fl <= q + eps and eff_high <= q + eps:
        return LOWER
    if eff_high > q + eps:
        return UPPER
    return UNDECIDED


def conditional_loss_ratio(goal: GoalLike, trials: Iterable[tuple[float, float]]) -> Optional[float]:
    """The loss ratio at the (1 − ER) quantile of full-length trial time (None: no full trials).

    Full-length trials sorted by loss, best first; rem = max(GDS, full_sum) × (1 − ER); take each
    trial's loss while rem > 0 (rem −= duration); if the trials run out with rem > 0, loss = 1.
    """
    full = sorted((t for t in trials if t[0] >= goal.final_trial_duration), key=lambda t: t[1])
    if not full:
        return None
    full_sum = sum(d for d, _ in full)
    rem = max(goal.duration_sum, full_sum) * (1.0 - goal.exceed_ratio)
    loss: Optional[float] = None
    for dur, lr in full:
        if loss is not None and rem <= 1e-12:
            break
        loss = lr
        rem -= dur
    if rem > 1e-12:
        loss = 1.0
    return loss


def conditional_throughput(goal: GoalLike, load_pps: float,
                           trials: Iterable[tuple[float, float]]) -> Optional[float]:
    """Conditional Throughput = Load × (1 − conditional loss ratio)."""
    lr = conditional_loss_ratio(goal, list(trials))
    if lr is None:
        return None
    return load_pps * (1.0 - lr)
