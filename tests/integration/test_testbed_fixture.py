"""The multi-host test bed fixture itself (tests/integration/testbed_hosts.py): each namespace host
answers SSH on its own address with the host key written in the testbed file, accepts the
generated user key only, and the cabling veths carry frames between tester and DUT."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))   # testbed_hosts, whatever the import mode
from testbed_hosts import make_testbed, testbed_hosts  # noqa: E402,F401  (fixtures)

pytestmark = [pytest.mark.root, pytest.mark.no_polling]


def _client(tb, host, key=None):
    import paramiko
    h = tb.hosts[host]
    c = paramiko.SSHClient()
    kt, kb = h.host_key.split()[:2]
    c.get_host_keys().add(h.address, kt, paramiko.PKey.from_type_string(kt, __import__("base64").b64decode(kb)))
    c.set_missing_host_key_policy(paramiko.RejectPolicy())
    c.connect(h.address, username="root", key_filename=str(key or tb.user_key), timeout=5,
              allow_agent=False, look_for_keys=False)
    return c


def test_testbed_fixture_hosts_answer_ssh_in_their_namespace(testbed_hosts):
    tb = testbed_hosts
    spec = tb.spec
    assert set(spec.hosts) == {"tester1", "dut1"}
    assert [(lk.tester, lk.dut) for lk in spec.links] == [("tester1.p0", "dut1.p0"),
                                                           ("tester1.p1", "dut1.p1")]
    for name, h in tb.hosts.items():
        c = _client(tb, name)
        try:
            _, out, _ = c.exec_command("ip -o link show")
            links = out.read().decode()
        finally:
            c.close()
        for ifname in h.nics.values():
            assert ifname in links, f"{name}: {ifname} not in its namespace: {links}"
        other = [i for o in tb.hosts.values() if o is not h for i in o.nics.values()]
        assert not any(i in links for i in other)


def test_testbed_fixture_sshd_refuses_other_user_key(testbed_hosts, tmp_path):
    import paramiko
    from testbed_hosts import _keygen
    _keygen(tmp_path / "stranger", "stranger")
    with pytest.raises(paramiko.AuthenticationException):
        _client(testbed_hosts, "dut1", key=tmp_path / "stranger")


def test_testbed_fixture_cabling_carries_frames(testbed_hosts):
    tb = testbed_hosts
    t, d = tb.hosts["tester1"], tb.hosts["dut1"]
    t.exec(["ip", "addr", "add", "192.0.2.1/30", "dev", t.nics["p0"]])
    d.exec(["ip", "addr", "add", "192.0.2.2/30", "dev", d.nics["p0"]])
    server = subprocess.Popen(["ip", "netns", "exec", d.netns, "python3", "-c", _SERVE])
    try:
        out = t.exec(["python3", "-c", _CONNECT]).stdout
    finally:
        server.kill()
        server.wait()
    assert out.strip() == "cabled"


_SERVE = ("import socket; s = socket.socket(); s.bind(('192.0.2.2', 5555)); s.listen(); "
          "c, _ = s.accept(); c.sendall(b'cabled'); c.close()")
_CONNECT = ("import socket, time\n"
            "for _ in range(50):\n"
            "    try:\n"
            "        c = socket.create_connection(('192.0.2.2', 5555), timeout=2); break\n"
            "    except OSError: time.sleep(0.1)\n"
            "print(c.recv(64).decode())\n")
