"""SR-IOV VF passthrough to the VM VNF (seed 002 test cases 7-10): QEMU's argv, the VF preflight on
a fake sysfs tree and on this host, and the p2p topology's needs with ``vnf: vm``."""
from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from nfvperf.dut.base import DutFailure
from nfvperf.host.run import ResourceTracker, RunContext
from nfvperf.topo.spec import TopologySpec
from nfvperf.vm import sriov
from nfvperf.vm.qemu import VmVnf

VF0, VF1 = "0000:3b:02.0", "0000:3b:02.1"


def _vm(tmp_path: Path, **kw) -> VmVnf:
    run = RunContext("sriov", tmp_path)
    vm = VmVnf(run, ResourceTracker(run), name="dut", **kw)
    vm.image = SimpleNamespace(kernel=tmp_path / "vmlinuz", initrd=tmp_path / "initrd")  # type: ignore[assignment]
    vm.accel = "tcg"
    return vm


def test_argv_passes_each_vf_through(tmp_path: Path) -> None:
    vm = _vm(tmp_path, vf_pci=["3b:02.0", VF1])
    a = vm.argv()
    devs = [a[i + 1] for i, x in enumerate(a) if x == "-device"]
    # the vIOMMU first (the guest's vfio-pci needs it), then the VFs in order
    assert devs == ["intel-iommu,intremap=on,caching-mode=on", f"vfio-pci,host={VF0},id=vf0",
                    f"vfio-pci,host={VF1},id=vf1"]
    assert a[a.index("-machine") + 1] == "q35" and "intel_iommu=on" in vm.kernel_cmdline()
    vm.accel = "kvm"
    assert "q35,accel=kvm,kernel-irqchip=split" in vm.argv()
    assert "-chardev" in a and not any("vhost-user" in x for x in a)   # no vhost-user NIC
    assert [p.end.name for p in vm.ports] == ["pci", "pci"] and vm.vhost_ports == []
    assert vm.vf_pci == [VF0, VF1]


def test_argv_vhost_only_has_no_vfio(tmp_path: Path) -> None:
    vm = _vm(tmp_path, sockets=[tmp_path / "s0", tmp_path / "s1"])
    a = vm.argv()
    assert not any(x.startswith(("vfio-pci", "intel-iommu")) for x in a)
    assert a[a.index("-machine") + 1] == "pc" and "intel_iommu" not in vm.kernel_cmdline()
    assert sum(x.startswith("virtio-net-pci") for x in a) == 2


def _fake_sysfs(root: Path, groups: int = 1) -> Path:
    (root / "kernel" / "iommu_groups").mkdir(parents=True)
    for g in range(groups):
        (root / "kernel" / "iommu_groups" / str(g)).mkdir()
    devs = root / "bus" / "pci" / "devices"
    drivers = root / "bus" / "pci" / "drivers"
    for d in ("vfio-pci", "iavf"):
        (drivers / d).mkdir(parents=True)
    pf = devs / "0000:3b:00.0"
    pf.mkdir(parents=True)
    for addr, drv in ((VF0, "vfio-pci"), (VF1, "iavf")):
        (devs / addr).mkdir()
        os.symlink(pf, devs / addr / "physfn")
        os.symlink(drivers / drv, devs / addr / "driver")
    return root


def test_vf_checks_on_a_fake_sysfs(tmp_path: Path) -> None:
    sysfs = _fake_sysfs(tmp_path / "sys")
    c = {x.name: x for x in sriov.vf_checks([VF0, VF1, "0000:3b:00.0", "0000:99:00.0"], sysfs)}
    assert c["sriov:iommu"].status == "ok"
    assert c[f"sriov:{VF0}"].status == "ok" and "0000:3b:00.0" in c[f"sriov:{VF0}"].detail
    bad = c[f"sriov:{VF1}"]
    assert bad.status == "fail" and bad.required and "bound to iavf" in bad.detail
    assert "topology.pci" in bad.detail and f"--bind=vfio-pci {VF1}" in bad.fix \
        and "nfvperf testbed prepare" in bad.fix
    pf = c["sriov:0000:3b:00.0"]
    assert pf.status == "fail" and "not an SR-IOV virtual function" in pf.detail
    gone = c["sriov:0000:99:00.0"]
    assert gone.status == "fail" and "sriov_numvfs" in gone.fix


def test_vf_checks_without_iommu(tmp_path: Path) -> None:
    sysfs = _fake_sysfs(tmp_path / "sys", groups=0)
    iommu = sriov.vf_checks([VF0], sysfs)[0]
    assert iommu.status == "fail" and "intel_iommu=on iommu=pt" in iommu.fix
    assert sriov.vf_checks([], sysfs)[0].status == "fail"


def test_start_refuses_missing_vfs_on_this_host(tmp_path: Path) -> None:
    """This host has no such VFs: start() fails before QEMU runs, naming the field and the fix."""
    vm = _vm(tmp_path, vf_pci=["0000:fe:1f.7", "0000:fe:1f.6"])
    with pytest.raises(DutFailure, match=r"topology\.pci: .*fix: "):
        vm.start()
    assert vm.proc is None


def test_p2p_vm_needs_vf_checks_and_qemu() -> None:
    """kind p2p, vnf vm: preflight checks the DUT addresses as VFs (here: none exist) and needs
    QEMU; with an emulated port kind it says that VFs need port_kind pci."""
    spec = TopologySpec(kind="p2p", dut="testpmd", vnf="vm", port_kind="pci",
                        pci=["0000:fe:00.0", "0000:fe:1f.7", "0000:fe:00.1", "0000:fe:1f.6"])
    needs = spec.preflight_needs()
    assert "qemu-system-x86_64" in needs.binaries and needs.hugepages_mb >= 1024
    got = [c for f in needs.checks for c in (lambda r: r if isinstance(r, list) else [r])(f(()))]
    names = {c.name: c for c in got}
    assert "sriov:0000:fe:1f.7" in names and "sriov:0000:fe:1f.6" in names
    assert "sriov:0000:fe:00.0" not in names          # the generator's address is no VF
    assert names["sriov:0000:fe:1f.7"].status == "fail"
    emu = TopologySpec(kind="p2p", dut="testpmd", vnf="vm", port_kind="vhost")
    refused = [c for f in emu.preflight_needs().checks for c in
               (lambda r: r if isinstance(r, list) else [r])(f(())) if c.name == "sriov:port_kind"]
    assert refused and refused[0].status == "fail" and "port_kind: pci" in refused[0].fix


def test_guest_image_recipe_has_vf_drivers_and_iperf3(tmp_path: Path) -> None:
    """The guest binds non-virtio Ethernet devices (the VFs) to vfio-pci with the modules and PMDs
    shipped for it, and carries iperf3; its /init is valid shell."""
    import subprocess

    from nfvperf.vm import image
    assert "usr/bin/iperf3" in image.ROOT_FILES and "iperf3" in image.PACKAGES
    assert "librte_net_iavf.so.23" in image.ROOT_PMDS
    mods = [Path(m).stem for m in image.KERNEL_MODULES]
    for m in ("irqbypass", "vfio", "vfio_virqfd", "vfio_iommu_type1", "vfio-pci-core", "vfio-pci"):
        assert m in mods and f" {m}" in image.INIT_SCRIPT     # shipped and loaded
    assert "echo vfio-pci > \"$d/driver_override\"" in image.INIT_SCRIPT
    script = tmp_path / "init"
    script.write_text(image.INIT_SCRIPT)
    assert subprocess.run(["sh", "-n", str(script)], capture_output=True).returncode == 0


@pytest.mark.parametrize("mtu,want", [(1500, None), (9000, (9018, 9216)), (9216, (9234, 9728))])
def test_the_guest_follows_the_topology_mtu(tmp_path: Path, mtu: int, want) -> None:
    """Jumbo frames through the VM VNF: host_mtu on each virtio-net NIC, and the guest's testpmd
    sized for one-segment frames of that MTU (from the spec, as the container VNF)."""
    vm = _vm(tmp_path, sockets=[tmp_path / "s0", tmp_path / "s1"],
             spec=TopologySpec(kind="pvp", port_kind="vhost", mtu=mtu))
    nics = [x for x in vm.argv() if x.startswith("virtio-net-pci")]
    cmdline = vm.kernel_cmdline()
    if want is None:
        assert not any("host_mtu" in n for n in nics) and "nfvperf.maxpkt" not in cmdline
    else:
        assert all(n.endswith(f",host_mtu={mtu}") for n in nics) and len(nics) == 2
        assert f"nfvperf.maxpkt={want[0]} nfvperf.mbufsize={want[1]}" in cmdline
