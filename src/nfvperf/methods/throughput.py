"""RFC 2544 §26.1 throughput (zero loss or any loss goal), by binary | ndrpdr | mlr | mlrsearch."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal, Mapping, Optional, TypedDict

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nfvperf.search.result import SearchResult
from nfvperf.search.common import RFC2544_TRIAL_OVERHEAD_S, Progress
from nfvperf.search.validity import InvalidTrialsError, TrialContext, TrialRunner, check_valid, generator_shortfall
from nfvperf.trial import Measurer, TrafficProfile, TrialResult

from .common import MAX_RECALIBRATIONS, MethodInfo, MethodParams, RATE, MethodResult, Rec, Recorder, rates, setup
from .result import Stored, headline_pps, num
from nfvperf.search.mlr import SearchGoal
from nfvperf.search.mlr import PRESETS
from nfvperf.search.binary import binary_search
from nfvperf.search.ndrpdr import ndrpdr_search
from nfvperf.search.mlr import mlr_search
from nfvperf.search.mlrsearch_engine import mlrsearch_search

SearchKind = Literal["binary", "ndrpdr", "mlr", "mlrsearch"]
PresetName = Literal["csit_ndr_pdr", "csit_ndr", "csit_pdr", "loss_tolerant", "rfc2544", "tst009"]

#: the auto warm-up sends every flow at least this many times at the warm-up load
WARMUP_FLOW_PASSES = 3
WARMUP_MIN_S = 1.0


class GoalParams(BaseModel):
    """One MLR search goal (METHODOLOGY §8 terms)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(..., min_length=1)
    loss_ratio: float = Field(0.0, ge=0.0, lt=1.0)
    exceed_ratio: float = Field(0.5, ge=0.0, lt=1.0)
    relative_width: float = Field(0.005, gt=0.0, lt=1.0)
    final_trial_duration_s: float = Field(1.0, gt=0.0)
    duration_sum_s: float = Field(21.0, gt=0.0)
    initial_trial_duration_s: Optional[float] = Field(None, gt=0.0)

    def to_goal(self) -> SearchGoal:
        return SearchGoal(self.name, self.loss_ratio, self.exceed_ratio, self.relative_width,
                          self.final_trial_duration_s, self.duration_sum_s,
                          initial_trial_duration=self.initial_trial_duration_s)


class ThroughputParams(MethodParams):
    search: SearchKind = Field("binary", description="binary (RFC 2544), ndrpdr, mlr (ours), mlrsearch (PyPI 1.2.1)")
    loss_ratio: float = Field(0.0, ge=0.0, lt=1.0, description="goal loss ratio (0 = RFC 2544 zero loss)")
    pdr_loss_ratio: float = Field(0.005, gt=0.0, lt=1.0, description="ndrpdr: the PDR goal loss ratio")
    trial_duration_s: float = Field(60.0, gt=0.0, description="search trial duration (RFC 2544 §24: ≥60 s)")
    final_trial_duration_s: Optional[float] = Field(None, gt=0.0,
                                                    description="full-length verification; default = trial_duration_s")
    resolution_pct: float = Field(0.1, gt=0.0, le=50.0, description="binary: stop at width ≤ this % of line rate")
    resolution_pps: Optional[float] = Field(None, gt=0.0, description="binary: stop at width ≤ this many fps per "
                                            "interface, the same at every frame size; replaces resolution_pct")
    relative_width: float = Field(0.005, gt=0.0, lt=1.0,
                                  description="ndrpdr/mlr: goal width relative to the upper bound")
    max_load_pct: float = Field(100.0, gt=0.0, le=100.0, description="max load, % of line rate (L1)")
    min_load_pps: float = Field(9001.0, gt=0.0, description="mlr/mlrsearch min load")
    warmup: Optional[bool] = Field(None, description="a discarded warm-up trial before the search (flow set-up, "
                                   "caches, vhost reconnects); default: on with a real generator (tgen) "
                                   "and for mlr/mlrsearch, off on the sim; a calibration trial at the "
                                   "same load, as long, is its first pass")
    warmup_s: Optional[float] = Field(None, ge=0.0, description="warm-up duration; default max(1 s, 3 × "
                                      "flows per port / warm-up load): every flow sent ≥ 3 times; 0 = none")
    warmup_load_pct: float = Field(100.0, gt=0.0, le=100.0, description="warm-up load, % of the max load")
    preset: Optional[PresetName] = Field(None, description="goal preset (implies search: mlr unless search is "
                                         "given): csit_ndr_pdr, csit_ndr, csit_pdr, loss_tolerant, rfc2544, tst009")
    goals: Optional[list[GoalParams]] = Field(None, min_length=1, description="mlr/mlrsearch explicit goals")
    time_budget_s: Optional[float] = Field(None, gt=0.0, description="cap on total trial seconds")
    calibrate: bool = Field(True, description="with a generator that can fall short of the intended load "
                            "(tgen), first measure what it can offer and cap the max load below that")
    calibration_margin: float = Field(0.9, gt=0.0, le=1.0,
                                      description="max load = this × the rate the generator achieved")

    @model_validator(mode="before")
    @classmethod
    def _preset_implies_mlr(cls, data: object) -> object:
        """``preset:`` / ``goals:`` without ``search:`` choose the MLR search they belong to."""
        if isinstance(data, dict) and "search" not in data and (data.get("preset") or data.get("goals")):
            data = dict(data, search="mlr")
        return data

    @model_validator(mode="after")
    def _check(self) -> "ThroughputParams":
        if self.final_trial_duration_s is not None and self.final_trial_duration_s < self.trial_duration_s:
            raise ValueError("final_trial_duration_s must be >= trial_duration_s (G10: the final "
                             "determination uses full-length trials)")
        if self.preset and self.goals:
            raise ValueError("give either preset or goals, not both")
        if (self.preset or self.goals) and self.search not in ("mlr", "mlrsearch"):
            raise ValueError("preset/goals apply only to search: mlr or mlrsearch")
        if self.goals and len({g.name for g in self.goals}) != len(self.goals):
            raise ValueError("goal names must be unique")
        return self

    def mlr_goals(self) -> tuple:
        if self.goals:
            return tuple(g.to_goal() for g in self.goals)
        if self.preset:
            return PRESETS[self.preset]
        final = self.final_trial_duration_s or self.trial_duration_s
        return (SearchGoal("throughput", self.loss_ratio, 0.0, self.relative_width, final, final,
                           initial_trial_duration=min(1.0, self.trial_duration_s)),)


@dataclass(frozen=True)
class ThroughputResult(MethodResult):
    method: str
    frame_size_b: int
    search: str
    throughput_pps: Optional[float]              # RLB of the first goal / binary result
    rates: Mapping[str, Optional[float]] = field(default_factory=dict)   # fps, l1_mbps, l1_pct, l2_mbps (per if)
    line_rate_pps: float = 0.0
    max_load_pps: float = 0.0
    lower_bound_pps: Optional[float] = None
    upper_bound_pps: Optional[float] = None
    goals: tuple[Stored, ...] = ()               # per-goal GoalResult dicts
    trials: int = 0
    total_trial_s: float = 0.0
    wall_s: float = 0.0
    irregular: bool = False
    bidirectional: bool = True
    load_is: str = "per interface (per direction)"
    notes: tuple[str, ...] = ()
    info: tuple[str, ...] = ()                    # facts that do not qualify the result
    trace: tuple[Stored, ...] = ()                # ({load_pps, duration_s, loss_ratio, phase}, ...)
    warmup: Optional[Mapping[str, object]] = None   # the discarded warm-up trial, if one ran
    invalid_trials: int = 0                       # trials repeated because they were invalid
    invalid_reasons: Mapping[str, int] = field(default_factory=dict)   # {kind of reason: count}

    def rate_pps(self) -> Optional[float]:
        """The median over repetitions (the runner's ``repeat``), else the first goal's RLB."""
        return headline_pps(self.stored())

    def zero_loss_throughput(self) -> Optional[float]:
        """The rate, when the first goal has loss ratio 0 and exceed ratio 0 (binary search, the
        rfc2544 MLR preset), not an NDR/PDR with a 50 % exceed ratio."""
        g = self.goals[0] if self.goals and isinstance(self.goals[0], dict) else {}
        return self.rate_pps() if not num(g.get("loss_ratio")) and not num(g.get("exceed_ratio")) else None

    @property
    def pdr_pps(self) -> Optional[float]:
        for g in self.goals:
            if g.get("name") == "pdr":
                return num(g.get("lower_bound_pps"))
        return None


#: a generator cap qualifies a result (a "generator-limited" note) only when the result reaches this
#: fraction of the cap; below it the DUT lost frames first and the cap is kept as information
GENERATOR_LIMITED_FRACTION = 0.9


def calibration_duration(params: ThroughputParams) -> float:
    return min(1.0, params.trial_duration_s)


def calibrate_max_load(runner: TrialRunner, max_load: float, params: ThroughputParams, warms: bool = False,
                       context: Optional[TrialContext] = None) -> tuple[float, Optional[str], TrialResult]:
    """One short trial at ``max_load``: if the generator sent less than intended, return a max
    load of ``calibration_margin`` × what it achieved, and a note saying so; and the trial.

    The trial is recorded (phase ``calibration``, never used for a decision): a search whose
    max load the generator cannot offer would see only invalid trials and fail, which tells the
    user nothing about the DUT.  ``warms``: it is also the warm-up's first pass, recorded as one
    (phase ``warmup``, ``warmup: true``, attempt 1) with ``calibration: true`` (see :func:`search`)."""
    ctx = dict(phase="warmup", warmup=True, calibration=True) if warms else dict(phase="calibration")
    tr = runner.single(calibration_duration(params), max_load, dict(context or {}, attempt=1, **ctx))
    achieved = generator_shortfall(tr)
    if achieved is None:
        return max_load, None, tr
    capped = achieved * params.calibration_margin
    return capped, (f"generator-limited: at {max_load:,.0f} fps per interface the generator sent "
                    f"{tr.sent:,} of {tr.expected:,} frames ({achieved:,.0f} fps); max load capped at "
                    f"{capped:,.0f} fps ({params.calibration_margin:.0%} of that). A result at the cap "
                    f"means the DUT is faster than this generator set-up can show"), tr


def search(runner: TrialRunner, profile: TrafficProfile, params: ThroughputParams,
           progress: Optional[Progress] = None, context: Optional[TrialContext] = None) -> SearchResult:
    """Run the chosen search (used by other methods as their throughput prerequisite)."""
    max_load = profile.max_load_pps * params.max_load_pct / 100.0
    limited = params.calibrate and getattr(runner.measurer, "rate_limited", False)
    notes: list[str] = []
    budget = params.time_budget_s
    # The calibration trial runs at the max load for up to 1 s, right before the warm-up would
    # run at that load for (at least) 1 s: when the warm-up is that long and at 100 % of the max
    # load, the calibration trial is its first pass, not a second trial doing the same
    planned = warmup_plan(runner.measurer, profile, params, max_load)
    cal_warms = bool(limited and planned and params.warmup_load_pct >= 100.0
                     and planned[1] <= calibration_duration(params) and (budget is None or planned[1] <= budget))
    calibration: Optional[TrialResult] = None
    if limited:
        max_load, note, calibration = calibrate_max_load(runner, max_load, params, cal_warms, context)
        notes += [note] if note else []
    invalid_before, kinds_before = runner.invalid_trials, dict(runner.invalid_by_reason)
    warm = warmup_plan(runner.measurer, profile, params, max_load)
    warmup, warm_note = None, None
    if warm and (budget is None or warm[1] <= budget):
        warmup = warmup_trial(runner, *warm, flows_per_port=profile.flows_per_port,
                              first_pass=calibration if cal_warms else None, context=context)
        budget = None if budget is None else budget - warmup["total_s"]
    elif warm:
        warm_note = (f"no warm-up: reaching every flow ({profile.flows_per_port:,} per interface) at "
                     f"{warm[0]:,.0f} fps takes {warm[1]:,.1f} s, more than the search's time budget "
                     f"({budget:,.1f} s); the first trials may lose frames to flow set-up and cold "
                     "caches (raise time_budget_s, or set warmup_s)")
    for restart in range(MAX_RECALIBRATIONS + 1):
        try:
            sr = _search(runner, profile, params, max_load, progress, budget, context)
            break
        except InvalidTrialsError as e:
            # The generator's capacity moves with what else runs on its cores: a load it offered
            # at calibration may be out of reach later.  Lower the cap below what it achieved
            # and search again, a bounded number of times; any other invalidity is fatal.
            achieved = e.generator_achieved_pps() if limited else None
            if achieved is None or restart == MAX_RECALIBRATIONS:
                raise
            new_max = achieved * params.calibration_margin      # achieved < the trial's load
            notes.append(f"generator-limited during the search: at {e.load_pps:,.0f} fps it reached only "
                         f"{achieved:,.0f} fps; max load lowered to {new_max:,.0f} fps and the search "
                         f"restarted")
            max_load = min(max_load, new_max)
    sr = _place_generator_notes(sr, notes, max_load)
    if warmup is not None:
        sr = replace(sr, warmup=warmup, total_trial_s=sr.total_trial_s + warmup["total_s"],
                     wall_s=sr.wall_s + (warmup["total_s"] + warmup["passes"] * RFC2544_TRIAL_OVERHEAD_S))
    invalid = runner.invalid_trials - invalid_before
    reasons = {k: n - kinds_before.get(k, 0) for k, n in runner.invalid_by_reason.items()
               if n > kinds_before.get(k, 0)}
    later = [warm_note] if warm_note else []
    if invalid:
        later.append(f"{invalid} invalid trial(s) repeated, not used: " + "; ".join(
            f"{k} (×{n})" for k, n in sorted(reasons.items(), key=lambda kv: -kv[1])))
    return replace(sr, notes=[*sr.notes, *later], invalid_trials=invalid, invalid_reasons=reasons)


def _place_generator_notes(sr: SearchResult, notes: list[str], max_load: float) -> SearchResult:
    """The calibration's "generator-limited" notes qualify the result only if it came near the
    cap; a result well below it was set by the DUT's losses, and the notes go to ``info``."""
    result = sr.lower_bound_pps
    if notes and result is not None and result < GENERATOR_LIMITED_FRACTION * max_load:
        return replace(sr, info=[f"{n} (not limiting: the result, {result:,.0f} fps, is below "
                                 f"{GENERATOR_LIMITED_FRACTION:.0%} of that cap)" for n in notes] + list(sr.info))
    return replace(sr, notes=[*notes, *sr.notes])


def warmup_duration(flows_per_port: int, load_pps: float) -> float:
    """Long enough that every flow is sent :data:`WARMUP_FLOW_PASSES` times at ``load_pps`` per
    interface, and at least :data:`WARMUP_MIN_S`."""
    return max(WARMUP_MIN_S, WARMUP_FLOW_PASSES * flows_per_port / max(load_pps, 1e-9))


def warmup_plan(measurer: Measurer, profile: TrafficProfile, params: ThroughputParams,
                max_load: float) -> Optional[tuple[float, float]]:
    """(load_pps, duration_s) of the warm-up trial, or None when there is none: ``warmup``
    false or ``warmup_s`` 0; by default on with a measurer that asks for it (a real generator:
    ``Measurer.warmup_default``) and for the MLR searches (CSIT's scheme)."""
    on = params.warmup
    if on is None:
        on = bool(getattr(measurer, "warmup_default", False)) or params.search in ("mlr", "mlrsearch")
    if not on or params.warmup_s == 0:
        return None
    load = max_load * params.warmup_load_pct / 100.0
    dur = params.warmup_s if params.warmup_s is not None else warmup_duration(profile.flows_per_port, load)
    return load, dur


class WarmupRecord(TypedDict, total=False):
    """The discarded warm-up trial as the result stores it (``ThroughputResult.warmup``)."""

    load_pps: float
    duration_s: float
    loss_ratio: float
    sent: int
    received: int
    valid: bool
    invalid_reasons: list[str]
    passes: int
    total_s: float
    from_calibration: bool


def warmup_trial(runner: TrialRunner, load_pps: float, duration_s: float, flows_per_port: Optional[int] = None,
                 first_pass: Optional[TrialResult] = None,
                 context: Optional[TrialContext] = None) -> WarmupRecord:
    """Run the discarded warm-up trial: stored (phase ``warmup``, ``warmup: true``, ``used:
    false``), never retried, never used by the search; an invalid warm-up is only noted.
    ``first_pass``: a trial already run (and stored) at this load for this long, the
    calibration's, taken as the first pass instead of measuring one (``from_calibration``).

    A DUT that held the generator back (backpressure on vhost/memif: it took fewer frames than
    the load asked for) may not have been sent every flow ``WARMUP_FLOW_PASSES`` times: with
    ``flows_per_port`` given and fewer frames per interface taken than that many passes need, a
    second pass runs at 90 % of the rate it took, for as long as :func:`warmup_duration` says at
    that rate.  The result describes the last pass, with the frames of both."""
    out = WarmupRecord()
    sent = received = 0
    total_s = 0.0
    for attempt in (1, 2):
        tr = first_pass if attempt == 1 and first_pass is not None else \
            runner.single(duration_s, load_pps, dict(context or {}, phase="warmup", warmup=True, attempt=attempt))
        reasons = check_valid(tr)
        sent, received, total_s = sent + tr.sent, received + tr.received, total_s + tr.duration_s
        out = WarmupRecord(load_pps=tr.load_pps if attempt == 1 and first_pass is not None else load_pps,
                           duration_s=tr.duration_s, loss_ratio=tr.loss_ratio, sent=sent, received=received,
                           valid=not reasons, invalid_reasons=reasons, passes=attempt, total_s=total_s)
        if first_pass is not None:
            out["from_calibration"] = True
        taken = tr.load_pps * tr.sent / tr.expected if tr.expected else None
        every_flow = (flows_per_port is not None and taken is not None
                      and taken * tr.duration_s >= WARMUP_FLOW_PASSES * flows_per_port)
        if flows_per_port is None or attempt == 2 or every_flow:
            break
        if (tr.extra or {}).get("backpressure") and taken:
            load_pps = 0.9 * taken
            duration_s = warmup_duration(flows_per_port, load_pps)
        elif first_pass is None:
            break
        # else the calibration, not held back, still did not reach every flow (its load was
        # capped below what it sent): a pass as planned
    return out


def _search(runner: TrialRunner, profile: TrafficProfile, params: ThroughputParams, max_load: float,
            progress: Optional[Progress] = None, budget: Optional[float] = None,
            context: Optional[TrialContext] = None) -> SearchResult:
    final = params.final_trial_duration_s
    kind = params.search
    if kind == "binary":
        res_pps = params.resolution_pps or profile.max_load_pps * params.resolution_pct / 100.0
        return binary_search(runner, max_load, trial_duration_s=params.trial_duration_s,
                             final_duration_s=final, resolution_pps=res_pps,
                             loss_ratio=params.loss_ratio, time_budget_s=budget,
                             progress=progress, context=context)
    if kind == "ndrpdr":
        return ndrpdr_search(runner, max_load, pdr_loss_ratio=params.pdr_loss_ratio,
                             trial_duration_s=params.trial_duration_s, final_duration_s=final,
                             relative_width=params.relative_width,
                             time_budget_s=budget, progress=progress, context=context)
    if kind == "mlr":
        return mlr_search(runner, params.mlr_goals(), max_load, min_load_pps=params.min_load_pps,
                          warmup_s=0.0, time_budget_s=budget,
                          progress=progress, context=context)
    if kind == "mlrsearch":
        return mlrsearch_search(runner, params.mlr_goals(), max_load,
                                min_load_pps=params.min_load_pps, warmup_s=0.0,
                                time_budget_s=budget, context=context)
    raise ValueError(f"unknown search {kind!r}")


def run(measurer: Measurer, profile: TrafficProfile, params: ThroughputParams,
        recorder: Optional[Recorder] = None) -> ThroughputResult:
    rec, runner = setup(measurer, profile, params, recorder, "throughput")
    rec.progress(0.0, f"throughput {profile.frame_size_b} B: {params.search} search")
    sr = search(runner, profile, params, progress=rec.progress)
    rec.progress(1.0, f"throughput {profile.frame_size_b} B: {sr.load_pps}")
    return from_search(sr, profile, params)


def from_search(sr: SearchResult, profile: TrafficProfile, params: ThroughputParams) -> ThroughputResult:
    return ThroughputResult(
        method="throughput", frame_size_b=profile.frame_size_b, search=sr.kind,
        throughput_pps=sr.load_pps, rates=rates(sr.load_pps, profile),
        line_rate_pps=profile.max_load_pps, max_load_pps=sr.max_load_pps or 0.0,
        lower_bound_pps=sr.lower_bound_pps, upper_bound_pps=sr.upper_bound_pps,
        goals=tuple(g.to_dict() for g in sr.goals), trials=sr.trials_used,
        total_trial_s=sr.total_trial_s, wall_s=sr.wall_s, irregular=sr.irregular,
        bidirectional=profile.bidirectional, notes=tuple(sr.notes), info=tuple(sr.info),
        trace=tuple({"load_pps": t.load_pps, "duration_s": t.duration_s, "loss_ratio": t.loss_ratio,
                     "phase": t.phase} for t in sr.trials),
        warmup=sr.warmup, invalid_trials=sr.invalid_trials, invalid_reasons=dict(sr.invalid_reasons))


class ThroughputPrereq(MethodParams):
    """Params base of methods that need the Throughput first (latency, b2b, recovery, ...)."""

    throughput_pps: Optional[float] = Field(None, gt=0.0,
                                            description="known Throughput; else measured with `throughput`")
    throughput: ThroughputParams = Field(default_factory=ThroughputParams,
                                         description="how to measure the Throughput when throughput_pps is not given")


def prerequisite(runner: TrialRunner, rec: Rec, profile: TrafficProfile,
                 params: ThroughputPrereq) -> tuple[float, Optional[Stored]]:
    """(throughput_pps, throughput result dict or None) — measured if not given."""
    if params.throughput_pps is not None:
        return params.throughput_pps, None
    rec.progress(0.0, "measuring the Throughput first")
    sr = search(runner, profile, params.throughput, context={"phase_group": "throughput"})
    if sr.load_pps is None or sr.load_pps <= 0:
        raise RuntimeError(f"throughput prerequisite failed: no lossless load found "
                           f"({'; '.join(sr.notes) or 'min load lost frames'})")
    return sr.load_pps, from_search(sr, profile, params.throughput).to_dict()


# what this module contributes to nfvperf.methods.REGISTRY
METHODS = [MethodInfo("throughput", ThroughputParams, run, result=ThroughputResult,
                      title="zero-loss throughput (RFC 2544 §26.1)",
                      headline=RATE, rounds=True)]
