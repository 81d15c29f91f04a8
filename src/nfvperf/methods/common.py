"""What every method shares: params base, recorder plumbing, the throughput prerequisite."""
from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, Callable, Optional

from pydantic import BaseModel, ConfigDict, Field

from nfvperf import units
from nfvperf.search.validity import DEFAULT_RETRIES, InvalidTrialsError, TrialRunner
from nfvperf.trial import Measurer, TrafficProfile, TrialResult

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


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

    ``sizeless``: the result does not depend on the frame size (one test unit, no size loop);
    ``title``: what the report calls its table; ``headline``: :data:`RATE` or the result key of
    the main scalar; ``tcp``: ``--tg iperf3`` can run it.  Unpacks as ``(params, run)``, the
    registry's historical shape (``P, run = REGISTRY[name]``)."""

    name: str
    params: type[MethodParams]
    run: Callable[..., Any]
    sizeless: bool = False
    title: str = ""
    headline: str = ""
    tcp: bool = False

    def __iter__(self):
        return iter((self.params, self.run))

    def __getitem__(self, i: int) -> Any:
        return (self.params, self.run)[i]

    def __len__(self) -> int:
        return 2

    @property
    def is_rate(self) -> bool:
        return self.headline == RATE


class ResultBase:
    """Mixin: ``to_dict()`` for the method result dataclasses."""

    def to_dict(self: DataclassInstance) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        return _clean(d)


def _clean(x: Any) -> Any:
    if isinstance(x, float) and (math.isinf(x) or math.isnan(x)):
        return None
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


class Rec:
    """Wraps the runner's recorder: ``trial(test, TrialResult, **context)``, optional ``progress``."""

    def __init__(self, recorder: Any, test: str, method: str, profile: TrafficProfile) -> None:
        self.recorder = recorder
        self.test = test
        self.method = method
        self.profile = profile

    def trial(self, tr: TrialResult, ctx: dict) -> None:
        if self.recorder is None:
            return
        self.recorder.trial(self.test, tr, method=self.method,
                            frame_size_b=self.profile.frame_size_b, **ctx)

    def progress(self, fraction: float, message: str) -> None:
        fn = getattr(self.recorder, "progress", None)
        if callable(fn):
            fn(max(0.0, min(1.0, fraction)), message)


def setup(measurer: Measurer, profile: TrafficProfile, params: MethodParams, recorder: Any,
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
                   allowed: bool = True, **context: Any) -> CappedTrial:
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
