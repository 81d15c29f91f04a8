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
    assert remote_hosts_problem(_spec(True), "tgen") is None
    assert remote_hosts_problem(_spec(False), "sim") is None           # the sim touches no host
    msg = remote_hosts_problem(_spec(False), "tgen")
    assert msg and "host(s) d are reached over SSH" in msg and "remote hosts need" in msg


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
