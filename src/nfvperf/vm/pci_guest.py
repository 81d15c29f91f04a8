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

:class:`GuestPciHost` is that guest as a :class:`nfvperf.host.base.Host`: processes, files and
``connect_unix`` over the guest's shell and RPC port, so nfvperf's code that runs on a testbed
host (``TgenProcess(ports=[PortSpec("0000:00:04.0"), ...], host=...)``: tgen with ``-a <pci>``;
``nfvperf.testbed.hosts.nic_pci_checks``: the per-host NIC preflight against that host's
``/sys/bus/pci``) runs in the guest unchanged::

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

import base64
import contextlib
import dataclasses
import fnmatch
import functools
import itertools
import os
import shlex
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable, ClassVar, Optional, Sequence, Union

from nfvperf.dut.base import DutFailure
from nfvperf.host.base import PathLike, Stream
from nfvperf.host.proc import CommandError, Process
from nfvperf.host.run import ResourceTracker, RunContext

from . import image as vm_image
from .guest import SHELL_READY, GuestShell, ShellGuest
from .pci_slots import FIRST_SLOT, MAX_NICS, pci_address
import json
from nfvperf.tg.tgen import find_tgen_binary
from nfvperf.dut.l3fwd import find_l3fwd
import shutil
from nfvperf.host.base import Host

#: where the overlay puts this host's tgen and socat in the guest
GUEST_TGEN = "/usr/bin/nfvperf-tgen"
#: and this checkout's l3fwd build, when there is one (``dut: l3fwd`` on a guest DUT host)
GUEST_L3FWD = "/usr/bin/nfvperf-l3fwd"
GUEST_SOCAT = "/usr/bin/socat"
GUEST_INIT = "/nfvperf-pci-init"
#: the management NIC's slot, after the data NICs' (:data:`MAX_NICS`): 0000:00:0c.0
MGMT_SLOT = FIRST_SLOT + MAX_NICS
#: sshd's log in the guest (one ``Accepted publickey`` line per login)
GUEST_SSHD_LOG = "/run/nfvperf-sshd.log"
SSHD_CONFIG = """\
HostKey /etc/ssh/ssh_host_ed25519_key
AuthorizedKeysFile /root/.ssh/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
MaxSessions 200
LogLevel VERBOSE
PidFile /run/sshd.pid
Subsystem sftp /usr/lib/openssh/sftp-server
SetEnv PATH=/usr/bin:/usr/sbin LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu:@PMD_DIR@
"""
#: the guest's work directory (tgen's control socket, process output)
GUEST_WORK = "/run/nfvperf"
#: host library directories the closure is searched in (Debian 12, merged /usr)
LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/lib64")

PCI_INIT = r"""#!/bin/sh
# nfvperf PCI-path guest: NICs left unbound, uio_pci_generic loaded, a shell on ttyS1
export PATH=/usr/bin:/usr/sbin
export LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu:@PMD_DIR@
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/hugepages /var/run /tmp /run/nfvperf
mount -t hugetlbfs hugetlbfs /dev/hugepages
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts     # ptys for interactive processes
log() { echo "NFVPERF-GUEST: [$(cut -d' ' -f1 /proc/uptime)] $*" > /dev/ttyS0; }
for m in uio uio_pci_generic virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev tun; do
  insmod /lib/modules/$m.ko || log "insmod $m failed"
done
MGMT=""
for kv in $(cat /proc/cmdline); do case "$kv" in nfvperf.mgmt=*) MGMT="${kv#*=}" ;; esac; done
NICS=""
for d in /sys/bus/pci/devices/*; do
  case "$(cat $d/class)" in 0x0200*) ;; *) continue ;; esac
  [ "$(basename $d)" = @MGMT_PCI@ ] && continue
  NICS="$NICS $(basename $d)"
  [ -n "$MGMT" ] && echo none > $d/driver_override   # the kernel's virtio-net takes none of them
done
if [ -n "$MGMT" ]; then
  # the management NIC on the kernel's virtio-net, sshd on it (the run's keys, in this archive)
  for m in virtio_pci failover net_failover virtio_net; do
    insmod /lib/modules/$m.ko || log "insmod $m failed"
  done
  for a in $NICS; do echo > /sys/bus/pci/devices/$a/driver_override; done
  IF=""
  for i in $(seq 1 50); do
    IF=$(ls /sys/bus/pci/devices/@MGMT_PCI@/virtio*/net 2>/dev/null); [ -n "$IF" ] && break
    sleep 0.1
  done
  ip link set lo up
  ip addr add "$MGMT" dev "$IF" && ip link set "$IF" up || log "no management NIC ($IF)"
  mkdir -p /run/sshd && chmod 755 /run/sshd
  /usr/sbin/sshd -f /etc/ssh/sshd_config -E /run/nfvperf-sshd.log || log "sshd failed"
  log "sshd on $IF $MGMT"
fi
stty -F /dev/ttyS1 raw -echo 115200 2>/dev/null
stty -F /dev/ttyS2 raw -echo 115200 2>/dev/null
stty -F /dev/ttyS3 raw -echo 115200 2>/dev/null
log "pci ready nics=$NICS hugepages=$(cat /proc/sys/vm/nr_hugepages)"
echo "@SHELL_READY@ nics=$(echo $NICS | tr ' ' ',')" > /dev/ttyS1
# each line in a subshell: a line garbled on the serial port (a byte lost under TCG) is a
# syntax error, which ends the shell that evals it; here it ends the subshell, not init
while IFS= read -r line; do ( eval "$line" ); done </dev/ttyS1 >/dev/ttyS1 2>&1
log "shell exited"
poweroff -f
"""


# ------------------------------------------------------------------------------- the overlay
def _find_lib(soname: str) -> Optional[Path]:
    for d in LIB_DIRS:
        p = Path(d) / soname
        if p.exists():
            return p
    return None


def host_closure(binaries: Sequence[Path]) -> dict[str, Path]:
    """Guest path -> host file for ``binaries`` and every shared library they need (DT_NEEDED,
    transitively, from this host's library directories).  Raises ValueError naming what is
    missing."""
    out: dict[str, Path] = {}
    todo = [Path(b) for b in binaries]
    missing: list[str] = []
    seen: set[str] = set()
    while todo:
        f = todo.pop()
        needed = vm_image.elf_needed(Path(os.path.realpath(f)).read_bytes()) or []
        for so in needed:
            if so in seen:
                continue
            seen.add(so)
            p = _find_lib(so)
            if p is None:
                missing.append(f"{so} (needed by {f})")
                continue
            out[f"usr/lib/x86_64-linux-gnu/{so}"] = p
            todo.append(p)
    if missing:
        raise ValueError("cannot put these in the guest, not on this host: " + "; ".join(missing))
    return out


@dataclasses.dataclass
class GuestSsh:
    """A guest reached over SSH (an :class:`nfvperf.host.ssh.SshHost`'s target): its management
    NIC is the tap ``tap`` in the network namespace ``netns`` (the tap holds ``gateway``, the guest
    ``address``, one /30 of that namespace only), its sshd has the host key ``host_key_private``
    (OpenSSH format; ``host_key`` its public line) and lets in ``authorized_key``, whose private
    half is ``key_file`` on this machine.  All of it made for one run."""

    tap: str
    netns: str
    address: str
    gateway: str
    host_key_private: bytes
    host_key: Optional[str]
    authorized_key: str
    key_file: Path
    port: int = 22
    user: str = "root"
    connect_timeout_s: float = 30.0
    #: a TCG guest's sshd may wait seconds for a vCPU: 3 intervals of silence end the run
    keepalive_s: float = 10.0

    def key_path(self) -> Optional[Path]:
        return self.key_file

    def known_hosts_path(self) -> Optional[Path]:
        return None

    def files(self, pmd_dir: str) -> dict[str, tuple[int, bytes]]:
        """Guest path -> (mode, bytes) of what sshd needs (the overlay adds them)."""
        return {"etc/ssh/ssh_host_ed25519_key": (0o600, self.host_key_private),
                "etc/ssh/sshd_config": (0o644, SSHD_CONFIG.replace("@PMD_DIR@", pmd_dir).encode()),
                "root/.ssh/authorized_keys": (0o600, (self.authorized_key + "\n").encode()),
                "etc/passwd": (0o644, b"root:x:0:0:root:/root:/bin/sh\n"
                                      b"sshd:x:100:65534::/run/sshd:/usr/sbin/nologin\n"),
                "etc/group": (0o644, b"root:x:0:\nnogroup:x:65534:\n")}


def overlay(image: vm_image.ImageInfo, tgen: Path, socat: Path, out: Path,
            l3fwd: Optional[Path] = None, ssh: Optional[GuestSsh] = None) -> Path:
    """The guest's initramfs: the image's, then an archive with this init, tgen and socat (and
    l3fwd when given; sshd's configuration and the run's keys with ``ssh``; the kernel unpacks
    concatenated archives in order).  Written to ``out``; returns it."""
    files = {GUEST_TGEN.lstrip("/"): Path(tgen), GUEST_SOCAT.lstrip("/"): Path(socat)}
    if l3fwd is not None:
        files[GUEST_L3FWD.lstrip("/")] = Path(l3fwd)
    files.update(host_closure(list(files.values())))
    pmd = ""
    with contextlib.suppress(OSError, ValueError):
        pmd = json.loads(image.manifest.read_text()).get("pmd_dir", "")
    entries: dict[str, vm_image._Entry] = {}
    for guest, host in files.items():
        entries[guest] = vm_image._Entry("file", mode=0o755,
                                         data=Path(os.path.realpath(host)).read_bytes())
    init = PCI_INIT.replace("@PMD_DIR@", pmd).replace("@SHELL_READY@", SHELL_READY) \
        .replace("@MGMT_PCI@", pci_address(MAX_NICS))
    entries[GUEST_INIT.lstrip("/")] = vm_image._Entry("file", mode=0o755, data=init.encode())
    for path, (mode, data) in (ssh.files(pmd) if ssh is not None else {}).items():
        entries[path] = vm_image._Entry("file", mode=mode, data=data)
    for p in list(entries):
        d = os.path.dirname(p)
        while d and d not in entries:
            entries[d] = vm_image._Entry("dir", mode=0o700 if d == "root/.ssh" else 0o755)
            d = os.path.dirname(d)
    extra = vm_image._gzip(vm_image._cpio(entries))
    base = image.initrd.read_bytes()
    out.parent.mkdir(parents=True, exist_ok=True)
    # the first archive ends padded to 4 bytes; pad again so the second starts aligned
    out.write_bytes(base + b"\0" * ((4 - len(base) % 4) % 4) + extra)
    return out


# ------------------------------------------------------------------------------- the guest
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
            with contextlib.suppress(FileNotFoundError):
                sock.unlink()
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

    def run_argv(self, argv: Sequence[str], check: bool = True, timeout: float = 30.0,
                 env: Optional[dict[str, str]] = None) -> subprocess.CompletedProcess:
        line = _env_prefix(env) + shlex.join([str(a) for a in argv])
        rc, out = self.shell_line(line, timeout)
        cp = subprocess.CompletedProcess(list(argv), rc, out, "")
        if check and rc != 0:
            raise CommandError(f"{self.vnf_name}: {line} failed ({rc}): {out.strip()[-500:]}", cp)
        return cp

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

    def unbind(self, addrs: Sequence[str]) -> None:
        for a in addrs:
            d = f"/sys/bus/pci/devices/{a}"
            self.shell_line(f"[ -e {d}/driver ] && echo {shlex.quote(a)} > {d}/driver/unbind; "
                            f"echo > {d}/driver_override")

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
        with contextlib.suppress(Exception):
            if self.shell is not None and self.proc is not None and self.proc.running():
                self.shell.run_line("poweroff -f &", timeout=2)
        super().stop()
        self.shell = None
        for f in (self.rpc_sock, self.tty_sock, self.initrd):   # the initramfs: a copy per boot
            with contextlib.suppress(OSError):
                f.unlink()
        self.tracker.forget("socket", str(self.rpc_sock))
        self.tracker.forget("socket", str(self.tty_sock))
        self.tracker.forget("file", str(self.initrd))


# ------------------------------------------------------------------------------- the host
class GuestPopen:
    """A process in the guest as :class:`nfvperf.host.proc.Process` drives it: ``pid``,
    ``poll()``, ``wait()``; its stdout/stderr files in the guest copied into the local files it
    was given, as they grow."""

    POLL_S = 0.25

    def __init__(self, host: "GuestPciHost", pid: int, files: dict[str, Any], rc_path: str,
                 on_close: Optional[Callable[[], None]] = None):
        self.host = host
        self._on_close = on_close
        self.pid = pid
        self.returncode: Optional[int] = None
        self.lost: Optional[str] = None
        self._files = files          # guest path -> local file object (or None)
        self._offsets = {p: 0 for p in files}
        self._rc_path = rc_path
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, name=f"guest-pid-{pid}", daemon=True)
        self._thread.start()

    def _refresh(self) -> None:
        """Copy new output and learn whether the process ended (one shell line)."""
        with self._lock:
            if self.returncode is not None:
                return
            parts = []
            for p in self._files:
                parts.append(f"echo -n '@@F'; tail -c +{self._offsets[p] + 1} {shlex.quote(p)} "
                             "2>/dev/null")
            parts.append(f"echo -n '@@R'; if [ -e {self._rc_path} ]; then cat {self._rc_path}; "
                         f"elif kill -0 {self.pid} 2>/dev/null; then echo run; else echo gone; fi")
            try:
                rc, out = self.host.guest.shell_line("; ".join(parts), timeout=20)
            except DutFailure as e:
                self.lost = str(e)
                self.returncode = -signal.SIGKILL
                return
            body, _, state = out.rpartition("@@R")
            chunks = body.split("@@F")[1:]
            for p, chunk in zip(self._files, chunks):
                data = chunk.encode()
                self._offsets[p] += len(data)
                f = self._files[p]
                if f is not None and data:
                    with contextlib.suppress(Exception):
                        f.write(data)
            state = state.strip()
            if state not in ("run", ""):
                self.returncode = int(state) if state.lstrip("-").isdigit() else -signal.SIGKILL

    def _follow(self) -> None:
        while not self._stop.is_set() and self.returncode is None:
            self._refresh()
            self._stop.wait(self.POLL_S)

    def poll(self) -> Optional[int]:
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"guest pid {self.pid}", timeout or 0)
            self._refresh()
            time.sleep(0.1)
        return self.returncode

    def close(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(5)
        if self._on_close is not None:
            self._on_close()
            self._on_close = None


class _TtyPump:
    """Copies bytes both ways between a local pty slave (``fd``) and a connected socket."""

    def __init__(self, fd: int, conn: socket.socket):
        self.fd, self.conn = fd, conn
        self._closed = threading.Event()
        self._threads = [threading.Thread(target=f, daemon=True, name=f"guest-tty-{n}")
                         for n, f in (("in", self._to_guest), ("out", self._from_guest))]
        for t in self._threads:
            t.start()

    def _to_guest(self) -> None:
        while not self._closed.is_set():
            try:
                data = os.read(self.fd, 4096)
                if not data:
                    return
                self.conn.sendall(data)
            except OSError:
                return

    def _from_guest(self) -> None:
        while not self._closed.is_set():
            try:
                data = self.conn.recv(4096)
                if not data:
                    return
                os.write(self.fd, data)
            except OSError:
                return

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self.conn.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.conn.close()
        with contextlib.suppress(OSError):
            os.close(self.fd)


class GuestPciHost:
    """A :class:`PciGuest` as a :class:`nfvperf.host.base.Host` (see the module doc): ``remote``,
    so tgen's control socket is in the guest's work directory and ``connect_unix`` reaches it
    through the RPC serial port and socat in the guest."""

    remote = True
    work_dir = GUEST_WORK

    def __init__(self, guest: PciGuest):
        self.guest = guest
        self.name = f"vm:{guest.vnf_name}"
        self._ids = itertools.count(1)
        self._relay_pid: Optional[int] = None
        self._conn: Optional[socket.socket] = None
        self._tty: Optional[GuestPopen] = None

    # -- processes -------------------------------------------------------------------------
    def wrap(self, argv: Sequence[str], netns: Optional[str] = None) -> list[str]:
        if netns:
            raise ValueError(f"{self.name}: the guest has no network namespaces (netns {netns!r})")
        return [str(a) for a in argv]

    def popen(self, cmd: Sequence[str], *, stdin: Stream = None, stdout: Stream = None,
              stderr: Stream = None, env: Optional[dict[str, str]] = None,
              cwd: Optional[Path] = None, start_new_session: bool = False, close_fds: bool = True,
              preexec_fn: Optional[Callable[[], object]] = None) -> GuestPopen:
        """Start ``cmd`` in the guest in its own session; its output goes to guest files that
        :class:`GuestPopen` copies into ``stdout``/``stderr`` (local files)."""
        if isinstance(stdin, int) and stdin >= 0 and stdin == stdout:
            return self._popen_tty(cmd, stdin, env)
        if stdin not in (None, subprocess.DEVNULL):
            raise OSError(f"{self.name}: a process in the guest reads no stdin but a terminal's")
        n = next(self._ids)
        base = f"{GUEST_WORK}/p{n}"
        out, err, rcp = f"{base}.out", f"{base}.err", f"{base}.rc"
        redirect = f">{out} 2>&1" if stderr == subprocess.STDOUT else f">{out} 2>{err}"
        inner = f"{_env_prefix(env)}{shlex.join([str(a) for a in cmd])} {redirect} </dev/null; " \
                f"echo $? > {rcp}"
        line = (f"mkdir -p {GUEST_WORK}; rm -f {out} {err} {rcp}; busybox setsid sh -c "
                f"{shlex.quote(inner)} </dev/null >/dev/null 2>&1 & echo PID=$!")
        rc, text = self.guest.shell_line(line)
        pid = next((int(w[4:]) for w in text.split() if w.startswith("PID=")), None)
        if rc != 0 or pid is None:
            raise OSError(f"{self.name}: cannot start {' '.join(map(str, cmd))}: {text[-300:]}")
        files: dict[str, Any] = {out: stdout if _is_file(stdout) else None}
        if stderr != subprocess.STDOUT:
            files[err] = stderr if _is_file(stderr) else None
        return GuestPopen(self, pid, files, rcp)

    def _popen_tty(self, cmd: Sequence[str], tty_fd: int, env: Optional[dict[str, str]]
                   ) -> "GuestPopen":
        """An interactive process (``Process(interactive=True)``: stdin/stdout are the slave end
        of a pty here): it runs in the guest on a pty of socat's, whose other side is the guest's
        fourth serial port, copied both ways to ``tty_fd``.  One at a time."""
        if self._tty is not None and self._tty.returncode is None:
            raise OSError(f"{self.name}: one interactive process at a time (the guest has one "
                          "terminal port)")
        n = next(self._ids)
        base = f"{GUEST_WORK}/t{n}"
        script = f"{base}.sh"
        exports = "".join(f"export {a}\n" for a in _env_prefix(env).split())
        self.write_text(script, "#!/bin/sh\n" + exports + "exec " +
                        shlex.join([str(a) for a in cmd]) + "\n", mode=0o755)
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(str(self.guest.tty_sock))      # before the guest writes: else it is lost
        inner = f"{GUEST_SOCAT} /dev/ttyS3,raw,echo=0 EXEC:{script},pty,raw,echo=0,stderr " \
                f"2>{base}.err; echo $? > {base}.rc"
        rc, text = self.guest.shell_line(f"mkdir -p {GUEST_WORK}; rm -f {base}.rc; busybox setsid "
                                         f"sh -c {shlex.quote(inner)} </dev/null >/dev/null 2>&1 & "
                                         "echo PID=$!")
        pid = next((int(w[4:]) for w in text.split() if w.startswith("PID=")), None)
        if rc != 0 or pid is None:
            conn.close()
            raise OSError(f"{self.name}: cannot start {' '.join(map(str, cmd))}: {text[-300:]}")
        fd = os.dup(tty_fd)                 # Process closes its copy of the slave at once
        pump = _TtyPump(fd, conn)
        p = GuestPopen(self, pid, {f"{base}.err": None}, f"{base}.rc", on_close=pump.close)
        self._tty = p
        return p

    def spawn(self, argv: Sequence[str], *, name: str, run: Optional[RunContext] = None,
              tracker: Optional[ResourceTracker] = None, **kw: Any) -> Process:
        return Process(name, argv, run, tracker, host=self, **kw).start()

    def run(self, argv: Sequence[str], *, netns: Optional[str] = None, check: bool = True,
            timeout: float = 30.0, input: Optional[str] = None,
            env: Optional[dict[str, str]] = None, cwd: Optional[Path] = None
            ) -> subprocess.CompletedProcess[str]:
        if input is not None:
            raise CommandError(f"{self.name}: no stdin for commands in the guest")
        return self.guest.run_argv(self.wrap(argv, netns), check=check, timeout=timeout, env=env)

    def environment(self, extra: dict[str, str]) -> dict[str, str]:
        """Only ``extra``: nothing of this host's environment goes into the guest."""
        return dict(extra)

    def killpg(self, pid: int, sig: int) -> None:
        self.guest.shell_line(f"kill -{int(sig)} -{int(pid)} 2>/dev/null; true")

    # -- the host itself ---------------------------------------------------------------------
    def check(self) -> None:
        self.guest.alive()

    def public(self) -> dict[str, object]:
        return {"via": "vm guest shell", "vm": self.guest.vnf_name, "accel": self.guest.accel}

    def cleanup_tag(self, tag: str, dry_run: bool = False) -> dict[str, object]:
        """Kill the guest's processes whose environment carries ``NFVPERF_TAG=tag``."""
        rc, out = self.guest.shell_line(
            "for p in /proc/[0-9]*; do grep -q " + shlex.quote(f"NFVPERF_TAG={tag}")
            + " $p/environ 2>/dev/null && echo ${p#/proc/}; done")
        pids = [int(w) for w in out.split() if w.isdigit()]
        if not dry_run:
            for p in pids:
                self.guest.shell_line(f"kill -9 {p} 2>/dev/null; true")
        return {"host": self.name, "processes": pids, "dry_run": dry_run}

    def leftovers(self, tag: str) -> dict[str, Any]:
        """What a run ``tag`` left in the guest: processes whose environment carries its
        ``NFVPERF_TAG``, files named after it where runs put theirs (the work directory,
        hugetlbfs, DPDK's runtime directory, /tmp), and 2 MB hugepages still in use (a DPDK
        process or file holding them)."""
        q = shlex.quote(tag)
        rc, out = self.guest.shell_line(
            "for p in /proc/[0-9]*; do grep -q " + shlex.quote(f"NFVPERF_TAG={tag}")
            + " $p/environ 2>/dev/null && echo P=${p#/proc/}; done; for f in "
            f"{GUEST_WORK}/*{q}* /dev/hugepages/*{q}* /var/run/dpdk/*{q}* /tmp/*{q}*; do "
            "[ -e \"$f\" ] && echo F=$f; done; grep -E '^HugePages_(Total|Free):' /proc/meminfo")
        words = out.split()
        pages = {w.rstrip(":"): int(n) for w, n in zip(words, words[1:])
                 if w.startswith("HugePages_") and n.isdigit()}
        return {"processes": [int(w[2:]) for w in words if w.startswith("P=") and w[2:].isdigit()],
                "files": [w[2:] for w in words if w.startswith("F=")],
                "hugepages_in_use": pages.get("HugePages_Total", 0) - pages.get("HugePages_Free", 0)}

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.close()
            self._conn = None
        if self._relay_pid is not None:
            with contextlib.suppress(Exception):
                self.killpg(self._relay_pid, signal.SIGKILL)
            self._relay_pid = None

    # -- files ---------------------------------------------------------------------------------
    def _ok(self, line: str) -> tuple[int, str]:
        return self.guest.shell_line(line)

    def exists(self, path: PathLike) -> bool:
        return self._ok(f"test -e {shlex.quote(str(path))}")[0] == 0

    def read_text(self, path: PathLike) -> str:
        p = shlex.quote(str(path))
        rc, out = self._ok(f"test -r {p} && {{ echo -n '@@B'; cat {p}; echo -n '@@E'; }}")
        if rc != 0 or "@@B" not in out:
            raise FileNotFoundError(f"{self.name}: {path}")
        return out.split("@@B", 1)[1].rsplit("@@E", 1)[0]

    def write_text(self, path: PathLike, text: str, mode: int = 0o644) -> None:
        b64 = base64.b64encode(text.encode()).decode()
        p = shlex.quote(str(path))
        rc, out = self._ok(f"echo {b64} | busybox base64 -d > {p} && chmod {mode:o} {p}")
        if rc != 0:
            raise OSError(f"{self.name}: cannot write {path}: {out}")

    def mkdir(self, path: PathLike, mode: int = 0o755) -> None:
        rc, out = self._ok(f"mkdir -p {shlex.quote(str(path))}")
        if rc != 0:
            raise OSError(f"{self.name}: cannot create {path}: {out}")

    def remove(self, path: PathLike) -> None:
        self._ok(f"rm -f {shlex.quote(str(path))}")

    def rmtree(self, path: PathLike) -> None:
        self._ok(f"rm -rf {shlex.quote(str(path))}")

    def glob(self, directory: PathLike, pattern: str) -> list[str]:
        rc, out = self._ok(f"ls -1 {shlex.quote(str(directory))} 2>/dev/null")
        return sorted(f"{directory}/{n}" for n in out.split() if fnmatch.fnmatch(n, pattern))

    def put(self, local: PathLike, remote: PathLike) -> None:
        data = Path(local).read_bytes()
        p = shlex.quote(str(remote))
        self._ok(f"rm -f {p}")
        for i in range(0, len(data), 3000):
            b64 = base64.b64encode(data[i:i + 3000]).decode()
            rc, out = self._ok(f"echo {b64} | busybox base64 -d >> {p}")
            if rc != 0:
                raise OSError(f"{self.name}: cannot write {remote}: {out}")

    def get(self, remote: PathLike, local: PathLike) -> None:
        rc, out = self._ok(f"busybox base64 {shlex.quote(str(remote))}")
        if rc != 0:
            raise FileNotFoundError(f"{self.name}: {remote}: {out}")
        Path(local).write_bytes(base64.b64decode("".join(out.split())))

    def connect_unix(self, path: PathLike, timeout: float = 10.0) -> socket.socket:
        """A connection to the Unix socket ``path`` in the guest: socat there relays it to the
        guest's third serial port, which QEMU offers on this host as a Unix socket."""
        self.close()
        if not self.exists(path):
            raise FileNotFoundError(f"{self.name}: no {path}")
        inner = shlex.join([GUEST_SOCAT, "/dev/ttyS2,raw,echo=0", f"UNIX-CONNECT:{path}"])
        rc, text = self.guest.shell_line(
            f"busybox setsid sh -c {shlex.quote(inner + ' 2>' + GUEST_WORK + '/relay.err')} "
            "</dev/null >/dev/null 2>&1 & echo PID=$!")
        pid = next((int(w[4:]) for w in text.split() if w.startswith("PID=")), None)
        if pid is None:
            raise OSError(f"{self.name}: cannot start the RPC relay: {text[-300:]}")
        self._relay_pid = pid
        deadline = time.monotonic() + timeout
        # connect only once socat holds both ends: it sets the serial port up (raw, flushed)
        # after opening it, and a byte that arrives before that is lost (measured: the '{' of
        # the first request)
        while True:
            rc, fds = self.guest.shell_line(f"ls -l /proc/{pid}/fd 2>/dev/null")
            if "ttyS2" in fds and "socket:" in fds:
                break
            if rc != 0 and not self.exists(f"/proc/{pid}"):
                _, err = self.guest.shell_line(f"cat {GUEST_WORK}/relay.err")
                raise OSError(f"{self.name}: the RPC relay (socat) exited: {err[-300:]}")
            if time.monotonic() > deadline:
                raise OSError(f"{self.name}: the RPC relay did not connect to {path} within "
                              f"{timeout:.0f} s")
            time.sleep(0.1)
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(str(self.guest.rpc_sock))
                break
            except OSError:
                s.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        self._conn = s
        return s


@functools.lru_cache(maxsize=None)
def _with_nics(cls: "type[PciGuest]", n: int) -> "type[PciGuest]":
    return type(f"{cls.__name__}{n}", (cls,), {"nics": n, "__test__": False,
                                               "__module__": cls.__module__})


def _env_prefix(env: Optional[dict[str, str]]) -> str:
    """``K=V ...`` before a command in the guest's shell (the variables are the command's)."""
    for k in env or {}:
        if not k.isidentifier():
            raise ValueError(f"environment variable name {k!r}: letters, digits and '_' only")
    return "".join(f"{k}={shlex.quote(str(v))} " for k, v in (env or {}).items())


def _is_file(s: Stream) -> bool:
    return s is not None and not isinstance(s, int) and hasattr(s, "write")


def _conforms(h: GuestPciHost) -> "Any":
    x: Host = h                        # mypy: GuestPciHost implements the Host protocol
    return x


__all__ = ["PciGuest", "GuestPciHost", "GuestPopen", "GuestSsh", "overlay", "host_closure", "GUEST_TGEN",
           "GUEST_L3FWD", "PCI_INIT"]
