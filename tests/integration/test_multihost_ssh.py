"""SshHost against real sshd's in namespaces (tests/integration/testbed_hosts.py): commands,
files, tagged processes that die with their channel, a lost host noticed within seconds, host keys
refused when unknown or changed, forwarded connections, cleanup by tag on the remote host."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))   # testbed_hosts, whatever the import mode
from testbed_hosts import make_testbed, rotate_host_key, testbed_hosts  # noqa: E402,F401

from nfvperf.host.proc import CommandError  # noqa: E402
from nfvperf.host.run import new_tag  # noqa: E402
from nfvperf.host.ssh import HostKeyError, HostLost, SshHost  # noqa: E402
from nfvperf.trial import DutFailure  # noqa: E402

pytestmark = [pytest.mark.root, pytest.mark.no_polling]


def _host(tb, name: str, **over) -> SshHost:
    spec = tb.spec.hosts[name]
    ssh = spec.ssh.model_copy(update=over) if over else spec.ssh
    return SshHost(name, ssh, role=spec.role, work_dir=spec.work_dir)


def _netns_of(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/net")


def _environ(pid: int) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()


def _gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            st = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if st == "Z":
            return True
        time.sleep(0.05)
    return False


def test_ssh_host_runs_commands_and_files_in_its_namespace(testbed_hosts, tmp_path):
    tb = testbed_hosts
    with _host(tb, "dut1") as h:
        cp = h.run(["ip", "-o", "link", "show"])
        assert tb.hosts["dut1"].nics["p0"] in cp.stdout
        assert tb.hosts["tester1"].nics["p0"] not in cp.stdout
        assert h.run(["cat"], input="a b 'c'\n").stdout == "a b 'c'\n"
        assert h.run(["printf", "%s|", "two words", "$HOME", ";rm -rf /"]).stdout == \
            "two words|$HOME|;rm -rf /|"
        with pytest.raises(CommandError, match="failed"):
            h.run(["false"])
        assert h.run(["sh", "-c", "exit 3"], check=False).returncode == 3
        d = f"{tb.spec.hosts['dut1'].work_dir}/files"
        h.mkdir(d)
        h.write_text(f"{d}/a.txt", "hello\n")
        assert h.exists(f"{d}/a.txt") and not h.exists(f"{d}/b.txt")
        assert h.read_text(f"{d}/a.txt") == "hello\n"
        (tmp_path / "up").write_text("up\n")
        h.put(tmp_path / "up", f"{d}/up")
        h.get(f"{d}/up", tmp_path / "down")
        assert (tmp_path / "down").read_text() == "up\n"
        assert h.glob(d, "*.txt") == [f"{d}/a.txt"]
        h.remove(f"{d}/a.txt")
        assert not h.exists(f"{d}/a.txt")


def test_ssh_process_is_tagged_stopped_and_dies_with_its_channel(testbed_hosts, tmp_path):
    tb = testbed_hosts
    tag = new_tag()
    h = _host(tb, "tester1").connect()
    try:
        p = h.spawn(["sleep", "300"], name="sleeper", log_path=tmp_path / "s.log", tag=tag)
        assert p.running()
        deadline = time.monotonic() + 5        # the pid is printed before the child execs
        while Path(f"/proc/{p.pid}/cmdline").read_bytes() != b"sleep\x00300\x00" and \
                time.monotonic() < deadline:
            time.sleep(0.02)
        assert f"NFVPERF_TAG={tag}".encode() in _environ(p.pid)
        assert _netns_of(p.pid) != _netns_of(os.getpid())
        # the controller's environment does not travel
        assert b"PYTEST_CURRENT_TEST" not in _environ(p.pid)
        p.stop(timeout=3)
        assert _gone(p.pid, 5)
        assert p.returncode() == -signal.SIGTERM
        # exit noticed, with its status
        q = h.spawn(["sh", "-c", "echo out; echo err >&2; exit 7"], name="short",
                    log_path=tmp_path / "q.log", tag=tag)
        assert q.wait(10) == 7
        with pytest.raises(DutFailure, match="exited with status 7"):
            q.check()
        assert "out" in q.log_tail() and "err" in q.log_tail()
        # a process dies when its channel closes (the controller went away)
        r = h.spawn(["sleep", "300"], name="orphan", log_path=tmp_path / "r.log", tag=tag)
        pid = r.pid
        h.close()
        assert _gone(pid, 6), "the remote process outlived its SSH channel"
    finally:
        h.close()


_SHELL = """
import sys
print("tty", sys.stdin.isatty(), sys.stdout.isatty())
sys.stdout.write("shell> "); sys.stdout.flush()
for line in sys.stdin:
    if line.strip() == "quit":
        print("Bye"); break
    print("got", line.strip())          # no flush: line-buffered only on a terminal
    sys.stdout.write("shell> "); sys.stdout.flush()
"""


def test_ssh_interactive_process_runs_on_a_remote_terminal(testbed_hosts, tmp_path):
    from nfvperf.host.proc import Process
    tb = testbed_hosts
    tag = new_tag()
    h = _host(tb, "dut1").connect()
    try:
        p = Process("shell", ["python3", "-c", _SHELL], interactive=True, host=h,
                    log_path=tmp_path / "sh.log", tag=tag).start()
        assert "tty True True" in p.expect(r"shell> ", 10)
        assert _netns_of(p.pid) != _netns_of(os.getpid())
        assert f"NFVPERF_TAG={tag}".encode() in _environ(p.pid)
        assert "got hello" in p.command("hello", "shell> ", 10)
        assert "got two" in p.command("two", "shell> ", 10)
        p.send("quit")
        p.expect("Bye", 10)
        assert p.wait(10) == 0
        p.stop()
        assert "got hello" in (tmp_path / "sh.log").read_text()      # the console is logged
        # stopped mid-session: gone from the host
        q = Process("shell2", ["python3", "-c", _SHELL], interactive=True, host=h,
                    log_path=tmp_path / "sh2.log", tag=tag).start()
        q.expect(r"shell> ", 10)
        q.stop(timeout=3)
        assert _gone(q.pid, 5)
    finally:
        h.close()


def test_ssh_lost_host_is_noticed_within_seconds(testbed_hosts, tmp_path):
    tb = testbed_hosts
    h = _host(tb, "dut1").connect()
    try:
        p = h.spawn(["sleep", "300"], name="victim", log_path=tmp_path / "v.log", tag=new_tag())
        pid = p.pid
        t0 = time.monotonic()
        tb.hosts["dut1"].kill_sshd()
        while p.running() and time.monotonic() - t0 < 10:
            time.sleep(0.05)
        took = time.monotonic() - t0
        assert not p.running(), "the lost host was not noticed"
        assert took < 6, f"noticed after {took:.1f} s"
        with pytest.raises(DutFailure, match="unreachable: connection to dut1"):
            p.check()
        with pytest.raises(HostLost, match="lost"):
            h.check()
        assert _gone(pid, 6), "the remote process outlived the lost connection"
    finally:
        h.close()


def test_ssh_changed_host_key_is_refused(testbed_hosts):
    tb = testbed_hosts
    new = rotate_host_key(tb, "dut1")
    with pytest.raises(HostKeyError, match=r"CHANGED.*refused.*hosts\.dut1\.ssh\.host_key"):
        _host(tb, "dut1").connect()
    # the same key named through a known_hosts file is accepted; a file without it is refused
    kh = tb.tmp / "known_hosts"
    kh.write_text(f"{tb.hosts['tester1'].address} {tb.hosts['tester1'].host_key}\n")
    with pytest.raises(HostKeyError, match="unknown host keys are never accepted"):
        _host(tb, "dut1", host_key=None, known_hosts=str(kh)).connect()
    kh.write_text(f"{tb.hosts['dut1'].address} {tb.hosts['tester1'].host_key}\n")
    with pytest.raises(HostKeyError, match="CHANGED.*refused"):
        _host(tb, "dut1", host_key=None, known_hosts=str(kh)).connect()
    kh.write_text(f"{tb.hosts['dut1'].address} {new}\n")
    with _host(tb, "dut1", host_key=None, known_hosts=str(kh)) as h:
        assert h.run(["true"]).returncode == 0


def test_ssh_errors_name_the_host_not_the_key(testbed_hosts, tmp_path):
    tb = testbed_hosts
    key = str(tb.user_key)
    from testbed_hosts import _keygen
    _keygen(tmp_path / "other", "other")
    with pytest.raises(Exception) as ei:
        _host(tb, "dut1", key=str(tmp_path / "other")).connect()
    assert "login as root failed" in str(ei.value) and "hosts.dut1.ssh.key" in str(ei.value)
    assert key not in str(ei.value) and str(tmp_path) not in str(ei.value)


def test_ssh_forwarded_connections_reach_the_host_loopback(testbed_hosts, tmp_path):
    tb = testbed_hosts
    t = tb.hosts["tester1"]
    sock = tmp_path / "echo.sock"
    server = subprocess.Popen(["ip", "netns", "exec", t.netns, "python3", "-c", _ECHO,
                               str(sock)])
    try:
        with _host(tb, "tester1") as h:
            deadline = time.monotonic() + 10
            while not (sock.exists() and h.exists(sock)) and time.monotonic() < deadline:
                time.sleep(0.05)
            c = h.connect_unix(sock)
            c.sendall(b"ping\n")
            assert _recv_line(c) == b"unix:ping\n"
            c.close()
            ch = h.open_tcp(47123)
            ch.sendall(b"tcp\n")
            assert _recv_line(ch) == b"tcp:tcp\n"
            ch.close()
            fw = h.forward(47123)
            with socket.create_connection(("127.0.0.1", fw.port), timeout=5) as s:
                s.sendall(b"fwd\n")
                assert _recv_line(s) == b"tcp:fwd\n"
            # nothing listens on the controller's own 47123: the forward went to the host
    finally:
        server.kill()
        server.wait()


def _recv_line(s) -> bytes:
    buf = b""
    s.settimeout(5)
    while not buf.endswith(b"\n"):
        d = s.recv(100)
        if not d:
            break
        buf += d
    return buf


_ECHO = r"""
import os, socket, sys, threading
def serve(srv, prefix):
    while True:
        c, _ = srv.accept()
        f = c.makefile("rb")
        c.sendall(prefix + f.readline())
        c.close()
u = socket.socket(socket.AF_UNIX); u.bind(sys.argv[1]); u.listen()
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("127.0.0.1", 47123)); t.listen()
threading.Thread(target=serve, args=(t, b"tcp:"), daemon=True).start()
serve(u, b"unix:")
"""


def test_ssh_cleanup_by_tag_reaches_the_remote_host(testbed_hosts, tmp_path):
    tb = testbed_hosts
    tag = new_tag()
    h = _host(tb, "dut1").connect()
    try:
        # a tagged process started outside any channel (what a killed controller may leave)
        tb.hosts["dut1"].exec(["sh", "-c", f"NFVPERF_TAG={tag} setsid sleep 300 "
                               "</dev/null >/dev/null 2>&1 &"])
        time.sleep(0.3)
        listing = h.cleanup_tag(tag, dry_run=True)
        assert any("sleep 300" in p for p in listing["processes"]), listing
        done = h.cleanup_tag(tag)
        assert done["processes"] == listing["processes"]
        assert h.cleanup_tag(tag, dry_run=True)["processes"] == []
    finally:
        h.close()


def test_testbed_check_runs_preflight_on_every_host_over_ssh(testbed_hosts, capsys):
    from nfvperf.cli import main
    tb = testbed_hosts
    rc = main(["testbed", "check", str(tb.path)])
    out = capsys.readouterr().out
    assert out.splitlines()[1].split()[:4] == ["host", "role", "check", "ok"]
    for host, role in (("tester1", "tester"), ("dut1", "dut")):
        rows = [line.split() for line in out.splitlines() if line.startswith(host + " ")]
        checks = {r[2]: r[3] for r in rows}
        assert checks["ssh"] == "ok*" and checks["root"] == "ok*", out
        assert {"hugepages", "irqbalance", "binary:ip"} <= set(checks), out
        assert all(r[1] == role for r in rows)
    assert "binary:tgen" in out and "binary:ovs-vswitchd" in out
    assert str(tb.user_key) not in out                # the key path is a secret
    assert rc in (0, 1)
    # a changed host key: one failed ssh row naming the host, nothing run there
    rotate_host_key(tb, "dut1")
    assert main(["testbed", "check", str(tb.path)]) == 1
    out = capsys.readouterr().out
    dut_rows = [line for line in out.splitlines() if line.startswith("dut1 ")]
    assert len(dut_rows) == 1 and "FAIL*" in dut_rows[0] and "CHANGED" in dut_rows[0], out


def test_testbed_check_three_hosts_one_table(make_testbed, capsys):
    from nfvperf.cli import main
    tb = make_testbed(hosts=[("tester1", "tester"), ("dut1", "dut"), ("vnf1", "vnf")], links=1)
    assert len(tb.spec.hosts) == 3
    main(["testbed", "check", str(tb.path), "--json"])
    import json
    rows = json.loads(capsys.readouterr().out)
    by_host = {}
    for r in rows:
        by_host.setdefault(r["host"], {})[r["check"]] = r
    assert set(by_host) == {"tester1", "dut1", "vnf1"}
    for host, checks in by_host.items():
        assert checks["ssh"]["ok"] and checks["root"]["ok"], (host, checks)
    assert by_host["vnf1"]["ssh"]["role"] == "vnf"


def test_ssh_silent_host_is_noticed_by_keepalives(testbed_hosts, tmp_path):
    """The management link goes down (no FIN, no RST: a pulled cable, a hung host): the
    keepalives (1 s in the fixture's testbed) break the connection within a few intervals."""
    tb = testbed_hosts
    h = _host(tb, "dut1").connect()
    root_if = tb.hosts["dut1"].root_if
    try:
        p = h.spawn(["sleep", "300"], name="quiet", log_path=tmp_path / "q.log", tag=new_tag())
        pid = p.pid
        t0 = time.monotonic()
        subprocess.run(["ip", "link", "set", root_if, "down"], check=True)
        while p.running() and time.monotonic() - t0 < 20:
            time.sleep(0.1)
        took = time.monotonic() - t0
        assert not p.running(), "a silent host was not noticed within 20 s"
        assert took < 10, f"noticed after {took:.1f} s (keepalive 1 s)"
        with pytest.raises(HostLost, match="dut1"):
            h.check()
        # the host's sshd (ClientAliveInterval) ends the session: the guard kills the process
        assert _gone(pid, 10), "the remote process outlived its silent controller"
    finally:
        subprocess.run(["ip", "link", "set", root_if, "up"], check=False)
        h.close()
