"""nfvperf.host.proc: the one process helper (no root needed)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from nfvperf.host.proc import LOCAL, CommandError, LocalHost, Process, ProcessError
from nfvperf.host.run import ResourceTracker, RunContext
from nfvperf.trial import DutFailure, MeasurerError

PY = sys.executable


def _gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            st = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if st in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def run(tmp_path: Path) -> RunContext:
    return RunContext(run_dir=tmp_path / "run")


def test_start_log_env_and_exit(run: RunContext):
    p = Process("echo", [PY, "-c", "import os; print('hello', os.environ['NFVPERF_TAG'])"], run)
    p.start()
    assert p.wait(10) == 0
    p.stop()
    text = p.log_path.read_text()
    assert p.log_path == run.run_dir / "echo.log"
    assert text.startswith("$ " + PY)                 # the command line heads the log
    assert f"hello {run.tag}" in text                  # NFVPERF_TAG is the run's tag
    assert p.log_tail(1) == f"hello {run.tag}"
    assert p.log_tail(nbytes=4) == run.tag[-3:] + "\n"
    assert p.returncode() == 0 and not p.running()


def test_argv_is_a_list_never_a_string(run: RunContext):
    with pytest.raises(TypeError):
        Process("x", "echo hi; rm -rf /", run)
    with pytest.raises(ValueError):
        Process("x", [], run)
    with pytest.raises(ValueError, match="log_path"):
        Process("x", ["true"])          # no run, no log path


def test_separate_stdout_and_truncate(tmp_path: Path):
    out, err = tmp_path / "o.txt", tmp_path / "e.txt"
    err.write_text("old\n")
    p = Process("two", [PY, "-c", "import sys; print('out'); print('err', file=sys.stderr)"],
                log_path=err, stdout_path=out, append=False, died=MeasurerError)
    with p:
        assert p.wait(10) == 0
    assert out.read_text() == "out\n"
    assert "old" not in err.read_text() and err.read_text().endswith("err\n")


def test_check_raises_the_configured_error(run: RunContext):
    p = Process("dies", [PY, "-c", "import sys; print('boom'); sys.exit(3)"], run).start()
    p.wait(10)
    with pytest.raises(DutFailure, match=r"exited with status 3[\s\S]*boom"):
        p.check()
    q = Process("dies2", [PY, "-c", "raise SystemExit(4)"], run, died=MeasurerError).start()
    q.wait(10)
    with pytest.raises(MeasurerError, match="status 4"):
        q.check()
    with pytest.raises(DutFailure, match="never started"):
        Process("n", ["true"], run).check()


def test_start_failure_is_a_clear_error(run: RunContext):
    with pytest.raises(ProcessError, match="cannot start nope"):
        Process("nope", ["/nonexistent/binary-xyz"], run).start()


def test_stop_sigterm_then_sigkill_and_tracker(run: RunContext):
    tracker = ResourceTracker(run, install_signal_handlers=False)
    try:
        # ignores SIGTERM: stop must escalate to SIGKILL after the timeout
        code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); " \
               "print('up', flush=True); time.sleep(60)"
        p = Process("stubborn", [PY, "-c", code], run, tracker).start()
        p.wait_for_log(r"(?m)^up$", 10)      # not the command line at the top
        assert ("process", f"stubborn:{p.pid}") in tracker.items()
        t0 = time.monotonic()
        assert p.stop(timeout=0.5) == -signal.SIGKILL
        assert time.monotonic() - t0 < 5
        assert tracker.items() == []                    # stop() forgets the registration
        assert p.stop() == -signal.SIGKILL              # idempotent
        # a polite one ends on SIGTERM
        q = Process("polite", ["sleep", "60"], run, tracker).start()
        assert q.stop(timeout=5) == -signal.SIGTERM
        # grace: a process that exits on its own within the grace is not signalled
        r = Process("quick", [PY, "-c", "import time; time.sleep(0.3)"], run, tracker).start()
        assert r.stop(grace=10) == 0
        # the tracker stops what is still running
        s = Process("left", ["sleep", "60"], run, tracker).start()
    finally:
        tracker.release_all()
    assert _gone(s.pid) and s.returncode() == -signal.SIGTERM
    assert "process:left:%d" % s.pid in tracker.released


def test_stop_kills_the_whole_group(run: RunContext):
    code = "import subprocess, time; c = subprocess.Popen(['sleep', '60']); " \
           "print(c.pid, flush=True); time.sleep(60)"
    p = Process("parent", [PY, "-c", code], run).start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(p.log_path.read_text().splitlines()) < 2:
        time.sleep(0.05)
    child = int(p.log_path.read_text().splitlines()[-1])
    p.stop()
    assert _gone(child)


def test_pty_expect_command_and_timeout(run: RunContext):
    code = textwrap.dedent("""
        import sys
        sys.stdout.write("banner\\nshell> "); sys.stdout.flush()
        for line in sys.stdin:
            line = line.strip()
            if line == "quit":
                print("Bye"); sys.stdout.flush(); break
            sys.stdout.write(f"got {line}\\nshell> "); sys.stdout.flush()
    """)
    p = Process("shell", [PY, "-c", code], run, interactive=True).start()
    try:
        assert p.expect(r"shell> ", 10).startswith("banner")
        out = p.command("hello", "shell> ", 10)
        assert "got hello" in out and out.endswith("shell> ")
        assert "got two" in p.command("two", "shell> ", 10)
        t0 = time.monotonic()
        with pytest.raises(ProcessError, match="no 'never' within"):
            p.expect("never", 0.5)
        assert time.monotonic() - t0 < 3
        p.send("quit")
        p.expect("Bye", 10)
        assert p.wait(10) == 0
        with pytest.raises(DutFailure, match="exited"):
            p.expect("more", 5)            # the process is gone: not a timeout
    finally:
        p.stop()
    assert "got hello" in p.log_path.read_text()       # the console is logged
    with pytest.raises(ProcessError, match="not interactive"):
        p.send("x")


def test_netns_wraps_the_command(run: RunContext):
    p = Process("ns", ["iperf3", "-s"], run, netns="nfv123456-tcps")
    assert p.cmd == ["ip", "netns", "exec", "nfv123456-tcps", "iperf3", "-s"]
    assert p.argv == ["iperf3", "-s"]


class RecordingHost(LocalHost):
    """A host that records what it is asked to start: the seam a remote host implements."""

    def __init__(self) -> None:
        self.started: list[list[str]] = []

    def wrap(self, argv, netns=None):
        return ["env", "WHERE=elsewhere", *super().wrap(argv, netns)]

    def popen(self, cmd, **kw):
        self.started.append(list(cmd))
        return super().popen(cmd, **kw)


def test_host_is_the_seam(run: RunContext):
    h = RecordingHost()
    p = h.spawn([PY, "-c", "import os; print(os.environ['WHERE'])"], name="remote", run=run)
    assert p.host is h and p.wait(10) == 0
    p.stop()
    assert h.started == [["env", "WHERE=elsewhere", PY, "-c",
                          "import os; print(os.environ['WHERE'])"]]
    assert p.log_tail(1) == "elsewhere"
    assert Process("d", ["true"], run).host is LOCAL


def test_local_run(tmp_path: Path):
    cp = LOCAL.run(["sh", "-c", "echo out; echo err >&2"])
    assert cp.stdout == "out\n" and cp.stderr == "err\n"
    with pytest.raises(CommandError, match=r"failed \(2\): bad"):
        LOCAL.run(["sh", "-c", "echo bad >&2; exit 2"])
    assert LOCAL.run(["false"], check=False).returncode == 1
    with pytest.raises(CommandError, match="no exit within"):
        LOCAL.run(["sleep", "5"], timeout=0.2)
    with pytest.raises(CommandError, match="cannot run"):
        LOCAL.run(["/nonexistent/xyz"])


def test_die_with_parent(tmp_path: Path):
    """A process started by a Python that is then SIGKILLed gets SIGTERM (PR_SET_PDEATHSIG)."""
    script = tmp_path / "owner.py"
    script.write_text(textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2] / 'src')!r})
        from nfvperf.host.proc import Process
        p = Process("child", ["sleep", "60"], log_path={str(tmp_path / 'child.log')!r}).start()
        print(p.pid, flush=True)
        time.sleep(60)
    """))
    owner = subprocess.Popen([PY, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        child = int(owner.stdout.readline())
        assert not _gone(child, 0.2)
        owner.kill()
        owner.wait(5)
        assert _gone(child), "the child outlived its SIGKILLed parent"
    finally:
        owner.kill()
        owner.wait(5)
        owner.stdout.close()
