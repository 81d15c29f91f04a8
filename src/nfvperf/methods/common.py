"""What every method shares: params base, recorder plumbing, the throughput prerequisite."""
from __future__ import annotations

import dataclasses
from typing import Callable, Mapping, Optional, Protocol

from pydantic import BaseModel, ConfigDict, Field

from nfvperf import units
from nfvperf.search.validity import DEFAULT_RETRIES, InvalidTrialsError, TrialRunner
from nfvperf.trial import Measurer, TrafficProfile, TrialResult

from .result import MethodResult as MethodResult, StoredResult


#: how many times a method lowers its load below what a rate-limited generator achieved before it
#: gives up (the throughput search restarts; fixed-load methods re-measure)
MAX_RECALIBRATIONS = 3


class MethodParams(BaseModel):
    """Base of every method's params: unknown keys are errors, every field is validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    name: Optional[str] = Field(None, description="test name used for recording; default: the method name")
    max_retries: int = Field(DEFAULT_RETRIES, ge=0, le=20,
                             description="repeat an invalid trial this many times, then fail the test")


#: ``MethodInfo.headline`` of a method whose result *is* a rate in fps per interface (stored as
#: ``Result.value_pps``; reports put it in the throughput tables)
RATE = "rate_pps"


@dataclasses.dataclass(frozen=True)
class MethodInfo:
    """What a method module declares about one method (``METHODS = [MethodInfo(...)]``); the
    registry ``nfvperf.methods.REGISTRY`` is built from these, nothing else lists methods.

    ``params``: the params model; ``run(measurer, profile, params, recorder)``: runs it and
    returns a ``result`` (the method's :class:`~nfvperf.methods.result.MethodResult` dataclass,
    which also reads a stored result back: ``result.from_dict``); ``sizeless``: the result does not
    depend on the frame size (one test unit, no size loop); ``title``: what the report calls its
    table; ``headline``: :data:`RATE` or the result key of the main scalar; ``tcp``: ``--tg iperf3``
    can run it; ``rounds``: a study of it can run in interleaved rounds (``--rounds``: capacity
    figures mrr, pdr, ndr per unit); ``measurer_call``: the measurer method it needs beyond
    ``measure`` (a measurer without it cannot run the method)."""

    name: str
    params: type[MethodParams]
    run: Callable[..., MethodResult]
    result: type[MethodResult] = StoredResult
    sizeless: bool = False
    title: str = ""
    headline: str = ""
    tcp: bool = False
    rounds: bool = False
    measurer_call: str = ""

    @property
    def is_rate(self) -> bool:
        return self.headline == RATE

    def read(self, data: Mapping[str, object]) -> MethodResult:
        """A stored result of this method as its result class."""
        return self.result.from_dict(data)


class Recorder(Protocol):
    """What a method reports each trial to (the runner's recorder; tests pass their own).  A
    recorder may also have ``progress(fraction, message)``."""

    def trial(self, test: str, tr: TrialResult, **context: object) -> None: ...


class Rec:
    """Wraps the runner's recorder: ``trial(test, TrialResult, **context)``, optional ``progress``."""

    def __init__(self, recorder: Optional[Recorder], test: str, method: str, profile: TrafficProfile) -> None:
        self.recorder = recorder
        self.test = test
        self.method = method
        self.profile = profile

    def trial(self, tr: TrialResult, ctx: dict[str, object]) -> None:
        if self.recorder is None:
            return
        self.recorder.trial(self.test, tr, method=self.method,
                            frame_size_b=self.profile.frame_size_b, **ctx)

    def progress(self, fraction: float, message: str) -> None:
        fn = getattr(self.recorder, "progress", None)
        if callable(fn):
            fn(max(0.0, min(1.0, fraction)), message)


def setup(measurer: Measurer, profile: TrafficProfile, params: MethodParams, recorder: Optional[Recorder],
          method: str) -> tuple[Rec, TrialRunner]:
    rec = Rec(recorder, params.name or method, method, profile)
    runner = TrialRunner(measurer, retries=params.max_retries, on_trial=rec.trial)
    return rec, runner


def rates(fps: Optional[float], profile: TrafficProfile) -> dict[str, Optional[float]]:
    """fps with its L1/L2 Mbps and % line rate (L1) on the wire (outer size for VXLAN)."""
    if fps is None:
        return {"fps": None, "l1_mbps": None, "l1_pct": None, "l2_mbps": None}
    size = profile.wire_size_b
    return {"fps": fps, "l1_mbps": units.l1_bps(fps, size) / 1e6,
            "l1_pct": units.pct_line_rate(fps, size, profile.link_speed_bps),
            "l2_mbps": units.l2_bps(fps, size) / 1e6,
            "frame_size_b": profile.frame_size_b,      # inner size for VXLAN
            "wire_size_b": size}                       # outer size on the wire (A4)


def is_line_rate(pps: float, profile: TrafficProfile, rel_tol: float = 1e-6) -> bool:
    return pps >= profile.max_load_pps * (1 - rel_tol)


@dataclasses.dataclass
class CappedTrial:
    """What :func:`measure_capped` measured: the trial, the load it ran at, and why that is below
    the load asked for (``note`` is None when the generator offered the load asked for)."""

    trial: TrialResult
    load_pps: float
    note: Optional[str] = None


def measure_capped(runner: TrialRunner, duration_s: float, load_pps: float, margin: float,
                   allowed: bool = True, **context: object) -> CappedTrial:
    """A valid constant-load trial at ``load_pps``, or, when a rate-limited generator could not
    offer that load through every retry, at ``margin`` × what it achieved (lowered up to
    :data:`MAX_RECALIBRATIONS` times).  The generator's capacity moves with what else runs on its
    cores: a load it offered in the throughput search may be out of reach a minute later, and a
    latency or loss measurement at a lower load, said to be lower, tells the user more than a
    failed test.  Any other invalidity, or ``allowed`` false (the measurer is not rate-limited,
    or the user turned calibration off), raises :class:`InvalidTrialsError` as before."""
    limited = allowed and bool(getattr(runner.measurer, "rate_limited", False))
    load = load_pps
    for attempt in range(MAX_RECALIBRATIONS + 1):
        try:
            tr = runner.measure(duration_s, load, **context)
        except InvalidTrialsError as e:
            achieved = e.generator_achieved_pps() if limited else None
            if achieved is None or attempt == MAX_RECALIBRATIONS:
                raise
            load = min(load, achieved) * margin
            continue
        note = None
        if load < load_pps:
            note = (f"generator-limited: at {load_pps:,.0f} fps per interface the generator sent short "
                    f"on every attempt; measured at {load:,.0f} fps ({load / load_pps:.0%} of the load "
                    f"asked for) instead")
        return CappedTrial(tr, load, note)
    raise AssertionError("unreachable")      # the loop returns or raises
