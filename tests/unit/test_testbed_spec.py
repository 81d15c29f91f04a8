"""The testbed file (issue 10) is validated like a suite: each problem names its path and fix."""
from __future__ import annotations

import pytest

from nfvperf.testbed import TestbedError, validate_testbed

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostKeyForTestsOnly"


def _bed(**over):
    d = {"name": "lab1",
         "hosts": {"tester1": {"role": "tester", "ssh": {"address": "10.9.0.1", "host_key": KEY,
                                                          "key": "/root/.ssh/id"},
                               "nics": [{"name": "p0", "pci": "0000:05:00.0", "numa": 0}]},
                   "dut1": {"role": "dut", "ssh": {"address": "10.9.0.2", "known_hosts": "/k"},
                            "nics": [{"name": "p0", "pci": "0000:05:00.0"}]}},
         "links": [{"tester": "tester1.p0", "dut": "dut1.p0"}]}
    d.update(over)
    return d


def test_valid_testbed_and_public_view_has_no_secrets():
    tb = validate_testbed(_bed())
    assert tb.role_host("tester")[0] == "tester1" and tb.role_host("dut")[0] == "dut1"
    pub = tb.public()
    assert pub["hosts"]["tester1"]["ssh"] == {"address": "10.9.0.1", "port": 22, "user": "root"}
    assert "/root/.ssh/id" not in str(pub) and KEY not in str(pub)


def test_unknown_host_key_is_refused():
    d = _bed()
    del d["hosts"]["tester1"]["ssh"]["host_key"]
    with pytest.raises(TestbedError) as e:
        validate_testbed(d)
    assert "hosts.tester1.ssh" in str(e.value) and "never accepted" in str(e.value)


def test_cabling_names_unknown_host_and_nic():
    with pytest.raises(TestbedError) as e:
        validate_testbed(_bed(links=[{"tester": "tester1.p9", "dut": "dutX.p0"}]))
    msg = str(e.value)
    assert "links.0.tester: host tester1 has no nic 'p9'" in msg
    assert "links.0.dut: unknown host 'dutX'" in msg


def test_roles_required_and_bad_pci():
    d = _bed()
    d["hosts"]["dut1"]["role"] = "vnf"
    d["hosts"]["dut1"]["nics"][0]["pci"] = "05:00.0"
    with pytest.raises(TestbedError) as e:
        validate_testbed(d)
    assert "not a PCI address" in str(e.value)
