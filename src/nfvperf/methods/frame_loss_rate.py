"""RFC 2544 §26.3 frame loss rate: 100 % of line rate, then down in steps ≤ 10 % until two
successive trials without loss; loss % = (in − out) × 100 / in."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from pydantic import Field, field_validator

from nfvperf.trial import Measurer, TrafficProfile

from .common import MethodInfo, MethodParams, MethodResult, measure_capped, Recorder, setup
from .result import Stored


class FrameLossRateParams(MethodParams):
    start_pct: float = Field(100.0, gt=0.0, le=100.0, description="first load, % of line rate")
    step_pct: float = Field(10.0, description="step down, % of line rate (RFC 2544 §26.3: ≤10)")
    trial_duration_s: float = Field(60.0, gt=0.0)
    zero_loss_stop: int = Field(2, ge=1, le=10, description="stop after this many successive zero-loss trials")
    calibrate: bool = Field(True, description="with a generator that can fall short of the intended load "
                            "(tgen): measure a step it cannot offer at calibration_margin × what it achieved, "
                            "and skip the steps above that (else the test fails)")
    calibration_margin: float = Field(0.9, gt=0.0, le=1.0)

    @field_validator("step_pct")
    @classmethod
    def _step(cls, v: float) -> float:
        if v <= 0:
            raise ValueError("step_pct must be > 0")
        if v > 10.0:
            raise ValueError(f"step_pct {v} % is too coarse: RFC 2544 §26.3 requires steps of at "
                             f"most 10 % of the maximum rate (finer steps are encouraged)")
        return v


@dataclass(frozen=True)
class FrameLossRateResult(MethodResult):
    LOSS_STEPS = True

    method: str
    frame_size_b: int
    points: tuple[Stored, ...] = ()   # ({pct, load_pps, sent, received, loss_pct}, ...)
    trials: int = 0
    stopped: str = ""
    line_rate_pps: float = 0.0
    notes: tuple[str, ...] = ()

    def summary_text(self) -> Optional[str]:
        data = self.stored()
        pts = data.get("points") or []
        return f"{len(pts) if isinstance(pts, list) else 0} load steps; stopped: {data.get('stopped', '?')}"


def loss_pct(sent: int, received: int) -> float:
    """(in − out) × 100 / in."""
    return (sent - received) * 100.0 / sent if sent else 0.0


def run(measurer: Measurer, profile: TrafficProfile, params: FrameLossRateParams,
        recorder: Optional[Recorder] = None) -> FrameLossRateResult:
    rec, runner = setup(measurer, profile, params, recorder, "frame_loss_rate")
    line = profile.max_load_pps
    points: list[Stored] = []
    notes: list[str] = []
    stopped = ""
    zeros = 0
    i = 0
    cap: float | None = None          # the most the generator offered, once it fell short
    skipped: list[float] = []
    n_max = int(params.start_pct / params.step_pct) + 1
    while True:
        pct = round(params.start_pct - i * params.step_pct, 9)
        if pct <= 0:
            stopped = "reached 0 % load"
            break
        load = line * pct / 100.0
        if cap is not None and load > cap:
            skipped.append(pct)
            i += 1
            continue
        got = measure_capped(runner, params.trial_duration_s, load, params.calibration_margin,
                             allowed=params.calibrate, phase="frame_loss_rate", pct=pct)
        tr, point_load = got.trial, got.load_pps
        sent, received = tr.expected or tr.sent, tr.received
        lp = loss_pct(sent, received)
        point: Stored = {"pct": pct, "load_pps": point_load, "sent": sent, "received": received, "loss_pct": lp}
        if got.note:
            cap = point_load
            point.update(generator_limited=True, requested_load_pps=load,
                         offered_pct=100.0 * point_load / line)
            notes.append(f"frame loss at {pct:g} % of line rate: {got.note}; steps above "
                             f"{100.0 * point_load / line:.1f} % are skipped")
        points.append(point)
        rec.progress(min(1.0, (i + 1) / n_max), f"frame loss at {pct:g} %: {lp:.4f} %")
        zeros = zeros + 1 if received >= sent else 0
        if zeros >= params.zero_loss_stop:
            stopped = f"{zeros} successive zero-loss trials"
            break
        i += 1
    if skipped:
        notes.append(f"not measured (above what the generator could offer): "
                     f"{', '.join(f'{p:g} %' for p in skipped)} of line rate")
    return FrameLossRateResult(method="frame_loss_rate", frame_size_b=profile.frame_size_b, points=tuple(points),
                               trials=len(points), stopped=stopped, line_rate_pps=line, notes=tuple(notes))


# what this module contributes to nfvperf.methods.REGISTRY
METHODS = [MethodInfo("frame_loss_rate", FrameLossRateParams, run, result=FrameLossRateResult,
                      title="frame loss rate (RFC 2544 §26.3)", headline="points")]
