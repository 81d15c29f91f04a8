"""The real-NIC path on emulated NICs (issue 19 item 4): a QEMU guest whose virtio-net-pci devices
are PCI NICs that nfvperf's own ``port_kind: pci`` code drives, with their other ends on this host
through vhost-user.

This host has no NIC to give DPDK, and the stock Debian kernel has no VFIO no-IOMMU mode, so the
PCI devices are a guest's: :class:`PciGuest` boots the VM VNF's image (same kernel, QEMU command
line, hugepage memory, accelerator choice, life cycle as :class:`nfvperf.vm.qemu.VmVnf`) with
``rdinit=`` pointing at its own init, added by a small second initramfs archive (:func:`overlay`)
that also carries this host's ``tgen`` and ``socat`` with the shared libraries they need.  That
init loads ``uio_pci_generic`` and leaves every NIC unbound, as a freshly booted server is; the
guest's shell (second serial port) and a byte stream for tgen's JSON-RPC (third serial port,
relayed to tgen's Unix socket by socat in the guest) are the only ways in.

:class:`~nfvperf.vm.pci_host.GuestPciHost` is that guest as a Host (tgen with ``-a <pci>``, the
NIC preflight of ``nfvperf.testbed.hosts.nic_pci_checks`` run in it unchanged)::

    g = PciGuest(run, tracker, sockets=[s0, s1], name="tester")
    g.start(wait=False); ... a vhost-user backend (host testpmd, OVS) connects s0, s1 ...
    g.wait_ready()
    h = g.host                                  # GuestPciHost
    g.bind(g.pci_addresses(), "uio_pci_generic")
    tgen = TgenProcess([PortSpec(a) for a in g.pci_addresses()], host=h, binary=GUEST_TGEN, ...)

What it does not emulate: an IOMMU (uio_pci_generic, not vfio-pci, drives the NICs), SR-IOV VFs,
a NIC's own speed and offloads (virtio), NUMA placement (one node).
"""
from __future__ import annotations

import contextlib
import functools
import shlex
import shutil
from pathlib import Path
from typing import Any, ClassVar, Optional, Sequence, Union

from nfvperf.dut.base import DutFailure
from nfvperf.dut.l3fwd import find_l3fwd
from nfvperf.host.run import ResourceTracker, RunContext
from nfvperf.tg.tgen import find_tgen_binary

from . import image as vm_image
from .guest import GuestShell, ShellGuest
from .pci_host import GuestPciHost, GuestPopen
from .pci_overlay import GUEST_INIT, GUEST_TGEN, MGMT_SLOT, GuestSsh, overlay
from .pci_slots import FIRST_SLOT, MAX_NICS, pci_address


class PciGuest(ShellGuest):
    """A QEMU guest with ``len(sockets)`` virtio-net-pci NICs on vhost-user (QEMU the server),
    nothing bound to them, and a shell.  See the module doc.

    ``PciGuest(run, tracker, sockets=[s0, s1], name="tester", vcpus=2, memory_mb=1024,
    guest_hugepages_mb=512, image=None, accel="auto", tgen=None, socat=None,
    stream_server=None, taps=None, queues=1, netns=None)``; ``stream_server`` True/False: the
    sockets are cables to another PciGuest's NICs (QEMU ``-netdev stream``), the guest started
    with True first; ``taps``: instead, each NIC is the tap of that name (``queues`` queue pairs,
    virtio-net-pci ``mq=on``) which QEMU creates in ``netns``, where the caller cables it
    (:class:`nfvperf.testbed.guests.TapCables`)."""

    name = "vm-pci"
    __test__ = False
    min_vcpus: ClassVar[int] = 1
    #: the generator's two ports (tg0, tg1 of a p2p topology)
    nics: ClassVar[int] = 2

    def __init__(self, run: RunContext, tracker: ResourceTracker,
                 sockets: Sequence[Union[str, Path]], name: str = "tester", vcpus: int = 2,
                 memory_mb: int = 1024, guest_hugepages_mb: int = 512,
                 image: Optional[vm_image.ImageInfo] = None, accel: str = "auto",
                 tgen: Optional[Path] = None, socat: Optional[Path] = None,
                 cpus: Sequence[int] = (), boot_timeout_s: Optional[float] = None,
                 stream_server: Optional[bool] = None, taps: Optional[Sequence[str]] = None,
                 queues: int = 1, netns: Optional[str] = None, ssh: Optional[GuestSsh] = None):
        if len(sockets) != self.nics:
            raise ValueError(f"sockets: the PCI guest has {self.nics} emulated NICs, one "
                             f"vhost-user socket each; got {len(sockets)}")
        if guest_hugepages_mb + 256 > memory_mb:
            raise ValueError(f"guest_hugepages_mb ({guest_hugepages_mb}) must leave 256 MB of the "
                             f"guest's memory_mb ({memory_mb}) to its kernel")
        # a guest that connects its cables to another's sockets must not create (or remove) them
        super().__init__(run, tracker, sockets=sockets, server=stream_server is not False, name=name,
                         hugepage_mb=memory_mb, vcpus=vcpus, cpus=cpus, image=image, accel=accel,
                         boot_timeout_s=boot_timeout_s)
        self.guest_hugepages_mb = int(guest_hugepages_mb)
        # None: the NICs are vhost-user (a backend on this host); True/False: each socket is a
        # cable to another guest's NIC (QEMU's stream netdev), this guest listening or connecting
        self.stream_server = stream_server
        if taps is not None and len(taps) != self.nics:
            raise ValueError(f"taps: one per NIC ({self.nics}), got {len(taps)}")
        self.taps = list(taps) if taps is not None else None
        self.tap_queues = int(queues)
        self.ssh = ssh
        if ssh is not None and netns not in (None, ssh.netns):
            raise ValueError(f"ssh: the management tap is in {ssh.netns}, the NICs' in {netns}")
        self.netns = netns or (ssh.netns if ssh is not None else None)
        self.tgen_path = tgen
        self.socat_path = socat
        self.rpc_sock = run.run_dir / f"vm-{name}-rpc.sock"
        self.tty_sock = run.run_dir / f"vm-{name}-tty.sock"
        self.initrd = run.run_dir / f"vm-{name}-initrd.img"
        self.testpmd_log = self.shell_log = run.run_dir / f"vm-{name}-shell.log"
        self.shell: Optional[GuestShell] = None
        self.guest_nics: list[str] = []
        self._host: Optional[GuestPciHost] = None

    def serves_sockets(self) -> bool:
        return self.server and self.taps is None

    def pci_addresses(self) -> list[str]:
        """The NICs' addresses in the guest, in socket order."""
        return [pci_address(i) for i in range(len(self.vhost_ports))]

    @classmethod
    def with_nics(cls, n: int) -> "type[PciGuest]":
        """This class with ``n`` emulated NICs (1..:data:`MAX_NICS`) instead of 2."""
        if not 1 <= n <= MAX_NICS:
            raise ValueError(f"nics: a PCI guest has 1 to {MAX_NICS} emulated NICs, not {n}")
        if n == cls.nics:
            return cls
        return _with_nics(cls, n)

    # -- QEMU ------------------------------------------------------------------------------------
    def kernel_cmdline(self) -> str:
        mgmt = [f"nfvperf.mgmt={self.ssh.address}/30"] if self.ssh is not None else []
        return " ".join(["console=ttyS0", "panic=-1", "quiet", "mitigations=off",
                         f"rdinit={GUEST_INIT}", f"hugepages={self.guest_hugepages_mb // 2}", *mgmt])

    def nic_device(self, i: int, port: Any) -> str:
        # a fixed slot per NIC, so the addresses are known before the boot
        dev = super().nic_device(i, port) + f",addr={FIRST_SLOT + i:#x}"
        return dev + (",vectors=0" if self.accel == "tcg" else "")

    def argv(self) -> list[str]:
        a = super().argv()
        a[a.index("-initrd") + 1] = str(self.initrd)
        if self.taps is not None or self.stream_server is not None:
            for i, p in enumerate(self.vhost_ports):       # no vhost-user: QEMU's own cables
                c = a.index(next(x for x in a if x.startswith(f"socket,id=vhu{i},")))
                del a[c - 1:c + 1]
                n = a.index(next(x for x in a if x.startswith(f"type=vhost-user,id=net{i},")))
                if self.taps is None:
                    a[n] = (f"stream,id=net{i},server={'on' if self.stream_server else 'off'},"
                            f"addr.type=unix,addr.path={p.socket}")
                    continue
                a[n] = (f"tap,id=net{i},ifname={self.taps[i]},script=no,downscript=no,vhost=off,"
                        f"queues={self.tap_queues}")
                if self.tap_queues > 1:
                    # under TCG the NICs have no MSI-X (vectors=0, nic_device): DPDK polls
                    # rss=on: QEMU hashes each frame to a queue pair (a NIC's RSS; DPDK's
                    # virtio PMD refuses an RSS configuration without it)
                    a[n + 2] += ",mq=on,rss=on" + ("" if self.accel == "tcg" else
                                                   f",vectors={2 * self.tap_queues + 2}")
        if self.ssh is not None:
            # the management NIC (the kernel's virtio-net in the guest, never DPDK's)
            a += ["-netdev", f"tap,id=mgmt,ifname={self.ssh.tap},script=no,downscript=no,vhost=off",
                  "-device", f"virtio-net-pci,netdev=mgmt,addr={MGMT_SLOT:#x}"]
        # the third serial port (the guest's ttyS2): tgen's JSON-RPC, relayed by socat
        # the fourth (ttyS3): an interactive process's terminal (the testpmd DUT's console)
        return a + ["-chardev", f"socket,id=rpc,path={self.rpc_sock},server=on,wait=off",
                    "-serial", "chardev:rpc",
                    "-chardev", f"socket,id=tty,path={self.tty_sock},server=on,wait=off",
                    "-serial", "chardev:tty"]

    def start(self, wait: Optional[bool] = None) -> None:
        if self.proc is not None:
            return
        tgen = Path(self.tgen_path or find_tgen_binary())
        socat = self.socat_path or shutil.which("socat")
        if not socat:
            raise DutFailure("socat not found: apt-get install socat (the guest relays tgen's "
                             "control socket with it)")
        if self.image is None:
            self.image = vm_image.build(self.cache_dir)
        l3fwd: Optional[str] = None
        with contextlib.suppress(FileNotFoundError):      # not built: no l3fwd in the guest
            l3fwd = find_l3fwd()
        overlay(self.image, tgen, Path(socat), self.initrd, l3fwd=Path(l3fwd) if l3fwd else None,
                ssh=self.ssh)
        self.tracker.add("file", str(self.initrd), lambda: self.initrd.unlink(missing_ok=True))
        for sock in (self.rpc_sock, self.tty_sock):
            sock.unlink(missing_ok=True)
            self.tracker.add("socket", str(sock), functools.partial(sock.unlink, missing_ok=True))
        super().start(wait)

    # -- life cycle ------------------------------------------------------------------------------
    def wait_ready(self, timeout: Optional[float] = None) -> None:
        """Wait until the guest booted and its shell answers."""
        with self._lock:
            if self.ready:
                return
            m = self._await_shell(r"nics=(\S*)", timeout)
            self.guest_nics = [a for a in m.group(1).split(",") if a]
            self._open_shell()

    @property
    def host(self) -> "GuestPciHost":
        if self._host is None:
            self._host = GuestPciHost(self)
        return self._host

    # -- NIC binding (what `nfvperf testbed prepare` does on a server) ---------------------------
    def driver_of(self, addr: str) -> str:
        rc, out = self.shell_line(f"basename \"$(readlink /sys/bus/pci/devices/{shlex.quote(addr)}"
                                  "/driver)\" 2>/dev/null")
        return out.strip() if rc == 0 and out.strip() not in ("", ".") else ""

    def bind(self, addrs: Sequence[str], driver: str) -> None:
        """Bind ``addrs`` to ``driver`` (driver_override, unbind, drivers_probe) and check."""
        for a in addrs:
            d = f"/sys/bus/pci/devices/{a}"
            q = shlex.quote
            self.shell_line(f"echo {q(driver)} > {d}/driver_override; [ -e {d}/driver ] && "
                            f"echo {q(a)} > {d}/driver/unbind; echo {q(a)} > "
                            "/sys/bus/pci/drivers_probe")
            got = self.driver_of(a)
            if got != driver:
                raise DutFailure(f"{self.vnf_name}: {a} bound to {got or 'no driver'}, not "
                                 f"{driver} (console {self.console_log})")

    def load_module(self, name: str) -> None:
        """insmod one of the image's kernel modules (``virtio_pci``: the kernel's own driver)."""
        rc, out = self.shell_line(f"insmod /lib/modules/{shlex.quote(name)}.ko")
        if rc != 0 and "File exists" not in out:
            raise DutFailure(f"{self.vnf_name}: insmod {name}: {out}")

    def environment(self) -> dict[str, Any]:
        env = super().environment()
        for k in ("forward_mode", "testpmd_log", "guest_hugepages_2m"):
            env.pop(k, None)
        env.update({"role": "pci-host", "pci": self.pci_addresses(), "guest_nics": self.guest_nics,
                    "guest_hugepages_mb": self.guest_hugepages_mb,
                    "shell_log": str(self.shell_log)})
        return env

    def counters(self) -> dict[str, Any]:
        raise DutFailure(f"{self.vnf_name}: the PCI guest forwards nothing; read the counters of "
                         "what runs in it (tgen)")

    def clear_counters(self) -> None:
        """Nothing: the guest forwards nothing of its own."""

    def stop(self) -> None:
        if self._host is not None:
            self._host.close()
        super().stop()
        for f in (self.rpc_sock, self.tty_sock, self.initrd):   # the initramfs: a copy per boot
            with contextlib.suppress(OSError):
                f.unlink()
        self.tracker.forget("socket", str(self.rpc_sock))
        self.tracker.forget("socket", str(self.tty_sock))
        self.tracker.forget("file", str(self.initrd))


@functools.lru_cache(maxsize=None)
def _with_nics(cls: "type[PciGuest]", n: int) -> "type[PciGuest]":
    return type(f"{cls.__name__}{n}", (cls,), {"nics": n, "__test__": False,
                                               "__module__": cls.__module__})


__all__ = ["PciGuest", "GuestPciHost", "GuestPopen", "GuestSsh", "overlay", "GUEST_TGEN"]
