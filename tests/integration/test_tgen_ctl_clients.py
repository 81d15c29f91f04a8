"""tgen's control connections: idle TCP peers cannot lock the controller out.

tgen serves 16 control clients.  TCP peers get at most 12 of the slots (the rest are kept for
Unix-socket clients), a TCP peer that has not authenticated within --auth-timeout is closed, and
so is one that stays silent for --idle-timeout.  Needs root and tgen/build/tgen; skipped otherwise.
"""
from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path

import pytest

from nfvperf.tg.tgen import PortSpec

sys.path.insert(0, str(Path(__file__).resolve().parent))   # tgen_fixtures, whatever the import mode
from tgen_fixtures import start_tgen, tag

pytestmark = pytest.mark.root

TOKEN = "s3cret-test-token"
AUTH_TIMEOUT_S = 1.5
IDLE_TIMEOUT_S = 4.0
MAX_CLIENTS, MAX_TCP = 16, 12


def _free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def tcp_tgen(tmp_path, leak_check):
    t = tag()
    leak_check.watch(t)
    port = _free_tcp_port()
    proc = start_tgen([PortSpec("net_ring0")], tmp_path, t,
                      extra_args=["--tcp", f"127.0.0.1:{port}", "--token", TOKEN,
                                  "--auth-timeout", str(AUTH_TIMEOUT_S),
                                  "--idle-timeout", str(IDLE_TIMEOUT_S)])
    yield proc, port
    assert proc.stop() == 0, proc.log_tail()


class Line:
    """A raw control connection: send one request, read one line."""

    def __init__(self, family: int, addr) -> None:
        self.s = socket.socket(family, socket.SOCK_STREAM)
        self.s.settimeout(5.0)
        self.s.connect(addr)
        self.buf = b""

    def call(self, method: str, **params) -> dict:
        self.s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                                   "params": params}).encode() + b"\n")
        line = self.readline()
        assert line is not None, f"{method}: connection closed"
        return json.loads(line)

    def readline(self):
        """The next line, or None at EOF."""
        while b"\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def closed_by_server(self, timeout_s: float) -> tuple[bool, list[dict]]:
        """Read until EOF (True) or timeout (False); also returns the lines read on the way."""
        self.s.settimeout(timeout_s)
        lines = []
        try:
            while True:
                line = self.readline()
                if line is None:
                    return True, lines
                lines.append(json.loads(line))
        except socket.timeout:
            return False, lines

    def close(self) -> None:
        self.s.close()


def test_idle_tcp_peers_do_not_lock_out_the_controller(tcp_tgen):
    proc, port = tcp_tgen
    # an authenticated TCP client first
    authed = Line(socket.AF_INET, ("127.0.0.1", port))
    assert authed.call("auth", token=TOKEN)["result"]["ok"] is True
    # then more idle, unauthenticated TCP connections than there are slots
    # (connect() can take a second when the listen backlog is full: t0 is taken before)
    t0 = time.monotonic()
    peers = [Line(socket.AF_INET, ("127.0.0.1", port)) for _ in range(MAX_CLIENTS + 2)]
    try:
        # (a) the Unix-socket controller still gets in and is served: its open connection and a new one
        assert proc.rpc("ping")["pong"] is True
        unix = Line(socket.AF_UNIX, str(proc.socket_path))
        assert unix.call("ping")["result"]["pong"] is True
        assert unix.call("ports.list")["result"][0]["id"] == 0
        # (b) after the auth timeout every TCP peer is disconnected (EOF): the ones beyond the TCP
        # share at once, told that the slots are in use; the others when the auth timeout expires
        ends = []
        for p in peers:
            closed, lines = p.closed_by_server(AUTH_TIMEOUT_S + 5.0)
            assert closed, "an unauthenticated TCP peer was not disconnected"
            assert len(lines) == 1 and lines[0]["id"] is None, lines
            ends.append(lines[0]["error"])
        waited = time.monotonic() - t0
        assert AUTH_TIMEOUT_S - 0.2 <= waited < AUTH_TIMEOUT_S + 8.0, waited
        refused = [e for e in ends if "slots are in use" in e["message"]]
        evicted = [e for e in ends if "not authenticated within" in e["message"]]
        assert len(refused) == len(peers) - (MAX_TCP - 1) and len(evicted) == MAX_TCP - 1, ends
        assert {e["code"] for e in refused} == {-32000} and {e["code"] for e in evicted} == {-32003}, ends
        # the authenticated client was not evicted by the auth timeout ...
        assert authed.call("ping")["result"]["pong"] is True
        # ... and the freed slots take new TCP clients
        again = Line(socket.AF_INET, ("127.0.0.1", port))
        assert again.call("ping")["error"]["code"] == -32003        # not authenticated yet
        assert again.call("auth", token=TOKEN)["result"]["ok"] is True
        assert again.call("ping")["result"]["pong"] is True
        again.close()
        # an authenticated client that stays silent is closed after the idle timeout
        t1 = time.monotonic()
        closed, lines = authed.closed_by_server(IDLE_TIMEOUT_S + 3.0)
        assert closed, "a silent TCP client was not disconnected after the idle timeout"
        assert time.monotonic() - t1 >= IDLE_TIMEOUT_S - 0.2
        assert lines and "idle" in lines[-1]["error"]["message"], lines
        # the Unix-socket clients are not subject to the idle timeout
        assert unix.call("ping")["result"]["pong"] is True
        unix.close()
    finally:
        for p in peers:
            p.close()
        authed.close()
    assert proc.rpc("ping")["pong"] is True


@pytest.mark.parametrize("args,option", [
    (["--auth-timeout", "1"], "--auth-timeout"),                                # without --tcp
    (["--tcp", ":1", "--token", "x", "--auth-timeout", "0"], "--auth-timeout"),
    (["--tcp", ":1", "--token", "x", "--idle-timeout", "-1"], "--idle-timeout"),
])
def test_timeout_options_refused(tmp_path, args, option):
    import subprocess
    from tgen_fixtures import tgen_binary_or_skip
    argv = [str(tgen_binary_or_skip()), "--no-huge", "-m", "256", "--no-pci", "--file-prefix",
            f"nfvperf-{tag()}", "--lcores", "0@0,1@0", "--vdev", "net_ring0", "--",
            "--socket", str(tmp_path / "x.sock")] + args
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert option in p.stderr, p.stderr[-2000:]
