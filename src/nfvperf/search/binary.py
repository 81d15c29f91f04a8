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

from typing import Any, Optional

from .common import RFC2544_TRIAL_OVERHEAD_S, check_budget, passes, record
from .result import GoalResult, SearchResult


def binary_search(runner: Any, max_load_pps: float, *, trial_duration_s: float = 60.0,
                  final_duration_s: Optional[float] = None, resolution_pct: float = 0.1,
                  resolution_pps: Optional[float] = None, loss_ratio: float = 0.0,
                  overhead_s: float = RFC2544_TRIAL_OVERHEAD_S,
                  time_budget_s: Optional[float] = None, progress: Any = None,
                  **context: Any) -> SearchResult:
    """Run the search through ``runner.measure(duration_s, load_pps, **ctx)``.

    ``resolution_pps`` overrides ``resolution_pct`` (of ``max_load_pps``).
    """
    if max_load_pps <= 0:
        raise ValueError("max_load_pps must be > 0")
    final = final_duration_s if final_duration_s is not None else trial_duration_s
    res = resolution_pps if resolution_pps is not None else max_load_pps * resolution_pct / 100.0
    if res <= 0:
        raise ValueError("resolution must be > 0")
    out = SearchResult(kind="binary", load_pps=None, max_load_pps=max_load_pps)
    state = {"lo": 0.0, "hi": max_load_pps}

    def trial(load: float, dur: float, phase: str) -> bool:
        check_budget(out.total_trial_s, dur, time_budget_s, "binary search")
        tr = runner.measure(dur, load, phase=phase, search="binary", lo_pps=state["lo"],
                            hi_pps=state["hi"], **context)
        ok = passes(tr, loss_ratio)
        out.trials.append(record(tr, phase, ok))
        out.total_trial_s += tr.duration_s
        out.wall_s += tr.duration_s + overhead_s
        if progress:
            width = state["hi"] - state["lo"]
            progress(min(0.99, res / max(width, res)), f"binary: {load:,.0f} pps "
                     f"{'ok' if ok else 'loss'}")
        return ok

    def bisect(dur: float, phase: str) -> None:
        while state["hi"] - state["lo"] > res:
            mid = (state["lo"] + state["hi"]) / 2.0
            if trial(mid, dur, phase):
                state["lo"] = mid
            else:
                state["hi"] = mid

    first_full = trial_duration_s >= final
    if trial(max_load_pps, trial_duration_s, "search"):
        state["lo"] = max_load_pps
        verified = first_full
    else:
        bisect(trial_duration_s, "search")
        verified = first_full
    if not verified and state["lo"] > 0:
        # G10: final determination at full length.
        if not trial(state["lo"], final, "verify"):
            failed = state["lo"]
            state["hi"] = failed
            step = max(res, state["hi"] - state["lo"])
            lo = failed
            while True:
                cand = max(0.0, failed - step)
                if cand <= 0.0:
                    lo = 0.0
                    break
                if trial(cand, final, "verify-expand"):
                    lo = cand
                    break
                state["hi"] = cand
                step *= 2.0
            state["lo"] = lo
            bisect(final, "verify-bisect")
            out.notes.append("full-length verification failed at the short-trial result; "
                             "continued below at full length")
    out.load_pps = state["lo"]
    out.lower_bound_pps = state["lo"]
    out.upper_bound_pps = state["hi"]
    out.goals.append(GoalResult(name="throughput", loss_ratio=loss_ratio, exceed_ratio=0.0,
                                relative_width=res / max_load_pps, final_trial_duration_s=final,
                                duration_sum_s=final, lower_bound_pps=state["lo"],
                                upper_bound_pps=state["hi"], conditional_throughput_pps=state["lo"],
                                irregular=state["lo"] >= max_load_pps or state["lo"] <= 0.0,
                                irregular_reason="max load passed" if state["lo"] >= max_load_pps
                                else "no load passed" if state["lo"] <= 0.0 else ""))
    out.irregular = out.goals[0].irregular
    if state["lo"] >= max_load_pps:
        out.upper_bound_pps = None
    return out
