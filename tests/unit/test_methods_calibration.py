"""Throughput search against a generator that cannot offer the intended load (tgen on veth)."""
from __future__ import annotations

import dataclasses

import pytest

from nfvperf.methods import throughput
from nfvperf.search.validity import InvalidTrialsError
from nfvperf.trial import Measurer, TrafficProfile, TrialResult


class ShortGenerator(Measurer):
    """DUT loses iff load > dut_pps; the generator sends at most gen_pps per interface and says
    so the way tgen does (sent < intended -> invalid)."""

    name = "short-generator"
    rate_limited = True

    def __init__(self, dut_pps: float, gen_pps: float) -> None:
        self.dut_pps = dut_pps
        self.gen_pps = gen_pps
        self.loads: list[float] = []

    def set_profile(self, profile: TrafficProfile) -> None:
        self.profile = profile

    def measure(self, duration_s: float, load_pps: float) -> TrialResult:
        self.loads.append(load_pps)
        n = 2 if self.profile.bidirectional else 1
        intended = round(load_pps * duration_s) * n
        offered = min(load_pps, self.gen_pps)
        sent = round(offered * duration_s) * n
        received = round(min(offered, self.dut_pps) * duration_s) * n
        tr = TrialResult(duration_s=duration_s, load_pps=load_pps, sent=sent, received=received,
                         expected=intended)
        if sent < 0.999 * intended:
            tr = dataclasses.replace(tr, valid=False,
                                     invalid_reasons=[f"sent {sent} < 99.9 % of intended {intended}"])
        return tr


class Rec:
    def __init__(self) -> None:
        self.trials: list[tuple[TrialResult, dict]] = []

    def trial(self, test: str, tr: TrialResult, **ctx) -> None:
        self.trials.append((tr, ctx))


PROFILE = TrafficProfile(frame_size_b=64, link_speed_bps=1e9)   # 1,488,095 fps line rate
LINE = PROFILE.max_load_pps


def _params(**kw) -> throughput.ThroughputParams:
    return throughput.ThroughputParams(search="binary", trial_duration_s=1.0, resolution_pct=0.5, **kw)


def test_dut_slower_than_generator_is_found_below_the_calibrated_cap() -> None:
    m = ShortGenerator(dut_pps=0.3 * LINE, gen_pps=0.5 * LINE)
    m.set_profile(PROFILE)
    rec = Rec()
    res = throughput.run(m, PROFILE, _params(), rec)
    assert m.loads[0] == pytest.approx(LINE)                     # calibration at max load
    assert rec.trials[0][1]["phase"] == "calibration" and rec.trials[0][1]["used"] is False
    assert max(m.loads[1:]) <= 0.9 * 0.5 * LINE * 1.0001         # the search stays under the cap
    assert 0.3 * LINE - 0.005 * LINE < res.throughput_pps <= 0.3 * LINE
    # the DUT lost frames well below the cap: the cap is recorded, but does not qualify the result
    assert any("generator-limited" in n and "not limiting" in n for n in res.info), res.info
    assert not any("generator-limited" in n for n in res.notes), res.notes
    assert all(ctx["used"] for _, ctx in rec.trials[1:])         # no invalid trial after the cap


def test_dut_faster_than_generator_reports_the_cap_not_a_dut_figure() -> None:
    m = ShortGenerator(dut_pps=0.8 * LINE, gen_pps=0.2 * LINE)
    m.set_profile(PROFILE)
    res = throughput.run(m, PROFILE, _params(), Rec())
    assert res.throughput_pps == pytest.approx(0.9 * 0.2 * LINE, rel=1e-3)
    assert res.max_load_pps == pytest.approx(0.9 * 0.2 * LINE, rel=1e-3)
    assert any("DUT is faster than this generator" in n for n in res.notes)
    assert not res.info


def test_generator_that_keeps_up_is_not_capped() -> None:
    m = ShortGenerator(dut_pps=0.3 * LINE, gen_pps=2 * LINE)
    m.set_profile(PROFILE)
    res = throughput.run(m, PROFILE, _params(), Rec())
    assert res.max_load_pps == pytest.approx(LINE)
    assert not any("generator-limited" in n for n in res.notes)


def test_without_calibration_a_short_generator_fails_loudly() -> None:
    m = ShortGenerator(dut_pps=0.3 * LINE, gen_pps=0.5 * LINE)
    m.set_profile(PROFILE)
    with pytest.raises(InvalidTrialsError, match="99.9 % of intended"):
        throughput.run(m, PROFILE, _params(calibrate=False), Rec())


class SlowingGenerator(ShortGenerator):
    """Keeps up at calibration, then loses half its capacity (other work took its core)."""

    def measure(self, duration_s: float, load_pps: float) -> TrialResult:
        if len(self.loads) == 1:
            self.gen_pps /= 2
        return super().measure(duration_s, load_pps)


def test_generator_that_slows_down_mid_search_lowers_the_cap_and_restarts() -> None:
    m = SlowingGenerator(dut_pps=0.3 * LINE, gen_pps=1.5 * LINE)
    m.set_profile(PROFILE)
    rec = Rec()
    res = throughput.run(m, PROFILE, _params(), rec)
    assert any("generator-limited during the search" in n for n in res.info), res.info
    assert not any("generator-limited" in n for n in res.notes), res.notes     # DUT-limited result
    assert res.max_load_pps <= 0.9 * 0.75 * LINE * 1.0001
    assert 0.3 * LINE - 0.005 * LINE < res.throughput_pps <= 0.3 * LINE


class BrokenCounters(ShortGenerator):
    """Invalid for a reason that is not the generator's rate: never retried into a result."""

    def measure(self, duration_s: float, load_pps: float) -> TrialResult:
        tr = super().measure(duration_s, load_pps)
        return dataclasses.replace(tr, valid=False, invalid_reasons=["counters not settled"])


def test_other_invalid_trials_still_fail_the_test() -> None:
    m = BrokenCounters(dut_pps=0.3 * LINE, gen_pps=2 * LINE)
    m.set_profile(PROFILE)
    with pytest.raises(InvalidTrialsError, match="counters not settled"):
        throughput.run(m, PROFILE, _params(), Rec())


# ---- fixed-load methods: latency at a Throughput the generator can no longer offer -------------

def _latency(m: Measurer, tput: float, **kw):
    from nfvperf.methods import latency
    p = latency.LatencyParams(throughput_pps=tput, fractions=[0.5, 0.9], trial_duration_s=1.0,
                              repetitions=2, **kw)
    return latency.run(m, PROFILE, p, Rec())


def test_latency_steps_below_what_the_generator_achieved_and_says_so() -> None:
    # the search found 0.6 × line; a minute later the generator reaches only 0.5 × line
    m = ShortGenerator(dut_pps=LINE, gen_pps=0.5 * LINE)
    m.set_profile(PROFILE)
    res = _latency(m, 0.6 * LINE)
    half, ninety = res.points
    assert not half.generator_limited and half.load_pps == pytest.approx(0.3 * LINE)
    assert ninety.generator_limited
    assert ninety.requested_load_pps == pytest.approx(0.54 * LINE)
    assert ninety.load_pps == pytest.approx(0.9 * 0.5 * LINE, rel=1e-5)   # margin × what it achieved
    assert max(m.loads[-2:]) == pytest.approx(0.45 * LINE, rel=1e-5)   # repetition 2 stays at the cap
    assert any("generator-limited" in n and "90%" in n for n in res.notes), res.notes
    from nfvperf.report.tables import _fraction_cell
    cell = _fraction_cell({"fraction": 0.9, "load_pps": ninety.load_pps, "generator_limited": True},
                          0.6 * LINE)
    assert cell == "90 % → 75 % (generator-limited)"


def test_latency_fails_as_before_when_calibration_is_off_or_the_measurer_is_not_rate_limited() -> None:
    m = ShortGenerator(dut_pps=LINE, gen_pps=0.5 * LINE)
    m.set_profile(PROFILE)
    with pytest.raises(InvalidTrialsError):
        _latency(m, 0.6 * LINE, throughput={"calibrate": False})
    m2 = ShortGenerator(dut_pps=LINE, gen_pps=0.5 * LINE)
    m2.rate_limited = False
    m2.set_profile(PROFILE)
    with pytest.raises(InvalidTrialsError):
        _latency(m2, 0.6 * LINE)


def test_frame_loss_rate_measures_the_first_step_at_the_generators_cap_and_skips_the_rest_above() -> None:
    from nfvperf.methods import frame_loss_rate as flr
    m = ShortGenerator(dut_pps=0.2 * LINE, gen_pps=0.65 * LINE)
    m.set_profile(PROFILE)
    res = flr.run(m, PROFILE, flr.FrameLossRateParams(trial_duration_s=1.0), Rec())
    first = res.points[0]
    assert first["pct"] == 100 and first["generator_limited"]
    assert first["load_pps"] == pytest.approx(0.9 * 0.65 * LINE, rel=1e-5)
    assert [p["pct"] for p in res.points[1:]] == [50, 40, 30, 20, 10]    # 90…60 % skipped
    assert not any(p.get("generator_limited") for p in res.points[1:])
    assert res.points[-1]["loss_pct"] == 0 and res.points[-2]["loss_pct"] == 0
    assert res.points[2]["loss_pct"] > 0                                  # 40 % > the DUT's 20 %
    assert any("90 %, 80 %, 70 %, 60 % of line rate" in n for n in res.notes), res.notes
    with pytest.raises(InvalidTrialsError):
        flr.run(m, PROFILE, flr.FrameLossRateParams(trial_duration_s=1.0, calibrate=False), Rec())
