"""A small dpdk-testpmd driver used as an independent peer by tgen's tests and benchmark.

testpmd runs in interactive mode (``-i``) and is driven over its stdin; each command's output is
read up to the next ``testpmd> `` prompt.  This is deliberately independent of the tgen code: it is
the "other instrument" whose counters the tgen counts are checked against (a receiver for rate
accuracy, a forwarding DUT that drops, a txonly/rxonly reference for the benchmark).

This is not the DUT adapter of ``nfvperf.dut`` (that one owns the DUT life cycle in topologies).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Optional

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
                 binary: Optional[str] = None, mem_mb: int = 256):
        self.vdevs = list(vdevs)
        self.tag = tag
        self.run_dir = Path(run_dir)
        self.forward_mode = forward_mode
        self.lcores = lcores
        self.hugepages = hugepages
        self.app_args = list(app_args)
        self.binary = binary or find_testpmd()
        self.mem_mb = mem_mb
        self.proc: Optional[subprocess.Popen] = None
        self._buf = ""
        self._cv = threading.Condition()
        self._reader: Optional[threading.Thread] = None
        self.log_path = self.run_dir / f"testpmd-{tag}.log"
        self._log = None

    # -- life cycle -------------------------------------------------------------------------
    def argv(self) -> list[str]:
        if not self.binary:
            raise TestpmdError("dpdk-testpmd not found")
        # testpmd's stdout is a pipe: stdio would block-buffer it and the output of a command
        # would arrive after its prompt, so force it unbuffered.
        pre = ["stdbuf", "-o0", "-e0"] if shutil.which("stdbuf") else []
        eal = pre + [self.binary, "--lcores", self.lcores, "--file-prefix", f"nfvperf-tp-{self.tag}",
               "--no-pci", "--log-level", "lib.eal:warning"]
        if self.hugepages:
            eal += ["--in-memory"]
        else:
            eal += ["--no-huge", "-m", str(self.mem_mb)]
        for v in self.vdevs:
            eal += ["--vdev", v]
        app = ["--", "-i", f"--forward-mode={self.forward_mode}"]
        if not any(a.startswith("--total-num-mbufs") for a in self.app_args):
            app.append("--total-num-mbufs=16384")
        return eal + app + self.app_args

    def start(self, timeout_s: float = 60.0) -> "TestpmdPeer":
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, bufsize=0)
        self._reader = threading.Thread(target=self._read_loop, name=f"testpmd-{self.tag}", daemon=True)
        self._reader.start()
        self._wait_prompt(timeout_s)
        return self

    def _read_loop(self) -> None:
        assert self.proc and self.proc.stdout
        fd = self.proc.stdout.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            with self._cv:
                if not chunk:
                    self._cv.notify_all()
                    return
                text = chunk.decode(errors="replace")
                self._buf += text
                if self._log:
                    self._log.write(text)
                    self._log.flush()
                self._cv.notify_all()

    def _wait_prompt(self, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while PROMPT not in self._buf:
                if self.proc is None or (self.proc.poll() is not None and not self._reader_alive()):
                    raise TestpmdError(f"testpmd exited: {self.tail()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TestpmdError(f"testpmd: no prompt within {timeout_s} s: {self.tail()}")
                self._cv.wait(min(left, 0.2))
            out, _, rest = self._buf.partition(PROMPT)
            self._buf = rest
            return out

    def _reader_alive(self) -> bool:
        return bool(self._reader and self._reader.is_alive())

    def tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return self._buf[-n:]

    def cmd(self, line: str, timeout_s: float = 20.0) -> str:
        if self.proc is None or self.proc.poll() is not None:
            raise TestpmdError(f"testpmd not running: {self.tail()}")
        assert self.proc.stdin
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()
        return self._wait_prompt(timeout_s)

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin
                self.proc.stdin.write(b"quit\n")
                self.proc.stdin.flush()
            except (OSError, ValueError):
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                try:
                    self.proc.wait(5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        if self._reader:
            self._reader.join(2)
        if self._log:
            self._log.close()
            self._log = None
        shutil.rmtree(f"/var/run/dpdk/nfvperf-tp-{self.tag}", ignore_errors=True)

    def __enter__(self) -> "TestpmdPeer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- counters ---------------------------------------------------------------------------
    _NUM = r"\s*(-?\d+)"

    def port_stats(self) -> dict[int, dict[str, int]]:
        """``show port stats all`` parsed: {port: {rx_packets, rx_missed, rx_errors, rx_nombuf,
        rx_bytes, tx_packets, tx_errors, tx_bytes, rx_pps, tx_pps}}."""
        out = self.cmd("show port stats all")
        res: dict[int, dict[str, int]] = {}
        for block in re.split(r"#+ NIC statistics for port\s+", out)[1:]:
            m = re.match(r"(\d+)", block)
            if not m:
                continue
            port = int(m.group(1))
            d: dict[str, int] = {}
            for key, label in (("rx_packets", "RX-packets"), ("rx_missed", "RX-missed"),
                               ("rx_bytes", "RX-bytes"), ("rx_errors", "RX-errors"),
                               ("rx_nombuf", "RX-nombuf"), ("tx_packets", "TX-packets"),
                               ("tx_errors", "TX-errors"), ("tx_bytes", "TX-bytes"),
                               ("rx_pps", "Rx-pps"), ("tx_pps", "Tx-pps")):
                mm = re.search(re.escape(label) + r":" + self._NUM, block)
                if mm:
                    d[key] = int(mm.group(1))
            res[port] = d
        if not res:
            raise TestpmdError(f"could not parse port stats: {out[-500:]}")
        return res

    def fwd_stats(self) -> dict[int, dict[str, int]]:
        """``show fwd stats all`` parsed: {port: {rx_packets, rx_dropped, tx_packets, tx_dropped}}."""
        out = self.cmd("show fwd stats all")
        res: dict[int, dict[str, int]] = {}
        for block in re.split(r"-+ Forward statistics for port\s+", out)[1:]:
            m = re.match(r"(\d+)", block)
            if not m:
                continue
            d = {}
            for key, label in (("rx_packets", "RX-packets"), ("rx_dropped", "RX-dropped"),
                               ("tx_packets", "TX-packets"), ("tx_dropped", "TX-dropped")):
                mm = re.search(re.escape(label) + r":" + self._NUM, block)
                if mm:
                    d[key] = int(mm.group(1))
            res[int(m.group(1))] = d
        return res

    def clear(self) -> None:
        self.cmd("clear port stats all")
        self.cmd("clear fwd stats all")
