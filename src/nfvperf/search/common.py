"""Small helpers shared by the searches."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from nfvperf.trial import TrialResult

from .result import GoalResult, SearchResult, TrialRecord

if TYPE_CHECKING:
    from .validity import ValidityRunner

#: a search's progress callback: (fraction done, message)
Progress = Callable[[float, str], None]

#: RFC 2544 §23 per-trial overhead for a bridge: learning 2 s + drain 2 s + restabilise 5 s
RFC2544_TRIAL_OVERHEAD_S = 9.0

#: absolute slack on loss-ratio comparisons (float noise on exact ratios such as 0.005)
LOSS_EPS = 1e-12


def passes(tr: TrialResult, loss_ratio: float) -> bool:
    """Trial meets a loss goal.  For a zero-loss goal one lost frame fails (exact counts)."""
    if loss_ratio <= 0.0:
        return tr.lost == 0 and tr.loss_ratio == 0.0
    return tr.loss_ratio <= loss_ratio + LOSS_EPS


class BudgetExceeded(RuntimeError):
    """The search used up its trial-time budget before reaching its goals."""


def check_budget(spent_s: float, next_s: float, budget_s: Optional[float], what: str = "search") -> None:
    if budget_s is not None and spent_s + next_s > budget_s + 1e-9:
        raise BudgetExceeded(f"{what}: next trial ({next_s:g} s) would exceed the trial-time "
                             f"budget ({spent_s:g} of {budget_s:g} s used)")


@dataclass
class TrialBook:
    """The trial bookkeeping every search does, in one place, and the search's state until it ends.

    :meth:`measure` runs one trial through the runner (a
    :class:`~nfvperf.search.validity.TrialRunner`: the validity rule with retries, and the
    recorder callback, which gets ``phase``, ``search``, the per-trial context and the search's
    ``context``), counts its time (``total_trial_s``; ``wall_s`` with ``overhead_s`` per trial)
    and appends a :class:`TrialRecord` to ``trials`` (unless ``keep=False``: a warm-up).  The
    search adds its ``notes`` and sets ``irregular``; :meth:`result` builds the (frozen)
    :class:`SearchResult` at the end.  :meth:`fits` / :meth:`check_budget` apply the trial-time
    budget; :meth:`report` forwards to the progress callback, if any.
    """

    runner: ValidityRunner
    max_load_pps: float
    search: str                                  # the result's kind, the recorder's ``search`` value
    overhead_s: float = RFC2544_TRIAL_OVERHEAD_S
    time_budget_s: Optional[float] = None
    progress: Optional[Progress] = None
    context: dict[str, object] = field(default_factory=dict)
    trials: list[TrialRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    total_trial_s: float = 0.0
    wall_s: float = 0.0
    irregular: bool = False

    def fits(self, duration_s: float) -> bool:
        """A trial of ``duration_s`` stays within the trial-time budget."""
        return self.time_budget_s is None or \
            self.total_trial_s + duration_s <= self.time_budget_s + 1e-9

    def check_budget(self, duration_s: float, what: Optional[str] = None) -> None:
        """Raise :class:`BudgetExceeded` if a trial of ``duration_s`` would not fit."""
        check_budget(self.total_trial_s, duration_s, self.time_budget_s,
                     what if what is not None else f"{self.search} search")

    def measure(self, load_pps: float, duration_s: float, phase: str,
                judge: Optional[Callable[[TrialResult], bool]] = None, keep: bool = True, /,
                **ctx: object) -> TrialResult:
        """One valid trial at ``load_pps`` for ``duration_s``; ``judge(tr)`` fills the record's
        ``passed`` (single-goal searches)."""
        tr = self.runner.measure(duration_s, load_pps, phase=phase, search=self.search,
                                 **ctx, **self.context)
        self.total_trial_s += tr.duration_s
        self.wall_s += tr.duration_s + self.overhead_s
        if keep:
            self.trials.append(TrialRecord(
                load_pps=load_pps, duration_s=tr.duration_s, loss_ratio=tr.loss_ratio,
                forwarding_rate_pps=tr.forwarding_rate_pps, phase=phase,
                passed=judge(tr) if judge is not None else None))
        return tr

    def report(self, fraction: float, message: str) -> None:
        if self.progress:
            self.progress(fraction, message)

    def result(self, goals: Sequence[GoalResult]) -> SearchResult:
        """The search's result: its ``goals``, what was booked; the first goal's bounds are its own."""
        first = goals[0]
        return SearchResult(kind=self.search, load_pps=first.lower_bound_pps, lower_bound_pps=first.lower_bound_pps,
                            upper_bound_pps=first.upper_bound_pps, goals=list(goals), trials=self.trials,
                            total_trial_s=self.total_trial_s, wall_s=self.wall_s, max_load_pps=self.max_load_pps,
                            irregular=self.irregular or any(g.irregular for g in goals), notes=self.notes)
