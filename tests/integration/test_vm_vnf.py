"""The VM VNF end to end: build (or reuse) the guest image, boot it with two vhost-user NICs whose
other ends are dpdk-testpmd processes on the host (net_vhost, client mode), send frames into NIC 0
and count them out of NIC 1 after the guest's testpmd forwarded them.

    host testpmd A (txonly) --s0--> [guest: virtio 0 -> testpmd io -> virtio 1] --s1--> host testpmd B (rxonly)

Asserted, after the sender stopped and the rings drained:
  A tx == guest rx(0);  guest rx(0) == guest tx(1) + guest tx drops(1);  guest tx(1) == B rx.
Then everything is stopped and nothing of the run is left (QEMU, sockets, hugepage files): the
``run_ctx`` / ``leak_check`` fixtures check processes, hugepage files and DPDK dirs by tag.
"""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

HAVE_QEMU = shutil.which("qemu-system-x86_64") is not None
HAVE_TESTPMD = shutil.which("dpdk-testpmd") is not None


@pytest.fixture(scope="module")
def guest_image():
    from nfvperf.vm import image
    t0 = time.monotonic()
    info = image.build()          # an ImageError fails the tests: it is nfvperf's own
    took = time.monotonic() - t0
    print(f"\n[vm image] {'cached' if info.cached else 'built'} {info.key} in {took:.1f} s: "
          f"{info.size_b / 1e6:.1f} MB, kernel {info.kernel_release}, dpdk {info.dpdk_version}, "
          f"sha256 {info.content_sha256[:16]}")
    return info


def _host_testpmd(run, tracker, role: str, sock: Path, mode: str, lcores: str, client: bool):
    from nfvperf.dut.base import PortRef, VhostBackend
    from nfvperf.dut.testpmd import Testpmd

    cls = type(f"HostPeer_{role}", (Testpmd,), {"role": role, "__test__": False})
    tp = cls(run, tracker, forward_mode=mode, lcores=lcores, memory="in-memory", mbufs=8192,
             extra_args=["--port-topology=chained"], name=f"testpmd-{role}")
    tp.add_port(PortRef(f"{role}0", VhostBackend(client=client), socket=sock))
    return tp


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.skipif(not HAVE_QEMU, reason="qemu-system-x86_64 not installed")
@pytest.mark.skipif(not HAVE_TESTPMD, reason="dpdk-testpmd not installed")
@pytest.mark.parametrize("order", ["server-late-backends", "server-backends-first", "client"])
def test_vm_vnf_forwards_and_cleans_up(run_ctx, guest_image, order):
    """server-late-backends: QEMU listens, then the backends connect, then wait_ready();
    server-backends-first: the backends (clients) are retrying before QEMU starts (the order of
    OVS dpdkvhostuserclient ports in the PVP topology) and start() waits for the boot;
    client: the backends create the sockets and QEMU connects."""
    from nfvperf.host import hugepages as hp
    from nfvperf.vm.qemu import VmVnf

    tracker = run_ctx.tracker
    qemu_server = order != "client"
    s0, s1 = run_ctx.path("vhu0.sock"), run_ctx.path("vhu1.sock")
    vm = VmVnf(run_ctx, tracker, sockets=[s0, s1], server=qemu_server, name="vnf0",
               hugepage_mb=512, vcpus=2, image=guest_image)
    # host side: A sends into NIC 0, B receives from NIC 1 (net_vhost backends)
    tx = _host_testpmd(run_ctx, tracker, "hosta", s0, "txonly", "0@0,1@1", client=qemu_server)
    rx = _host_testpmd(run_ctx, tracker, "hostb", s1, "rxonly", "0@1,1@0", client=qemu_server)
    t0 = time.monotonic()
    if order == "server-late-backends":
        vm.start(wait=False)
        assert not vm.ready and not vm.backends_connected()
        tx.start()
        tx._console("stop")
        rx.start()
        assert vm.backends_connected(30)
        vm.wait_ready()
    else:
        tx.start()
        tx._console("stop")
        rx.start()
        vm.start()
        assert vm.ready
    boot_s = time.monotonic() - t0
    env = vm.environment()
    print(f"[vm] booted in {boot_s:.1f} s, accel {env['accel']} ({env['accel_reason']}), "
          f"{vm.version()}")
    assert env["port_macs"] == [p.mac for p in vm.ports]

    vm.alive()
    for p in (tx, rx):
        p.clear_counters()
    vm.clear_counters()
    vm.command("stop")          # also resets the guest's forward stats
    vm.command("start")
    duration_s = 1.0           # the counts must agree end to end: any length shows it
    tx._console("start")
    time.sleep(duration_s)
    tx._console("stop")
    # drain: the guest empties its RX ring, B empties the guest's TX ring
    deadline = time.monotonic() + 20
    prev = None
    while time.monotonic() < deadline:
        time.sleep(1.0)
        g = vm.counters()["ports"]
        cur = (g["vnf0-vhu0"]["rx_packets"], g["vnf0-vhu1"]["tx_packets"],
               rx.raw_port_stats()[0]["rx_packets"])
        if cur == prev:
            break
        prev = cur
    a_tx = tx.raw_port_stats()[0]["tx_packets"]
    b_rx = rx.raw_port_stats()[0]["rx_packets"]
    c = vm.counters()
    g_rx0 = c["ports"]["vnf0-vhu0"]["rx_packets"]
    g_tx1 = c["ports"]["vnf0-vhu1"]["tx_packets"]
    g_drop1 = c["ports"]["vnf0-vhu1"].get("fwd_tx_dropped", 0)
    print(f"[vm] {duration_s:.0f} s of txonly: host A tx {a_tx}, guest rx0 {g_rx0}, "
          f"guest tx1 {g_tx1} (+{g_drop1} dropped), host B rx {b_rx}; guest forwarded "
          f"{g_tx1 / duration_s / 1e3:.1f} kpps")
    assert g_rx0 > 1000, f"too few frames reached the guest: {c}"
    assert a_tx == g_rx0, (a_tx, g_rx0)
    assert g_rx0 == g_tx1 + g_drop1, (g_rx0, g_tx1, g_drop1)
    assert b_rx == g_tx1, (b_rx, g_tx1)
    assert g_tx1 > 0

    qemu_pid = vm.proc.pid
    rx.stop()
    tx.stop()
    vm.stop()
    vm.stop()                   # idempotent
    assert not Path(f"/proc/{qemu_pid}").exists() or \
        Path(f"/proc/{qemu_pid}/stat").read_text().split()[2] in ("Z", "X")
    for p in ((s0, s1) if qemu_server else ()) + (vm.ctl_sock, vm.qmp_sock):
        assert not p.exists(), f"left behind: {p}"
    assert not [f for f in hp.snapshot_files() if run_ctx.tag in f]
    # the console log stays for troubleshooting
    assert "] testpmd starting" in vm.console_log.read_text()


def test_vm_vnf_argv_and_interface(tmp_path):
    """No root needed: the QEMU command line and the adapter's fixed shape."""
    from nfvperf.host.run import ResourceTracker, RunContext
    from nfvperf.vm.image import ImageInfo
    from nfvperf.vm.qemu import VmVnf

    run = RunContext(run_dir=tmp_path / "run")
    img = ImageInfo(key="k", directory=tmp_path, kernel=tmp_path / "vmlinuz",
                    initrd=tmp_path / "initrd.img", manifest=tmp_path / "manifest.json",
                    content_sha256="0" * 64, size_b=1, kernel_release="6.1.0-x-amd64",
                    dpdk_version="22.11", packages={})
    with ResourceTracker(run, install_signal_handlers=False) as tr:
        vm = VmVnf(run, tr, sockets=[tmp_path / "a.sock", tmp_path / "b.sock"], server=False,
                   name="vnf1", hugepage_mb=1024, vcpus=3, cpu_pin=[0, 1, 1], queues=2,
                   image=img)
        vm.accel = "kvm"
        argv = vm.argv()
        joined = " ".join(argv)
        assert "memory-backend-file,id=mem,size=1024M,mem-path=/dev/hugepages,share=on" in joined
        assert f"socket,id=vhu0,path={tmp_path / 'a.sock'},reconnect=1" in joined
        assert "type=vhost-user,id=net1,chardev=vhu1,vhostforce=on,queues=2" in joined
        assert "mq=on,vectors=6" in joined
        assert "nfvperf.nbcores=2" in vm.kernel_cmdline()
        assert f"hugepages={(1024 - 320) // 2}" in vm.kernel_cmdline()
        assert [p.name for p in vm.ports] == ["vnf1-vhu0", "vnf1-vhu1"]
        assert len({p.mac for p in vm.ports}) == 2
        with pytest.raises(ValueError):
            VmVnf(run, tr, sockets=[tmp_path / "a.sock"], vcpus=1)


@pytest.mark.no_polling          # builds the image: nothing boots
def test_image_pieces_are_deterministic():
    """No root, no network: the ELF reader and the initramfs writer."""
    import gzip
    from nfvperf.vm import initramfs as I

    tree = {"init": I._Entry("file", mode=0o755, data=b"#!/bin/sh\n"),
            "usr/bin/sh": I._Entry("symlink", target="busybox"),
            "usr": I._Entry("dir", mode=0o755), "usr/bin": I._Entry("dir", mode=0o755),
            "dev/console": I._Entry("chr", mode=0o600, rdev=(5, 1)),
            "dev": I._Entry("dir", mode=0o755)}
    a = I._gzip(I._cpio(tree))
    b = I._gzip(I._cpio(dict(reversed(list(tree.items())))))
    assert a == b
    raw = gzip.decompress(a)
    assert raw.startswith(b"070701") and raw.rstrip(b"\0").endswith(b"TRAILER!!!")
    names = []
    off = 0
    while True:
        namesize = int(raw[off + 94:off + 102], 16)
        filesize = int(raw[off + 54:off + 62], 16)
        mtime = int(raw[off + 46:off + 54], 16)
        assert mtime == I.EPOCH
        name = raw[off + 110:off + 110 + namesize - 1].decode()
        if name == "TRAILER!!!":
            break
        names.append(name)
        off += (110 + namesize + 3) // 4 * 4
        off += (filesize + 3) // 4 * 4
    assert names == sorted(tree)
    assert I._norm("./lib/x86_64-linux-gnu/libc.so.6") == "usr/lib/x86_64-linux-gnu/libc.so.6"
    assert I._norm("./bin/busybox") == "usr/bin/busybox"
    tp = shutil.which("dpdk-testpmd")
    if tp:
        needed = I.elf_needed(Path(tp).read_bytes())
        assert needed and "librte_eal.so.23" in needed
    assert I.elf_needed(b"#!/bin/sh\n") is None


@pytest.mark.slow
@pytest.mark.no_polling          # builds the image: nothing boots
def test_image_rebuild_is_byte_identical(guest_image, tmp_path):
    """Same packages, fresh build in another cache dir: the same kernel and initramfs bytes."""
    from nfvperf.vm import image as I

    again = I.build(tmp_path / "cache", force=True, deb_dir=guest_image.directory.parent / "debs",
                    lock=guest_image.packages)
    assert again.key == guest_image.key
    assert again.content_sha256 == guest_image.content_sha256
    m = json.loads(again.manifest.read_text())
    assert all(len(v["sha256"]) == 64 for v in m["packages"].values())
    assert m["packages"]["dpdk-dev"]["version"] == guest_image.dpdk_version
