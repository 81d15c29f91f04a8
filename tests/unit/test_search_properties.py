"""Property tests on the simulated DUT (hypothesis)."""
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nfvperf.search.binary import binary_search
from nfvperf.search.mlr import PRESETS, SearchGoal, mlr_search
from nfvperf.search.ndrpdr import ndrpdr_search
from nfvperf.search.validity import TrialRunner

from _core_helpers import LINE_64, sim

S = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
cap_frac = st.floats(min_value=0.02, max_value=0.99)


@S
@given(cap_frac, st.floats(min_value=0.01, max_value=5.0))
def test_binary_never_above_capacity_and_within_width(frac, res_pct):
    C = LINE_64 * frac
    r = binary_search(TrialRunner(sim(C)), LINE_64, resolution_pct=res_pct)
    assert r.load_pps <= C
    assert r.load_pps > C - LINE_64 * res_pct / 100.0
    assert r.width_pps <= LINE_64 * res_pct / 100.0 + 1e-6


@S
@given(cap_frac, st.sampled_from(["csit_ndr", "csit_ndr_pdr", "rfc2544"]))
def test_mlr_zero_loss_rlb_never_above_capacity(frac, preset):
    C = LINE_64 * frac
    goals = PRESETS[preset]
    r = mlr_search(TrialRunner(sim(C)), goals, LINE_64)
    for g, goal in zip(r.goals, goals):
        assert not g.irregular
        bound = C / (1 - goal.loss_ratio)
        assert g.lower_bound_pps <= bound + 1e-3
        assert g.upper_bound_pps > bound
        assert g.upper_bound_pps - g.lower_bound_pps <= goal.relative_width * g.upper_bound_pps + 1e-6


@S
@given(cap_frac, st.floats(min_value=3.0, max_value=80.0), st.integers(0, 5))
def test_mlr_stays_inside_time_budget(frac, budget, seed):
    m = sim(LINE_64 * frac, loss_model="poisson", seed=seed)
    r = mlr_search(TrialRunner(m), PRESETS["csit_ndr_pdr"], LINE_64, time_budget_s=budget)
    assert r.total_trial_s <= budget + 1e-9
    assert m.total_trial_s <= budget + 1e-9


@S
@given(cap_frac, st.floats(min_value=0.0, max_value=0.3), st.integers(0, 1000))
def test_invalid_trials_never_change_results(frac, rate, seed):
    C = LINE_64 * frac
    clean = mlr_search(TrialRunner(sim(C)), PRESETS["csit_ndr_pdr"], LINE_64)
    m = sim(C, invalid_rate=rate, seed=seed)
    runner = TrialRunner(m, retries=12)
    dirty = mlr_search(runner, PRESETS["csit_ndr_pdr"], LINE_64)
    assert [g.lower_bound_pps for g in dirty.goals] == [g.lower_bound_pps for g in clean.goals]
    assert all(tr.valid for tr in runner.log)
    assert runner.invalid_trials == m.invalid_trials
    b = ndrpdr_search(TrialRunner(sim(C, invalid_rate=rate, seed=seed), retries=12), LINE_64)
    assert b.load_pps == ndrpdr_search(TrialRunner(sim(C)), LINE_64).load_pps


@S
@given(cap_frac, st.integers(0, 50))
def test_mlr_stochastic_dut_pdr_within_goal(frac, seed):
    """On the Poisson DUT the PDR sits near the overflow point C/(1−0.005) (noise is tiny
    there compared to 0.5 %); the RLB is within the goal width of it, never far above."""
    C = LINE_64 * frac
    goal = SearchGoal("pdr", 0.005, 0.5, 0.005, 1.0, 21.0)
    r = mlr_search(TrialRunner(sim(C, loss_model="poisson", seed=seed)), [goal], LINE_64)
    g = r.goals[0]
    assert g.lower_bound_pps <= C / 0.995 * (1 + 1e-9)
    assert g.lower_bound_pps >= C / 0.995 * (1 - 2 * 0.005)


@S
@given(cap_frac, st.floats(min_value=1.0, max_value=700.0))
def test_binary_budget_never_exceeded(frac, budget):
    from nfvperf.search.common import BudgetExceeded
    m = sim(LINE_64 * frac)
    try:
        r = binary_search(TrialRunner(m), LINE_64, trial_duration_s=60.0, time_budget_s=budget)
        assert r.total_trial_s <= budget
    except BudgetExceeded:
        pass
    assert m.total_trial_s <= budget
