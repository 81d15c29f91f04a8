"""nfvperf trend / gate (issue 17): series identity, change detection with jumpavg and the runs'
noise, the gate's exit codes, the A/B gate, selector errors, running/aborted runs, the SQL reads."""
from __future__ import annotations

import argparse
import io
import random
import socket
from typing import Any, Optional

import pytest
from sqlalchemy import event, inspect, text

from nfvperf.store import Store
from nfvperf.trend import Selector, SelectorError, trend_json
from nfvperf.trend.ab import AbError, gate_ab
from nfvperf.trend.detect import detect
from nfvperf.trend.gate import GateError, gate
from nfvperf.trend.series import RunInfo, StoredTest, identity, series_id

TOPO = {"kind": "p-ovs-p", "dut": "ovs-dpdk", "port_kind": "vhost", "ports": 2,
        "ovs": {"rules": 0, "pmd_cores": None}}


def add_run(store: Store, value: Optional[float], *, name: str = "throughput", size: Optional[int] = 64,
            suite: str = "s", status: str = "completed", flows: int = 1, width: float = 0.0,
            env: Optional[dict[str, Any]] = None, dut: str = "ovs-dpdk", test_status: str = "passed",
            topology: Optional[dict[str, Any]] = None, overrides: Optional[dict[str, Any]] = None,
            sim: Optional[dict[str, Any]] = None) -> int:
    """One run with one zero-loss throughput test of ``value`` fps/if (search width ``width``)."""
    topo = dict(topology or TOPO, dut=dut)
    run = store.create_run(suite=suite, suite_path=None, topology=topo["kind"], dut=dut, tg="sim", profile="quick",
                           config={"topology": topo, "sim": sim or {}},
                           environment={"hostname": "hostA", **(env or {})})
    t = store.start_test(run.id, name=name, method="throughput", frame_size_b=size, params={},
                         traffic={"frame_size_b": size, "flows_per_port": flows, "bidirectional": True},
                         topology={"kind": topo["kind"], "ports": 2, "overrides": overrides or {}, "directions": 2})
    if value is not None:
        store.add_result(t.id, "throughput", {"throughput_pps": value, "lower_bound_pps": value,
                                              "upper_bound_pps": value * (1 + width)}, value_pps=value)
    store.finish_test(t.id, test_status)
    if status != "running":
        store.finish_run(run.id, status)
    return run.id


def add_rounds_run(store: Store, base: list[float], unit: list[float], status: str = "completed") -> int:
    """A run with an interleaved study of two units (A = baseline, B), MRR per round."""
    from nfvperf.stats import median_interval, ratio_interval
    run = store.create_run(suite="ab", suite_path=None, topology="p-ovs-p", dut="ovs-dpdk", tg="sim",
                           profile="quick", config={"topology": TOPO}, environment={"hostname": "hostA"})
    for label, vals, baseline in (("a", base, True), ("b", unit, False)):
        study = {"name": "build", "axes": {"build": label}, "baseline": baseline,
                 "rounds": {"rounds": len(vals), "metrics": ["mrr"], "seed": 1}}
        t = store.start_test(run.id, name=f"build[build={label}]", method="throughput", frame_size_b=64, params={},
                             traffic={"frame_size_b": 64, "flows_per_port": 1}, topology={"kind": "p-ovs-p",
                                                                                            "ports": 2},
                             study=study)
        for i, v in enumerate(vals):
            store.add_result(t.id, "round", {"figures": {"mrr": {"value_pps": v}}, "round": i + 1, "position": 1})
        iv = median_interval(vals)
        data: dict[str, Any] = {"study": "build", "rounds": len(vals), "rounds_measured": len(vals),
                                "metrics": {"mrr": {"values_pps": vals, "median_pps": iv.median if iv else None,
                                                    "interval": iv.to_dict() if iv else None}}, "ratios": {}}
        if not baseline:
            data["baseline_unit"] = "build[build=a] 64 B"
            ri = ratio_interval(vals, base)
            data["ratios"]["mrr"] = ri.to_dict() if ri else None
        store.add_result(t.id, "rounds", data)
        store.finish_test(t.id, "passed")
    store.finish_run(run.id, status)
    return run.id


@pytest.fixture
def store(tmp_path):
    s = Store(str(tmp_path / "r.db"))
    yield s
    s.close()


def noisy(rng: random.Random, level: float, n: int, sd: float = 0.03) -> list[float]:
    return [level * (1 + rng.gauss(0, sd)) for _ in range(n)]


# --------------------------------------------------------------------------- identity

def _ident(name: str = "t", size: int = 64, flows: int = 1, host: str = "h", dut: str = "ovs-dpdk",
           overrides: Optional[dict[str, Any]] = None, metric: str = "throughput", study: Any = None,
           testbed: Optional[str] = None) -> dict[str, Any]:
    test = StoredTest(1, name, "throughput", size, "passed", {"kind": "p-ovs-p", "ports": 2,
                                                               "overrides": overrides or {}},
                      {"frame_size_b": size, "flows_per_port": flows}, study, dict(TOPO, dut=dut))
    run = RunInfo(1, "u", "nfvu", "completed", None, suite="s", dut=dut, hostname=host, testbed=testbed,
                  config_topology=dict(TOPO, dut=dut))
    return identity(test, run, metric)


def test_identity_is_the_configuration_not_the_names():
    a = _ident(name="throughput")
    assert series_id(a) == series_id(_ident(name="renamed-in-another-suite"))
    assert a["dut"] == "ovs-dpdk" and a["port_kind"] == "vhost" and a["topology"] == "p-ovs-p"
    assert a["host"] == "h" and a["metric"] == "throughput" and a["frame_size_b"] == 64 and a["flows"] == 1
    assert a["rules"] == 0
    others = [_ident(size=512), _ident(flows=1000), _ident(host="other"), _ident(dut="testpmd"),
              _ident(overrides={"ovs": {"n_rxq": 2}}), _ident(metric="mrr"), _ident(testbed="lab1"),
              _ident(overrides={"ovs": {"vswitchd": "/opt/ovs-b/sbin/ovs-vswitchd"}})]
    ids = {series_id(a)} | {series_id(o) for o in others}
    assert len(ids) == len(others) + 1, "each configuration difference is its own series"
    assert _ident(overrides={"ovs": {"pmd_cores": 2}})["cores"] == 2
    assert _ident(overrides={"ovs": {"vswitchd": "/opt/b"}})["build"] == "/opt/b"
    assert _ident(testbed="lab1")["host"] == "lab1"


def test_identity_from_the_store_ignores_suite_test_name_and_sim_model(store):
    r1 = add_run(store, 100.0, suite="one", name="tp", sim={"capacity_pps": 100})
    r2 = add_run(store, 85.0, suite="two", name="renamed", sim={"capacity_pps": 85})
    add_run(store, 90.0, size=512)
    d = trend_json(store)
    assert len(d["series"]) == 2
    s64 = next(s for s in d["series"] if s["identity"]["frame_size_b"] == 64)
    assert [p["run"] for p in s64["points"]] == [r1, r2] and sorted(s64["tests"]) == ["renamed", "tp"]
    assert s64["id"] == series_id(s64["identity"])


def test_an_interleaved_unit_feeds_one_series_per_metric(store):
    run = store.create_run(suite="s", suite_path=None, topology="p-ovs-p", dut="ovs-dpdk", tg="sim", profile="q",
                           config={"topology": TOPO}, environment={"hostname": "hostA"})
    t = store.start_test(run.id, name="flows[flows=1]", method="throughput", frame_size_b=64, params={},
                         traffic={"frame_size_b": 64, "flows_per_port": 1}, topology={"kind": "p-ovs-p", "ports": 2},
                         study={"name": "flows", "axes": {"flows": 1}, "baseline": True,
                                "rounds": {"rounds": 6, "metrics": ["mrr", "pdr"]}})
    store.add_result(t.id, "rounds", {"rounds_measured": 6, "metrics": {
        "mrr": {"values_pps": [10.0] * 6, "median_pps": 10.0, "interval": {"median": 10.0, "lo": 9.0, "hi": 11.0}},
        "pdr": {"values_pps": [8.0] * 6, "median_pps": 8.0, "interval": {"median": 8.0, "lo": 8.0, "hi": 8.0}}}})
    store.finish_test(t.id, "passed")
    store.finish_run(run.id, "completed")
    d = trend_json(store, "--test flows")
    by = {s["identity"]["metric"]: s for s in d["series"]}
    assert set(by) == {"mrr", "pdr"}
    assert by["mrr"]["points"][0]["value"] == 10.0 and by["pdr"]["points"][0]["value"] == 8.0
    assert by["mrr"]["points"][0]["noise"] == pytest.approx(0.2)       # (11 − 9) / 10: the rounds' interval
    assert by["mrr"]["points"][0]["noise_source"] == "the rounds' 95 % intervals"
    assert by["mrr"]["identity"]["axes"] == {"flows": 1}


# --------------------------------------------------------------------------- detection

def test_a_10pct_step_inside_3pct_noise_is_found_at_the_right_run():
    exact = near = 0
    for seed in range(20):
        rng = random.Random(seed)
        d = detect(noisy(rng, 1e6, 12) + noisy(rng, 0.9e6, 12))
        found = [(c.index, c.kind) for c in d.changes if 0.85 < c.ratio < 0.95]
        exact += found == [(12, "regression")] and len(d.changes) == 1
        near += len(found) == 1 and abs(found[0][0] - 12) <= 1 and len(d.changes) == 1
    assert exact >= 16 and near >= 18, f"the step found at run 13 in {exact} of 20 seeds, ±1 run in {near}"
    d = detect(noisy(random.Random(4), 1e6, 12) + noisy(random.Random(40), 0.9e6, 12))
    assert [(c.index, c.kind) for c in d.changes] == [(12, "regression")]
    assert 0.88 < d.changes[0].ratio < 0.92 and len(d.groups) == 2
    rng = random.Random(1)
    up = detect(noisy(rng, 1e6, 12) + noisy(rng, 1.1e6, 12))
    assert [(c.index, c.kind) for c in up.changes] == [(12, "progression")]


def test_3pct_noise_alone_gives_no_change():
    false = sum(bool(detect(noisy(random.Random(100 + s), 1e6, 24)).changes) for s in range(20))
    assert false <= 1, f"{false} of 20 flat noisy series showed a change"
    assert detect([5.0] * 10).changes == [] and len(detect([5.0] * 10).groups) == 1


def test_a_run_s_own_noise_keeps_it_from_faking_a_change():
    rng = random.Random(3)
    v = noisy(rng, 1e6, 20, 0.01)
    v[12] *= 0.8                                      # one run 20 % low
    quiet = detect(v, noise=[0.02] * 20)
    assert [(c.index, c.kind) for c in quiet.changes] == [(12, "regression"), (13, "progression")]
    noise = [0.02] * 20
    noise[12] = 0.4                                   # ... but its host was unsteady (±40 %)
    d = detect(v, noise=noise)
    assert d.changes == [] and len(d.groups) == 1 and d.merged == 2
    # a real step larger than the runs' noise stays a change
    step = detect([1.0] * 8 + [0.8] * 8, noise=[0.1] * 16)
    assert [(c.index, round(c.ratio, 2)) for c in step.changes] == [(8, 0.8)]
    assert detect([1.0] * 8 + [0.8] * 8, noise=[0.3] * 16).changes == []


def test_rounds_samples_enter_the_detection():
    rng = random.Random(5)
    values = [1.0] * 6 + [0.9] * 6
    tight = [[v * (1 + rng.gauss(0, 0.01)) for _ in range(10)] for v in values]
    assert [c.index for c in detect(values, tight).changes] == [6]


def test_the_window_bounds_the_detection():
    d = detect([1.0] * 30 + [0.5] * 30, window=20)
    assert d.offset == 40 and d.changes == [] and d.groups[0].start == 40


# --------------------------------------------------------------------------- store, status, SQL

def test_running_and_aborted_runs_are_shown_never_counted(store):
    here = {"hostname": socket.gethostname()}      # a run of this host whose pid is gone is aborted
    for _ in range(6):
        add_run(store, 100.0, env=here)
    aborted = add_run(store, 50.0, status="aborted", env=here)
    running = add_run(store, 50.0, status="running", env=here)     # no pid: cannot be judged gone
    dead = add_run(store, 50.0, status="running", env=dict(here, pid=2 ** 22 + 7))
    failed_test = add_run(store, 50.0, test_status="failed", env=here)
    s = trend_json(store)["series"][0]
    status = {p["run"]: p["status"] for p in s["points"]}
    assert status[aborted] == "aborted" and status[running] == "running" and status[dead] == "aborted"
    assert status[failed_test] == "test failed"
    assert s["changes"] == [] and len(s["groups"]) == 1 and s["groups"][0]["runs"] == 6
    with pytest.raises(GateError, match="running"):
        gate(store, run=running)


def test_trend_reads_no_trial_and_filters_in_sql(store):
    for v in (100.0, 100.0, 90.0):
        add_run(store, v)
    add_run(store, 10.0, name="other", size=128)
    seen: list[str] = []

    def spy(conn, cursor, statement, *a):  # noqa: ANN001
        seen.append(statement.lower())
    event.listen(store.engine, "before_cursor_execute", spy)
    try:
        d = trend_json(store, "--test throughput --size 64")
    finally:
        event.remove(store.engine, "before_cursor_execute", spy)
    assert len(d["series"]) == 1 and len(d["series"][0]["points"]) == 3
    assert not any("from trials" in s or "join trials" in s for s in seen)
    assert any("tests.name" in s and "tests.frame_size_b" in s and "where" in s for s in seen)


def test_an_older_store_is_migrated_in_place(tmp_path):
    path = str(tmp_path / "old.db")
    s = Store(path)
    add_run(s, 100.0)
    with s.engine.begin() as c:                  # as a store written before issue 17 (and 9)
        c.execute(text("DROP INDEX ix_tests_name_size"))
        c.execute(text("ALTER TABLE tests DROP COLUMN study"))
    s.close()
    s = Store(path)
    try:
        assert "ix_tests_name_size" in {i["name"] for i in inspect(s.engine).get_indexes("tests")}
        assert "study" in {c["name"] for c in inspect(s.engine).get_columns("tests")}
        assert trend_json(s)["series"][0]["points"][0]["value"] == 100.0
    finally:
        s.close()


def test_trend_and_gate_on_sqlite_and_postgresql(any_store):
    for _ in range(8):
        add_run(any_store, 1000.0, env={"cpu_steadiness": {"spread_pct": 1.0}})
    last = add_run(any_store, 800.0)
    s = trend_json(any_store, {"test": "throughput", "size": "64"})["series"][0]
    assert s["identity"]["host"] == "hostA"
    assert s["points"][0]["noise"] == pytest.approx(0.01) and s["points"][0]["noise_source"] == "host CPU steadiness"
    assert [(c["run"], c["kind"]) for c in s["changes"]] == [(last, "regression")]
    assert gate(any_store).exit_code == 1


# --------------------------------------------------------------------------- gate

def _series(store: Store, values: list[float]) -> list[int]:
    return [add_run(store, v) for v in values]


def test_gate_exit_codes(store):
    rng = random.Random(7)
    ids = _series(store, noisy(rng, 1e6, 10, 0.01))
    res = gate(store)
    assert res.exit_code == 0 and res.run == ids[-1] and not res.regressed
    assert res.lines()[-1].endswith("→ pass")
    low = add_run(store, 0.85e6)
    res = gate(store)
    assert res.exit_code == 1 and res.run == low
    (line,) = [x for x in res.lines() if x.startswith("REGRESSION")]
    assert f"since run {low}" in line and "-15." in line
    # above the threshold only: a 15 % regression passes a 20 % threshold
    assert gate(store, threshold=0.20).exit_code == 0
    # a regression that has not recovered still fails the next run; --since after it accepts it
    nxt = add_run(store, 0.85e6)
    assert gate(store).exit_code == 1
    assert gate(store, since=low).exit_code == 0
    # an earlier run is gated against its own history only
    assert gate(store, run=ids[-1]).exit_code == 0 and gate(store, run=nxt).exit_code == 1


def test_gate_a_progression_and_a_first_run_pass(store):
    _series(store, [100.0] * 6 + [130.0])
    res = gate(store)
    assert res.exit_code == 0 and res.verdicts[0].kind == "progression"
    other = add_run(store, 5.0, size=1518)
    res = gate(store, run=other)
    assert res.exit_code == 0 and res.verdicts[0].kind == "no history"


def test_gate_a_noisy_newest_run_does_not_fail(store):
    _series(store, [100.0] * 8)
    add_run(store, 85.0, env={"cpu_steadiness": {"spread_pct": 40.0}})
    res = gate(store)
    assert res.exit_code == 0 and res.verdicts[0].kind == "same"


def test_gate_cli_exit_codes(tmp_path):
    from nfvperf.cli import main
    db = str(tmp_path / "c.db")
    s = Store(db)
    _series(s, [100.0] * 8)
    s.close()
    assert main(["gate", "--db", db]) == 0
    s = Store(db)
    add_run(s, 80.0)
    s.close()
    assert main(["gate", "--db", db]) == 1
    assert main(["gate", "--db", db, "--test", "throughputt"]) == 2
    assert main(["gate", "--db", db, "--threshold", "150"]) == 2
    assert main(["trend", "--db", db, "--size", "65"]) == 2


# --------------------------------------------------------------------------- A/B

def test_ab_gate_on_the_paired_ratio_interval(store):
    rng = random.Random(11)
    base = [1e6 * (1 + rng.gauss(0, 0.02)) for _ in range(10)]
    slower = add_rounds_run(store, base, [b * 0.9 * (1 + rng.gauss(0, 0.005)) for b in base])
    res = gate_ab(store, slower)
    assert res.exit_code == 1 and res.verdicts[0].regressed and res.verdicts[0].hi < 0.98
    assert "REGRESSION" in res.lines()[0] and "build[build=b]" in res.lines()[0]
    same = add_rounds_run(store, base, [b * (1 + rng.gauss(0, 0.005)) for b in base])
    assert gate_ab(store, same).exit_code == 0
    # 10 % slower passes a 15 % threshold: the interval reaches above 0.85
    assert gate_ab(store, slower, threshold=0.15).exit_code == 0
    few = add_rounds_run(store, base[:4], [b * 0.5 for b in base[:4]])
    res = gate_ab(store, few)             # 4 rounds give no 95 % interval: cannot judge, even at 0.5×
    assert res.exit_code == 2 and res.lines()[0].startswith("NOT JUDGED") and "6 do" in res.lines()[0]
    plain = add_run(store, 1.0)
    with pytest.raises(AbError, match="no interleaved study"):
        gate_ab(store, plain)


def test_ab_gate_cli(tmp_path):
    from nfvperf.cli import main
    db = str(tmp_path / "ab.db")
    s = Store(db)
    base = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0, 100.2, 99.8]
    add_rounds_run(s, base, [b * 0.8 for b in base])
    s.close()
    assert main(["gate", "--db", db, "--ab"]) == 1
    assert main(["gate", "--db", db, "--ab", "1", "--threshold", "25"]) == 0


# --------------------------------------------------------------------------- selectors

def test_selector_errors_name_the_near_matches(store):
    add_run(store, 1.0, name="p-ovs-p-flows")
    add_run(store, 1.0, name="p-ovs-p-rules", size=512)
    with pytest.raises(SelectorError, match=r"--test p-ovs-p-flow: no series has it; near: p-ovs-p-flows"):
        trend_json(store, "--test p-ovs-p-flow")
    with pytest.raises(SelectorError, match=r"--size 1518: .*near|--size 1518: .*stored: 512, 64"):
        trend_json(store, "--size 1518")
    with pytest.raises(SelectorError, match=r"--dut ovs-dpdkk: no series has it; near: ovs-dpdk"):
        trend_json(store, "--dut ovs-dpdkk")
    with pytest.raises(SelectorError, match=r"--metric mr: .*throughput"):
        trend_json(store, "--metric mr")
    with pytest.raises(SelectorError, match="not together"):
        trend_json(store, "--test p-ovs-p-flows --size 512")
    with pytest.raises(SelectorError, match="frame size in bytes"):
        Selector.parse("--size big")
    with pytest.raises(SelectorError, match="AXIS=VALUE"):
        Selector.parse({"axis": ["flows"]})
    with pytest.raises(SelectorError, match="not a selector option"):
        Selector.parse("--tset x")
    with pytest.raises(SelectorError, match="unknown selector field"):
        Selector.parse({"tests": "x"})
    assert len(trend_json(store, "--test p-ovs-p-flows --size 64 --dut ovs-dpdk --metric throughput")["series"]) == 1
    sid = trend_json(store)["series"][0]["id"]
    assert [s["id"] for s in trend_json(store, f"--series {sid[:5]}")["series"]] == [sid]


def test_selector_from_a_namespace():
    ns = argparse.Namespace(test="t", size="IMIX", metric=None, dut=None, method=None, suite=None, testbed=None,
                            host=None, topology=None, port_kind=None, flows=None, series=None, axis=["flows=1"],
                            json=True)
    sel = Selector.parse(ns)
    assert sel.size == "imix" and sel.axis == ["flows=1"] and "--test t" in sel.text()


def test_trend_table_marks_changes_and_uncounted_points(store):
    from rich.console import Console
    _series(store, [100.0] * 5 + [80.0] * 5)
    add_run(store, 10.0, status="interrupted")
    buf = io.StringIO()
    from nfvperf.trend.compute import trend_series
    from nfvperf.trend.render import render
    with store.session() as s:
        render(trend_series(s), Console(file=buf, width=250))
    out = buf.getvalue()
    assert "6: regression -20.0 %" in out and "interrupted (not counted)" in out and "10 (+1 not counted)" in out


def test_two_builds_are_named_by_path_and_interleave_by_restarting():
    """A DUT build given as a path (topology.ovs.vswitchd, topology.testpmd.binary) is a field
    the DUT cannot change while running: a study over it restarts between its units."""
    from nfvperf.topo.inplace import restart_fields
    from nfvperf.topo.spec import TopologySpec
    a = TopologySpec(kind="p-ovs-p", dut="ovs-dpdk", ports=2, port_kind="vhost", ovs={"vswitchd": "/a"})
    b = TopologySpec(kind="p-ovs-p", dut="ovs-dpdk", ports=2, port_kind="vhost", ovs={"vswitchd": "/b"})
    assert restart_fields(a, b) == ["ovs.vswitchd"]
    c = TopologySpec(kind="p2p", dut="testpmd", ports=2, port_kind="vhost", testpmd={"binary": "/a"})
    d = TopologySpec(kind="p2p", dut="testpmd", ports=2, port_kind="vhost", testpmd={"binary": "/b"})
    assert restart_fields(c, d) == ["testpmd.binary"]


def test_a_missing_build_path_is_a_dut_failure_naming_the_field(tmp_path):
    from types import SimpleNamespace

    from nfvperf.dut.ovs_dpdk import OvsDpdk
    from nfvperf.trial import DutFailure
    run = SimpleNamespace(tag="nfvtest", run_dir=str(tmp_path), file_prefix=lambda role: f"nfvtest-{role}")
    from nfvperf.topo import TopologySpec
    spec = TopologySpec(kind="p-ovs-p", port_kind="vhost", ovs={"vswitchd": str(tmp_path / "nope"),
                                                                "socket_mem_mb": 512})
    dut = OvsDpdk(run, None, spec=spec)
    with pytest.raises(DutFailure, match="topology.ovs.vswitchd: .*nope does not exist"):
        dut._vswitchd()


def test_a_store_that_cannot_be_migrated_is_refused_with_the_way_to_migrate(pg_url, capsys):
    """A real store of the older schema (no ``tests.study``) on PostgreSQL, opened by a role that
    may only read it: Store() cannot add the column, and trend refuses with the way to migrate;
    opened by its owner (as the message says), it is migrated in place and the reader's trend
    works.  (SQLite cannot stand in: root writes a read-only file all the same.)"""
    import secrets

    from sqlalchemy import create_engine, inspect, text

    from nfvperf.cli import main
    name, reader = "old" + secrets.token_hex(4), "reader" + secrets.token_hex(4)
    admin = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f"create database {name}"))
        c.execute(text(f"create role {reader} login"))
    owner_url = pg_url.replace("/postgres?", f"/{name}?")
    reader_url = owner_url.replace("nfvperf@", f"{reader}@")
    try:
        Store(owner_url).close()
        old = create_engine(owner_url)
        with old.begin() as c:
            c.execute(text("alter table tests drop column study"))     # the schema before studies
            c.execute(text(f"grant select on all tables in schema public to {reader}"))
        assert main(["trend", "--db", reader_url]) == 2
        err = capsys.readouterr().err
        assert "older schema is migrated in place" in err and "migrate it once with write access" in err, err
        assert "must be owner" in err or "permission denied" in err, err     # PostgreSQL's refusal
        assert "study" not in {col["name"] for col in inspect(old).get_columns("tests")}
        assert main(["history", "--db", owner_url]) == 0          # the way the message gives
        assert "study" in {col["name"] for col in inspect(old).get_columns("tests")}
        with old.begin() as c:
            c.execute(text(f"grant select on all tables in schema public to {reader}"))
        capsys.readouterr()
        assert main(["trend", "--db", reader_url]) == 0, capsys.readouterr().err
        old.dispose()
    finally:
        with admin.connect() as c:
            c.execute(text(f"drop database if exists {name} with (force)"))
            c.execute(text(f"drop role if exists {reader}"))
        admin.dispose()
