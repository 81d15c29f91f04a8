"""An MLR-style multi-goal search (our controller; decisions by :mod:`.classify`).

Per goal there is a chain of *targets*: the final one (the goal itself) and ``preceding_targets``
coarser ones, each with twice the width of the next and a geometrically smaller duration sum
(down to the initial trial duration).  A target is worked on only when the coarser one before
it is done, so the expensive full-sum trials happen only inside an already narrow interval.

Load selection (CSIT-style):

1. a warm-up trial at Max Load, discarded (its time is counted);
2. a trial at Max Load; its forwarding rate, corrected for the smallest goal loss ratio, is the
   next load (MRR);
3. then, repeatedly, every unfinished target whose preceding target is finished proposes one
   load — more trials at an undecided load inside its bounds, else a bisection point, else an
   expansion step (width × coefficient^n) outside a missing bound — and the *lowest* proposed
   load is measured (lower loads first);
4. stop when every goal has RUB − RLB ≤ width·RUB, or is irregular (Max Load is a lower bound,
   Min Load is an upper bound — fail fast), or the trial-time budget is used up.

Every trial at a load is used for every target and goal (one shared database).

Which undecided load to measure again, and whether to jump to the forwarding-rate hint, is a
named :class:`Strategy` (:data:`STRATEGIES`; docs/engine.md has what the bench measured).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Sequence, Union

from nfvperf.trial import TrialResult

from ..common import RFC2544_TRIAL_OVERHEAD_S, Progress, TrialBook
from ..result import GoalResult, SearchResult
from ..validity import ValidityRunner
from .classify import LOWER, UNDECIDED, UPPER, classify, conditional_throughput
from .goals import SearchGoal


@dataclass(frozen=True)
class Strategy:
    """How the controller picks the next load (tuned with bench/search_efficiency.py).

    ``undecided``: which undecided load inside a target's interval is measured again.  For
    preceding (coarser) targets always the lowest.  For the final target:

    * ``"interior"``: with three or more undecided loads, an inner one (the most trial time
      first); with two undecided loads wider apart than the goal width, first a new load between
      them placed so that either classification closes the width (then only one of the two
      outer loads has to be decided); otherwise the load with the most trial time;
    * ``"cheapest"``: the load that the fewest further trial seconds could decide.

    ``forwarding_hint``: once a target has an upper bound, measure next where that bound's
    forwarded rate would meet the goal loss ratio.
    """

    name: str
    undecided: str = "interior"
    forwarding_hint: bool = False
    summary: str = ""

    def __post_init__(self) -> None:
        if self.undecided not in ("interior", "cheapest"):
            raise ValueError(f"strategy {self.name}: undecided must be 'interior' or 'cheapest'")


DEFAULT = Strategy("default", summary="fewest trial seconds (bench: 0.85 x MLRsearch 1.2.1)")
FORWARDING_HINT = Strategy("forwarding_hint", forwarding_hint=True,
                           summary="near-exact PDR for +5 % trial time; slower on a hard limit")
CHEAPEST = Strategy("cheapest", undecided="cheapest",
                    summary="lower NDR error for +20 % trial time")
PRECISE = Strategy("precise", undecided="cheapest", forwarding_hint=True,
                   summary="lowest error for +35 % trial time")

#: The named strategies: each is on the bench's trial-time / error Pareto front (docs/engine.md).
STRATEGIES: dict[str, Strategy] = {s.name: s for s in (DEFAULT, FORWARDING_HINT, CHEAPEST, PRECISE)}


def get_strategy(strategy: Union[str, Strategy, None]) -> Strategy:
    """A :class:`Strategy` by name (None: the default)."""
    if strategy is None:
        return DEFAULT
    if isinstance(strategy, Strategy):
        return strategy
    try:
        return STRATEGIES[strategy]
    except KeyError:
        raise ValueError(f"unknown MLR strategy {strategy!r}; allowed: "
                         f"{', '.join(STRATEGIES)}") from None


@dataclass
class Target:
    goal: SearchGoal
    index: int                   # 0 = final, 1.. = preceding (coarser)
    loss_ratio: float
    exceed_ratio: float
    relative_width: float
    final_trial_duration: float  # trial duration used for this target
    duration_sum: float
    expand_up: int = 0
    expand_down: int = 0
    done: bool = False

    def moved(self, move: Optional[str]) -> None:
        """Update the expansion counters after this target's proposal was measured."""
        if move == "up":
            self.expand_up, self.expand_down = self.expand_up + 1, 0
        elif move == "down":
            self.expand_up, self.expand_down = 0, self.expand_down + 1
        elif move == "split":
            self.expand_up = self.expand_down = 0


def make_targets(goal: SearchGoal) -> list[Target]:
    """Coarsest first, final last."""
    n = goal.preceding_targets
    out = [Target(goal, 0, goal.loss_ratio, goal.exceed_ratio, goal.relative_width,
                  goal.final_trial_duration, goal.duration_sum)]
    if n:
        mult = (goal.initial_duration / goal.duration_sum) ** (1.0 / n)
        width = goal.relative_width
        for k in range(1, n + 1):
            s = goal.duration_sum * mult ** k if k < n else goal.initial_duration
            width = min(0.5, width * 2)
            out.append(Target(goal, k, goal.loss_ratio, goal.exceed_ratio, width,
                              min(goal.final_trial_duration, s), s))
    return list(reversed(out))


@dataclass
class _Db:
    trials: dict[float, list[tuple[float, float, float]]] = field(default_factory=dict)

    def add(self, load: float, dur: float, loss: float, fwd: float) -> None:
        self.trials.setdefault(load, []).append((dur, loss, fwd))

    def pairs(self, load: float) -> list[tuple[float, float]]:
        return [(d, lr) for d, lr, _ in self.trials.get(load, [])]


def _to_decide(t: Target, pairs: list[tuple[float, float]], dur: float) -> float:
    """Fewest further trial seconds (of ``dur``) that could decide this load either way."""
    best = math.inf
    for loss in (0.0, 1.0):
        extra = list(pairs)
        for k in range(1, 10000):
            extra.append((dur, loss))
            if classify(t, extra) != UNDECIDED:
                best = min(best, k * dur)
                break
            if k * dur >= best:
                break
    return best


def _trial_time(db: _Db, load: float) -> float:
    return sum(d for d, _ in db.pairs(load))


def _pick_undecided(t: Target, und: list[float], db: _Db, dur: float, rnd: Callable[[float], float],
                    strategy: Strategy = DEFAULT) -> float:
    """Which undecided load (sorted ``und``, all inside the target's interval) to measure next,
    or a new load between two of them (see :class:`Strategy`)."""
    if t.index != 0:
        return und[0]             # preceding targets: lowest load first
    if strategy.undecided == "cheapest":
        return min(und, key=lambda l: (_to_decide(t, db.pairs(l), dur), l))
    if len(und) >= 3:
        return max(und[1:-1], key=lambda l: (_trial_time(db, l), -l))
    w = t.relative_width
    if len(und) == 2 and und[1] - und[0] > w * und[1]:
        a, b = und
        lo_m, hi_m = b * (1.0 - w), a / (1.0 - w)   # either class of m then closes the width
        m = rnd(math.sqrt(lo_m * hi_m)) if lo_m <= hi_m else rnd(math.sqrt(a * b))
        if a < m < b:
            return m
    return max(und, key=lambda l: (_trial_time(db, l), -l))


def _bounds(db: _Db, t: Target) -> tuple[Optional[float], Optional[float], dict[float, str]]:
    cls = {load: classify(t, db.pairs(load)) for load in db.trials}
    ubs = [l for l, c in cls.items() if c == UPPER]
    rub = min(ubs) if ubs else None
    lbs = [l for l, c in cls.items() if c == LOWER and (rub is None or l < rub)]
    rlb = max(lbs) if lbs else None
    return rlb, rub, cls


#: (load, trial duration, expansion move or None) a target wants measured next
Proposal = tuple[float, float, Optional[str]]


def mlr_search(runner: ValidityRunner, goals: Sequence[SearchGoal], max_load_pps: float, *,
               min_load_pps: float = 9001.0, warmup_s: float = 1.0,
               time_budget_s: Optional[float] = None,
               overhead_s: float = RFC2544_TRIAL_OVERHEAD_S, progress: Optional[Progress] = None,
               strategy: Union[str, Strategy, None] = None,
               context: Optional[Mapping[str, object]] = None) -> SearchResult:
    """Run the search through ``runner.measure(duration_s, load_pps, **ctx)``.

    ``strategy``: a name from :data:`STRATEGIES` or a :class:`Strategy` (default ``"default"``).
    """
    if not goals:
        raise ValueError("at least one search goal is needed")
    if not 0 < min_load_pps < max_load_pps:
        raise ValueError("need 0 < min_load_pps < max_load_pps")
    names = [g.name for g in goals]
    if len(set(names)) != len(names):
        raise ValueError("goal names must be unique")
    book = TrialBook(runner, max_load_pps, "mlr", overhead_s, time_budget_s, progress, dict(context or {}))
    s = _MlrSearch(book, goals, max_load_pps, min_load_pps, get_strategy(strategy))
    s.initial(warmup_s)
    s.main_loop()
    return s.results()


class _MlrSearch:
    """The controller's state: the shared trial database, the target chains per goal and the
    goals stopped early (fail fast)."""

    GUARD = 100000

    def __init__(self, book: TrialBook, goals: Sequence[SearchGoal], max_load: float,
                 min_load: float, strategy: Strategy):
        self.book, self.goals = book, goals
        self.max_load, self.min_load, self.strategy = max_load, min_load, strategy
        self.db = _Db()
        self.chains = {g.name: make_targets(g) for g in goals}
        self.stopped: dict[str, str] = {}

    def rnd(self, load: float) -> float:
        return round(min(self.max_load, max(self.min_load, load)), 3)

    def trial(self, load: float, dur: float, phase: str, use: bool = True, **ctx: object) -> TrialResult:
        tr = self.book.measure(load, float(dur), phase, None, use, **ctx)
        if use:
            self.db.add(load, tr.duration_s, tr.loss_ratio, tr.forwarding_rate_pps)
        return tr

    # -- 1-2. warm-up and initial trials -------------------------------------------------------
    def initial(self, warmup_s: float) -> None:
        """A discarded warm-up at max load, a trial at max load and, if it lost more than the
        smallest goal loss ratio, one at its forwarding rate corrected for that ratio (MRR)."""
        init_dur = max(c[0].final_trial_duration for c in self.chains.values())
        min_ratio = min(g.loss_ratio for g in self.goals)
        if warmup_s and self.book.fits(warmup_s):
            self.trial(self.max_load, warmup_s, "warmup", use=False)
        if not self.book.fits(init_dur):
            return
        tr0 = self.trial(self.max_load, init_dur, "initial")
        if tr0.loss_ratio > min_ratio:
            mrr = self.rnd(math.floor(tr0.forwarding_rate_pps / (1.0 - min_ratio)))
            if mrr < self.max_load and self.book.fits(init_dur):
                self.trial(mrr, init_dur, "initial-mrr")

    # -- 3. load selection ---------------------------------------------------------------------
    def propose(self, t: Target, prev: Optional[Target]) -> Optional[Proposal]:
        """What this target wants measured next; no side effects except marking the target
        done.  The move ("up", "down", "split") updates the target's expansion counters only if
        this proposal is the one measured."""
        rlb, rub, cls = _bounds(self.db, t)
        if self._finished(t, rlb, rub):
            t.done = True
            return None
        lo = rlb if rlb is not None else -1.0
        hi = rub if rub is not None else math.inf
        if prev is not None:   # start from the coarser target's (narrow) interval
            plb, pub, _ = _bounds(self.db, prev)
            lo = max(lo, (plb if plb is not None else -1.0) - 1e-6)
            hi = min(hi, (pub if pub is not None else math.inf) + 1e-6)
        dur = t.final_trial_duration
        und = sorted(l for l, c in cls.items() if c == UNDECIDED and lo < l < hi)
        if und:
            return _pick_undecided(t, und, self.db, dur, self.rnd, self.strategy), dur, None
        hint = self._hint(t, rlb, rub)
        if hint is not None:
            assert rub is not None  # _hint() proposes a load only below a known RUB
            if rlb is None or rub - rlb > t.relative_width * rub:
                return hint, dur, None
        if rlb is not None and rub is not None:
            return self._narrow(t, rlb, rub)
        if rlb is None and rub is None:   # no trial yet (the budget left out the initial one)
            return self.rnd(self.max_load), dur, None
        if rub is None:   # expand up from the RLB
            step = t.relative_width * (t.goal.expansion_coefficient ** t.expand_up)
            return self.rnd(rlb * (1.0 + step)), dur, "up"
        if rub <= self.min_load:   # expand down from the RUB (rlb is None)
            t.done = True
            return None
        step = t.relative_width * (t.goal.expansion_coefficient ** t.expand_down)
        return self.rnd(rub * (1.0 - min(0.9, step))), dur, "down"

    def _finished(self, t: Target, rlb: Optional[float], rub: Optional[float]) -> bool:
        """Width reached, or irregular: max load is a lower bound, min load an upper bound."""
        if rub is None and rlb is not None and rlb >= self.max_load:
            return True
        if rub is not None and rub <= self.min_load:
            return True
        return rlb is not None and rub is not None and rub - rlb <= t.relative_width * rub + 1e-6

    def _hint(self, t: Target, rlb: Optional[float], rub: Optional[float]) -> Optional[float]:
        """Forwarding-rate hint (strategy option): where the RUB's forwarded rate would meet the
        goal loss ratio, if that is a new load inside the interval."""
        if rub is None or not self.strategy.forwarding_hint:
            return None
        trs = self.db.trials[rub]
        fwd = sum(f * d for d, _, f in trs) / sum(d for d, _, _ in trs)
        h = self.rnd(math.floor(fwd / (1.0 - t.loss_ratio)))
        if h < rub * (1.0 - t.relative_width / 2) and h not in self.db.trials and \
                (rlb is None or h > rlb):
            return h
        return None

    def _narrow(self, t: Target, rlb: float, rub: float) -> Optional[Proposal]:
        """Both bounds known: an external step from the newer bound while the interval is wide
        (doubling the step each time), else a split point."""
        w, dur = t.relative_width, t.final_trial_duration
        mid = self.rnd(math.sqrt(rlb * rub))
        if rub - rlb > 2 * w * rub:
            order = {l: i for i, l in enumerate(self.db.trials)}
            coef = t.goal.expansion_coefficient
            if order[rlb] > order[rub]:
                cand = self.rnd(rlb * (1.0 + w * coef ** t.expand_up))
                if rlb < cand < mid:
                    return cand, dur, "up"
            else:
                cand = self.rnd(rub * (1.0 - min(0.9, w * coef ** t.expand_down)))
                if mid < cand < rub:
                    return cand, dur, "down"
        else:
            # uneven split: a point that closes the goal width whichever way it is classified
            # (if there is one), else one that lands on the width from the RUB
            mid = self.rnd(rub * (1.0 - w) + 1e-3)
            a, b = rub * (1.0 - w), rlb / (1.0 - w)
            if a <= b:
                mid = self.rnd(math.sqrt(a * b))
        if mid <= rlb or mid >= rub:
            t.done = True
            return None
        return mid, dur, "split"

    # -- goal bookkeeping ----------------------------------------------------------------------
    def candidates(self) -> list[tuple[float, float, Target, Optional[str]]]:
        """One proposal per goal still running: from its first unfinished target whose
        preceding target is finished.  Goals whose min load is an upper bound stop (fail fast)."""
        cands: list[tuple[float, float, Target, Optional[str]]] = []
        for gname, chain in self.chains.items():
            if gname in self.stopped:
                continue
            for i, t in enumerate(chain):
                if t.done:
                    continue
                p = self.propose(t, chain[i - 1] if i else None)
                if p is None:
                    continue
                cands.append((p[0], p[1], t, p[2]))
                break
            final = chain[-1]
            if final.done:
                continue
            _, rub, _ = _bounds(self.db, final)
            if rub is not None and rub <= self.min_load and final.goal.fail_fast:
                self.stopped[gname] = "min load is an upper bound (fail fast)"
        return [c for c in cands if c[2].goal.name not in self.stopped]

    def _report(self, t: Target, load: float) -> None:
        done_n = sum(1 for c in self.chains.values() for x in c if x.done)
        total_n = sum(len(c) for c in self.chains.values())
        self.book.report(done_n / total_n, f"mlr: target {t.goal.name}#{t.index} at {load:,.0f} pps")

    # -- termination ---------------------------------------------------------------------------
    def main_loop(self) -> None:
        """Measure the lowest proposed load until no target proposes one, the budget is used
        up, or the loop guard is hit."""
        for _ in range(self.GUARD):
            cands = self.candidates()
            if not cands:
                return
            load, dur, t, move = min(cands, key=lambda c: (c[0], -c[1]))
            if not self.book.fits(dur):
                self.book.notes.append("trial-time budget used up before all goals were reached")
                self.book.irregular = True
                return
            self._report(t, load)
            t.moved(move)
            self.trial(load, dur, "search", goal=t.goal.name, target=t.index)
        self.book.notes.append("search loop guard hit")

    # -- 4. results per goal -------------------------------------------------------------------
    def results(self) -> SearchResult:
        goals = []
        for g in self.goals:
            rlb, rub, _ = _bounds(self.db, self.chains[g.name][-1])
            ct = conditional_throughput(g, rlb, self.db.pairs(rlb)) if rlb is not None else None
            why = self._irregular_reason(g, rlb, rub)
            goals.append(GoalResult.of_goal(g, rlb, rub, ct, bool(why), why))
        return self.book.result(goals)

    def _irregular_reason(self, g: SearchGoal, rlb: Optional[float], rub: Optional[float]) -> str:
        if g.name in self.stopped:
            return self.stopped[g.name]
        if rub is None and rlb is not None and rlb >= self.max_load:
            return "max load is a lower bound"
        if rub is not None and rub <= self.min_load:
            return "min load is an upper bound"
        if rlb is None or rub is None or rub - rlb > g.relative_width * rub + 1e-6:
            return "goal width not reached"
        return ""
