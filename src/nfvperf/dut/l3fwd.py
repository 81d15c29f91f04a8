"""DPDK's l3fwd example as a DUT (``dut: l3fwd``, PHY-PHY): the seeds' host baseline (seed 000
§7.1, seed 002's "physical L3fwd").

The binary is built by ``scripts/build-l3fwd.sh`` (install-deps, ``make build``) from the sources
Debian's ``dpdk-doc`` ships, into ``build/l3fwd/l3fwd`` (or ``$NFVPERF_L3FWD``).  It forwards by
IP destination: ``lpm`` (longest prefix match, one route per port) or ``em`` (exact match on the
5-tuple, one entry per flow and direction); the routes come from :mod:`nfvperf.dut.l3fwd_routes`,
written to ``--rule_ipv4`` / ``--rule_ipv6`` files in the run directory, and the generator's
streams get the matching addresses (:meth:`L3fwd.stream_params`).  l3fwd rewrites the Ethernet
header: source = its port's MAC, destination = ``--eth-dest`` of the output port, the generator's
MAC of that port (tgen also runs promiscuous).  l3fwd runs promiscuous (``-P``): the generator
addresses its frames to its own RX port, not to l3fwd.

Cores: ``l3fwd.cores``/``ht`` (physical cores resolved from the sibling map, as for testpmd and
OVS) or one CPU of the plan; every lcore forwards, the main lcore included (the seed's ``l3fwd -c
0xc --config "(0,0,2)(1,0,3)..."``).  ``l3fwd.queues`` RX queues per port are dealt round-robin
to the lcores, queue-major ((port 0, queue 0) -> lcore 0, (port 1, queue 0) -> lcore 1, ...);
lcores without a queue stay idle.  l3fwd sends on one TX queue per lcore and port, which shapes
the ports: net_af_packet opens ``max(queues, lcores)`` queue pairs (it has a socket per queue pair,
each receiving part of the frames, so all are polled); net_af_xdp on veth has one queue, so one
lcore and one queue; the generator's virtio-user (vhost) and memif ends open one ring per l3fwd
lcore (:meth:`peer_queues`, :meth:`tx_queues`).

Counters: l3fwd has no console; they are read from DPDK's telemetry socket
(``/var/run/dpdk/<file-prefix>/dpdk_telemetry.v2``, ``/ethdev/stats,<port>``), counted from the
last :meth:`clear_counters` (a snapshot).
"""
from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import signal
from pathlib import Path
from typing import Any, Literal, Optional, Protocol, Sequence

from pydantic import Field, model_validator

from nfvperf.host.cpu import CoreRequest, CoreRequestError, format_cpulist, parse_cpulist
from nfvperf.host.dpdk_telemetry import DpdkTelemetry, HostTelemetry, TelemetryError, ethdev_counters, \
    socket_path
from nfvperf.host.preflight import Needs, check_tool
from nfvperf.host.run import ResourceTracker, RunContext
from nfvperf.tg.sim_model import SimTraits

from .base import AdapterOptions, DpdkProcessDut, DutFailure, Flow, PortRef, ProcessError, Unsupported, \
    TopologyView, cross_connect_only, eal_port_options, register_dut
from .port_end import phy_end
from .l3fwd_routes import AddressPlan, check_routes, em_rules, lpm_rules

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[3]
#: where scripts/build-l3fwd.sh builds it
BUILD_PATH = REPO / "build" / "l3fwd" / "l3fwd"
ENV = "NFVPERF_L3FWD"
#: where l3fwd is looked for on a testbed's DUT host (a guest of the testbed gets this checkout's
#: build there at boot: nfvperf.vm.pci_overlay.GUEST_L3FWD)
REMOTE_PATHS = ("/usr/bin/nfvperf-l3fwd", "/usr/local/bin/l3fwd", "/usr/local/bin/dpdk-l3fwd")
BUILD_FIX = ("make build (scripts/build-l3fwd.sh builds it from dpdk-doc's "
             "/usr/share/dpdk/examples/l3fwd into build/l3fwd/), or set NFVPERF_L3FWD")
#: l3fwd's lines once every lcore runs (or has no queue to poll)
READY = r"entering main loop on lcore|has nothing to do"
#: l3fwd's link wait begins (main.c check_all_ports_link_status: up to 9 s, dots every 100 ms)
LINK_CHECK = r"Checking link status"
#: RX queues one lcore can poll (MAX_RX_QUEUE_PER_LCORE in l3fwd.h)
MAX_RX_QUEUE_PER_LCORE = 16
#: the largest MTU: l3fwd's mbufs hold 2048 B of frame (RTE_MBUF_DEFAULT_BUF_SIZE) and it
#: enables no scattered RX
MAX_MTU = 1500
#: hugepage memory (MB) of the lookup tables (measured: LPM ~210 MB, EM ~540 MB with 8192 mbufs)
TABLES_MB = {"lpm": 192, "em": 528}
MBUF_KB = 2.5
#: rule files larger than this many lines are deleted once l3fwd has read them (a 1M-flow EM
#: table is ~90 MB)
KEEP_RULE_LINES = 200_000


def find_l3fwd() -> str:
    """``$NFVPERF_L3FWD``, else ``build/l3fwd/l3fwd`` of this checkout (or of the cwd)."""
    env = os.environ.get(ENV)
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise FileNotFoundError(f"{ENV}={env} is not an executable file")
        return env
    for p in (BUILD_PATH, Path.cwd() / "build" / "l3fwd" / "l3fwd"):
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    raise FileNotFoundError(f"l3fwd not built: {BUILD_FIX}")


def l3fwd_check(required: Sequence[str] = ()) -> Any:
    return check_tool("binary:l3fwd", find_l3fwd, BUILD_FIX, required=True)


# the suite's ``topology.l3fwd:`` section
class L3fwdSpec(AdapterOptions):
    alternatives = (("cores", "cpus"),)
    mode: Literal["lpm", "em"] = Field("lpm", description="route lookup: lpm (longest prefix match, "
                                       "one route per port) or em (exact match, one entry per flow "
                                       "and direction)")
    cores: Optional[int] = Field(
        None, ge=1, le=64, description="forwarding cores as a count of physical cores, resolved "
        "from the host's sibling map (default: one CPU of the plan); every lcore forwards")
    ht: bool = Field(False, description="with cores: lcores on both hyper-threads of each core")
    cpus: Optional[str] = Field(
        None, description="the lcores' CPUs as a CPU list ('10,11' or '10-11'), one lcore each, "
        "instead of cores (NUMA placement: the seed's l3fwd -c masks)")
    queues: int = Field(1, ge=1, le=16, description="RX queues per port, dealt round-robin to the "
                        "lcores (the seed's '1 TX/RX queue per port'); lcores beyond ports x "
                        "queues stay idle")
    rxd: int = Field(1024, ge=64, le=8192, description="RX descriptors per queue (--rx-queue-size)")
    txd: int = Field(1024, ge=64, le=8192, description="TX descriptors per queue (--tx-queue-size)")
    flows: Optional[int] = Field(
        None, ge=1, le=16_777_216, description="flows per direction the routes are made for "
        "(default: each test's traffic.flows_per_port; tests with other flow counts run on their "
        "own l3fwd)")
    ip_version: Optional[Literal[4, 6]] = Field(
        None, description="IP version of the generator's streams and of the exact-match entries "
        "(default: each test's traffic.ip_version)")
    binary: Optional[str] = Field(
        None, description="the l3fwd binary to run, a DUT build (default: $NFVPERF_L3FWD or "
        "build/l3fwd/l3fwd); two builds in one run: a study axis topology.l3fwd.binary: [A, B] with "
        "rounds, gated by nfvperf gate --ab (suites/ab-l3fwd.yaml)")

    @model_validator(mode="after")
    def _ht_needs_cores(self) -> "L3fwdSpec":
        if self.ht and self.cores is None:
            raise ValueError("ht: true applies to cores (both hyper-threads of each core); give cores")
        if self.cpus is not None:
            if self.cores is not None:
                raise ValueError(f"give cores ({self.cores}) or cpus ({self.cpus!r}), not both")
            try:
                ok = bool(parse_cpulist(self.cpus))
            except ValueError:
                ok = False
            if not ok:
                raise ValueError(f"cpus: a CPU list such as '2,3' or '2-5', not {self.cpus!r}")
        return self

    def sim_traits(self) -> SimTraits:
        return SimTraits(pmd_cores=self.cores or None, ht=self.ht, n_rxq=self.queues or 1)


def lcore_count(opts: Optional[L3fwdSpec]) -> int:
    """Forwarding lcores the options ask for (1 without ``cores`` or ``cpus``)."""
    if opts is not None and opts.cpus:
        return len(parse_cpulist(opts.cpus))
    if opts is None or opts.cores is None:
        return 1
    return int(opts.cores) * (2 if opts.ht else 1)


class PathView(Protocol):
    """What :func:`problems` reads of the path: a TopologySpec's (:class:`TopologyView`), or
    an instance's own ports when it was built without one (:class:`_SpecView`)."""

    @property
    def port_kind(self) -> str: ...

    @property
    def ports(self) -> int: ...

    @property
    def mtu(self) -> int: ...


def spec_ports(spec: Optional[PathView]) -> int:
    """The ports a spec declares (``ports``; the PCI addresses are checked by the pci kind)."""
    return int(spec.ports or 2) if spec is not None else 2


def rx_queues_per_port(port_kind: str, queues: int, lcores: int) -> int:
    """RX queues l3fwd opens and polls per port: ``queues``, but ``max(queues, lcores)`` when the
    kind's end polls one RX queue per lcore (net_af_packet: one socket each, each gets part of
    the frames)."""
    return max(queues, lcores) if phy_end(port_kind).rx_queue_per_lcore else queues


def problems(spec: PathView, opts: L3fwdSpec, flows: int, lcores: Optional[int] = None) -> list[str]:
    """Why l3fwd with ``opts`` (on ``lcores`` lcores, default: what the options ask for) cannot
    run ``spec`` (a TopologySpec) for ``flows`` flows per direction; each message names the
    field and the fix."""
    out = []
    pk = str(spec.port_kind)
    mtu = int(spec.mtu or 1500)
    if mtu > MAX_MTU:
        out.append(f"topology.mtu: l3fwd's mbufs hold 2048 B frames (DPDK's default buffer size) and it "
                   f"enables no scattered RX, so its ports carry MTU {MAX_MTU} at most, not {mtu}; lower "
                   f"topology.mtu or use dut testpmd")
    w = lcore_count(opts) if lcores is None else lcores
    q = int(opts.queues or 1)
    if phy_end(pk).single_queue and (w > 1 or q > 1):
        which = ("cpus" if opts.cpus else "cores") if w > 1 else "queues"
        out.append(f"topology.l3fwd.{which}: l3fwd sends on one TX queue per "
                   f"lcore and net_af_xdp on veth has one queue, so port_kind af_xdp takes one lcore "
                   f"and one queue ({w} lcore(s), {q} queue(s) asked); use port_kind af_packet, vhost or "
                   f"memif for more")
    ports = spec_ports(spec)
    per_lcore = -(-ports * rx_queues_per_port(pk, q, w) // w)
    if per_lcore > MAX_RX_QUEUE_PER_LCORE:
        out.append(f"topology.l3fwd.queues: {ports} ports x {rx_queues_per_port(pk, q, w)} RX queues on "
                   f"{w} lcore(s) is {per_lcore} queues per lcore, l3fwd polls at most "
                   f"{MAX_RX_QUEUE_PER_LCORE}; lower queues or add cores")
    why = check_routes(opts.mode or "lpm", ports, flows)
    if why:
        out.append(why)
    return out


@register_dut("l3fwd")
class L3fwd(DpdkProcessDut):
    """DPDK's l3fwd routing between the emulated (or real) PHY ports of p2p; its counters come
    from DPDK telemetry (``/ethdev/stats``)."""

    name = "l3fwd"
    options_key = "l3fwd"
    options_model = L3fwdSpec
    #: veth (af_packet/af_xdp vdevs in the DUT namespace), vhost-user (net_vhost as client of the
    #: generator's virtio-user), memif (net_memif server), real NICs
    port_kinds = ("af_packet", "af_xdp", "vhost", "memif", "pci")
    #: runs on a testbed's DUT host (``host=``: over SSH, or in a QEMU guest of the testbed)
    runs_remote = True

    # -- what the class declares ---------------------------------------------------------------
    @classmethod
    def options(cls, spec: TopologyView) -> Optional[L3fwdSpec]:
        return cls.options_as(spec, L3fwdSpec)

    @classmethod
    def core_request(cls, spec: TopologyView) -> Optional[CoreRequest]:
        opts = cls.options(spec)
        if opts is None or opts.cores is None:
            return None
        return CoreRequest("topology.l3fwd.cores", int(opts.cores), bool(opts.ht), "topology.l3fwd.ht")

    @classmethod
    def adjust_plan(cls, plan: Any, spec: TopologyView) -> None:
        """``l3fwd.cpus``: the DUT's lcores on exactly those CPUs (each must be on the host)."""
        opts = cls.options(spec)
        if opts is None or not opts.cpus:
            return
        cpus = parse_cpulist(opts.cpus)
        online = parse_cpulist(str((plan.topology or {}).get("online") or ""))
        missing = [c for c in cpus if online and c not in online]
        if missing:
            raise CoreRequestError(f"topology.l3fwd.cpus: CPU(s) {format_cpulist(missing)} are not on "
                                   f"this host (online: {format_cpulist(online)}); give CPUs it has "
                                   f"or cores: N")
        plan.roles["dut"] = cpus
        shared = sorted(set(cpus) & {c for r, cs in plan.roles.items() if r != "dut" for c in cs})
        if shared:
            plan.cores_shared = True
            plan.warnings.append(f"topology.l3fwd.cpus {opts.cpus}: CPU(s) {format_cpulist(shared)} "
                                 f"also poll for another role")

    @classmethod
    def hugepage_demand_mb(cls, spec: TopologyView) -> int:
        opts = cls.options(spec) or L3fwdSpec()
        ports, w = spec_ports(spec), lcore_count(opts)
        rxq = rx_queues_per_port(str(spec.port_kind), opts.queues, w)
        mbufs = max(ports * rxq * opts.rxd + ports * w * 32 + ports * w * opts.txd + w * 256, 8192)
        return int(TABLES_MB[opts.mode] + mbufs * MBUF_KB / 1024) + 16

    @classmethod
    def preflight_needs(cls, spec: Any) -> Needs:
        needs = super().preflight_needs(spec)
        needs.checks.append(l3fwd_check)
        return needs

    @classmethod
    def fit_traffic(cls, spec: Any, traffic: Any) -> Any:
        """The topology spec a test with ``traffic`` runs on: ``l3fwd.flows`` / ``ip_version``
        from the test's traffic where the suite leaves them out; ValueError naming the field when
        l3fwd cannot carry the traffic (VLAN or VXLAN frames, more flows than its routes, a route
        table that cannot hold them, an MTU above 1500, cores or queues the port kind cannot
        take)."""
        opts = cls.options(spec) or L3fwdSpec()
        want_flows = int(getattr(traffic, "flows_per_port", 1) or 1)
        want_ip = int(getattr(traffic, "ip_version", 4) or 4)
        out: list[str] = []
        if getattr(traffic, "vlan", None) is not None:
            out.append("traffic.vlan: l3fwd routes untagged IPv4/IPv6 frames (a VLAN-tagged frame "
                       "is not IP to its packet-type parser and goes back out of the port it came "
                       "in on); leave traffic.vlan out or use dut testpmd")
        if getattr(traffic, "vxlan", False):
            out.append("traffic.vxlan: l3fwd routes the outer header of a VXLAN frame, whose "
                       "addresses are not the streams' (the frames go back out of their input "
                       "port); leave traffic.vxlan out or use kind vxlan")
        if opts.flows is not None and opts.flows < want_flows:
            out.append(f"topology.l3fwd.flows: its routes are made for {opts.flows:,} flows per "
                       f"direction, the test sends {want_flows:,} (traffic.flows_per_port); raise "
                       f"topology.l3fwd.flows or leave it out (then it follows each test)")
        if opts.ip_version is not None and opts.ip_version != want_ip:
            out.append(f"topology.l3fwd.ip_version: {opts.ip_version}, but the test sends IPv"
                       f"{want_ip} (traffic.ip_version); leave topology.l3fwd.ip_version out")
        flows = opts.flows if opts.flows is not None else want_flows
        out += problems(spec, opts, flows)
        if out:
            raise ValueError("; ".join(out))
        if opts.flows == flows and opts.ip_version == want_ip:
            return spec
        section = opts.model_copy(update={"flows": flows, "ip_version": want_ip})
        return spec.model_copy(update={"l3fwd": section})

    @classmethod
    def describe_options(cls, section: dict[str, Any]) -> list[str]:
        out = []
        if section.get("mode", "lpm") != "lpm":
            out.append(str(section["mode"]).upper())
        if section.get("cpus"):
            out.append(f"CPUs {section['cpus']}")
        if section.get("cores"):
            out.append(f"{section['cores']} core{'s' if section['cores'] != 1 else ''}"
                       + (" + HT" if section.get("ht") else ""))
        if section.get("queues", 1) != 1:
            out.append(f"{section['queues']} queues")
        return out

    # -- an instance ---------------------------------------------------------------------------
    def __init__(self, run: RunContext, tracker: ResourceTracker, cpus: Sequence[int] = (),
                 netns: Optional[str] = None, eth_peers: Optional[Sequence[Optional[str]]] = None,
                 start_timeout_s: float = 60.0, *, spec: Optional[TopologyView] = None, **options: Any):
        super().__init__(run, tracker, cpus, spec=spec, **options)
        self.spec = spec
        self.opts: L3fwdSpec = (self.options(spec) if spec is not None else None) or L3fwdSpec()
        self.netns = netns
        self.eth_peers = list(eth_peers or [])
        self.lcore_cpus = list(self.cpus) or [0]
        self.mode = self.opts.mode
        self.flows = int(self.opts.flows or 1)
        self.ip_version = int(self.opts.ip_version or 4)
        self.proc_name = f"l3fwd-{self.role}"
        self.start_timeout_s = start_timeout_s
        self._launched = False                  # launch() done, await_ready() not yet
        self._launch_out = ""                   # its console output up to the link check
        self.dpdk_telemetry: Optional[DpdkTelemetry] = None
        self.port_ids: list[int] = []           # DPDK port id of each add_port index
        self.rule_files: dict[str, Any] = {}    # on self.host too when it runs there
        self.offload_notes: list[str] = []

    # -- layout --------------------------------------------------------------------------------
    @property
    def lcores(self) -> int:
        return len(self.lcore_cpus)

    def port_kind(self) -> str:
        """The spec's port kind (what the ports' devargs and queue counts follow)."""
        if self.spec is not None:
            return str(self.spec.port_kind)
        return self.ports[0].end.port_kind if self.ports else "af_packet"

    def rx_queues(self) -> int:
        return rx_queues_per_port(self.port_kind(), self.opts.queues, self.lcores)

    def tx_queues(self) -> int:
        """l3fwd sends on one TX queue per lcore (a memif peer polls as many rings)."""
        return self.lcores

    def peer_queues(self) -> int:
        """Queue pairs the generator's virtio-user end must offer: one per l3fwd TX queue."""
        return self.lcores

    def dpdk_port_ids(self) -> list[int]:
        """The DPDK port id of each port: the --vdev order, or for NICs the PCI bus order (DPDK
        probes the allowed devices sorted by address)."""
        if any(p.end.pci_device for p in self.ports):
            addrs = [_norm_pci(str(p.pci)) for p in self.ports]
            order = sorted(range(len(addrs)), key=lambda i: addrs[i])
            return [order.index(i) for i in range(len(addrs))]
        return list(range(len(self.ports)))

    def lcore_config(self) -> list[tuple[int, int, int]]:
        """l3fwd's --config: (DPDK port id, queue, lcore), queue-major, dealt round-robin."""
        n = len(self.ports)
        ids = self.port_ids or self.dpdk_port_ids()
        return [(ids[i], q, (q * n + i) % self.lcores) for q in range(self.rx_queues()) for i in range(n)]

    def port_devargs(self, index: int, port: PortRef) -> str:
        # enough queue pairs for l3fwd's RX queues and its TX queue per lcore
        return port.dpdk_devargs(index, max(self.rx_queues(), self.lcores))

    def address_plan(self) -> AddressPlan:
        return AddressPlan.make(len(self.ports) or spec_ports(self.spec), self.flows)

    def route_lines(self) -> tuple[Any, Any]:
        """(IPv4 lines, IPv6 lines) of the route files, in DPDK port ids."""
        plan = self.address_plan()
        v4, v6 = lpm_rules(plan) if self.mode == "lpm" else em_rules(plan, self.ip_version)
        ids = self.port_ids or self.dpdk_port_ids()

        def remap(lines: Any) -> Any:
            for ln in lines:
                head, _, out = ln.rpartition(" ")
                yield f"{head} {ids[int(out)]}"
        return remap(v4), remap(v6)

    def write_rules(self) -> dict[str, Any]:
        v4, v6 = self.route_lines()
        files: dict[str, Any] = {}
        for ver, lines in (("v4", v4), ("v6", v6)):
            path = self.run.path(f"{self.proc_name}-{self.mode}-{ver}.cfg")
            n = 0
            with open(path, "w") as f:
                f.write(f"# nfvperf: l3fwd {self.mode} routes, {self.flows} flows per direction, "
                        f"{len(self.ports)} ports\n")
                for ln in lines:
                    f.write(ln + "\n")
                    n += 1
            files[ver] = {"path": str(path), "rules": n}
            if self.remote:             # l3fwd reads them on its host
                root = f"{self.host.work_dir}/{self.run.tag}"
                there = f"{root}/{path.name}"
                if ("dir", f"{self.host.name}:{root}") not in self.tracker.items():
                    self.tracker.add("dir", f"{self.host.name}:{root}",
                                     functools.partial(self.host.rmtree, root))
                self.host.mkdir(root)
                self.host.put(path, there)
                files[ver]["host_path"] = there
        return files

    def binary(self) -> str:
        """l3fwd's path on the host it runs on (``l3fwd.binary`` when the suite names a build)."""
        path = self.opts.binary
        if path is not None:
            ok = self.host.exists(path) if self.remote else os.path.isfile(path) and os.access(path, os.X_OK)
            if not ok:
                raise DutFailure(f"topology.l3fwd.binary: {path} is not an executable file"
                                 f"{' on ' + self.host.name if self.remote else ''}; give the path of an "
                                 "l3fwd build (scripts/build-l3fwd.sh builds one)")
            return path
        if not self.remote:
            return find_l3fwd()
        for cand in REMOTE_PATHS:
            if self.host.exists(cand):
                return cand
        raise DutFailure(f"{self.proc_name}: no l3fwd on {self.host.name} (looked for "
                         f"{', '.join(REMOTE_PATHS)}): install a build of DPDK's l3fwd example there")

    def argv(self) -> list[str]:
        eal = [self.binary(), "--lcores", ",".join(f"{i}@{c}" for i, c in enumerate(self.lcore_cpus)),
               "--file-prefix", self.file_prefix, "--log-level", "lib.eal:notice"]
        eal += eal_port_options(self.ports)
        for i, p in enumerate(self.ports):
            eal += p.eal_args(self.port_devargs(i, p))
        ids = self.port_ids or self.dpdk_port_ids()
        app = ["--", "-p", hex((1 << len(self.ports)) - 1), "-P", f"--lookup={self.mode}",
               "--config", "".join(f"({p},{q},{c})" for p, q, c in self.lcore_config()),
               "--parse-ptype", f"--rx-queue-size={self.opts.rxd}",
               f"--tx-queue-size={self.opts.txd}",
               f"--rule_ipv4={self.rule_file('v4')}", f"--rule_ipv6={self.rule_file('v6')}"]
        if self.mode == "em" and self.ip_version == 6:
            app.append("--ipv6")       # l3fwd fills one exact-match hash: IPv4's, or with this IPv6's
        for i, mac in enumerate(self.eth_peers[:len(self.ports)]):
            if mac:
                app.append(f"--eth-dest={ids[i]},{mac}")
        return eal + app

    def rule_file(self, ver: str) -> str:
        f = self.rule_files[ver]
        return str(f.get("host_path") or f["path"])

    # -- life cycle ----------------------------------------------------------------------------
    def _attach_port(self, port: PortRef) -> None:
        raise Unsupported("l3fwd takes its ports on the command line: add_port() before start()")

    def check(self) -> None:
        """ValueError naming the field when this instance cannot run (before anything starts)."""
        if len(self.ports) < 2 or len(self.ports) % 2:
            raise ValueError(f"topology.ports: l3fwd forwards between port pairs, got {len(self.ports)} ports")
        spec = self.spec if self.spec is not None else _SpecView(self.port_kind(), len(self.ports),
                                                                  max(p.mtu for p in self.ports))
        why = problems(spec, self.opts, self.flows, self.lcores)
        if why:
            raise ValueError("; ".join(why))

    def start(self) -> None:
        self.launch()
        self.await_ready()

    def launch(self) -> None:
        """Start l3fwd up to its link check ("Checking link status": it waits up to 9 s for every
        port's link, and a vhost-user or memif link comes up only when the generator attaches);
        :meth:`await_ready` waits for its main loop."""
        if self.started or self._launched:
            return
        self.check()
        self.port_ids = self.dpdk_port_ids()
        self.rule_files = self.write_rules()
        proc = self._spawn()
        entries = sum(int(f["rules"]) for f in self.rule_files.values())
        try:
            self._launch_out = proc.expect(f"{LINK_CHECK}|{READY}", self.start_timeout_s + entries / 20_000)
        except ProcessError as e:
            raise DutFailure(str(e)) from None
        self._launched = True

    def await_ready(self) -> None:
        if self.started:
            return
        if not self._launched or self.proc is None:
            raise DutFailure(f"{self.proc_name}: await_ready() before launch()")
        out = self._launch_out
        if not re.search(READY, out):
            try:
                out += self.proc.expect(READY, self.start_timeout_s)
            except ProcessError as e:
                raise DutFailure(str(e)) from None
        self.offload_notes = re.findall(r"nfvperf-l3fwd: (port \d+: [^\r\n]*)", out)
        self.dpdk_telemetry = HostTelemetry(self.host, socket_path(self.file_prefix)) if self.remote \
            else DpdkTelemetry(socket_path(self.file_prefix))
        try:
            greeting = self.dpdk_telemetry.connect(wait_s=10.0)
            self.rte_version = str(greeting.get("version", ""))
            self.port_macs = self._read_port_macs()
        except TelemetryError as e:
            raise DutFailure(f"{self.proc_name}: {e}; log {self.proc.log_path}") from None
        self.started = True
        self._baseline = {}
        self._trim_rule_files()

    def _read_port_macs(self) -> list[str]:
        assert self.dpdk_telemetry is not None
        ids = self.dpdk_telemetry.command("/ethdev/list")
        names = {int(str(i)): self.dpdk_telemetry.command(f"/ethdev/info,{i}")
                 for i in (ids if isinstance(ids, list) else [])}
        macs = []
        for i, p in enumerate(self.ports):
            info = names.get(self.port_ids[i])
            if not isinstance(info, dict):
                raise DutFailure(f"{self.proc_name}: port {p.name} (DPDK port {self.port_ids[i]}) did "
                                 f"not come up; log {self.proc.log_path if self.proc else '?'}")
            if p.end.pci_device and _norm_pci(str(info.get("name", ""))) != _norm_pci(str(p.pci)):
                raise DutFailure(f"{self.proc_name}: DPDK port {self.port_ids[i]} is "
                                 f"{info.get('name')}, expected {p.pci} (port {p.name})")
            macs.append(str(info.get("mac_addr", "")).lower())
        return macs

    def _trim_rule_files(self) -> None:
        """Rule files of more than :data:`KEEP_RULE_LINES` lines are deleted once read."""
        for f in self.rule_files.values():
            if int(f["rules"]) > KEEP_RULE_LINES:
                with contextlib.suppress(OSError):
                    Path(f["path"]).unlink()
                f["removed"] = True

    def program(self, flows: Optional[Sequence[Flow]] = None) -> None:
        """l3fwd routes each port pair's blocks to each other (its route files); only the
        cross-connect (or nothing) is accepted."""
        cross_connect_only(flows, len(self.ports), "l3fwd routes between")

    def stream_params(self) -> list[dict[str, Any]]:
        """Per-direction tgen stream fields (forward pairs, then the reverse): addresses from the
        blocks the routes send to each port."""
        plan = self.address_plan()
        return [plan.stream_fields(tx, rx, self.ip_version) for tx, rx in plan.directions()]

    def raw_port_stats(self) -> dict[int, dict[str, int]]:
        """Counters of each port (add_port index) since l3fwd started."""
        if self.dpdk_telemetry is None:
            raise DutFailure(f"{self.proc_name} not started")
        self.alive()
        out = {}
        try:
            for i in range(len(self.ports)):
                out[i] = ethdev_counters(self.dpdk_telemetry.command(f"/ethdev/stats,{self.port_ids[i]}"))
        except TelemetryError as e:
            self.alive()
            raise DutFailure(f"{self.proc_name}: counters: {e}") from None
        return out

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.dpdk_telemetry is not None:
            self.dpdk_telemetry.close()
            self.dpdk_telemetry = None
        # SIGINT: l3fwd stops its lcores, closes its ports (vhost/memif disconnect) and exits
        self.proc.stop(timeout=10.0, sig=signal.SIGINT)
        self._remove_files()
        self.tracker.forget("dut", self.proc_name)
        self.started = False
        self._launched = False

    def _remove_files(self) -> None:
        super()._remove_files()
        if self.remote:
            with contextlib.suppress(Exception):          # the host may be gone
                for f in self.rule_files.values():
                    if f.get("host_path"):
                        self.host.remove(f["host_path"])

    def environment(self) -> dict[str, Any]:
        env = super().environment()
        env.update({"mode": self.mode, "lcores": ",".join(f"{i}@{c}" for i, c in
                                                           enumerate(self.lcore_cpus)),
                    "config": self.lcore_config() if self.ports else [],
                    "rx_queues_per_port": self.rx_queues() if self.ports else None,
                    "tx_queues_per_port": self.lcores, "flows": self.flows,
                    "ip_version": self.ip_version, "routes": self.rule_files,
                    "port_ids": self.port_ids, "port_macs": self.port_macs,
                    "eth_dest": self.eth_peers, "netns": self.netns,
                    "file_prefix": self.file_prefix, "offloads_dropped": self.offload_notes,
                    "argv": self.proc.argv if self.proc else None})
        return env


class _SpecView:
    """The fields :func:`problems` reads, for an instance built without a TopologySpec."""

    def __init__(self, port_kind: str, ports: int, mtu: int):
        self.port_kind, self.ports, self.mtu = port_kind, ports, mtu
        self.pci: list[str] = []


def _norm_pci(addr: str) -> str:
    a = addr.strip().lower()
    return a if a.count(":") == 2 else f"0000:{a}"
