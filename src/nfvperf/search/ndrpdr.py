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

    def update(load: float, tr: Any) -> None:
        if passes(tr, 0.0):
            iv["ndr"][0] = max(iv["ndr"][0], load)
        else:
            iv["ndr"][1] = min(iv["ndr"][1], load)
            seen_ub["ndr"] = True
        if passes(tr, pdr_loss_ratio):
            iv["pdr"][0] = max(iv["pdr"][0], load)
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
        check_budget(out.total_trial_s, dur, time_budget_s, "ndrpdr search")
        tr = runner.measure(dur, load, phase=phase, search="ndrpdr",
                            ndr_interval=list(iv["ndr"]), pdr_interval=list(iv["pdr"]), **context)
        out.trials.append(record(tr, phase, passes(tr, 0.0)))
        out.total_trial_s += tr.duration_s
        out.wall_s += tr.duration_s + overhead_s
        update(load, tr)
        return tr

    def done(k: str) -> bool:
        lo, hi = iv[k]
        if lo >= max_load_pps:
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
                    cand = hi * (1 - min(0.5, relative_width * 2 ** steps[k][1]))
                    steps[k] = [0, steps[k][1] + 1]
                    if cand > nxt:
                        nxt = cand
                elif last == lo:
                    cand = lo * (1 + relative_width * 2 ** steps[k][0])
                    steps[k] = [steps[k][0] + 1, 0]
                    if cand < nxt:
                        nxt = cand
        if progress:
            progress(0.5, f"ndrpdr: {k} interval {lo:,.0f}..{hi:,.0f} pps")
        trial(nxt, trial_duration_s, "search")
    if final > trial_duration_s:
        for k, lr in (("ndr", 0.0), ("pdr", pdr_loss_ratio)):
            while iv[k][0] > min_load_pps:
                tr = trial(iv[k][0], final, f"verify-{k}")
                if passes(tr, lr):
                    break
                # failed at full length: the interval re-opens below
                iv[k] = [max(min_load_pps, iv[k][0] * (1 - 4 * relative_width)), iv[k][0]]
                while not done(k):
                    t2 = trial((iv[k][0] + iv[k][1]) / 2.0, final, f"verify-{k}")
                    del t2
    for k, lr in (("ndr", 0.0), ("pdr", pdr_loss_ratio)):
        lo, hi = iv[k]
        irr = lo >= max_load_pps
        out.goals.append(GoalResult(name=k, loss_ratio=lr, relative_width=relative_width,
                                    final_trial_duration_s=final, duration_sum_s=final,
                                    lower_bound_pps=lo, upper_bound_pps=None if irr else hi,
                                    conditional_throughput_pps=lo, irregular=irr,
                                    irregular_reason="max load is a lower bound" if irr else ""))
    out.load_pps = out.goals[0].lower_bound_pps
    out.lower_bound_pps = out.goals[0].lower_bound_pps
    out.upper_bound_pps = out.goals[0].upper_bound_pps
    return out
