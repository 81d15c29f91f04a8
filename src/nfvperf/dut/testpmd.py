"""dpdk-testpmd as a DUT (PHY-PHY forwarding) and as the container VNF (virtio-user).

``Testpmd`` (``dut: testpmd``) opens the DUT ends of the emulated PHY ports with ``net_af_packet``
(or ``net_af_xdp``) vdevs — or real NICs by PCI address — and forwards between port pairs
(0<->1, 2<->3: testpmd's ``paired`` port topology) in ``io`` mode (no header change) or ``mac``
mode (source MAC = the output port's, destination = ``--eth-peer`` of that port).

``TestpmdVnf`` is the same program as a VNF inside a PVP/PVVP chain: its ports are virtio-user
devices on vhost-user sockets (``--single-file-segments``, hugepage memory shared with the switch),
as client of a switch's ``dpdkvhostuser`` socket or as server for ``dpdkvhostuserclient``.

testpmd runs interactively on a pty (so stdio is line-buffered and every command's output arrives
before the next prompt); counters come from ``show port stats all``.  The EAL ``--file-prefix`` is
``<tag><role>``; the hugepage files of that prefix are removed after the process exits.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import re
import shutil
from pathlib import Path
from typing import Any, Literal, Optional, Sequence

from pydantic import Field, field_validator, model_validator

from nfvperf.host.cpu import CoreRequest
from nfvperf.host.preflight import Binary
from nfvperf.host.run import ResourceTracker, RunContext
from nfvperf.tg.sim_model import SimTraits

from .base import AdapterOptions, DpdkProcessDut, DutFailure, Flow, PortRef, ProcessError, Unsupported, \
    TopologyView, cross_connect_only, eal_port_options, host_binary, register_dut
from .port_end import VhostFrontend
import os

log = logging.getLogger(__name__)

PROMPT = r"testpmd> "

#: DPDK's virtio-user virtqueue size when ``queue_size=`` is not given
VIRTIO_USER_DEFAULT_QUEUE_SIZE = 256
#: the virtqueue sizes a TestpmdVnf accepts (split virtqueues: a power of two; beyond 4096 the
#: rings of two ports alone would take half of testpmd's mbuf pool)
VNF_QUEUE_SIZE_MIN, VNF_QUEUE_SIZE_MAX = 64, 4096


def check_vnf_queue_size(n: int) -> int:
    """``n`` if it is a valid virtio-user virtqueue size, else ValueError."""
    if isinstance(n, bool) or not isinstance(n, int) or n < VNF_QUEUE_SIZE_MIN or \
            n > VNF_QUEUE_SIZE_MAX or n & (n - 1):
        raise ValueError(f"virtqueue size must be a power of two in {VNF_QUEUE_SIZE_MIN}.."
                         f"{VNF_QUEUE_SIZE_MAX}, not {n!r}")
    return n


#: the testpmd binary (also the container VNF's)
TESTPMD = Binary("dpdk-testpmd", "dpdk", env="NFVPERF_TESTPMD")


# the suite's ``topology.testpmd:`` section: the testpmd DUT and the container VNFs
class TestpmdSpec(AdapterOptions):
    __test__ = False   # not a pytest class
    alternatives = (("cores", "lcores"),)
    forward_mode: Literal["io", "mac"] = "io"
    lcores: Optional[str] = Field(None, description="EAL --lcores, e.g. '0@0,1@1' (default: the CPU plan)")
    cores: Optional[int] = Field(
        None, ge=1, le=64, description="forwarding cores of the testpmd DUT, or of each VNF "
        "(container or VM), as a count of physical cores resolved from the host's sibling map "
        "(instead of lcores)")
    ht: bool = Field(False, description="with cores: forwarding lcores on both hyper-threads "
                     "of each core")
    memory: Literal["hugepages", "in-memory", "no-huge"] = Field(
        "hugepages", description="hugepage files with the run's --file-prefix, --in-memory, or --no-huge")
    queues: int = Field(1, ge=1, le=16, description="rx/tx queues per port")
    rxd: int = Field(1024, ge=64, le=8192)
    txd: int = Field(1024, ge=64, le=8192)
    vnf_queue_size: int = Field(
        1024, ge=64, le=4096, description="virtqueue size of the container VNF's virtio-user ports "
        "(a power of two; DPDK's default is 256): a VNF sharing a CPU is descheduled for "
        "milliseconds, and the vring is what the switch can queue to it meanwhile")
    binary: Optional[str] = Field(
        None, description="the dpdk-testpmd binary to run, a DUT (or VNF) build (default: $NFVPERF_TESTPMD "
        "or the installed one); two builds in one run: a study axis topology.testpmd.binary: [A, B] "
        "with rounds, gated by nfvperf gate --ab")

    @model_validator(mode="after")
    def _cores_one_way(self) -> "TestpmdSpec":
        if self.cores is not None and self.lcores:
            raise ValueError(f"give cores ({self.cores}) or lcores ({self.lcores!r}), not both")
        if self.ht and self.cores is None:
            raise ValueError("ht: true applies to cores (both hyper-threads of each core); give cores")
        return self

    @field_validator("vnf_queue_size")
    @classmethod
    def _power_of_two(cls, v: int) -> int:
        if v & (v - 1):
            raise ValueError(f"vnf_queue_size must be a power of two, not {v}")
        return v

    def sim_traits(self) -> SimTraits:
        return SimTraits(pmd_cores=self.cores or None, ht=self.ht, n_rxq=self.queues or 1)


def mbuf_size_for(mtu: int) -> int:
    """testpmd's ``--mbuf-size`` (data room incl. the 128 B headroom) for one-segment frames of
    ``mtu`` + 18 B (Ethernet header + FCS) + 4 B (a VLAN tag), rounded up to 512 B; at least
    DPDK's default 2176.  MTU 9000 -> 9216, 9216 -> 9728."""
    need = 128 + mtu + 18 + 4
    return max(2176, -(-need // 512) * 512)


def testpmd_options(spec: Optional[TopologyView]) -> Optional[TestpmdSpec]:
    """The ``testpmd`` section of a TopologySpec (None without a spec): the testpmd DUT's options,
    which the testpmd VNFs (container and VM) follow too, whatever DUT switches between them."""
    return Testpmd.options(spec) if spec is not None else None


def testpmd_core_request(spec: Optional[TopologyView]) -> Optional[CoreRequest]:
    """``testpmd.cores``/``ht`` of a TopologySpec as a CoreRequest (the testpmd DUT's forwarding
    cores, or each VNF's: container or VM)."""
    tp = testpmd_options(spec)
    if tp is None or tp.cores is None:
        return None
    return CoreRequest("topology.testpmd.cores", int(tp.cores), bool(tp.ht))


def find_testpmd() -> str:
    path = os.environ.get("NFVPERF_TESTPMD") or shutil.which("dpdk-testpmd")
    if not path:
        raise DutFailure("dpdk-testpmd not found: apt-get install dpdk (or set NFVPERF_TESTPMD)")
    return path


_STATS_RE = re.compile(
    r"NIC statistics for port (\d+).*?RX-packets:\s*(\d+)\s+RX-missed:\s*(\d+)\s+RX-bytes:\s*(\d+)"
    r".*?RX-errors:\s*(\d+).*?RX-nombuf:\s*(\d+).*?TX-packets:\s*(\d+)\s+TX-errors:\s*(\d+)\s+"
    r"TX-bytes:\s*(\d+)", re.S)


def parse_banner(text: str) -> tuple[str, list[str]]:
    """testpmd's start-up output: (DPDK version, port MACs in port order, lower case)."""
    m = re.search(r"RTE Version: '([^']+)'", text)
    macs = re.findall(r"^Port (\d+): ([0-9A-Fa-f:]{17})", text, re.M)
    return (m.group(1) if m else "",
            [mac.lower() for _, mac in sorted(macs, key=lambda x: int(x[0]))])


def parse_port_stats(text: str) -> dict[int, dict[str, int]]:
    out = {}
    for m in _STATS_RE.finditer(text):
        pid, rxp, miss, rxb, rxe, nombuf, txp, txe, txb = (int(x) for x in m.groups())
        out[pid] = {"rx_packets": rxp, "rx_missed": miss, "rx_bytes": rxb, "rx_errors": rxe,
                    "rx_nombuf": nombuf, "tx_packets": txp, "tx_errors": txe, "tx_bytes": txb,
                    "rx_dropped": miss + nombuf, "tx_dropped": txe}
    return out


class _TestpmdProcess(DpdkProcessDut):
    """Common part: argv, interactive console, counters (``show port stats``), life cycle."""

    binaries = (TESTPMD,)

    @classmethod
    def core_request(cls, spec: TopologyView) -> Optional[CoreRequest]:
        return testpmd_core_request(spec)

    @classmethod
    def hugepage_demand_mb(cls, spec: Any) -> int:
        return 512          # mbuf pools of a few ports with 1024 descriptors

    def __init__(self, run: RunContext, tracker: ResourceTracker, cpus: Sequence[int] = (),
                 netns: Optional[str] = None, forward_mode: Optional[str] = None,
                 lcores: Optional[str] = None, memory: str = "hugepages", mem_mb: int = 0,
                 eth_peers: Optional[Sequence[str]] = None, queues: int = 1, rxd: int = 1024,
                 txd: int = 1024, mbufs: int = 16384, extra_eal: Sequence[str] = (),
                 extra_args: Sequence[str] = (), name: Optional[str] = None,
                 start_timeout_s: float = 60.0, *, spec: Optional[TopologyView] = None, **options: Any):
        tp = testpmd_options(spec)
        super().__init__(run, tracker, cpus, spec=spec, **options)
        self.netns = netns
        self.binary_path: Optional[str] = tp.binary if tp is not None else None
        self.forward_mode = forward_mode or (tp.forward_mode if tp else "io")
        plan = options.get("plan")
        if lcores is None and tp is not None and tp.lcores:
            lcores = tp.lcores
        if lcores is None and plan is not None:
            lcores = plan.dpdk_lcores(self.role if self.role in plan.roles else "dut")
        elif lcores is None:            # main and forwarding lcore on the first CPU given (or 0)
            cpu = self.cpus[0] if self.cpus else 0
            lcores = f"0@{cpu},1@{cpu}"
        self.lcores = lcores
        if memory not in ("hugepages", "in-memory", "no-huge"):
            raise ValueError(f"memory must be hugepages | in-memory | no-huge, not {memory!r}")
        self.memory = memory
        self.mem_mb = mem_mb
        self.eth_peers = list(eth_peers or [])
        self.queues = queues
        self.rxd, self.txd, self.mbufs = rxd, txd, mbufs
        self.extra_eal = list(extra_eal)
        self.extra_args = list(extra_args)
        self.proc_name = name or f"testpmd-{self.role}"
        self.start_timeout_s = start_timeout_s

    # -- argv -----------------------------------------------------------------------------------
    def n_fwd_lcores(self) -> int:
        return max(1, len([p for p in self.lcores.split(",") if p.strip()]) - 1)

    def port_devargs(self, index: int, port: PortRef) -> str:
        return port.dpdk_devargs(index, self.queues)

    def binary(self) -> str:
        """testpmd's path on the host it runs on (``testpmd.binary`` when the suite names a build)."""
        return host_binary(self.host, self.remote, self.binary_path, "topology.testpmd.binary",
                           "a dpdk-testpmd build", find_testpmd, TESTPMD)

    def argv(self) -> list[str]:
        eal = [self.binary(), "-v", "--lcores", self.lcores, "--file-prefix", self.file_prefix,
               "--log-level", "lib.eal:notice"]
        if self.memory == "in-memory":
            eal.append("--in-memory")
        elif self.memory == "no-huge":
            eal += ["--no-huge", "-m", str(self.mem_mb or 512)]
        elif self.mem_mb:
            eal += ["-m", str(self.mem_mb)]
        eal += eal_port_options(self.ports)
        for i, p in enumerate(self.ports):
            eal += p.eal_args(self.port_devargs(i, p))
        eal += self.extra_eal
        app = ["--", "-i", f"--forward-mode={self.forward_mode}", f"--nb-cores={self.n_fwd_lcores()}",
               f"--rxq={self.queues}", f"--txq={self.queues}", f"--rxd={self.rxd}", f"--txd={self.txd}",
               f"--total-num-mbufs={self.mbufs}", "--port-topology=paired"]
        mtus = {p.mtu for p in self.ports}
        if mtus and max(mtus) > 1500:
            app += [f"--max-pkt-len={max(mtus) + 18}", f"--mbuf-size={mbuf_size_for(max(mtus))}"]
        if self.forward_mode == "mac":
            for i, mac in enumerate(self.eth_peers):
                if mac:
                    app.append(f"--eth-peer={i},{mac}")
        return eal + app + self.extra_args

    # -- life cycle -----------------------------------------------------------------------------
    def _attach_port(self, port: PortRef) -> None:
        raise Unsupported("testpmd takes its ports on the command line: add_port() before start()")

    def start(self) -> None:
        if self.started:
            return
        if not self.ports:
            raise ValueError(f"{self.proc_name}: no ports added")
        for p in self.ports:
            refusal = p.end.dpdk_mtu_refusal(p)
            if refusal:
                raise ValueError(refusal)
        for p in self.ports:
            if p.end.creates_socket() and p.socket is not None:
                if len(str(p.socket)) > 107:
                    raise ValueError(f"vhost-user socket path longer than 107 bytes: {p.socket}")
                self.host.mkdir(Path(p.socket).parent)
                self.tracker.add("socket", str(p.socket),
                                 functools.partial(self.host.remove, p.socket))
        proc = self._spawn()
        try:
            out = proc.expect(PROMPT, self.start_timeout_s)
        except ProcessError as e:
            raise DutFailure(str(e)) from None
        self.rte_version, self.port_macs = parse_banner(out)
        if len(self.port_macs) < len(self.ports):
            raise DutFailure(f"{self.proc_name}: {len(self.port_macs)} of {len(self.ports)} ports "
                             f"came up; log {proc.log_path}:\n{proc.log_tail(30)}")
        self.started = True
        self._baseline = {}                 # a (re)started testpmd counts from zero again
        proc.command("start", PROMPT, 10)

    def program(self, flows: Optional[Sequence[Flow]] = None) -> None:
        """testpmd forwards by port pairs; only the cross-connect (or nothing) is accepted."""
        cross_connect_only(flows, len(self.ports), "testpmd forwards")

    def _console(self, cmd: str, timeout: float = 10.0) -> str:
        if self.proc is None:
            raise DutFailure(f"{self.proc_name} not started")
        self.alive()
        try:
            return self.proc.command(cmd, PROMPT, timeout)
        except ProcessError as e:
            raise DutFailure(f"{self.proc_name} stopped answering: {e}") from None

    def raw_port_stats(self) -> dict[int, dict[str, int]]:
        out = self._console("show port stats all")
        stats = parse_port_stats(out)
        if len(stats) < len(self.ports):
            raise DutFailure(f"{self.proc_name}: could not parse port stats:\n{out[-1500:]}")
        return stats

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.running():
            with contextlib.suppress(Exception):
                self.proc.send("quit")
                self.proc.expect(r"Bye", 10)
            with contextlib.suppress(Exception):
                if self.proc.proc is not None:
                    self.proc.proc.wait(5)
        self.proc.stop()
        self._remove_files()
        self.tracker.forget("dut", self.proc_name)
        self.started = False

    def environment(self) -> dict[str, Any]:
        env = super().environment()
        env.update({"forward_mode": self.forward_mode, "lcores": self.lcores, "netns": self.netns,
                    "memory": self.memory, "file_prefix": self.file_prefix,
                    "argv": self.proc.argv if self.proc else None, "port_macs": self.port_macs})
        return env


@register_dut("testpmd")
class Testpmd(_TestpmdProcess):
    """dpdk-testpmd forwarding between port pairs of the emulated (or real) PHY ports."""

    name = "testpmd"
    __test__ = False      # not a pytest class
    options_key = "testpmd"
    options_model = TestpmdSpec
    #: veth (af_packet/af_xdp vdevs), vhost-user (net_vhost as client of the generator's
    #: virtio-user), memif (net_memif server), real NICs
    port_kinds = ("af_packet", "af_xdp", "vhost", "memif", "pci")
    #: runs on a testbed's DUT host (``host=``: over SSH, or in a QEMU guest of the testbed):
    #: its process, console and counters through that host, its hugepage files and DPDK
    #: runtime directory removed there (:meth:`_remove_files`)
    runs_remote = True

    @classmethod
    def options(cls, spec: TopologyView) -> Optional[TestpmdSpec]:
        return cls.options_as(spec, TestpmdSpec)

    @classmethod
    def spec_options(cls, spec: TopologyView) -> dict[str, Any]:
        tp = cls.options(spec)
        if tp is None:
            return {}
        return dict(memory=tp.memory, queues=tp.queues, rxd=tp.rxd, txd=tp.txd)


class TestpmdVnf(_TestpmdProcess):
    """testpmd as the container VNF of a PVP / PVVP chain, on vhost-user sockets.

    ``TestpmdVnf(run, tracker, sockets=[s0, s1], server=False, cpus=[1], forward_mode="io",
    name="vnf0")`` then ``start()``.  ``server=False``: testpmd connects to sockets the switch
    created (OVS ``dpdkvhostuser``); ``server=True``: testpmd creates them and the switch connects
    (OVS ``dpdkvhostuserclient``).  Frames arriving on virtio port 0 leave on port 1 and back.
    ``lcores`` defaults to the plan's role ``name`` (e.g. "vnf0") when a plan is given.

    ``mtu``: of its ports (``--max-pkt-len``/``--mbuf-size`` above 1500); default the spec's.

    ``queue_size``: virtqueue size of the virtio-user ports (devargs ``queue_size=``; a power of
    two, 64..4096).  ``None`` takes the spec's ``testpmd.vnf_queue_size`` when a ``spec`` is
    given, else DPDK's default (256, no devarg).  A VNF that shares a CPU is descheduled for
    milliseconds, and the vring is what the switch can queue to it meanwhile: the OVS topologies
    use 1024 (PVP at 10 kpps on shared cores: ~1 % loss with 256, none with 1024).
    """

    name = "testpmd-vnf"
    __test__ = False
    #: runs on a testbed's DUT host (``host=``, over SSH) next to the switch (issue 10)
    runs_remote = True

    def __init__(self, run: RunContext, tracker: ResourceTracker, sockets: Sequence[str | Path] = (),
                 server: bool = False, name: str = "vnf0", queue_size: Optional[int] = None,
                 mtu: Optional[int] = None, *, spec: Optional[TopologyView] = None, **kw: Any):
        self.role = name
        kw.setdefault("memory", "hugepages")
        if kw.get("memory") == "no-huge":
            raise ValueError("virtio-user needs shared (hugepage) memory; memory=no-huge won't work")
        if queue_size is None:
            tp = testpmd_options(spec)
            queue_size = tp.vnf_queue_size if tp is not None else None
        if queue_size is not None:
            queue_size = check_vnf_queue_size(queue_size)
        super().__init__(run, tracker, name=f"testpmd-{name}", spec=spec, **kw)
        self.vnf_name = name
        self.server = server
        self.queue_size = queue_size
        if mtu is None:       # the topology's MTU: jumbo frames pass the VNF too
            mtu = int(spec.mtu or 1500) if spec is not None else 1500
        for i, s in enumerate(sockets):
            self.add_port(PortRef(f"{name}-vhu{i}", VhostFrontend(server=server, queue_size=queue_size),
                                  socket=Path(s), mtu=mtu))

    def counters(self) -> dict[str, Any]:
        d = super().counters()
        d["vnf"] = self.vnf_name
        return d

    def environment(self) -> dict[str, Any]:
        env = super().environment()
        env.update({"vnf": self.vnf_name, "vhost_server": self.server,
                    "queue_size": self.queue_size if self.queue_size is not None else
                    VIRTIO_USER_DEFAULT_QUEUE_SIZE,
                    "sockets": [str(p.socket) for p in self.ports]})
        return env
