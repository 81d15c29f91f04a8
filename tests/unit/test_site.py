"""The static results site (``nfvperf site DIR``, issue 17 item 4): its pages, its incremental
rebuild (a new run writes the index, its own pages and the affected trend pages, nothing else),
running/aborted runs, removed runs, partial builds, and the CLI's errors.

The store is written row by row (tests/unit/_study_runs.py, as the runner writes it); the trend
comes from :func:`step_trend`, a stand-in for ``nfvperf.trend.trend_json`` with the same JSON
shape (series of 64 B throughput per suite, a group per level, a change where the level moves),
so these tests do not depend on the change-point detection.  tests/e2e/test_site_browser.py
builds the site from real sim runs with the real trend and opens it in Chromium.
"""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import pytest
from sqlalchemy import delete, select

from _study_runs import add_test, cores_flows_study, new_run
from nfvperf.cli import main as cli_main
from nfvperf.site import build_site
from nfvperf.site.catalog import run_rows
from nfvperf.site.trends import series_file
from nfvperf.store import Store
from nfvperf.store.models import Result, Run, Test
from nfvperf.trial import TrialResult


def step_trend(store: Store, selector: Any = None) -> dict[str, Any]:
    """trend_json's shape from the stored 64 B throughput of every completed run, one series per
    suite; a new group where the value moves by more than 5 %, labelled by its direction."""
    with store.session() as s:
        q = (select(Run.suite, Run.id, Run.started_at, Result.value_pps).join(Test, Test.run_id == Run.id)
             .join(Result, Result.test_id == Test.id)
             .where(Run.status == "completed", Test.method == "throughput", Test.frame_size_b == 64,
                    Test.study.is_(None)).order_by(Run.id))
        rows = s.execute(q).all()
    by_suite: dict[str, list[dict[str, Any]]] = {}
    for suite, rid, at, v in rows:
        by_suite.setdefault(suite, []).append({"run": rid, "time": at.isoformat(), "value": v})
    series = []
    for suite, pts in by_suite.items():
        groups: list[dict[str, Any]] = []
        changes = []
        for p in pts:
            g = groups[-1] if groups else None
            if g is not None and abs(p["value"] / g["mean"] - 1) <= 0.05:
                g["end_run"] = p["run"]
                continue
            if g is not None:
                ratio = p["value"] / g["mean"]
                changes.append({"run": p["run"], "kind": "regression" if ratio < 1 else "progression",
                                "ratio": ratio})
            groups.append({"start_run": p["run"], "end_run": p["run"], "mean": p["value"], "stdev": 0.0})
        series.append({"id": f"{suite}/throughput/64", "identity": {"suite": suite, "frame_size_b": 64,
                                                                    "metric": "fps per interface"},
                       "points": pts, "groups": groups, "changes": changes})
    if selector is not None:
        series = [s for s in series if selector in s["id"]]
    return {"series": series}


def plain_run(store: Store, suite: str, value: float, status: str = "completed",
              env: Optional[dict] = None) -> int:
    rid = new_run(store, suite=suite, env=env)
    add_test(store, rid, "throughput", "throughput", 64, value)
    if status != "completed":
        store.update_run(rid, status=status, finished_at=None)
    return rid


@pytest.fixture
def store(tmp_path):
    s = Store(str(tmp_path / "r.db"))
    yield s
    s.close()


def build(store: Store, out: Path, **kw: Any) -> dict[str, Any]:
    return build_site(store, out, trend=kw.pop("trend", step_trend), **kw).to_dict()


def mtimes(out: Path) -> dict[str, int]:
    return {str(p.relative_to(out)): p.stat().st_mtime_ns for p in out.rglob("*.html")}


def test_pages_of_a_store(store, tmp_path) -> None:
    a1 = plain_run(store, "alpha", 1.0e6)
    a2 = plain_run(store, "alpha", 0.8e6)
    st = new_run(store, suite="grid")
    cores_flows_study(store, st)
    out = tmp_path / "site"
    rep = build(store, out)
    assert set(rep["written"]) == {
        "assets/site.css", "assets/site.js", "index.html", f"runs/{a1}.html", f"runs/{a2}.html",
        f"runs/{st}.html", f"studies/{st}.html", f"compare/{a1}-{a2}.html", "trends/index.html",
        "trends/" + series_file("alpha/throughput/64")}
    index = (out / "index.html").read_text()
    for rid in (a1, a2, st):
        assert f'href="runs/{rid}.html"' in index
    assert f'href="compare/{a1}-{a2}.html"' in index and f'href="studies/{st}.html"' in index
    assert 'data-suite="alpha"' in index and "<option>grid</option>" in index
    report = (out / "runs" / f"{a2}.html").read_text()
    assert "nfvperf report — run" in report                         # the HTML report itself
    assert f'href="../compare/{a1}-{a2}.html"' in report and 'href="../index.html"' in report
    study = (out / "studies" / f"{st}.html").read_text()
    assert "study grid" in study and "against the baseline pmd_cores=1, flows=1" in study and "0.75×" in study
    assert study.count("<svg") == 2                                # the pivot and Mpps per PMD core
    cmp = (out / "compare" / f"{a1}-{a2}.html").read_text()
    assert "0.80×" in cmp and "CHANGED ▼" in cmp
    trend = (out / "trends" / series_file("alpha/throughput/64")).read_text()
    assert f'id="change-regression-{a2}"' in trend                  # the change drawn on the plot
    assert "-20.0 %" in trend and f'href="../runs/{a2}.html"' in trend


def test_a_new_run_writes_the_index_its_pages_and_the_affected_trend(store, tmp_path) -> None:
    a1 = plain_run(store, "alpha", 1.0e6)
    plain_run(store, "beta", 2.0e6)
    a2 = plain_run(store, "alpha", 1.0e6)
    plain_run(store, "beta", 2.0e6)
    out = tmp_path / "site"
    build(store, out)
    before = mtimes(out)
    again = build(store, out)
    assert again["written"] == [] and again["unchanged"] == len(before) + 2     # + the two assets
    assert mtimes(out) == before
    a3 = plain_run(store, "alpha", 0.7e6)
    rep = build(store, out)
    alpha, beta = "trends/" + series_file("alpha/throughput/64"), "trends/" + series_file("beta/throughput/64")
    assert set(rep["written"]) == {"index.html", f"runs/{a3}.html", f"compare/{a2}-{a3}.html",
                                   "trends/index.html", alpha}
    after = mtimes(out)
    changed = {k for k in after if after[k] != before.get(k)}
    assert changed == set(rep["written"])
    assert beta in after and after[beta] == before[beta]
    assert after[f"runs/{a1}.html"] == before[f"runs/{a1}.html"]
    manifest = json.loads((tmp_path / "site" / "manifest.json").read_text())
    assert manifest["last_build"]["written"] == sorted(rep["written"])
    assert manifest["last_build"]["unchanged"] == rep["unchanged"] == len(after) + 2 - len(rep["written"])


def test_a_deleted_page_is_written_again(store, tmp_path) -> None:
    rid = plain_run(store, "alpha", 1.0e6)
    out = tmp_path / "site"
    build(store, out)
    (out / "runs" / f"{rid}.html").unlink()
    assert build(store, out)["written"] == [f"runs/{rid}.html"]


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_running_and_aborted_runs_are_shown_as_such(store, tmp_path) -> None:
    live = plain_run(store, "alpha", 1.0e6, status="running",
                     env={"pid": os.getpid(), "hostname": socket.gethostname()})
    dead = plain_run(store, "alpha", 1.0e6, status="running",
                     env={"pid": _dead_pid(), "hostname": socket.gethostname()})
    gone = plain_run(store, "alpha", 1.0e6, status="aborted")
    out = tmp_path / "site"
    build(store, out)
    index = (out / "index.html").read_text()

    def status_cell(rid: int) -> str:
        m = re.search(rf'id="run-{rid}">.*?<td class="status status-(\w+)"[^>]*>([^<]*)</td>', index, re.S)
        assert m, f"run {rid} is not in the index"
        return f"{m.group(1)}: {m.group(2)}"

    assert status_cell(live) == "running: running"
    assert status_cell(dead) == "running: running (killed?)"
    assert status_cell(gone) == "aborted: aborted"
    page = (out / "runs" / f"{dead}.html").read_text()
    assert "this run is running (killed?)" in page and "is gone" in page
    assert "this run is aborted" in (out / "runs" / f"{gone}.html").read_text()
    # a running run's pages follow its trials: one more trial, its pages are written again
    with store.session() as s:
        test_id = s.scalar(select(Test.id).where(Test.run_id == live))
    store.add_trial(test_id, TrialResult(duration_s=1.0, load_pps=1e5, sent=10, received=10, expected=10))
    rep = build(store, out)
    assert f"runs/{live}.html" in rep["written"] and f"runs/{gone}.html" not in rep["written"]


def test_a_run_removed_from_the_store_loses_its_pages(store, tmp_path) -> None:
    a1 = plain_run(store, "alpha", 1.0e6)
    a2 = plain_run(store, "alpha", 1.0e6)
    out = tmp_path / "site"
    build(store, out)
    with store.session() as s:
        s.execute(delete(Run).where(Run.id == a2))
        s.commit()
    rep = build(store, out)
    assert set(rep["removed"]) == {f"runs/{a2}.html", f"compare/{a1}-{a2}.html"}
    assert not (out / "runs" / f"{a2}.html").exists() and (out / "runs" / f"{a1}.html").exists()
    assert f"runs/{a2}.html" not in (out / "index.html").read_text()


def test_only_some_parts(store, tmp_path) -> None:
    a1 = plain_run(store, "alpha", 1.0e6)
    out = tmp_path / "site"
    build(store, out)
    a2 = plain_run(store, "alpha", 1.0e6)
    rep = build(store, out, parts=["index"])
    assert rep["written"] == ["index.html"] and rep["removed"] == []
    assert (out / "runs" / f"{a1}.html").exists() and not (out / "runs" / f"{a2}.html").exists()
    with pytest.raises(ValueError, match="site parts: unknown reports; choose from index"):
        build(store, out, parts=["reports"])


def test_a_failing_trend_leaves_a_note_and_the_rest_of_the_site(store, tmp_path) -> None:
    plain_run(store, "alpha", 1.0e6)

    def broken(_store: Any) -> dict:
        raise RuntimeError("no series table")

    rep = build(store, tmp_path / "site", trend=broken)
    assert rep["notes"] == ["No trend pages: computing the trend failed: RuntimeError: no series table"]
    assert "index.html" in rep["written"] and "trends/index.html" in rep["written"]
    assert "no series table" in (tmp_path / "site" / "trends" / "index.html").read_text()


def test_series_file_names() -> None:
    assert series_file("abc-1.2_x") == "abc-1.2_x.html"
    odd = series_file("p-ovs-p/64 B?../..")
    assert re.fullmatch(r"p-ovs-p_64_B-[0-9a-f]{10}\.html", odd)
    assert series_file("a/b") != series_file("a?b")          # cleaned alike, told apart by the hash


def test_run_rows_on_sqlite_and_postgresql(any_store) -> None:
    """The catalog's SQL (host from the environment JSON, study names) on both back ends."""
    a = plain_run(any_store, "alpha", 1.0e6, env={"hostname": "h1"})
    st = new_run(any_store, suite="grid", env={"hostname": "h2"})
    cores_flows_study(any_store, st)
    b = plain_run(any_store, "alpha", 1.0e6, env={"hostname": "h1"})
    rows = {r.id: r for r in run_rows(any_store)}
    assert rows[a].host == "h1" and rows[a].where == "h1" and rows[st].studies == ["grid"]
    assert rows[b].previous == a and rows[st].previous is None and rows[a].previous is None


def test_cli_site(store, tmp_path, capsys) -> None:
    plain_run(store, "alpha", 1.0e6)
    db = store.url
    out = tmp_path / "site"
    assert cli_main(["site", str(out), "--db", db]) == 0
    text = capsys.readouterr().out
    assert re.search(r"site .*site: \d+ page\(s\) written, 0 unchanged, 0 removed in [\d.]+ s; open .*index.html",
                     text)
    assert cli_main(["site", str(out), "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["written"] == []
    (tmp_path / "afile").write_text("x")
    assert cli_main(["site", str(tmp_path / "afile"), "--db", db]) == 2
    assert "site DIR:" in capsys.readouterr().err
    assert cli_main(["site", str(out), "--db", str(tmp_path / "none.db")]) == 2
    assert "no results store at" in capsys.readouterr().err
