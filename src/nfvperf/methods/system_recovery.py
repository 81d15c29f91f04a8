"""RFC 2544 §26.5 system recovery (variant "rfc2544": 110 % of Throughput, capped at line rate,
then 50 %) or the OPNFV variant ("opnfv": 150 %, then 75 %).  Recovery time = B − A, with A the
moment the rate drops and B the time of the last lost frame (the RFC text says "subtract B from
A"; B − A is what is meant)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from pydantic import Field

from nfvperf.trial import Measurer, Segment, TrafficProfile

from .common import MethodInfo, MethodResult, Recorder, setup
from .result import MethodMetric, ResultTable, Stored, fmt_ms, fmt_num, num
from .throughput import ThroughputPrereq, prerequisite

VARIANTS = {"rfc2544": (110.0, 50.0), "opnfv": (150.0, 75.0)}


class SystemRecoveryParams(ThroughputPrereq):
    variant: Literal["rfc2544", "opnfv"] = "rfc2544"
    overload_pct: Optional[float] = Field(None, gt=100.0, le=1000.0, description="override: overload, % of Throughput")
    recovery_pct: Optional[float] = Field(None, gt=0.0, lt=100.0, description="override: reduced load, % of Throughput")
    overload_s: float = Field(60.0, gt=0.0, description="overload duration (RFC 2544: ≥60 s)")
    recovery_s: float = Field(60.0, gt=0.0, description="time observed at the reduced load")
    repetitions: int = Field(1, ge=1, le=100)


@dataclass(frozen=True)
class SystemRecoveryResult(MethodResult):
    METRIC = MethodMetric("recovery_time_s", "recovery time", 1e3, "ms")
    TABLE = ResultTable(
        "system recovery (RFC 2544 §26.5)",
        "Overload (110 % of Throughput or line rate, OPNFV: 150 %) then recovery load (50 %, "
        "OPNFV: 75 %); recovery time = B − A (last lost frame − load change).",
        ("Frame B", "Variant", "Throughput fps", "Overload fps", "Recovery load fps",
         "Recovery time ms (mean)", "Per repetition ms"))

    method: str
    frame_size_b: int
    variant: str
    throughput_pps: float
    overload_pps: float
    recovery_load_pps: float
    overload_capped_at_line_rate: bool
    a_s: float
    recovery_times_s: tuple[float, ...] = ()
    recovery_time_s: Optional[float] = None     # mean over repetitions
    b_minus_a_s: tuple[Optional[float], ...] = ()   # raw, may be ≤ 0
    lost: tuple[int, ...] = ()
    throughput_result: Optional[Stored] = None
    notes: tuple[str, ...] = ()

    def table_row(self, first: str) -> list[str]:
        reps = self.recovery_times_s or ()
        return [first, str(self.variant or ""), fmt_num(num(self.throughput_pps), 0),
                fmt_num(num(self.overload_pps), 0) + (" (line rate)" if self.overload_capped_at_line_rate else ""),
                fmt_num(num(self.recovery_load_pps), 0), fmt_ms(self.recovery_time_s),
                ", ".join(fmt_ms(x) for x in reps[:10])]


def run(measurer: Measurer, profile: TrafficProfile, params: SystemRecoveryParams,
        recorder: Optional[Recorder] = None) -> SystemRecoveryResult:
    rec, runner = setup(measurer, profile, params, recorder, "system_recovery")
    tput, tres = prerequisite(runner, rec, profile, params)
    over_pct, low_pct = VARIANTS[params.variant]
    over_pct = params.overload_pct or over_pct
    low_pct = params.recovery_pct or low_pct
    line = profile.max_load_pps
    over = tput * over_pct / 100.0
    capped = over > line
    over = min(over, line)
    low = tput * low_pct / 100.0
    a = params.overload_s
    times: list[float] = []
    b_minus_a: list[Optional[float]] = []
    lost: list[int] = []
    notes: list[str] = []
    if capped:
        notes.append(f"overload {over_pct:g} % of Throughput is above line rate; line rate used")
    for i in range(params.repetitions):
        tr = runner.measure_segments([Segment(a, over), Segment(params.recovery_s, low)],
                                     phase="system_recovery", variant=params.variant,
                                     repetition=i + 1)
        lasts = [s.last_loss_ns for s in tr.streams if s.last_loss_ns is not None]
        lost.append(tr.lost)
        if not lasts:
            notes.append(f"repetition {i + 1}: no frame lost (overload did not overflow the DUT)")
            times.append(0.0)
            b_minus_a.append(None)
            continue
        b = max(lasts) / 1e9
        b_minus_a.append(b - a)
        times.append(max(0.0, b - a))
        rec.progress((i + 1) / params.repetitions, f"recovery {max(0.0, b - a):.3f} s")
    return SystemRecoveryResult(method="system_recovery", frame_size_b=profile.frame_size_b,
                                variant=params.variant, throughput_pps=tput, overload_pps=over,
                                recovery_load_pps=low, overload_capped_at_line_rate=capped, a_s=a,
                                recovery_times_s=tuple(times), recovery_time_s=sum(times) / len(times),
                                b_minus_a_s=tuple(b_minus_a), lost=tuple(lost), throughput_result=tres,
                                notes=tuple(notes))


# what this module contributes to nfvperf.methods.REGISTRY
METHODS = [MethodInfo("system_recovery", SystemRecoveryParams, run, result=SystemRecoveryResult,
                      title="system recovery (RFC 2544 §26.5)", headline="recovery_time_s")]
