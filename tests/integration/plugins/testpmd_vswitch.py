"""A vSwitch written only against :class:`nfvperf.dut.vswitch.VSwitch` (issue 30's proof that a new
switch is one typed module): dpdk-testpmd in io forwarding as the switch of PHY-OVS-PHY and PVP.

testpmd forwards port pairs (``--port-topology=paired``: its port 0 <-> 1, 2 <-> 3), so
:meth:`program` turns the topology's rules into pairs and orders testpmd's ports by them (PVP:
phy0 <-> vnf port 0, vnf port 1 <-> phy1); rules that are not pairs are refused.  A VNF's
vhost-user port is a ``net_vhost`` client of the VNF's socket.  testpmd takes its ports on the
command line, so a port added while it runs (a VNF's) restarts it once that port's server listens
(:meth:`connect_while`).  The test copies this file into a temporary directory and loads it as a
plugin of ``nfvperf.dut``; it declares the topologies it works on, so nothing outside names it.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Callable, ClassVar, Optional, Sequence, Union

from nfvperf.dut.base import Flow, PortRef, VhostFrontend, register_dut
from nfvperf.dut.testpmd import Testpmd
from nfvperf.dut.vswitch import VSwitch
from nfvperf.trial import DutFailure, Unsupported


@register_dut("testpmd-vswitch")
class TestpmdVSwitch(Testpmd, VSwitch):
    """testpmd (io forwarding) as a one-bridge switch of port pairs."""

    name = "testpmd-vswitch"
    __test__ = False
    port_kinds: ClassVar[tuple[str, ...]] = ("af_packet",)
    topologies: ClassVar[tuple[str, ...]] = ("p-ovs-p", "pvp")
    runs_remote: ClassVar[bool] = False

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.bridges: list[str] = ["pairs"]
        #: testpmd's port i is self.ports[order[i]]
        self.order: list[int] = []
        self.restarts = 0

    # -- ports ----------------------------------------------------------------------------------
    def _attach_port(self, port: PortRef) -> None:
        """Added while running (a VNF's port): taken in at the restart of :meth:`connect_while`."""

    def port_devargs(self, index: int, port: PortRef) -> str:
        if isinstance(port.end, VhostFrontend):       # the VNF listens, the switch connects
            return f"net_vhost{index},iface={port.socket},client=1,queues=1"
        return super().port_devargs(index, port)

    def argv(self) -> list[str]:
        ports = self.ports
        order = self.order + [i for i in range(len(ports)) if i not in self.order]
        self.ports = [ports[i] for i in order]
        try:
            return super().argv()
        finally:
            self.ports = ports

    def raw_port_stats(self) -> dict[int, dict[str, int]]:
        """Counters by :meth:`add_port` index (testpmd counts by its own port order)."""
        order = self.order + [i for i in range(len(self.ports)) if i not in self.order]
        return {order[i]: s for i, s in super().raw_port_stats().items() if i < len(order)}

    def ofport(self, index_or_name: Union[int, str]) -> int:
        if isinstance(index_or_name, str):
            index_or_name = [p.name for p in self.ports].index(index_or_name)
        return index_or_name + 1

    def vhost_socket(self, name: str) -> Path:
        return Path(f"/tmp/{self.run.tag}-vhu-{name}.sock")       # Unix socket paths: 107 bytes

    def restart(self) -> None:
        self.stop()
        self.start()
        self.restarts += 1

    def connect_while(self, start: Callable[[], None], names: Optional[Sequence[str]] = None) -> None:
        """Start the server (a VNF) in a thread; once the first of its sockets is there, restart
        testpmd with the new ports: it connects as their client, which lets the server's start go
        on.  virtio-user in server mode listens on one socket at a time and waits for its client
        before it creates the next, so waiting for all of them waited out the deadline (30 s per
        VNF); testpmd's vhost client ports reconnect to the sockets that appear later."""
        socks = [p.socket for p in self.ports if p.name in (names or ()) and p.socket is not None]
        if not socks:
            start()
            return
        errors: list[BaseException] = []

        def run() -> None:
            try:
                start()
            except BaseException as e:  # noqa: BLE001 - raised in the calling thread
                errors.append(e)

        t = threading.Thread(target=run, name=f"vswitch-peer-{self.run.tag}", daemon=True)
        t.start()
        deadline = time.monotonic() + 30
        while not any(Path(s).exists() for s in socks) and t.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        if not errors:
            self.restart()
        t.join(60)
        if errors:
            raise errors[0]
        if t.is_alive():
            raise DutFailure(f"{self.name}: the vhost-user server of {names} did not start")

    # -- rules ----------------------------------------------------------------------------------
    def program(self, flows: Optional[Sequence[Union[Flow, str]]] = None, bridge: Optional[str] = None,
                replace: bool = True, method: str = "bundle") -> Optional[Path]:
        """Port pairs from ``flows`` (each pair both ways, no matches); testpmd restarts when
        its port order changes."""
        if flows is None:
            return None
        pairs: list[tuple[int, int]] = []
        for f in flows:
            if not isinstance(f, Flow) or f.match:
                raise Unsupported(f"{self.name} forwards port pairs; it cannot express {f!r}")
            if (f.out_port, f.in_port) not in pairs:
                pairs.append((f.in_port, f.out_port))
        want = {(f.in_port, f.out_port) for f in flows if isinstance(f, Flow)}
        if want != {*pairs, *[(b, a) for a, b in pairs]}:
            raise Unsupported(f"{self.name} forwards pairs both ways; {sorted(want)} is not that")
        order = [i for pair in pairs for i in pair]
        rest = [i for i in range(len(self.ports)) if i not in order]
        running = self.order + [i for i in range(len(self.ports)) if i not in self.order]
        self.order = order
        if self.started and order + rest != running:
            self.restart()
        return None

    def ports_down(self, names: Sequence[str]) -> list[str]:
        """Ports that testpmd reports with link down (``show port info``)."""
        order = self.order + [i for i in range(len(self.ports)) if i not in self.order]
        down = []
        for name in names:
            i = order.index([p.name for p in self.ports].index(name))
            if "Link status: up" not in self._console(f"show port info {i}"):
                down.append(name)
        return down

    def tx_queues(self) -> int:
        return self.queues
