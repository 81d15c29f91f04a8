"""The kernel baseline: a Linux bridge in the DUT namespace with the veth DUT ends enslaved.

``mode="pairs"`` (default) makes one bridge per port pair (``<tag>br0`` = d0+d1, ``<tag>br1`` =
d2+d3), the kernel equivalent of testpmd's paired forwarding and of a cross-connect flow table;
``mode="single"`` puts every port in one bridge (RFC 2889 address-learning tests).  STP is off and
the forward delay 0, so ports forward at once.

``program(None)`` leaves the bridge learning and flooding; ``program([Flow(0, 1, {"dst_mac": m})])``
adds static FDB entries (``bridge fdb add m dev <port> master static``) so frames to known MACs
are never flooded.  Counters are the kernel link statistics of the bridge ports.

Only veth / kernel interfaces can be bridged; PCI ports must stay with a kernel driver for this DUT.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import platform
from typing import ClassVar, Literal, Optional, Sequence, Union

from pydantic import Field

from nfvperf.host import netns as N
from nfvperf.host.cpu import PinningPlan
from nfvperf.host.run import ResourceTracker, RunContext
from nfvperf.trial import Unsupported

from .base import AdapterOptions, DutAdapter, DutFailure, Flow, PortRef, TopologyView, register_dut
from .port_end import phy_end
from .vswitch import VSwitch

log = logging.getLogger(__name__)


# the suite's ``topology.linux_bridge:`` section
class LinuxBridgeSpec(AdapterOptions):
    mode: Literal["pairs", "single"] = Field(
        "pairs", description="one bridge per port pair (cross-connect) or all ports in one bridge")
    ageing_s: float = Field(300.0, ge=0)


@register_dut("linux-bridge")
class LinuxBridge(DutAdapter, VSwitch):
    name = "linux-bridge"
    #: the kernel counters of its veth ends (IFLA_STATS64); no polling threads, no flow cache
    telemetry_offers: ClassVar[frozenset[str]] = DutAdapter.telemetry_offers
    options_key = "linux_bridge"
    options_model = LinuxBridgeSpec
    port_kinds = ("af_packet", "af_xdp")      # bridges kernel interfaces (veth), not PCI NICs
    polling_cpus = 0                           # forwards in softirq context, no polling thread
    dpdk_ports = False                         # the kernel's veth path: jumbo MTUs (TCP tests)
    tracker: ResourceTracker        # required here (the base class allows None)

    @classmethod
    def options(cls, spec: TopologyView) -> Optional[LinuxBridgeSpec]:
        return cls.options_as(spec, LinuxBridgeSpec)

    @classmethod
    def spec_options(cls, spec: TopologyView) -> dict[str, object]:
        lb = cls.options(spec)
        return {} if lb is None else dict(mode=lb.mode, ageing_s=lb.ageing_s)

    @classmethod
    def adjust_plan(cls, plan: PinningPlan, spec: TopologyView) -> None:
        if phy_end(spec.port_kind).pci_device:
            return
        # veth transmit runs the receiving side (bridge, peer veth) in the sender's softirq:
        # the kernel DUT forwards on the generator's CPU
        plan.cores_shared = True
        plan.warnings.append("CORES SHARED: the Linux bridge forwards in softirq context on "
                             "the CPU that transmits into the veth, i.e. the generator's "
                             f"CPU(s) {plan.cpus('tgen')}; results are a lower bound")

    def __init__(self, run: RunContext, tracker: ResourceTracker, cpus: Sequence[int] = (),
                 netns: Optional[str] = None, mode: str = "pairs", ageing_s: float = 300.0,
                 **options: object):
        super().__init__(run, tracker, cpus, **options)
        if mode not in ("pairs", "single"):
            raise ValueError(f"mode must be pairs | single, not {mode!r}")
        self.netns = netns
        self.mode = mode
        self.ageing_s = ageing_s
        self.bridges: list[str] = []
        self.port_bridge: dict[str, str] = {}
        self.static_fdb: list[tuple[str, str]] = []

    def _groups(self) -> list[list[PortRef]]:
        if self.mode == "single":
            return [list(self.ports)]
        return [self.ports[i:i + 2] for i in range(0, len(self.ports), 2)]

    def _check_port(self, port: PortRef) -> None:
        self._ifname(port)
        if port.netns != self.netns:
            raise ValueError(f"port {port.ifname} is in netns {port.netns}, the bridge in {self.netns}")

    @staticmethod
    def _ifname(port: PortRef) -> str:
        """The port's kernel interface (its end refuses userspace ports)."""
        return port.end.kernel_ifname(port, "linux-bridge")

    def _attach_port(self, port: PortRef) -> None:
        self._check_port(port)
        self._enslave(port, self.bridges[-1])

    def _enslave(self, port: PortRef, br: str) -> None:
        with N.ipr(self.netns) as h:
            bidx = h.link_lookup(ifname=br)[0]
            pidx = h.link_lookup(ifname=port.ifname)[0]
            h.link("set", index=pidx, master=bidx)
            h.link("set", index=pidx, state="up")
        self.port_bridge[self._ifname(port)] = br

    def start(self) -> None:
        if self.started:
            return
        for p in self.ports:
            self._check_port(p)
        for k, group in enumerate(self._groups()):
            br = self.run.ifname(f"br{k}")
            with N.ipr(self.netns) as h:
                h.link("add", ifname=br, kind="bridge", br_stp_state=0, br_forward_delay=0,
                       br_ageing_time=int(self.ageing_s * 100), br_mcast_snooping=0)
            self.bridges.append(br)
            self.tracker.add("bridge", br, functools.partial(self._delete_bridge, br))
            N.disable_ipv6(br, self.netns)
            mtu = max([p.mtu for p in group] or [1500])
            N.set_link(br, self.netns, mtu=mtu)
            for p in group:
                self._enslave(p, br)
            N.set_link(br, self.netns, state="up")
        self.started = True

    def _delete_bridge(self, br: str) -> None:
        with contextlib.suppress(Exception):
            N.delete_link(br, self.netns)

    def program(self, flows: Optional[Sequence[Union[Flow, str]]] = None, bridge: Optional[str] = None,
                replace: bool = True, method: str = "bundle") -> None:
        """None: learn and flood.  Flows with ``match["dst_mac"]``: static FDB entries that send
        that MAC out of ``out_port``; a rule in another syntax is Unsupported."""
        if not flows:
            return
        for f in flows:
            if isinstance(f, str):
                raise Unsupported(f"linux-bridge forwards by MAC learning and static FDB entries, not by rule {f!r}")
            mac = f.match.get("dst_mac")
            if not mac:
                continue   # port-to-port forwarding is what the bridge does anyway
            ifname = self._ifname(self.ports[f.out_port])
            N.run_in_netns(self.netns, ["bridge", "fdb", "replace", mac, "dev", ifname,
                                        "master", "static"])
            self.static_fdb.append((mac, ifname))

    def counters(self) -> dict[str, object]:
        self.alive()
        ports = {p.name: N.link_stats(self._ifname(p), self.netns) for p in self.ports}
        bridges = {br: N.link_stats(br, self.netns) for br in self.bridges}
        tot = {k: sum(s[k] for s in ports.values()) for k in ("rx_packets", "tx_packets",
                                                              "rx_dropped", "tx_dropped")}
        return {"dut": self.name, "ports": ports, "bridges": bridges, "total": tot}

    def fdb(self) -> list[str]:
        cp = N.run_in_netns(self.netns, ["bridge", "fdb", "show"], check=False)
        return cp.stdout.splitlines()

    def alive(self) -> None:
        if not self.started:
            raise DutFailure("linux-bridge not started")
        if self.netns and not N.netns_exists(self.netns):
            raise DutFailure(f"DUT namespace {self.netns} is gone")
        with N.ipr(self.netns) as h:          # one netlink socket for all bridges
            for br in self.bridges:
                if not h.link_lookup(ifname=br):
                    raise DutFailure(f"bridge {br} is gone")

    def stop(self) -> None:
        for br in self.bridges:
            self._delete_bridge(br)
            self.tracker.forget("bridge", br)
        self.bridges = []
        self.port_bridge = {}
        self.started = False

    def version(self) -> str:
        return f"Linux {platform.release()}"

    def environment(self) -> dict[str, object]:
        env = super().environment()
        env.update({"netns": self.netns, "mode": self.mode, "bridges": list(self.bridges),
                    "static_fdb": len(self.static_fdb),
                    "note": "kernel forwarding: softirq on whichever CPU handles the veth; "
                            "not pinned"})
        return env
