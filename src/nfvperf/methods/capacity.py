"""Capacity figures of one unit in one round of an interleaved study (issue 16).

A zero-loss search on a host whose CPUs slow down for seconds at a time measures when the host
hiccups: one lost frame anywhere decides a trial.  Each round of an interleaved study therefore
measures figures that a hiccup moves only in proportion to its length:

- ``mrr`` — the forwarding rate at a fixed overload (CSIT's Maximum Receive Rate, as its trending
  uses it): one trial at ``overload_pct`` of the max load; the figure is what came out, per
  interface and second.  If the DUT lost nothing, the figure is what the generator offered and only
  a lower bound of the DUT's (``bound: generator``), and the round says so.
- ``pdr`` — a loss-tolerant conditional throughput: an MLR search with one goal, loss ratio 0.5 %
  and exceed ratio 0.5 (CSIT's PDR), with short trials (``round_trial_s``).
- ``ndr`` — the RFC 2544 zero-loss throughput by the entry's own search (binary by default); it
  keeps its name, and a comparison of it says so.

The study's runner (``nfvperf.runner.rounds``) calls :func:`measure_round`; this module sees only the
measurer (``measure(duration, load)``), as every method does.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from nfvperf.search.validity import (InvalidTrialsError, OnTrial, TrialContext, TrialRunner, check_valid,
                                     generator_shortfall)
from nfvperf.trial import Measurer, TrafficProfile, TrialResult

from . import throughput as tp
from .common import rates
from .result import num

#: CSIT's PDR: loss ratio 0.5 %, exceed ratio 0.5
PDR_LOSS_RATIO = 0.005
PDR_EXCEED_RATIO = 0.5
#: the PDR goal's width relative to its upper bound (coarser than a full search: one round is one
#: sample, the rounds' spread is the figure's uncertainty)
PDR_RELATIVE_WIDTH = 0.02
#: OVS removes an idle datapath flow after 10 s (other_config:max-idle): a unit whose traffic
#: stopped longer ago than this gets a warm-up trial first, so its round does not measure upcalls
WARM_FOR_S = 8.0
MRR_ATTEMPTS = 3
#: names of the figures, as the reports print them
METRIC_TITLES = {
    "mrr": "MRR (forwarding rate at overload)",
    "pdr": "PDR (loss ≤ 0.5 %, exceed ratio 0.5)",
    "ndr": "zero-loss throughput (RFC 2544)",
}


@dataclass(frozen=True)
class Figure:
    """One metric of one unit in one round."""

    metric: str
    value_pps: Optional[float]          # per interface; None: the round's trial failed
    bound: str = "dut"                  # dut | generator (the DUT lost nothing: a lower bound)
    offered_pps: Optional[float] = None
    loss_ratio: Optional[float] = None
    trials: int = 0
    trial_s: float = 0.0
    remarks: tuple[str, ...] = ()   # not 'notes': the unit's summary says them once
    error: Optional[str] = None

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


@dataclass
class RoundSettings:
    metrics: list[str]
    trial_s: float = 0.5            # study.DEFAULT_ROUND_TRIAL_S (a higher layer: test_rounds checks they agree)
    overload_pct: float = 100.0

    @classmethod
    def from_study(cls, rounds: Mapping[str, object]) -> "RoundSettings":
        metrics = rounds.get("metrics")
        return cls(metrics=[str(m) for m in metrics] if isinstance(metrics, list) and metrics else ["mrr"],
                   trial_s=num(rounds.get("round_trial_s")) or cls.trial_s,
                   overload_pct=num(rounds.get("overload_pct")) or 100.0)


def _shortfall_only(reasons: list[str]) -> bool:
    """A trial's only fault (its ``check_valid`` reasons) is that the generator sent less than
    asked (``trial.sent_short_reason``): at an overload the generator's own limit is allowed, what
    came out is still what the DUT forwarded."""
    return bool(reasons) and all("of intended" in r for r in reasons)


def warmup(runner: TrialRunner, profile: TrafficProfile, load_pps: float, context: TrialContext) -> float:
    """A discarded trial at ``load_pps`` long enough to send every flow 3 times (at least
    0.2 s): caches and datapath flows are set up before the round's figure is taken."""
    dur = max(0.2, tp.WARMUP_FLOW_PASSES * profile.flows_per_port / max(load_pps, 1.0))
    runner.single(dur, load_pps, dict(context, phase="warmup", warmup=True))
    return dur


def measure_mrr(runner: TrialRunner, profile: TrafficProfile, settings: RoundSettings, ndir: int,
                context: TrialContext) -> Figure:
    """One trial at the overload; the figure is the received rate per interface."""
    load = profile.max_load_pps * settings.overload_pct / 100.0
    remarks: list[str] = []
    trial_s = 0.0
    for attempt in range(1, MRR_ATTEMPTS + 1):
        tr = runner.single(settings.trial_s, load, dict(context, phase="mrr", attempt=attempt),
                           lambda r: not r or _shortfall_only(r))
        trial_s += settings.trial_s
        reasons = check_valid(tr)
        short = _shortfall_only(reasons)
        if reasons and not short:
            remarks.append(f"attempt {attempt} invalid: {'; '.join(reasons)}")
            continue
        dur = tr.effective_duration_s or tr.duration_s
        offered = generator_shortfall(tr) if short else None
        if offered is not None:
            remarks.append(f"the generator offered {offered:,.0f} of {load:,.0f} fps per interface "
                           f"({offered / load:.0%}): the overload is what it could send")
        bound = "generator" if 0 < tr.sent <= tr.received and not (tr.extra or {}).get("backpressure") else "dut"
        if bound == "generator":
            remarks.append("no frame lost: the DUT forwarded all the generator offered; the MRR is "
                           "a lower bound of the DUT's")
        return Figure("mrr", tr.received / dur / max(1, ndir), bound, load if offered is None else offered,
                      tr.loss_ratio, attempt, trial_s, tuple(remarks))
    return Figure("mrr", None, offered_pps=load, trials=MRR_ATTEMPTS, trial_s=trial_s, remarks=tuple(remarks),
                  error=f"no valid MRR trial in {MRR_ATTEMPTS} attempts")


def pdr_params(settings: RoundSettings, base: Optional[tp.ThroughputParams] = None) -> tp.ThroughputParams:
    """The MLR search of one round's PDR: one goal (0.5 % loss, exceed ratio 0.5), trials of
    ``round_trial_s``, 3 of them' worth of time at the goal's load, no warm-up of its own."""
    d = settings.trial_s
    goal = tp.GoalParams(name="pdr", loss_ratio=PDR_LOSS_RATIO, exceed_ratio=PDR_EXCEED_RATIO,
                         relative_width=PDR_RELATIVE_WIDTH, final_trial_duration_s=d,
                         duration_sum_s=3 * d, initial_trial_duration_s=min(d, 0.5))
    kw: dict[str, Any] = {"search": "mlr", "goals": [goal], "warmup": False,
                          "max_load_pct": settings.overload_pct}
    if base is not None:
        kw.update(calibrate=base.calibrate, calibration_margin=base.calibration_margin,
                  min_load_pps=base.min_load_pps, max_retries=base.max_retries)
    return tp.ThroughputParams(**kw)


class _Rec:
    """The recorder a throughput search expects, forwarding every trial with the round's context."""

    def __init__(self, on_trial: OnTrial, context: TrialContext):
        self.on_trial, self.context = on_trial, context

    def trial(self, test: str, tr: TrialResult, **context: object) -> None:
        self.on_trial(tr, dict(self.context, **context))


def measure_search(metric: str, measurer: Measurer, profile: TrafficProfile, params: tp.ThroughputParams,
                   on_trial: OnTrial, context: TrialContext) -> Figure:
    """``pdr`` or ``ndr``: a throughput search; the figure is its result (first goal)."""
    try:
        res = tp.run(measurer, profile, params, _Rec(on_trial, dict(context, phase_group=metric)))
    except InvalidTrialsError as e:
        return Figure(metric, None, error=f"invalid trials: {e}")
    value = res.throughput_pps
    return Figure(metric, value if value and value > 0 else None,
                  "line" if value and value >= profile.max_load_pps * (1 - 1e-6) else "dut",
                  trials=res.trials, trial_s=res.total_trial_s, remarks=tuple(res.notes),
                  error="no load met the goal" if value is not None and value <= 0 else None)


def measure_round(measurer: Measurer, profile: TrafficProfile, unit_params: tp.ThroughputParams,
                  settings: RoundSettings, ndir: int, on_trial: OnTrial, context: TrialContext,
                  warm: bool) -> dict[str, object]:
    """Every metric of ``settings`` for one unit in one round: ``{metric: Figure dict, ...}`` plus
    the round's wall time and whether a warm-up trial ran first."""
    t0 = time.monotonic()
    out: dict[str, Any] = {"figures": {}, "warmup_s": 0.0}
    runner = TrialRunner(measurer, on_trial=on_trial)
    if warm and measurer.warmup_default:
        load = profile.max_load_pps * settings.overload_pct / 100.0
        out["warmup_s"] = warmup(runner, profile, load, context)
    for metric in settings.metrics:
        ctx = dict(context, metric=metric)
        if metric == "mrr":
            fig = measure_mrr(runner, profile, settings, ndir, ctx)
        elif metric == "pdr":
            fig = measure_search("pdr", measurer, profile, pdr_params(settings, unit_params), on_trial, ctx)
        elif metric == "ndr":
            fig = measure_search("ndr", measurer, profile, unit_params, on_trial, ctx)
        else:
            raise ValueError(f"unknown round metric {metric!r}")
        d = fig.to_dict()
        if fig.value_pps is not None:
            d["rates"] = rates(fig.value_pps, profile)
        out["figures"][metric] = d
    out["wall_s"] = time.monotonic() - t0
    return out
