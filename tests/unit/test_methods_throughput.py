"""Throughput method: the four search kinds, params validation, the result."""
import pydantic
import pytest

from nfvperf.methods import REGISTRY, ThroughputParams

from _core_helpers import LINE_64, Recorder, sim

run = REGISTRY["throughput"].run


def test_binary_default_is_tv4():
    m = sim(8e6)
    r = run(m, m.profile, ThroughputParams(), Recorder())
    assert round(r.throughput_pps, 2) == 7_992_699.03
    assert r.trials == 11 and r.wall_s == 759.0 and r.total_trial_s == 660.0
    assert round(r.upper_bound_pps - r.lower_bound_pps, 2) == 14_532.18
    assert r.rates["l1_pct"] == pytest.approx(53.7109375)
    assert r.rates["l2_mbps"] == pytest.approx(7_992_699.03 * 64 * 8 / 1e6, rel=1e-9)
    assert len(r.trace) == 11 and r.load_is.startswith("per interface")


def test_binary_resolution_in_fps_is_the_same_width_at_every_frame_size():
    """resolution_pps: one width in fps per interface at every size (quick-pvp.yaml: the chain
    forwards about the same fps at 64 and 1518 B), where resolution_pct narrows with the line
    rate: 0.02 % of 10G is 2,976 fps at 64 B but 163 fps at 1518 B, at the same trial count."""
    from nfvperf.trial import TrafficProfile
    counts = {}
    for size in (64, 1518):
        for key, params in (("pct", ThroughputParams(trial_duration_s=1.0, resolution_pct=0.02)),
                            ("pps", ThroughputParams(trial_duration_s=1.0, resolution_pps=3000))):
            m = sim(50_000)
            prof = TrafficProfile(frame_size_b=size, link_speed_bps=10e9)
            m.set_profile(prof)
            r = run(m, prof, params, Recorder())
            width = r.upper_bound_pps - r.lower_bound_pps
            assert width <= (3000 if key == "pps" else prof.max_load_pps * 0.0002)
            assert 50_000 - width <= r.throughput_pps <= 50_000, (size, key, r.throughput_pps)
            counts[size, key] = r.trials
    assert counts[64, "pct"] == counts[1518, "pct"] == 14                 # 1 + 13 bisections
    assert counts[64, "pps"] == 14 and counts[1518, "pps"] == 10          # 1 + 9 at 1518 B
    with pytest.raises(pydantic.ValidationError, match="resolution_pps"):
        ThroughputParams(resolution_pps=0)


@pytest.mark.parametrize("kind", ["ndrpdr", "mlr", "mlrsearch"])
def test_other_searches(kind):
    if kind == "mlrsearch":
        pytest.importorskip("MLRsearch")
    m = sim(8e6)
    p = ThroughputParams(search=kind, trial_duration_s=1.0,
                         preset="csit_ndr_pdr" if kind in ("mlr", "mlrsearch") else None)
    r = run(m, m.profile, p, Recorder())
    assert r.search == kind
    assert r.throughput_pps <= 8e6 and r.throughput_pps > 8e6 * (1 - 0.01)
    assert r.pdr_pps is not None and r.pdr_pps <= 8e6 / 0.995


def test_mlr_default_goal_from_params_is_rfc2544_compliant():
    m = sim(8e6)
    r = run(m, m.profile, ThroughputParams(search="mlr", trial_duration_s=60.0), None)
    g = r.goals[0]
    assert g["exceed_ratio"] == 0.0 and g["final_trial_duration_s"] == 60.0
    assert g["lower_bound_pps"] <= 8e6 < g["upper_bound_pps"]


def test_explicit_goals():
    m = sim(8e6)
    p = ThroughputParams(search="mlr", goals=[{"name": "g1", "loss_ratio": 0.1,
                                               "exceed_ratio": 0.0, "final_trial_duration_s": 1,
                                               "duration_sum_s": 1}])
    r = run(m, m.profile, p, None)
    assert r.goals[0]["name"] == "g1"
    assert r.throughput_pps <= 8e6 / 0.9 < r.upper_bound_pps


def test_params_validation():
    with pytest.raises(pydantic.ValidationError):
        ThroughputParams(search="linear")
    with pytest.raises(pydantic.ValidationError):
        ThroughputParams(loss_ratio=1.0)
    with pytest.raises(pydantic.ValidationError, match="final_trial_duration_s"):
        ThroughputParams(trial_duration_s=60, final_trial_duration_s=10)
    with pytest.raises(pydantic.ValidationError, match="preset"):
        ThroughputParams(search="binary", preset="rfc2544")
    with pytest.raises(pydantic.ValidationError):
        ThroughputParams(search="mlr", goals=[{"name": "a"}, {"name": "a"}])
    with pytest.raises(pydantic.ValidationError):
        ThroughputParams(max_load_pct=120)


def test_max_load_pct_and_budget():
    m = sim(20e6)
    r = run(m, m.profile, ThroughputParams(max_load_pct=50.0, trial_duration_s=1.0), None)
    assert r.throughput_pps == pytest.approx(LINE_64 / 2) and r.trials == 1
    r2 = run(sim(8e6, loss_model="poisson"), m.profile,
             ThroughputParams(search="mlr", preset="csit_ndr_pdr", time_budget_s=10), None)
    assert r2.total_trial_s <= 10 and r2.irregular


def test_vxlan_rates_report_inner_and_outer():
    from nfvperf.trial import TrafficProfile
    from nfvperf.tg.sim import SimMeasurer
    prof = TrafficProfile(frame_size_b=64, vxlan=True, bidirectional=False)
    m = SimMeasurer(20e6)
    m.set_profile(prof)
    r = run(m, prof, ThroughputParams(trial_duration_s=1.0), None)
    assert round(r.line_rate_pps, 2) == 9_328_358.21          # TV3
    assert r.rates["frame_size_b"] == 64 and r.rates["wire_size_b"] == 114
    assert r.rates["l1_pct"] == pytest.approx(100.0)
