"""Rule installation at scale (issue 9 item 7): time limits sized to the rule count, chunk files,
dump-aggregate parsing, the RuleInstall record and its report table.  (The installs themselves
run on a real OVS in tests/integration/test_ovs_rule_install.py.)"""
from __future__ import annotations

import io

import pytest

from nfvperf.suite_load import validate_suite
from nfvperf.dut import ovs_rules as R
from nfvperf.report.rule_install import rule_install_tables
from nfvperf.report.tables import build
from nfvperf.report.terminal import print_report
from nfvperf.runner import execute
from nfvperf.store import Store


def test_time_limit_grows_with_the_rule_count() -> None:
    assert R.install_timeout_s(0) == R.TIMEOUT_FLOOR_S
    assert R.install_timeout_s(64) < R.install_timeout_s(65_536) < R.install_timeout_s(2_000_000)
    # 2M rules (seed 004's 1M per direction) get far more than the old fixed 300 s, and at the
    # slowest rate allowed for
    assert R.install_timeout_s(2_000_000) >= 2_000_000 / R.MIN_RULES_PER_S > 300


def test_flow_count_parses_dump_aggregate() -> None:
    out = "NXST_AGGREGATE reply (xid=0x4): packet_count=0 byte_count=0 flow_count=2000000\n"
    assert R.flow_count(out) == 2_000_000
    with pytest.raises(R.RuleInstallError, match="no flow_count"):
        R.flow_count("ovs-ofctl: br0 is not a bridge or a socket")


def test_chunk_files_hold_every_rule_once(tmp_path) -> None:
    lines = [f"priority=1,in_port={i},actions=drop" for i in range(25)]
    paths = R.write_chunks(lines, tmp_path, "flows-br-1", chunk=10)
    assert [p.name for p in paths] == ["flows-br-1.001.txt", "flows-br-1.002.txt", "flows-br-1.003.txt"]
    assert [ln for p in paths for ln in p.read_text().splitlines()] == lines
    (one,) = R.write_chunks(lines[:3], tmp_path, "flows-br-2", chunk=10)
    assert one.name == "flows-br-2.txt" and one.read_text().splitlines() == lines[:3]


def test_install_record_rate() -> None:
    rec = R.RuleInstall(bridge="br0", rules=2_000_000, seconds=20.0, method="bundle", chunks=20,
                        installed=2_000_000)
    d = rec.to_dict()
    assert d["rules_per_s"] == 100_000.0 and d["rules"] == 2_000_000 and d["installed"] == 2_000_000
    assert R.RuleInstall("br0", 0, 0.0, "bundle", 1, 0).rules_per_s is None


def test_unknown_method_names_the_choices(tmp_path) -> None:
    with pytest.raises(ValueError, match="allowed bundle, add-flows"):
        R.install_rules(["actions=drop"], bridge="br0", directory=tmp_path, stem="f",
                        ofctl=lambda args, t: "", method="fast")


def _env_with_installs() -> dict:
    big = R.RuleInstall("nfv123456br0", 2_000_000, 21.5, "bundle", 20, 2_000_000).to_dict()
    small = R.RuleInstall("nfv123456br0", 2, 0.01, "bundle", 1, 2).to_dict()
    return {"topologies": [{"kind": "p-ovs-p", "overrides": {"ovs": {"rules": 1000000}},
                            "environment": {"dut": {"rule_installs": [big]}}},
                           {"kind": "p-ovs-p", "overrides": {},
                            "environment": {"dut": {"rule_installs": [small]}}}]}


def test_report_table_lists_large_installs_only() -> None:
    (tb,) = rule_install_tables(_env_with_installs())
    assert tb.key == "rule_install" and tb.columns[2:7] == ["Rules", "Method", "Bundles", "Install s", "Rules/s"]
    (row,) = tb.rows
    assert row[0] == 'p-ovs-p {"ovs":{"rules":1000000}}'
    assert row[2:] == ["2,000,000", "bundle", "20", "21.50", "93,023", "2,000,000"]
    assert rule_install_tables({"topologies": [{"kind": "p2p", "environment": {"dut": {}}}]}) == []
    # what other DUTs and failed environments leave there
    assert rule_install_tables({"topologies": [{"kind": "p2p", "environment": {"dut": "testpmd"}},
                                               {"kind": "pvp", "environment": {"error": "x"}}]}) == []


def test_report_shows_the_install_table(tmp_path) -> None:
    suite = validate_suite({"name": "rules-report", "topology": {"kind": "p-ovs-p"}, "profile": "quick",
                            "traffic": {"frame_sizes": [64], "link_speed": "10G"},
                            "tests": [{"method": "throughput", "resolution_pct": 5}]})
    store = Store("sqlite:///" + str(tmp_path / "r.db"))
    try:
        out = execute(suite, store=store, tg="sim", out_dir=tmp_path, show_progress=False, log=lambda s: None)
        run = store.load_run(out.run_id)
        assert not [t for t in build(run).tables if t.key == "rule_install"]   # the sim installs none
        # what a real run stores per topology (tests/integration/test_ovs_rule_install.py)
        store.update_run(run.id, environment=dict(run.environment, **_env_with_installs()))
        run = store.load_run(out.run_id)
        assert [t.title for t in build(run).tables if t.key == "rule_install"] == ["OpenFlow rule installation"]
        buf = io.StringIO()
        print_report(run, buf)
        assert "OpenFlow rule installation" in buf.getvalue() and "93,023" in buf.getvalue()
    finally:
        store.close()


def test_seed004_rule_tests_validate_within_the_limits(tmp_path) -> None:
    """Seed 004's rule-count tests (64 .. 1M rules per direction, 1:1 with flows) validate, in
    quick mode too, and each install's time limit covers it at the slowest rate allowed for."""
    from pathlib import Path

    from nfvperf.config import SuiteError
    from nfvperf.suite_load import load_suite
    from nfvperf.dut.ovs_spec import OvsSpec
    path = Path(__file__).resolve().parents[2] / "suites" / "seed004-ovs-scaling.yaml"
    for quick in (False, True):
        suite = load_suite(path, quick=quick)
        counts = {}
        for t in suite.tests:
            ovs = (t.topology or suite.spec.topology).ovs
            assert isinstance(ovs, OvsSpec)
            n = ovs.rules
            if n:
                counts[t.name] = n
                assert t.traffic.flows_per_port == n, t.name      # 1:1 with the flows
        # the rules studies on p-ovs-p, pvp and vxlan (seed 004 §6.1-6.3), one unit per count
        assert counts == {f"rules-{kind}[rules={n}]": n for kind in ("p-ovs-p", "pvp", "vxlan")
                          for n in (64, 1000, 8000, 64000, 128000, 1_000_000)}
    assert R.install_timeout_s(2 * 1_000_000) > 2 * 1_000_000 / R.MIN_RULES_PER_S
    bad = path.read_text().replace("{rules: 1000000, flows: 1000000}", "{rules: 5000000, flows: 5000000}")
    assert bad != path.read_text()
    tmp = tmp_path / "seed004-too-many-rules.yaml"
    tmp.write_text(bad)
    with pytest.raises(SuiteError, match="rules"):
        load_suite(tmp)


def test_flow_ips_match_address_arithmetic() -> None:
    """The rules' addresses (integer arithmetic for IPv4) are tgen's: base + i, carrying over octets."""
    import ipaddress

    from nfvperf.topo.p_ovs_p import flow_ips
    for n, src, dst in ((70_000, "198.18.0.1", "198.19.0.1"), (300, "10.0.255.200", "198.19.255.255"),
                        (10, "2001:db8::1", "2001:db8::ff"), (6, "255.255.255.250", "1.2.3.4")):
        s, d = ipaddress.ip_address(src), ipaddress.ip_address(dst)
        assert flow_ips(n, src, dst) == [(str(s + i), str(d + i)) for i in range(n)], (n, src, dst)
    assert flow_ips(65_535)[-1] == ("198.18.255.255", "198.19.255.255")   # base .0.1 + 65,534
