"""DUT adapters on veth pairs: Linux bridge, dpdk-testpmd (io, mac), testpmd as a vhost-user VNF.

Frames come from AF_PACKET sockets (the ``raw_port`` fixture) or ping, so these tests do not need
tgen.  Each leaves nothing behind (``run_ctx`` -> ``leak_check``).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nfvperf.dut.base import DutFailure, Flow, PciNic, PortRef, Unsupported, VhostBackend, create_dut
from nfvperf.dut.testpmd import Testpmd, TestpmdVnf
from nfvperf.host import netns as N

pytestmark = pytest.mark.root

needs_testpmd = pytest.mark.skipif(not shutil.which("dpdk-testpmd"), reason="dpdk-testpmd not installed")


UDP_ECHO_SERVER = """
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("10.77.0.2", 9999))
print("listening", flush=True)
while True:
    data, addr = s.recvfrom(2048)
    s.sendto(data, addr)
"""

UDP_ECHO_CLIENT = """
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
ok = 0
for i in range(3):
    s.sendto(b"echo%d" % i, ("10.77.0.2", 9999))
    try:
        if s.recvfrom(2048)[0] == b"echo%d" % i:
            ok += 1
    except socket.timeout:
        pass
print(ok)
"""


def _veth_ports(run, n=2, dut_ns=None):
    """n veth pairs: <tag>p<i> in the root namespace, <tag>d<i> in the DUT namespace."""
    t = run.tracker
    dut_ns = dut_ns or N.create_netns(run.netns("dut"), t)
    refs = []
    for i in range(n):
        N.create_veth(run.ifname(f"p{i}"), run.ifname(f"d{i}"), None, dut_ns, tracker=t,
                      mac_a=f"02:00:00:aa:00:{i:02x}")
        refs.append(PortRef(f"phy{i}", ifname=run.ifname(f"d{i}"), netns=dut_ns))
    return dut_ns, refs


def test_linux_bridge_forwards_between_two_hosts(run_ctx):
    """h0 (10.77.0.1) -- bridge in the DUT netns -- h1 (10.77.0.2): ping passes, counters move."""
    t = run_ctx.tracker
    dut_ns = N.create_netns(run_ctx.netns("dut"), t)
    hosts = []
    refs = []
    for i in range(2):
        h = N.create_netns(run_ctx.netns(f"h{i}"), t)
        N.create_veth(run_ctx.ifname(f"p{i}"), run_ctx.ifname(f"d{i}"), h, dut_ns, tracker=t)
        N.add_address(run_ctx.ifname(f"p{i}"), f"10.77.0.{i + 1}/24", h)
        hosts.append(h)
        refs.append(PortRef(f"phy{i}", ifname=run_ctx.ifname(f"d{i}"), netns=dut_ns))
    br = create_dut("linux-bridge", run_ctx, t, netns=dut_ns)
    for r in refs:
        br.add_port(r)
    br.start()
    br.program(None)
    before = br.counters()
    # UDP echo h0 -> h1 -> h0 through the bridge (ping is not always installed)
    server = subprocess.Popen(N.netns_argv(hosts[1], [sys.executable, "-c", UDP_ECHO_SERVER]),
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "listening"
        cp = N.run_in_netns(hosts[0], [sys.executable, "-c", UDP_ECHO_CLIENT], check=False)
        assert cp.returncode == 0 and cp.stdout.strip() == "3", cp.stdout + cp.stderr
    finally:
        server.kill()
        server.wait()
    after = br.counters()
    assert after["ports"]["phy0"]["rx_packets"] >= before["ports"]["phy0"]["rx_packets"] + 3
    assert after["ports"]["phy1"]["tx_packets"] >= before["ports"]["phy1"]["tx_packets"] + 3
    # static FDB programming
    mac1 = N.link_mac(run_ctx.ifname("p1"), hosts[1])
    br.program([Flow(0, 1, {"dst_mac": mac1})])
    assert any(mac1 in line and "static" in line for line in br.fdb())
    env = br.environment()
    assert env["dut"] == "linux-bridge" and env["bridges"]
    br.alive()
    br.stop()
    with pytest.raises(DutFailure):
        br.alive()


@needs_testpmd
def test_testpmd_io_forwarding_counts_match(run_ctx, raw_port):
    dut_ns, refs = _veth_ports(run_ctx)
    pmd = Testpmd(run_ctx, run_ctx.tracker, cpus=[1], netns=dut_ns, forward_mode="io",
                  lcores="0@0,1@1")
    for r in refs:
        pmd.add_port(r)
    pmd.start()
    assert pmd.version().startswith("DPDK")
    with pytest.raises(Unsupported):
        pmd.program([Flow(0, 0)])
    pmd.program(None)
    p0, p1 = raw_port(run_ctx.ifname("p0")), raw_port(run_ctx.ifname("p1"))
    # warm-up until the forwarding path is up, then exact counts
    p0.send(1, sig=b"WARM")
    assert p1.receive(sig=b"WARM", wait_s=5, want=1)
    pmd.clear_counters()
    n0, n1 = 300, 200
    p0.send(n0, sig=b"AtoB", gap_s=0.0002)
    p1.send(n1, sig=b"BtoA", gap_s=0.0002)
    got1 = p1.receive(sig=b"AtoB", wait_s=3, want=n0)
    got0 = p0.receive(sig=b"BtoA", wait_s=3, want=n1)
    assert len(got1) == n0 and len(got0) == n1
    c = pmd.counters()
    assert c["ports"]["phy0"]["rx_packets"] == n0 and c["ports"]["phy1"]["tx_packets"] == n0
    assert c["ports"]["phy1"]["rx_packets"] == n1 and c["ports"]["phy0"]["tx_packets"] == n1
    assert c["total"]["rx_dropped"] == 0
    assert got1[0][0:12] == bytes.fromhex("020000000002" "020000000001")  # io: MACs untouched
    pmd.stop()
    pmd.stop()     # idempotent


@needs_testpmd
def test_testpmd_mac_mode_rewrites_macs(run_ctx, raw_port):
    dut_ns, refs = _veth_ports(run_ctx)
    peer1 = "02:00:00:bb:00:01"
    pmd = Testpmd(run_ctx, run_ctx.tracker, netns=dut_ns, forward_mode="mac",
                  eth_peers=["02:00:00:bb:00:00", peer1], lcores="0@0,1@1", memory="in-memory")
    for r in refs:
        pmd.add_port(r)
    pmd.start()
    p0, p1 = raw_port(run_ctx.ifname("p0")), raw_port(run_ctx.ifname("p1"))
    p0.send(5, sig=b"MACM", gap_s=0.01)
    got = p1.receive(sig=b"MACM", wait_s=5, want=5)
    assert got, "no frames forwarded"
    assert got[0][0:6] == bytes.fromhex(peer1.replace(":", ""))          # dst = eth-peer of port 1
    assert got[0][6:12] == bytes.fromhex(pmd.port_macs[1].replace(":", ""))  # src = port 1's MAC


def _proc_state(pid: int):
    """The kernel's state letter of ``pid`` (``/proc/<pid>/stat``), None once it is reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


@needs_testpmd
def test_testpmd_alive_raises_promptly_after_kill9(run_ctx):
    dut_ns, refs = _veth_ports(run_ctx)
    pmd = Testpmd(run_ctx, run_ctx.tracker, netns=dut_ns, lcores="0@0,1@1")
    for r in refs:
        pmd.add_port(r)
    pmd.start()
    pmd.alive()
    pid = pmd.proc.pid
    os.kill(pid, signal.SIGKILL)
    # "promptly" is nfvperf's part, timed from when the kernel has killed the process (a zombie,
    # or reaped): how long the kernel takes to tear down a DPDK process's hugepage mappings is a
    # loaded host's business, not the adapter's (it made the old bound from the kill flaky)
    t0 = time.monotonic()
    while _proc_state(pid) not in ("Z", None):
        assert time.monotonic() - t0 < 10, f"testpmd {pid} did not die of SIGKILL in 10 s"
        time.sleep(0.005)
    dead = time.monotonic()
    with pytest.raises(DutFailure) as ei:
        while time.monotonic() - dead < 2:
            pmd.alive()
            time.sleep(0.01)
    assert time.monotonic() - dead < 0.5, f"alive() raised {time.monotonic() - dead:.2f} s after the process died"
    assert "signal 9" in str(ei.value)
    with pytest.raises(DutFailure):
        pmd.counters()
    pmd.stop()      # releases the hugepage files the killed process left


@needs_testpmd
def test_testpmd_vnf_on_vhost_user(run_ctx, raw_port):
    """p0 -> d0 -> [testpmd 'switch': d0<->vhost0, vhost1<->d1] -> TestpmdVnf (virtio-user) -> p1."""
    dut_ns, refs = _veth_ports(run_ctx)
    socks = [run_ctx.path(f"vhu{i}.sock") for i in range(2)]
    sw = Testpmd(run_ctx, run_ctx.tracker, netns=dut_ns, lcores="0@0,1@1")
    sw.add_port(refs[0])
    sw.add_port(PortRef("vhost0", VhostBackend(), socket=socks[0]))
    sw.add_port(PortRef("vhost1", VhostBackend(), socket=socks[1]))
    sw.add_port(refs[1])
    sw.start()
    vnf = TestpmdVnf(run_ctx, run_ctx.tracker, sockets=socks, server=False, name="vnf0",
                     lcores="0@0,1@0")
    vnf.start()
    p0, p1 = raw_port(run_ctx.ifname("p0")), raw_port(run_ctx.ifname("p1"))
    deadline = time.monotonic() + 10
    got = []
    while not got and time.monotonic() < deadline:       # virtio link comes up asynchronously
        p0.send(1, sig=b"WARM")
        got = p1.receive(sig=b"WARM", wait_s=0.3, want=1)
    assert got, "nothing came through the VNF"
    vnf.clear_counters()
    p0.send(50, sig=b"VNFC", gap_s=0.001)
    assert len(p1.receive(sig=b"VNFC", wait_s=3, want=50)) == 50
    c = vnf.counters()
    assert c["vnf"] == "vnf0"
    assert c["ports"]["vnf0-vhu0"]["rx_packets"] == 50 and c["ports"]["vnf0-vhu1"]["tx_packets"] == 50
    assert vnf.environment()["sockets"] == [str(s) for s in socks]
    vnf.stop()
    sw.stop()


def test_testpmd_argv_for_pci_and_vhost_ports(run_ctx):
    """Real NICs go to EAL as -a <addr> (and --no-pci is dropped); vhost ports get
    --single-file-segments; mac mode gets --eth-peer per port."""
    pmd = Testpmd(run_ctx, run_ctx.tracker, forward_mode="mac", lcores="0@0,1@1",
                  eth_peers=["02:00:00:00:00:0a", "02:00:00:00:00:0b"])
    pmd.add_port(PortRef("phy0", PciNic(), pci="0000:3b:00.0"))
    pmd.add_port(PortRef("phy1", PciNic(), pci="0000:3b:00.1"))
    argv = pmd.argv()
    assert argv[argv.index("-a") + 1] == "0000:3b:00.0" and "--no-pci" not in argv
    assert "--eth-peer=1,02:00:00:00:00:0b" in argv
    assert "--file-prefix" in argv and argv[argv.index("--file-prefix") + 1].startswith(run_ctx.tag)
    vnf = TestpmdVnf(run_ctx, run_ctx.tracker, sockets=["/tmp/a.sock", "/tmp/b.sock"], server=True)
    argv = vnf.argv()
    assert "--single-file-segments" in argv and "--no-pci" in argv
    assert "net_virtio_user0,path=/tmp/a.sock,queues=1,server=1" in argv
    assert argv[argv.index("--file-prefix") + 1] == f"{run_ctx.tag}vnf0"


def test_testpmd_vnf_queue_size(run_ctx):
    """queue_size is an option of TestpmdVnf: DPDK's default (no devarg) unless given, or taken
    from the spec's testpmd.vnf_queue_size (1024 by default); anything but a power of two in
    64..4096 is refused, by the adapter and by the spec."""
    from pydantic import ValidationError

    from nfvperf.topo.spec import TopologySpec
    socks = ["/tmp/a.sock", "/tmp/b.sock"]
    vnf = TestpmdVnf(run_ctx, run_ctx.tracker, sockets=socks, server=True)
    assert vnf.queue_size is None and not any("queue_size" in a for a in vnf.argv())
    assert vnf.environment()["queue_size"] == 256
    vnf = TestpmdVnf(run_ctx, run_ctx.tracker, sockets=socks, server=True, queue_size=1024)
    assert "net_virtio_user1,path=/tmp/b.sock,queues=1,server=1,queue_size=1024" in vnf.argv()
    assert vnf.environment()["queue_size"] == 1024
    spec = TopologySpec(kind="pvp")
    assert spec.testpmd.vnf_queue_size == 1024
    vnf = TestpmdVnf(run_ctx, run_ctx.tracker, sockets=socks, server=False, spec=spec)
    assert "net_virtio_user0,path=/tmp/a.sock,queues=1,queue_size=1024" in vnf.argv()
    spec = TopologySpec(kind="pvp", testpmd={"vnf_queue_size": 512})
    vnf = TestpmdVnf(run_ctx, run_ctx.tracker, sockets=socks, spec=spec)
    assert vnf.queue_size == 512
    vnf = TestpmdVnf(run_ctx, run_ctx.tracker, sockets=socks, spec=spec, queue_size=2048)
    assert vnf.queue_size == 2048          # an explicit argument wins over the spec
    for bad in (1000, 32, 8192, 0):
        with pytest.raises(ValueError):
            TestpmdVnf(run_ctx, run_ctx.tracker, sockets=socks, queue_size=bad)
        with pytest.raises(ValidationError):
            TopologySpec(kind="pvp", testpmd={"vnf_queue_size": bad})
