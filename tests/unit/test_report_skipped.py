"""Skipped units in the report (issue 19 leftovers): one "Skipped here" section, grouped by
reason, and no "(skipped)" rows in the measurement tables, in every renderer."""
from __future__ import annotations

import io

import pytest

from nfvperf.report.html import render_html
from nfvperf.report.markdown import render_markdown
from nfvperf.report.tables import SKIPPED_KEY, build
from nfvperf.report.terminal import print_report
from nfvperf.store import Store

from _study_runs import add_test, new_run, topo_row

UNFIT = "does not fit this host; --fit-host would change ovs.pmd_cores 4→2 (2 cores)"
SRIOV = "sriov:port_kind: topology.vnf: vm on kind p2p passes SR-IOV VFs through to the VM"


@pytest.fixture()
def store(tmp_path):
    s = Store("sqlite:///" + str(tmp_path / "s.db"))
    yield s
    s.close()


def _skip(store: Store, rid: int, name: str, size: int, why: str, study: dict | None = None) -> None:
    t = store.start_test(rid, name=name, method="throughput", frame_size_b=size, params={}, traffic={},
                         topology=topo_row(), study=study)
    store.finish_test(t.id, "skipped", why)


def _run(store: Store) -> int:
    rid = new_run(store)
    add_test(store, rid, "pmd[pmd_cores=1]", "throughput", 64, 1e6,
             study={"name": "pmd", "axes": {"pmd_cores": 1}, "baseline": True})
    for size in (64, 128, 256):
        _skip(store, rid, "pmd[pmd_cores=4]", size, UNFIT,
              study={"name": "pmd", "axes": {"pmd_cores": 4}, "baseline": False})
    _skip(store, rid, "ht", 64, UNFIT)
    _skip(store, rid, "sriov", 64, SRIOV)
    failed = store.start_test(rid, name="broken", method="throughput", frame_size_b=64, params={},
                              traffic={}, topology=topo_row())
    store.finish_test(failed.id, "failed", "topology set-up failed: boom")
    return rid


def test_skipped_units_are_one_section_grouped_by_reason_and_out_of_the_tables(store) -> None:
    run = store.load_run(_run(store))
    data = build(run)
    cells = [c for t in data.tables if t.key != SKIPPED_KEY for row in t.rows for c in row]
    assert not any("skipped" in str(c) for c in cells), cells
    assert not any("sriov" in t.title or t.title.startswith("ht") for t in data.tables if t.key != SKIPPED_KEY)
    (sk,) = [t for t in data.tables if t.key == SKIPPED_KEY]
    assert sk.title == "Skipped here" and sk.columns == ["Reason", "Units", "Skipped units"]
    assert sk.rows == [[UNFIT, "4", "pmd[pmd_cores=4] 64/128/256 B, ht 64 B"], [SRIOV, "1", "sriov 64 B"]]
    # the study shows only the column that ran
    study = [t for t in data.tables if t.key.startswith("study_")]
    assert study and all("pmd_cores=4" not in " ".join(t.columns) + str(t.rows) for t in study)
    # a failed unit is still "not passed"; the skipped ones are not listed there again
    (nf,) = [t for t in data.tables if t.key == "failed"]
    assert nf.rows == [["broken", "64", "failed", "topology set-up failed: boom"]]
    # and the notes do not repeat the skips
    assert not any("skipped" in n for n in data.notes)


def test_every_renderer_shows_the_section_once(store) -> None:
    run = store.load_run(_run(store))
    md = render_markdown(run)
    assert md.count("### Skipped here") == 1 and md.count(UNFIT.replace("|", "\\|")) == 1
    assert "(skipped)" not in md
    html = render_html(run)
    assert html.count("Skipped here") == 1 and "(skipped)" not in html
    buf = io.StringIO()
    print_report(run, stream=buf)
    out = buf.getvalue()
    assert out.count("Skipped here") == 1 and "(skipped)" not in out and "pmd[pmd_cores=4] 64/128/256 B" in out


def test_a_run_without_skips_has_no_section(store) -> None:
    rid = new_run(store)
    add_test(store, rid, "t", "throughput", 64, 1e6)
    assert not [t for t in build(store.load_run(rid)).tables if t.key == SKIPPED_KEY]


def test_sizes_are_written_as_validate_writes_them(store) -> None:
    rid = new_run(store)
    add_test(store, rid, "t", "throughput", 64, 1e6)
    for size in (512, 1024, 1518):
        _skip(store, rid, "big", size, UNFIT)
    (sk,) = [t for t in build(store.load_run(rid)).tables if t.key == SKIPPED_KEY]
    assert sk.rows == [[UNFIT, "3", "big 512/1024/1518 B"]]
