"""A study end to end through the real CLI on the simulated DUT: `nfvperf validate` prints the
study's axes and units, `nfvperf run --tg sim --quick` labels the progress with the unit names
and stores one test row per unit with ``tests.study`` filled (the baseline marked), and
``--port-kind`` lets a suite written for NICs run on emulated ports."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           COLUMNS="200")

SUITE = {
    "name": "e2e-study",
    "topology": {"kind": "p-ovs-p", "port_kind": "pci",     # [tg0, dut0, tg1, dut1]
                 "pci": ["0000:01:00.0", "0000:01:00.1", "0000:02:00.0", "0000:02:00.1"]},
    "traffic": {"frame_sizes": [64, 512]},
    "profile": "quick",
    "tests": [
        {"method": "throughput", "name": "grid",
         "study": {"axes": {"flows": [1, 1000], "rxq": [1, 2]}, "baseline": {"flows": 1, "rxq": 1}}},
        {"method": "throughput", "name": "plain", "frame_sizes": [64]},
    ],
}


def nfv(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nfvperf", *args], capture_output=True, text=True, cwd=REPO,
                          env=ENV, timeout=300)


def test_study_runs_on_sim_and_stores_one_row_per_unit(tmp_path) -> None:
    suite = tmp_path / "study.yaml"
    suite.write_text(yaml.safe_dump(SUITE, sort_keys=False))
    v = nfv("validate", str(suite), "--port-kind", "af_packet")
    assert v.returncode == 0, v.stdout + v.stderr
    assert "on port_kind af_packet" in v.stdout
    assert "study grid: 4 unit(s); axes flows: 1, 1000; rxq: 1, 2; baseline flows=1, rxq=1" in v.stdout

    db = tmp_path / "r.db"
    r = nfv("run", str(suite), "--tg", "sim", "--quick", "--port-kind", "af_packet", "--db", str(db),
            "--out", str(tmp_path / "out"), "--no-progress")
    assert r.returncode == 0, r.stdout + r.stderr
    log = r.stdout + r.stderr
    # rxq is a topology axis: 2 topologies for the study (each built once), then the plain test
    # on the suite topology again
    assert "9 test unit(s) on 3 topologies" in log, log[:1500]
    assert "grid[flows=1000,rxq=2] 512 B:" in log
    con = sqlite3.connect(db)
    rows = con.execute("select name, frame_size_b, status, study, topology, traffic from tests order by id").fetchall()
    assert len(rows) == 9
    study_rows = [row for row in rows if row[3] and json.loads(row[3])]
    assert len(study_rows) == 8 and all(row[2] == "passed" for row in rows)
    seen = {}
    for name, size, _, study, topology, traffic in study_rows:
        st = json.loads(study)
        assert st["name"] == "grid" and name == f"grid[flows={st['axes']['flows']},rxq={st['axes']['rxq']}]"
        assert st["baseline"] is (st["axes"] == {"flows": 1, "rxq": 1})
        assert json.loads(traffic)["flows_per_port"] == st["axes"]["flows"]
        over = json.loads(topology)["overrides"]
        assert over == ({} if st["axes"]["rxq"] == 1 else {"ovs": {"n_rxq": 2}}), over
        seen[(st["axes"]["flows"], st["axes"]["rxq"], size)] = True
    assert len(seen) == 8
    plain = [row for row in rows if row[0] == "plain"]
    assert len(plain) == 1 and plain[0][3] is None      # SQL NULL: not a unit of a study
    # every unit has a stored result
    n = con.execute("select count(*) from results r join tests t on t.id = r.test_id "
                    "where t.study is not null and r.kind = 'throughput'").fetchone()[0]
    assert n == 8

    # without the override the suite needs its NICs (preflight), so validate says where it runs
    v = nfv("validate", str(suite))
    assert v.returncode == 0 and "on port_kind" not in v.stdout
    bad = nfv("validate", str(suite), "--port-kind", "vhost-nope")
    assert bad.returncode == 2 and "--port-kind vhost-nope" in bad.stderr
