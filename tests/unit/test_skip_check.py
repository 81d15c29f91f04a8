"""`make test` fails on a skip nobody expected (tests/skipcheck.py, tests/expected_skips.txt)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import skipcheck

REPO = Path(__file__).resolve().parents[2]
LIST = REPO / "tests" / "expected_skips.txt"


def test_every_listed_skip_names_a_test_that_exists() -> None:
    entries = skipcheck.load_expected(LIST)
    assert entries
    for e in entries:
        path, _, name = e.pattern.partition("::")
        src = re.sub(r"[\"']\s*\n\s*f?[\"']", "", (REPO / path).read_text())   # strings split over lines joined
        assert re.search(rf"^def {re.escape(name.split('[')[0])}\(", src, re.M), e
        assert e.reason in src, f"{e}: no skip in {path} gives this reason"


def test_every_pass_of_make_test_writes_a_report_and_the_check_reads_them_all() -> None:
    recipe = (REPO / "Makefile").read_text().split("\ntest-py:", 1)[1].split("\n\n", 1)[0]
    commands = recipe.replace("\\\n", " ").splitlines()
    passes = [c for c in commands if "-m pytest" in c]
    assert len(passes) == 3, passes
    reports = [re.search(r"NFVPERF_SKIP_REPORT=(\S+)", c).group(1) for c in passes]  # type: ignore[union-attr]
    assert len(set(reports)) == 3, reports
    (check,) = [c for c in commands if "tests/skipcheck.py" in c]
    assert commands.index(check) == len(commands) - 1 and "tests/expected_skips.txt" in check
    assert all(r in check.split() for r in reports), (reports, check)
    serial = [c for c in passes if '-m "not no_polling"' in c]
    assert len(serial) == 1 and "NFVPERF_LEAK_STRICT=$(LEAK_STRICT)" in serial[0]


def _run_pass(tmp_path: Path, reason: str) -> Path:
    """One pytest pass as `make test` runs them (xdist on 2 workers), over a test that skips."""
    (tmp_path / "test_planted.py").write_text(
        "import pytest\n\ndef test_fine():\n    pass\n\n"
        f"def test_planted():\n    pytest.skip({reason!r})\n\n"
        "@pytest.mark.xfail(strict=True)\ndef test_expected_failure():\n    assert False\n")
    report = tmp_path / "pass.jsonl"
    env = {**os.environ, skipcheck.REPORT_ENV: str(report),
           "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "skipcheck", "-p", "no:cacheprovider",
                        "-n", "2", "test_planted.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and "1 skipped" in p.stdout, p.stdout + p.stderr
    return report


def test_a_skip_for_a_reason_not_on_the_list_fails_the_check(tmp_path: Path, capsys) -> None:
    report = _run_pass(tmp_path, "the cluster did not start")
    skips = skipcheck.load_skips(report)
    assert skips == [{"nodeid": "test_planted.py::test_planted", "reason": "the cluster did not start"}]
    listed = tmp_path / "expected.txt"
    listed.write_text(LIST.read_text())
    assert skipcheck.main([str(listed), str(report)]) == 1
    assert "test_planted.py::test_planted: the cluster did not start" in capsys.readouterr().err
    # listed with another reason: still unexpected
    listed.write_text("# a comment\ntest_planted.py::test_planted | no hardware\n")
    assert skipcheck.main([str(listed), str(report)]) == 1
    # listed with its reason (or a part of it, and a pattern): expected
    listed.write_text("test_planted.py::test_plan* | did not start\n")
    assert skipcheck.main([str(listed), str(report)]) == 0
    # a pass that wrote no report fails the check, so a pass cannot drop out unseen
    assert skipcheck.main([str(listed), str(report), str(tmp_path / "missing.jsonl")]) == 1


def test_a_pass_without_skips_writes_an_empty_report(tmp_path: Path) -> None:
    report = tmp_path / "r.jsonl"
    report.write_text(json.dumps({"nodeid": "stale", "reason": "from before"}) + "\n")
    (tmp_path / "test_quiet.py").write_text("def test_fine():\n    pass\n")
    env = {**os.environ, skipcheck.REPORT_ENV: str(report),
           "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "skipcheck", "-p", "no:cacheprovider",
                        "test_quiet.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert report.read_text() == ""


def test_a_malformed_line_names_its_place(tmp_path: Path) -> None:
    bad = tmp_path / "expected.txt"
    bad.write_text("tests/x.py::test_y without a reason\n")
    try:
        skipcheck.load_expected(bad)
    except ValueError as e:
        assert "expected.txt:1" in str(e) and "<reason text>" in str(e)
    else:
        raise AssertionError("a line without ' | ' was accepted")
