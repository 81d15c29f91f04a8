"""Results store on SQLite and on a real PostgreSQL cluster (initdb'd by the pg_url fixture)."""
from __future__ import annotations

import csv
import io
import json
import math

import pytest

from nfvperf.store import Result, Run, Store, Test, Trial, resolve_url
from nfvperf.store.models import SCHEMA_VERSION
from nfvperf.store.db import CSV_COLUMNS, RunNotFound, run_to_csv_rows, run_to_dict
from nfvperf.trial import LatencySummary, StreamResult, TrialResult


@pytest.fixture
def store(any_store):
    return any_store


def _trial(load: float, lost: int = 0) -> TrialResult:
    sent = int(load)
    lat = LatencySummary(count=10, min_ns=1000.0, avg_ns=2000.0, max_ns=float("nan"),
                         percentiles_ns={"50": 1900.0, "99.9": 3000.0}, histogram=[(1024.0, 3), (2048.0, 7)])
    return TrialResult(duration_s=1.0, load_pps=load, sent=sent, received=sent - lost, expected=sent,
                       streams=[StreamResult(name="p0->p1", sent=sent, received=sent - lost, latency=lat)],
                       latency=lat, extra={"inf": float("inf"), "tuple": (1, 2)})


def _fill(store: Store) -> int:
    run = store.create_run(suite="s", suite_path="/x/s.yaml", topology="p-ovs-p", dut="ovs-dpdk", tg="sim",
                           profile="quick", config={"name": "s", "weird": float("nan")})
    t = store.start_test(run.id, name="throughput", method="throughput", frame_size_b=64,
                         params={"loss_ratio": 0.0}, traffic={"frame_size_b": 64, "link_speed_bps": 10e9},
                         topology={"kind": "p-ovs-p", "switching_operations": 1})
    store.add_trial(t.id, _trial(1e6), {"phase": "search"})
    store.add_trial(t.id, _trial(2e6, lost=5), {"phase": "search"})
    store.add_result(t.id, "throughput", {"throughput_pps": 1e6, "goals": [{"name": "g", "lower_bound_pps": 1e6}]},
                     value_pps=1e6)
    store.finish_test(t.id, "passed")
    store.update_run(run.id, environment={"host": {"cpu_model": "x"}})
    store.finish_run(run.id, "completed", None, "throughput 64 B: 1,000,000 fps/if")
    return run.id


def test_write_read(store: Store) -> None:
    rid = _fill(store)
    run = store.load_run(rid)
    assert run.status == "completed" and run.finished_at is not None
    assert run.tag == "nfv" + run.uid and len(run.uid) == 6
    assert run.config["weird"] is None                     # NaN is not JSON: stored as null
    (t,) = run.tests
    assert [tr.seq for tr in t.trials] == [1, 2]
    assert t.trials[1].loss_ratio == pytest.approx(5 / 2e6)
    assert t.trials[1].detail["latency"]["max_ns"] is None
    assert t.trials[1].detail["extra"] == {"inf": None, "tuple": [1, 2]}
    assert t.trials[0].context == {"phase": "search"}
    assert t.results[0].value_pps == 1e6
    assert t.topology["switching_operations"] == 1
    assert store.count(Trial) == 2 and store.count(Result) == 1 and store.count(Test) == 1


def test_resolve_refs(store: Store) -> None:
    a, b = _fill(store), _fill(store)
    ra = store.load_run(a)
    assert store.resolve("latest") == b and store.resolve("-1") == b and store.resolve("-2") == a
    assert store.resolve(str(a)) == a
    assert store.resolve(ra.tag) == a and store.resolve(ra.uid) == a
    for bad in ("nfvzzzzzz", "999", "-3"):
        with pytest.raises(RunNotFound):
            store.resolve(bad)
    assert [r.id for r in store.list_runs()] == [b, a]


def test_trial_committed_at_once(store: Store) -> None:
    """A second connection sees each trial as soon as add_trial returns (crash safety)."""
    run = store.create_run(suite="s", suite_path=None, topology="p2p", dut="d", tg="sim", profile="quick",
                           config={})
    t = store.start_test(run.id, name="x", method="throughput", frame_size_b=64, params={}, traffic={})
    other = Store(store.url)
    try:
        store.add_trial(t.id, _trial(1e5))
        assert other.count(Trial) == 1
        assert other.load_run(run.id).status == "running"
    finally:
        other.close()


def test_json_export_round_trip(store: Store, tmp_path) -> None:
    rid = _fill(store)
    exported = json.loads(json.dumps(run_to_dict(store.load_run(rid))))
    assert exported["schema"] == "nfvperf-run" and exported["schema_version"] == SCHEMA_VERSION == 2
    other = Store("sqlite:///" + str(tmp_path / "other.db"))
    try:
        nid = other.import_dict(exported)
        again = json.loads(json.dumps(run_to_dict(other.load_run(nid))))
    finally:
        other.close()
    for d in (exported, again):
        d["run"].pop("id")
        for t in d["tests"]:
            t.pop("id")
    assert again == exported


def test_csv_export(store: Store) -> None:
    rid = _fill(store)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
    w.writeheader()
    for row in run_to_csv_rows(store.load_run(rid)):
        w.writerow(row)
    rows = list(csv.DictReader(io.StringIO(buf.getvalue())))
    assert len(rows) == 2
    assert rows[1]["lost"] == "5" and float(rows[1]["load_pps"]) == 2e6
    assert math.isclose(float(rows[1]["loss_ratio"]), 5 / 2e6)
    assert rows[0]["latency_avg_ns"] == "2000.0" and rows[0]["latency_max_ns"] == ""
    assert json.loads(rows[0]["context"]) == {"phase": "search"}


def test_resolve_url(monkeypatch, tmp_path) -> None:
    assert resolve_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert resolve_url(str(tmp_path / "x.db")) == "sqlite:///" + str(tmp_path / "x.db")
    monkeypatch.setenv("NFVPERF_DB", str(tmp_path / "env.db"))
    from nfvperf.store import default_url
    assert default_url().endswith("env.db")


def test_models_are_sqlalchemy_2() -> None:
    assert Run.__tablename__ == "runs" and Trial.__table__.c.detail.type.__class__.__name__ == "JSON"


def test_full_run_and_report_on_the_store(store: Store, tmp_path) -> None:
    """The runner, the report and compare work the same on SQLite and PostgreSQL."""
    from nfvperf.suite_load import validate_suite
    from nfvperf.report.compare import compare_runs
    from nfvperf.report.tables import build
    from nfvperf.runner import execute
    suite = validate_suite({"name": "pg", "profile": "quick", "traffic": {"frame_sizes": [64, 512]},
                            "sim": {"capacity_pps": 2e6},
                            "tests": [{"method": "throughput", "resolution_pct": 1},
                                      {"method": "latency", "fractions": [1.0], "repetitions": 1}]})
    outs = [execute(suite, store=store, tg="sim", out_dir=tmp_path, show_progress=False, log=lambda s: None)
            for _ in range(2)]
    assert [o.status for o in outs] == ["completed", "completed"]
    a, b = (store.load_run(o.run_id) for o in outs)
    assert len(a.tests) == 4 and all(t.trials for t in a.tests)
    assert any(t.key == "throughput" and len(t.rows) == 2 for t in build(a).tables)
    assert not compare_runs(a, b).flagged


def test_schema1_store_gains_new_columns(tmp_path) -> None:
    """A store created before tests.study / runs.testbed existed is extended in place and the
    new fields round-trip through export/import."""
    import sqlite3
    db = tmp_path / "old.db"
    Store(f"sqlite:///{db}").close()
    con = sqlite3.connect(db)
    con.execute("ALTER TABLE tests DROP COLUMN study")
    con.execute("DROP INDEX IF EXISTS ix_runs_testbed")
    con.execute("ALTER TABLE runs DROP COLUMN testbed")
    con.commit()
    con.close()
    st = Store(f"sqlite:///{db}")
    run = st.create_run(suite="s", suite_path=None, topology="p2p", dut="testpmd", tg="sim",
                        profile="quick", config={})
    st.update_run(run.id, testbed="lab1")
    study = {"name": "cores", "axes": {"pmd_cores": 2}, "baseline": False}
    st.start_test(run.id, name="t", method="throughput", frame_size_b=64, params={}, traffic={},
                  study=study)
    d = st.run_to_dict(run.id)
    assert d["run"]["testbed"] == "lab1"
    assert d["tests"][0]["study"] == study
    rid = st.import_dict(d, new_uid=True)
    again = st.load_run(rid)
    assert again.testbed == "lab1" and again.tests[0].study == study
    st.close()
