"""Shared fixtures of the root-only integration tests (netns, DPDK, OVS, tgen).

* Tests marked ``@pytest.mark.root`` are skipped, with the reason, when not run as root.
* ``run_ctx``: a fresh :class:`RunContext` (tag ``nfv`` + 6 hex, run dir under tmp_path) whose
  :class:`ResourceTracker` (``run_ctx.tracker``) is released after the test, and whose tag the
  ``leak_check`` watches.
* ``leak_check``: snapshots network namespaces, root-namespace links, processes, hugepage files and
  DPDK runtime dirs before the test and asserts the same listing after it.  The machine may be
  shared with other test sessions, so by default the listing is restricted to the *watched* tags
  (``leak_check.watch(tag)``; ``run_ctx`` does it for you) or, with nothing watched, to resources
  carrying any nfvperf run tag.  ``NFVPERF_LEAK_STRICT=1`` compares everything: `make test` sets
  it for its serial pass under CI (``CI=true``), where that pass runs alone.
* ``raw_port``: a factory of AF_PACKET sockets on a root-namespace interface (send signed test
  frames, count them back) for tests that need frames before/without tgen.
"""
from __future__ import annotations

import os
import re
import socket
import struct
import time
from pathlib import Path
from typing import Callable, Optional

import pytest

IS_ROOT = os.geteuid() == 0
STRICT = os.environ.get("NFVPERF_LEAK_STRICT") == "1"

#: every real ``nfvperf run`` probes the host's CPU steadiness before and after it (2 s each by
#: default); no assertion here needs a long probe, so the runs these tests start (in process and
#: as subprocesses, which inherit the environment) probe 0.5 s.  test_demo runs the demo as
#: shipped (it removes this from its command's environment).
os.environ.setdefault("NFVPERF_STEADINESS_S", "0.5")


def pytest_collection_modifyitems(config, items):
    if IS_ROOT:
        return
    skip = pytest.mark.skip(reason="needs root (network namespaces, hugepages, DPDK): run as root")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _hugepages_ready():
    """A fresh machine has no hugetlbfs mount and no 2 MB pages; the DUT tests that start DPDK
    processes without a Topology (which prepares its own) need them.  Never shrinks the pool."""
    if IS_ROOT:
        from nfvperf.host import hugepages as hp
        hp.prepare(3072)
    yield


# ------------------------------------------------------------------------------ leak check
def _listing() -> dict[str, set[str]]:
    from nfvperf.host import hugepages as hp
    from nfvperf.host import netns as N
    from nfvperf.host.cleanup import _ancestors

    procs = set()
    me = _ancestors()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) in me:
            continue
        try:
            raw = (d / "cmdline").read_bytes()
            env = (d / "environ").read_bytes()
        except OSError:
            continue
        if not raw:
            continue
        cmd = raw.rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")
        tag = ""
        for kv in env.split(b"\0"):
            if kv.startswith(b"NFVPERF_TAG="):
                tag = kv.split(b"=", 1)[1].decode(errors="replace")
        procs.add(f"{d.name} {cmd[:200]}" + (f" [NFVPERF_TAG={tag}]" if tag else ""))
    dpdk_dirs = set()
    for base in hp.DPDK_RUNTIME_DIRS:
        try:
            dpdk_dirs |= {str(base / n) for n in os.listdir(base)}
        except OSError:
            pass
    return {"netns": set(N.list_netns()), "links": set(N.list_links()), "processes": procs,
            "hugepage_files": set(hp.snapshot_files()), "dpdk_runtime": dpdk_dirs}


def _cmd(entry: str) -> str:
    """A process entry of :func:`_listing` without its pid."""
    return entry.split(" ", 1)[-1]


class LeakCheck:
    def __init__(self) -> None:
        self.tags: set[str] = set()
        self.before = _listing()

    def watch(self, tag: str) -> None:
        self.tags.add(tag)

    def _filter(self, listing: dict[str, set[str]]) -> dict[str, set[str]]:
        from nfvperf.host.run import TAG_RE
        if STRICT:
            return listing
        if self.tags:
            keep = lambda s: any(t in s for t in self.tags)  # noqa: E731
        else:
            keep = lambda s: bool(TAG_RE.search(s))  # noqa: E731
        return {k: {s for s in v if keep(s)} for k, v in listing.items()}

    def differences(self, settle_s: float = 3.0) -> dict[str, dict[str, set[str]]]:
        before = self._filter(self.before)
        deadline = time.monotonic() + settle_s
        while True:
            after = self._filter(_listing())
            diff = {k: {"new": after[k] - before[k], "gone": before[k] - after[k]}
                    for k in before if after[k] != before[k]}
            if "processes" in diff:     # a process restarted with its own command line (a test
                gone = {_cmd(x) for x in diff["processes"]["gone"]}   # fixture's sshd) is no new one
                diff["processes"]["new"] = {x for x in diff["processes"]["new"] if _cmd(x) not in gone}
            # only what appeared counts as a leak (other sessions may remove their own things)
            leaks = {k: v for k, v in diff.items() if v["new"]}
            if not leaks or time.monotonic() > deadline:
                return leaks
            time.sleep(0.2)

    def assert_clean(self) -> None:
        leaks = self.differences()
        assert not leaks, "resources leaked by the test: " + "; ".join(
            f"{k}: {sorted(v['new'])}" for k, v in leaks.items())


@pytest.fixture
def leak_check():
    if not IS_ROOT:
        pytest.skip("needs root")
    lc = LeakCheck()
    yield lc
    lc.assert_clean()


@pytest.fixture
def run_ctx(tmp_path, leak_check):
    """A RunContext with its tracker (``run_ctx.tracker``), released after the test."""
    from nfvperf.host.run import ResourceTracker, RunContext
    run = RunContext(run_dir=tmp_path / "run")
    leak_check.watch(run.tag)
    tracker = ResourceTracker(run)
    run.tracker = tracker  # type: ignore[attr-defined]
    try:
        yield run
    finally:
        tracker.release_all()
        assert not tracker.errors, f"release errors: {tracker.errors}"


# ------------------------------------------------------------------------------ raw frames
ETH_P_ALL = 0x0003
TEST_ETHERTYPE = 0x88B5     # IEEE local experimental


class RawPort:
    """AF_PACKET socket on an interface of the current (root) namespace."""

    def __init__(self, ifname: str, rcvbuf: int = 8 << 20):
        self.ifname = ifname
        self.s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.s.bind((ifname, 0))
        self.s.setblocking(False)

    @staticmethod
    def _mac(m: str) -> bytes:
        return bytes(int(x, 16) for x in m.split(":"))

    def send(self, n: int, sig: bytes = b"NFVT", dst: str = "02:00:00:00:00:02",
             src: str = "02:00:00:00:00:01", size_b: int = 64, gap_s: float = 0.0) -> None:
        """``n`` frames of ``size_b`` (incl. FCS), EtherType 0x88B5, payload sig + sequence."""
        head = self._mac(dst) + self._mac(src) + struct.pack("!H", TEST_ETHERTYPE) + sig
        for i in range(n):
            f = head + struct.pack("!I", i)
            self.s.send(f + b"\0" * (size_b - 4 - len(f)))
            if gap_s:
                time.sleep(gap_s)

    def receive(self, sig: bytes = b"NFVT", wait_s: float = 0.5, want: Optional[int] = None
                ) -> list[bytes]:
        """Frames carrying ``sig`` received (not sent) on this port within ``wait_s``."""
        out: list[bytes] = []
        end = time.monotonic() + wait_s
        while time.monotonic() < end and (want is None or len(out) < want):
            try:
                data, addr = self.s.recvfrom(65536)
            except BlockingIOError:
                time.sleep(0.005)
                continue
            if addr[2] == socket.PACKET_OUTGOING:
                continue
            if data[12:14] == struct.pack("!H", TEST_ETHERTYPE) and data[14:14 + len(sig)] == sig:
                out.append(data)
        return out

    def close(self) -> None:
        self.s.close()


@pytest.fixture
def raw_port() -> Callable[[str], RawPort]:
    ports: list[RawPort] = []

    def make(ifname: str) -> RawPort:
        p = RawPort(ifname)
        ports.append(p)
        return p

    yield make
    for p in ports:
        p.close()


@pytest.fixture
def need_tgen() -> None:
    """Skip when tgen is not built (``pytestmark = pytest.mark.usefixtures("need_tgen")``)."""
    from nfvperf.tg.tgen import find_tgen_binary
    try:
        find_tgen_binary()
    except FileNotFoundError as e:
        pytest.skip(str(e))


def wait_for(pred: Callable[[], bool], timeout_s: float = 5.0, step_s: float = 0.05) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step_s)
    return pred()

