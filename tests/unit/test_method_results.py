"""Methods own their results (issue 18 item 3): each method's result class reads a stored result
back unchanged and answers what the report and the run log show, as the report computed it
from the dict before (the expected values in data/stored_results.json were computed by
report/extract.py before the result classes existed)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from nfvperf.methods import REGISTRY, result_of
from nfvperf.methods.result import MethodResult, StoredResult
from nfvperf.report.extract import traffic_profile

from _core_helpers import Recorder, sim
from test_methods_registry import QUICK

DOC = json.loads((Path(__file__).parent / "data" / "stored_results.json").read_text())
STORED: dict[str, dict] = DOC["results"]
EXPECTED: dict[str, dict] = DOC["expected"]


def _method(key: str) -> str:
    return key.split("+")[0]


def test_the_fixture_covers_every_method() -> None:
    assert {_method(k) for k in STORED} == set(REGISTRY)
    assert "throughput+repeat" in STORED and "throughput+rounds" in STORED


@pytest.mark.parametrize("key", sorted(STORED))
def test_a_stored_result_reads_back_unchanged(key: str) -> None:
    data = STORED[key]
    res = result_of(_method(key), data)
    assert type(res) is REGISTRY[_method(key)].result
    # the same JSON, key order included: old stores still read, a re-store writes the same bytes
    assert json.dumps(res.to_dict()) == json.dumps(data)
    declared = [f for f in res.__dataclass_fields__ if f in data]     # type: ignore[attr-defined]
    for name in declared:                                                # typed fields hold the stored values
        assert getattr(res, name) == data[name], name


@pytest.mark.parametrize("key", sorted(STORED))
def test_the_result_answers_as_the_report_did(key: str) -> None:
    res = result_of(_method(key), STORED[key])
    exp = EXPECTED[key]
    assert res.summary(traffic_profile(DOC["profile"]), 2).to_dict() == exp["summary"]
    mm = res.main_metric()
    assert (list(mm) if mm else None) == exp["metric"]
    lat = res.latency_at_throughput()
    assert (lat.get("avg_ns") if lat else None) == exp["latency_avg_ns"]


def test_rate_results_give_their_rate_and_the_others_none() -> None:
    assert result_of("throughput", STORED["throughput+repeat"]).rate_pps() == \
        STORED["throughput+repeat"]["repeat"]["median_pps"]
    fwd = STORED["rfc2889_forwarding"]
    assert result_of("rfc2889_forwarding", fwd).rate_pps() == fwd["max_forwarding_rate_pps"]
    for key in ("latency", "back_to_back", "tcp", "reset"):
        assert result_of(key, STORED[key]).rate_pps() is None


def test_an_older_result_missing_fields_reads_and_writes_back_as_stored() -> None:
    old = {"method": "back_to_back", "frame_size_b": 64, "mean_frames": 12.5, "retired_field": [1, 2]}
    res = result_of("back_to_back", old)
    assert res.to_dict() == old and list(res.to_dict()) == list(old)
    assert res.main_metric() == ("mean back-to-back burst", 12.5, "frames")
    row = res.table_row("64")
    assert row[0] == "64" and row[3] == "12.5" and row[1] == "—"      # absent: "not available"
    assert result_of("latency", {}).to_dict() == {} and result_of("latency", {}).latency_points() == []


def test_a_method_not_known_keeps_its_dict() -> None:
    data = {"method": "soak", "hours": 3}
    res = result_of("soak", data)
    assert type(res) is StoredResult and res.to_dict() == data
    assert res.summary(traffic_profile({}), 1).text == "method=soak, hours=3"


@pytest.mark.parametrize("name", sorted(QUICK))
def test_a_result_a_method_returns_reads_back_as_itself(name: str) -> None:
    info = REGISTRY[name]
    m = sim(8e6, mac_table_size=10000, recovery_s=0.1)
    res = info.run(m, m.profile, info.params(**QUICK[name]), Recorder())
    assert isinstance(res, info.result) and isinstance(res, MethodResult)
    stored = json.loads(json.dumps(res.to_dict()))
    back = info.read(stored)
    assert type(back) is type(res) and back.to_dict() == stored
    assert back.summary(m.profile, 2) == res.summary(m.profile, 2)


def test_from_dict_needs_a_dataclass() -> None:
    with pytest.raises(TypeError, match="dataclass"):
        MethodResult.from_dict({})


def test_only_a_zero_loss_throughput_is_offered_for_reuse() -> None:
    plain = STORED["throughput"]
    assert result_of("throughput", plain).zero_loss_throughput() == EXPECTED["throughput"]["summary"]["value_pps"]
    ndr_pdr = dict(plain, goals=[dict(plain["goals"][0], name="pdr", loss_ratio=0.005, exceed_ratio=0.5)])
    assert result_of("throughput", ndr_pdr).zero_loss_throughput() is None
    for key in ("rfc2889_forwarding", "latency", "tcp"):     # a rate, but not an RFC 2544 Throughput
        assert result_of(_method(key), STORED[key]).zero_loss_throughput() is None
