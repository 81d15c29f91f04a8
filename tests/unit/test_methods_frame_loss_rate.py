"""RFC 2544 §26.3 frame loss rate (TV6)."""
import pydantic
import pytest

from nfvperf.methods import REGISTRY, FrameLossRateParams

from _core_helpers import sim

run = REGISTRY["frame_loss_rate"].run


def test_tv6_sweep():
    m = sim(8e6)
    r = run(m, m.profile, FrameLossRateParams(), None)
    got = [(p["pct"], round(p["loss_pct"], 4)) for p in r.points]
    assert got == [(100, 46.24), (90, 40.2667), (80, 32.8), (70, 23.2), (60, 10.4), (50, 0.0),
                   (40, 0.0)]
    assert r.trials == 7 and "2 successive" in r.stopped
    assert all(p["loss_pct"] == pytest.approx((p["sent"] - p["received"]) * 100 / p["sent"])
               for p in r.points)


def test_step_over_10_refused_with_clear_error():
    with pytest.raises(pydantic.ValidationError, match="at most 10 %"):
        FrameLossRateParams(step_pct=12.5)
    FrameLossRateParams(step_pct=2.5)


def test_fine_steps_and_full_stop():
    m = sim(1e6)   # loses at every step down to ~6.7 % of line rate
    r = run(m, m.profile, FrameLossRateParams(step_pct=5, trial_duration_s=1.0), None)
    assert r.points[1]["pct"] == 95
    assert r.points[-1]["pct"] == 5 and r.points[-1]["loss_pct"] == 0.0
    assert r.points[-2]["loss_pct"] > 0 and r.stopped == "reached 0 % load"
    m2 = sim(2e6)   # 13.4 %: zero loss at 10 and 5 %
    r2 = run(m2, m2.profile, FrameLossRateParams(step_pct=5, trial_duration_s=1.0), None)
    assert [p["pct"] for p in r2.points][-2:] == [10, 5] and "2 successive" in r2.stopped
