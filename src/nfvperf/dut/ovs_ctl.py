"""The plumbing of the OVS adapters: the run's OVS directory, its daemons and the command-line tools
(``ovs-vsctl`` / ``ovs-appctl`` / ``ovs-ofctl`` with explicit sockets, argument lists, no shell);
the base of the mixins that make :class:`nfvperf.dut.ovs_dpdk.OvsDpdk`."""
from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, TypeVar, Union, cast

from nfvperf.dut.port_end import PortEnd, phy_end
from nfvperf.dut.base import DutAdapter, Flow, TopologyView
from nfvperf.dut.ovs_rules import RuleInstall
from nfvperf.dut.ovs_spec import OvsSpec
from nfvperf.host.base import Host
from nfvperf.host.cpu import PinningPlan, cpu_mask
from nfvperf.host.proc import LOCAL, CommandError, Process
from nfvperf.host.run import ResourceTracker, RunContext
from nfvperf.trial import DutFailure


_UNIX_PATH_MAX = 107
_T = TypeVar("_T")


class OvsError(RuntimeError):
    """An OVS command or set-up step failed (the message carries the command and its output)."""


@dataclass
class OvsPort:
    name: str
    kind: str                     # dpdk | dpdkvhostuserclient | vxlan | internal
    bridge: str
    ofport: int = -1
    options: dict[str, str] = field(default_factory=dict)
    mtu: Optional[int] = None     # mtu_request


#: Interface types that take ``mtu_request`` (tunnels and patch ports have no MTU of their own)
MTU_KINDS = ("dpdk", "dpdkvhostuser", "dpdkvhostuserclient", "internal")


class OvsCtl(DutAdapter):
    """The state and tools of one OVS (see :class:`nfvperf.dut.ovs_dpdk.OvsDpdk`)."""

    #: the bridges' datapath: netdev (userspace, DPDK); the kernel datapath is ``ovs-system``
    datapath_type = "netdev"
    @classmethod
    def options(cls, spec: TopologyView) -> Optional[OvsSpec]:
        return cls.options_as(spec, OvsSpec)

    def __init__(self, run: RunContext, tracker: Optional[ResourceTracker] = None,
                 cpus: Sequence[int] = (), spec: Union[OvsSpec, TopologyView, None] = None, *,
                 netns: Optional[str] = None, lcore_cpu: int = 0, socket_mem_mb: Optional[int] = None,
                 vswitchd: Optional[str] = None, start_timeout_s: float = 30.0, **options: object) -> None:
        super().__init__(run, tracker, cpus=cpus, **options)
        #: the topology's port kind, and the class of its PHY ports' ends here (PCI NICs: no
        #: --no-pci; memif: fixed TX queues), known before the ports are added
        self.port_kind: Optional[str] = None
        self.phy_ends: tuple[type[PortEnd], ...] = ()
        if spec is not None and not isinstance(spec, OvsSpec):   # a TopologySpec: its ovs section
            self.port_kind = spec.port_kind
            self.phy_ends = (phy_end(spec.port_kind),)
            spec = self.options(spec)
        plan = options.get("plan")
        if isinstance(plan, PinningPlan) and plan.housekeeping:
            lcore_cpu = plan.housekeeping[0]
        self.tag = run.tag
        self.run_dir = Path(run.run_dir)
        #: the options (None: an instance built without them, on the defaults below)
        self.spec: Optional[OvsSpec] = spec
        self.netns = netns
        self.lcore_cpu = lcore_cpu
        self.pmd_cpu_mask = (spec.pmd_cpu_mask if spec is not None else None) or \
            (cpu_mask(self.cpus) if self.cpus else None)
        self.socket_mem_mb = socket_mem_mb or (spec.socket_mem_mb if spec is not None else None) or 512
        #: other_config:dpdk-socket-mem (and -limit): MB per NUMA socket, e.g. '11264,1024'
        self.socket_mem = str(socket_mem_mb) if socket_mem_mb else \
            (spec.dpdk_socket_mem() if spec is not None else str(self.socket_mem_mb))
        self.vswitchd_bin = vswitchd or (spec.vswitchd if spec is not None else None)
        #: other_config:userspace-tso-enable (read once at start): vhost-user ports then offer the
        #: guests TSO and checksum offload (the TCP topology vm-vm sets it; nfvperf.topo.tcp_vm)
        self.userspace_tso = False
        self.start_timeout_s = start_timeout_s
        self.file_prefix = run.file_prefix("ovs")
        # where the daemons run (nfvperf.host.proc.LOCAL, or an SshHost of a testbed: then the
        # files below are on that host, reached through self.host)
        self.host = cast(Host, options.get("host") or LOCAL)
        self.remote = bool(getattr(self.host, "remote", False))
        # Unix socket paths are limited to 108 bytes; fall back to a short tagged directory.
        d = (Path(self.host.work_dir) / self.tag / "ovs") if self.remote \
            else self.run_dir / "ovs"
        self._own_dir = len(str(d / "ovs-vswitchd.00000.ctl")) + 20 > _UNIX_PATH_MAX
        if self._own_dir:
            d = Path(f"/tmp/{self.tag}-ovs")
        self.dir = d
        self.vhost_dir = d               # where the VNFs' vhost-user sockets go
        self.db_sock = d / "db.sock"
        self.ctl = d / "ovs-vswitchd.ctl"
        self.db_ctl = d / "ovsdb-server.ctl"
        self.ovs_ports: dict[str, OvsPort] = {}
        #: dpdkvhostuserclient ports added without their socket path, connected by
        #: :meth:`connect_vhost` (see :meth:`defer_vhost_connect`): name -> socket
        self.deferred_vhost: dict[str, str] = {}
        self._defer_vhost: set[str] = set()
        #: bonds made by add_bond(): {name: {"bridge", "members", "mode", "lacp", "other_config"}}
        self.bonds: dict[str, dict[str, Any]] = {}
        self.bridges: list[str] = []
        self._procs: dict[str, Process] = {}
        self._attached = False
        self._flow_files = 0
        self.rule_installs: list[RuleInstall] = []
        #: what reconfigure() applied, in order (in environment())
        self.reconfigurations: list[dict[str, Any]] = []
        #: the topology's rule set for the current spec (set by the OVS topologies; returns None
        #: when ``ovs.rules`` does not shape their forwarding): what an in-place ``ovs.rules``
        #: change installs
        self.forwarding: Optional[Callable[[], Optional[Sequence[Union[Flow, str]]]]] = None
        if spec is not None and spec.existing_db:
            self.attach(spec.existing_db, spec.existing_ctl)

    # ------------------------------------------------------------------ plumbing
    @property
    def ovs_env(self) -> dict[str, str]:
        """What OVS's processes get on top of their host's environment."""
        # NFVPERF_TAG: `nfvperf cleanup` finds our processes
        return {**self.run.env(), **dict.fromkeys(("OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVS_SYSCONFDIR"),
                                                  str(self.dir))}

    def _run(self, argv: Sequence[str], timeout: float = 30.0, check: bool = True) -> str:
        try:
            cp = self.host.run(list(argv), env=self.ovs_env, timeout=timeout, check=False)
        except CommandError as e:
            self._raise_if_dead()
            raise OvsError(f"{' '.join(argv)}: {e}") from e
        if check and cp.returncode != 0:
            self._raise_if_dead()
            raise OvsError(f"{' '.join(argv)} failed ({cp.returncode}): {cp.stderr.strip() or cp.stdout.strip()}")
        return cp.stdout

    def vsctl(self, *args: str, wait: bool = True, timeout: float = 30.0) -> str:
        argv = ["ovs-vsctl", f"--db=unix:{self.db_sock}", f"--timeout={int(timeout)}"]
        if not wait:
            argv.append("--no-wait")
        return self._run([*argv, *args], timeout=timeout + 5)

    def appctl(self, *args: str, timeout: float = 15.0) -> str:
        return self._run(["ovs-appctl", "-t", str(self.ctl), f"--timeout={int(timeout)}", *args],
                         timeout=timeout + 5)

    def ofctl(self, cmd: str, bridge: str, *args: str, timeout: float = 30.0) -> str:
        return self._run(["ovs-ofctl", f"--timeout={int(timeout)}", cmd, self.mgmt(bridge), *args],
                         timeout=timeout + 5)

    def mgmt(self, bridge: str) -> str:
        return f"unix:{self.dir / (bridge + '.mgmt')}"

    # ------------------------------------------------------------------ life cycle
    def attach(self, db_sock: Union[str, Path], ctl: Union[str, Path, None] = None,
               rundir: Union[str, Path, None] = None) -> "OvsCtl":
        """Use an OVS that is already running (call before :meth:`start`): nfvperf then only creates
        and deletes its own bridge.  ``ctl`` is that ovs-vswitchd's unixctl socket (default: the
        ``ovs-vswitchd.<pid>.ctl`` next to ``db_sock``); ``rundir`` where it keeps
        ``<bridge>.mgmt`` (default: the directory of ``db_sock``)."""
        self.vhost_dir.mkdir(parents=True, exist_ok=True)     # ours, not the shared OVS's
        self.db_sock = Path(db_sock)
        self.dir = Path(rundir) if rundir else self.db_sock.parent
        if ctl is None:
            cands = sorted(self.dir.glob("ovs-vswitchd*.ctl"))
            if not cands:
                raise OvsError(f"no ovs-vswitchd*.ctl next to {db_sock}; give existing_ctl")
            ctl = cands[0]
        self.ctl = Path(ctl)
        self._attached = True
        if self.vsctl("get", "Open_vSwitch", ".", "dpdk_initialized", wait=False).strip() != "true":
            raise OvsError(f"the OVS at {db_sock} has no DPDK initialised (other_config:dpdk-init=true)")
        return self

    def pmd_maxsleep_us(self) -> int:
        """``pmd-maxsleep``: the spec's value, else 500 us when the CPU plan shares cores."""
        v = self.spec.pmd_maxsleep_us if self.spec is not None else None
        if v is not None:
            return int(v)
        plan = self.init_options.get("plan")
        return 500 if plan is not None and getattr(plan, "cores_shared", False) else 0

    def _pmd_mask(self) -> str:
        if self.pmd_cpu_mask:
            return self.pmd_cpu_mask if self.pmd_cpu_mask.startswith("0x") else "0x" + self.pmd_cpu_mask
        return cpu_mask([(os.cpu_count() or 1) - 1])

    def _spawn(self, key: str, argv: list[str], netns: Optional[str] = None) -> None:
        """Start one daemon (nfvperf.host.proc.Process): its console output in ``<key>.out``,
        registered with the tracker, stopped by :meth:`stop`."""
        # a remote daemon's console output comes to the controller's run directory
        out = self.run.path(f"{key}.out") if self.remote else self.dir / f"{key}.out"
        p = Process(key, argv, self.run, self.tracker, netns=netns, env=self.ovs_env,
                    host=self.host, log_path=out, died=OvsError)
        p.start()
        self._procs[key] = p

    def _wait_path(self, path: Path, what: str, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.host.exists(path):
            p = self._procs.get(what)
            if p is not None and p.returncode() is not None:
                raise OvsError(f"{what} exited with {p.returncode()} at start: {self.log_tail(what)}")
            if time.monotonic() > deadline:
                raise OvsError(f"{what} did not create {path} in {timeout:.0f} s")
            time.sleep(0.05)

    def log_tail(self, what: str = "ovs-vswitchd", lines: int = 8) -> str:
        text = ""
        for f in (self.dir / f"{what}.log", self.dir / f"{what}.out"):
            with contextlib.suppress(Exception):  # a log is best effort (the host may be gone)
                if self.remote and f.suffix == ".out":
                    text += self.run.path(f.name).read_text(errors="replace")
                else:
                    text += self.host.read_text(f)
        return " | ".join(text.strip().splitlines()[-lines:])

    def enable_tso(self) -> None:
        """other_config:userspace-tso-enable at start (see :attr:`userspace_tso`)."""
        self.userspace_tso = True

    def pids(self) -> dict[str, Optional[int]]:
        return {k: p.pid for k, p in self._procs.items()}

    def alive(self) -> None:
        """Raise :class:`DutFailure` if ovs-vswitchd or ovsdb-server is gone (or their host)."""
        if hasattr(self.host, "check"):
            self.host.check()
        self._raise_if_dead(DutFailure)
        if self._attached:
            try:
                self._run(["ovs-appctl", "-t", str(self.ctl), "--timeout=2", "version"], timeout=4)
            except OvsError as e:
                raise DutFailure(f"ovs-vswitchd at {self.ctl} does not answer: {e}") from e

    def _raise_if_dead(self, exc: type = OvsError) -> None:
        for key, p in self._procs.items():
            rc = p.returncode()
            if rc is not None:
                how = f"signal {-rc}" if rc < 0 else f"exit code {rc}"
                lost = getattr(p.proc, "lost", None)
                if lost:
                    raise exc(f"{key} (pid {p.pid} on {self.host.name}) unreachable: {lost}")
                raise exc(f"{key} (pid {p.pid}) died ({how}); log: {self.log_tail(key, 4)}")

    def _settle(self, probe: Callable[[], tuple[bool, _T]], timeout_s: float, late: Callable[[_T], str],
                interval_s: float = 0.1) -> _T:
        """Call ``probe()`` -> (done, value) every ``interval_s``, the daemons checked alive before
        each call, until done; return its value.  Past ``timeout_s``: :class:`OvsError` with
        ``late(value)`` and the log tail."""
        deadline = time.monotonic() + timeout_s
        while True:
            self._raise_if_dead()
            done, value = probe()
            if done:
                return value
            if time.monotonic() > deadline:
                raise OvsError(f"{late(value)}; log: {self.log_tail()}")
            time.sleep(interval_s)

    def tx_queues(self) -> int:
        """TX queues OVS uses on each port: one per PMD thread plus one for the main thread.
        A memif peer must poll as many RX rings: OVS's PMD sends on queue 1 (the main thread
        on 0), and with one ring on the peer every PMD transmit fails (``ovs_tx_failure_drops``;
        measured with OVS 3.1 / DPDK 22.11)."""
        mask = self._pmd_mask()
        return bin(int(mask, 16)).count("1") + 1

