"""TCP guests (seed 001): a QEMU guest with one vhost-user virtio-net NIC driven by the guest's own
kernel, where iperf3 runs as client or server.

The guest is the VM VNF's (:class:`nfvperf.vm.qemu.VmVnf`: same image, QEMU command line, hugepage
memory, accelerator choice, life cycle), booted with ``nfvperf.mode=tcp``: its init loads
virtio-net, gives the first NIC ``nfvperf.ip``/``nfvperf.mtu`` and then reads shell command lines
from the second serial port (a Unix socket on the host, logged to ``vm-<name>-shell.log``).
:class:`GuestShell` runs one command line there and returns its exit status and output;
:class:`TcpGuest` offers that as a host-like ``run(argv, netns=..., check=..., timeout=...)``, so
:mod:`nfvperf.tg.ifsettings` sets TSO and the queue count inside the guest with the same ethtool
calls and read-backs as on a host interface::

    g = TcpGuest(run, tracker, socket=s, ip="198.18.0.2", name="vm1", vcpus=2, queues=2)
    g.start(); ... the switch connects its port ...; g.wait_ready()
    g.run(["ethtool", "-k", g.ifname]).stdout
    g.stop()

Multi-queue: with ``queues`` > 1 QEMU gives the NIC ``mq=on,vectors=2N+2`` and the vhost-user
backend N queue pairs; the guest starts with as many combined channels as it has vCPUs (capped at
N) and ``ethtool -L <if> combined K`` picks K.  ``topology.vm`` (:class:`VmSpec`) sizes the guests.
"""
from __future__ import annotations

import contextlib
import itertools
import re
import shlex
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, ClassVar, Literal, Optional, Sequence, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

from nfvperf.dut.base import DutFailure, PortRef, TopologyView, Unsupported
from nfvperf.host.proc import CommandError
from nfvperf.host.run import ResourceTracker, RunContext

from . import image as vm_image
from .qemu import VmVnf, _Console, qemu_version

SHELL_READY = "NFVPERF-SHELL"


class VmSpec(BaseModel):
    """``topology.vm``: the TCP guests of the ``host-vm`` / ``vm-vm`` / ``vm-link-vm`` kinds
    (seed 001: 2 vCPUs and 2 GB in scenarios 1 and 2, 4 vCPUs and 4 GB in scenario 3)."""

    model_config = ConfigDict(extra="forbid")

    vcpus: int = Field(2, ge=1, le=16, description="vCPUs of each TCP guest (iperf3 processes "
                       "pinned per vCPU: processes <= vcpus)")
    memory_mb: int = Field(512, ge=384, le=65536, description="guest RAM (MB), from the host's "
                           "hugepages (vhost-user shares it with the switch)")
    queues: Optional[int] = Field(None, ge=1, le=16, description="virtio-net queue pairs QEMU gives "
                                  "the NIC (mq=on,vectors=2N+2 when > 1); default: vcpus. The tcp "
                                  "method's multiqueue picks how many the guest uses (ethtool -L)")
    image: Optional[str] = Field(None, description="a guest image directory (vmlinuz, initrd.img, "
                                 "manifest.json as `python3 -m nfvperf.vm.image build` writes it); "
                                 "default: nfvperf's own, built or reused from the cache")
    accel: Literal["auto", "kvm", "tcg"] = Field("auto", description="QEMU accelerator: auto = KVM "
                                                 "when /dev/kvm boots a stock kernel, else TCG")

    @field_validator("image")
    @classmethod
    def _tcp_image(cls, v: Optional[str]) -> Optional[str]:
        why = image_refusal(v)
        if why:
            raise ValueError(why)
        return v

    def virtio_queues(self) -> int:
        return int(self.queues or self.vcpus)


def image_refusal(image_dir: Optional[str]) -> Optional[str]:
    """Why the guest image at ``image_dir`` (``topology.vm.image``) cannot be a TCP guest (None:
    it can, or it is the default image, which nfvperf builds with iperf3 and ethtool)."""
    if not image_dir:
        return None
    d = Path(image_dir).expanduser()
    fix = ("build one with `python3 -m nfvperf.vm.image build --cache-dir DIR` (it holds iperf3 "
           "and ethtool) or leave topology.vm.image unset")
    if not (d / "manifest.json").is_file():
        return f"{d} has no manifest.json (not a guest image); {fix}"
    try:
        info = vm_image._load_info(d)
    except (OSError, ValueError, KeyError) as e:
        return f"{d}/manifest.json cannot be read ({e}); {fix}"
    missing = [Path(t).name for t in vm_image.TCP_TOOLS if t not in info.roots]
    if missing:
        return (f"the image {d} has no {' or '.join(missing)} (its manifest lists "
                f"{', '.join(info.roots) or 'no programs'}), which a TCP guest runs; {fix}")
    if "tcp" not in info.modes:
        return f"the image {d} has no TCP mode in its init (an older recipe); {fix}"
    for f in (info.kernel, info.initrd):
        if not f.is_file():
            return f"{f} is missing; {fix}"
    return None


def load_image(image_dir: Optional[str], cache_dir: Optional[Path] = None) -> vm_image.ImageInfo:
    """The guest image: ``image_dir`` (checked by :func:`image_refusal`) or nfvperf's own."""
    why = image_refusal(image_dir)
    if why:
        raise ValueError(f"topology.vm.image: {why}")
    if image_dir:
        return vm_image._load_info(Path(image_dir).expanduser())
    return vm_image.build(cache_dir)


class GuestShell(_Console):
    """Shell command lines on the guest's second serial port.  The guest's init evaluates each
    line it reads; :meth:`run` wraps a line in begin/end markers, so the output between them and
    the exit status come back whatever else the port carried."""

    def __init__(self, path: Path, name: str = "guest"):
        super().__init__(path)
        self.name = name
        self._seq = itertools.count(1)
        self._run_lock = threading.Lock()

    def run_line(self, line: str, timeout: float = 30.0) -> tuple[int, str]:
        """Run ``line`` (one shell command line; a trailing ``&`` runs it in the background) in
        the guest; returns (exit status, output with stderr)."""
        if "\n" in line or "\r" in line:
            raise ValueError("one command line, without newlines")
        if self.sock is None:
            raise DutFailure(f"{self.name}: guest shell not connected")
        with self._run_lock:
            n = next(self._seq)
            # markers without quotes or shell syntax: the guest's init evals each line, and a
            # quote lost on the serial port made it an unterminated string, a syntax error that
            # ended init (guest kernel panic, "Attempted to kill init", seen under TCG in CI).
            # The init now evals each line in a subshell as well, so a line garbled anyway costs
            # that line (no end marker: a timeout naming it), not the guest
            begin, end = f"@@{n}B@@", re.compile(rf"@@{n}E(\d+)@@")
            sep = " " if line.rstrip().endswith("&") else "; "
            text = f"echo {begin}; {line.rstrip()}{sep}echo @@{n}E$?@@\n"
            with self._cv:
                self._buf = ""
            self.sock.sendall(text.encode())
            out, m = self._expect(end, timeout, f"{self.name}: guest shell {self.path} closed during {line[:200]!r}",
                                  f"{self.name}: no end of {line[:200]!r} within {timeout:.0f} s")
            out = out[: m.start()]
            b = out.find(begin)
            out = out[b + len(begin):] if b >= 0 else out
            return int(m.group(1)), out.replace("\r", "").strip("\n")


def env_prefix(env: Optional[dict[str, str]]) -> str:
    """``K=V ...`` before a command in the guest's shell (the variables are the command's)."""
    for k in env or {}:
        if not k.isidentifier():
            raise ValueError(f"environment variable name {k!r}: letters, digits and '_' only")
    return "".join(f"{k}={shlex.quote(str(v))} " for k, v in (env or {}).items())


class GuestHost:
    """A :class:`TcpGuest` where a host object is expected: ``run`` runs in the guest (its
    ``netns`` only labels messages)."""

    remote = False

    def __init__(self, guest: "TcpGuest"):
        self.guest = guest
        self.name = guest.iface

    def run(self, argv: Sequence[str], *, netns: Optional[str] = None, check: bool = True,
            timeout: float = 30.0, **_: Any) -> subprocess.CompletedProcess:
        return self.guest.run_argv(argv, check=check, timeout=timeout)


class ShellGuest(VmVnf):
    """A guest whose init answers on a shell over the control port (``SHELL_READY`` plus its own
    fields on the shell log once booted): TcpGuest, and vm.pci_guest.PciGuest.  ``shell_hint``:
    what to check when the shell does not come up."""

    shell_hint = "are the vhost-user backends connected?"
    shell: Optional[GuestShell]
    shell_log: Path

    def _shell_not_up(self, timeout: float, console: str, text: str) -> str:
        return (f"{self.vnf_name}: guest shell not up within {timeout:.0f} s (accel "
                f"{self.accel}); console {self.console_log}:\n{console}\n({self.shell_hint} "
                "with accel=kvm on a nested hypervisor try NFVPERF_VM_ACCEL=tcg)")

    def _await_shell(self, fields: str, timeout: Optional[float]) -> re.Match:
        """The boot line ``SHELL_READY <fields>`` (a regex), or DutFailure with the console."""
        return self.await_boot(self.shell_log, SHELL_READY + " " + fields, timeout, self._shell_not_up)

    def _open_shell(self) -> None:
        """Connect the shell (the console VmVnf.stop() closes), pin the vCPUs; ready."""
        self.shell = GuestShell(self.ctl_sock, self.vnf_name)
        self.shell.connect()
        self.console = self.shell
        self._pin_vcpus()
        self.ready = True

    def shell_line(self, line: str, timeout: float = 30.0) -> tuple[int, str]:
        """One shell command line in the guest: (exit status, output)."""
        self.wait_ready()
        self.alive()
        assert self.shell is not None
        try:
            return self.shell.run_line(line, timeout)
        except DutFailure:
            # the shell's socket closes when QEMU exits (under TCG it has died of SIGSEGV): say
            # why, with QEMU's status, its log and the guest console (alive), not only "closed"
            self._died_why()
            raise

    def run_argv(self, argv: Sequence[str], check: bool = True, timeout: float = 30.0,
                 env: Optional[dict[str, str]] = None) -> subprocess.CompletedProcess:
        """Run ``argv`` in the guest (``env``: variables of the command); raises
        :class:`CommandError` when ``check`` and it exits non-zero."""
        line = env_prefix(env) + shlex.join([str(a) for a in argv])
        rc, out = self.shell_line(line, timeout)
        cp = subprocess.CompletedProcess(list(argv), rc, out, "")
        if check and rc != 0:
            raise CommandError(f"{self.vnf_name}: {line} failed ({rc}): {out.strip()[-500:]}", cp)
        return cp

    def stop(self) -> None:
        """Power the guest off from its shell, then stop QEMU (:meth:`VmVnf.stop`)."""
        with contextlib.suppress(Exception):
            if self.shell is not None and self.proc is not None and self.proc.running():
                self.shell.run_line("poweroff -f &", timeout=2)
        super().stop()
        self.shell = None

    def _died_why(self, wait_s: float = 2.0) -> None:
        """Raise :meth:`alive`'s account if QEMU exits within ``wait_s``; return if it runs on."""
        end = time.monotonic() + wait_s
        while self.proc is not None and self.proc.running() and time.monotonic() < end:
            time.sleep(0.1)
        self.alive()


class TcpGuest(ShellGuest):
    """A QEMU guest on one vhost-user NIC with kernel networking, for iperf3 (see the module doc).

    ``TcpGuest(run, tracker, socket=..., ip="198.18.0.2", prefix=24, name="vm0", vcpus=2,
    memory_mb=512, queues=None, image=None, accel="auto", mtu=1500, server=True, cpus=())``;
    ``queues`` defaults to ``vcpus`` (multi-queue on the QEMU side whenever vcpus > 1)."""

    name = "vm-tcp"
    __test__ = False
    min_vcpus: ClassVar[int] = 1
    nics: ClassVar[int] = 1

    @classmethod
    def vm_options(cls, spec: TopologyView) -> Optional[VmSpec]:
        """The spec's ``vm:`` section (the TCP guests'), None when it has none."""
        section = spec.option_section("vm")
        return section if isinstance(section, VmSpec) else None

    @classmethod
    def hugepage_demand_mb(cls, spec: TopologyView) -> int:
        vm = cls.vm_options(spec)
        return int(vm.memory_mb if vm is not None else 512) + 64

    @classmethod
    def core_request(cls, spec: TopologyView) -> None:
        return None

    def __init__(self, run: RunContext, tracker: ResourceTracker, socket: Union[str, Path],
                 ip: str, prefix: int = 24, name: str = "vm0", vcpus: int = 2,
                 memory_mb: int = 512, queues: Optional[int] = None,
                 image: Optional[vm_image.ImageInfo] = None, accel: str = "auto",
                 mtu: int = 1500, server: bool = True, cpus: Sequence[int] = (),
                 boot_timeout_s: Optional[float] = None, **options: Any):
        if queues is not None and queues < 1:
            raise ValueError(f"queues must be >= 1, got {queues}")
        super().__init__(run, tracker, sockets=[socket], server=server, name=name,
                         hugepage_mb=memory_mb, vcpus=vcpus, cpus=cpus,
                         queues=int(queues or vcpus), image=image, accel=accel, mtu=mtu,
                         boot_timeout_s=boot_timeout_s, **options)
        self.ip = ip
        self.prefix = int(prefix)
        self.ifname = ""
        self.shell: Optional[GuestShell] = None
        # the control port's log: the shell's output (what testpmd_log is for the VNF)
        self.testpmd_log = self.shell_log = run.run_dir / f"vm-{name}-shell.log"

    # -- QEMU ------------------------------------------------------------------------------------
    def kernel_cmdline(self) -> str:
        return " ".join(["console=ttyS0", "panic=-1", "quiet", "mitigations=off", "nfvperf.mode=tcp",
                         f"nfvperf.ip={self.ip}/{self.prefix}", f"nfvperf.mtu={self.mtu}"])

    def nic_device(self, i: int, port: PortRef) -> str:
        """The kernel's virtio-net: mergeable RX buffers (QEMU's default, what a TCP receiver
        with GRO/TSO wants) and 256-entry rings (guest memory is small).  Under TCG without
        MSI-X (:meth:`mq_props`)."""
        dev = f"virtio-net-pci,netdev=net{i},mac={port.mac},rx_queue_size=256,tx_queue_size=256"
        return dev + (",vectors=0" if self.accel == "tcg" else "")

    def mq_props(self) -> str:
        """Multi-queue; under TCG on the legacy interrupt (``vectors=0``): measured, QEMU 7.2
        with TCG dies (SIGSEGV in a vCPU thread) when the guest kernel's virtio-net sets up the
        MSI-X vectors of a vhost-user NIC, with one queue or several; the guest's virtio-net
        serves all queues from the one interrupt then."""
        return ",mq=on" if self.accel == "tcg" else super().mq_props()

    # -- life cycle ------------------------------------------------------------------------------
    shell_hint = "is the switch connected to the vhost-user socket?"

    def wait_ready(self, timeout: Optional[float] = None) -> None:
        """Wait until the guest booted and its shell answers on the control port."""
        with self._lock:
            if self.ready:
                return
            self.ifname = self._await_shell(r"if=(\S*)", timeout).group(1)
            if not self.ifname:
                console = "\n".join(self._read(self.console_log).splitlines()[-15:])
                raise DutFailure(f"{self.vnf_name}: the guest found no network interface (virtio-net "
                                 f"did not load); console {self.console_log}:\n{console}")
            self._open_shell()

    @property
    def host(self) -> "GuestHost":
        """The guest as a host object (``run(argv, netns=..., check=..., timeout=...)``) for
        helpers written for hosts (nfvperf.tg.ifsettings)."""
        return GuestHost(self)

    def command(self, line: str, timeout: float = 20.0) -> str:
        return self.shell_line(line, timeout)[1]

    @property
    def iface(self) -> str:
        """``vm:<name>``: how messages name the guest (where a host path names a namespace)."""
        return f"vm:{self.vnf_name}"

    # -- counters --------------------------------------------------------------------------------
    def raw_port_stats(self) -> dict[int, dict[str, int]]:
        """The NIC's kernel counters (/proc/net/dev)."""
        out = self.command("cat /proc/net/dev")
        for line in out.splitlines():
            name, _, rest = line.partition(":")
            if name.strip() == self.ifname:
                v = [int(x) for x in rest.split()]
                return {0: {"rx_bytes": v[0], "rx_packets": v[1], "rx_dropped": v[3],
                            "tx_bytes": v[8], "tx_packets": v[9], "tx_dropped": v[11]}}
        raise DutFailure(f"{self.vnf_name}: no {self.ifname} in the guest's /proc/net/dev:\n{out[-800:]}")

    def counters(self) -> dict[str, Any]:
        st = self.raw_port_stats()[0]
        return {"dut": self.name, "vnf": self.vnf_name, "ports": {self.ports[0].name: st},
                "total": {k: st[k] for k in ("rx_packets", "tx_packets", "rx_dropped", "tx_dropped")}}

    def clear_counters(self) -> None:
        """Kernel counters cannot be cleared; read them before and after instead."""

    def program(self, flows: Any = None) -> None:
        if flows is not None:
            raise Unsupported("a TCP guest forwards nothing")

    def reset(self) -> None:
        raise Unsupported("a TCP guest has no RFC 6201 reset")

    # -- reporting -------------------------------------------------------------------------------
    def version(self) -> str:
        img = self.image
        return f"QEMU {self._qemu_version()}" + (f"; guest kernel {img.kernel_release}" if img else "")

    @staticmethod
    def _qemu_version() -> str:
        try:
            return qemu_version()
        except Exception:  # noqa: BLE001 - reporting only
            return "?"

    def environment(self) -> dict[str, Any]:
        env = super().environment()
        for k in ("forward_mode", "testpmd_log", "guest_hugepages_2m"):
            env.pop(k, None)
        env.update({"role": "tcp", "ip": self.ip, "prefix": self.prefix, "ifname": self.ifname,
                    "shell_log": str(self.shell_log),
                    "image_roots": list(self.image.roots) if self.image else None})
        return env
