"""Studies (issue 9 item 1): a test entry's ``study:`` expands into one validated test per
configuration; aliases and dotted paths reach the real schema fields; baseline and ``only:``;
every mistake in the block is named; topology axes come outermost so the runner builds each
topology once; ``--port-kind`` rewrites a suite for emulated ports."""
from __future__ import annotations

import pytest

from nfvperf.config import SuiteError
from nfvperf.suite_load import override_port_kind, validate_suite
from nfvperf import runner
from nfvperf.study import ALIAS_FUNCS, ALIASES, MAX_STUDY_UNITS, describe, summaries
from nfvperf.topo.measurers import sim_unit


def _suite(*tests, **over):
    base = {"name": "t", "topology": {"kind": "p-ovs-p", "port_kind": "vhost"},
            "traffic": {"frame_sizes": [64]}, "tests": list(tests)}
    base.update(over)
    return base


def _entry(axes, **kw):
    study = {"axes": axes}
    study.update(kw.pop("study_extra", {}))
    return {"method": "throughput", "name": "s", "study": study, **kw}


def _problems(data) -> list[str]:
    with pytest.raises(SuiteError) as ei:
        validate_suite(data)
    return ei.value.problems


def test_cross_product_names_and_study_fields() -> None:
    s = validate_suite(_suite(_entry({"flows": [1, 1000], "rxq": [1, 2]})))
    names = [t.name for t in s.tests]
    # rxq changes the topology: it is the outer axis; names keep the axes in the order written
    assert names == ["s[flows=1,rxq=1]", "s[flows=1000,rxq=1]", "s[flows=1,rxq=2]", "s[flows=1000,rxq=2]"]
    assert [t.traffic.flows_per_port for t in s.tests] == [1, 1000, 1, 1000]
    assert [t.topology.ovs.n_rxq for t in s.tests] == [1, 1, 2, 2]
    assert s.tests[0].study == {"name": "s", "axes": {"flows": 1, "rxq": 1}, "baseline": True}
    assert [t.study["baseline"] for t in s.tests] == [True, False, False, False]
    assert all(t.index == 0 and t.method == "throughput" for t in s.tests)


def test_topology_groups_merge_units_of_one_topology() -> None:
    s = validate_suite(_suite(_entry({"flows": [1, 10, 100], "topology.ovs.n_rxq": [1, 2],
                                      "mtu": [1500, 2000]}), {"method": "throughput", "name": "plain"}))
    groups = runner.topology_groups(runner.test_units(s), s.spec.topology)
    # 4 distinct topologies (rxq x mtu) for the study, each built once; the plain test after it
    # is on the suite topology, which equals the rxq=1, mtu=1500 one but is not adjacent to it
    specs = [(g[0].ovs.n_rxq, g[0].mtu) for g in groups]
    assert specs == [(1, 1500), (1, 2000), (2, 1500), (2, 2000), (1, 1500)]
    assert [len(g[1]) for g in groups] == [3, 3, 3, 3, 1]
    # a traffic-only study shares the suite's topology with the tests around it
    s2 = validate_suite(_suite({"method": "throughput", "name": "a"}, _entry({"flows": [1, 1000]})))
    assert len(runner.topology_groups(runner.test_units(s2), s2.spec.topology)) == 1


def test_only_and_explicit_baseline() -> None:
    e = _entry({"flows": [1, 1000], "rxq": [1, 2, 4]},
               study_extra={"baseline": {"flows": 1000}, "only": [{"rxq": 4}, {"flows": 1000}, {"flows": 1, "rxq": 2}]})
    s = validate_suite(_suite(e))
    # an axis left out of an only: item takes the baseline value (flows=1000, rxq=1)
    assert [t.name for t in s.tests] == ["s[flows=1000,rxq=1]", "s[flows=1,rxq=2]", "s[flows=1000,rxq=4]"]
    assert [t.study["baseline"] for t in s.tests] == [True, False, False]


def test_named_variant_axis_with_entry_keys_aliases_and_paths() -> None:
    e = _entry({"variant": {"small": {"topology": {"ovs": {"n_rxq_desc": 512}}},
                            "big": {"descriptors": 2048, "traffic.vlan": 10}},
                "frame_size": [64, 128]})
    s = validate_suite(_suite(e))
    by = {t.name: t for t in s.tests}
    assert set(by) == {"s[variant=small,frame_size=64]", "s[variant=small,frame_size=128]",
                       "s[variant=big,frame_size=64]", "s[variant=big,frame_size=128]"}
    big = by["s[variant=big,frame_size=128]"]
    assert (big.topology.ovs.n_rxq_desc, big.topology.ovs.n_txq_desc) == (2048, 2048)
    assert big.traffic.vlan == 10 and big.frame_sizes == [128] and big.traffic.frame_sizes == [128]
    small = by["s[variant=small,frame_size=64]"]
    assert (small.topology.ovs.n_rxq_desc, small.topology.ovs.n_txq_desc) == (512, 1024)
    assert small.study["axes"] == {"variant": "small", "frame_size": 64} and small.study["baseline"]


def test_dotted_paths_into_params_and_topology() -> None:
    e = _entry({"params.resolution_pct": [1.0, 2.5], "topology.ovs.smc_enable": [False, True]})
    s = validate_suite(_suite(e))
    assert [t.name for t in s.tests][:2] == ["s[params.resolution_pct=1,topology.ovs.smc_enable=false]",
                                             "s[params.resolution_pct=2.5,topology.ovs.smc_enable=false]"]
    assert [(t.params.resolution_pct, t.topology.ovs.smc_enable) for t in s.tests] == [
        (1.0, False), (2.5, False), (1.0, True), (2.5, True)]


@pytest.mark.parametrize("alias,value,get", [
    ("dut", "linux-bridge", lambda t: t.topology.dut),
    ("kind", "pvp", lambda t: t.topology.kind),
    ("port_kind", "memif", lambda t: t.topology.port_kind),
    ("pmd_mask", "0x6", lambda t: t.topology.ovs.pmd_cpu_mask),
    ("pmd_cores", 2, lambda t: t.topology.ovs.pmd_cores),
    ("ht", False, lambda t: t.topology.ovs.ht),
    ("rxq", 2, lambda t: t.topology.ovs.n_rxq),
    ("rules", 64, lambda t: t.topology.ovs.rules),
    ("socket_mem", "11264,1024", lambda t: t.topology.ovs.socket_mem),
    ("mtu", 9000, lambda t: t.topology.mtu),
    ("vnf", "vm", lambda t: t.topology.vnf),
    ("flows", 1000, lambda t: t.traffic.flows_per_port),
    ("link_speed", "40G", lambda t: t.traffic.link_speed_bps),
    ("frame_size", 128, lambda t: t.frame_sizes),
    ("descriptors", 512, lambda t: (t.topology.ovs.n_rxq_desc, t.topology.ovs.n_txq_desc)),
])
def test_alias_reaches_the_schema_field(alias, value, get) -> None:
    expected = {"link_speed": 40e9, "frame_size": [128], "descriptors": (512, 512),
                "socket_mem": [11264, 1024]}.get(alias, value)
    topo = {"dut": {"kind": "p2p", "dut": "testpmd", "port_kind": "af_packet"},
            "vnf": {"kind": "pvp", "port_kind": "vhost"}}.get(alias, {"kind": "p-ovs-p", "port_kind": "vhost"})
    s = validate_suite(_suite(_entry({alias: [value]}), topology=topo))
    assert get(s.tests[0]) == expected


def test_cores_and_ht_axes_are_topology_axes() -> None:
    s = validate_suite(_suite(_entry({"flows": [1, 1000], "pmd_cores": [1, 2], "ht": [False, True]})))
    assert [(t.topology.ovs.pmd_cores, t.topology.ovs.ht, t.traffic.flows_per_port) for t in s.tests] == [
        (1, False, 1), (1, False, 1000), (1, True, 1), (1, True, 1000),
        (2, False, 1), (2, False, 1000), (2, True, 1), (2, True, 1000)]
    groups = runner.topology_groups(runner.test_units(s), s.spec.topology)
    assert [len(g[1]) for g in groups] == [2, 2, 2, 2]
    assert s.tests[2].name == "s[flows=1,pmd_cores=1,ht=true]"


def test_pmd_cores_axis_replaces_a_mask_of_the_entry_or_suite() -> None:
    e = _entry({"pmd_cores": [1, 2]}, topology={"ovs": {"pmd_cpu_mask": "0x3c", "n_rxq": 2}})
    s = validate_suite(_suite(e))
    assert [(t.topology.ovs.pmd_cores, t.topology.ovs.pmd_cpu_mask, t.topology.ovs.n_rxq) for t in s.tests] == [
        (1, None, 2), (2, None, 2)]
    s = validate_suite(_suite(_entry({"pmd_cores": [1]}), topology={"kind": "p-ovs-p", "port_kind": "vhost",
                                                                   "ovs": {"pmd_cpu_mask": "0x4"}}))
    assert (s.tests[0].topology.ovs.pmd_cores, s.tests[0].topology.ovs.pmd_cpu_mask) == (1, None)


def test_tcp_aliases_and_vxlan_alias() -> None:
    tcp = {"method": "tcp", "name": "t", "study": {"axes": {"streams": [1, 4], "processes": [2]}}}
    s = validate_suite(_suite(tcp, topology={"kind": "pvp", "port_kind": "af_packet"}))
    assert [(t.params.streams, t.params.processes) for t in s.tests] == [(1, 2), (4, 2)]
    s = validate_suite(_suite(_entry({"vxlan": [False, True]})))
    plain, vx = s.tests
    assert (plain.topology.kind, plain.traffic.vxlan) == ("p-ovs-p", False)
    assert (vx.topology.kind, vx.traffic.vxlan) == ("vxlan", True)


def test_tso_and_multiqueue_axes_set_the_tcp_params() -> None:
    assert ALIASES["tso"] == ("params.tso",) and ALIASES["multiqueue"] == ("params.multiqueue",)
    tcp = {"method": "tcp", "name": "t", "study": {"axes": {"tso": [False, True], "multiqueue": [1, 2]}}}
    s = validate_suite(_suite(tcp, topology={"kind": "pvp", "port_kind": "af_packet"}))
    assert [(t.name, t.params.tso, t.params.multiqueue) for t in s.tests] == [
        ("t[tso=false,multiqueue=1]", False, 1), ("t[tso=false,multiqueue=2]", False, 2),
        ("t[tso=true,multiqueue=1]", True, 1), ("t[tso=true,multiqueue=2]", True, 2)]
    assert s.tests[0].study["axes"] == {"tso": False, "multiqueue": 1}
    # the sim model reads them from the unit's params (topo.measurers.sim_unit)
    spec = s.spec.topology
    assert (sim_unit(spec, s.tests[3].params).tso, sim_unit(spec, s.tests[3].params).multiqueue) \
        == (True, 2)
    # bad values and a method without the fields: errors that name the field
    bad = {"method": "tcp", "name": "b", "study": {"axes": {"multiqueue": [0, 2], "tso": ["maybe"]}}}
    text = "\n".join(_problems(_suite(bad, topology={"kind": "pvp", "port_kind": "af_packet"})))
    assert "multiqueue: 0 queues; give 1..4096" in text and "tso" in text, text
    text = "\n".join(_problems(_suite(_entry({"tso": [True, False]}))))
    assert "params.tso" in text or "tso: unknown field" in text, text


def test_every_alias_of_the_contract_is_mapped_or_named_missing() -> None:
    contract = ("dut kind port_kind pmd_cores ht pmd_mask rxq flows rules mtu frame_size vxlan vnf "
                "socket_mem streams processes tso multiqueue descriptors link_speed").split()
    from nfvperf.study import MISSING_ALIASES
    assert set(contract) == set(ALIASES) | set(ALIAS_FUNCS) | set(MISSING_ALIASES)
    assert ALIASES["pmd_cores"] == ("topology.ovs.pmd_cores",) and ALIASES["ht"] == ("topology.ovs.ht",)


def test_study_block_errors_name_the_field() -> None:
    probs = _problems(_suite(
        _entry({"flowz": [1], "foo.bar": [1], "flows": [], "rules": [1, 1]}, name="a"),
        _entry({"flows": [1, 2]}, name="b", study_extra={"baseline": {"flows": 5}}),
        _entry({"flows": [1, 2]}, name="c", study_extra={"baseline": {"rxq": 1}}),
        _entry({"flows": [1, 2]}, name="d", study_extra={"only": [{"flows": 1}, {"flows": 3}]}),
        _entry({"flows": [1, 2]}, name="e", study_extra={"only": [{"flows": 2}]}),
        _entry({"flows": [1, 2]}, name="f", study_extra={"only": []}),
        _entry({"flows": list(range(1, 18)), "rxq": list(range(1, 17))}, name="g"),
        {"method": "throughput", "name": "h", "study": {"axis": {"flows": [1]}}},
        _entry({"flows": [1], "topology.ovs.n_rxq": [1], "rxq": [2]}, name="i"),
    ))
    text = "\n".join(probs)
    assert "tests[0].study.axes.flowz: unknown axis 'flowz': not an alias (" in text
    assert "tests[0].study.axes.foo.bar: unknown path root 'foo'" in text
    assert "tests[0].study.axes.flows: empty axis" in text
    assert "tests[0].study.axes.rules: value 1 repeats" in text
    assert "tests[1].study.baseline.flows: 5 is not on axis flows (1, 2)" in text
    assert "tests[2].study.baseline.rxq: not an axis of this study; axes: flows" in text
    assert "tests[3].study.only[1].flows: 3 is not on axis flows" in text
    assert "tests[4].study.baseline: flows=1 is not one of the only: units" in text
    assert "tests[5].study.only: a non-empty list" in text
    assert f"tests[6].study.axes: the cross product has 272 units (more than {MAX_STUDY_UNITS}); list the " \
           "units you want with only:" in text
    assert "tests[7].study.axis: unknown key" in text and "tests[7].study.axes: required" in text
    assert "tests[8].study.axes.rxq: sets topology.ovs.n_rxq as axis topology.ovs.n_rxq does" in text


def test_invalid_combination_names_the_unit_and_common_problems_once() -> None:
    e = _entry({"flows": [1, 0], "mtu": [1500, 9000]}, name="c", resolution_pct=900)
    probs = _problems(_suite(e))
    # the entry's own problem (in every unit) once; the unit's own with the unit names
    assert probs.count("tests[0].resolution_pct: got 900; input should be less than or equal to 50") == 1
    bad = [p for p in probs if "flows_per_port" in p]
    assert len(bad) == 1 and "(study units c[flows=0,mtu=1500], c[flows=0,mtu=9000])" in bad[0], probs
    # an unknown field reached through a path: the ordinary unknown-field error
    probs = _problems(_suite(_entry({"topology.ovs.nope": [1, 2]})))
    assert any(p.startswith("tests[0].topology.ovs.nope: unknown field") for p in probs), probs
    # a study's name is taken like a test's
    probs = _problems(_suite({"method": "throughput", "name": "s"}, _entry({"flows": [1]})))
    assert any("tests[1].name: 's' is already used by tests[0]" in p for p in probs), probs


def test_summaries_for_validate() -> None:
    s = validate_suite(_suite(_entry({"flows": [1, 1000], "rxq": [1, 2]}, study_extra={"baseline": {"rxq": 2}}),
                              {"method": "throughput", "name": "plain"}))
    (summ,) = summaries(s.tests)
    assert summ.units == 4 and summ.axes == {"flows": [1, 1000], "rxq": [1, 2]}
    assert summ.baseline == {"flows": 1, "rxq": 2}
    assert describe(summ) == "study s: 4 unit(s); axes flows: 1, 1000; rxq: 1, 2; baseline flows=1, rxq=2"


# ------------------------------------------------------------------ --port-kind

def _nic_suite():
    return {"name": "nic", "topology": {"kind": "p-ovs-p", "port_kind": "pci", "ports": 2,
                                        "pci": ["0000:01:00.0", "0000:01:00.1"]},
            "traffic": {"frame_sizes": [64]},
            "tests": [{"method": "throughput", "name": "a"},
                      {"method": "throughput", "name": "b", "topology": {"port_kind": "pci",
                                                                          "pci": ["0000:02:00.0", "0000:02:00.1"]}},
                      {"method": "throughput", "name": "c", "study": {
                          "axes": {"port_kind": ["pci", "af_xdp"],
                                   "v": {"x": {"topology": {"port_kind": "pci", "pci": ["0000:03:00.0"]}}}},
                          "only": [{"port_kind": "pci"}, {"port_kind": "af_xdp"}]}}]}


def test_port_kind_override_rewrites_suite_tests_and_studies() -> None:
    data = _nic_suite()
    out = override_port_kind(data, "vhost")
    assert data["topology"]["port_kind"] == "pci"          # the input is left alone
    s = validate_suite(out)
    assert s.spec.topology.port_kind == "vhost" and s.spec.topology.pci == []
    assert {t.topology.port_kind for t in s.tests} == {"vhost"} and all(not t.topology.pci for t in s.tests)
    # the port-kind axis collapsed to the one kind: one unit instead of two
    assert [t.name for t in s.tests] == ["a", "b", "c[port_kind=vhost,v=x]"]


def test_port_kind_override_error_names_the_test(tmp_path) -> None:
    from nfvperf.suite_load import load_suite
    import yaml
    data = _nic_suite()
    data["tests"].append({"method": "tcp", "name": "iperf"})
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(SuiteError) as ei:
        load_suite(p, port_kind="vhost")
    text = "\n".join(ei.value.problems)
    assert "port_kind vhost has none (use af_packet or af_xdp) (tests[3]: test iperf)" in text
    assert "--port-kind vhost: the suite's and every test's port_kind were replaced" in text
    # an unknown kind is refused with the allowed ones
    with pytest.raises(SuiteError, match=r"topology.port_kind: .*'af_packet'"):
        load_suite(p, port_kind="nope")


def test_list_values_for_fields_that_take_lists() -> None:
    tcp = {"method": "tcp", "name": "t", "study": {"axes": {"params.pin_cores": [[0], [0, 1]]}}}
    s = validate_suite(_suite(tcp, topology={"kind": "pvp", "port_kind": "af_packet"}))
    assert [t.name for t in s.tests] == ["t[params.pin_cores=0]", "t[params.pin_cores=0/1]"]
    assert [t.params.pin_cores for t in s.tests] == [[0], [0, 1]]
    assert s.tests[1].study["axes"] == {"params.pin_cores": [0, 1]}
    probs = _problems(_suite(_entry({"flows": [{"a": 1}]})))
    assert any("tests[0].study.axes.flows: values are numbers, strings, booleans or lists" in p for p in probs)
