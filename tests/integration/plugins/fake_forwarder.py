"""A DUT adapter written only against nfvperf's typed interface (issue 18's demonstration).

``fake-forwarder`` cross-connects port pairs (0<->1, 2<->3, ...) in the kernel with tc: an ingress
``u32`` filter matching everything on each port redirects every frame to its pair (``mirred egress redirect``).
It asks each port's end for its kernel interface (:meth:`PortEnd.kernel_ifname`), so userspace
port kinds are refused with the end's reason, and it declares the topology kind it works on
(``topologies``), so nothing outside this module names it.  The test copies this file into a
temporary directory, loads it as a plugin of ``nfvperf.dut`` and type-checks it with mypy --strict.
"""
from __future__ import annotations

import platform
from typing import ClassVar, Optional, Sequence

from nfvperf.dut.base import DutAdapter, DutFailure, PortRef, register_dut
from nfvperf.host import netns as N
from nfvperf.host.run import ResourceTracker, RunContext


@register_dut("fake-forwarder")
class FakeForwarder(DutAdapter):
    """Kernel tc redirects between port pairs in the DUT namespace."""

    name = "fake-forwarder"
    port_kinds: ClassVar[tuple[str, ...]] = ("af_packet", "af_xdp")
    topologies: ClassVar[tuple[str, ...]] = ("p2p",)
    polling_cpus: ClassVar[int] = 0
    dpdk_ports: ClassVar[bool] = False

    def __init__(self, run: RunContext, tracker: Optional[ResourceTracker], cpus: Sequence[int] = (),
                 netns: Optional[str] = None, **options: object) -> None:
        super().__init__(run, tracker, cpus, **options)
        self.netns = netns
        self.redirects: list[tuple[str, str]] = []

    def _ifname(self, port: PortRef) -> str:
        return port.end.kernel_ifname(port, self.name)

    def _tc(self, *args: str) -> None:
        N.run_in_netns(self.netns, ["tc", *args])

    def start(self) -> None:
        if self.started:
            return
        names = [self._ifname(p) for p in self.ports]
        if len(names) % 2:
            raise DutFailure(f"{self.name} cross-connects port pairs; got {len(names)} ports")
        for a, b in zip(names[0::2], names[1::2]):
            for src, dst in ((a, b), (b, a)):
                self._tc("qdisc", "add", "dev", src, "ingress")
                self._tc("filter", "add", "dev", src, "parent", "ffff:", "protocol", "all", "u32",
                         "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", dst)
                self.redirects.append((src, dst))
                N.set_link(src, self.netns, state="up")
        if self.tracker is not None:
            self.tracker.add("dut", self.name, self.stop)
        self.started = True

    def counters(self) -> dict[str, object]:
        self.alive()
        ports = {p.name: N.link_stats(self._ifname(p), self.netns) for p in self.ports}
        total = {k: sum(s[k] for s in ports.values())
                 for k in ("rx_packets", "tx_packets", "rx_dropped", "tx_dropped")}
        return {"dut": self.name, "ports": ports, "total": total}

    def alive(self) -> None:
        if not self.started:
            raise DutFailure(f"{self.name} not started")
        if self.netns and not N.netns_exists(self.netns):
            raise DutFailure(f"DUT namespace {self.netns} is gone")

    def stop(self) -> None:
        for src, _ in self.redirects:
            N.run_in_netns(self.netns, ["tc", "qdisc", "del", "dev", src, "ingress"], check=False)
        self.redirects = []
        if self.tracker is not None:
            self.tracker.forget("dut", self.name)
        self.started = False

    def version(self) -> str:
        return f"Linux {platform.release()} tc"
