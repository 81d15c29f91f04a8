"""CLI: bad input -> named error, exit 2, nothing written; calc; help; export/import."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nfvperf.cli import main

REPO = Path(__file__).resolve().parents[2]


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "suite.yaml"
    p.write_text(text)
    return p


GOOD = """name: cli
topology: {kind: p-ovs-p}
traffic: {frame_sizes: [64]}
profile: quick
sim: {capacity_pps: 2000000}
tests:
  - {method: throughput, resolution_pct: 1}
"""


@pytest.mark.parametrize("text,expect", [
    ("name: x\ntests: [\n  - {method: a", "(yaml) line 3, column 3"),
    (GOOD.replace("profile: quick", "profile: quick\nfrobnicate: 1"), "frobnicate: unknown field"),
    (GOOD.replace("resolution_pct: 1", "resolution_pct: 1, loss_ratio: 3"),
     "tests[0].loss_ratio: got 3; input should be less than 1"),
    (GOOD.replace("kind: p-ovs-p", "kind: p-ovs-p, ports: 1"),
     "topology.ports: got 1; input should be greater than or equal to 2"),
    (GOOD.replace("frame_sizes: [64]", "frame_sizes: [64, 99999]"), "traffic.frame_sizes: frame sizes [99999]"),
])
def test_bad_suite_exit_2_nothing_written(tmp_path, capsys, text, expect) -> None:
    suite = _write(tmp_path, text)
    db = tmp_path / "store" / "r.db"
    out = tmp_path / "out"
    rc = main(["run", str(suite), "--tg", "sim", "--db", str(db), "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2
    assert "the suite is not valid" in err and "nothing was run" in err
    assert expect in err
    assert not db.exists() and not db.parent.exists() and not out.exists()


def test_run_missing_file(tmp_path, capsys) -> None:
    assert main(["run", str(tmp_path / "nope.yaml"), "--tg", "sim", "--db", str(tmp_path / "r.db")]) == 2
    assert "file not found" in capsys.readouterr().err


def test_unknown_run_and_missing_store(tmp_path, capsys) -> None:
    assert main(["report", "latest", "--db", str(tmp_path / "none.db")]) == 2
    assert "no results store" in capsys.readouterr().err
    suite = _write(tmp_path, GOOD)
    db = str(tmp_path / "r.db")
    assert main(["run", str(suite), "--tg", "sim", "--db", db, "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["report", "nfv000000", "--db", db]) == 2
    assert "no run 'nfv000000'" in capsys.readouterr().err


def test_run_export_import(tmp_path, capsys) -> None:
    suite = _write(tmp_path, GOOD)
    db = str(tmp_path / "r.db")
    assert main(["run", str(suite), "--tg", "sim", "--db", db, "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    capsys.readouterr()
    j, c = tmp_path / "run.json", tmp_path / "run.csv"
    assert main(["export", "latest", "--format", "json", "-o", str(j), "--db", db]) == 0
    assert main(["export", "1", "--format", "csv", "-o", str(c), "--db", db]) == 0
    data = json.loads(j.read_text())
    ntrials = sum(len(t["trials"]) for t in data["tests"])
    assert ntrials >= 3 and len(c.read_text().strip().splitlines()) == ntrials + 1
    db2 = str(tmp_path / "r2.db")
    assert main(["import", str(j), "--db", db2]) == 0
    capsys.readouterr()
    assert main(["export", "latest", "--format", "json", "--db", db2]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["tests"][0]["trials"] == data["tests"][0]["trials"]
    assert again["run"]["uid"] == data["run"]["uid"]
    assert main(["import", str(suite), "--db", db2]) == 2


def test_calc(capsys) -> None:
    assert main(["calc", "rate", "--speed", "10G", "--size", "64", "--size", "1518", "--pct", "33.6"]) == 0
    out = capsys.readouterr().out
    assert "14,880,952.38" in out and "812,743.82" in out and "L1" in out and "L2" in out
    assert main(["calc", "rate", "--size", "64", "--vxlan"]) == 0
    assert "9,328,358.21" in capsys.readouterr().out          # TV3: inner 64 B -> 114 B outer
    assert main(["calc", "rate", "--size", "64", "--fps", "5000000"]) == 0
    out = capsys.readouterr().out
    assert "33.60" in out and "3,360.0" in out and "2,560.0" in out   # TV2
    assert main(["calc", "socket-mem", "--socket", "4x9000", "--socket", "-"]) == 0
    assert "dpdk-socket-mem=11264,1024" in capsys.readouterr().out
    assert main(["calc", "pmd-mask", "2,20"]) == 0
    assert "pmd-cpu-mask=100004" in capsys.readouterr().out
    assert main(["calc", "buffer", "--frames", "100000", "--throughput", "8000000"]) == 0
    assert "corrected 3.107 ms" in capsys.readouterr().out    # TV9
    assert main(["calc", "rate", "--speed", "fast"]) == 2


def test_help_for_every_command() -> None:
    cmds = ["run", "validate", "demo", "report", "compare", "history", "export", "import", "calc", "preflight",
            "cleanup"]
    for c in cmds:
        assert main([c, "--help"]) == 0
    assert main(["--help"]) == 0
    assert main(["frobnicate"]) == 2


def test_python_m_entry_point() -> None:
    p = subprocess.run([sys.executable, "-m", "nfvperf", "--version"], capture_output=True, text=True,
                       cwd=REPO, timeout=60)
    assert p.returncode == 0 and p.stdout.startswith("nfvperf ")


def test_demo_tgen_without_root_says_what_to_do(monkeypatch, capsys) -> None:
    import os
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert main(["demo", "--tg", "tgen"]) == 2
    err = capsys.readouterr().err
    assert "needs root" in err and "--tg sim" in err


def test_closed_output_does_not_fail_the_run(tmp_path, monkeypatch, capsys) -> None:
    """`nfvperf run ... | head`: a broken pipe on the log stream must not fail tests."""
    class Broken:
        def write(self, _s):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

        def isatty(self):
            return False

    suite = _write(tmp_path, GOOD)
    db = str(tmp_path / "r.db")
    monkeypatch.setattr(sys, "stderr", Broken())
    rc = main(["run", str(suite), "--tg", "sim", "--db", db, "--out", str(tmp_path / "o"), "--no-progress"])
    monkeypatch.undo()
    assert rc == 0
    from nfvperf.store import Store
    s = Store(db)
    try:
        run = s.load_run("latest")
        assert run.status == "completed" and all(t.status == "passed" for t in run.tests)
    finally:
        s.close()


def test_delegated_commands_take_their_own_options(capsys) -> None:
    # `cleanup --tag X` used to be refused by argparse (REMAINDER does not take leading options).
    assert main(["cleanup", "--tag", "nfv000000", "--dry-run"]) == 0
    assert main(["preflight", "--no-such-option"]) == 2
    assert "unrecognized arguments: --no-such-option" in capsys.readouterr().err
    assert main(["image", "--help"]) == 0
    assert "nfvperf image" in capsys.readouterr().out
