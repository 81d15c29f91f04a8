"""The ends of a port build their own device arguments (issue 18 item 2): DPDK's, OVS-DPDK's
Interface and a kernel DUT's interface; no adapter compares a port-kind string."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from nfvperf.dut.base import PortRef, Unsupported, eal_port_options
from nfvperf.dut.port_end import AfPacketIf, AfXdpIf, KernelIf, MemifEnd, PciNic, VhostBackend, VhostFrontend

SRC = Path(__file__).resolve().parents[2] / "src" / "nfvperf"
SOCK = Path("/run/nfvperf/t/t-vhu0.sock")


def test_each_end_builds_its_dpdk_device_argument() -> None:
    assert PortRef("a", AfPacketIf(), ifname="v0").dpdk_devargs(3, 2) == (
        "net_af_packet3,iface=v0,qpairs=2,blocksz=4096,framesz=2048,framecnt=1024,qdisc_bypass=1")
    assert "framesz=16384" in PortRef("a", AfPacketIf(), ifname="v0", mtu=9000).dpdk_devargs(0)
    assert PortRef("a", AfXdpIf(), ifname="v0").dpdk_devargs(1, 1) == (
        "net_af_xdp1,iface=v0,start_queue=0,queue_count=1")
    assert PortRef("a", PciNic(), pci="0000:03:00.0").dpdk_devargs(0) == "0000:03:00.0"
    assert PortRef("a", VhostFrontend(server=True, queue_size=4096), socket=SOCK,
                   mac="02:00:00:00:00:01").dpdk_devargs(1) == (
        f"net_virtio_user1,path={SOCK},queues=1,server=1,queue_size=4096,mac=02:00:00:00:00:01")
    assert PortRef("a", VhostBackend(), socket=SOCK).dpdk_devargs(0, 4) == (
        f"net_vhost0,iface={SOCK},queues=4,client=0")
    assert PortRef("a", MemifEnd("client"), socket=SOCK).dpdk_devargs(2) == (
        f"net_memif2,role=client,socket={SOCK},socket-abstract=no,id=0")
    assert PortRef("a", MemifEnd("client", zero_copy=True), socket=SOCK).dpdk_devargs(0) == (
        f"net_memif0,role=client,socket={SOCK},socket-abstract=no,id=0,zero-copy=yes")
    with pytest.raises(ValueError, match="zero_copy is a client's"):
        MemifEnd("server", zero_copy=True)


def test_eal_options_follow_the_ends() -> None:
    pci, veth = PortRef("a", PciNic(), pci="0000:03:00.0"), PortRef("b", AfPacketIf(), ifname="v0")
    assert pci.eal_args("x") == ["-a", "x"] and veth.eal_args("y") == ["--vdev", "y"]
    assert eal_port_options([veth]) == ["--no-pci"]
    assert eal_port_options([pci, PortRef("c", VhostBackend(client=True), socket=SOCK)]) == [
        "--single-file-segments"]


def test_ovs_interfaces_and_the_refused_server_backend() -> None:
    veth = PortRef("p", AfPacketIf(), ifname="v0")
    assert veth.end.ovs_interface(veth, 0, 1) == ("dpdk", {"devargs": veth.dpdk_devargs(0)})
    fe = PortRef("vnf", VhostFrontend(), socket=SOCK)
    assert fe.end.ovs_interface(fe, 0, 1) == ("dpdkvhostuserclient", {"sock": str(SOCK)})
    be = PortRef("g", VhostBackend(client=True), socket=SOCK)
    assert be.end.ovs_interface(be, 0, 1) == ("dpdkvhostuserclient", {"sock": str(SOCK)})
    server = PortRef("g", VhostBackend(), socket=SOCK)
    with pytest.raises(Unsupported, match="vhost-user server"):
        server.end.ovs_interface(server, 0, 1)


def test_kernel_duts_get_an_interface_or_a_reason() -> None:
    assert AfPacketIf().kernel_ifname(PortRef("p", ifname="v0"), "linux-bridge") == "v0"
    with pytest.raises(Unsupported, match="linux-bridge can only bridge kernel interfaces, not memif"):
        MemifEnd().kernel_ifname(PortRef("p", MemifEnd(), socket=SOCK), "linux-bridge")


def test_sockets_created_by_the_right_end_and_port_kind_names() -> None:
    assert [e.creates_socket() for e in (VhostBackend(), VhostBackend(client=True), VhostFrontend(),
                                          VhostFrontend(server=True), MemifEnd(), MemifEnd("client"),
                                          AfPacketIf(), PciNic())] == [
        True, False, False, True, True, False, False, False]
    assert [e.port_kind for e in (AfXdpIf(), VhostBackend(), MemifEnd(), PciNic())] == [
        "af_xdp", "vhost", "memif", "pci"]


def test_a_bad_driver_is_refused_with_the_field() -> None:
    with pytest.raises(ValueError, match="KernelIf.driver: 'vfio'"):
        KernelIf.of("vfio")
    with pytest.raises(TypeError, match="AfPacketIf and AfXdpIf"):
        KernelIf()


def test_af_packet_jumbo_refusal_is_the_ends() -> None:
    assert AfPacketIf().dpdk_mtu_refusal(PortRef("p", ifname="v0", mtu=9000)) is not None
    assert AfXdpIf().dpdk_mtu_refusal(PortRef("p", ifname="v0", mtu=9000)) is None
    assert AfPacketIf().dpdk_mtu_refusal(PortRef("p", ifname="v0", mtu=1500)) is None


def test_no_adapter_compares_a_port_kind_string() -> None:
    """The DUT adapters, VNFs and topologies ask a port's end; none compares ``.kind`` of a
    PortRef with a string (OVS's own Interface types, ``OvsPort.kind``, are not port kinds)."""
    pattern = re.compile(r"""\b(?:p|port)\.kind\s*(?:==|!=|in\b|not in\b)\s*[("']""")
    files = [*SRC.glob("dut/*.py"), *SRC.glob("vm/*.py"), *SRC.glob("topo/*.py")]
    found = [f"{f.relative_to(SRC)}:{i}: {line.strip()}" for f in files
             for i, line in enumerate(f.read_text().splitlines(), 1)
             if pattern.search(line) and '"dpdk"' not in line]
    assert found == []
