"""RFC 9004 back-to-back frames (updates RFC 2544 §26.4; METHODOLOGY K1–K5).

Throughput is a prerequisite; a frame size whose Throughput equals the line rate is skipped
(the buffer never fills).  A trial sends a burst at line rate from idle, the DUT forwards it at
its Throughput, and the trial waits ≥2 s for the buffers to drain.  The burst length is
binary-searched between 1 frame and ``max_burst_s`` × line rate (configurable up to 30 s) for
the longest burst with no loss.  The whole search is repeated N times; the benchmark is the mean
with min/max/stddev, the implied buffer time (mean / max fps) and the corrected buffer time
(implied × (1 − Throughput / max fps)).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from typing import Optional

from pydantic import Field

from nfvperf import units
from nfvperf.search.validity import TrialRunner
from nfvperf.trial import Measurer, TrafficProfile

from .common import MethodInfo, MethodResult, is_line_rate, Recorder, setup
from .result import MethodMetric, ResultTable, Stored, fmt_ms, fmt_num, num
from .throughput import ThroughputPrereq, prerequisite


class BackToBackParams(ThroughputPrereq):
    max_burst_s: float = Field(2.0, gt=0.0, le=30.0,
                               description="longest burst searched, s at line rate "
                                           "(RFC 9004: configurable up to 30 s; RFC 2544: trials ≥2 s)")
    drain_s: float = Field(2.0, ge=2.0, description="wait after the burst for the buffers to drain (≥2 s)")
    repetitions: int = Field(50, ge=1, le=1000, description="N searches per size (RFC 2544 §26.4: ≥50); N is reported")
    resolution_frames: int = Field(1, ge=1, description="stop the burst search at hi − lo ≤ this")


@dataclass(frozen=True)
class BackToBackResult(MethodResult):
    METRIC = MethodMetric("mean_frames", "mean back-to-back burst", 1.0, "frames")
    TABLE = ResultTable(
        "back-to-back frames (RFC 9004)",
        "Trial: burst at line rate from idle, received at Throughput, ≥2 s drain. Buffer time "
        "(K4): implied = mean frames / max fps; corrected = implied × (1 − Throughput / max fps).",
        ("Frame B", "Throughput fps", "N (repetitions)", "Mean frames", "Min", "Max", "Stddev",
         "Implied buffer ms", "Corrected buffer ms", "Note"))

    method: str
    frame_size_b: int
    throughput_pps: float
    max_pps: float
    skipped: bool = False
    skip_reason: str = ""
    repetitions: int = 0
    bursts_frames: tuple[int, ...] = ()
    mean_frames: Optional[float] = None
    min_frames: Optional[int] = None
    max_frames: Optional[int] = None
    stddev_frames: Optional[float] = None
    implied_buffer_time_s: Optional[float] = None
    corrected_buffer_time_s: Optional[float] = None
    max_burst_s: float = 0.0
    max_burst_frames: int = 0
    capped: bool = False          # some search hit the max burst length (result is a lower bound)
    trials: int = 0
    throughput_result: Optional[Stored] = None
    notes: tuple[str, ...] = ()

    def table_row(self, first: str) -> list[str]:
        return [first, fmt_num(num(self.throughput_pps), 0), fmt_num(self.repetitions),
                fmt_num(num(self.mean_frames), 1), fmt_num(self.min_frames), fmt_num(self.max_frames),
                fmt_num(num(self.stddev_frames), 1), fmt_ms(self.implied_buffer_time_s),
                fmt_ms(self.corrected_buffer_time_s),
                ("skipped: " + str(self.skip_reason)) if self.skipped else ("burst capped" if self.capped else "")]


def burst_search(runner: TrialRunner, max_frames: int, burst_pps: float, drain_s: float,
                 resolution: int = 1, **ctx: object) -> tuple[int, int]:
    """Longest lossless burst in [0, max_frames]; returns (frames, trials)."""
    n = 0
    tr = runner.measure_burst(max_frames, burst_pps, drain_s, phase="b2b", frames=max_frames, **ctx)
    n += 1
    if tr.lost == 0:
        return max_frames, n
    lo, hi = 0, max_frames
    while hi - lo > resolution:
        mid = (lo + hi) // 2
        tr = runner.measure_burst(mid, burst_pps, drain_s, phase="b2b", frames=mid,
                                  lo_frames=lo, hi_frames=hi, **ctx)
        n += 1
        if tr.lost == 0:
            lo = mid
        else:
            hi = mid
    return lo, n


def run(measurer: Measurer, profile: TrafficProfile, params: BackToBackParams,
        recorder: Optional[Recorder] = None) -> BackToBackResult:
    rec, runner = setup(measurer, profile, params, recorder, "back_to_back")
    tput, tres = prerequisite(runner, rec, profile, params)
    max_pps = profile.max_load_pps
    max_frames = int(math.floor(params.max_burst_s * max_pps))
    out = BackToBackResult(method="back_to_back", frame_size_b=profile.frame_size_b,
                           throughput_pps=tput, max_pps=max_pps, max_burst_s=params.max_burst_s,
                           max_burst_frames=max_frames, throughput_result=tres)
    if is_line_rate(tput, profile):
        return replace(out, skipped=True,
                       skip_reason="Throughput equals the theoretical maximum: the buffer never fills (RFC 9004)")
    b: list[int] = []
    trials = 0
    for i in range(params.repetitions):
        frames, n = burst_search(runner, max_frames, max_pps, params.drain_s,
                                 params.resolution_frames, repetition=i + 1)
        trials += n
        b.append(frames)
        rec.progress((i + 1) / params.repetitions, f"back-to-back repetition {i + 1}: {frames} frames")
    capped = max(b) >= max_frames
    mean = statistics.fmean(b)
    return replace(out, trials=trials, bursts_frames=tuple(b), capped=capped, repetitions=len(b),
                   mean_frames=mean, min_frames=min(b), max_frames=max(b),
                   stddev_frames=statistics.stdev(b) if len(b) > 1 else 0.0,
                   implied_buffer_time_s=units.implied_buffer_time_s(mean, max_pps),
                   corrected_buffer_time_s=units.corrected_buffer_time_s(mean, max_pps, tput),
                   notes=(f"burst length capped at {params.max_burst_s} s ({max_frames} frames): "
                          f"the DUT buffer may be larger",) if capped else ())


# what this module contributes to nfvperf.methods.REGISTRY
METHODS = [MethodInfo("back_to_back", BackToBackParams, run, result=BackToBackResult,
                      title="back-to-back frames (RFC 9004)",
                      headline="mean_frames")]
