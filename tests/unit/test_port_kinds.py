"""Port kinds (nfvperf.topo.ports): registered like adapters, each gives both ends of a port,
and bad pairings are refused at validation with the field and the reason."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from nfvperf.config import SuiteError
from nfvperf.suite_load import validate_suite
from nfvperf.dut.testpmd import mbuf_size_for
from nfvperf.host.run import RunContext
from nfvperf.topo import build
from nfvperf.topo.base import TopologyError
from nfvperf.dut.port_end import VhostBackend
from nfvperf.topo.ports import HostPort, port_kind_class, port_kind_names
from nfvperf.topo.spec import TopologySpec, allowed_port_kinds


def test_registered_kinds_and_declarations():
    assert port_kind_names() == ["af_packet", "af_xdp", "vhost", "memif", "pci"]
    assert [k for k in port_kind_names() if port_kind_class(k).tcp] == ["af_packet", "af_xdp"]
    assert port_kind_class("vhost").max_mtu >= 9000
    assert "--single-file-segments" in port_kind_class("vhost").tgen_eal


def test_allowed_port_kinds_per_dut():
    assert allowed_port_kinds("p2p", "testpmd") == ["af_packet", "af_xdp", "vhost", "memif", "pci"]
    assert allowed_port_kinds("p2p", "linux-bridge") == ["af_packet", "af_xdp"]
    for kind in ("p-ovs-p", "pvp", "pvvp", "vxlan"):
        assert {"vhost", "memif"} <= set(allowed_port_kinds(kind, "ovs-dpdk"))


@pytest.mark.parametrize("pk", ["vhost", "memif"])
def test_linux_bridge_refuses_userspace_ports(pk):
    with pytest.raises(ValidationError) as ei:
        TopologySpec(kind="p2p", dut="linux-bridge", port_kind=pk)
    msg = str(ei.value)
    assert "port_kind" in msg and f"'{pk}'" in msg and "only DPDK DUTs" in msg
    assert "'af_packet' or 'af_xdp'" in msg


def test_unknown_port_kind_lists_the_registered_ones():
    with pytest.raises(ValidationError, match="'af_packet', 'af_xdp', 'vhost', 'memif' or 'pci'"):
        TopologySpec(kind="p-ovs-p", port_kind="tap")


def test_memif_mtu_refused_at_the_spec():
    with pytest.raises(ValidationError, match=r"mtu\n.*memif carries an MTU of at most 1500.*1518"):
        TopologySpec(kind="p2p", dut="testpmd", port_kind="memif", mtu=9000)
    assert TopologySpec(kind="p-ovs-p", port_kind="vhost", mtu=9000).mtu == 9000


def _suite(topology: dict, traffic: dict, tests: list | None = None) -> dict:
    return {"name": "t", "topology": topology, "traffic": traffic,
            "tests": tests or [{"method": "throughput"}]}


def test_generator_mtu_refused_for_tgen_tests_not_for_tcp():
    topo = {"kind": "p2p", "dut": "linux-bridge", "port_kind": "af_packet", "mtu": 9000}
    with pytest.raises(SuiteError) as ei:
        validate_suite(_suite(topo, {"frame_sizes": [64]}))
    assert "topology.mtu: port_kind af_packet carries an MTU of at most 1500" in str(ei.value)
    validate_suite(_suite(topo, {"frame_sizes": [64]}, [{"method": "tcp"}]))   # iperf3: kernel veth


TCP = [{"method": "tcp"}]      # iperf3 on the kernel veths: no tgen, so only the DUT's end limits


@pytest.mark.parametrize("kind,dut,pk,pmd", [
    ("p2p", "testpmd", "af_packet", "net_af_packet receives frames up to 1518 B"),
    ("p2p", "testpmd", "af_xdp", "net_af_xdp reports max_rx_pktlen 1514 B"),
    ("p-ovs-p", "ovs-dpdk", "af_packet", "net_af_packet receives frames up to 1518 B"),
    ("p-ovs-p", "ovs-dpdk", "af_xdp", "net_af_xdp reports max_rx_pktlen 1514 B"),
    ("pvp", "ovs-dpdk", "af_xdp", "net_af_xdp reports max_rx_pktlen 1514 B"),
])
def test_dpdk_dut_on_veth_refuses_jumbo_mtu_even_for_tcp(kind, dut, pk, pmd):
    """A DPDK DUT opens its veth ends with net_af_packet / net_af_xdp (DPDK 22.11: MTU 1500),
    so a TCP test, which needs no tgen, cannot use a jumbo MTU there either."""
    with pytest.raises(SuiteError) as ei:
        validate_suite(_suite({"kind": kind, "dut": dut, "port_kind": pk, "mtu": 9000},
                              {"frame_sizes": [64]}, TCP))
    msg = str(ei.value)
    assert (f"topology.mtu: dut {dut} opens its {pk} ports with DPDK, in TCP tests too (iperf3, no "
            f"tgen): port_kind {pk} carries an MTU of at most 1500 (DPDK 22.11 {pmd}") in msg, msg
    assert "jumbo frames need port_kind vhost (DPDK DUTs) or pci" in msg
    assert "mtu 9000 cannot work; lower topology.mtu to 1500 or less" in msg
    with pytest.raises(ValidationError, match=f"dut {dut} opens its {pk} ports with DPDK"):
        TopologySpec(kind=kind, dut=dut, port_kind=pk, mtu=1501)
    assert TopologySpec(kind=kind, dut=dut, port_kind=pk, mtu=1500).mtu == 1500


@pytest.mark.parametrize("kind,dut,pk", [("p2p", "linux-bridge", "af_packet"),
                                         ("p2p", "linux-bridge", "af_xdp"),
                                         ("p-ovs-p", "ovs-system", "af_packet")])
def test_kernel_dut_on_veth_carries_jumbo_for_tcp(kind, dut, pk):
    s = validate_suite(_suite({"kind": kind, "dut": dut, "port_kind": pk, "mtu": 9000},
                              {"frame_sizes": [64]}, TCP))
    assert s.tests[0].topology.mtu == 9000


@pytest.mark.parametrize("kind,dut", [("p-ovs-p", "ovs-dpdk"), ("p2p", "testpmd")])
def test_dpdk_dut_on_vhost_carries_jumbo(kind, dut):
    assert TopologySpec(kind=kind, dut=dut, port_kind="vhost", mtu=9000).mtu == 9000
    validate_suite(_suite({"kind": kind, "dut": dut, "port_kind": "vhost", "mtu": 9000},
                          {"frame_sizes": [64, 9018]}))


def test_study_and_test_overrides_of_mtu_or_port_kind_are_held_to_the_dut():
    topo = {"kind": "p2p", "dut": "testpmd", "port_kind": "af_packet"}
    study = {"method": "tcp", "name": "s", "study": {"axes": {"mtu": [1500, 9000]}}}
    with pytest.raises(SuiteError) as ei:
        validate_suite(_suite(topo, {"frame_sizes": [64]}, [study]))
    probs = ei.value.problems
    assert len(probs) == 1 and probs[0].startswith("tests[0].topology.mtu: dut testpmd opens its "
                                                   "af_packet ports with DPDK"), probs
    assert probs[0].endswith("(study unit s[mtu=9000])"), probs
    # the suite on vhost at 9000 is fine; a study axis moving it onto af_xdp is not
    jumbo = dict(topo, port_kind="vhost", mtu=9000)
    axis = {"method": "tcp", "name": "k", "study": {"axes": {"port_kind": ["af_xdp"]}}}
    with pytest.raises(SuiteError, match=r"tests\[0\]\.topology\.mtu: dut testpmd opens its af_xdp"):
        validate_suite(_suite(jumbo, {"frame_sizes": [64]}, [axis]))
    # a plain test override, and a dut override from the Linux bridge (fine) to testpmd
    lb = {"kind": "p2p", "dut": "linux-bridge", "port_kind": "af_packet", "mtu": 9000}
    validate_suite(_suite(lb, {"frame_sizes": [64]}, TCP))
    with pytest.raises(SuiteError, match=r"tests\[0\]\.topology\.mtu: dut testpmd opens its af_packet"):
        validate_suite(_suite(lb, {"frame_sizes": [64]},
                              [{"method": "tcp", "topology": {"dut": "testpmd"}}]))


def test_cli_validate_refuses_jumbo_on_a_dpdk_duts_veth(tmp_path, capsys):
    from nfvperf.cli import main
    suite = tmp_path / "suite.yaml"
    suite.write_text("name: t\ntopology: {kind: p2p, dut: testpmd, port_kind: af_packet, mtu: 9000}\n"
                     "traffic: {frame_sizes: [64]}\ntests: [{method: tcp}]\n")
    assert main(["validate", str(suite)]) == 2
    err = capsys.readouterr().err
    assert "topology.mtu: dut testpmd opens its af_packet ports with DPDK" in err
    assert "lower topology.mtu to 1500 or less" in err
    suite.write_text(suite.read_text().replace("testpmd", "linux-bridge"))
    assert main(["validate", str(suite)]) == 0


def test_frames_above_the_mtu_refused_with_the_field():
    topo = {"kind": "p-ovs-p", "port_kind": "vhost", "mtu": 1500}
    with pytest.raises(SuiteError) as ei:
        validate_suite(_suite(topo, {"frame_sizes": [64, 1518]},
                              [{"method": "throughput", "frame_sizes": [64, 9000]}]))
    msg = str(ei.value)
    assert "tests[0].frame_sizes: frames of 9000 B do not fit topology.mtu 1500" in msg
    assert "at least 8982" in msg
    validate_suite(_suite(dict(topo, mtu=9000), {"frame_sizes": [64, 9018]}))


def test_vxlan_frames_count_the_encapsulation():
    with pytest.raises(SuiteError, match=r"1518 B \(\+ VXLAN 50 B on the wire\) do not fit"):
        validate_suite(_suite({"kind": "vxlan", "port_kind": "vhost"},
                              {"frame_sizes": [64, 1518], "vxlan": True}))
    validate_suite(_suite({"kind": "vxlan", "port_kind": "vhost", "mtu": 1550},
                          {"frame_sizes": [64, 1518], "vxlan": True}))


def test_tcp_test_on_userspace_ports_refused():
    with pytest.raises(SuiteError, match="topology.port_kind: a tcp test runs iperf3 .* vhost"):
        validate_suite(_suite({"kind": "p-ovs-p", "port_kind": "vhost"}, {"frame_sizes": [64]},
                              [{"method": "tcp"}]))


def test_tcp_endpoints_refused_on_vhost(tmp_path):
    t = build(TopologySpec(kind="p-ovs-p", port_kind="vhost"), RunContext(run_dir=tmp_path))
    with pytest.raises(TopologyError, match="af_packet or af_xdp, not vhost"):
        t.tcp_endpoints()


@pytest.fixture
def run_root(tmp_path, monkeypatch):
    """The runtime root (/run/nfvperf) moved under tmp_path, for ports and for cleanup."""
    import nfvperf.host.cleanup as C
    import nfvperf.host.run as R
    root = tmp_path / "runroot"
    monkeypatch.setattr(R, "DEFAULT_RUN_ROOT", root)
    monkeypatch.setattr(C, "DEFAULT_RUN_ROOT", root)
    return root


def _topo(tmp_path: Path, kind: str) -> SimpleNamespace:
    spec = TopologySpec(kind="p-ovs-p", port_kind=kind)
    return SimpleNamespace(run=RunContext(tag="nfv00aa11", run_dir=tmp_path / "out"), tracker=None,
                           spec=spec, ports=[])


def test_vhost_ends(tmp_path, run_root):
    topo = _topo(tmp_path, "vhost")
    ports = port_kind_class("vhost")().create(topo, 2, dut_netns=None, tg_netns=None, mtu=9000)
    sock = run_root / "nfv00aa11" / "nfv00aa11-vhu1.sock"
    assert [p.index for p in topo.ports] == [0, 1] and ports[1].socket == sock
    tg = ports[1].tg_port_spec(1)
    assert tg.devargs == (f"net_virtio_user1,path={sock},queues=1,server=1,"
                          "queue_size=4096,mac=02:00:aa:11:a0:01") and tg.mtu == 9000
    # 4096-entry virtqueues and RX descriptors: the generator may be descheduled for ~1 ms at
    # 4 Mfps before OVS has to drop frames towards it (it did, with 1024)
    assert tg.rxd == 4096
    dut = ports[1].dut_portref()
    assert (dut.end, dut.socket, dut.mtu) == (VhostBackend(client=True), ports[1].socket, 9000)
    assert dut.dpdk_devargs(1) == f"net_vhost1,iface={sock},queues=1,client=1"


def test_memif_ends_and_rings(tmp_path, run_root):
    topo = _topo(tmp_path, "memif")
    (p,) = port_kind_class("memif")().create(topo, 1, dut_netns=None, tg_netns=None, mtu=1500)
    assert "role=client" in p.tg_port_spec(0).devargs and "socket-abstract=no" in p.tg_port_spec(0).devargs
    assert "role=server" in p.dut_portref().dpdk_devargs(0)
    # OVS sends on one TX queue per thread (PMDs + main): tgen polls as many memif rings
    assert p.tg_port_spec(0, dut_tx_queues=2).rx_queues == 2
    assert port_kind_class("vhost").tg_rx_queues(2) == 1


def test_cleanup_finds_a_killed_runs_port_socket(tmp_path, run_root):
    import socket

    from nfvperf.host.cleanup import _sockets_tagged
    topo = _topo(tmp_path, "memif")
    (p,) = port_kind_class("memif")().create(topo, 1, dut_netns=None, tg_netns=None, mtu=1500)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(p.socket))          # what a server left behind when its run was killed
    s.close()
    assert (p.socket, "nfv00aa11") in _sockets_tagged("nfv00aa11")


def test_long_runtime_root_puts_sockets_in_tmp(tmp_path, monkeypatch):
    import nfvperf.host.run as R
    monkeypatch.setattr(R, "DEFAULT_RUN_ROOT", tmp_path / ("d" * 90))
    (p,) = port_kind_class("vhost")().create(_topo(tmp_path, "vhost"), 1, dut_netns=None,
                                              tg_netns=None, mtu=1500)
    assert p.socket == Path("/tmp/nfvperf-nfv00aa11-vhu0.sock")


def test_hostport_without_kind_object_falls_back_to_its_family():
    hp = HostPort(0, "veth", tg_ifname="a", dut_ifname="b", driver="af_xdp")
    assert hp.tg_devargs().startswith("net_af_xdp0,iface=a") and hp.to_dict()["port_kind"] == "af_xdp"


def test_testpmd_mbuf_size_follows_the_mtu():
    assert mbuf_size_for(1500) == 2176 and mbuf_size_for(9000) == 9216 and mbuf_size_for(9216) == 9728


def test_af_packet_keeps_the_wire_mac_and_moves_the_kernels(tmp_path, monkeypatch):
    """tgen keeps tg_mac on the wire (PortSpec mac) and, right before it starts, the kernel end
    gets another address, so tgen's frames are not routed by the kernel; iperf3 never calls
    before_tgen, so TCP keeps the interface's address.  Testbed ports (no veth made here) are
    left alone, and the other kinds have no wire MAC of their own."""
    from nfvperf.topo.ports import veth as V
    calls = []
    monkeypatch.setattr(V.N, "set_link", lambda ifname, ns, **kw: calls.append((ifname, ns, kw)))
    kind = port_kind_class("af_packet")()
    made = HostPort(0, "veth", tg_ifname="nfvx0p0", tg_netns="nfvx0-tg", veth=object(),  # type: ignore[arg-type]
                    tg_mac="02:00:aa:11:a0:00", port_kind=kind)
    assert made.tg_port_spec(0).mac == "02:00:aa:11:a0:00"
    kind.before_tgen(made)
    assert calls == [("nfvx0p0", "nfvx0-tg", {"address": "02:00:aa:11:a1:00"})]
    assert V.kernel_mac("02:00:aa:11:a1:07") == "02:00:aa:11:a0:07"
    cabled = HostPort(1, "veth", tg_ifname="eth3", tg_mac="02:00:00:00:00:03", port_kind=kind)
    assert cabled.tg_port_spec(1).mac is None
    kind.before_tgen(cabled)
    assert len(calls) == 1
    xdp = HostPort(0, "veth", tg_ifname="nfvx0p0", veth=object(), tg_mac="02:00:aa:11:a0:00",  # type: ignore[arg-type]
                   driver="af_xdp")
    assert xdp.tg_port_spec(0).mac is None
