"""Suite schema: every shipped suite validates; every problem names its full path and the fix."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from nfvperf.config import SuiteError, parse_link_speed
from nfvperf.suite_load import load_suite, validate_suite

REPO = Path(__file__).resolve().parents[2]
SUITES = sorted((REPO / "suites").glob("*.yaml"))


def _suite(**over):
    base = {"name": "t", "topology": {"kind": "p-ovs-p"}, "traffic": {"frame_sizes": [64, 1518]},
            "tests": [{"method": "throughput"}]}
    base.update(over)
    return base


def _problems(data) -> list[str]:
    with pytest.raises(SuiteError) as ei:
        validate_suite(data)
    return ei.value.problems


@pytest.mark.parametrize("path", SUITES, ids=[p.name for p in SUITES])
def test_shipped_suites_validate(path: Path) -> None:
    suite = load_suite(path)
    assert suite.tests, path
    assert len(SUITES) >= 8


def test_seed_suites_present() -> None:
    names = {p.name for p in SUITES}
    for n in ("quick.yaml", "quick-pvp.yaml", "sim-tour.yaml", "seed000-intel-onp.yaml", "seed001-tcp.yaml",
              "seed002-china-telecom.yaml", "seed003-jumbo-zpl.yaml", "seed004-ovs-scaling.yaml"):
        assert n in names


def test_defaults() -> None:
    s = validate_suite({"name": "d", "tests": [{"method": "throughput"}]})
    assert s.spec.traffic.frame_sizes == [64, 128, 256, 512, 1024, 1280, 1518]
    assert s.timing.name == "rfc2544" and s.timing.trial_s == 60 and s.timing.drain_s == 2
    assert s.timing.settle_s == 5 and s.timing.learning_s == 2
    assert s.timing.deviations() == []
    assert s.tests[0].params.trial_duration_s == 60      # the method's RFC default stays


def test_unknown_top_level_field_names_path_and_suggests() -> None:
    probs = _problems(_suite(trafic={}))
    assert len(probs) == 1
    assert probs[0].startswith("trafic: unknown field; did you mean 'traffic'?")
    assert "Allowed fields:" in probs[0]


def test_nested_wrong_values_name_full_paths() -> None:
    probs = _problems(_suite(tests=[
        {"method": "throughput"},
        {"method": "latency", "fractions": [0.5], "throughput": {"search": "foo", "loss_ratio": 2}},
    ]))
    joined = "\n".join(probs)
    assert "tests[1].throughput.search: got 'foo'; allowed values: 'binary'" in joined
    assert "tests[1].throughput.loss_ratio: got 2" in joined


def test_loss_ratio_out_of_range() -> None:
    probs = _problems(_suite(tests=[{"method": "throughput", "loss_ratio": 1.5}]))
    assert probs == ["tests[0].loss_ratio: got 1.5; input should be less than 1"]


def test_unknown_method_lists_allowed() -> None:
    probs = _problems(_suite(tests=[{"method": "throughputt"}]))
    assert probs[0].startswith("tests[0].method: unknown method 'throughputt'; allowed: back_to_back")
    assert "throughput" in probs[0]


def test_unknown_test_field_suggests_and_lists_engine_keys() -> None:
    probs = _problems(_suite(tests=[{"method": "throughput", "trail_duration_s": 3}]))
    assert "tests[0].trail_duration_s: unknown field; did you mean 'trial_duration_s'?" in probs[0]
    assert "frame_sizes" in probs[0] and "topology" in probs[0]


def test_all_problems_reported_at_once() -> None:
    probs = _problems({"name": "x", "topology": {"kind": "pvpp", "portz": 3},
                       "traffic": {"frame_sizes": [64, 20], "link_speed": "10Q"}, "profile": "fast",
                       "tests": [{"method": "nope"}, {"method": "throughput", "search": "x"}]})
    paths = [p.split(":")[0] for p in probs]
    assert paths == ["topology.kind", "topology.portz", "traffic.frame_sizes", "traffic.link_speed", "profile",
                     "tests[0].method", "tests[1].search"]
    assert "allowed values: 'p2p', 'p-ovs-p', 'pvp', 'pvvp', 'host-vm', 'vm-link-vm', 'vm-vm' or 'vxlan'" in probs[0]
    assert "60..16128" in probs[2]


def test_missing_required() -> None:
    probs = _problems({"tests": []})
    assert "name: required field is missing" in probs
    assert any(p.startswith("tests:") for p in probs)


def test_duplicate_test_names() -> None:
    probs = _problems(_suite(tests=[{"method": "throughput"}, {"method": "throughput"}]))
    assert "tests[1].name: 'throughput' is already used by tests[0]" in probs[0]


def test_per_test_topology_and_traffic_override() -> None:
    s = validate_suite(_suite(tests=[{"method": "throughput", "topology": {"kind": "pvp", "ovs": {"n_rxq": 2}},
                                      "traffic": {"flows_per_port": 1000}, "frame_sizes": [64]}]))
    t = s.tests[0]
    assert t.topology.kind == "pvp" and t.topology.ovs.n_rxq == 2
    assert t.topology.ovs.socket_mem_mb == 1024          # merged, not replaced
    assert t.traffic["flows_per_port"] == 1000 and t.frame_sizes == [64]
    probs = _problems(_suite(tests=[{"method": "throughput", "topology": {"kind": "pvpp"}}]))
    assert probs[0].startswith("tests[0].topology.kind: got 'pvpp'")


def test_quick_profile_sets_trial_durations() -> None:
    data = _suite(profile="quick", tests=[
        {"method": "throughput"},
        {"method": "latency", "fractions": [1.0], "trial_duration_s": 5},
        {"method": "reset", "methods": ["frame_loss"]},
    ])
    s = validate_suite(data)
    tp, lat, rst = (t.params for t in s.tests)
    assert tp.trial_duration_s == 1.0
    assert lat.trial_duration_s == 5                     # explicit value kept by the suite's profile
    assert lat.throughput.trial_duration_s == 1.0        # nested prerequisite gets the profile
    assert rst.reset_at_s == 0.5 and rst.trial_duration_s == 1.0
    forced = validate_suite(_suite(tests=data["tests"]), quick=True)
    assert forced.timing.name == "quick"
    assert forced.tests[1].params.trial_duration_s == 1.0   # --quick overrides explicit values
    assert forced.tests[1].params.repetitions == 3


def test_custom_profile() -> None:
    s = validate_suite(_suite(profile={"name": "custom", "trial_s": 10, "drain_s": 2, "settle_s": 5}))
    assert s.timing.trial_s == 10 and s.timing.learning_s == 2
    assert s.tests[0].params.trial_duration_s == 10
    assert "trial duration 10 s < 60 s" in s.timing.deviations()[0]


def test_bad_yaml_and_non_mapping(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("name: x\ntests: [\n  - {method: a")
    with pytest.raises(SuiteError) as ei:
        load_suite(p)
    assert ei.value.problems[0].startswith("(yaml) line 3, column 3:")
    p.write_text("- just\n- a list\n")
    with pytest.raises(SuiteError) as ei:
        load_suite(p)
    assert "must hold a mapping" in ei.value.problems[0]
    with pytest.raises(SuiteError) as ei:
        load_suite(tmp_path / "missing.yaml")
    assert "file not found" in ei.value.problems[0]


@pytest.mark.parametrize("text,bps", [("10G", 10e9), ("25Gbps", 25e9), ("100g", 100e9), ("1G", 1e9),
                                      ("400M", 400e6), (40e9, 40e9), ("2.5G", 2.5e9)])
def test_link_speed(text, bps) -> None:
    assert parse_link_speed(text) == bps


@pytest.mark.parametrize("bad", ["10Q", "fast", 0, -5, True, "10T"])
def test_link_speed_bad(bad) -> None:
    with pytest.raises(ValueError):
        parse_link_speed(bad)


def test_sim_section_validated() -> None:
    s = validate_suite(_suite(sim={"capacity_pps": {64: 5e6, 1518: 8e5}, "loss_model": "poisson", "seed": 3}))
    assert s.spec.sim.measurer_kwargs() == {"capacity_pps": {64: 5e6, 1518: 8e5}, "loss_model": "poisson",
                                            "seed": 3}
    probs = _problems(_suite(sim={"loss_model": "weird", "capacity_pps": -1}))
    assert any(p.startswith("sim.loss_model: got 'weird'") for p in probs)
    assert any(p.startswith("sim.capacity_pps") for p in probs)


def test_round_trip_dump_is_valid_yaml() -> None:
    s = load_suite(REPO / "suites" / "sim-tour.yaml")
    dumped = yaml.safe_dump(s.to_dict())
    assert "sim-tour" in dumped


def test_quick_shortens_tcp_duration() -> None:
    s = load_suite(REPO / "suites" / "seed001-tcp.yaml", quick=True)
    assert {t.params.duration_s for t in s.tests} == {5.0}
    assert max(t.params.repetitions for t in s.tests) <= 3
    assert {t.params.duration_s for t in load_suite(REPO / "suites" / "seed001-tcp.yaml").tests} == {60.0}


def test_field_names_that_look_like_type_names_keep_their_path() -> None:
    probs = _problems(_suite(tests=[{"method": "tcp", "streams": 0, "interval_s": 1}],
                             sim={"capacity_pps": "lots"}))
    assert any(p.startswith("tests[0].streams: got 0") for p in probs), probs
    assert any(p.startswith("tests[0].interval_s: unknown field") for p in probs), probs
    assert any(p.startswith("sim.capacity_pps") for p in probs), probs


def test_per_size_params() -> None:
    s = validate_suite(_suite(tests=[{"method": "throughput", "max_load_pct": 20,
                                      "per_size": {64: {"max_load_pct": 10}}},
                                     {"method": "latency", "name": "lat", "fractions": [0.5],
                                      "per_size": {64: {"throughput": {"max_load_pct": 10}}}}]))
    tp, lat = s.tests
    assert tp.params_for(64).max_load_pct == 10 and tp.params_for(1518).max_load_pct == 20
    assert tp.params_dict(64)["max_load_pct"] == 10
    assert lat.params_for(64).throughput.max_load_pct == 10 and lat.params_for(64).fractions == [0.5]
    assert lat.params_for(1518).throughput.max_load_pct == 100
    probs = _problems(_suite(tests=[{"method": "throughput", "per_size": {128: {"max_load_pct": 10}}},
                                    {"method": "throughput", "name": "b", "per_size": {64: {"max_load_pct": 0}}}]))
    assert probs[0].startswith("tests[0].per_size.128: not one of this test's frame sizes [64, 1518]")
    assert probs[1].startswith("tests[1].per_size.64.max_load_pct: got 0")


def test_pci_pairs_must_be_the_ports() -> None:
    """``topology.pci`` is read as [tg0, dut0, tg1, dut1, ...]: a list that is not one pair per
    port is refused naming both fields and the fixes (issue 29: seed 000 said ``ports: 4`` with
    four addresses, two pairs)."""
    four = ["0000:05:00.0", "0000:05:00.1", "0000:85:00.0", "0000:85:00.1"]
    (msg,) = _problems(_suite(topology={"kind": "p-ovs-p", "ports": 4, "port_kind": "pci",
                                        "pci": four}))
    assert "topology.ports: 4, but topology.pci gives 4 address(es)" in msg, msg
    assert "2 pair(s)" in msg and "give 8 addresses" in msg and "--testbed" in msg, msg
    (msg,) = _problems(_suite(topology={"kind": "p-ovs-p", "ports": 2, "port_kind": "pci",
                                        "pci": four[:3]}))
    assert "gives 3 address(es)" in msg and "one left over" in msg, msg
    # a test that lowers ports under the suite's list is refused too, naming the test
    probs = _problems(_suite(topology={"kind": "p-ovs-p", "ports": 2, "port_kind": "pci",
                                       "pci": four},
                             tests=[{"method": "throughput", "topology": {"ports": 4}}]))
    assert any("topology.ports: 4, but topology.pci gives 4" in p for p in probs), probs
    validate_suite(_suite(topology={"kind": "p-ovs-p", "ports": 2, "port_kind": "pci",
                                    "pci": four}))          # two pairs, two ports: fine
