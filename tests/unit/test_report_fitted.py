"""A fitted study keeps its shape and says what ran (issue 19 leftovers): under ``--fit-host`` a
``pmd_cores=4`` unit that ran on 2 cores is labelled ``pmd_cores=4→2 (fitted)`` in the study's
pivots, and its Mpps per PMD core divides by the 2 cores that ran."""
from __future__ import annotations

import pytest

from nfvperf.suite_load import validate_suite
from nfvperf.fit import FitChange, HostFacts, fitted_axes
from nfvperf.host.cpu import CpuTopology
from nfvperf.report.extract import resolved_tests
from nfvperf.report.study import study_reports
from nfvperf.report.tables import build
from nfvperf.runner import execute
from nfvperf.store import Store

SMALL = HostFacts(CpuTopology.from_siblings({0: [0], 1: [1]}), 16384)     # 2 cores, no SMT

SUITE = {"name": "cores", "profile": "quick", "traffic": {"frame_sizes": [64]},
         "sim": {"capacity_pps": 1e6},
         "topology": {"kind": "p-ovs-p", "port_kind": "vhost"},
         "tests": [{"method": "throughput", "name": "pmd", "resolution_pct": 10,
                    "study": {"axes": {"pmd_cores": [1, 4], "flows": [1, 100]}}}]}


def test_fitted_axes_map_a_change_to_the_axis_that_set_its_field() -> None:
    ch = [FitChange("ovs.pmd_cores", 4, 2, "2 cores"), FitChange("ovs.ht", True, False, "no SMT")]
    study = {"name": "s", "axes": {"pmd_cores": 4, "flows": 100, "topology.ovs.ht": True}, "baseline": False}
    assert fitted_axes(study, ch) == {"pmd_cores": {"from": 4, "to": 2}, "topology.ovs.ht": {"from": True, "to": False}}
    assert fitted_axes(study, []) == {} and fitted_axes(None, ch) == {}
    # a named-variant axis sets no field by its name: left alone
    assert fitted_axes({"name": "s", "axes": {"big": "four"}}, ch) == {}


def test_a_fitted_study_column_shows_what_ran(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(HostFacts, "read", classmethod(lambda cls: SMALL))
    store = Store("sqlite:///" + str(tmp_path / "r.db"))
    out = execute(validate_suite(SUITE), store=store, tg="sim", out_dir=tmp_path, show_progress=False,
                  log=lambda s: None, fit_host=True)
    assert out.status == "completed", out.reason
    run = store.load_run(out.run_id)
    by = {t.name: t for t in run.tests}
    assert by["pmd[pmd_cores=4,flows=1]"].topology["fitted_axes"] == {"pmd_cores": {"from": 4, "to": 2}}
    assert "fitted_axes" not in by["pmd[pmd_cores=1,flows=1]"].topology
    (rep,) = study_reports(resolved_tests(run))
    assert rep.row_axis == "pmd_cores"        # one frame size: the rows are the first axis
    fps = rep.pivot("fps")
    assert fps.rows == ["1", "4→2 (fitted)"] and fps.columns == ["flows=1", "flows=100"]
    pc = rep.pivot("per_core")
    assert pc is not None
    v = fps.value("4→2 (fitted)", "flows=1")
    assert v and pc.value("4→2 (fitted)", "flows=1") == pytest.approx(v * 2 / 2 / 1e6)
    tables = [t for t in build(run).tables if t.key == "study_fps"]
    assert tables and tables[0].rows[1][0] == "4→2 (fitted)"
    store.close()
