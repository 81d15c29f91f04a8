"""The MLR controller's named load-selection strategies (docs/engine.md: what the bench measured)."""
import dataclasses

import pytest

from nfvperf.search.mlr import PRESETS, STRATEGIES, Strategy, get_strategy, mlr_search
from nfvperf.search.validity import TrialRunner

from _core_helpers import sim


def test_named_strategies():
    assert list(STRATEGIES) == ["default", "forwarding_hint", "cheapest", "precise"]
    d = get_strategy(None)
    assert d is STRATEGIES["default"] and d.undecided == "interior" and not d.forwarding_hint
    assert get_strategy("precise") == Strategy("precise", "cheapest", True,
                                               STRATEGIES["precise"].summary)
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.forwarding_hint = True     # type: ignore[misc]
    with pytest.raises(ValueError, match="unknown MLR strategy 'low'"):
        get_strategy("low")
    with pytest.raises(ValueError):
        Strategy("x", undecided="high")


def _trace(r):
    return [(t.load_pps, t.duration_s, t.loss_ratio, t.phase) for t in r.trials]


def test_default_strategy_is_the_default():
    runs = [mlr_search(TrialRunner(sim(8e6, loss_model="poisson", seed=3, noise_pps=10.0)),
                       PRESETS["csit_ndr_pdr"], sim().profile.max_load_pps, **kw)
            for kw in ({}, {"strategy": "default"}, {"strategy": STRATEGIES["default"]})]
    assert _trace(runs[0]) == _trace(runs[1]) == _trace(runs[2])


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_every_strategy_reaches_the_goals_on_a_hard_limit(name):
    m = sim(8e6)
    r = mlr_search(TrialRunner(m), PRESETS["csit_ndr_pdr"], m.profile.max_load_pps,
                   strategy=name)
    ndr, pdr = r.goal("ndr"), r.goal("pdr")
    assert ndr.lower_bound_pps <= 8e6 < ndr.upper_bound_pps
    assert pdr.lower_bound_pps <= 8e6 / 0.995 < pdr.upper_bound_pps
    assert not r.irregular


@pytest.mark.parametrize("name", ["forwarding_hint", "cheapest", "precise"])
def test_strategies_differ_on_a_stochastic_dut(name):
    def run(strategy):
        m = sim(8e6, loss_model="poisson", seed=5, noise_pps=10.0, softness=0.05)
        return _trace(mlr_search(TrialRunner(m), PRESETS["csit_ndr_pdr"], m.profile.max_load_pps,
                                 strategy=strategy))
    assert run(name) != run("default")
