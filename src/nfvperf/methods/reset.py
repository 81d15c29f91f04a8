"""RFC 6201 reset time (updates RFC 2544 §26.6): frame-loss method (frames lost / offered pps)
and timestamp method (largest gap between received frames), through
``measurer.measure_reset`` and the measurer's ``reset_hook``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from pydantic import Field, model_validator

from nfvperf.trial import Measurer, TrafficProfile

from .common import MethodInfo, MethodResult, Recorder, setup
from .result import MethodMetric, ResultTable, Stored, fmt_ms, fmt_num, num
from .throughput import ThroughputPrereq, prerequisite


ResetMeasurement = Literal["frame_loss", "timestamp"]
RESET_MEASUREMENTS: tuple[ResetMeasurement, ...] = ("frame_loss", "timestamp")


class ResetParams(ThroughputPrereq):
    reset_type: Literal["hardware", "software", "power"] = "software"
    methods: list[ResetMeasurement] = Field(default_factory=lambda: list(RESET_MEASUREMENTS), min_length=1)
    trial_duration_s: float = Field(60.0, gt=0.0)
    reset_at_s: float = Field(10.0, ge=0.0, description="when the reset is triggered inside the trial")
    repetitions: int = Field(1, ge=1, le=100)

    @model_validator(mode="after")
    def _check(self) -> "ResetParams":
        if self.reset_at_s >= self.trial_duration_s:
            raise ValueError("reset_at_s must be inside the trial (< trial_duration_s)")
        return self


@dataclass(frozen=True)
class ResetResult(MethodResult):
    METRIC = MethodMetric("reset_time_frame_loss_s", "reset time (frame-loss method)", 1e3, "ms")
    TABLE = ResultTable(
        "reset (RFC 6201)",
        "Frame-loss method: frames lost / offered fps. Timestamp method: first frame after − last "
        "frame before the reset. Offered load = Throughput at the minimum size.",
        ("Frame B", "Reset type", "Offered fps", "Trials", "Mean frames lost", "Reset time ms (frame loss)",
         "Reset time ms (timestamp)", "Real reset hook"))

    method: str
    frame_size_b: int
    reset_type: str
    offered_pps: float
    methods: tuple[str, ...] = ()
    trials: tuple[Stored, ...] = ()   # per repetition: frames_lost, reset_time_*_s
    mean_frames_lost: Optional[float] = None
    reset_time_frame_loss_s: Optional[float] = None
    reset_time_timestamp_s: Optional[float] = None
    reset_hook_set: bool = False
    throughput_result: Optional[Stored] = None
    notes: tuple[str, ...] = ()

    def table_row(self, first: str) -> list[str]:
        trials = self.trials if isinstance(self.trials, (list, tuple)) else []
        return [first, str(self.reset_type or ""), fmt_num(num(self.offered_pps), 0),
                fmt_num(len(trials) or self.stored().get("repetitions")), fmt_num(num(self.mean_frames_lost), 0),
                fmt_ms(self.reset_time_frame_loss_s), fmt_ms(self.reset_time_timestamp_s),
                "yes" if self.reset_hook_set else "no (modelled)"]


def reset_time_frame_loss_s(frames_lost: int, offered_pps: float) -> float:
    """RFC 6201 frame-loss method: frames lost / offered rate.  TV10: 2,976,190 at 14,880,952 → 0.2 s."""
    return frames_lost / offered_pps


def run(measurer: Measurer, profile: TrafficProfile, params: ResetParams,
        recorder: Optional[Recorder] = None) -> ResetResult:
    rec, runner = setup(measurer, profile, params, recorder, "reset")
    tput, tres = prerequisite(runner, rec, profile, params)
    notes: list[str] = []
    trials: list[Stored] = []
    if profile.frame_size_b != 64:
        notes.append(f"RFC 2544 §26.6 offers minimum-size frames; this run used {profile.frame_size_b} B")
    fl, ts, lost_all = [], [], []
    for i in range(params.repetitions):
        tr = runner.measure_reset(params.trial_duration_s, tput, params.reset_at_s,
                                  phase="reset", reset_type=params.reset_type, repetition=i + 1)
        row: Stored = {"repetition": i + 1}
        # frame-loss method uses the per-stream loss (each direction offered tput)
        per_stream = [s.lost for s in tr.streams] or [tr.lost]
        lost = max(per_stream)
        lost_all.append(lost)
        row["frames_lost"] = lost
        if "frame_loss" in params.methods:
            fl.append(reset_time_frame_loss_s(lost, tput))
            row["reset_time_frame_loss_s"] = fl[-1]
        if "timestamp" in params.methods:
            gaps = [s.max_rx_gap_ns for s in tr.streams if s.max_rx_gap_ns is not None]
            if gaps:
                ts.append(max(gaps) / 1e9)
                row["reset_time_timestamp_s"] = ts[-1]
            else:
                notes.append("the measurer reports no rx gaps: timestamp method unavailable")
        trials.append(row)
        rec.progress((i + 1) / params.repetitions, f"reset repetition {i + 1}: {lost} frames lost")
    return ResetResult(method="reset", frame_size_b=profile.frame_size_b, reset_type=params.reset_type,
                       offered_pps=tput, methods=tuple(params.methods), trials=tuple(trials),
                       mean_frames_lost=sum(lost_all) / len(lost_all),
                       reset_time_frame_loss_s=sum(fl) / len(fl) if fl else None,
                       reset_time_timestamp_s=sum(ts) / len(ts) if ts else None,
                       reset_hook_set=measurer.reset_hook is not None, throughput_result=tres, notes=tuple(notes))


# what this module contributes to nfvperf.methods.REGISTRY
METHODS = [MethodInfo("reset", ResetParams, run, result=ResetResult, title="reset (RFC 6201)",
                      headline="reset_time_frame_loss_s")]
