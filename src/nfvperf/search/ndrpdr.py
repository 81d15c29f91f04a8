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

from typing import Any, Optional

from .common import RFC2544_TRIAL_OVERHEAD_S, check_budget, passes, record
from .result import GoalResult, SearchResult


def ndrpdr_search(runner: Any, max_load_pps: float, *, pdr_loss_ratio: float = 0.005,
                  trial_duration_s: float = 1.0, final_duration_s: Optional[float] = None,
                  relative_width: float = 0.005, min_load_pps: float = 0.0,
                  overhead_s: float = RFC2544_TRIAL_OVERHEAD_S,
                  time_budget_s: Optional[float] = None, progress: Any = None,
                  **context: Any) -> SearchResult:
    if not 0.0 < pdr_loss_ratio < 1.0:
        raise ValueError("pdr_loss_ratio must be in (0, 1)")
    final = final_duration_s if final_duration_s is not None else trial_duration_s
    out = SearchResult(kind="ndrpdr", load_pps=None, max_load_pps=max_load_pps)
    iv = {"ndr": [min_load_pps, max_load_pps], "pdr": [min_load_pps, max_load_pps]}
    seen_ub = {"ndr": False, "pdr": False}
    seen_lb = {"ndr": False, "pdr": False}

    def update(load: float, tr: Any) -> None:
        if passes(tr, 0.0):
            iv["ndr"][0] = max(iv["ndr"][0], load)
            seen_lb["ndr"] = True
        else:
            iv["ndr"][1] = min(iv["ndr"][1], load)
            seen_ub["ndr"] = True
        if passes(tr, pdr_loss_ratio):
            iv["pdr"][0] = max(iv["pdr"][0], load)
            seen_lb["pdr"] = True
        else:
            iv["pdr"][1] = min(iv["pdr"][1], load)
            seen_ub["pdr"] = True
        for k in iv:   # a lower bound above an upper bound: noise; trust the newer trial
            if iv[k][0] > iv[k][1]:
                if passes(tr, 0.0 if k == "ndr" else pdr_loss_ratio):
                    iv[k][1] = max_load_pps
                else:
                    iv[k][0] = min_load_pps

    def trial(load: float, dur: float, phase: str) -> Any:
        verifying = phase.startswith("verify")
        check_budget(out.total_trial_s, dur, time_budget_s, "ndrpdr search")
        tr = runner.measure(dur, load, phase=phase, search="ndrpdr",
                            ndr_interval=list(iv["ndr"]), pdr_interval=list(iv["pdr"]), **context)
        out.trials.append(record(tr, phase, passes(tr, 0.0)))
        out.total_trial_s += tr.duration_s
        out.wall_s += tr.duration_s + overhead_s
        if not verifying:
            update(load, tr)
        return tr

    floor = max(min_load_pps, max_load_pps * 1e-6)

    def done(k: str) -> bool:
        lo, hi = iv[k]
        if lo >= max_load_pps or hi <= floor:
            return True
        return hi - lo <= relative_width * hi

    tr = trial(max_load_pps, trial_duration_s, "search")
    if not passes(tr, 0.0):
        mrr = max(min_load_pps, tr.forwarding_rate_pps)
        if mrr > iv["pdr"][0] and mrr < max_load_pps:
            trial(mrr, trial_duration_s, "search")
    steps = {"ndr": [0, 0], "pdr": [0, 0]}     # consecutive expansion steps (up, down)
    while not (done("pdr") and done("ndr")):
        k = "pdr" if not done("pdr") else "ndr"
        lo, hi = iv[k]
        last = out.trials[-1].load_pps
        if not seen_ub[k] and lo < max_load_pps:
            nxt = max_load_pps
        else:
            nxt = (lo + hi) / 2.0
            if hi - lo > 2 * relative_width * hi:
                # external search around the last trial (MRR hint), doubling the step
                if lo <= min_load_pps or last == hi:
                    cand = hi * (1 - min(0.5, relative_width * 2 ** min(60, steps[k][1])))
                    steps[k] = [0, steps[k][1] + 1]
                    if cand > nxt:
                        nxt = cand
                elif last == lo:
                    cand = lo * (1 + relative_width * 2 ** min(60, steps[k][0]))
                    steps[k] = [steps[k][0] + 1, 0]
                    if cand < nxt:
                        nxt = cand
        if progress:
            progress(0.5, f"ndrpdr: {k} interval {lo:,.0f}..{hi:,.0f} pps")
        trial(nxt, trial_duration_s, "search")
    no_pass: set[str] = set()
    if final > trial_duration_s:
        # G10: verify each result with a full-length trial; on failure search below at full length
        for k, lr in (("ndr", 0.0), ("pdr", pdr_loss_ratio)):
            lo = iv[k][0]
            if lo <= min_load_pps or passes(trial(lo, final, f"verify-{k}"), lr):
                continue
            hi, step, good = lo, 4 * relative_width, None
            while good is None:
                cand = hi * (1 - step)
                if cand < max(min_load_pps, max_load_pps * 1e-4):
                    break
                if passes(trial(cand, final, f"verify-{k}"), lr):
                    good = cand
                else:
                    hi, step = cand, min(0.5, step * 2)
            if good is None:
                iv[k] = [min_load_pps, hi]
                out.notes.append(f"{k}: no load passed a full-length verification trial")
                no_pass.add(k)
                continue
            while hi - good > relative_width * hi:
                mid = (good + hi) / 2.0
                if passes(trial(mid, final, f"verify-{k}"), lr):
                    good = mid
                else:
                    hi = mid
            iv[k] = [good, hi]
    for k, lr in (("ndr", 0.0), ("pdr", pdr_loss_ratio)):
        lo, hi = iv[k]
        irr = lo >= max_load_pps or k in no_pass or (lo <= min_load_pps and not seen_lb[k])
        why = ("max load is a lower bound" if lo >= max_load_pps else
               "no load passed" if irr else "")
        out.goals.append(GoalResult(name=k, loss_ratio=lr, relative_width=relative_width,
                                    final_trial_duration_s=final, duration_sum_s=final,
                                    lower_bound_pps=lo, upper_bound_pps=None if lo >= max_load_pps else hi,
                                    conditional_throughput_pps=lo, irregular=irr,
                                    irregular_reason=why))
    out.irregular = any(g.irregular for g in out.goals)
    out.load_pps = out.goals[0].lower_bound_pps
    out.lower_bound_pps = out.goals[0].lower_bound_pps
    out.upper_bound_pps = out.goals[0].upper_bound_pps
    return out
