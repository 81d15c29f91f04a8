"""INTERFACES §4: REGISTRY names, params models (extra=forbid), result to_dict()."""
import json

import pydantic
import pytest

from nfvperf.methods import REGISTRY
from nfvperf.trial import Unsupported

from _core_helpers import Recorder, sim

NAMES = {"throughput", "latency", "frame_loss_rate", "back_to_back", "system_recovery", "reset",
         "rfc2889_forwarding", "rfc2889_address_caching", "rfc2889_address_learning", "tcp"}

QUICK = {
    "throughput": {"trial_duration_s": 1.0},
    "latency": {"throughput_pps": 8e6, "repetitions": 2, "trial_duration_s": 1.0},
    "frame_loss_rate": {"trial_duration_s": 1.0},
    "back_to_back": {"throughput_pps": 8e6, "repetitions": 2},
    "system_recovery": {"throughput_pps": 8e6},
    "reset": {"throughput_pps": 8e6},
    "rfc2889_forwarding": {"throughput_pps": 8e6, "trial_duration_s": 1.0},
    "rfc2889_address_caching": {"max_addresses": 20000, "learning_rate_pps": 1000},
    "rfc2889_address_learning": {},
    "tcp": {"duration_s": 1.0},
}


def test_registry_names():
    assert set(REGISTRY) == NAMES
    for name, info in REGISTRY.items():
        P, run = info.params, info.run
        assert issubclass(P, pydantic.BaseModel) and callable(run)
        assert P.model_config.get("extra") == "forbid"


@pytest.mark.parametrize("name", sorted(NAMES))
def test_unknown_key_rejected(name):
    P = REGISTRY[name].params
    with pytest.raises(pydantic.ValidationError):
        P(no_such_field=1)
    P()   # defaults are valid


@pytest.mark.parametrize("name", sorted(NAMES))
def test_every_method_runs_records_and_serialises(name):
    P, run = REGISTRY[name].params, REGISTRY[name].run
    m = sim(8e6, mac_table_size=10000, recovery_s=0.1)
    rec = Recorder()
    res = run(m, m.profile, P(**QUICK[name]), rec)
    d = res.to_dict()
    json.dumps(d)
    assert d["method"] == name
    assert rec.trials, "every trial is recorded"
    for test, tr, ctx in rec.trials:
        assert test == name and ctx["method"] == name and "phase" in ctx
        assert ctx["frame_size_b"] == 64


def test_recorder_optional_and_name_used():
    P, run = REGISTRY["throughput"].params, REGISTRY["throughput"].run
    m = sim(8e6)
    run(m, m.profile, P(trial_duration_s=1.0), None)
    rec = Recorder()
    run(m, m.profile, P(name="tput-64", trial_duration_s=1.0), rec)
    assert {t for t, _, _ in rec.trials} == {"tput-64"} and rec.progress_calls


class NoExtras(type(sim())):
    measure_tcp = None
    measure_addresses = None


def test_unsupported():
    m = NoExtras(8e6)
    m.set_profile(sim().profile)
    for name in ("tcp", "rfc2889_address_caching"):
        P, run = REGISTRY[name].params, REGISTRY[name].run
        with pytest.raises(Unsupported):
            run(m, m.profile, P(), None)
