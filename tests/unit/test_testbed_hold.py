"""What a run does with its testbed (nfvperf.testbed.hold) and the store's testbed filters."""
from __future__ import annotations

import pytest

from nfvperf.store import Store
from nfvperf.store.db import RunNotFound
from nfvperf.testbed.hold import remote_hosts_problem
from nfvperf.testbed.spec import validate_testbed

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGV4YW1wbGU"


def _spec(dut_local: bool):
    dut = {"role": "dut", "nics": [{"name": "p0", "iface": "veth1"}]}
    dut.update({"local": True} if dut_local else {"ssh": {"address": "192.0.2.2", "host_key": HOST_KEY}})
    return validate_testbed({"name": "lab1", "hosts": {
        "t": {"role": "tester", "nics": [{"name": "p0", "iface": "veth0"}]}, "d": dut},
        "links": [{"tester": "t.p0", "dut": "d.p0"}]})


def test_testbed_remote_hosts_problem() -> None:
    assert remote_hosts_problem(_spec(True), "iperf3") is None
    assert remote_hosts_problem(_spec(False), "sim") is None           # the sim touches no host
    assert remote_hosts_problem(_spec(False), "tgen") is None          # tester/DUT hosts over SSH
    msg = remote_hosts_problem(_spec(False), "iperf3")
    assert msg and "host(s) d are reached over SSH" in msg and "use --tg tgen" in msg


def test_testbed_filters_history_and_run_references(tmp_path) -> None:
    s = Store("sqlite:///" + str(tmp_path / "r.db"))
    ids = []
    for tb in ("lab1", None, "lab1", "lab2"):
        ids.append(s.create_run(suite="s", suite_path=None, topology="p-ovs-p", dut="ovs-dpdk", tg="sim",
                                profile="quick", config={}, testbed=tb).id)
    assert [r.id for r in s.list_runs(testbed="lab1")] == [ids[2], ids[0]]
    assert [r.id for r in s.list_runs()] == ids[::-1]
    assert s.resolve("latest", testbed="lab1") == ids[2] and s.resolve("-2", testbed="lab1") == ids[0]
    assert s.resolve("latest") == ids[3]
    with pytest.raises(RunNotFound, match="the store holds 2 run"):
        s.resolve("-3", testbed="lab1")
    with pytest.raises(RunNotFound, match="ran on the local host, not on testbed lab1"):
        s.resolve(str(ids[1]), testbed="lab1")
    uid = s.load_run(ids[3]).uid
    with pytest.raises(RunNotFound, match="ran on testbed lab2, not on testbed lab1"):
        s.load_run("nfv" + uid, testbed="lab1")
    with pytest.raises(RunNotFound, match="no runs on testbed lab9"):
        s.resolve("latest", testbed="lab9")
    s.close()


def test_testbed_locks_and_unlock_commands(tmp_path, capsys) -> None:
    import datetime as dt

    from sqlalchemy import update

    from nfvperf.cli import main
    from nfvperf.store.lock import Claim, acquire, read_holder
    from nfvperf.store.models import TestbedLock
    db = str(tmp_path / "r.db")
    s = Store("sqlite:///" + db)
    assert main(["testbed", "locks", "--db", db]) == 0
    assert "no testbed is locked" in capsys.readouterr().out
    live = acquire(s, "lab1", "aa11bb")
    far = acquire(s, "lab2", "0fe1a2", heartbeat_s=3600,
                  claim=Claim(run_uid="0fe1a2", hostname="elsewhere", pid=4242, pid_starttime=1, user=None))
    far._stop.set()
    with s.session() as se:
        se.execute(update(TestbedLock).where(TestbedLock.testbed == "lab2")
                   .values(heartbeat_at=read_holder(s, "lab2").heartbeat_at - dt.timedelta(seconds=900)))
        se.commit()
    assert main(["testbed", "locks", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "lab1: run nfvaa11bb" in out and "lab2: run nfv0fe1a2" in out and out.count("STALE") == 1
    assert main(["testbed", "unlock", "lab1", "--db", db]) == 2          # alive: refused without --force
    assert "may be alive" in capsys.readouterr().err
    assert main(["testbed", "unlock", "lab2", "--db", db]) == 0          # stale: freed
    assert "freed the lock of run nfv0fe1a2" in capsys.readouterr().out
    assert read_holder(s, "lab2") is None and read_holder(s, "lab1") is not None
    assert main(["testbed", "unlock", "lab1", "--force", "--db", db]) == 0
    assert read_holder(s, "lab1") is None
    assert live.release() is False
    assert main(["testbed", "prepare", "--help"]) == 0
    s.close()


def test_testbed_lock_released_when_the_run_fails(tmp_path) -> None:
    """A set-up failure (the measurer cannot be built) fails the run; the lock goes with it."""
    import contextlib

    import yaml

    from nfvperf.suite_load import load_suite
    from nfvperf.runner import execute
    from nfvperf.store.lock import read_holder
    suite_file = tmp_path / "s.yaml"
    suite_file.write_text(yaml.safe_dump({"name": "tb-fail", "profile": "quick",
                                          "traffic": {"frame_sizes": [64]}, "tests": [{"method": "throughput"}]}))
    seen = []

    @contextlib.contextmanager
    def broken(*_a, **_k):
        seen.append(read_holder(store, "lab1"))      # held while the run sets up
        raise RuntimeError("the DUT host caught fire")
        yield  # pragma: no cover

    store = Store("sqlite:///" + str(tmp_path / "r.db"))
    out = execute(load_suite(suite_file), store=store, tg="sim", out_dir=tmp_path / "out", show_progress=False,
                  log=lambda _m: None, measurer_factory=broken, testbed=_spec(True))
    assert out.status == "failed" and "caught fire" in (out.reason or "")
    assert seen and seen[0] is not None and seen[0].run_uid == out.uid
    assert read_holder(store, "lab1") is None
    run = store.load_run(out.run_id)
    assert run.testbed == "lab1" and run.environment["testbed"]["name"] == "lab1"
    store.close()
