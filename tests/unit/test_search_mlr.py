"""TV7 (classification P1–P6 per goal), TV8 (conditional throughput), TV9 (hard limit RLB),
and the MLR-style search on the simulated DUT."""
import pytest

from nfvperf.search.mlr import (CSIT_NDR, CSIT_PDR, EXAMPLE_GOALS, LOWER, PRESETS, RFC2544,
                                TST009, UNDECIDED, UPPER, SearchGoal, classify,
                                conditional_loss_ratio, conditional_throughput, exceed_ratios,
                                mlr_search)
from nfvperf.search.mlr.search import make_targets
from nfvperf.search.validity import TrialRunner

from _core_helpers import sim

U, UB, LB = UNDECIDED, UPPER, LOWER

# The MLR document's example trials at one load (METHODOLOGY TV7).
POINTS = {
    "P1": [(1.0, 0.0)] * 59,
    "P2": [(1.0, 0.01)],
    "P3": [(1.0, 0.01)] * 59,
    "P4": [(1.0, 0.0)],
    "P5": [(60.0, 0.001)],
    "P6": [(60.0, 0.0)],
}
# goals RFC2544 / TST009 / 1s final / 20 % exceed
TV7 = {
    "P1": (U, U, U, U),
    "P2": (UB, U, U, U),
    "P3": (UB, U, U, UB),
    "P4": (UB, U, LB, UB),
    "P5": (UB, U, LB, UB),   # the document says LB for "20 % exceed"; the pseudocode gives UB
    "P6": (UB, LB, LB, UB),
}


def cumulative(upto):
    trials = []
    for p in POINTS:
        trials += POINTS[p]
        if p == upto:
            return trials
    raise KeyError(upto)


@pytest.mark.parametrize("point", list(TV7))
def test_tv7_classification(point):
    trials = cumulative(point)
    assert tuple(classify(g, trials) for g in EXAMPLE_GOALS) == TV7[point]


def test_tv7_document_error_2_optimistic_exceed_ratios():
    g20 = EXAMPLE_GOALS[3]
    opt5, _ = exceed_ratios(g20, cumulative("P5"))
    opt6, _ = exceed_ratios(g20, cumulative("P6"))
    assert round(opt5 * 100, 3) == 42.857 and round(opt6 * 100, 3) == 27.273
    assert opt5 > g20.exceed_ratio and opt6 > g20.exceed_ratio    # hence Upper Bound


def test_tv8_conditional_throughput_at_p6():
    trials = cumulative("P6")
    ct = [conditional_throughput(g, 1e6, trials) for g in EXAMPLE_GOALS]
    assert ct[1] == pytest.approx(1_000_000)      # TST009
    assert ct[2] == pytest.approx(1_000_000)      # 1 s final
    assert ct[0] == pytest.approx(999_000)        # RFC 2544 (Exceed 0: worst full trial)
    assert ct[3] == pytest.approx(999_000)        # 20 % exceed


def test_tv8_uses_max_gds_full_sum_not_full_sum():
    # document error 3: rem = max(GDS, full_sum) * (1 - ER); trials run out -> loss 1
    g = SearchGoal("x", 0.0, 0.5, 0.005, 1.0, 21.0)
    assert conditional_loss_ratio(g, [(1.0, 0.0)] * 5) == 1.0
    assert conditional_loss_ratio(g, [(1.0, 0.0)] * 11) == 0.0
    assert conditional_loss_ratio(g, [(0.5, 0.0)]) is None


def test_tv9_hard_limit_rlb():
    """Why 100.5025 Mfps: a hard limit C = 100 Mfps loses (L − C)/L of the frames at load L.
    The goal loss ratio 0.5 % is not exceeded while (L − C)/L ≤ 0.005, i.e. L ≤ C/(1 − 0.005)
    = 100.5025 Mfps: that load is still a Lower Bound, so the RLB can sit up there, and its
    Conditional Throughput L × (1 − 0.005) = C = 100.0 Mfps."""
    C = 100e6
    L = C / (1 - 0.005)
    assert round(L / 1e6, 4) == 100.5025
    g = SearchGoal("pdr", 0.005, 0.0, 0.001, 1.0, 1.0)
    assert classify(g, [(1.0, (L - C) / L)]) == LB
    L2 = L * 1.0001
    assert classify(g, [(1.0, (L2 - C) / L2)]) == UB
    assert conditional_throughput(g, L, [(1.0, (L - C) / L)]) == pytest.approx(C)


def test_tv9_search_on_hard_limit_dut():
    m = sim(100e6, link_bps=100e9)
    g = SearchGoal("pdr", 0.005, 0.0, 0.001, 1.0, 1.0, preceding_targets=1)
    r = mlr_search(TrialRunner(m), [g], m.profile.max_load_pps)
    rlb = r.goals[0].lower_bound_pps
    assert 100e6 / 0.995 * (1 - 0.001) <= rlb <= 100e6 / 0.995
    assert r.goals[0].conditional_throughput_pps == pytest.approx(100e6, rel=1e-6)
    assert not r.goals[0].irregular


def test_targets_chain():
    ts = make_targets(CSIT_NDR)
    assert [t.index for t in ts] == [2, 1, 0]
    assert ts[-1].duration_sum == 21.0 and ts[0].duration_sum == 1.0
    assert ts[0].relative_width == pytest.approx(0.02) and ts[-1].relative_width == 0.005
    assert ts[1].duration_sum == pytest.approx(21.0 ** 0.5)


def test_presets():
    assert PRESETS["csit_ndr_pdr"] == (CSIT_NDR, CSIT_PDR)
    assert (CSIT_PDR.loss_ratio, CSIT_PDR.exceed_ratio, CSIT_PDR.duration_sum) == (0.005, 0.5, 21.0)
    assert (RFC2544.final_trial_duration, RFC2544.duration_sum, RFC2544.exceed_ratio) == (60, 60, 0)
    assert (TST009.final_trial_duration, TST009.duration_sum, TST009.exceed_ratio) == (60, 120, 0.5)
    with pytest.raises(ValueError):
        SearchGoal("bad", loss_ratio=1.0)


def test_rfc2544_goal_rlb_equals_ct_equals_throughput():
    m = sim(8e6)
    r = mlr_search(TrialRunner(m), [RFC2544], m.profile.max_load_pps)
    g = r.goals[0]
    assert g.lower_bound_pps <= 8e6 < g.upper_bound_pps
    assert g.conditional_throughput_pps == g.lower_bound_pps
    assert g.upper_bound_pps - g.lower_bound_pps <= 0.001 * g.upper_bound_pps


def test_csit_ndr_pdr_on_threshold_dut():
    m = sim(8e6)
    r = mlr_search(TrialRunner(m), PRESETS["csit_ndr_pdr"], m.profile.max_load_pps)
    ndr, pdr = r.goal("ndr"), r.goal("pdr")
    assert ndr.lower_bound_pps <= 8e6 < ndr.upper_bound_pps
    assert pdr.lower_bound_pps <= 8e6 / 0.995 < pdr.upper_bound_pps
    for g in (ndr, pdr):
        assert g.upper_bound_pps - g.lower_bound_pps <= 0.005 * g.upper_bound_pps + 1e-6
        assert not g.irregular
    assert r.trials[0].phase == "initial" and r.total_trial_s < 60   # warm-up not in trials
    assert r.total_trial_s == sum(t.duration_s for t in r.trials) + 1.0


def test_max_load_lower_bound_is_irregular():
    m = sim(20e6)
    r = mlr_search(TrialRunner(m), [CSIT_NDR], m.profile.max_load_pps)
    g = r.goals[0]
    assert g.irregular and "max load" in g.irregular_reason
    assert g.lower_bound_pps == pytest.approx(m.profile.max_load_pps, rel=1e-6)


def test_min_load_upper_bound_fails_fast():
    m = sim(1000.0)
    r = mlr_search(TrialRunner(m), [CSIT_NDR], m.profile.max_load_pps, min_load_pps=9001)
    g = r.goals[0]
    assert g.irregular and "min load" in g.irregular_reason and g.lower_bound_pps is None
    assert r.total_trial_s < 60


def test_bad_search_args():
    with pytest.raises(ValueError):
        mlr_search(TrialRunner(sim()), [], 1e6)
    with pytest.raises(ValueError):
        mlr_search(TrialRunner(sim()), [CSIT_NDR, CSIT_NDR], 1e6)
    with pytest.raises(ValueError):
        mlr_search(TrialRunner(sim()), [CSIT_NDR], 1e6, min_load_pps=2e6)


@pytest.mark.parametrize("budget", [0.5, 1.5])
def test_budget_too_small_for_the_initial_trial(budget):
    # no valid trial at all: an irregular result saying so, not a TypeError
    m = sim(8e6)
    r = mlr_search(TrialRunner(m), PRESETS["csit_ndr_pdr"], m.profile.max_load_pps,
                   time_budget_s=budget)
    assert r.irregular and r.trials == [] and r.total_trial_s <= budget
    assert any("budget" in n for n in r.notes)
    assert all(g.lower_bound_pps is None and g.irregular for g in r.goals)
