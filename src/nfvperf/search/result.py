"""Result dataclasses shared by the searches."""
from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Optional, Sequence, TypedDict

if TYPE_CHECKING:
    from .mlr.goals import SearchGoal


@dataclass
class TrialRecord:
    """One valid trial as a search used it."""

    load_pps: float
    duration_s: float
    loss_ratio: float
    forwarding_rate_pps: float
    phase: str = "search"
    passed: Optional[bool] = None     # for single-goal searches: loss within the goal


@dataclass(frozen=True)
class GoalResult:
    """The outcome of one search goal (MLR terms; also used for NDR/PDR and binary)."""

    name: str
    loss_ratio: float
    exceed_ratio: float = 0.0
    relative_width: Optional[float] = None
    final_trial_duration_s: Optional[float] = None
    duration_sum_s: Optional[float] = None
    lower_bound_pps: Optional[float] = None      # relevant lower bound (RLB)
    upper_bound_pps: Optional[float] = None      # relevant upper bound (RUB)
    conditional_throughput_pps: Optional[float] = None
    irregular: bool = False
    irregular_reason: str = ""

    @classmethod
    def of_goal(cls, g: SearchGoal, rlb: Optional[float], rub: Optional[float], ct: Optional[float],
                irregular: bool, reason: str) -> "GoalResult":
        """From one of our MLR SearchGoals and its bounds."""
        return cls(name=g.name, loss_ratio=g.loss_ratio, exceed_ratio=g.exceed_ratio,
                   relative_width=g.relative_width, final_trial_duration_s=g.final_trial_duration,
                   duration_sum_s=g.duration_sum, lower_bound_pps=rlb, upper_bound_pps=rub,
                   conditional_throughput_pps=ct, irregular=irregular, irregular_reason=reason)

    @property
    def width_pps(self) -> Optional[float]:
        if self.lower_bound_pps is None or self.upper_bound_pps is None:
            return None
        return self.upper_bound_pps - self.lower_bound_pps

    @property
    def load_pps(self) -> Optional[float]:
        """The benchmark value of the goal: the RLB (MLR §reporting)."""
        return self.lower_bound_pps

    def to_dict(self) -> dict[str, object]:
        d = dataclasses.asdict(self)
        d["width_pps"] = self.width_pps
        return d


@dataclass(frozen=True)
class SearchResult:
    """What a search found and what it cost."""

    kind: str                                   # binary | ndrpdr | mlr | mlrsearch
    load_pps: Optional[float]                   # the primary result (first goal's RLB)
    lower_bound_pps: Optional[float] = None
    upper_bound_pps: Optional[float] = None
    goals: Sequence[GoalResult] = field(default_factory=list)
    trials: Sequence[TrialRecord] = field(default_factory=list)
    total_trial_s: float = 0.0                  # sum of valid trial durations (incl. warm-up)
    wall_s: float = 0.0                         # incl. RFC 2544 §23 per-trial overheads
    max_load_pps: Optional[float] = None
    irregular: bool = False
    notes: Sequence[str] = field(default_factory=list)
    # facts worth keeping that do not qualify the result (e.g. a generator cap far above it)
    info: Sequence[str] = field(default_factory=list)
    warmup: Optional[Mapping[str, object]] = None      # the discarded warm-up trial, if one ran
    invalid_trials: int = 0                     # trials repeated because they were invalid
    invalid_reasons: Mapping[str, int] = field(default_factory=dict)   # count per kind of reason

    @property
    def width_pps(self) -> Optional[float]:
        if self.lower_bound_pps is None or self.upper_bound_pps is None:
            return None
        return self.upper_bound_pps - self.lower_bound_pps

    @property
    def trials_used(self) -> int:
        return len(self.trials)

    def goal(self, name: str) -> GoalResult:
        for g in self.goals:
            if g.name == name:
                return g
        raise KeyError(name)

    def to_dict(self) -> dict[str, object]:
        d = dataclasses.asdict(self)
        d["width_pps"] = self.width_pps
        d["trials_used"] = self.trials_used
        d["goals"] = [g.to_dict() for g in self.goals]
        return d


class RepeatSummary(TypedDict):
    """:func:`repeat_summary`'s record (stored with the test as ``repeat``)."""

    n: int
    values_pps: list[float]
    median_pps: Optional[float]
    min_pps: Optional[float]
    max_pps: Optional[float]
    relative_range: Optional[float]
    max_min_ratio: Optional[float]


def repeat_summary(values: list[Optional[float]]) -> RepeatSummary:
    """Median and spread of one headline over repetitions of a search (``--repeat N``).

    ``relative_range`` = (max − min) / median, ``max_min_ratio`` = max / min (None when min is 0);
    a repetition without a value (no loss-free load) counts as 0."""
    vals = [float(v) if v is not None else 0.0 for v in values]
    if not vals:
        return {"n": 0, "values_pps": [], "median_pps": None, "min_pps": None, "max_pps": None,
                "relative_range": None, "max_min_ratio": None}
    med = statistics.median(vals)
    lo, hi = min(vals), max(vals)
    return {"n": len(vals), "values_pps": vals, "median_pps": med, "min_pps": lo, "max_pps": hi,
            "relative_range": (hi - lo) / med if med > 0 else None,
            "max_min_ratio": hi / lo if lo > 0 else None}
