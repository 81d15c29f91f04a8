"""The PyPI MLRsearch 1.2.1 engine behind our measurer agrees with ours on a hard-limit DUT."""
import pytest

pytest.importorskip("MLRsearch")

from nfvperf.search.mlr import PRESETS, mlr_search  # noqa: E402
from nfvperf.search.mlrsearch_engine import mlrsearch_search  # noqa: E402
from nfvperf.search.validity import TrialRunner  # noqa: E402

from _core_helpers import sim  # noqa: E402


def test_engine_matches_truth_and_ours():
    m = sim(8e6)
    r = mlrsearch_search(TrialRunner(m), PRESETS["csit_ndr_pdr"], m.profile.max_load_pps)
    ndr, pdr = r.goal("ndr"), r.goal("pdr")
    assert r.kind == "mlrsearch"
    assert ndr.lower_bound_pps <= 8e6 < ndr.upper_bound_pps
    assert pdr.lower_bound_pps <= 8e6 / 0.995 < pdr.upper_bound_pps
    ours = mlr_search(TrialRunner(sim(8e6)), PRESETS["csit_ndr_pdr"], m.profile.max_load_pps)
    for name in ("ndr", "pdr"):
        a, b = ours.goal(name).lower_bound_pps, r.goal(name).lower_bound_pps
        assert abs(a - b) <= 0.01 * b
    assert r.trials and r.total_trial_s > 0


def test_engine_budget():
    m = sim(8e6)
    r = mlrsearch_search(TrialRunner(m), PRESETS["csit_ndr_pdr"], m.profile.max_load_pps,
                         time_budget_s=5.0)
    assert r.irregular and r.total_trial_s <= 5.0
