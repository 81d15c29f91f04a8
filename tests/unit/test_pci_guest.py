"""The emulated-PCI guest's pieces without QEMU (nfvperf.vm.pci_guest): the overlay initramfs, the
QEMU command line, the Host protocol over a (fake) guest shell, and the testbed NIC preflight's
refusal of a PCI address that is not a network device.  The guest itself runs in
tests/integration/test_pci_emulated.py."""
from __future__ import annotations

import gzip
import io
import shutil
import subprocess
from pathlib import Path

import pytest

from nfvperf.vm import image as I
from nfvperf.vm import initramfs
from nfvperf.vm import pci_guest as P
from nfvperf.vm import pci_overlay
from nfvperf.vm.guest import env_prefix


def _cpio_names(raw: bytes) -> dict[str, bytes]:
    out, off = {}, 0
    while off < len(raw):
        if raw[off:off + 6] != b"070701":
            break
        namesize = int(raw[off + 94:off + 102], 16)
        filesize = int(raw[off + 54:off + 62], 16)
        name = raw[off + 110:off + 110 + namesize - 1].decode()
        off += 110 + namesize
        off += (4 - off % 4) % 4
        out[name] = raw[off:off + filesize]
        off += filesize
        off += (4 - off % 4) % 4
        if name == "TRAILER!!!":
            break
    return out


def _fake_image(tmp_path: Path) -> I.ImageInfo:
    base = initramfs._gzip(initramfs._cpio({"init": initramfs._Entry("file", mode=0o755, data=b"#!/bin/sh\n")}))
    (tmp_path / "initrd.img").write_bytes(base)
    (tmp_path / "manifest.json").write_text('{"pmd_dir": "/usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0"}')
    return I.ImageInfo(key="k", directory=tmp_path, kernel=tmp_path / "vmlinuz",
                       initrd=tmp_path / "initrd.img", manifest=tmp_path / "manifest.json",
                       content_sha256="0" * 64, size_b=1, kernel_release="6.1.0-x-amd64",
                       dpdk_version="22.11", packages={})


def _a_binary() -> Path:
    for b in ("socat", "ls"):
        p = shutil.which(b)
        if p:
            return Path(p)
    pytest.skip("no dynamically linked binary to test with")


def test_closure_finds_the_libraries_and_names_a_missing_one(tmp_path, monkeypatch):
    b = _a_binary()
    got = pci_overlay.host_closure([b])
    assert "usr/lib/x86_64-linux-gnu/libc.so.6" in got
    assert all(p.exists() for p in got.values())
    monkeypatch.setattr(pci_overlay, "LIB_DIRS", (str(tmp_path),))
    with pytest.raises(ValueError, match=r"libc\.so\.6 \(needed by"):
        pci_overlay.host_closure([b])


def test_overlay_appends_an_archive_with_the_init_and_the_programs(tmp_path):
    img = _fake_image(tmp_path)
    b = _a_binary()
    out = P.overlay(img, b, b, tmp_path / "run" / "initrd.img")
    data = out.read_bytes()
    base = img.initrd.read_bytes()
    assert data.startswith(base)
    second = data[len(base) + (4 - len(base) % 4) % 4:]
    names = _cpio_names(gzip.GzipFile(fileobj=io.BytesIO(second)).read())
    init = names[P.GUEST_INIT.lstrip("/")].decode()
    assert "uio_pci_generic" in init and "/dev/ttyS2" in init
    assert "LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0" in init
    assert "NFVPERF-SHELL nics=" in init and "drivers_probe" not in init   # nothing bound at boot
    assert names[P.GUEST_TGEN.lstrip("/")] == b.read_bytes()
    assert "usr/lib/x86_64-linux-gnu/libc.so.6" in names


def test_qemu_command_line(tmp_path):
    from nfvperf.host.run import ResourceTracker, RunContext
    run = RunContext(run_dir=tmp_path / "run")
    img = _fake_image(tmp_path)
    with ResourceTracker(run, install_signal_handlers=False) as tr:
        g = P.PciGuest(run, tr, sockets=[tmp_path / "a.sock", tmp_path / "b.sock"], image=img,
                       memory_mb=1024, guest_hugepages_mb=512)
        g.accel = "tcg"
        argv = g.argv()
        joined = " ".join(argv)
        assert argv[argv.index("-initrd") + 1] == str(g.initrd)
        assert f"rdinit={P.GUEST_INIT}" in g.kernel_cmdline() and "hugepages=256" in g.kernel_cmdline()
        assert "addr=0x4,vectors=0" in joined and "addr=0x5,vectors=0" in joined
        assert g.pci_addresses() == ["0000:00:04.0", "0000:00:05.0"]
        assert f"socket,id=rpc,path={g.rpc_sock},server=on,wait=off" in joined
        # the guest's ttyS2 (tgen's RPC) and ttyS3 (an interactive process's terminal)
        assert argv[-6:] == ["-serial", "chardev:rpc", "-chardev",
                             f"socket,id=tty,path={g.tty_sock},server=on,wait=off",
                             "-serial", "chardev:tty"]
        assert "type=vhost-user,id=net0,chardev=vhu0" in joined
        s = P.PciGuest(run, tr, sockets=[tmp_path / "l0.sock", tmp_path / "l1.sock"], image=img,
                       name="dut", stream_server=False)
        s.accel = "tcg"
        sj = " ".join(s.argv())
        assert "vhost-user" not in sj and "id=vhu0" not in sj
        assert f"stream,id=net1,server=off,addr.type=unix,addr.path={tmp_path / 'l1.sock'}" in sj
        # multi-queue cables: each NIC the tap QEMU makes (in the run's netns), mq=on
        t = P.PciGuest(run, tr, sockets=[tmp_path / "l0.sock", tmp_path / "l1.sock"], image=img,
                       name="mq", taps=["tapa", "tapb"], queues=2, netns="ns1")
        t.accel = "tcg"
        ta = t.argv()
        tj = " ".join(ta)
        assert "vhost-user" not in tj and "id=vhu0" not in tj and "stream," not in tj
        assert "tap,id=net1,ifname=tapb,script=no,downscript=no,vhost=off,queues=2" in tj
        dev = next(x for x in ta if x.startswith("virtio-net-pci,netdev=net0,"))
        assert dev.endswith(",addr=0x4,vectors=0,mq=on,rss=on"), dev
        assert t.netns == "ns1"
        t.accel = "kvm"
        assert any(x.endswith(",addr=0x5,mq=on,rss=on,vectors=6") for x in t.argv())
        with pytest.raises(ValueError, match="taps: one per NIC"):
            P.PciGuest(run, tr, sockets=[tmp_path / "a.sock", tmp_path / "b.sock"], image=img,
                       taps=["x"])
        with pytest.raises(ValueError, match="one vhost-user socket each; got 1"):
            P.PciGuest(run, tr, sockets=[tmp_path / "a.sock"], image=img)
        with pytest.raises(ValueError, match="guest_hugepages_mb"):
            P.PciGuest(run, tr, sockets=[tmp_path / "a.sock", tmp_path / "b.sock"], image=img,
                       memory_mb=512, guest_hugepages_mb=512)


def test_a_guest_reached_over_ssh_gets_a_management_nic_sshd_and_the_runs_keys(tmp_path):
    import os
    import stat

    import paramiko

    from nfvperf.host.run import ResourceTracker, RunContext
    from nfvperf.testbed.guests import ssh_target
    run = RunContext(run_dir=tmp_path / "run")
    img = _fake_image(tmp_path)
    with ResourceTracker(run, install_signal_handlers=False) as tr:
        ssh = ssh_target(run, tr, "dut", 1, f"{run.tag}-lab")
        # the keys: made for the run, the login key's private half 0600 in the run directory
        assert ssh.tap == f"{run.tag}m1" and (ssh.address, ssh.gateway) == ("10.254.1.2", "10.254.1.1")
        assert stat.S_IMODE(os.stat(ssh.key_file).st_mode) == 0o600
        user = paramiko.PKey.from_path(str(ssh.key_file))
        assert ssh.authorized_key.split()[:2] == [user.get_name(), user.get_base64()]
        assert ssh.host_key and ssh.host_key.startswith("ssh-ed25519 ")
        assert ssh_target(run, tr, "x", 0, "ns").host_key != ssh.host_key     # new keys each time
        g = P.PciGuest(run, tr, sockets=[tmp_path / "l0.sock", tmp_path / "l1.sock"], image=img,
                       name="dut", taps=["tapa", "tapb"], queues=2, netns=ssh.netns, ssh=ssh)
        g.accel = "tcg"
        a = g.argv()
        assert "nfvperf.mgmt=10.254.1.2/30" in g.kernel_cmdline()
        assert a[a.index(f"tap,id=mgmt,ifname={ssh.tap},script=no,downscript=no,vhost=off") + 2] \
            == "virtio-net-pci,netdev=mgmt,addr=0xc"
        # QEMU (and so its taps) in the run's namespace, also without multi-queue cables
        assert P.PciGuest(run, tr, sockets=[tmp_path / "a", tmp_path / "b"], image=img,
                          stream_server=True, ssh=ssh).netns == ssh.netns
        with pytest.raises(ValueError, match="management tap"):
            P.PciGuest(run, tr, sockets=[tmp_path / "a", tmp_path / "b"], image=img,
                       taps=["a", "b"], netns="other", ssh=ssh)
        out = P.overlay(img, _a_binary(), _a_binary(), tmp_path / "ov.img", ssh=ssh)
        data, base = out.read_bytes(), img.initrd.read_bytes()
        second = data[len(base) + (4 - len(base) % 4) % 4:]
        names = _cpio_names(gzip.GzipFile(fileobj=io.BytesIO(second)).read())
    assert not ssh.key_file.exists()                    # removed with the run's resources
    assert names["etc/ssh/ssh_host_ed25519_key"] == ssh.host_key_private
    assert names["root/.ssh/authorized_keys"].decode().strip() == ssh.authorized_key
    conf = names["etc/ssh/sshd_config"].decode()
    for line in ("PasswordAuthentication no", "UsePAM no", "Subsystem sftp /usr/lib/openssh/sftp-server",
                 "SetEnv PATH=/usr/bin:/usr/sbin LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu:"
                 "/usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0"):
        assert line in conf.splitlines(), line
    assert b"sshd:x:" in names["etc/passwd"] and b"root:x:0:0:" in names["etc/passwd"]
    init = names[P.GUEST_INIT.lstrip("/")].decode()
    # the management NIC is not among the NICs left for DPDK, and no other NIC gets virtio-net
    assert '= 0000:00:0c.0 ] && continue' in init and "echo none > $d/driver_override" in init
    assert "/usr/sbin/sshd -f /etc/ssh/sshd_config -E /run/nfvperf-sshd.log" in init


class FakeGuest:
    """Answers shell lines like the guest's init would, from a script of replies."""

    vnf_name = "tester"
    accel = "tcg"

    def __init__(self, replies):
        self.lines: list[str] = []
        self.replies = replies

    def shell_line(self, line, timeout=30.0):
        self.lines.append(line)
        for key, reply in self.replies:
            if key in line:
                return reply
        return 0, ""

    def alive(self):
        pass


def test_guest_host_starts_a_process_and_copies_its_output(tmp_path):
    g = FakeGuest([("setsid", (0, "PID=77")),
                   ("@@R", (0, "@@F{\"ready\": true}\n@@Fwarn\n@@R0"))])
    h = P.GuestPciHost(g)   # type: ignore[arg-type]
    with open(tmp_path / "out", "wb", buffering=0) as out, \
            open(tmp_path / "log", "wb", buffering=0) as log:
        p = h.popen(["/usr/bin/nfvperf-tgen", "--x", "a b"], stdin=subprocess.DEVNULL,
                    stdout=out, stderr=log, env={"NFVPERF_TAG": "t1"})
        assert p.wait(5) == 0
        p.close()
    start = next(x for x in g.lines if "setsid" in x)
    assert "NFVPERF_TAG=t1 /usr/bin/nfvperf-tgen --x '\"'\"'a b'\"'\"'" in start
    assert (tmp_path / "out").read_text() == '{"ready": true}\n'
    assert (tmp_path / "log").read_text() == "warn\n"
    with pytest.raises(ValueError, match="no network namespaces"):
        h.wrap(["x"], netns="ns1")
    with pytest.raises(ValueError, match="environment variable name"):
        env_prefix({"A-B": "1"})
    with pytest.raises(OSError, match="reads no stdin but a terminal"):
        h.popen(["x"], stdin=5)


def test_guest_host_files():
    g = FakeGuest([("test -e /there", (0, "")), ("test -e", (1, "")),
                   ("cat /sys/x", (0, "@@B\nDRIVER=uio_pci_generic\n@@E")),
                   ("ls -1", (0, "0000:00:04.0\n0000:00:05.0\n0000:00:00.0"))])
    h = P.GuestPciHost(g)   # type: ignore[arg-type]
    assert h.exists("/there") and not h.exists("/gone")
    assert h.read_text("/sys/x") == "\nDRIVER=uio_pci_generic\n"
    assert h.glob("/sys/bus/pci/devices", "0000:00:0[45].0") == [
        "/sys/bus/pci/devices/0000:00:04.0", "/sys/bus/pci/devices/0000:00:05.0"]
    assert h.environment({"A": "1"}) == {"A": "1"}


def test_testbed_nic_preflight_refuses_an_address_that_is_not_a_nic():
    from nfvperf.testbed.hosts import nic_pci_checks
    from nfvperf.testbed.spec import HostSpec

    class Host:
        files = {"/sys/bus/pci/devices/0000:00:00.0/class": "0x060000\n",
                 "/sys/bus/pci/devices/0000:00:04.0/class": "0x020000\n",
                 "/sys/bus/pci/devices/0000:00:04.0/uevent": "DRIVER=uio_pci_generic\n"}

        def exists(self, p):
            return any(f.startswith(p + "/") or f == p for f in self.files)

        def read_text(self, p):
            if p not in self.files:
                raise FileNotFoundError(p)
            return self.files[p]

    spec = HostSpec(role="tester", local=True, nics=[
        {"name": "br", "pci": "0000:00:00.0", "driver": "uio_pci_generic"},
        {"name": "p0", "pci": "0000:00:04.0", "driver": "uio_pci_generic"}])
    rows = {r.check: r for r in nic_pci_checks("t", spec, Host(), "pci", ["t.br", "t.p0"])}
    br = rows["pci:br"]
    assert br.status == "fail" and br.required
    assert "hosts.t.nics.br.pci: 0000:00:00.0 on host t is not a network device (PCI class 0x060000" \
        in br.detail
    assert "hosts.t.nics.br.pci" in br.fix and "lspci" in br.fix
    assert rows["pci:p0"].status == "ok"


def test_check_pci_reads_through_a_host_object():
    from nfvperf.host.preflight import check_pci

    class Host:
        files = {"/sys/bus/pci/devices/0000:00:00.0/class": "0x060000\n",
                 "/sys/bus/pci/devices/0000:00:04.0/class": "0x020000\n",
                 "/sys/bus/pci/devices/0000:00:04.0/uevent": "DRIVER=virtio-pci\nPCI_ID=1AF4:1000\n",
                 "/sys/bus/pci/devices/0000:00:05.0/class": "0x020000\n",
                 "/sys/bus/pci/devices/0000:00:05.0/uevent": "DRIVER=uio_pci_generic\n",
                 "/sys/bus/pci/devices/0000:00:06.0/class": "0x020000\n",
                 "/sys/bus/pci/devices/0000:00:06.0/uevent": "PCI_ID=1AF4:1000\n"}

        def exists(self, p):
            return any(f.startswith(p + "/") for f in self.files)

        def read_text(self, p):
            if p not in self.files:
                raise FileNotFoundError(p)
            return self.files[p]

    h = Host()
    c = {a: check_pci(a, host=h) for a in ("0000:00:00.0", "00:04.0", "0000:00:05.0",
                                            "0000:00:06.0", "0000:00:1f.6")}
    assert c["0000:00:00.0"].status == "fail" and "not a network device (PCI class 0x060000" in \
        c["0000:00:00.0"].detail and "topology.pci (`lspci" in c["0000:00:00.0"].fix
    assert c["00:04.0"].status == "fail" and "driver virtio-pci" in c["00:04.0"].detail
    assert "dpdk-devbind.py --bind=vfio-pci 0000:00:04.0" in c["00:04.0"].fix
    assert c["0000:00:05.0"].status == "ok" and "driver uio_pci_generic" in c["0000:00:05.0"].detail
    assert c["0000:00:06.0"].status == "fail" and "driver (none)" in c["0000:00:06.0"].detail
    assert c["0000:00:1f.6"].status == "fail" and "no PCI device 0000:00:1f.6" in c["0000:00:1f.6"].detail


def test_cpu_lists_of_a_debian_12_kernel():
    """Read from the emulated-PCI guest (Debian's 6.1 kernel, booted without nohz_full=): its
    /sys/devices/system/cpu/nohz_full says '(null)', which stopped the CPU plan of a remote host."""
    from nfvperf.host.cpu import parse_cpulist
    assert parse_cpulist("(null)\n") == []
    assert parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    with pytest.raises(ValueError):
        parse_cpulist("x")
