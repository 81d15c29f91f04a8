"""SshHost's pieces that need no sshd: the remote command line, host key expectations, the
agent's guard (a child dies when its channel's stdin closes) and cleanup argument checks."""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nfvperf.host import agent
from nfvperf.host.ssh import HostKeyError, SshHost, fingerprint, _pkey_from_line
from nfvperf.testbed.spec import SshSpec

AGENT = Path(agent.__file__)
ED = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


def test_ssh_command_line_quotes_every_argument():
    line = SshHost.command_line(["printf", "%s", "a b", "$(reboot)", "'q'"], {"NFVPERF_TAG": "nfv0a0b0c"},
                                cwd="/tmp/x y")
    assert line.startswith("cd '/tmp/x y' && exec env NFVPERF_TAG=nfv0a0b0c printf")
    # what a POSIX shell makes of it: the original words, nothing expanded
    words = shlex.split(line.split("&& exec ", 1)[1])
    assert words == ["env", "NFVPERF_TAG=nfv0a0b0c", "printf", "%s", "a b", "$(reboot)", "'q'"]


def test_ssh_expected_keys_from_host_key_and_known_hosts(tmp_path):
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[192.0.2.7]:2222 {ED}\n192.0.2.8 {ED}\n")
    h = SshHost("dut1", SshSpec(address="192.0.2.7", port=2222, known_hosts=str(kh)))
    keys = h.expected_keys()
    assert len(keys) == 1 and fingerprint(keys[0]).startswith("SHA256:")
    assert fingerprint(keys[0]) == fingerprint(_pkey_from_line(ED))
    h2 = SshHost("dut2", SshSpec(address="192.0.2.9", known_hosts=str(kh)))
    with pytest.raises(HostKeyError, match=r"dut2 .*never accepted"):
        h2.connect()            # refused before any connection is attempted
    bad = SshHost("dut3", SshSpec(address="192.0.2.9", host_key="ssh-ed25519 notbase64!"))
    with pytest.raises(HostKeyError, match=r"hosts\.dut3\.ssh\.host_key"):
        bad.expected_keys()


def test_ssh_public_view_has_no_secrets():
    h = SshHost("dut1", SshSpec(address="192.0.2.7", key="/root/.ssh/lab_key", host_key=ED),
                role="dut")
    pub = h.public()
    assert pub == {"name": "dut1", "role": "dut", "address": "192.0.2.7", "port": 22,
                   "user": "root", "via": "ssh"}
    assert "lab_key" not in repr(h) and "lab_key" not in str(pub)


def test_ssh_agent_guard_kills_its_child_when_stdin_closes():
    p = subprocess.Popen([sys.executable, str(AGENT), "guard", "sleep", "300"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert p.stdout is not None and p.stdin is not None
    line = p.stdout.readline().decode()
    assert line.startswith("NFVPERF-PID ")
    child = int(line.split()[1])
    assert os.getpgid(child) == child             # its own process group
    p.stdin.close()                               # the channel closed
    assert p.wait(10) == 128 + 15
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{child}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{child}")


def test_ssh_agent_guard_passes_the_exit_status():
    p = subprocess.Popen([sys.executable, str(AGENT), "guard", "sh", "-c", "echo hi; exit 5"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.wait(10) == 5                        # stdin still open: the child's own exit
    assert p.stdout is not None and p.stdout.read().splitlines()[1:] == ["hi"]
    assert p.stdin is not None
    p.stdin.close()
    p.stdout.close()
    q = subprocess.Popen([sys.executable, str(AGENT), "guard", "/nonexistent/prog"],
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)
    assert q.wait(10) == 127
    assert q.stderr is not None and "cannot run /nonexistent/prog" in q.stderr.read()
    assert q.stdin is not None
    q.stdin.close()
    q.stderr.close()


def test_ssh_agent_cleanup_refuses_a_non_tag():
    cp = subprocess.run([sys.executable, str(AGENT), "cleanup", "sshd"], capture_output=True,
                        text=True, timeout=10)
    assert cp.returncode != 0 and "not a run tag" in cp.stderr


class _EofFirstChannel:
    """A paramiko Channel as :meth:`SshHost.run` uses it, whose command printed ``hello`` and
    closed its output, and whose exit status (3, with ``oops`` on stderr) arrives ``late_s``
    later, as sshd sends it once it has reaped the command."""

    def __init__(self, late_s: float) -> None:
        import threading
        self.status_event = threading.Event()
        self.closed = False
        self.recv_calls = 0
        self._out, self._err = [b"hello\n"], [b"oops\n"]
        self._timer = threading.Timer(late_s, self.status_event.set)

    def exec_command(self, line: str) -> None:
        self._timer.start()

    def shutdown_write(self) -> None:
        pass

    def settimeout(self, t: float) -> None:
        self.timeout = t

    def recv(self, n: int) -> bytes:
        self.recv_calls += 1
        return self._out.pop(0) if self._out else b""      # b"": EOF, at once, every time

    def recv_ready(self) -> bool:
        return bool(self._out)

    def recv_stderr_ready(self) -> bool:
        return bool(self._err)

    def recv_stderr(self, n: int) -> bytes:
        return self._err.pop(0)

    def exit_status_ready(self) -> bool:
        return self.status_event.is_set()

    def recv_exit_status(self) -> int:
        self.status_event.wait()
        return 3

    def close(self) -> None:
        self.closed = True
        self._timer.cancel()


def test_ssh_run_waits_for_the_exit_status_after_eof_without_spinning(monkeypatch):
    """After the output's end (recv() returns b"" at once from then on) run() waits on the
    channel's status event: a loop on recv() there took the CPU and the GIL from paramiko's
    reader thread, about 0.1-0.25 s per remote command on a 2-CPU host."""
    class _Transport:
        def is_active(self) -> bool:
            return True

    h = SshHost("dut1", SshSpec(address="192.0.2.7", host_key=ED))
    chan = _EofFirstChannel(late_s=0.5)
    monkeypatch.setattr(h, "_session", lambda timeout=None: chan)
    monkeypatch.setattr(h, "transport", lambda: _Transport())
    cp = h.run(["true"], check=False, timeout=10)    # a fake channel: nothing runs
    assert (cp.returncode, cp.stdout, cp.stderr) == (3, "hello\n", "oops\n")
    # one recv for the output, then one per RECV_WAIT_S of waiting (0.5 s: 3 or 4), not thousands
    assert chan.recv_calls <= 2 + 0.5 / SshHost.RECV_WAIT_S + 2, chan.recv_calls
    assert chan.closed
