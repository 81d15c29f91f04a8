"""RFC 2544 §26.2 latency at the Throughput rate and at fractions of it (CSIT: 0/10/50/90 %),
with percentiles, histogram, PDV (RFC 5481) and IPDV (RFC 3393); each point repeated N times
and the mean reported (RFC 2544: ≥20 repetitions of ≥120 s)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, Optional

from pydantic import Field, field_validator

from nfvperf.trial import LatencySummary, Measurer, TrafficProfile

from .common import MethodInfo, MethodResult, measure_capped, Recorder, setup
from .result import MethodMetric, Stored, dicts, num
from .throughput import ThroughputPrereq, prerequisite


class LatencyParams(ThroughputPrereq):
    fractions: list[float] = Field(default_factory=lambda: [1.0], min_length=1,
                                   description="loads as fractions of the Throughput; 0 = idle latency stream")
    trial_duration_s: float = Field(120.0, gt=0.0, description="RFC 2544 §26.2: ≥120 s")
    repetitions: int = Field(20, ge=1, le=1000, description="RFC 2544 §26.2: ≥20, mean reported")
    idle_load_pps: float = Field(9000.0, gt=0.0, description="load used for fraction 0 (CSIT latency stream, 9 kpps)")

    @field_validator("fractions")
    @classmethod
    def _fractions(cls, v: list[float]) -> list[float]:
        for f in v:
            if not 0.0 <= f <= 1.0:
                raise ValueError(f"fraction {f} is outside [0, 1] (fractions of the Throughput)")
        if len(set(v)) != len(v):
            raise ValueError("fractions must be unique")
        return v


@dataclass(frozen=True)
class LatencyPoint:
    fraction: float
    load_pps: float
    repetitions: int
    count: int = 0
    min_ns: float = 0.0           # mean over repetitions of each trial's min
    avg_ns: float = 0.0
    max_ns: float = 0.0
    min_of_min_ns: float = 0.0
    max_of_max_ns: float = 0.0
    percentiles_ns: Mapping[str, float] = field(default_factory=dict)   # mean over repetitions
    histogram: tuple[tuple[float, int], ...] = ()                      # merged over repetitions
    pdv_ns: Mapping[str, float] = field(default_factory=dict)           # mean over repetitions
    ipdv_ns: Mapping[str, float] = field(default_factory=dict)
    lost: int = 0
    loss_ratio_max: float = 0.0
    requested_load_pps: Optional[float] = None   # set when the generator could not offer the load
    generator_limited: bool = False               # some repetitions ran below the load asked for


#: what a study of latency pivots: the average latency at Throughput (the report nets it of the
#: harness self-latency when asked)
LATENCY_METRIC = MethodMetric("avg_ns", "average latency at Throughput", 1e-3, "µs", study_key="latency",
                              study_title="average latency at Throughput, µs", digits=2)


@dataclass(frozen=True)
class LatencyResult(MethodResult):
    LATENCY = True

    method: str
    frame_size_b: int
    throughput_pps: float
    points: tuple[LatencyPoint, ...] = ()      # read back from the store: their dicts
    definition: str = ""
    trial_duration_s: float = 0.0
    repetitions: int = 0
    throughput_result: Optional[Stored] = None
    notes: tuple[str, ...] = ()

    def latency_points(self) -> list[Stored]:
        """The measured points (fraction, load_pps, min/avg/max_ns, percentiles_ns, ...)."""
        pts = dicts(self.stored().get("points"))
        return pts if pts and "avg_ns" in pts[0] else super().latency_points()

    def summary_text(self) -> Optional[str]:
        lat = self.latency_at_throughput()
        if not lat:
            return None
        ns = [(num(lat.get(k)) or 0.0) / 1e3 for k in ("min_ns", "avg_ns", "max_ns")]
        return f"latency min/avg/max {ns[0]:,.1f}/{ns[1]:,.1f}/{ns[2]:,.1f} µs"

    @classmethod
    def study_metric(cls) -> Optional[MethodMetric]:
        return LATENCY_METRIC


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _point(frac: float, load: float, asked: float, repetitions: int, lost: int, lr_max: float,
           sums: list[LatencySummary]) -> LatencyPoint:
    """One load point: the repetitions' latency summaries averaged (histograms merged)."""
    pt = LatencyPoint(fraction=frac, load_pps=load, repetitions=repetitions, lost=lost, loss_ratio_max=lr_max,
                      requested_load_pps=asked if load < asked else None, generator_limited=load < asked)
    if not sums:
        return pt
    hist: dict[float, int] = {}
    for s in sums:
        for ub, c in s.histogram:
            hist[ub] = hist.get(ub, 0) + c

    def means(attr: str) -> dict[str, float]:
        return {k: _mean([getattr(s, attr).get(k, 0.0) for s in sums]) for k in getattr(sums[0], attr)}
    return replace(pt, count=sum(s.count for s in sums), min_ns=_mean([s.min_ns for s in sums]),
                   avg_ns=_mean([s.avg_ns for s in sums]), max_ns=_mean([s.max_ns for s in sums]),
                   min_of_min_ns=min(s.min_ns for s in sums), max_of_max_ns=max(s.max_ns for s in sums),
                   percentiles_ns=means("percentiles_ns"), pdv_ns=means("pdv_ns"), ipdv_ns=means("ipdv_ns"),
                   histogram=tuple(sorted(hist.items())))


def run(measurer: Measurer, profile: TrafficProfile, params: LatencyParams,
        recorder: Optional[Recorder] = None) -> LatencyResult:
    rec, runner = setup(measurer, profile, params, recorder, "latency")
    tput, tres = prerequisite(runner, rec, profile, params)
    points: list[LatencyPoint] = []
    notes: list[str] = []
    definition = ""
    total = len(params.fractions) * params.repetitions
    done = 0
    for frac in params.fractions:
        asked = params.idle_load_pps if frac == 0.0 else tput * frac
        load = asked
        sums: list[LatencySummary] = []
        lost = 0
        lr_max = 0.0
        for i in range(params.repetitions):
            got = measure_capped(runner, params.trial_duration_s, load, params.throughput.calibration_margin,
                                 allowed=params.throughput.calibrate, phase="latency", fraction=frac,
                                 repetition=i + 1)
            tr = got.trial
            if got.note:
                notes.append(f"latency at {frac:.0%} of Throughput, repetition {i + 1}: {got.note}; "
                             f"the following repetitions ran at that load too")
                load = got.load_pps
            done += 1
            rec.progress(done / total, f"latency {frac:.0%} of Throughput, repetition {i + 1}")
            lost += tr.lost
            lr_max = max(lr_max, tr.loss_ratio)
            if tr.latency is not None and tr.latency.count:
                sums.append(tr.latency)
                definition = tr.latency.definition
        points.append(_point(frac, load, asked, params.repetitions, lost, lr_max, sums))
        if not sums:
            notes.append(f"no latency samples at fraction {frac} (measurer did not timestamp)")
        if lost:
            notes.append(f"frames lost at fraction {frac}: {lost} (lost frames have no latency)")
    return LatencyResult(method="latency", frame_size_b=profile.frame_size_b, throughput_pps=tput,
                         points=tuple(points), definition=definition, trial_duration_s=params.trial_duration_s,
                         repetitions=params.repetitions, throughput_result=tres, notes=tuple(notes))


# what this module contributes to nfvperf.methods.REGISTRY
METHODS = [MethodInfo("latency", LatencyParams, run, result=LatencyResult, title="latency (RFC 2544 §26.2)",
                      headline="latency")]
