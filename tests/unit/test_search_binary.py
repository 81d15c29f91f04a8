"""TV4 (trace, result, trial count, width, invariant), TV5 (wall time), G10 verification."""
import pytest

from nfvperf.search.binary import binary_search
from nfvperf.search.validity import TrialRunner

from _core_helpers import LINE_64, sim

TV4_TRACE = [(100, "L"), (50, "ok"), (75, "L"), (62.5, "L"), (56.25, "L"), (53.125, "ok"),
             (54.6875, "L"), (53.90625, "L"), (53.515625, "ok"), (53.7109375, "ok"),
             (53.80859375, "L")]


def test_tv4_trace_and_result():
    m = sim(8e6)
    r = binary_search(TrialRunner(m), LINE_64, trial_duration_s=60.0, resolution_pct=0.1)
    got = [(t.load_pps / LINE_64 * 100, "ok" if t.passed else "L") for t in r.trials]
    assert [(pytest.approx(p, abs=1e-9), v) for p, v in TV4_TRACE] == got
    assert round(r.load_pps, 2) == 7_992_699.03
    assert r.trials_used == 11
    assert round(r.width_pps, 2) == 14_532.18
    assert 8e6 - r.width_pps < r.load_pps <= 8e6


def test_tv5_wall_time():
    m = sim(8e6)
    r = binary_search(TrialRunner(m), LINE_64, trial_duration_s=60.0)
    assert r.wall_s == 759.0
    assert r.total_trial_s == 660.0
    assert m.wall_s == 11 * (60 + 2 + 2)   # the sim's own clock: learning 2 + drain 2, settle 0
    m2 = sim(8e6, router=True)
    r2 = binary_search(TrialRunner(m2), LINE_64, overhead_s=11.0)
    assert r2.wall_s == 759 + 22


def test_line_rate_passes_first_trial():
    m = sim(20e6)   # capacity above line rate
    r = binary_search(TrialRunner(m), LINE_64)
    assert r.load_pps == LINE_64 and r.trials_used == 1 and r.upper_bound_pps is None
    assert r.goals[0].irregular


def test_verification_trial_passes():
    m = sim(8e6)
    r = binary_search(TrialRunner(m), LINE_64, trial_duration_s=10.0, final_duration_s=60.0)
    assert r.trials[-1].phase == "verify" and r.trials[-1].duration_s == 60.0
    assert r.trials_used == 12 and round(r.load_pps, 2) == 7_992_699.03


class DurationSensitive(type(sim())):
    """Loses at full length only above 7.9 Mfps (e.g. a slowly filling buffer)."""

    def capacity_pps(self, size_b=None):
        return 7.9e6 if getattr(self, "_dur", 0) >= 60 else 8e6

    def measure(self, duration_s, load_pps):
        self._dur = duration_s
        return super().measure(duration_s, load_pps)


def test_failed_verification_continues_below():
    m = DurationSensitive(8e6)
    m.set_profile(sim().profile)
    r = binary_search(TrialRunner(m), LINE_64, trial_duration_s=10.0, final_duration_s=60.0)
    assert any(t.phase == "verify" and not t.passed for t in r.trials)
    assert all(t.duration_s == 60.0 for t in r.trials if t.phase.startswith("verify"))
    assert 7.9e6 - r.width_pps <= r.load_pps <= 7.9e6
    assert r.notes


def test_any_loss_goal():
    m = sim(8e6)
    r = binary_search(TrialRunner(m), LINE_64, loss_ratio=0.10)
    # loss (L - C)/L <= 10 % <=> L <= C / 0.9
    assert 8e6 / 0.9 - r.width_pps < r.load_pps <= 8e6 / 0.9


def test_bad_args():
    with pytest.raises(ValueError):
        binary_search(TrialRunner(sim()), 0.0)


def test_nothing_passes_is_irregular():
    r = binary_search(TrialRunner(sim(0.5)), LINE_64)
    assert r.load_pps == 0.0 and r.goals[0].irregular and r.goals[0].irregular_reason == "no load passed"
