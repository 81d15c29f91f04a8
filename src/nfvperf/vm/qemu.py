"""The VM VNF: a QEMU guest (image from :mod:`nfvperf.vm.image`) with vhost-user NICs and
dpdk-testpmd inside forwarding between its two NICs (0 <-> 1, io or mac mode).

Same life cycle and constructor shape as :class:`nfvperf.dut.testpmd.TestpmdVnf`, so a PVP/PVVP
topology picks one or the other from ``TopologySpec.vnf``::

    vnf = VmVnf(run, tracker, sockets=[s0, s1], server=True, name="vnf0", plan=plan)
    vnf.start()          # QEMU launched; with server=True it now waits for the switch to connect
    ... switch adds dpdkvhostuserclient ports on s0, s1 ...
    vnf.wait_ready()     # guest booted, testpmd forwarding (counters()/alive() also wait)
    vnf.counters(); vnf.alive(); vnf.stop()

``server=True``: QEMU creates the sockets (``-chardev socket,server=on``) and the switch connects
(OVS ``dpdkvhostuserclient``, DPDK ``net_vhost ... client=1``).  QEMU does not run the guest until
every NIC has a backend, which is why start() returns before the boot.  ``server=False``: QEMU
connects to sockets the switch created (OVS ``dpdkvhostuser``); start() then waits for the boot.

Guest memory is a shared hugepage file (``memory-backend-file,mem-path=/dev/hugepages,share=on``,
unlinked by QEMU at once, so nothing is left in hugetlbfs even after a kill -9).  The first serial
port is the kernel console (``<run_dir>/vm-<name>-console.log``), the second carries testpmd's
interactive command line (a Unix socket ``vm-<name>-ctl.sock``, logged to
``vm-<name>-testpmd.log``); counters are read with ``show port stats all`` on it.

Acceleration: KVM when /dev/kvm can run a stock guest kernel, else TCG (``accel="auto"``; force
with ``accel=`` or ``NFVPERF_VM_ACCEL=kvm|tcg``).  A nested "PVM" KVM (``/sys/module/kvm_pvm``)
cannot boot an unmodified kernel, so auto picks TCG there and says so in environment().
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Any, Callable, ClassVar, Optional, Sequence, Union

from nfvperf.dut.base import DutAdapter, DutFailure, PciNic, PortRef, Process, Unsupported, VhostFrontend, \
    TopologyView, cross_connect, run_version
from nfvperf.host import hugepages as hp
from nfvperf.host.cpu import CoreRequest
from nfvperf.host.preflight import Binary
from nfvperf.host.run import ResourceTracker, RunContext

from nfvperf.dut.testpmd import mbuf_size_for, parse_banner, parse_port_stats, testpmd_core_request, \
    testpmd_options  # the guest runs testpmd too

from . import image as vm_image, sriov

log = logging.getLogger(__name__)

PROMPT = r"testpmd> "
QEMU = "qemu-system-x86_64"

_FWD_RE = re.compile(
    r"Forward statistics for port (\d+).*?RX-packets:\s*(\d+)\s+RX-dropped:\s*(\d+).*?"
    r"TX-packets:\s*(\d+)\s+TX-dropped:\s*(\d+)", re.S)


def parse_fwd_stats(text: str) -> dict[int, dict[str, int]]:
    return {int(m.group(1)): {"rx_packets": int(m.group(2)), "rx_dropped": int(m.group(3)),
                              "tx_packets": int(m.group(4)), "tx_dropped": int(m.group(5))}
            for m in _FWD_RE.finditer(text)}


def detect_accel() -> tuple[str, str]:
    """("kvm" | "tcg", why)."""
    forced = os.environ.get("NFVPERF_VM_ACCEL", "").strip().lower()
    if forced in ("kvm", "tcg"):
        return forced, f"NFVPERF_VM_ACCEL={forced}"
    try:
        fd = os.open("/dev/kvm", os.O_RDWR)
        os.close(fd)
    except OSError as e:
        return "tcg", f"/dev/kvm unusable ({e.strerror})"
    if Path("/sys/module/kvm_pvm").exists():
        return "tcg", ("/dev/kvm is a nested PVM hypervisor (kvm_pvm), which cannot boot a stock "
                       "guest kernel; using TCG (emulation: functional, slow)")
    return "kvm", "/dev/kvm"


def qemu_version() -> str:
    return run_version([QEMU, "--version"], r"version (\d+\.\d+[\w.\-+~]*)")


def connect_unix_retry(path: Path, deadline: float, pause_s: float) -> socket.socket:
    """A stream socket connected to ``path``, tried every ``pause_s`` until ``deadline`` (then the
    last OSError)."""
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(str(path))
            return s
        except OSError:
            s.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(pause_s)


class _Console:
    """testpmd's command line on the guest's second serial port (a QEMU server socket)."""

    def __init__(self, path: Path):
        self.path = path
        self.sock: Optional[socket.socket] = None
        self._buf = ""
        self._cv = threading.Condition()
        self._reader: Optional[threading.Thread] = None
        self._closed = False

    def connect(self, timeout: float = 10.0) -> None:
        self.sock = connect_unix_retry(self.path, time.monotonic() + timeout, 0.2)
        self._reader = threading.Thread(target=self._read, name=f"vm-console-{self.path.name}",
                                        daemon=True)
        self._reader.start()

    def _read(self) -> None:
        sock = self.sock          # close() sets self.sock to None while this thread may still run
        assert sock is not None
        while True:
            try:
                data = sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            with self._cv:
                self._buf += data.decode(errors="replace")
                self._cv.notify_all()
        with self._cv:
            self._closed = True
            self._cv.notify_all()

    def command(self, line: str, timeout: float = 20.0) -> str:
        if self.sock is None:
            raise DutFailure("guest console not connected")
        with self._cv:
            self._buf = ""
        self.sock.sendall((line + "\r").encode())
        # the command's own echo comes first; wait for the prompt after the output
        return self._expect(re.compile(PROMPT), timeout, f"guest console {self.path} closed",
                            f"guest testpmd: no prompt after {line!r} within {timeout:.0f} s")[0]

    def _expect(self, rx: re.Pattern[str], timeout: float, closed: str, late: str) -> tuple[str, re.Match[str]]:
        """Wait up to ``timeout`` for ``rx`` in the output: (the output up to the match's end, taken
        off the buffer; the match).  DutFailure ``closed`` or ``late`` (with the output's tail)."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                m = rx.search(self._buf)
                if m:
                    out, self._buf = self._buf[: m.end()], self._buf[m.end():]
                    return out, m
                if self._closed:
                    raise DutFailure(closed)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DutFailure(f"{late}; got {self._buf[-500:]!r}")
                self._cv.wait(min(left, 0.2))

    def close(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                self.sock.close()
            self.sock = None
        if self._reader is not None:
            self._reader.join(2)
            self._reader = None


def _qmp(path: Path, *commands: dict, timeout: float = 10.0) -> list[Any]:
    """Run QMP commands on a fresh connection; returns their "return" values."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(str(path))
    f = s.makefile("rwb")
    try:
        def recv() -> dict:
            while True:
                line = f.readline()
                if not line:
                    raise DutFailure("QMP connection closed")
                msg = json.loads(line)
                if "event" not in msg:
                    return msg

        recv()  # greeting
        out = []
        for cmd in ({"execute": "qmp_capabilities"},) + commands:
            f.write(json.dumps(cmd).encode() + b"\n")
            f.flush()
            msg = recv()
            if "error" in msg:
                raise DutFailure(f"QMP {cmd['execute']}: {msg['error']}")
            out.append(msg.get("return"))
        return out[1:]
    finally:
        with contextlib.suppress(OSError):
            f.close()
        s.close()


class VmVnf(DutAdapter):
    """dpdk-testpmd in a QEMU guest as the VNF of a PVP/PVVP chain, on vhost-user NICs.

    ``VmVnf(run, tracker, sockets=[s0, s1], server=True, name="vnf0", hugepage_mb=1024, vcpus=2,
    cpus=(), cpu_pin=None, queues=1, forward_mode="io", eth_peers=None, image=None,
    cache_dir=None, accel="auto", boot_timeout_s=None, plan=None)``.

    cpus: host CPUs every QEMU thread may run on; cpu_pin: one host CPU per vCPU (vCPU 0 runs
    testpmd's main lcore, vCPU 1.. the forwarding lcores); with a ``plan`` and no cpu_pin, vCPU 0
    goes to the first housekeeping CPU and the others to the plan's CPUs of role ``name``.
    """

    name = "vm-vnf"
    __test__ = False
    #: the fewest vCPUs the guest runs with (testpmd: main lcore + a forwarding lcore)
    min_vcpus: ClassVar[int] = 2
    #: vhost-user NICs it needs (testpmd forwards NIC 0 <-> NIC 1)
    nics: ClassVar[int] = 2
    binaries = (Binary("qemu-system-x86_64", "qemu-system-x86"),)
    tracker: ResourceTracker        # required here (the base class allows None)

    @classmethod
    def hugepage_demand_mb(cls, spec: TopologyView) -> int:
        return 1024 + 256     # the default guest memory (hugepage_mb) + slack for QEMU's own

    @classmethod
    def core_request(cls, spec: TopologyView) -> Optional[CoreRequest]:
        """``testpmd.cores``: the guest gets one vCPU per resolved CPU (forwarding lcores) plus
        vCPU 0 for testpmd's main lcore."""
        return testpmd_core_request(spec)

    def __init__(self, run: RunContext, tracker: ResourceTracker,
                 sockets: Sequence[Union[str, Path]] = (), server: bool = True, name: str = "vnf0",
                 hugepage_mb: int = 1024, vcpus: int = 2, cpus: Sequence[int] = (),
                 cpu_pin: Optional[Sequence[int]] = None, queues: Optional[int] = None,
                 forward_mode: Optional[str] = None, eth_peers: Optional[Sequence[str]] = None,
                 rxd: Optional[int] = None, txd: Optional[int] = None, mbufs: int = 16384,
                 image: Optional[vm_image.ImageInfo] = None, cache_dir: Optional[Path] = None,
                 accel: str = "auto", boot_timeout_s: Optional[float] = None,
                 hugepage_dir: str = "/dev/hugepages", connect_timeout_s: float = 15.0,
                 vf_pci: Sequence[str] = (), mtu: Optional[int] = None, *,
                 spec: Optional[TopologyView] = None, **options: Any):
        tp = testpmd_options(spec)
        # the topology's MTU, as the container VNF: jumbo frames cross the guest too
        self.mtu = int(mtu if mtu is not None else ((spec.mtu if spec is not None else None) or 1500))
        super().__init__(run, tracker, cpus, spec=spec, **options)
        if vcpus < self.min_vcpus:
            raise ValueError(f"the guest needs at least {self.min_vcpus} vCPUs "
                             "(testpmd main + forwarding lcore)")
        if hugepage_mb < 384:
            raise ValueError("hugepage_mb (guest memory) must be at least 384")
        self.vnf_name = name
        self.server = server
        self.hugepage_mb = int(hugepage_mb)
        self.vcpus = int(vcpus)
        # unset knobs follow the suite's testpmd section, like the container VNF
        self.queues = int(queues or (tp.queues if tp is not None else None) or 1)
        rxd = rxd or (tp.rxd if tp is not None else None) or 1024
        txd = txd or (tp.txd if tp is not None else None) or 1024
        self.forward_mode = forward_mode or (tp.forward_mode if tp else "io")
        if self.forward_mode not in ("io", "mac"):
            raise ValueError(f"forward_mode must be io or mac, not {self.forward_mode!r}")
        self.eth_peers = list(eth_peers or [])
        self.rxd, self.txd, self.mbufs = rxd, txd, mbufs
        self.image = image
        self.cache_dir = cache_dir
        self.accel_req = accel
        self.accel = ""
        self.accel_reason = ""
        self.boot_timeout_s = boot_timeout_s
        self.hugepage_dir = hugepage_dir
        self.connect_timeout_s = connect_timeout_s
        plan = options.get("plan")
        if testpmd_core_request(spec) is not None and plan is not None and name in plan.resolved:
            # testpmd.cores resolved for this VNF: a vCPU per forwarding CPU, + vCPU 0
            self.vcpus = 1 + len(plan.cpus(name))
        if cpu_pin is None and plan is not None and plan.cpus(name):
            role = plan.cpus(name)
            cpu_pin = [plan.housekeeping[0]] + [role[i % len(role)] for i in range(self.vcpus - 1)]
        self.cpu_pin = list(cpu_pin) if cpu_pin is not None else None
        if self.cpu_pin is not None and len(self.cpu_pin) != self.vcpus:
            raise ValueError(f"cpu_pin needs one CPU per vCPU ({self.vcpus}), got {self.cpu_pin}")
        self.proc: Optional[Process] = None
        self.console: Optional[_Console] = None
        self.ready = False
        #: the network namespace QEMU runs in (its tap NICs are there; None: this machine's)
        self.netns: Optional[str] = None
        self.port_macs: list[str] = []
        self.guest_dpdk = ""
        self.boot_s: Optional[float] = None
        self._t_start = 0.0
        self._vcpu_threads: list[int] = []
        self._lock = threading.RLock()
        self.console_log = run.run_dir / f"vm-{name}-console.log"
        self.testpmd_log = run.run_dir / f"vm-{name}-testpmd.log"
        self.ctl_sock = run.run_dir / f"vm-{name}-ctl.sock"
        self.qmp_sock = run.run_dir / f"vm-{name}-qmp.sock"
        for i, s in enumerate(sockets):
            self.add_port(PortRef(f"{name}-vhu{i}", VhostFrontend(), socket=Path(s),
                                  mac=self._mac(i)))
        # SR-IOV VFs passed through (vfio-pci): guest NICs after the vhost-user ones
        self.vf_pci = [sriov.full_address(a) for a in vf_pci]
        for i, a in enumerate(self.vf_pci):
            self.add_port(PortRef(f"{name}-vf{i}", PciNic(), pci=a))

    # -- helpers ---------------------------------------------------------------------------------
    @property
    def vhost_ports(self) -> list[PortRef]:
        """The NICs on vhost-user sockets (not the passed-through VFs)."""
        return [p for p in self.ports if isinstance(p.end, VhostFrontend)]

    def _mac(self, i: int) -> str:
        h = hashlib.sha1(f"{self.run.tag}/{self.vnf_name}".encode()).digest()
        return "52:54:00:%02x:%02x:%02x" % (h[0], h[1], i)

    def guest_hugepages(self) -> int:
        """2 MB pages the guest reserves for testpmd: all but ~320 MB of its memory (the kernel,
        the unpacked initramfs, ~64 MB since the image carries OVS-DPDK, sshd and python3, and
        testpmd's own heap; with 256 MB testpmd was killed by the guest's OOM killer at start)."""
        return max(64, (self.hugepage_mb - 320) // 2)

    def kernel_cmdline(self) -> str:
        args = ["console=ttyS0", "panic=-1", "quiet", "mitigations=off",
                f"hugepages={self.guest_hugepages()}", f"nfvperf.fwd={self.forward_mode}",
                f"nfvperf.nbcores={self.vcpus - 1}", f"nfvperf.queues={self.queues}",
                f"nfvperf.rxd={self.rxd}", f"nfvperf.txd={self.txd}", f"nfvperf.mbufs={self.mbufs}"]
        if self.vf_pci:
            args += ["intel_iommu=on", "iommu=pt"]     # the guest's vfio-pci binds the VFs
        if self.mtu > 1500:
            # one-segment jumbo frames in the guest's testpmd (its virtio ports run without
            # mergeable buffers: every RX buffer must hold a whole frame)
            args += [f"nfvperf.maxpkt={self.mtu + 18}", f"nfvperf.mbufsize={mbuf_size_for(self.mtu)}"]
        return " ".join(args)

    def argv(self) -> list[str]:
        assert self.image is not None
        mem = f"{self.hugepage_mb}M"
        # VFs: a q35 machine with a vIOMMU, so the guest's vfio-pci can drive them (a VF has no
        # INTx for uio_pci_generic)
        board = "q35" if self.vf_pci else "pc"
        if self.accel == "kvm":
            split = ",kernel-irqchip=split" if self.vf_pci else ""
            machine, cpu = ["-machine", f"{board},accel=kvm{split}"], ["-cpu", "host"]
        else:
            machine, cpu = ["-machine", board, "-accel", "tcg,thread=multi"], ["-cpu", "max"]
        if self.vf_pci:
            machine += ["-device", "intel-iommu,intremap=on,caching-mode=on"]
        a = [QEMU, "-name", f"nfvperf-{self.run.tag}-{self.vnf_name},debug-threads=on",
             *machine, *cpu, "-smp", str(self.vcpus), "-m", mem,
             "-object", f"memory-backend-file,id=mem,size={mem},mem-path={self.hugepage_dir},"
                        "share=on,prealloc=on",
             "-numa", "node,memdev=mem",
             "-kernel", str(self.image.kernel), "-initrd", str(self.image.initrd),
             "-append", self.kernel_cmdline(),
             "-display", "none", "-nodefaults", "-no-user-config", "-no-reboot",
             "-serial", f"file:{self.console_log}",
             "-chardev", f"socket,id=ctl,path={self.ctl_sock},server=on,wait=off,"
                         f"logfile={self.testpmd_log}",
             "-serial", "chardev:ctl",
             "-qmp", f"unix:{self.qmp_sock},server=on,wait=off"]
        for i, p in enumerate(self.vhost_ports):
            chardev = f"socket,id=vhu{i},path={p.socket}"
            chardev += ",server=on,wait=off" if self.server else ",reconnect=1"
            netdev = f"type=vhost-user,id=net{i},chardev=vhu{i},vhostforce=on"
            dev = self.nic_device(i, p)
            if self.mtu > 1500:
                dev += f",host_mtu={self.mtu}"     # VIRTIO_NET_F_MTU: the guest may take frames this big
            if self.queues > 1:
                netdev += f",queues={self.queues}"
                dev += self.mq_props()
            a += ["-chardev", chardev, "-netdev", netdev, "-device", dev]
        return a + sriov.vfio_device_args(self.vf_pci)

    def serves_sockets(self) -> bool:
        """QEMU creates its NICs' sockets (vhost-user or stream servers)."""
        return self.server

    def mq_props(self) -> str:
        """The multi-queue properties of a NIC with ``queues`` > 1: an MSI-X vector per queue,
        one for the config, one spare."""
        return f",mq=on,vectors={2 * self.queues + 2}"

    def nic_device(self, i: int, port: PortRef) -> str:
        """The ``-device virtio-net-pci,...`` of vhost-user NIC ``i`` (before MTU and queues):
        testpmd's guest runs without mergeable RX buffers, with 1024-entry rings."""
        return (f"virtio-net-pci,netdev=net{i},mac={port.mac},mrg_rxbuf=off,"
                "rx_queue_size=1024,tx_queue_size=1024")

    # -- life cycle ------------------------------------------------------------------------------
    def _attach_port(self, port: PortRef) -> None:
        raise Unsupported("the VM's NICs are fixed at start(): add_port() before start()")

    def start(self, wait: Optional[bool] = None) -> None:
        """Launch QEMU.  ``wait``: True = return only when the guest's testpmd forwards;
        False = return once QEMU runs (server: listens on the first socket); None (default) =
        wait for the boot when the backends connect within ``connect_timeout_s`` (always with
        server=False; with server=True when the switch's client ports already exist), else
        return early and leave the boot to :meth:`wait_ready`."""
        if self.proc is not None:
            return
        if len(self.ports) != self.nics:
            raise ValueError(f"{self.vnf_name}: the {self.name} guest has exactly {self.nics} "
                             f"NIC(s), got {len(self.ports)}")
        if shutil.which(QEMU) is None:
            raise DutFailure(f"{QEMU} not found: apt-get install qemu-system-x86")
        if self.vf_pci:
            failed = [c for c in sriov.vf_checks(self.vf_pci) if c.status == "fail"]
            if failed:
                raise DutFailure(f"{self.vnf_name}: " + "; ".join(
                    f"{c.detail} (fix: {c.fix})" for c in failed))
        if not self.server:
            missing = [str(p.socket) for p in self.vhost_ports if not self._socket(p).exists()]
            if missing:
                raise DutFailure(f"{self.vnf_name}: server=False but no vhost-user socket at "
                                 f"{', '.join(missing)}: the backend (OVS dpdkvhostuser, net_vhost "
                                 "client=0) must create it before the VM starts")
        self.accel, self.accel_reason = detect_accel() if self.accel_req == "auto" else (self.accel_req, "requested")
        if self.boot_timeout_s is None:
            self.boot_timeout_s = 120.0 if self.accel == "kvm" else 300.0
        if self.image is None:
            self.image = vm_image.build(self.cache_dir)
        self._check_hugepages()
        self.run.run_dir.mkdir(parents=True, exist_ok=True)
        paths = [self.ctl_sock, self.qmp_sock] + ([self._socket(p) for p in self.vhost_ports]
                                                  if self.server else [])
        for p in paths:
            if len(str(p)) > 107:
                raise ValueError(f"socket path longer than 107 bytes: {p}")
            p.parent.mkdir(parents=True, exist_ok=True)
            p.unlink(missing_ok=True)
            self.tracker.add("socket", str(p), functools.partial(p.unlink, missing_ok=True))
        for f in (self.console_log, self.testpmd_log):
            f.unlink(missing_ok=True)
        self.proc = Process(f"qemu-{self.vnf_name}", self.argv(), self.run, self.tracker,
                            netns=self.netns)
        self._t_start = time.monotonic()
        self.proc.start()
        if self.cpus:
            assert self.proc.pid is not None  # set by start()
            with contextlib.suppress(OSError):
                os.sched_setaffinity(self.proc.pid, set(self.cpus))
        self.tracker.add("dut", f"vm-{self.vnf_name}", self.stop)
        self.started = True
        if self.serves_sockets() and self.vhost_ports:
            # QEMU creates the first NIC's socket and waits there for the switch.
            first = self.vhost_ports[0]
            self._wait_for(lambda: self._socket(first).exists(), 30,
                           f"QEMU did not create {first.socket}")
        if wait is False:
            return
        if wait is None and self.server and self.vhost_ports and not self.backends_connected(self.connect_timeout_s):
            log.info("%s: vhost-user backends not connected yet; call wait_ready() after the "
                     "switch's ports exist", self.vnf_name)
            return
        self.wait_ready()

    def backends_connected(self, timeout: float = 0.0) -> bool:
        """True once every NIC has its vhost-user backend (QEMU then runs the guest and answers
        QMP; before that it blocks in its set-up)."""
        deadline = time.monotonic() + timeout
        while True:
            self.alive()
            with contextlib.suppress(Exception):  # not up yet
                _qmp(self.qmp_sock, {"execute": "query-status"}, timeout=1.0)
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.3)

    def _socket(self, port: PortRef) -> Path:
        """The vhost-user socket of ``port`` (each NIC of the VM is one)."""
        if port.socket is None:
            raise DutFailure(f"{self.vnf_name}: port {port.name} has no vhost-user socket")
        return Path(port.socket)

    def _check_hugepages(self) -> None:
        try:
            free = hp.free_mb()
        except Exception:  # noqa: BLE001 - the check is advisory
            return
        if free < self.hugepage_mb:
            raise DutFailure(f"{self.vnf_name}: the guest needs {self.hugepage_mb} MB of hugepages, "
                             f"{free} MB are free (reserve more: nfvperf preflight, or lower "
                             "hugepage_mb)")

    def _wait_for(self, cond, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            self.alive()
            if time.monotonic() > deadline:
                raise DutFailure(f"{self.vnf_name}: {what} within {timeout:.0f} s; "
                                 f"QEMU log {self.proc.log_path if self.proc else '-'}:\n"
                                 f"{self.proc.log_tail() if self.proc else ''}")
            time.sleep(0.1)

    def _read(self, p: Path) -> str:
        try:
            return p.read_text(errors="replace")
        except OSError:
            return ""

    def await_boot(self, log: Path, pattern: str, timeout: Optional[float],
                   failure: Callable[[float, str, str], str]) -> "re.Match[str]":
        """Poll ``log`` until ``pattern`` appears in it (the guest is up), checking QEMU is alive;
        sets ``boot_s`` and returns the match.  Past ``timeout`` (default the VNF's boot timeout)
        raise :class:`DutFailure` with ``failure(timeout, console tail, log text)``."""
        if self.proc is None:
            raise DutFailure(f"{self.vnf_name} was never started")
        timeout = timeout or self.boot_timeout_s or 300.0
        deadline = time.monotonic() + timeout
        while True:
            self.alive()
            text = self._read(log)
            m = re.search(pattern, text)
            if m:
                self.boot_s = round(time.monotonic() - self._t_start, 2)
                return m
            if time.monotonic() > deadline:
                console = "\n".join(self._read(self.console_log).splitlines()[-15:])
                raise DutFailure(failure(timeout, console, text))
            time.sleep(0.2)

    def _testpmd_not_up(self, timeout: float, console: str, text: str) -> str:
        hint = ""
        if not console.strip() or "NFVPERF-GUEST" not in console:
            hint = ("\n(the guest kernel did not reach init: is the switch connected to "
                    "every vhost-user socket? with accel=kvm on a nested hypervisor try "
                    "NFVPERF_VM_ACCEL=tcg)")
        return (f"{self.vnf_name}: guest testpmd not up within {timeout:.0f} s (accel "
                f"{self.accel}); console {self.console_log}:\n{console}\n"
                f"testpmd log {self.testpmd_log}:\n{text[-1500:]}{hint}")

    def wait_ready(self, timeout: Optional[float] = None) -> None:
        """Wait until the guest has booted and testpmd forwards (its first prompt)."""
        with self._lock:
            if self.ready:
                return
            text = self.await_boot(self.testpmd_log, PROMPT, timeout, self._testpmd_not_up).string
            self.guest_dpdk, self.port_macs = parse_banner(text)
            if len(self.port_macs) < len(self.ports):
                raise DutFailure(f"{self.vnf_name}: {len(self.port_macs)} of {len(self.ports)} "
                                 f"guest NICs came up in testpmd; log {self.testpmd_log}")
            self.console = _Console(self.ctl_sock)
            self.console.connect()
            self.console.command("", 30)
            self._pin_vcpus()
            if self.forward_mode == "mac" and self.eth_peers:
                self.console.command("stop")
                for i, mac in enumerate(self.eth_peers):
                    if mac:
                        self.console.command(f"set eth-peer {i} {mac}")
                self.console.command("start")
            self.ready = True
            log.info("%s: guest up in %.1f s (accel %s)", self.vnf_name, self.boot_s, self.accel)

    def _pin_vcpus(self) -> None:
        try:
            cpus = _qmp(self.qmp_sock, {"execute": "query-cpus-fast"})[0]
        except Exception as e:  # noqa: BLE001
            log.warning("%s: QMP query-cpus-fast failed: %s", self.vnf_name, e)
            return
        self._vcpu_threads = [c.get("thread-id") for c in sorted(cpus, key=lambda c: c["cpu-index"])]
        if self.cpu_pin is None:
            return
        for tid, cpu in zip(self._vcpu_threads, self.cpu_pin):
            try:
                os.sched_setaffinity(tid, {cpu})
            except OSError as e:
                raise DutFailure(f"{self.vnf_name}: pinning vCPU thread {tid} to CPU {cpu}: {e}") from e

    def program(self, flows=None) -> None:
        if flows is None:
            return
        want = {(f.in_port, f.out_port) for f in flows}
        if not want <= {(f.in_port, f.out_port) for f in cross_connect(2)} or \
                any(f.match for f in flows):
            raise Unsupported("the VM VNF forwards NIC 0 <-> NIC 1 only")

    def command(self, line: str, timeout: float = 20.0) -> str:
        """One testpmd command in the guest; returns its output."""
        self.wait_ready()
        self.alive()
        assert self.console is not None
        return self.console.command(line, timeout)

    def raw_port_stats(self) -> dict[int, dict[str, int]]:
        out = self.command("show port stats all")
        stats = parse_port_stats(out)
        if len(stats) < len(self.ports):
            raise DutFailure(f"{self.vnf_name}: could not parse guest port stats:\n{out[-1500:]}")
        return stats

    def counters(self) -> dict[str, Any]:
        stats = self.raw_port_stats()
        with contextlib.suppress(DutFailure):
            for i, f in parse_fwd_stats(self.command("show fwd stats all")).items():
                if i in stats:
                    stats[i]["fwd_tx_dropped"] = f["tx_dropped"]
                    stats[i]["tx_dropped"] = max(stats[i]["tx_dropped"], f["tx_dropped"])
        ports = {self.ports[i].name: s for i, s in sorted(stats.items()) if i < len(self.ports)}
        tot = {k: sum(s[k] for s in ports.values())
               for k in ("rx_packets", "tx_packets", "rx_dropped", "tx_dropped")}
        return {"dut": self.name, "vnf": self.vnf_name, "ports": ports, "total": tot}

    def clear_counters(self) -> None:
        self.command("clear port stats all")

    def alive(self) -> None:
        if self.proc is None:
            raise DutFailure(f"{self.vnf_name} was never started")
        try:
            self.proc.check()
        except DutFailure as e:
            console = "\n".join(self._read(self.console_log).splitlines()[-15:])
            tp = "\n".join(self._read(self.testpmd_log).splitlines()[-15:])
            raise DutFailure(f"{e}\nguest console {self.console_log}:\n{console}\n"
                             f"guest testpmd {self.testpmd_log}:\n{tp}") from None

    def stop(self) -> None:
        with self._lock:
            if self.console is not None:
                self.console.close()
                self.console = None
            if self.proc is not None:
                if self.proc.running():
                    with contextlib.suppress(Exception):
                        _qmp(self.qmp_sock, {"execute": "quit"}, timeout=3)
                    with contextlib.suppress(Exception):
                        if self.proc.proc is not None:
                            self.proc.proc.wait(5)
                self.proc.stop()
            for p in [self.ctl_sock, self.qmp_sock] + ([self._socket(p) for p in self.vhost_ports]
                                                       if self.server else []):
                with contextlib.suppress(OSError):
                    p.unlink()
                self.tracker.forget("socket", str(p))
            self.tracker.forget("dut", f"vm-{self.vnf_name}")
            self.ready = False
            self.started = False
            self.proc = None

    def reset(self) -> None:
        """RFC 6201 reset of the VNF: restart testpmd's forwarding inside the guest."""
        self.command("stop")
        self.command("start")

    # -- reporting -------------------------------------------------------------------------------
    def version(self) -> str:
        img = self.image
        guest = f"kernel {img.kernel_release}, dpdk {self.guest_dpdk or img.dpdk_version}" if img \
            else ""
        return f"QEMU {qemu_version()}" + (f"; guest {guest}" if guest else "")

    def environment(self) -> dict[str, Any]:
        env = super().environment()
        img = self.image
        env.update({
            "vnf": self.vnf_name, "kind": "vm", "accel": self.accel,
            "accel_reason": self.accel_reason, "qemu": qemu_version(), "vcpus": self.vcpus,
            "memory_mb": self.hugepage_mb, "guest_hugepages_2m": self.guest_hugepages(),
            "cpu_pin": self.cpu_pin, "vcpu_threads": self._vcpu_threads,
            "queues": self.queues, "forward_mode": self.forward_mode,
            "vhost_server": self.server, "sockets": [str(p.socket) for p in self.vhost_ports],
            "vf_pci": self.vf_pci,
            "port_macs": self.port_macs if self.port_macs else [p.mac for p in self.ports],
            "boot_s": self.boot_s, "console_log": str(self.console_log),
            "testpmd_log": str(self.testpmd_log),
            "argv": self.proc.argv if self.proc else None,
            "image": ({"key": img.key, "content_sha256": img.content_sha256,
                       "kernel": img.kernel_release, "dpdk": img.dpdk_version,
                       "manifest": str(img.manifest)} if img else None),
        })
        return env
