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
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from ..common import RFC2544_TRIAL_OVERHEAD_S
from ..result import GoalResult, SearchResult, TrialRecord
from .classify import LOWER, UNDECIDED, UPPER, classify, conditional_throughput
from .goals import SearchGoal


#: Load-selection strategy (tuned with bench/search_efficiency.py; the defaults are the best
#: found on the stochastic sim DUT).  ``und``: which undecided load to measure again —
#: "interior" (default; final target: with three or more undecided loads in the interval, an
#: inner one first; with two undecided loads wider apart than the goal width, first a new load
#: between them placed so that either classification closes the width — then only one of the
#: two outer loads has to be decided; otherwise the load with the most trial time, i.e. the
#: closest to a decision; preceding targets: the lowest), "mostfinal", "low", "high", "most",
#: "cheap", "cheapfinal", "interiorall", "interior_mid2", "interior_mid3".
#: ``split``: "both" picks, when possible, a point that closes the goal width whichever way it
#: is classified; "low" splits at RUB × (1 − width).  ``pick``: which target's proposal is
#: measured — "low" (lowest load first, CSIT-like), "fine", "coarse", "high".
#: ``hint``: use the RUB's forwarding rate as the next load (off: it cost time on the bench).
#: ``mid_sum``: override the preceding targets' duration sums (None: geometric, like CSIT).
STRATEGY = {"und": "interior", "split": "both", "pick": "low", "hint": False, "mid_sum": None}


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
            if k < n and STRATEGY.get("mid_sum"):
                s = STRATEGY["mid_sum"]
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


def _pick_undecided(t: Target, und: list[float], db: _Db, dur: float, rnd: Any) -> float:
    """Which undecided load (sorted ``und``, all inside the target's interval) to measure next,
    or a new load between two of them (see :data:`STRATEGY`)."""
    mode = STRATEGY["und"]
    w = t.relative_width
    most = max(und, key=lambda l: (_trial_time(db, l), -l))
    if mode == "low":
        return und[0]
    if mode == "high":
        return und[-1]
    if mode == "most":
        return most
    if mode == "cheap":
        return min(und, key=lambda l: (_to_decide(t, db.pairs(l), dur), l))
    if t.index != 0 and mode in ("mostfinal", "interior", "cheapfinal"):
        return und[0]             # preceding targets: lowest load first
    if mode == "mostfinal":
        return most
    if mode == "cheapfinal":
        return min(und, key=lambda l: (_to_decide(t, db.pairs(l), dur), l))
    # "interior" (final target) and its variants
    use_inner = not (mode == "interior_mid2" and t.index == 1)
    use_split = not (mode == "interior_mid3" and t.index == 1)
    if use_inner and len(und) >= 3:
        return max(und[1:-1], key=lambda l: (_trial_time(db, l), -l))
    if use_split and len(und) == 2 and und[1] - und[0] > w * und[1]:
        a, b = und
        lo_m, hi_m = b * (1.0 - w), a / (1.0 - w)   # either class of m then closes the width
        m = rnd(math.sqrt(lo_m * hi_m)) if lo_m <= hi_m else rnd(math.sqrt(a * b))
        if a < m < b:
            return m
    return most


def _bounds(db: _Db, t: Target) -> tuple[Optional[float], Optional[float], dict[float, str]]:
    cls = {load: classify(t, db.pairs(load)) for load in db.trials}
    ubs = [l for l, c in cls.items() if c == UPPER]
    rub = min(ubs) if ubs else None
    lbs = [l for l, c in cls.items() if c == LOWER and (rub is None or l < rub)]
    rlb = max(lbs) if lbs else None
    return rlb, rub, cls


def mlr_search(runner: Any, goals: Sequence[SearchGoal], max_load_pps: float, *,
               min_load_pps: float = 9001.0, warmup_s: float = 1.0,
               time_budget_s: Optional[float] = None,
               overhead_s: float = RFC2544_TRIAL_OVERHEAD_S, progress: Any = None,
               **context: Any) -> SearchResult:
    """Run the search through ``runner.measure(duration_s, load_pps, **ctx)``."""
    if not goals:
        raise ValueError("at least one search goal is needed")
    if not 0 < min_load_pps < max_load_pps:
        raise ValueError("need 0 < min_load_pps < max_load_pps")
    names = [g.name for g in goals]
    if len(set(names)) != len(names):
        raise ValueError("goal names must be unique")
    out = SearchResult(kind="mlr", load_pps=None, max_load_pps=max_load_pps)
    db = _Db()
    chains = {g.name: make_targets(g) for g in goals}
    stopped: dict[str, str] = {}

    def rnd(load: float) -> float:
        return round(min(max_load_pps, max(min_load_pps, load)), 3)

    def budget_ok(dur: float) -> bool:
        return time_budget_s is None or out.total_trial_s + dur <= time_budget_s + 1e-9

    def trial(load: float, dur: float, phase: str, use: bool = True, **ctx: Any) -> Any:
        tr = runner.measure(float(dur), load, phase=phase, search="mlr", **ctx, **context)
        out.total_trial_s += tr.duration_s
        out.wall_s += tr.duration_s + overhead_s
        if use:
            out.trials.append(TrialRecord(load, tr.duration_s, tr.loss_ratio,
                                          tr.forwarding_rate_pps, phase))
            db.add(load, tr.duration_s, tr.loss_ratio, tr.forwarding_rate_pps)
        return tr

    # 1-2. warm-up and initial trials
    init_dur = max(c[0].final_trial_duration for c in chains.values())
    min_ratio = min(g.loss_ratio for g in goals)
    if warmup_s and budget_ok(warmup_s):
        trial(max_load_pps, warmup_s, "warmup", use=False)
    if budget_ok(init_dur):
        tr0 = trial(max_load_pps, init_dur, "initial")
        if tr0.loss_ratio > min_ratio:
            mrr = rnd(math.floor(tr0.forwarding_rate_pps / (1.0 - min_ratio)))
            if mrr < max_load_pps and budget_ok(init_dur):
                trial(mrr, init_dur, "initial-mrr")

    def propose(t: Target, prev: Optional[Target]) -> Optional[tuple[float, float, Optional[str]]]:
        """(load, duration, move) this target wants measured next; no side effects except
        marking the target done.  ``move`` ("up", "down", "split") updates the target's
        expansion counters only if this proposal is the one measured."""
        rlb, rub, cls = _bounds(db, t)
        w = t.relative_width
        dur = t.final_trial_duration
        # irregular ends
        if rub is None and rlb is not None and rlb >= max_load_pps:
            t.done = True
            return None
        if rub is not None and rub <= min_load_pps:
            t.done = True
            return None
        if rlb is not None and rub is not None and rub - rlb <= w * rub + 1e-6:
            t.done = True
            return None
        lo = rlb if rlb is not None else -1.0
        hi = rub if rub is not None else math.inf
        if prev is not None:   # start from the coarser target's (narrow) interval
            plb, pub, _ = _bounds(db, prev)
            lo = max(lo, (plb if plb is not None else -1.0) - 1e-6)
            hi = min(hi, (pub if pub is not None else math.inf) + 1e-6)
        und = sorted(l for l, c in cls.items() if c == UNDECIDED and lo < l < hi)
        if und:
            return _pick_undecided(t, und, db, dur, rnd), dur, None
        hint = None
        if rub is not None and STRATEGY["hint"]:
            # forwarding-rate hint: where the RUB's forwarded rate would meet the goal loss
            trs = db.trials[rub]
            fwd = sum(f * d for d, _, f in trs) / sum(d for d, _, _ in trs)
            h = rnd(math.floor(fwd / (1.0 - t.loss_ratio)))
            if h < rub * (1.0 - w / 2) and h not in db.trials and (rlb is None or h > rlb):
                hint = h
        if hint is not None and (rlb is None or rub - rlb > w * rub):
            return hint, dur, None
        if rlb is not None and rub is not None:
            mid = rnd(math.sqrt(rlb * rub))
            if rub - rlb > 2 * w * rub:
                # external search from the newer bound (the hint), doubling the step each time
                order = {l: i for i, l in enumerate(db.trials)}
                coef = t.goal.expansion_coefficient
                if order[rlb] > order[rub]:
                    cand = rnd(rlb * (1.0 + w * coef ** t.expand_up))
                    if rlb < cand < mid:
                        return cand, dur, "up"
                else:
                    cand = rnd(rub * (1.0 - min(0.9, w * coef ** t.expand_down)))
                    if mid < cand < rub:
                        return cand, dur, "down"
            # uneven split: if the interval is just above the width, land on it exactly
            if rub - rlb <= 2 * w * rub:
                mid = rnd(rub * (1.0 - w) + 1e-3)
                if STRATEGY["split"] == "both":
                    a, b_ = rub * (1.0 - w), rlb / (1.0 - w)
                    if a <= b_:
                        mid = rnd(math.sqrt(a * b_))
            if mid <= rlb or mid >= rub:
                t.done = True
                return None
            return mid, dur, "split"
        if rub is None:   # expand up from the RLB
            step = w * (t.goal.expansion_coefficient ** t.expand_up)
            return rnd(rlb * (1.0 + step)), dur, "up"
        if rlb is None:   # expand down from the RUB
            if rub <= min_load_pps:
                t.done = True
                return None
            step = w * (t.goal.expansion_coefficient ** t.expand_down)
            return rnd(rub * (1.0 - min(0.9, step))), dur, "down"
        return rnd(max_load_pps), dur, None

    # 3. main loop
    guard = 0
    while True:
        guard += 1
        if guard > 100000:
            out.notes.append("search loop guard hit")
            break
        cands: list[tuple[float, float, Target, Optional[str]]] = []
        for gname, chain in chains.items():
            if gname in stopped:
                continue
            for i, t in enumerate(chain):
                if t.done:
                    continue
                p = propose(t, chain[i - 1] if i else None)
                if p is None:
                    continue
                cands.append((p[0], p[1], t, p[2]))
                break
            final = chain[-1]
            if final.done:
                continue
            rlb, rub, _ = _bounds(db, final)
            if rub is not None and rub <= min_load_pps and final.goal.fail_fast:
                stopped[gname] = "min load is an upper bound (fail fast)"
        cands = [c for c in cands if c[2].goal.name not in stopped]
        if not cands:
            break
        if STRATEGY["pick"] == "low":
            load, dur, t, move = min(cands, key=lambda c: (c[0], -c[1]))
        elif STRATEGY["pick"] == "fine":
            load, dur, t, move = min(cands, key=lambda c: (c[2].index, c[0]))
        elif STRATEGY["pick"] == "high":
            load, dur, t, move = max(cands, key=lambda c: (c[0], c[1]))
        else:
            load, dur, t, move = min(cands, key=lambda c: (-c[2].index, c[0]))
        if not budget_ok(dur):
            out.notes.append("trial-time budget used up before all goals were reached")
            out.irregular = True
            break
        if progress:
            done_n = sum(1 for c in chains.values() for x in c if x.done)
            total_n = sum(len(c) for c in chains.values())
            progress(done_n / total_n, f"mlr: target {t.goal.name}#{t.index} at {load:,.0f} pps")
        if move == "up":
            t.expand_up, t.expand_down = t.expand_up + 1, 0
        elif move == "down":
            t.expand_up, t.expand_down = 0, t.expand_down + 1
        elif move == "split":
            t.expand_up = t.expand_down = 0
        trial(load, dur, "search", goal=t.goal.name, target=t.index)

    # 4. results per goal
    for g in goals:
        final = chains[g.name][-1]
        rlb, rub, _ = _bounds(db, final)
        irr, why = False, ""
        if g.name in stopped:
            irr, why = True, stopped[g.name]
        elif rub is None and rlb is not None and rlb >= max_load_pps:
            irr, why = True, "max load is a lower bound"
        elif rub is not None and rub <= min_load_pps:
            irr, why = True, "min load is an upper bound"
        elif rlb is None or rub is None or rub - rlb > g.relative_width * rub + 1e-6:
            irr, why = True, "goal width not reached"
        ct = conditional_throughput(g, rlb, db.pairs(rlb)) if rlb is not None else None
        out.goals.append(GoalResult.of_goal(g, rlb, rub, ct, irr, why))
    first = out.goals[0]
    out.load_pps = first.lower_bound_pps
    out.lower_bound_pps = first.lower_bound_pps
    out.upper_bound_pps = first.upper_bound_pps
    out.irregular = out.irregular or any(g.irregular for g in out.goals)
    return out
