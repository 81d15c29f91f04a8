"""Reproducible guest image for the VM VNF: a kernel plus an initramfs, made from Debian packages.

The guest has no disk. Its initramfs holds busybox-static, dpdk-testpmd, iperf3, ethtool and
OVS-DPDK (ovs-vswitchd-dpdk, ovsdb-server, ovs-vsctl/-appctl/-ofctl, ovsdb-tool and the vswitch
schema: a testbed's DUT guest, :mod:`nfvperf.testbed.guests`), sshd with its SFTP server and
python3 with the part of its standard library the SSH host's agent imports (a testbed guest
reached over SSH), with the shared libraries they need (found by walking the ELF DT_NEEDED
entries, so nothing else is shipped), the tun,
uio/uio_pci_generic, vfio/vfio-pci and virtio-net kernel modules, and an /init script with two
modes (kernel command line ``nfvperf.mode=``):

* ``vnf`` (default): bind the virtio-net devices to uio_pci_generic and any other Ethernet device
  (an SR-IOV VF passed through, behind the guest's vIOMMU: nfvperf.vm.sriov) to vfio-pci, and start
  testpmd in io forwarding with its command line on the second serial port;
* ``tcp`` (:mod:`nfvperf.vm.guest`): load virtio-net, give the first NIC ``nfvperf.ip=`` and
  ``nfvperf.mtu=``, and read shell command lines from the second serial port (iperf3, ethtool and
  taskset are run through it).

Reproducibility: the package set is fixed here (names), the versions are resolved once through
apt (or pinned with a lock file, e.g. an earlier manifest), every .deb's sha256 is recorded in
manifest.json, and the initramfs is written by this module (sorted entries, fixed mtimes, uid 0,
gzip with mtime 0), so the same packages give a byte-identical image.  The image is cached under
``<cache_dir>/<key>/`` where ``key`` hashes the recipe and the package versions.

CLI: ``python3 -m nfvperf.vm.image build [--cache-dir DIR] [--force] [--lock MANIFEST]``.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from . import initramfs
from .initramfs import _MERGED, ImageError, _closure, _cpio, _Entry, _extract_deb, _gzip, _resolve

# Bump when anything below changes what ends up in the image.
# 2: ethtool, virtio-net modules, nfvperf.mode=tcp; 3: OVS-DPDK; 4: sshd, sftp-server and python3
# (a testbed guest reached over SSH, nfvperf.testbed.guests)
RECIPE_VERSION = "4"

DEFAULT_CACHE_DIR = Path(os.environ.get("NFVPERF_IMAGE_CACHE",
                                        str(Path.home() / ".cache" / "nfvperf" / "images")))

# The kernel comes from the metapackage's current dependency (linux-image-<abi>-amd64).
KERNEL_META = "linux-image-amd64"

# Userland packages. The ELF closure check below fails the build, naming the missing soname,
# if a library that dpdk-testpmd or a loaded PMD needs is not in one of these.
PACKAGES = [
    "busybox-static",
    "dpdk-dev",
    "libc6",
    "libnuma1",
    "libfdt1",
    "libjansson4",
    "libbsd0",
    "libmd0",
    "libelf1",
    "zlib1g",
    "libpcap0.8",
    "libdbus-1-3",
    "libsystemd0",
    "libcap2",
    "libgcrypt20",
    "libgpg-error0",
    "liblzma5",
    "libzstd1",
    "liblz4-1",
    "libibverbs1",
    "ibverbs-providers",
    "libnl-3-200",
    "libnl-route-3-200",
    "librte-eal23", "librte-kvargs23", "librte-telemetry23", "librte-ethdev23", "librte-net23",
    "librte-mbuf23", "librte-mempool23", "librte-ring23", "librte-meter23", "librte-cmdline23",
    "librte-cryptodev23", "librte-rcu23", "librte-reorder23", "librte-bitratestats23",
    "librte-metrics23", "librte-bpf23", "librte-gro23", "librte-gso23", "librte-latencystats23",
    "librte-pdump23", "librte-pcapng23", "librte-pci23", "librte-hash23", "librte-security23",
    "librte-eventdev23", "librte-timer23", "librte-sched23", "librte-ip-frag23",
    "librte-bus-pci23", "librte-bus-vdev23", "librte-bus-auxiliary23", "librte-bus-dpaa23",
    "librte-common-dpaax23", "librte-common-iavf23", "librte-common-mlx5-23",
    "librte-crypto-scheduler23", "librte-mempool-dpaa23", "librte-mempool-ring23",
    "librte-net-bnxt23", "librte-net-bond23", "librte-net-dpaa23", "librte-net-i40e23",
    "librte-net-ice23", "librte-net-ixgbe23", "librte-net-mlx5-23", "librte-net-virtio23",
    "librte-net-iavf23",
    # iperf3 for TCP tests between guests (seed 001's VM-to-VM scenario)
    "iperf3", "libiperf0", "libsctp1", "libssl3",
    # ethtool for the TCP guests' TSO and multi-queue settings (ethtool -K / -L)
    "ethtool", "libmnl0",
    # OVS-DPDK for a DUT guest of a testbed (dut: ovs-dpdk on its PCI NICs, nfvperf.testbed.guests)
    "openvswitch-common", "openvswitch-switch", "openvswitch-switch-dpdk", "librte-vhost23",
    "librte-dmadev23", "libbpf1", "libxdp1", "libevent-2.1-7", "libunbound8", "libnettle8",
    "libhogweed6", "libgmp10", "libcap-ng0",
    # libgcc_s: glibc dlopens it for pthread_cancel (a DPDK process's exit); no DT_NEEDED names it
    "libgcc-s1",
    # sshd, its SFTP server and python3 (the SSH host's agent, nfvperf.host.agent): a testbed
    # guest reached over SSH as a server is (nfvperf.testbed.guests)
    "openssh-server", "openssh-sftp-server", "python3.11-minimal", "libpython3.11-minimal",
    "libpython3.11-stdlib", "libaudit1", "libcom-err2", "libcrypt1", "libexpat1",
    "libgssapi-krb5-2", "libkrb5-3", "libk5crypto3", "libkrb5support0", "libkeyutils1", "libpam0g",
    "libselinux1", "libpcre2-8-0", "libwrap0", "libnsl2", "libtirpc3",
]

MULTIARCH = "usr/lib/x86_64-linux-gnu"
PMD_DIR_RE = re.compile(r"^usr/lib/x86_64-linux-gnu/dpdk/pmds-[0-9.]+$")
# Files the guest must have; their ELF closure is added automatically.
ROOT_FILES = ["usr/bin/dpdk-testpmd", "usr/bin/iperf3", "usr/sbin/ethtool",
              "usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk", "usr/sbin/ovsdb-server",
              "usr/bin/ovs-vsctl", "usr/bin/ovs-appctl", "usr/bin/ovs-ofctl", "usr/bin/ovsdb-tool",
              "usr/sbin/sshd", "usr/lib/openssh/sftp-server", "usr/bin/python3.11"]
#: the part of python3's standard library the SSH host's agent (``guard``, ``relay``, ``cleanup``)
#: and the remote preflight (nfvperf.host.remote_preflight) import, under usr/lib/python3.11/
#: (what `python3 -I` loads for them; the extension modules' closure is added like a program's)
PYTHON_LIB = "usr/lib/python3.11"
PYTHON_MODULES = [
    "__future__.py", "_collections_abc.py", "_compression.py", "_sitebuiltins.py", "_weakrefset.py",
    "abc.py", "ast.py", "base64.py", "bisect.py", "codecs.py", "collections/__init__.py",
    "collections/abc.py", "contextlib.py", "copy.py", "copyreg.py", "dataclasses.py", "dis.py",
    "encodings/__init__.py", "encodings/aliases.py", "encodings/utf_8.py", "encodings/latin_1.py",
    "encodings/ascii.py", "enum.py", "fnmatch.py", "functools.py", "genericpath.py", "hashlib.py",
    "hmac.py", "importlib/__init__.py", "importlib/_abc.py", "importlib/_bootstrap.py",
    "importlib/_bootstrap_external.py", "importlib/machinery.py", "importlib/util.py",
    "inspect.py", "io.py", "ipaddress.py", "json/__init__.py", "json/decoder.py",
    "json/encoder.py", "json/scanner.py", "keyword.py", "linecache.py", "locale.py",
    "logging/__init__.py", "lzma.py", "ntpath.py", "opcode.py", "operator.py", "os.py",
    "pathlib.py", "posixpath.py", "random.py", "re/__init__.py", "re/_casefix.py",
    "re/_compiler.py", "re/_constants.py", "re/_parser.py", "reprlib.py", "selectors.py",
    "shutil.py", "signal.py", "site.py", "socket.py", "stat.py", "string.py", "struct.py",
    "subprocess.py", "textwrap.py", "threading.py", "token.py", "tokenize.py", "traceback.py",
    "tty.py", "types.py", "typing.py", "urllib/__init__.py", "urllib/parse.py", "warnings.py",
    "weakref.py", "zipfile.py", "zipimport.py"]
PYTHON_EXTENSIONS = ["_json", "_hashlib", "_lzma", "_typing", "termios"]
#: files the image carries besides the programs and their closure (the OVS database schema, a
#: library loaded at run time)
DATA_FILES = ["usr/share/openvswitch/vswitch.ovsschema", "usr/lib/x86_64-linux-gnu/libgcc_s.so.1"]
#: what a TCP guest runs (nfvperf.vm.guest refuses an image whose manifest lacks one of them)
TCP_TOOLS = ["usr/bin/iperf3", "usr/sbin/ethtool"]
# virtio for the vhost-user NICs; iavf (Intel 700/800-series VFs) and ixgbe (82599/X5x0 VFs) for
# SR-IOV VFs passed through to the guest (nfvperf.vm.sriov)
ROOT_PMDS = ["librte_net_virtio.so.23", "librte_mempool_ring.so.23", "librte_bus_pci.so.23",
             "librte_net_iavf.so.23", "librte_net_ixgbe.so.23"]
# uio_pci_generic for virtio; vfio-pci (behind the guest's vIOMMU) for VFs, which have no INTx
KERNEL_MODULES = ["kernel/drivers/uio/uio.ko", "kernel/drivers/uio/uio_pci_generic.ko",
                  "kernel/virt/lib/irqbypass.ko", "kernel/drivers/vfio/vfio.ko",
                  "kernel/drivers/vfio/vfio_virqfd.ko", "kernel/drivers/vfio/vfio_iommu_type1.ko",
                  "kernel/drivers/vfio/pci/vfio-pci-core.ko", "kernel/drivers/vfio/pci/vfio-pci.ko",
                  # kernel virtio-net for the TCP guests (Debian builds virtio as modules), in
                  # load order
                  "kernel/drivers/virtio/virtio_ring.ko", "kernel/drivers/virtio/virtio.ko",
                  "kernel/drivers/virtio/virtio_pci_legacy_dev.ko",
                  "kernel/drivers/virtio/virtio_pci_modern_dev.ko",
                  "kernel/drivers/virtio/virtio_pci.ko", "kernel/net/core/failover.ko",
                  "kernel/drivers/net/net_failover.ko", "kernel/drivers/net/virtio_net.ko",
                  # tun: OVS-DPDK's bridge-local (internal) ports are taps
                  "kernel/drivers/net/tun.ko"]
BUSYBOX_APPLETS = ["sh", "mount", "umount", "mkdir", "cat", "echo", "insmod", "sleep", "ls",
                   "stty", "poweroff", "reboot", "grep", "sed", "tr", "cut", "seq", "wc", "dmesg",
                   "ps", "kill", "test", "[", "printf", "head", "tail", "readlink", "basename",
                   "ip", "taskset", "timeout", "nproc", "rm", "true", "false", "env", "chmod"]

INIT_SCRIPT = r"""#!/bin/sh
# nfvperf guest init: bind the virtio-net NICs to uio_pci_generic (VFs to vfio-pci), start testpmd.
export PATH=/usr/bin:/usr/sbin
export LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu:@PMD_DIR@
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/hugepages /var/run /tmp
mount -t hugetlbfs hugetlbfs /dev/hugepages
log() { echo "NFVPERF-GUEST: [$(cut -d' ' -f1 /proc/uptime)] $*" > /dev/ttyS0; }

MODE=vnf; IP=""; MTU=1500
FWD=io; NBCORES=1; QUEUES=1; RXD=1024; TXD=1024; MBUFS=16384; LCORES=""; EXTRA=""; VFIO=""; JUMBO=""
for kv in $(cat /proc/cmdline); do
  case "$kv" in
    nfvperf.mode=*) MODE="${kv#*=}" ;;
    nfvperf.ip=*) IP="${kv#*=}" ;;
    nfvperf.mtu=*) MTU="${kv#*=}" ;;
    nfvperf.fwd=*) FWD="${kv#*=}" ;;
    nfvperf.nbcores=*) NBCORES="${kv#*=}" ;;
    nfvperf.queues=*) QUEUES="${kv#*=}" ;;
    nfvperf.rxd=*) RXD="${kv#*=}" ;;
    nfvperf.txd=*) TXD="${kv#*=}" ;;
    nfvperf.mbufs=*) MBUFS="${kv#*=}" ;;
    nfvperf.lcores=*) LCORES="${kv#*=}" ;;
    nfvperf.maxpkt=*) JUMBO="$JUMBO --max-pkt-len=${kv#*=}" ;;
    nfvperf.mbufsize=*) JUMBO="$JUMBO --mbuf-size=${kv#*=}" ;;
  esac
done
NCPU=$(grep -c ^processor /proc/cpuinfo)
[ -n "$LCORES" ] || LCORES="0-$((NCPU - 1))"
log "boot kernel=$(cat /proc/sys/kernel/osrelease) cpus=$NCPU hugepages=$(cat /proc/sys/vm/nr_hugepages) mode=$MODE"

if [ "$MODE" = tcp ]; then
  # kernel networking on the first virtio-net NIC; shell command lines from the second serial port
  for m in virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci failover \
           net_failover virtio_net; do
    insmod /lib/modules/$m.ko || log "insmod $m failed"
  done
  ip link set lo up
  IF=""
  for i in $(seq 1 50); do
    for n in /sys/class/net/*; do
      n=$(basename "$n"); [ "$n" = lo ] || { IF=$n; break; }
    done
    [ -n "$IF" ] && break
    sleep 0.1
  done
  if [ -n "$IF" ]; then
    ip link set "$IF" mtu "$MTU" || log "mtu $MTU refused on $IF"
    [ -n "$IP" ] && ip addr add "$IP" dev "$IF"
    ip link set "$IF" up
  fi
  stty -F /dev/ttyS1 raw -echo 115200 2>/dev/null
  log "tcp ready if=$IF ip=$IP mtu=$MTU queues=$(ls /sys/class/net/$IF/queues 2>/dev/null | tr '\n' ' ')"
  echo "NFVPERF-SHELL if=$IF" > /dev/ttyS1
  # each line in a subshell: a line garbled on the serial port (a byte lost under TCG) is a
  # syntax error, which ends the shell that evals it; here it ends the subshell, not init
  while IFS= read -r line; do ( eval "$line" ); done </dev/ttyS1 >/dev/ttyS1 2>&1
  log "shell exited"
  poweroff -f
fi

insmod /lib/modules/uio.ko || log "insmod uio failed"
insmod /lib/modules/uio_pci_generic.ko || log "insmod uio_pci_generic failed"
ALLOW=""
for d in /sys/bus/pci/devices/*; do
  v=$(cat "$d/vendor"); id=$(cat "$d/device")
  if [ "$v" = "0x1af4" ] && { [ "$id" = "0x1000" ] || [ "$id" = "0x1041" ]; }; then
    a=$(basename "$d")
    echo uio_pci_generic > "$d/driver_override"
    echo "$a" > /sys/bus/pci/drivers_probe
    drv=$(basename "$(readlink "$d/driver")" 2>/dev/null)
    log "nic $a driver=$drv"
    ALLOW="$ALLOW -a $a"
  fi
done
# SR-IOV VFs passed through (any other Ethernet-class device): vfio-pci behind the vIOMMU
for d in /sys/bus/pci/devices/*; do
  v=$(cat "$d/vendor"); c=$(cat "$d/class")
  case "$c" in 0x0200*) ;; *) continue ;; esac
  [ "$v" = "0x1af4" ] && continue
  if [ -z "$VFIO" ]; then
    for m in irqbypass vfio vfio_virqfd vfio_iommu_type1 vfio-pci-core vfio-pci; do
      insmod /lib/modules/$m.ko || log "insmod $m failed"
    done
    VFIO=1
  fi
  a=$(basename "$d")
  echo vfio-pci > "$d/driver_override"
  [ -e "$d/driver" ] && echo "$a" > "$d/driver/unbind"
  echo "$a" > /sys/bus/pci/drivers_probe
  drv=$(basename "$(readlink "$d/driver")" 2>/dev/null)
  log "vf $a vendor=$v driver=$drv"
  ALLOW="$ALLOW -a $a"
done

stty -F /dev/ttyS1 raw -echo 115200 2>/dev/null
log "testpmd starting lcores=$LCORES fwd=$FWD queues=$QUEUES nics=$ALLOW jumbo=$JUMBO"
dpdk-testpmd -l "$LCORES" -n 1 $ALLOW --iova-mode=pa -- -i --auto-start \
  --forward-mode="$FWD" --nb-cores="$NBCORES" --rxq="$QUEUES" --txq="$QUEUES" \
  --rxd="$RXD" --txd="$TXD" --total-num-mbufs="$MBUFS" --no-lsc-interrupt $JUMBO \
  </dev/ttyS1 >/dev/ttyS1 2>&1
log "testpmd exited rc=$?"
poweroff -f
"""


@dataclasses.dataclass
class ImageInfo:
    key: str                      # cache key: recipe + package versions
    directory: Path
    kernel: Path
    initrd: Path
    manifest: Path
    content_sha256: str           # sha256 over kernel and initrd bytes
    size_b: int                   # kernel + initrd
    kernel_release: str
    dpdk_version: str
    packages: Dict[str, str]      # name -> version
    build_s: Optional[float] = None
    cached: bool = False
    #: the programs the image holds (ROOT_FILES when it was built) and the init's modes
    roots: List[str] = dataclasses.field(default_factory=list)
    modes: List[str] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        for k in ("directory", "kernel", "initrd", "manifest"):
            d[k] = str(d[k])
        return d


# --------------------------------------------------------------------------------------------
# apt: version resolution and download


def _run(argv: List[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, **kw)


def _candidates(names: List[str]) -> Dict[str, str]:
    out = _run(["apt-cache", "policy"] + names).stdout
    res: Dict[str, str] = {}
    cur = None
    for line in out.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            cur = line[:-1].split(":")[0]
        elif cur and line.strip().startswith("Candidate:"):
            v = line.split(":", 1)[1].strip()
            if v != "(none)":
                res[cur] = v
    return res


def _kernel_package(meta_version: str) -> str:
    out = _run(["apt-cache", "show", f"{KERNEL_META}={meta_version}"]).stdout
    for line in out.splitlines():
        if line.startswith("Depends:"):
            for dep in line.split(":", 1)[1].split(","):
                name = dep.strip().split()[0]
                if name.startswith("linux-image-") and name.endswith("-amd64"):
                    return name
    raise ImageError(f"cannot tell which kernel {KERNEL_META}={meta_version} depends on")


def resolve_versions(lock: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """Package name -> version for the image: the lock's versions where given, else apt's
    candidates. Runs `apt-get update` once if apt knows none of them."""
    if lock:
        missing = [n for n in PACKAGES if n not in lock]
        if missing:
            raise ImageError(f"lock file lacks packages: {', '.join(missing)}")
        return dict(sorted(lock.items()))
    names = PACKAGES + [KERNEL_META]
    cand = _candidates(names)
    if not cand:
        _run(["apt-get", "update", "-qq"])
        cand = _candidates(names)
    missing = [n for n in names if n not in cand]
    if missing:
        raise ImageError("apt has no candidate for: " + ", ".join(missing)
                         + " (run `apt-get update`; Debian 12 'bookworm' package names)")
    kpkg = _kernel_package(cand.pop(KERNEL_META))
    kc = _candidates([kpkg])
    if kpkg not in kc:
        raise ImageError(f"apt has no candidate for {kpkg}")
    cand[kpkg] = kc[kpkg]
    return dict(sorted(cand.items()))


def _deb_name(name: str, version: str) -> str:
    return f"{name}_{version.replace(':', '%3a')}_amd64.deb"


def download(versions: Dict[str, str], deb_dir: Path) -> Dict[str, Path]:
    deb_dir.mkdir(parents=True, exist_ok=True)

    def local(name: str, ver: str) -> Optional[Path]:
        # Some packages are Architecture: all; apt names those *_all.deb.
        p = deb_dir / _deb_name(name, ver)
        return next((q for q in (p, p.with_name(p.name.replace("_amd64.deb", "_all.deb"))) if q.exists()), None)

    need = [f"{name}={ver}" for name, ver in versions.items() if local(name, ver) is None]
    if need:
        try:
            subprocess.run(["apt-get", "download", "-q"] + need, cwd=str(deb_dir), check=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        except subprocess.CalledProcessError as e:
            raise ImageError(f"apt-get download failed: {e.stderr.strip()[-800:]}") from e
    paths = {}
    for name, ver in versions.items():
        p = local(name, ver)
        if p is None:
            raise ImageError(f"downloaded package not found: {_deb_name(name, ver)}")
        paths[name] = p
    return paths


def _sha256_file(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()




# --------------------------------------------------------------------------------------------
# build


def _recipe_text() -> str:
    # The builder's own source is part of the recipe: any change to it makes a new image.
    src = hashlib.sha256(Path(__file__).read_bytes() + Path(initramfs.__file__).read_bytes()).hexdigest()
    return json.dumps({"recipe": RECIPE_VERSION, "builder_sha256": src, "init": INIT_SCRIPT, "roots": ROOT_FILES,
                       "pmds": ROOT_PMDS, "modules": KERNEL_MODULES, "data": DATA_FILES,
                       "python": [PYTHON_MODULES, PYTHON_EXTENSIONS],
                       "applets": BUSYBOX_APPLETS}, sort_keys=True)


def image_key(versions: Dict[str, str]) -> str:
    h = hashlib.sha256()
    h.update(_recipe_text().encode())
    h.update(json.dumps(versions, sort_keys=True).encode())
    return h.hexdigest()[:20]


def _load_info(d: Path) -> ImageInfo:
    m = json.loads((d / "manifest.json").read_text())
    return ImageInfo(key=m["key"], directory=d, kernel=d / "vmlinuz", initrd=d / "initrd.img",
                     manifest=d / "manifest.json", content_sha256=m["content_sha256"],
                     size_b=m["size_b"], kernel_release=m["kernel_release"],
                     dpdk_version=m["dpdk_version"],
                     packages={k: v["version"] for k, v in m["packages"].items()},
                     build_s=m.get("build_s"), cached=True, roots=list(m.get("roots") or []),
                     modes=list(m.get("modes") or []))


def _log(msg: str) -> None:
    if os.environ.get("NFVPERF_QUIET") != "1":
        print(f"[nfvperf image] {msg}", file=sys.stderr, flush=True)


def _assemble(versions: Dict[str, str], debs: Dict[str, Path]) -> Tuple[bytes, bytes, str, dict]:
    kpkg = next(n for n in versions if n.startswith("linux-image-"))
    tree: Dict[str, _Entry] = {}
    for name in sorted(debs):
        if name == kpkg:
            continue
        tree.update(_extract_deb(debs[name], want=lambda p: p in DATA_FILES or p.startswith(
            f"{PYTHON_LIB}/") or not p.startswith(("usr/share/", "etc/", "usr/lib/python3",
                                                   "usr/include/"))))
    # Kernel: vmlinuz and the few modules.
    kfiles = _extract_deb(debs[kpkg], want=lambda p: p.startswith("boot/vmlinuz-") or (
        p.startswith("usr/lib/modules/") and any(p.endswith(m) for m in KERNEL_MODULES)))
    vmlinuz = [p for p in kfiles if p.startswith("boot/vmlinuz-")]
    if len(vmlinuz) != 1:
        raise ImageError(f"{kpkg}: expected one vmlinuz, found {vmlinuz}")
    kernel = kfiles[vmlinuz[0]].data
    krel = vmlinuz[0][len("boot/vmlinuz-"):]

    pmd_dirs = sorted({os.path.dirname(p) for p in tree if PMD_DIR_RE.match(os.path.dirname(p))})
    if len(pmd_dirs) != 1:
        raise ImageError(f"expected one DPDK PMD directory, found {pmd_dirs}")
    pmd_dir = pmd_dirs[0]
    lib_dirs = [MULTIARCH, pmd_dir, "usr/lib64"]
    roots = list(ROOT_FILES) + [f"{pmd_dir}/{n}" for n in ROOT_PMDS] + \
        [f"{PYTHON_LIB}/lib-dynload/{m}.cpython-311-x86_64-linux-gnu.so" for m in PYTHON_EXTENSIONS]
    for r in roots:
        if _resolve(tree, r) is None:
            raise ImageError(f"not in the packages: /{r}")
    # The program interpreter is not a DT_NEEDED entry.
    roots.append("usr/lib64/ld-linux-x86-64.so.2")
    keep = _closure(tree, roots, lib_dirs)

    img: Dict[str, _Entry] = {p: tree[p] for p in keep}
    for p in DATA_FILES + [f"{PYTHON_LIB}/{m}" for m in PYTHON_MODULES]:
        if p not in tree:
            raise ImageError(f"not in the packages: /{p}")
        img[p] = tree[p]
    img["usr/bin/python3"] = _Entry("symlink", mode=0o777, target="python3.11")
    img["usr/bin/busybox"] = tree["usr/bin/busybox"]
    img["usr/bin/busybox"].mode = 0o755
    for a in BUSYBOX_APPLETS:
        img.setdefault(f"usr/bin/{a}", _Entry("symlink", mode=0o777, target="busybox"))
    for m in KERNEL_MODULES:
        src = [p for p in kfiles if p.endswith("/" + m)]
        if len(src) != 1:
            raise ImageError(f"{kpkg}: module {m} not found")
        img[f"usr/lib/modules/{os.path.basename(m)}"] = kfiles[src[0]]
    img["init"] = _Entry("file", mode=0o755, data=INIT_SCRIPT.replace("@PMD_DIR@", "/" + pmd_dir).encode())
    for link, target in _MERGED.items():
        img[link] = _Entry("symlink", mode=0o777, target=target)
    img["dev/console"] = _Entry("chr", mode=0o600, rdev=(5, 1))
    img["dev/null"] = _Entry("chr", mode=0o666, rdev=(1, 3))
    # Parent directories, and the mount points.
    for p in list(img) + ["proc/x", "sys/x", "dev/hugepages/x", "tmp/x", "var/run/x", "root/x"]:
        d = os.path.dirname(p)
        while d and d not in img:
            img[d] = _Entry("dir", mode=0o755)
            d = os.path.dirname(d)
    img["."] = _Entry("dir", mode=0o755)   # the rootfs itself: EAL refuses a world-writable /
    initrd = _gzip(_cpio(img))
    meta = {"kernel_package": kpkg, "pmd_dir": "/" + pmd_dir, "files": len(img),
            "initramfs_uncompressed_b": sum(len(e.data) for e in img.values())}
    return kernel, initrd, krel, meta


def build(cache_dir: Optional[Path] = None, force: bool = False,
          lock: Optional[Dict[str, str]] = None, deb_dir: Optional[Path] = None) -> ImageInfo:
    """Build the guest image (or return the cached one with the same key).

    cache_dir: where images live (``<cache_dir>/<key>/``); deb_dir: where the downloaded .debs
    are kept (default ``<cache_dir>/debs``); force: rebuild even when cached; lock: pin versions
    (name -> version, e.g. :func:`load_lock` of an earlier manifest.json)."""
    t0 = time.monotonic()
    cache_dir = Path(cache_dir or DEFAULT_CACHE_DIR).expanduser()
    memo_key = str(cache_dir)
    if not force and not lock and memo_key in _MEMO and _MEMO[memo_key].manifest.exists():
        return _MEMO[memo_key]          # one apt look-up per process (PVVP starts two VMs)
    cache_dir.mkdir(parents=True, exist_ok=True)
    try:
        versions = resolve_versions(lock)
    except (ImageError, subprocess.CalledProcessError, OSError) as e:
        fallback = None if (force or lock) else newest_cached(cache_dir)
        if fallback is None:
            raise ImageError(f"cannot resolve package versions: {e}") from e
        _log(f"apt unusable ({e}); using the newest cached image {fallback.directory}")
        return fallback
    key = image_key(versions)
    final = cache_dir / key
    if (final / "manifest.json").exists() and not force:
        info = _load_info(final)
        _log(f"cached image {final}")
        if not lock:
            _MEMO[memo_key] = info
        return info
    _log(f"building image {key} ({len(versions)} packages)")
    try:
        debs = download(versions, Path(deb_dir) if deb_dir else cache_dir / "debs")
    except ImageError:
        fallback = None if (force or lock) else newest_cached(cache_dir)
        if fallback is None:
            raise
        _log(f"download failed; using the newest cached image {fallback.directory}")
        return fallback
    t_dl = time.monotonic() - t0
    kernel, initrd, krel, meta = _assemble(versions, debs)
    content = hashlib.sha256(kernel + initrd).hexdigest()
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=str(cache_dir)))
    os.chmod(tmp, 0o755)
    try:
        (tmp / "vmlinuz").write_bytes(kernel)
        (tmp / "initrd.img").write_bytes(initrd)
        build_s = round(time.monotonic() - t0, 2)
        manifest = {
            "key": key, "recipe": RECIPE_VERSION, "content_sha256": content,
            "kernel_sha256": hashlib.sha256(kernel).hexdigest(),
            "initrd_sha256": hashlib.sha256(initrd).hexdigest(),
            "size_b": len(kernel) + len(initrd), "kernel_release": krel,
            "dpdk_version": versions.get("dpdk-dev", "?"), "build_s": build_s,
            "download_s": round(t_dl, 2), "roots": ROOT_FILES, "modes": ["vnf", "tcp"],
            "packages": {n: {"version": v, "sha256": _sha256_file(debs[n]), "file": debs[n].name}
                         for n, v in versions.items()},
            **meta,
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        if final.exists():
            shutil.rmtree(final)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _prune(cache_dir, keep=final, keep_debs={p.name for p in debs.values()},
           deb_dir=None if deb_dir else cache_dir / "debs")
    info = _load_info(final)
    info.cached = False
    if not lock:
        _MEMO[memo_key] = info
    _log(f"built {final} in {build_s:.1f} s: {info.size_b / 1e6:.1f} MB, sha256 {content[:16]}")
    return info


_MEMO: Dict[str, ImageInfo] = {}


def newest_cached(cache_dir: Optional[Path] = None) -> Optional[ImageInfo]:
    """The most recently built image in the cache, or None."""
    cache_dir = Path(cache_dir or DEFAULT_CACHE_DIR).expanduser()
    if not cache_dir.is_dir():
        return None
    for d in _images(cache_dir):
        try:
            return _load_info(d)
        except (OSError, ValueError, KeyError):
            continue
    return None


def _images(cache_dir: Path) -> List[Path]:
    """The image directories in the cache (those with a manifest), newest first."""
    return sorted((d for d in cache_dir.iterdir() if (d / "manifest.json").exists()),
                  key=lambda d: d.stat().st_mtime, reverse=True)


def _prune(cache_dir: Path, keep: Path, keep_debs: set, deb_dir: Optional[Path],
           keep_images: int = 3) -> None:
    """Drop all but the newest few images, and .debs no current image uses."""
    for d in [d for d in _images(cache_dir) if d != keep][keep_images - 1:]:
        shutil.rmtree(d, ignore_errors=True)
    if deb_dir is not None and deb_dir.is_dir():
        for f in deb_dir.glob("*.deb"):
            if f.name not in keep_debs:
                with contextlib.suppress(OSError):
                    f.unlink()


def load_lock(path: Path) -> Dict[str, str]:
    """Versions from a manifest.json (or a plain {name: version} JSON) to pin a rebuild."""
    m = json.loads(Path(path).read_text())
    pk = m.get("packages", m)
    return {n: (v["version"] if isinstance(v, dict) else v) for n, v in pk.items()}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="nfvperf image",
                                 description="Build the nfvperf VM VNF guest image.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build (or reuse) the guest image")
    b.add_argument("--cache-dir", type=Path, default=None)
    b.add_argument("--force", action="store_true", help="rebuild even if cached")
    b.add_argument("--lock", type=Path, default=None,
                   help="pin package versions from this manifest.json")
    b.add_argument("--json", action="store_true", help="print the ImageInfo as JSON")
    args = ap.parse_args(argv)
    try:
        info = build(args.cache_dir, force=args.force,
                     lock=load_lock(args.lock) if args.lock else None)
    except (ImageError, subprocess.CalledProcessError) as e:
        print(f"nfvperf image build: error: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(info.to_dict(), indent=1))
    else:
        print(f"image {info.key}: kernel {info.kernel_release}, dpdk {info.dpdk_version}, "
              f"{info.size_b / 1e6:.1f} MB, sha256 {info.content_sha256}"
              + (" (cached)" if info.cached else f", built in {info.build_s:.1f} s"))
        print(f"  {info.kernel}\n  {info.initrd}\n  {info.manifest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
