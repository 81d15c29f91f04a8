"""The remote side of :class:`nfvperf.host.ssh.SshHost`: a stdlib-only script it uploads to each
host (``<work_dir>/nfvperf-agent-<hash>.py``) and runs with ``python3``.

``guard ARGV...``
    Start ARGV in its own session (process group), print ``NFVPERF-PID <pid>`` on stdout before
    the child may write anything, then wait.  When the child exits, exit with its status
    (``128 + signal`` for a signal).  When stdin reaches EOF (the SSH channel closed: the
    controller stopped it, died, or lost the connection), SIGTERM the child's group, SIGKILL it
    after 3 s, and exit: a remote process dies with its channel, as a local one dies with its
    parent (PR_SET_PDEATHSIG).
``guard-pty ARGV...``
    The same, with ARGV on a pseudo-terminal of this host (raw mode, its controlling terminal):
    what arrives on stdin goes to the terminal, what ARGV writes comes out on stdout.  An
    interactive console (testpmd's ``testpmd>``) driven from the controller, line-buffered as a
    terminal makes it.
``relay PATH``
    Connect to the Unix socket PATH and copy bytes both ways between it and stdin/stdout: an
    SSH-forwarded connection to tgen's control socket (no TCP port, no token on the host).
``tags``
    The run tags present on this host (JSON list): processes' ``NFVPERF_TAG`` and link names.
``cleanup TAG [--dry-run] [--work-dir DIR]``
    Remove what a run tagged TAG left on this host: processes with ``NFVPERF_TAG=TAG`` in their
    environment (SIGTERM, then SIGKILL), network namespaces and links whose name contains TAG,
    DPDK runtime directories and hugepage files of its file prefixes, ``/run/nfvperf/TAG``,
    ``DIR/TAG`` (the host's work directory) and the ``/tmp`` fallbacks.  Prints a JSON report.

It imports nothing from nfvperf (the host needs only python3) and never builds a shell string.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
import tty
import fcntl
import termios

TAG_RE = re.compile(r"nfv[0-9a-f]{6}")


def _killpg(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _exit_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def guard(argv: list[str], use_pty: bool = False) -> int:
    ready_r, ready_w = os.pipe()         # child -> parent: in its own session now
    go_r, go_w = os.pipe()               # parent -> child: the pid is printed, exec
    master = slave = -1
    if use_pty:
        master, slave = os.openpty()
        tty.setraw(slave)                # no echo, no line discipline surprises
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        os.close(go_w)
        os.setsid()
        os.write(ready_w, b"1")
        os.close(ready_w)
        os.read(go_r, 1)
        os.close(go_r)
        if use_pty:
            os.close(master)
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
            for std in (0, 1, 2):
                os.dup2(slave, std)
            os.close(slave)
        else:
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        try:
            os.execvp(argv[0], argv)
        except OSError as e:
            os.write(2, f"cannot run {argv[0]}: {e.strerror}\n".encode())
        os._exit(127)
    os.close(ready_w)
    os.close(go_r)
    os.read(ready_r, 1)
    os.close(ready_r)
    os.write(1, f"NFVPERF-PID {pid}\n".encode())
    os.close(go_w)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    if use_pty:
        os.close(slave)
        return _guard_console(pid, master)
    while True:
        ready, _, _ = select.select([0], [], [], 0.2)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return _exit_code(status)
        if ready and not os.read(0, 4096):
            return _stop_group(pid)


def _guard_console(pid: int, master: int) -> int:
    """guard-pty's loop: stdin -> the terminal, the terminal -> stdout, until the child exits
    (its last output copied) or stdin ends (the child's group stopped)."""
    fds = [0, master]
    while True:
        ready, _, _ = select.select(fds, [], [], 0.2)
        if master in ready:
            try:
                data = os.read(master, 65536)
            except OSError:              # EIO: no process holds the terminal any more
                data = b""
            if data:
                os.write(1, data)
            else:
                fds.remove(master)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            while master in fds and select.select([master], [], [], 0)[0]:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    break
                if not data:
                    break
                os.write(1, data)
            return _exit_code(status)
        if 0 in ready:
            data = os.read(0, 4096)
            if not data:
                return _stop_group(pid)
            os.write(master, data)


def _stop_group(pid: int) -> int:
    """SIGTERM the group of ``pid``, SIGKILL it after 3 s; the exit code to report."""
    _killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            _killpg(pid, signal.SIGKILL)     # the rest of the group
            return _exit_code(status)
        time.sleep(0.05)
    _killpg(pid, signal.SIGKILL)
    return _exit_code(os.waitpid(pid, 0)[1])


def relay(path: str) -> int:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
    except OSError as e:
        os.write(2, f"cannot connect to {path}: {e.strerror}\n".encode())
        return 2
    fds = [0, s.fileno()]
    while fds:
        ready, _, _ = select.select(fds, [], [])
        if 0 in ready:
            data = os.read(0, 65536)
            if not data:
                return 0
            s.sendall(data)
        if s.fileno() in ready:
            data = s.recv(65536)
            if not data:
                return 0
            os.write(1, data)
    return 0


def _host_netns(tag: str = "") -> set[str]:
    """The network namespaces that belong to this host: the agent's own (what sshd runs in) and
    the named ones of run ``tag`` (a host may share its process table with others, e.g. hosts
    that are namespaces of one machine: their processes are not ours)."""
    spaces = {os.readlink("/proc/self/ns/net")}
    with contextlib.suppress(OSError):
        for name in os.listdir("/run/netns"):
            if tag and tag in name:
                spaces.add(f"net:[{os.stat(os.path.join('/run/netns', name)).st_ino}]")
    return spaces


def _on_this_host(pid: str, spaces: set[str]) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/ns/net") in spaces
    except OSError:
        return False


def _tagged_pids(tag: str) -> list[tuple[int, str]]:
    me = {os.getpid(), os.getppid()}
    spaces = _host_netns(tag)
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) in me or not _on_this_host(d, spaces):
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if f"NFVPERF_TAG={tag}".encode() in env and cmd:
            out.append((int(d), cmd[:200]))
    return out


def _ip_lines(argv: list[str]) -> list[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout.splitlines()
    except (OSError, subprocess.TimeoutExpired):
        return []


def cleanup(tag: str, dry_run: bool = False, work_dir: str = "") -> dict:
    if not TAG_RE.fullmatch(tag):
        raise SystemExit(f"not a run tag: {tag!r}")
    report: dict = {"processes": [], "netns": [], "links": [], "files": []}
    procs = _tagged_pids(tag)
    report["processes"] = [f"{p} {c}" for p, c in procs]
    if not dry_run:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for p, _ in procs:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p, sig)
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline and any(os.path.exists(f"/proc/{p}") for p, _ in procs):
                time.sleep(0.05)
    for line in _ip_lines(["ip", "netns", "list"]):
        ns = line.split()[0] if line.split() else ""
        if tag in ns:
            report["netns"].append(ns)
            if not dry_run:
                for q in _ip_lines(["ip", "netns", "pids", ns]):
                    if q.strip().isdigit():
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(int(q), signal.SIGKILL)
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    for line in _ip_lines(["ip", "-o", "link", "show"]):
        m = re.match(r"\d+: ([^:@]+)", line)
        if m and tag in m.group(1):
            report["links"].append(m.group(1))
            if not dry_run:
                subprocess.run(["ip", "link", "del", m.group(1)], capture_output=True)
    paths = [f"/run/nfvperf/{tag}", f"/tmp/{tag}-ovs"]
    if work_dir:
        paths.append(os.path.join(work_dir, tag))
    for base in ("/dev/hugepages", "/var/run/dpdk", "/tmp"):
        with contextlib.suppress(OSError):
            paths += [os.path.join(base, n) for n in os.listdir(base) if tag in n]
    for f in sorted(set(paths)):
        if os.path.lexists(f):
            report["files"].append(f)
            if not dry_run:
                if os.path.isdir(f) and not os.path.islink(f):
                    shutil.rmtree(f, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        os.unlink(f)
    return report


def tags() -> list[str]:
    """Run tags present on this host: in processes' environment, netns and link names."""
    found = set()
    spaces = _host_netns()
    for d in os.listdir("/proc"):
        if not d.isdigit() or not _on_this_host(d, spaces):
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        for kv in env:
            if kv.startswith(b"NFVPERF_TAG="):
                found.add(kv.split(b"=", 1)[1].decode(errors="replace"))
    # links of this host's namespace; named namespaces are left out: /run/netns may be shared
    # with other hosts' runs (hosts that are namespaces of one machine)
    for line in _ip_lines(["ip", "-o", "link", "show"]):
        found.update(TAG_RE.findall(line))
    return sorted(t for t in found if TAG_RE.fullmatch(t))


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        os.write(2, b"usage: agent guard ARGV... | guard-pty ARGV... | relay PATH | cleanup TAG [--dry-run]\n")
        return 2
    cmd, rest = argv[1], argv[2:]
    if cmd == "guard" and rest:
        return guard(rest)
    if cmd == "guard-pty" and rest:
        return guard(rest, use_pty=True)
    if cmd == "relay" and len(rest) == 1:
        return relay(rest[0])
    if cmd == "tags":
        print(json.dumps(tags()))
        return 0
    if cmd == "cleanup" and rest:
        wd = rest[rest.index("--work-dir") + 1] if "--work-dir" in rest[1:-1] else ""
        print(json.dumps(cleanup(rest[0], dry_run="--dry-run" in rest[1:], work_dir=wd)))
        return 0
    os.write(2, f"agent: bad command {cmd!r}\n".encode())
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
