"""A small dpdk-testpmd driver used as an independent peer by tgen's tests and benchmark.

testpmd runs in interactive mode (``-i``) on a pty (:class:`nfvperf.host.proc.Process`, the
helper every nfvperf process runs through); each command's output is read up to the next
``testpmd> `` prompt.  This is deliberately independent of the tgen code: it is
the "other instrument" whose counters the tgen counts are checked against (a receiver for rate
accuracy, a forwarding DUT that drops, a txonly/rxonly reference for the benchmark).

This is not the DUT adapter of ``nfvperf.dut`` (that one owns the DUT life cycle in topologies).
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
from pathlib import Path
from typing import Any, Optional

from nfvperf.host.base import Popened
from nfvperf.host.proc import LOCAL, Process, ProcessError
from nfvperf.host.run import ResourceTracker

PROMPT = "testpmd> "


class TestpmdError(RuntimeError):
    pass


def find_testpmd() -> Optional[str]:
    return os.environ.get("NFVPERF_TESTPMD") or shutil.which("dpdk-testpmd")


class TestpmdPeer:
    """dpdk-testpmd with the given vdevs, driven interactively.

    ``vdevs`` are EAL ``--vdev`` devargs (net_ring, net_null, net_af_packet, ...).
    """

    __test__ = False    # not a pytest test class despite the name

    def __init__(self, vdevs: list[str], tag: str, run_dir: Path, forward_mode: str = "io",
                 lcores: str = "0@0,1@0", hugepages: bool = False, app_args: tuple[str, ...] = (),
                 binary: Optional[str] = None, mem_mb: int = 256,
                 tracker: Optional[ResourceTracker] = None, host: Any = None):
        self.vdevs = list(vdevs)
        self.tag = tag
        self.run_dir = Path(run_dir)
        self.forward_mode = forward_mode
        self.lcores = lcores
        self.hugepages = hugepages
        self.app_args = list(app_args)
        self.binary = binary or find_testpmd()
        self.mem_mb = mem_mb
        self.tracker = tracker
        self.host = host if host is not None else LOCAL
        self.process: Optional[Process] = None
        self.log_path = self.run_dir / f"testpmd-{tag}.log"

    @property
    def proc(self) -> Optional[Popened]:
        """testpmd's Popen (pid, poll(), kill()), None before start()."""
        return self.process.proc if self.process is not None else None

    # -- life cycle -------------------------------------------------------------------------
    def argv(self) -> list[str]:
        if not self.binary:
            raise TestpmdError("dpdk-testpmd not found")
        # testpmd's stdout is a pty (line-buffered stdio): a command's output arrives before
        # its prompt
        eal = [self.binary, "--lcores", self.lcores, "--file-prefix", f"nfvperf-tp-{self.tag}",
               "--no-pci", "--log-level", "lib.eal:warning"]
        eal += ["--in-memory"] if self.hugepages else ["--no-huge", "-m", str(self.mem_mb)]
        for v in self.vdevs:
            eal += ["--vdev", v]
        app = ["--", "-i", f"--forward-mode={self.forward_mode}"]
        if not any(a.startswith("--total-num-mbufs") for a in self.app_args):
            app.append("--total-num-mbufs=16384")
        return eal + app + self.app_args

    def start(self, timeout_s: float = 60.0) -> "TestpmdPeer":
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.process = Process("testpmd", self.argv(), None, self.tracker, host=self.host,
                               interactive=True, log_path=self.log_path, append=False,
                               tag=self.tag, died=TestpmdError)
        try:
            self.process.start()
        except ProcessError as e:
            self.process = None
            raise TestpmdError(str(e)) from None
        try:
            self._wait_prompt(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_prompt(self, timeout_s: float) -> str:
        """The console output up to (not including) the next prompt."""
        if self.process is None:
            raise TestpmdError("testpmd is not started")
        try:
            out = self.process.expect(re.escape(PROMPT), timeout_s)
        except ProcessError:
            raise TestpmdError(f"testpmd: no prompt within {timeout_s} s: {self.tail()}") from None
        return out[: -len(PROMPT)]

    def tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return self.process.buffer[-n:] if self.process is not None else ""

    def cmd(self, line: str, timeout_s: float = 20.0) -> str:
        if self.process is None or not self.process.running():
            raise TestpmdError(f"testpmd not running: {self.tail()}")
        self.process.send(line)
        return self._wait_prompt(timeout_s)

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.running():
            with contextlib.suppress(OSError, ProcessError):
                self.process.send("quit")
        # quit asked it to exit: 10 s for that, then SIGTERM (5 s), then SIGKILL
        self.process.stop(timeout=5.0, grace=10.0)
        shutil.rmtree(f"/var/run/dpdk/nfvperf-tp-{self.tag}", ignore_errors=True)

    def __enter__(self) -> "TestpmdPeer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- counters ---------------------------------------------------------------------------
    def port_stats(self) -> dict[int, dict[str, int]]:
        """``show port stats all`` parsed: {port: {rx_packets, rx_missed, rx_errors, rx_nombuf,
        rx_bytes, tx_packets, tx_errors, tx_bytes, rx_pps, tx_pps}}."""
        out = self.cmd("show port stats all")
        res: dict[int, dict[str, int]] = {}
        for block in re.split(r"#+ NIC statistics for port\s+", out)[1:]:
            m = re.match(r"(\d+)", block)
            if not m:
                continue
            res[int(m.group(1))] = {
                key: int(mm.group(1))
                for key, label in (("rx_packets", "RX-packets"), ("rx_missed", "RX-missed"),
                                   ("rx_bytes", "RX-bytes"), ("rx_errors", "RX-errors"),
                                   ("rx_nombuf", "RX-nombuf"), ("tx_packets", "TX-packets"),
                                   ("tx_errors", "TX-errors"), ("tx_bytes", "TX-bytes"),
                                   ("rx_pps", "Rx-pps"), ("tx_pps", "Tx-pps"))
                if (mm := re.search(re.escape(label) + r":\s*(-?\d+)", block))}
        if not res:
            raise TestpmdError(f"could not parse port stats: {out[-500:]}")
        return res

    def clear(self) -> None:
        self.cmd("clear port stats all")
        self.cmd("clear fwd stats all")
