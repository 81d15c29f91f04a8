"""Every result says why (issue 28): the line that says what bound a result, where the frames of
the trial just above it were lost, and, beside a study's ratio, the telemetry that differs most
between the two units.  Built from the telemetry stored with each trial (``nfvperf.tg.telemetry``).

The trials that make a result (:func:`result_trials`): a unit of an interleaved study, its
measured round trials (warm-ups left out); a search, its valid trials at the result's load (the
last one) and, for the loss, the lowest load above the result that lost frames (the search's
upper bound at that point).
"""
from __future__ import annotations

import statistics
from typing import Any, Optional

from nfvperf.report import ceiling as hc
from nfvperf.report.extract import fmt_num, result_value
from nfvperf.report.rounds import is_rounds_test, ratio_text, rounds_result
from nfvperf.report.table import Table
from nfvperf.tg.telemetry import (NA, PATH_FIELDS, PATH_NAMES, available, explain_trial, loss_account,
                                  loss_text, pmd_summary)

#: a counter's difference below this (absolute for shares, relative otherwise) is "alike"
ALIKE = 0.05


def _trial(tr: Any) -> dict[str, Any]:
    """A stored trial as the telemetry functions read it (its TrialResult dict and context)."""
    d = dict(getattr(tr, "detail", None) or {})
    d.setdefault("load_pps", getattr(tr, "load_pps", None))
    d["context"] = dict(getattr(tr, "context", None) or {})
    d.setdefault("valid", getattr(tr, "valid", True))
    return d


def _lost(d: dict[str, Any]) -> int:
    return max(0, int(d.get("expected") or d.get("sent") or 0) - int(d.get("received") or 0))


def result_trials(t: Any) -> tuple[list[dict[str, Any]], Optional[dict[str, Any]]]:
    """(the trials that make ``t``'s result, the trial just above it that lost frames or None)."""
    trials = [_trial(tr) for tr in getattr(t, "trials", None) or []]
    trials = [d for d in trials if d.get("telemetry")]
    if is_rounds_test(t):
        summ = rounds_result(t) or {}
        metric = next(iter(summ.get("metrics") or {"mrr": None}))
        made = [d for d in trials if d["context"].get("metric") == metric and not d["context"].get("warmup")
                and d["context"].get("used", True)]
        return made, None
    value = result_value(t)
    if value is None:
        return [], None
    ok = [d for d in trials if d.get("valid", True) and not d["context"].get("warmup")]
    at = [d for d in ok if abs(float(d.get("load_pps") or 0) - value) <= 0.005 * value]
    above = [d for d in ok if float(d.get("load_pps") or 0) > value * 1.005 and _lost(d)]
    return at[-1:], (min(above, key=lambda d: float(d.get("load_pps") or 0)) if above else None)


def _median_trial(trials: list[dict[str, Any]]) -> Optional[dict[str, Any]]:
    if not trials:
        return None
    ordered = sorted(trials, key=lambda d: int(d.get("received") or 0))
    return ordered[len(ordered) // 2]


# ------------------------------------------------------------------------- the result's line
def why_rows(tests: list[Any], env: dict[str, Any]) -> list[list[str]]:
    """Per result: [test, frame B, figure, what bound it, where the loss above it went]."""
    rows = []
    for t in tests:
        if t.status == "skipped" or not t.results:
            continue
        made, above = result_trials(t)
        trial = _median_trial(made)
        if trial is None:
            continue
        value = result_value(t)
        if is_rounds_test(t):
            value = ((rounds_result(t) or {}).get("metrics") or {}).get("mrr", {}).get("median_pps", value)
        ceil, lower = hc.ceiling_bound(env, t.frame_size_b, (t.topology or {}).get("port_kind"))
        label = hc.bound_label(value, ceil, lower_bound=lower)
        loss_of = above if above is not None else trial
        acc = (loss_of.get("telemetry") or {}).get("loss") or loss_account(loss_of)
        where = loss_text(acc)
        if above is not None:
            where = f"at {fmt_num(above.get('load_pps'), 0)} fps: {where}"
        rows.append([t.name, fmt_num(t.frame_size_b), fmt_num(value, 0), explain_trial(trial, label), where])
    return rows


def why_table(tests: list[Any], env: dict[str, Any]) -> Optional[Table]:
    rows = why_rows(tests, env)
    if not rows:
        return None
    return Table("Why: what bound each result, where frames were lost",
                 "Built from the telemetry read before and after each trial (outside its measured "
                 "interval): the DUT's PMDs (busiest PMD's busy share over the traffic, processing "
                 "cycles per packet, the share of packets each lookup stage handled), the datapath's "
                 "flows, and the generator's own counts. A search's line is its trial at the result's "
                 "load; its loss column is the lowest load above it that lost frames; an interleaved "
                 "unit's line is its median round trial. \"not available\": the DUT cannot report it "
                 "(docs/telemetry.md).",
                 ["Test", "Frame B", "fps / interface", "bound: why", "loss located"], rows, key="why")


# ------------------------------------------------------------------------------ comparisons
def trial_metrics(d: dict[str, Any]) -> dict[str, float]:
    """The comparable figures of one trial's telemetry: lookup-stage shares, cycles per packet,
    busiest PMD's busy share, datapath flows, frames not sent, where the lost frames went
    (shares of the trial's loss)."""
    tel = d.get("telemetry") or {}
    out: dict[str, float] = {}
    s = pmd_summary(tel)
    if s is not None:
        for k, v in (s.get("path_shares") or {}).items():
            out[f"share:{k}"] = float(v)
        if available(s.get("cycles_per_packet")):
            out["cycles_per_packet"] = float(s["cycles_per_packet"])
        if isinstance(s.get("busiest"), dict):
            out["share:pmd_busy"] = float(s["busiest"]["busy_share"])
        if available(s.get("datapath_flows")):
            out["datapath_flows"] = float(s["datapath_flows"])
    acc = tel.get("loss") if "loss" in tel else loss_account(d)
    lost = int((acc or {}).get("lost") or 0)
    for k, v in ((acc or {}).get("parts") or {}).items():
        if available(v) and k != "not_sent" and lost:
            out[f"share:loss_{k}"] = float(v) / lost
    gen = tel.get("generator") or {}
    if available(gen.get("not_sent")) and gen.get("intended"):
        out["share:not_sent"] = float(gen["not_sent"]) / float(gen["intended"])
    return out


METRIC_NAMES = {**{f"share:{k}": f"{PATH_NAMES[k]} hits" if k.endswith("_hits") else PATH_NAMES[k]
                   for k in PATH_FIELDS},
                "share:pmd_busy": "PMD busy", "cycles_per_packet": "cycles/packet",
                "datapath_flows": "datapath flows", "share:not_sent": "frames not sent",
                "share:loss_dut_rx": "lost at DUT RX",
                "share:loss_dut_rx_full": "held back by DUT RX", "share:loss_dut_inside": "lost inside DUT",
                "share:loss_dut_tx": "lost at DUT TX", "share:loss_vnf": "lost in VNFs",
                "share:loss_generator_rx": "missed at generator RX"}


def unit_metrics(trials: list[dict[str, Any]]) -> dict[str, float]:
    """Each figure's median over a unit's trials."""
    per: dict[str, list[float]] = {}
    for d in trials:
        for k, v in trial_metrics(d).items():
            per.setdefault(k, []).append(v)
    return {k: statistics.median(v) for k, v in per.items()}


def _fmt(k: str, v: float) -> str:
    if k.startswith("share:"):
        pct = 100.0 * v
        fine = (0 < pct < 1 or 99 < pct < 100) and round(pct, 1) not in (0.0, 100.0)
        return f"{pct:.1f} %" if fine else f"{pct:.0f} %"
    return f"{v:,.0f}"


def differences(a: dict[str, float], b: dict[str, float]) -> list[tuple[float, str]]:
    """(how much, figure) for every figure both units have, the most different first: shares by
    their absolute difference, other figures relative to the larger."""
    out = []
    for k in sorted(set(a) & set(b)):
        x, y = a[k], b[k]
        if k.startswith("share:"):
            diff = abs(x - y)
        else:
            top = max(abs(x), abs(y))
            diff = abs(x - y) / top if top else 0.0
        out.append((diff, k))
    return sorted(out, key=lambda p: (-p[0], p[1]))


def comparison_text(unit: str, base: str, a: dict[str, float], b: dict[str, float], top: int = 3) -> str:
    """``flows=100000 vs flows=1: EMC hits 2 % vs 99 %, cycles/packet 310 vs 180``; when nothing
    differs by :data:`ALIKE`, says so with the figures that carry the traffic (why no difference)."""
    if not a or not b:
        return f"{unit} vs {base}: telemetry {NA}"
    diffs = differences(a, b)
    differ = [k for d, k in diffs if d >= ALIKE]
    if differ:
        return f"{unit} vs {base}: " + ", ".join(f"{METRIC_NAMES.get(k, k)} {_fmt(k, a[k])} vs {_fmt(k, b[k])}"
                                                  for k in differ[:top])
    carry = sorted((k for k in a if k in b and k.startswith("share:") and max(a[k], b[k]) >= 0.01
                    and not k.startswith("share:loss") and k != "share:not_sent"), key=lambda k: -a[k])[:2]
    carry += [k for k in ("cycles_per_packet",) if k in a and k in b]
    alike = ", ".join(f"{METRIC_NAMES.get(k, k)} {_fmt(k, a[k])} vs {_fmt(k, b[k])}" for k in carry)
    return f"{unit} vs {base}: no counter differs by {100 * ALIKE:.0f} % or more" + (f" ({alike})" if alike else "")


def _study_units(tests: list[Any]) -> dict[tuple[str, Optional[int]], list[Any]]:
    out: dict[tuple[str, Optional[int]], list[Any]] = {}
    for t in tests:
        st = getattr(t, "study", None) or {}
        if st.get("name") and t.status != "skipped":
            out.setdefault((st["name"], t.frame_size_b), []).append(t)
    return out


def _label(t: Any) -> str:
    axes = (t.study or {}).get("axes") or {}
    return ", ".join(f"{k}={v}" for k, v in axes.items()) or t.name


def _ratio_text(t: Any, base: Any) -> str:
    if is_rounds_test(t):      # its first metric's ratio over the rounds
        return ratio_text(next(iter(((rounds_result(t) or {}).get("ratios") or {}).values()), None))
    a, b = result_value(t), result_value(base)
    return f"{a / b:.2f}×" if a and b else "—"


def comparison_rows(tests: list[Any]) -> list[list[str]]:
    """Per study unit beside its baseline: [study, frame B, ratio, what differs most]."""
    rows = []
    for (name, size), units in _study_units(tests).items():
        base = next((u for u in units if (u.study or {}).get("baseline")), None)
        if base is None:
            continue
        bm = unit_metrics(result_trials(base)[0])
        for u in units:
            if u is base:
                continue
            um = unit_metrics(result_trials(u)[0])
            rows.append([name, fmt_num(size), _ratio_text(u, base),
                         comparison_text(_label(u), _label(base), um, bm)])
    return rows


def comparison_table(tests: list[Any]) -> Optional[Table]:
    rows = comparison_rows(tests)
    if not rows:
        return None
    return Table("Comparisons explained: the telemetry that differs most between units",
                 "Beside each unit's ratio to its study's baseline, the figures of the DUT's and the "
                 "generator's telemetry that differ most between the two (medians over the trials "
                 "that made each result; shares are of the packets the PMDs handled, of the frames "
                 "intended, or of the frames lost). OVS ≥ 2.16 sends flows whose rules match only "
                 "in_port down its \"simple match\" path, which skips the EMC and the classifier, "
                 "so the flow count stops mattering there (docs/telemetry.md).",
                 ["Study", "Frame B", "ratio", "what differs most"], rows, key="explained")
