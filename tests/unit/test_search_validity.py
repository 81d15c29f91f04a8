"""Invalid trials are retried up to N times, never used, and then the test fails loudly."""
import pytest

from nfvperf.search.binary import binary_search
from nfvperf.search.validity import InvalidTrialsError, TrialRunner, check_valid
from nfvperf.trial import Measurer, TrafficProfile, TrialResult

from _core_helpers import LINE_64, Recorder, sim


class AlwaysInvalid(Measurer):
    name = "broken"

    def set_profile(self, profile):
        pass

    def measure(self, duration_s, load_pps):
        return TrialResult(duration_s, load_pps, sent=10, received=10, expected=10, valid=False,
                           invalid_reasons=["counters not settled"])


def test_fails_loudly_after_retries():
    seen = []
    runner = TrialRunner(AlwaysInvalid(), retries=3, on_trial=lambda tr, ctx: seen.append(ctx))
    with pytest.raises(InvalidTrialsError) as ei:
        runner.measure(1.0, 1000.0)
    assert ei.value.attempts == 4 and "counters not settled" in str(ei.value)
    assert [c["attempt"] for c in seen] == [1, 2, 3, 4] and not any(c["used"] for c in seen)
    assert runner.log == [] and runner.total_trial_s == 0.0


def test_negative_loss_is_invalid():
    tr = TrialResult(1.0, 10.0, sent=10, received=11, expected=10)
    assert check_valid(tr)


def test_invalid_trials_never_used_and_recorded():
    clean = binary_search(TrialRunner(sim(8e6)), LINE_64)
    m = sim(8e6, invalid_rate=0.3, seed=7)
    rec = Recorder()
    runner = TrialRunner(m, retries=10, on_trial=lambda tr, ctx: rec.trial("t", tr, **ctx))
    dirty = binary_search(runner, LINE_64)
    assert m.invalid_trials > 0
    assert dirty.load_pps == clean.load_pps
    assert [t.load_pps for t in dirty.trials] == [t.load_pps for t in clean.trials]
    invalid = [c for _, tr, c in rec.trials if not tr.valid]
    assert len(invalid) == m.invalid_trials and all(not c["used"] for c in invalid)
    assert all(tr.valid for tr in runner.log)


def test_generator_cannot_exceed_line_rate():
    m = sim(8e6)
    tr = m.measure(1.0, LINE_64 * 1.5)
    assert not tr.valid and "line rate" in tr.invalid_reasons[0]
