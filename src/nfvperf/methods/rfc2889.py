"""RFC 2889 forwarding rate, address caching and address learning (METHODOLOGY W3, W6, W7).

Address trials need ``measurer.measure_addresses(addresses, learning_pps, duration_s,
load_pps)`` (the sim has it); a measurer without it raises Unsupported.  A trial passes when no
test frame is lost and none is flooded (``TrialResult.extra['flooded']``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from pydantic import Field, model_validator

from nfvperf.search.validity import TrialRunner
from nfvperf.trial import Measurer, TrafficProfile, Unsupported

from .common import MethodInfo, MethodParams, RATE, MethodResult, Recorder, setup
from .result import MethodMetric, Stored, headline_pps, num
from .throughput import ThroughputPrereq, prerequisite


# --- max forwarding rate ---------------------------------------------------------------------

class ForwardingParams(ThroughputPrereq):
    max_load_pct: float = Field(100.0, gt=0.0, le=100.0, description="Maximum Offered Load, % of line rate")
    step_pct: float = Field(10.0, gt=0.0, le=50.0, description="offered-load step, % of line rate")
    trial_duration_s: float = Field(30.0, gt=0.0, description="RFC 2889: ≥30 s")


@dataclass(frozen=True)
class ForwardingResult(MethodResult):
    method: str
    frame_size_b: int
    throughput_pps: float
    points: tuple[Stored, ...] = ()     # ({offered_pps, forwarding_rate_pps, loss_ratio}, ...)
    max_forwarding_rate_pps: float = 0.0
    at_offered_pps: float = 0.0
    throughput_result: Optional[Stored] = None

    def rate_pps(self) -> Optional[float]:
        """The maximum forwarding rate (MFR), else the rate the result holds."""
        return num(self.max_forwarding_rate_pps) or headline_pps(self.stored())


def run_forwarding(measurer: Measurer, profile: TrafficProfile, params: ForwardingParams,
                   recorder: Optional[Recorder] = None) -> ForwardingResult:
    rec, runner = setup(measurer, profile, params, recorder, "rfc2889_forwarding")
    tput, tres = prerequisite(runner, rec, profile, params)
    line = profile.max_load_pps
    mol = line * params.max_load_pct / 100.0
    step = line * params.step_pct / 100.0
    loads = []
    x = min(tput, mol)
    while x < mol - 1e-6:
        loads.append(x)
        x += step
    loads.append(mol)
    points: list[Stored] = []
    best, at = 0.0, 0.0
    for i, load in enumerate(loads):
        tr = runner.measure(params.trial_duration_s, load, phase="forwarding_rate")
        fr = tr.forwarding_rate_pps
        points.append({"offered_pps": load, "forwarding_rate_pps": fr, "loss_ratio": tr.loss_ratio})
        if fr > best:
            best, at = fr, load
        rec.progress((i + 1) / len(loads), f"forwarding rate {fr:,.0f} pps at {load:,.0f} offered")
    return ForwardingResult(method="rfc2889_forwarding", frame_size_b=profile.frame_size_b, throughput_pps=tput,
                            points=tuple(points), max_forwarding_rate_pps=best, at_offered_pps=at,
                            throughput_result=tres)


# --- address caching / learning ------------------------------------------------------------

def _addr_trial(runner: TrialRunner, measurer: Measurer, trials: list[Stored], count: int,
                learning_pps: float, duration_s: float, load_pps: float, phase: str, **row: float) -> bool:
    """One address trial, appended to ``trials`` after ``row``: True when no test frame was lost
    and none was flooded."""
    fn = getattr(measurer, "measure_addresses", None)
    if not callable(fn):
        raise Unsupported(f"{measurer.name} cannot run RFC 2889 address trials (no measure_addresses)")
    tr = runner.call(lambda: fn(count, learning_pps, duration_s, load_pps), duration_s,
                     load_pps, phase=phase, addresses=count, learning_pps=learning_pps)
    good = tr.lost == 0 and int(tr.extra.get("flooded", 0)) == 0
    trials.append({**row, "ok": good, "lost": tr.lost, "flooded": tr.extra.get("flooded", 0)})
    return good


class AddressCachingParams(MethodParams):
    min_addresses: int = Field(1, ge=1)
    max_addresses: int = Field(65536, ge=1, le=1 << 24)
    learning_rate_pps: float = Field(1000.0, gt=0.0, description="rate of the learning frames")
    load_pct: float = Field(10.0, gt=0.0, le=100.0, description="test-frame load, % of line rate")
    trial_duration_s: float = Field(10.0, gt=0.0)
    aging_time_s: float = Field(300.0, gt=0.0, description="DUT address aging time; must exceed the learning period")
    resolution_addresses: int = Field(1, ge=1)

    @model_validator(mode="after")
    def _check(self) -> "AddressCachingParams":
        if self.min_addresses > self.max_addresses:
            raise ValueError("min_addresses must be <= max_addresses")
        period = self.max_addresses / self.learning_rate_pps + self.trial_duration_s
        if period >= self.aging_time_s:
            raise ValueError(f"learning period + trial ({period:g} s) must be shorter than the aging "
                             f"time ({self.aging_time_s:g} s), or learned addresses age out (RFC 2889)")
        return self


@dataclass(frozen=True)
class AddressResult(MethodResult):
    method: str
    frame_size_b: int
    address_capacity: Optional[int] = None        # caching
    learning_rate_pps: Optional[float] = None     # learning
    address_count: Optional[int] = None
    lower_bound: Optional[float] = None
    upper_bound: Optional[float] = None
    trials: tuple[Stored, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class AddressCachingResult(AddressResult):
    METRIC = MethodMetric("address_capacity", "address caching capacity", 1.0, "addresses")


@dataclass(frozen=True)
class AddressLearningResult(AddressResult):
    METRIC = MethodMetric("learning_rate_pps", "address learning rate", 1.0, "fps")


def run_address_caching(measurer: Measurer, profile: TrafficProfile, params: AddressCachingParams,
                        recorder: Optional[Recorder] = None) -> AddressResult:
    rec, runner = setup(measurer, profile, params, recorder, "rfc2889_address_caching")
    load = profile.max_load_pps * params.load_pct / 100.0
    trials: list[Stored] = []
    notes: list[str] = []

    def ok(n: int) -> bool:
        good = _addr_trial(runner, measurer, trials, n, params.learning_rate_pps, params.trial_duration_s,
                           load, "address_caching", addresses=n)
        rec.progress(0.5, f"address caching: {n} addresses {'ok' if good else 'fail'}")
        return good

    lo, hi = params.min_addresses - 1, params.max_addresses
    if ok(hi):
        lo = hi
        notes.append("max_addresses passed: the capacity is at least this")
    else:
        while hi - lo > params.resolution_addresses:
            mid = (lo + hi) // 2
            if mid <= lo:
                break
            if ok(mid):
                lo = mid
            else:
                hi = mid
    return AddressCachingResult(method="rfc2889_address_caching", frame_size_b=profile.frame_size_b,
                                address_capacity=lo if lo >= params.min_addresses else 0, lower_bound=lo,
                                upper_bound=hi, trials=tuple(trials), notes=tuple(notes))


class AddressLearningParams(MethodParams):
    address_count: int = Field(1000, ge=1, le=1 << 24, description="≤ the address caching capacity (W7)")
    min_rate_pps: float = Field(100.0, gt=0.0)
    max_rate_pps: Optional[float] = Field(None, gt=0.0, description="default: line rate")
    resolution_pct: float = Field(1.0, gt=0.0, le=50.0, description="stop at width ≤ this % of the upper bound")
    load_pct: float = Field(10.0, gt=0.0, le=100.0)
    trial_duration_s: float = Field(10.0, gt=0.0)


def run_address_learning(measurer: Measurer, profile: TrafficProfile, params: AddressLearningParams,
                         recorder: Optional[Recorder] = None) -> AddressResult:
    rec, runner = setup(measurer, profile, params, recorder, "rfc2889_address_learning")
    load = profile.max_load_pps * params.load_pct / 100.0
    top = params.max_rate_pps or profile.max_load_pps
    if params.min_rate_pps >= top:
        raise ValueError("min_rate_pps must be below max_rate_pps / line rate")
    trials: list[Stored] = []

    def result(rate: Optional[float], lower: Optional[float], upper: Optional[float],
               *notes: str) -> AddressLearningResult:
        return AddressLearningResult(method="rfc2889_address_learning", frame_size_b=profile.frame_size_b,
                                     learning_rate_pps=rate, address_count=params.address_count, lower_bound=lower,
                                     upper_bound=upper, trials=tuple(trials), notes=notes)

    def ok(rate: float) -> bool:
        good = _addr_trial(runner, measurer, trials, params.address_count, rate, params.trial_duration_s,
                           load, "address_learning", learning_rate_pps=rate)
        rec.progress(0.5, f"address learning at {rate:,.0f} pps {'ok' if good else 'fail'}")
        return good

    if ok(top):
        return result(top, top, None, "the DUT learned at the maximum rate tried")
    if not ok(params.min_rate_pps):
        return result(None, None, params.min_rate_pps, "the DUT failed even at min_rate_pps")
    lo, hi = params.min_rate_pps, top
    while hi - lo > params.resolution_pct / 100.0 * hi:
        mid = (lo + hi) / 2.0
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return result(lo, lo, hi)


# what this module contributes to nfvperf.methods.REGISTRY
METHODS = [
    MethodInfo("rfc2889_forwarding", ForwardingParams, run_forwarding, result=ForwardingResult,
               title="forwarding rate (RFC 2889)", headline=RATE),
    MethodInfo("rfc2889_address_caching", AddressCachingParams, run_address_caching,
               result=AddressCachingResult,
               title="address caching capacity (RFC 2889)", headline="address_capacity",
               measurer_call="measure_addresses"),
    MethodInfo("rfc2889_address_learning", AddressLearningParams, run_address_learning,
               result=AddressLearningResult,
               title="address learning rate (RFC 2889)", headline="learning_rate_pps",
               measurer_call="measure_addresses"),
]
