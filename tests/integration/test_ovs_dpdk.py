"""OVS-DPDK adapter on veth: comes up in the run dir, ports, flows, traffic, counters, teardown.

Kernel-side traffic only (raw AF_PACKET sockets in namespaces), so this runs without tgen.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.root

if os.geteuid() != 0 or not os.path.exists("/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"):
    pytest.skip("needs root and openvswitch-switch-dpdk", allow_module_level=True)

from nfvperf.dut.base import AfPacketIf, Flow, PortRef  # noqa: E402
from nfvperf.dut.ovs_dpdk import OvsDpdk  # noqa: E402
from nfvperf.host.run import ResourceTracker, RunContext  # noqa: E402
from nfvperf.trial import DutFailure  # noqa: E402
from nfvperf.topo.spec import OvsSpec  # noqa: E402

MAGIC = b"NFVPERF-OVS-TEST"

# Sends `count` IPv4/UDP frames with src/dst IPs cycling over `nflows` flows; or receives and counts
# frames carrying MAGIC for `secs` seconds (prints the count and the distinct source IPs).
_HELPER = textwrap.dedent(r'''
    import socket, struct, sys, time
    mode, iface = sys.argv[1], sys.argv[2]
    MAGIC = b"NFVPERF-OVS-TEST"
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind((iface, 0))
    if mode == "tx":
        count, nflows, src, dst = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
        dmac = bytes.fromhex(sys.argv[7].replace(":", ""))
        smac = s.getsockname()[4]
        sb, db = struct.unpack("!I", socket.inet_aton(src))[0], struct.unpack("!I", socket.inet_aton(dst))[0]
        for i in range(count):
            f = i % nflows
            payload = MAGIC + struct.pack("!I", i)
            udp = struct.pack("!HHHH", 1234, 5678, 8 + len(payload), 0) + payload
            ip = struct.pack("!BBHHHBBHII", 0x45, 0, 20 + len(udp), i & 0xffff, 0, 64, 17, 0, sb + f, db + f)
            s.send(dmac + smac + b"\x08\x00" + ip + udp)
            if i % 20 == 19:
                time.sleep(0.002)
    else:
        secs = float(sys.argv[3])
        s.settimeout(0.2)
        n, srcs, end = 0, set(), time.time() + secs
        while time.time() < end:
            try:
                data, addr = s.recvfrom(2048)
            except socket.timeout:
                continue
            if addr[2] == socket.PACKET_OUTGOING:
                continue
            if MAGIC in data:
                n += 1
                srcs.add(socket.inet_ntoa(data[26:30]))
        print(n, len(srcs))
''')


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


class Net:
    """Two client namespaces (a, b), each with a veth whose other end sits in OVS's namespace."""

    def __init__(self, run: RunContext) -> None:
        self.ovs_ns = run.netns("dut")
        self.ns = {"a": run.netns("a"), "b": run.netns("b")}
        self.dut_if = {"a": run.ifname("d0"), "b": run.ifname("d1")}
        self.cli_if = {"a": run.ifname("p0"), "b": run.ifname("p1")}
        _ip("netns", "add", self.ovs_ns)
        _ip("-n", self.ovs_ns, "link", "set", "lo", "up")
        for k in "ab":
            _ip("netns", "add", self.ns[k])
            _ip("link", "add", self.dut_if[k], "netns", self.ovs_ns, "type", "veth",
                "peer", "name", self.cli_if[k], "netns", self.ns[k])
            _ip("-n", self.ovs_ns, "link", "set", self.dut_if[k], "up")
            _ip("-n", self.ns[k], "link", "set", self.cli_if[k], "up")

    def mac(self, k: str) -> str:
        out = subprocess.run(["ip", "-n", self.ns[k], "-br", "link", "show", self.cli_if[k]],
                             capture_output=True, text=True, check=True).stdout.split()
        return out[2]

    def delete(self) -> None:
        for ns in [*self.ns.values(), self.ovs_ns]:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def send_and_count(net: Net, tx: str, rx: str, count: int, nflows: int = 1,
                   src: str = "198.18.0.1", dst: str = "198.19.0.1", secs: float = 3.0) -> tuple[int, int]:
    recv = subprocess.Popen(["ip", "netns", "exec", net.ns[rx], sys.executable, "-c", _HELPER,
                             "rx", net.cli_if[rx], str(secs)], stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    subprocess.run(["ip", "netns", "exec", net.ns[tx], sys.executable, "-c", _HELPER, "tx",
                    net.cli_if[tx], str(count), str(nflows), src, dst, net.mac(rx)], check=True)
    out, _ = recv.communicate(timeout=secs + 10)
    n, nsrc = out.split()
    return int(n), int(nsrc)


@pytest.fixture
def run(run_ctx) -> RunContext:
    """conftest's RunContext: its leak_check asserts the test left nothing of the run behind."""
    return run_ctx


@pytest.fixture
def net(run: RunContext):
    n = Net(run)
    yield n
    n.delete()


@pytest.fixture
def ovs(run: RunContext, net: Net):
    spec = OvsSpec(socket_mem_mb=512, emc_insert_inv_prob=1, smc_enable=True)
    tracker = ResourceTracker(install_signal_handlers=False)
    sw = OvsDpdk(run, tracker, spec=spec)
    for i, k in enumerate("ab"):
        sw.add_port(PortRef(f"p{i}", AfPacketIf(), ifname=net.dut_if[k], netns=net.ovs_ns))
    sw.start()
    yield sw
    sw.stop()
    # left for the end of the run: only the /tmp fallback dir (VNF sockets may live there)
    assert {kind for kind, _ in tracker.items()} <= {"dir"}
    tracker.release_all()
    assert not sw._own_dir or not sw.dir.exists()


def _no_leftovers(sw: OvsDpdk, pids: dict[str, int]) -> None:
    for name, pid in pids.items():
        assert not Path(f"/proc/{pid}").exists() or \
            Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z", f"{name} still running"
    socks = [p for p in sw.dir.glob("*") if p.is_socket()] if sw.dir.exists() else []
    assert socks == []
    assert list(Path("/dev/hugepages").glob(f"{sw.file_prefix}*")) == []
    assert not Path(f"/var/run/dpdk/{sw.file_prefix}").exists()
    out = subprocess.run(["pgrep", "-f", sw.file_prefix], capture_output=True, text=True).stdout
    assert out.strip() == ""


def test_up_ports_flows_traffic_stats_stop(ovs: OvsDpdk, net: Net) -> None:
    assert ovs.version().startswith("3.") and "DPDK" in ovs.version()
    assert ovs.netns == net.ovs_ns
    assert str(ovs.dir).startswith(f"/tmp/{ovs.tag}") or str(ovs.dir).startswith(str(ovs.run_dir))
    assert (ovs.ofport(0), ovs.ofport(1)) == (1, 2)
    ovs.program()      # default: cross-connect, as the seed reports
    flows = ovs.dump_flows()
    assert sorted((f["match"], f["actions"]) for f in flows) == [
        ("ip,in_port=1", "output:2"), ("ip,in_port=2", "output:1")]
    cfg = ovs.environment()["other_config"]
    assert cfg["dpdk-init"] == "true" and cfg["emc-insert-inv-prob"] == "1"
    assert "--file-prefix=" + ovs.file_prefix in cfg["dpdk-extra"]

    send_and_count(net, "a", "b", 5, secs=1)          # warm-up: datapath flows installed
    send_and_count(net, "b", "a", 5, secs=1)
    before = {(f["match"]): f["n_packets"] for f in ovs.dump_flows()}
    pmd_before = ovs.counters()["pmd"]["total"]["packets_received"]
    n, _ = send_and_count(net, "a", "b", 300)
    m, _ = send_and_count(net, "b", "a", 200)
    assert (n, m) == (300, 200)
    c = ovs.counters()
    assert c["ports"]["p0"]["rx_packets"] >= 300 and c["ports"]["p1"]["tx_packets"] >= 300
    assert c["ports"]["p1"]["rx_packets"] >= 200 and c["ports"]["p0"]["tx_packets"] >= 200
    tot = c["pmd"]["total"]
    assert tot["packets_received"] - pmd_before >= 500       # OVS counters are cumulative
    classified = sum(v for k, v in tot.items() if k.endswith("_hits")) + tot["miss_with_success_upcall"]
    assert classified >= 500, tot
    assert tot["avg_processing_cycles_per_packet"] > 0
    hits = {(f["match"]): f["n_packets"] for f in ovs.dump_flows()}
    assert hits["ip,in_port=1"] - before["ip,in_port=1"] == 300
    assert hits["ip,in_port=2"] - before["ip,in_port=2"] == 200

    pids = ovs.pids()
    ovs.stop()
    _no_leftovers(ovs, pids)


def test_rule_complexity(ovs: OvsDpdk, net: Net) -> None:
    n_rules = 256
    import ipaddress
    s0, d0 = ipaddress.ip_address("198.18.0.1"), ipaddress.ip_address("198.19.0.1")
    flows = [(str(s0 + i), str(d0 + i)) for i in range(n_rules)]
    ovs.program([Flow(0, 1, {"src_ip": s, "dst_ip": d}) for s, d in flows])
    dumped = ovs.dump_flows()
    assert len(dumped) == n_rules
    # only the first 64 flows are sent: 64 rules hit, the rest stay at 0.  A warm-up frame per
    # flow first: OVS may drop a flow's first frames while its datapath flow is being installed.
    send_and_count(net, "a", "b", 64, nflows=64, secs=1)
    n, nsrc = send_and_count(net, "a", "b", 640, nflows=64)
    assert (n, nsrc) == (640, 64)
    hit = [f for f in ovs.dump_flows() if f["n_packets"]]
    assert len(hit) == 64 and all(10 <= f["n_packets"] <= 11 for f in hit)
    # traffic outside the rules is dropped (no catch-all)
    n, _ = send_and_count(net, "a", "b", 50, src="10.1.0.1", dst="10.2.0.1", secs=2)
    assert n == 0


def test_kill_vswitchd_alive_raises(ovs: OvsDpdk, net: Net) -> None:
    ovs.alive()
    pids = ovs.pids()
    os.kill(pids["ovs-vswitchd"], signal.SIGKILL)
    t0 = time.monotonic()
    with pytest.raises(DutFailure, match="ovs-vswitchd"):
        while time.monotonic() - t0 < 5:
            ovs.alive()
            time.sleep(0.1)
    assert time.monotonic() - t0 < 3
    ovs.stop()
    _no_leftovers(ovs, pids)


def test_attach_to_running_ovs(run: RunContext, net: Net, tmp_path: Path) -> None:
    """spec.existing_db: only our bridge is added to (and removed from) an OVS someone else runs."""
    host_tracker = ResourceTracker(install_signal_handlers=False)
    host = OvsDpdk(run, host_tracker, spec=OvsSpec(socket_mem_mb=512), netns=net.ovs_ns)
    host.start()
    try:
        other = RunContext(run_dir=tmp_path / "other")
        tracker = ResourceTracker(install_signal_handlers=False)
        guest = OvsDpdk(other, tracker, spec=OvsSpec(existing_db=str(host.db_sock)))
        assert guest.ctl == host.ctl
        for i, k in enumerate("ab"):
            guest.add_port(PortRef(f"g{i}", AfPacketIf(), ifname=net.dut_if[k], netns=net.ovs_ns))
        guest.start()
        try:
            assert f"{other.tag}br0" in host.vsctl("list-br").split()
            devargs = host.vsctl("get", "Interface", "g0", "options:dpdk-devargs").strip('"\n')
            assert devargs.startswith(f"net_af_packet{other.tag}0,")
            guest.program()
            send_and_count(net, "a", "b", 5, secs=1)
            n, _ = send_and_count(net, "a", "b", 100)
            assert n == 100
            assert guest.pids() == {} and guest.counters()["ports"]["g0"]["rx_packets"] >= 100
        finally:
            guest.stop()
        assert host.vsctl("list-br").split() == host.bridges   # the host keeps its own bridge
        host.alive()
        assert {kind for kind, _ in tracker.items()} <= {"dir"}
        tracker.release_all()
    finally:
        host.stop()
