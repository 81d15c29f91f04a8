"""The stand-in at this machine's end of a guest's vhost-user cables while the guest boots
(issue 19 item 4, testbed ``nics: [{vhost: true}]``).

QEMU starts a guest only once every vhost-user NIC has a backend connected (it waits at the
netdev's set-up), but the backend here is the run's DUT or generator, which the topology starts
after the guest is up (its preflight and CPU plan are read from the booted guest).  So while the guest
boots, a ``dpdk-testpmd`` with a ``net_vhost`` client port per cable (no hugepages, no shared
config, interactive and idle: it only answers the vhost-user handshake) holds the cables; it is
stopped once the guest is up, QEMU listens again, and the DUT's own ``net_vhost`` client ports
(or OVS's ``dpdkvhostuserclient``, or tgen's ``net_vhost`` ports when the guest is the DUT)
connect as the backend after a vhost-user restart.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path
from typing import Optional, Sequence

from nfvperf.host.proc import Process
from nfvperf.host.run import ResourceTracker, RunContext

TESTPMD = "dpdk-testpmd"
DPDK_RUN = Path("/var/run/dpdk")


class VhostStandIn:
    """``VhostStandIn(run, tracker, sockets).start()`` ... ``stop()``: see the module doc."""

    def __init__(self, run: RunContext, tracker: ResourceTracker, sockets: Sequence[Path]):
        self.run, self.tracker = run, tracker
        self.sockets = [Path(s) for s in sockets]
        self.prefix = f"{run.tag}-standin"
        self.proc: Optional[Process] = None

    def argv(self) -> list[str]:
        cpus = sorted(os.sched_getaffinity(0))[:2]
        a = [shutil.which(TESTPMD) or TESTPMD, "--no-huge", "-m", "64", "--no-pci", "--no-shconf",
             f"--file-prefix={self.prefix}", "-l", ",".join(map(str, cpus))]
        a += [w for i, s in enumerate(self.sockets) for w in ("--vdev", f"net_vhost{i},iface={s},client=1")]
        # -i: interactive, not forwarding (idle); the mbuf pool fits in -m 64
        return a + ["--", "-i", "--total-num-mbufs=2048", "--no-mlockall"]

    def start(self) -> "VhostStandIn":
        if len(os.sched_getaffinity(0)) < 2:
            raise RuntimeError(f"{TESTPMD} (the vhost-user stand-in while a guest boots) needs 2 "
                               "CPUs, this process may use 1")
        self.proc = Process("vhost-standin", self.argv(), self.run, self.tracker, interactive=True)
        self.tracker.add("dir", str(DPDK_RUN / self.prefix), self._remove_dir)
        self.proc.start()
        return self

    def wait_connected(self, timeout: float = 60.0) -> None:
        """Wait until every cable has its vhost-user connection (DPDK logs ``new device`` per
        socket); raise naming the log when the stand-in exits or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        assert self.proc is not None
        while True:
            self.check()
            text = ""
            with contextlib.suppress(OSError):
                text = self.proc.log_path.read_text(errors="replace")
            if all(f"({s}) new device" in text for s in self.sockets):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the vhost-user stand-in did not connect to every cable within "
                                   f"{timeout:.0f} s (QEMU serves them); log {self.proc.log_path}:"
                                   f"\n{self.proc.log_tail()}")
            time.sleep(0.2)

    def check(self) -> None:
        """Raise (naming its log) when the stand-in exited: the guest then never boots."""
        if self.proc is not None:
            self.proc.check()

    def _remove_dir(self) -> None:
        with contextlib.suppress(OSError):
            shutil.rmtree(DPDK_RUN / self.prefix)

    def stop(self) -> None:
        """Stop it (QEMU sees the backends go and listens again) and remove its runtime dir."""
        if self.proc is not None:
            with contextlib.suppress(Exception):
                self.proc.stop()
            self.proc = None
        self._remove_dir()


__all__ = ["VhostStandIn"]
