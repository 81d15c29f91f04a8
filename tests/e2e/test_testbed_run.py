"""``nfvperf run --testbed`` end to end through the real CLI on the simulated DUT (issue 10 items 1,
4, 6): the run records its testbed without secrets, holds the testbed's lock while it runs (a
second run is refused naming the holder, or waits), releases it at the end and on Ctrl-C, and
``history`` / ``compare`` filter by testbed."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from _trials import wait_for_trials

REPO = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           COLUMNS="220")

# what must never reach the store, the run dir, the logs or a report
KEY_PATH = "/srv/secret-keys/tb_e2e_ed25519"
KNOWN_HOSTS = "/srv/secret-keys/tb_e2e_known_hosts"
HOST_KEY_B64 = "AAAAC3NzaC1lZDI1NTE5AAAAIHN1cGVyLXNlY3JldC1ob3N0LWtleS1vZi10ZXN0"
SECRETS = (KEY_PATH, KNOWN_HOSTS, HOST_KEY_B64, "secret-keys")

SUITE = {"name": "tb-e2e", "topology": {"kind": "p-ovs-p"}, "profile": "quick",
         "traffic": {"frame_sizes": [64, 1518]}, "sim": {"capacity_pps": 1000000},
         "tests": [{"method": "throughput"}]}


def nfv(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "nfvperf", *args], capture_output=True, text=True, cwd=REPO,
                       env=ENV, timeout=timeout)
    if check:
        assert p.returncode == 0, f"{args}: rc={p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


def _testbed(tmp: Path, name: str, remote: bool = True) -> Path:
    dut: dict = {"role": "dut", "nics": [{"name": "p0", "pci": "0000:05:00.0", "numa": 0, "speed": "10G"},
                                         {"name": "p1", "pci": "0000:05:00.1", "numa": 0, "speed": "10G"}],
                 "cpu": {"isolated": "2-15", "housekeeping": "0-1"}}
    if remote:
        dut["ssh"] = {"address": "192.0.2.11", "user": "bench", "key": KEY_PATH,
                      "host_key": f"ssh-ed25519 {HOST_KEY_B64}", "known_hosts": KNOWN_HOSTS}
    else:
        dut["local"] = True
    data = {"name": name, "hosts": {
        "tester1": {"role": "tester", "local": True,
                    "nics": [{"name": "p0", "pci": "0000:3b:00.0", "speed": "10G"},
                             {"name": "p1", "pci": "0000:3b:00.1", "speed": "10G"}]},
        "dut1": dut},
        "links": [{"tester": "tester1.p0", "dut": "dut1.p0"}, {"tester": "tester1.p1", "dut": "dut1.p1"}]}
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


@pytest.fixture(scope="module")
def tb_runs(tmp_path_factory):
    """Three sim runs in one store: two on testbed lab-e2e (SSH host with secrets), one local."""
    tmp = tmp_path_factory.mktemp("tb")
    suite = tmp / "suite.yaml"
    suite.write_text(yaml.safe_dump(SUITE))
    db = str(tmp / "results.db")
    tb = _testbed(tmp, "lab-e2e")
    common = ("--tg", "sim", "--db", db, "--out", str(tmp / "out"), "--no-progress")
    runs = [nfv("run", str(suite), *common, "--testbed", str(tb)),
            nfv("run", str(suite), *common),
            nfv("run", str(suite), *common, "--testbed", str(tb))]
    return tmp, db, tb, runs


def test_testbed_run_records_testbed_without_secrets(tb_runs) -> None:
    tmp, db, _tb, runs = tb_runs
    con = sqlite3.connect(db)
    rows = con.execute("select id, testbed, status, environment from runs order by id").fetchall()
    assert [(r[1], r[2]) for r in rows] == [("lab-e2e", "completed"), (None, "completed"),
                                             ("lab-e2e", "completed")]
    env = json.loads(rows[0][3])
    hosts = env["testbed"]["hosts"]
    assert hosts["dut1"]["ssh"] == {"address": "192.0.2.11", "port": 22, "user": "bench"}
    assert hosts["dut1"]["role"] == "dut" and hosts["tester1"]["local"] is True
    assert [n["pci"] for n in hosts["dut1"]["nics"]] == ["0000:05:00.0", "0000:05:00.1"]
    assert env["testbed"]["links"][0] == {"tester": "tester1.p0", "dut": "dut1.p0"}
    assert env["testbed_lock"]["testbed"] == "lab-e2e" and env["testbed_lock"]["took_over"] is None
    assert "testbed" not in json.loads(rows[1][3])
    assert "testbed lab-e2e: locked for run" in runs[0].stderr
    # no secret anywhere: the store's bytes, the run dirs, the CLI's output, export, report, HTML
    blobs = {"store": Path(db).read_bytes().decode("latin-1")}
    for f in (tmp / "out").rglob("*"):
        if f.is_file():
            blobs[str(f)] = f.read_bytes().decode("latin-1")
    for i, r in enumerate(runs):
        blobs[f"run {i} output"] = r.stdout + r.stderr
    blobs["export"] = nfv("export", "1", "--db", db).stdout
    blobs["csv"] = nfv("export", "1", "--format", "csv", "--db", db).stdout
    blobs["report"] = nfv("report", "1", "--db", db, "--html", str(tmp / "r.html")).stdout
    blobs["html"] = (tmp / "r.html").read_text()
    for where, text in blobs.items():
        for secret in SECRETS:
            assert secret not in text, f"{secret!r} leaked into {where}"
    assert "lab-e2e" in blobs["export"] and "192.0.2.11" in blobs["export"]


def test_testbed_run_releases_its_lock(tb_runs) -> None:
    _tmp, db, _tb, _runs = tb_runs
    assert sqlite3.connect(db).execute("select count(*) from testbed_locks").fetchone()[0] == 0


def test_testbed_history_and_compare_filter(tb_runs) -> None:
    _tmp, db, _tb, _runs = tb_runs
    h = json.loads(nfv("history", "--db", db, "--json", "--testbed", "lab-e2e").stdout)
    assert [(r["id"], r["testbed"]) for r in h] == [(3, "lab-e2e"), (1, "lab-e2e")]
    table = nfv("history", "--db", db).stdout
    assert "Testbed" in table and "lab-e2e" in table and "(local)" in table
    assert "on testbed nowhere" in nfv("history", "--db", db, "--testbed", "nowhere").stdout
    # without run references: the testbed's previous run against its newest (1 vs 3, not 2 vs 3)
    c = nfv("compare", "--db", db, "--testbed", "lab-e2e")
    assert "nfv" in c.stdout
    a_uid, b_uid = (sqlite3.connect(db).execute("select uid from runs where id=?", (i,)).fetchone()[0]
                    for i in (1, 3))
    assert a_uid in c.stdout and b_uid in c.stdout
    bad = nfv("compare", "2", "3", "--db", db, "--testbed", "lab-e2e", check=False)
    assert bad.returncode == 2 and "ran on the local host, not on testbed lab-e2e" in bad.stderr


def test_testbed_invalid_file_is_refused_naming_the_field(tmp_path) -> None:
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump(SUITE))
    tb = _testbed(tmp_path, "lab-bad")
    data = yaml.safe_load(tb.read_text())
    del data["hosts"]["dut1"]["ssh"]["host_key"]
    del data["hosts"]["dut1"]["ssh"]["known_hosts"]
    tb.write_text(yaml.safe_dump(data))
    db = tmp_path / "r.db"
    p = nfv("run", str(suite), "--tg", "sim", "--db", str(db), "--testbed", str(tb), check=False)
    assert p.returncode == 2
    assert "the testbed is not valid" in p.stderr and "hosts.dut1.ssh" in p.stderr and "host_key" in p.stderr
    data = yaml.safe_load(_testbed(tmp_path, "lab-bad").read_text())
    data["links"][0]["dut"] = "dut1.p9"
    tb.write_text(yaml.safe_dump(data))
    p = nfv("run", str(suite), "--tg", "sim", "--db", str(db), "--testbed", str(tb), check=False)
    assert p.returncode == 2 and "links.0.dut" in p.stderr and "no nic 'p9'" in p.stderr, p.stderr
    assert not db.exists() or sqlite3.connect(db).execute("select count(*) from runs").fetchone()[0] == 0
    p = nfv("run", str(suite), "--tg", "sim", "--db", str(db), "--testbed", str(tmp_path / "nope.yaml"),
            check=False)
    assert p.returncode == 2 and "nope.yaml" in p.stderr


def test_testbed_locked_refused_then_waits(tmp_path) -> None:
    """A live holder (this test process) has the testbed: a run is refused naming it and writes
    nothing; with --wait-lock it waits, says for whom, and runs once the holder releases."""
    from nfvperf.store import Store
    from nfvperf.store.lock import acquire
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump(SUITE))
    tb = _testbed(tmp_path, "lab-busy", remote=False)
    db = tmp_path / "r.db"
    store = Store(str(db))
    lock = acquire(store, "lab-busy", "c0ffee")
    try:
        run_args = ("run", str(suite), "--tg", "sim", "--db", str(db), "--testbed", str(tb), "--no-progress")
        p = nfv(*run_args, check=False)
        assert p.returncode == 2, p.stderr
        assert "testbed 'lab-busy' is locked by run nfvc0ffee" in p.stderr
        assert f"pid {os.getpid()}" in p.stderr and "nothing was run" in p.stderr
        assert store.list_runs() == []
        w = subprocess.Popen([sys.executable, "-m", "nfvperf", *run_args, "--wait-lock", "120"], cwd=REPO,
                             env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert w.stderr is not None
            first = w.stderr.readline()          # the waiter says whom it waits for ...
            assert "locked by run nfvc0ffee" in first and "waiting" in first, first
            time.sleep(1.5)
            assert w.poll() is None and store.list_runs() == []     # ... and waits
            lock.release()
            out, err = w.communicate(timeout=120)
        finally:
            if w.poll() is None:
                w.kill()
        assert w.returncode == 0, err
        assert "testbed lab-busy: locked for run" in err and "after waiting" in err
        assert [r.testbed for r in store.list_runs()] == ["lab-busy"]
    finally:
        lock.release()
        store.close()


def test_testbed_lock_released_on_ctrl_c(tmp_path) -> None:
    suite = tmp_path / "slow.yaml"
    suite.write_text(yaml.safe_dump(dict(SUITE, sim={"capacity_pps": 1000000, "pace_s": 0.15},
                                         traffic={"frame_sizes": [64, 128, 256, 512, 1024, 1518]})))
    tb = _testbed(tmp_path, "lab-int", remote=False)
    db = tmp_path / "r.db"
    p = subprocess.Popen([sys.executable, "-m", "nfvperf", "run", str(suite), "--tg", "sim", "--db", str(db),
                          "--testbed", str(tb), "--out", str(tmp_path / "out"), "--no-progress"], cwd=REPO,
                         env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        n = wait_for_trials(db, 3)
        assert n >= 3, "the run did not get going"
        con = sqlite3.connect(db)
        assert con.execute("select testbed from testbed_locks").fetchall() == [("lab-int",)]
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, (out, err)
    con = sqlite3.connect(db)
    assert con.execute("select status, testbed from runs").fetchone() == ("interrupted", "lab-int")
    assert con.execute("select count(*) from testbed_locks").fetchone()[0] == 0
