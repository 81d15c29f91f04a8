"""The PCI guest's overlay (:class:`nfvperf.vm.pci_guest.PciGuest`): a second initramfs archive with
its own init (NICs left unbound, ``uio_pci_generic`` loaded, a shell on a serial port, sshd on a
management NIC when asked), this host's ``tgen``, ``socat`` (and ``l3fwd``) with their libraries."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from pathlib import Path
from typing import Optional, Sequence

from . import image as vm_image
from .guest import SHELL_READY
from .initramfs import _cpio, _Entry, _gzip, elf_needed
from .pci_slots import FIRST_SLOT, MAX_NICS, pci_address

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


def _find_lib(soname: str) -> Optional[Path]:
    return next((Path(d) / soname for d in LIB_DIRS if (Path(d) / soname).exists()), None)


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
        needed = elf_needed(Path(os.path.realpath(f)).read_bytes()) or []
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
    entries = {guest: _Entry("file", mode=0o755, data=Path(os.path.realpath(host)).read_bytes())
               for guest, host in files.items()}
    init = PCI_INIT.replace("@PMD_DIR@", pmd).replace("@SHELL_READY@", SHELL_READY) \
        .replace("@MGMT_PCI@", pci_address(MAX_NICS))
    entries[GUEST_INIT.lstrip("/")] = _Entry("file", mode=0o755, data=init.encode())
    for path, (mode, data) in (ssh.files(pmd) if ssh is not None else {}).items():
        entries[path] = _Entry("file", mode=mode, data=data)
    for p in list(entries):
        d = os.path.dirname(p)
        while d and d not in entries:
            entries[d] = _Entry("dir", mode=0o700 if d == "root/.ssh" else 0o755)
            d = os.path.dirname(d)
    extra = _gzip(_cpio(entries))
    base = image.initrd.read_bytes()
    out.parent.mkdir(parents=True, exist_ok=True)
    # the first archive ends padded to 4 bytes; pad again so the second starts aligned
    out.write_bytes(base + b"\0" * ((4 - len(base) % 4) % 4) + extra)
    return out
