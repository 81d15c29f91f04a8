"""Drive the PyPI MLRsearch 1.2.1 package (module ``MLRsearch``) behind our Measurer, for
cross-checks against our own MLR-style search.  Same goals (our :class:`SearchGoal`), same
validity rule (through the :class:`TrialRunner`), same :class:`SearchResult` out.

MLRsearch's own ``search_duration_max`` is wall-clock (time.monotonic); with the simulated DUT
nothing sleeps, so our ``time_budget_s`` (sum of trial durations) is enforced in the adapter.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping, Optional, Protocol, Sequence, TypeVar

from .common import RFC2544_TRIAL_OVERHEAD_S, BudgetExceeded, TrialBook
from .result import GoalResult, SearchResult
from .validity import ValidityRunner

if TYPE_CHECKING:
    from .mlr.goals import SearchGoal


class _MlrGoalResult(Protocol):
    """What MLRsearch 1.2.1 gives per goal (``MLRsearch.GoalResult``; the package has no types)."""

    relevant_lower_bound: Optional[float]
    relevant_upper_bound: Optional[float]
    conditional_throughput: Optional[float]


_M = TypeVar("_M")


def available() -> bool:
    try:
        import MLRsearch  # noqa: F401
    except ImportError:
        return False
    return True


def mlrsearch_search(runner: ValidityRunner, goals: Sequence[SearchGoal], max_load_pps: float, *,
                     min_load_pps: float = 9001.0, warmup_s: float = 1.0,
                     time_budget_s: Optional[float] = None,
                     overhead_s: float = RFC2544_TRIAL_OVERHEAD_S,
                     context: Optional[Mapping[str, object]] = None) -> SearchResult:
    try:
        from MLRsearch import AbstractMeasurer, Config, MeasurementResult, MultipleLossRatioSearch
        from MLRsearch import SearchGoal as MGoal
    except ImportError as e:   # pragma: no cover
        raise RuntimeError("search 'mlrsearch' needs the MLRsearch==1.2.1 package "
                           "(pip install MLRsearch==1.2.1)") from e

    book = TrialBook(runner, max_load_pps, "mlrsearch", overhead_s, time_budget_s, context=dict(context or {}))
    warm = {"pending": bool(warmup_s)}

    class _Adapter(AbstractMeasurer):
        def measure(self, intended_duration: float, intended_load: float) -> MeasurementResult:
            if not book.fits(intended_duration):
                raise BudgetExceeded("mlrsearch: trial-time budget used up")
            phase = "warmup" if warm["pending"] else "search"
            warm["pending"] = False
            tr = book.measure(float(intended_load), float(intended_duration), phase, None, phase != "warmup")
            exp = tr.expected or tr.sent
            return MeasurementResult(intended_duration=intended_duration,
                                     intended_load=intended_load, offered_count=exp,
                                     loss_count=max(0, exp - tr.received))

    mgoals = [_mgoal(MGoal, g) for g in goals]
    cfg = Config()
    cfg.goals = mgoals
    cfg.min_load = min_load_pps
    cfg.max_load = max_load_pps
    cfg.search_duration_max = 1e9
    cfg.warmup_duration = warmup_s or None
    ctrl = MultipleLossRatioSearch(config=cfg)
    try:
        res = ctrl.search(measurer=_Adapter(), debug=lambda _m: None)
    except BudgetExceeded as e:
        book.irregular = True
        book.notes.append(str(e))
        res = None
    except RuntimeError as e:   # MLRsearch fail-fast: min load is an upper bound
        book.irregular = True
        book.notes.append(f"MLRsearch: {e}")
        res = None
    return book.result([_goal_result(g, res.get(mg) if res is not None else None, res is None)
                        for g, mg in zip(goals, mgoals)])


def _mgoal(MGoal: Callable[..., _M], g: SearchGoal) -> _M:
    """MLRsearch's SearchGoal (class ``MGoal``) for one of ours."""
    return MGoal(loss_ratio=g.loss_ratio, exceed_ratio=g.exceed_ratio,
                 relative_width=g.relative_width,
                 initial_trial_duration=g.initial_trial_duration or g.final_trial_duration,
                 final_trial_duration=g.final_trial_duration,
                 duration_sum=g.duration_sum, preceding_targets=g.preceding_targets,
                 expansion_coefficient=g.expansion_coefficient, fail_fast=g.fail_fast)


def _opt(v: Optional[float]) -> Optional[float]:
    return float(v) if v is not None else None


def _goal_result(g: SearchGoal, gr: Optional[_MlrGoalResult], unfinished: bool) -> GoalResult:
    """Our GoalResult from MLRsearch's per-goal result (None: no result)."""
    rlb = rub = ct = None
    if gr is not None:
        rlb, rub = _opt(gr.relevant_lower_bound), _opt(gr.relevant_upper_bound)
        ct = _opt(gr.conditional_throughput)
    irr = unfinished or rlb is None or rub is None
    why = "" if not irr else ("search did not finish" if unfinished else
                              "max load is a lower bound" if rub is None and rlb is not None
                              else "min load is an upper bound")
    return GoalResult.of_goal(g, rlb, rub, ct, irr, why)
