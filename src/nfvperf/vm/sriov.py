"""SR-IOV virtual functions passed through to the VM VNF (seed 002 test cases 7-10: L3fwd in a VM
on a VF).

``vf_checks(addrs)``: the preflight of the VFs a VM is given (``topology.pci``'s DUT addresses with
``kind: p2p, vnf: vm``): the IOMMU is on (``/sys/kernel/iommu_groups`` not empty), each address is
a PCI device, a virtual function (it has ``physfn``) and bound to vfio-pci.  Each failure names
the field and the fix.  ``vfio_device_args(addrs)``: QEMU's ``-device vfio-pci,host=...``.

``sysfs`` is a parameter so the checks run on a fake tree in the unit tests.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Sequence

from nfvperf.host.preflight import Check

FIELD = "topology.pci"


def full_address(addr: str) -> str:
    """``3b:02.0`` -> ``0000:3b:02.0`` (domain added when missing)."""
    return addr if re.match(r"^[0-9a-fA-F]{4}:", addr) else f"0000:{addr}"


def vfio_device_args(addrs: Sequence[str]) -> list[str]:
    """QEMU arguments passing each VF through to the guest, in order (guest NIC 0, 1, ...)."""
    return [x for i, a in enumerate(addrs) for x in ("-device", f"vfio-pci,host={full_address(a)},id=vf{i}")]


def _iommu_check(sysfs: Path) -> Check:
    groups = sysfs / "kernel" / "iommu_groups"
    try:
        n = len(list(groups.iterdir()))
    except OSError:
        n = 0
    if n:
        return Check("sriov:iommu", "ok", f"{n} IOMMU groups", required=True)
    return Check("sriov:iommu", "fail",
                 f"{FIELD}: VF passthrough to the VM needs the IOMMU, and {groups} is empty or "
                 "missing", "enable VT-d/AMD-Vi in the firmware and boot with `intel_iommu=on "
                 "iommu=pt` (AMD: `amd_iommu=on iommu=pt`) on the kernel command line",
                 required=True)


def _vf_check(addr: str, sysfs: Path) -> Check:
    full = full_address(addr)
    dev = sysfs / "bus" / "pci" / "devices" / full
    name = f"sriov:{addr}"
    if not dev.exists():
        return Check(name, "fail", f"{FIELD}: no PCI device {full} (the VF for the VM does not exist)",
                     "create the VFs on their physical function: `echo N > "
                     "/sys/class/net/<pf>/device/sriov_numvfs`, then list them with `lspci -D | "
                     "grep -i 'virtual function'`", required=True)
    if not (dev / "physfn").exists():
        return Check(name, "fail", f"{FIELD}: {full} is not an SR-IOV virtual function (no "
                     f"{dev / 'physfn'})", "give the VF addresses (`ls -l /sys/class/net/<pf>/"
                     "device/virtfn*`), not the physical function's", required=True)
    drv = Path(os.path.realpath(dev / "driver")).name if (dev / "driver").exists() else "(none)"
    pf = Path(os.path.realpath(dev / "physfn")).name
    if drv != "vfio-pci":
        return Check(name, "fail", f"{FIELD}: VF {full} (of PF {pf}) is bound to {drv}, not "
                     "vfio-pci", f"modprobe vfio-pci && dpdk-devbind.py --bind=vfio-pci {full} "
                     "(or `nfvperf testbed prepare`)", required=True)
    return Check(name, "ok", f"VF of {pf}, driver vfio-pci", required=True)


def vf_checks(addrs: Sequence[str], sysfs: Path = Path("/sys")) -> list[Check]:
    """The IOMMU check, then one check per VF address."""
    if not addrs:
        return [Check("sriov:vfs", "fail", f"{FIELD}: no VF addresses for the VM VNF",
                      "list the generator/VF address pairs: pci: [tg0, vf0, tg1, vf1]",
                      required=True)]
    return [_iommu_check(sysfs)] + [_vf_check(a, sysfs) for a in addrs]
