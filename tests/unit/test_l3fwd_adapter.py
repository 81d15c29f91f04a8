"""dut l3fwd without running it: the address plan and route files (LPM, exact match), the
options and what is refused before anything starts (naming the field), its command line (lcores,
--config as the seed wrote it, queue pairs per port kind, PCI port order), the generator's
streams and queue pairs, the telemetry client and counter mapping, config's per-test routes."""
from __future__ import annotations

import ipaddress
import json
import socket
import threading
from pathlib import Path

import pytest
from pydantic import ValidationError

from nfvperf.config import SuiteError
from nfvperf.suite_load import validate_suite
from nfvperf.dut.base import DUT_REGISTRY, DutFailure, KernelIf, MemifEnd, PciNic, PortRef, VhostBackend, \
    dut_class
from nfvperf.dut.l3fwd import L3fwd, L3fwdSpec, rx_queues_per_port
from nfvperf.dut.l3fwd_routes import (EM_MAX_ENTRIES, AddressPlan, RouteError, check_routes,
                                      em_rule_lines, em_rules, lpm_rules)
from nfvperf.host.dpdk_telemetry import DpdkTelemetry, TelemetryError, ethdev_counters
from nfvperf.host.run import ResourceTracker, RunContext
from nfvperf.topo.ports.base import HostPort
from nfvperf.topo.ports.memif import Memif
from nfvperf.topo.ports.vhost import Vhost
from nfvperf.topo.spec import TopologySpec


class Traffic:
    """The TrafficSpec fields fit_traffic reads."""

    def __init__(self, flows=1, ip_version=4, vlan=None, vxlan=False):
        self.flows_per_port, self.ip_version, self.vlan, self.vxlan = flows, ip_version, vlan, vxlan


def spec(**kw) -> TopologySpec:
    l3 = kw.pop("l3fwd", {})
    return TopologySpec(kind="p2p", dut="l3fwd", l3fwd=l3, **kw)


# ------------------------------------------------------------------------------ address plan
def test_two_ports_use_tgens_own_rfc2544_addresses():
    p = AddressPlan.make(2, 1000)
    assert [str(p.v4_network(i)) for i in range(2)] == ["198.18.0.0/16", "198.19.0.0/16"]
    # tgen's defaults: forward 198.18.0.1 -> 198.19.0.1, reverse swapped; IPv6 2001:2::1 / 2001:2:0:1::1
    assert p.directions() == [(0, 1), (1, 0)]
    assert p.stream_fields(0, 1) == {"src_ip": "198.18.0.1", "dst_ip": "198.19.0.1", "vary": ["src_ip", "dst_ip"]}
    assert p.stream_fields(1, 0, 6)["dst_ip"] == "2001:2::1"
    assert p.stream_fields(0, 1, 6)["dst_ip"] == "2001:2:0:1::1"


def test_blocks_hold_every_flow_and_never_overlap():
    for ports, flows in ((4, 1), (4, 20_000), (8, 16_383), (2, 65_535), (2, 65_536), (2, 1_000_000),
                         (8, 1_000_000)):
        p = AddressPlan.make(ports, flows)
        nets = [p.v4_network(i) for i in range(ports)]
        assert all(not a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1:])
        for i, net in enumerate(nets):
            last = ipaddress.IPv4Address(p.host(i, flows - 1))
            assert ipaddress.IPv4Address(p.host(i, 0)) in net and last in net, (ports, flows, net)
            assert net.prefixlen <= 24                  # no tbl8 groups in l3fwd's IPv4 LPM
        rfc = all(n.subnet_of(ipaddress.IPv4Network("198.18.0.0/15")) for n in nets)
        assert rfc == (flows < 131072 // ports), (ports, flows)      # else 10.0.0.0/8


def test_too_many_flows_or_bad_port_counts_are_refused_naming_the_field():
    with pytest.raises(RouteError, match=r"^traffic\.flows_per_port: 3,000,000 flows .* 2,097,151"):
        AddressPlan.make(8, 3_000_000)
    with pytest.raises(RouteError, match=r"^topology\.ports: .* 3 is not an even number"):
        AddressPlan.make(3, 10)
    with pytest.raises(RouteError, match=r"^topology\.ports: .* at most 32"):
        AddressPlan.make(34, 10)


# ------------------------------------------------------------------------------ route files
def test_lpm_routes_one_prefix_per_port_and_version():
    v4, v6 = lpm_rules(AddressPlan.make(4, 20_000))
    assert v4 == ["R198.18.0.0/17 0", "R198.18.128.0/17 1", "R198.19.0.0/17 2", "R198.19.128.0/17 3"]
    assert v6 == ["R2001:2::/64 0", "R2001:2:0:1::/64 1", "R2001:2:0:2::/64 2", "R2001:2:0:3::/64 3"]


def test_em_entries_match_what_the_streams_send():
    """Every (src, dst) tgen sends for flow k of every direction has an entry to the rx port."""
    plan = AddressPlan.make(4, 50)
    lines = list(em_rule_lines(plan, 4))
    assert len(lines) == 4 * 50
    assert lines[0] == "R198.18.128.1 198.18.0.1 1024 1024 0x11 1"
    table = {}
    for ln in lines:
        dst, src, dport, sport, proto, out = ln[1:].split()
        assert (dport, sport, proto) == ("1024", "1024", "0x11")
        table[(src, dst)] = int(out)
    for tx, rx in plan.directions():
        f = plan.stream_fields(tx, rx)
        for k in (0, 17, 49):
            src = str(ipaddress.IPv4Address(f["src_ip"]) + k)
            dst = str(ipaddress.IPv4Address(f["dst_ip"]) + k)
            assert table[(src, dst)] == rx
    v6 = list(em_rule_lines(plan, 6, 2))
    assert v6[0] == "R2001:2:0:1::1 2001:2::1 1024 1024 0x11 1" and len(v6) == 8


def test_em_of_one_version_leaves_the_other_a_placeholder():
    v4, v6 = em_rules(AddressPlan.make(2, 1000), 6)
    assert len(list(v4)) == 2 and len(list(v6)) == 2000


def test_em_table_limit_names_the_field_and_the_fix():
    assert check_routes("em", 2, 1_000_000) is None
    why = check_routes("em", 4, 1_000_000)
    assert why.startswith("traffic.flows_per_port: l3fwd's exact-match table")
    assert f"{EM_MAX_ENTRIES:,}" in why and "786,432" in why and "mode: lpm" in why
    assert check_routes("lpm", 4, 1_000_000) is None
    assert check_routes("fib", 2, 1).startswith("topology.l3fwd.mode")


# ------------------------------------------------------------------------------ options
def test_options_section_and_its_checks():
    s = spec(l3fwd={"mode": "em", "cores": 2, "ht": True, "queues": 2})
    assert isinstance(s.l3fwd, L3fwdSpec) and s.l3fwd.mode == "em"
    assert dut_class("l3fwd") is L3fwd and DUT_REGISTRY["l3fwd"].options_key == "l3fwd"
    req = L3fwd.core_request(s)
    assert (req.field, req.cores, req.ht) == ("topology.l3fwd.cores", 2, True)
    assert L3fwd.core_request(spec()) is None
    with pytest.raises(ValidationError, match="give cores"):
        spec(l3fwd={"ht": True})
    with pytest.raises(ValidationError, match="mode"):
        spec(l3fwd={"mode": "fib"})
    with pytest.raises(ValidationError, match="cannot use dut 'l3fwd'"):
        TopologySpec(kind="p-ovs-p", dut="l3fwd")
    assert L3fwd.hugepage_demand_mb(spec(l3fwd={"mode": "em"})) > L3fwd.hugepage_demand_mb(spec()) >= 200
    needs = L3fwd.preflight_needs(spec())
    check = needs.checks[-1]([])
    assert check.name == "binary:l3fwd" and check.required
    assert L3fwd.describe_options({"mode": "em", "cores": 2, "ht": True}) == ["EM", "2 cores + HT"]


def test_fit_traffic_sizes_the_routes_per_test():
    s = spec(port_kind="vhost")
    fitted = L3fwd.fit_traffic(s, Traffic(flows=20_000, ip_version=6))
    assert (fitted.l3fwd.flows, fitted.l3fwd.ip_version) == (20_000, 6) and s.l3fwd.flows is None
    assert L3fwd.fit_traffic(fitted, Traffic(flows=20_000, ip_version=6)) is fitted
    assert fitted != L3fwd.fit_traffic(s, Traffic(flows=1))           # another test, another build
    # an explicit table may be larger than the test's flows
    big = spec(l3fwd={"flows": 1000})
    assert L3fwd.fit_traffic(big, Traffic(flows=10)).l3fwd.flows == 1000


@pytest.mark.parametrize("kw,traffic,field", [
    ({}, Traffic(vlan=10), "traffic.vlan"),
    ({}, Traffic(vxlan=True), "traffic.vxlan"),
    ({"port_kind": "vhost", "mtu": 9000}, Traffic(), "topology.mtu"),
    ({"port_kind": "af_xdp", "l3fwd": {"cores": 2}}, Traffic(), "topology.l3fwd.cores"),
    ({"port_kind": "af_xdp", "l3fwd": {"queues": 2}}, Traffic(), "topology.l3fwd.queues"),
    ({"l3fwd": {"flows": 10}}, Traffic(flows=100), "topology.l3fwd.flows"),
    ({"l3fwd": {"ip_version": 4}}, Traffic(ip_version=6), "topology.l3fwd.ip_version"),
    ({"ports": 4, "l3fwd": {"mode": "em"}}, Traffic(flows=1_000_000), "traffic.flows_per_port"),
    ({"ports": 8, "l3fwd": {"queues": 16}}, Traffic(), "topology.l3fwd.queues"),
])
def test_what_l3fwd_cannot_carry_is_refused_naming_the_field(kw, traffic, field):
    with pytest.raises(ValueError) as ei:
        L3fwd.fit_traffic(spec(**kw), traffic)
    assert str(ei.value).startswith(field + ":") or f"; {field}:" in str(ei.value), str(ei.value)


def test_the_suite_validation_sizes_each_tests_routes_and_names_problems():
    data = {"name": "s", "topology": {"kind": "p2p", "dut": "l3fwd", "port_kind": "vhost",
                                      "l3fwd": {"mode": "em"}},
            "traffic": {"frame_sizes": [64], "flows_per_port": 1000},
            "tests": [{"method": "throughput"},
                      {"method": "throughput", "name": "many", "traffic": {"flows_per_port": 5000}},
                      {"method": "latency", "name": "lat"}]}
    suite = validate_suite(data)
    flows = [t.topology.l3fwd.flows for t in suite.tests]
    assert flows == [1000, 5000, 1000]
    assert suite.tests[0].topology == suite.tests[2].topology != suite.tests[1].topology
    bad = dict(data, tests=[{"method": "throughput", "traffic": {"vlan": 100}}])
    with pytest.raises(SuiteError) as ei:
        validate_suite(bad)
    assert ei.value.problems[0].startswith("tests[0]: traffic.vlan: l3fwd routes untagged")
    study = dict(data, tests=[{"method": "throughput", "name": "c",
                               "study": {"axes": {"topology.l3fwd.cores": [1, 2]}}}])
    units = validate_suite(study).tests
    assert [t.topology.l3fwd.cores for t in units] == [1, 2]


# ------------------------------------------------------------------------------ an instance
def _dut(tmp_path: Path, kind: str = "af_packet", ports: int = 2, cpus=(1,), **l3) -> L3fwd:
    run = RunContext(run_dir=tmp_path / "run")
    s = spec(port_kind=kind, ports=ports, l3fwd=l3) if kind != "pci" else \
        spec(port_kind="pci", pci=[f"0000:0{i // 2}:00.{i % 2}" for i in range(2 * ports)], l3fwd=l3)
    s = L3fwd.fit_traffic(s, Traffic(flows=100))
    d = L3fwd(run, ResourceTracker(run), cpus=cpus, spec=s, netns="ns",
              eth_peers=[f"02:00:00:00:a0:{i:02x}" for i in range(ports)])
    for i in range(ports):
        if kind in ("af_packet", "af_xdp"):
            d.add_port(PortRef(f"phy{i}", KernelIf.of(kind), ifname=f"d{i}"))
        elif kind == "vhost":
            d.add_port(PortRef(f"phy{i}", VhostBackend(client=True), socket=Path(f"/tmp/s{i}")))
        elif kind == "memif":
            d.add_port(PortRef(f"phy{i}", MemifEnd("server"), socket=Path(f"/tmp/m{i}")))
    return d


def test_config_deals_queues_to_lcores_as_the_seed_did(tmp_path):
    """Seed 000 Table 7-2: l3fwd -c 0xc --config "(0,0,2)(1,0,3)(2,0,2)(3,0,3)" (4 ports, 2 cores)."""
    d = _dut(tmp_path, "vhost", ports=4, cpus=(2, 3))
    d.port_ids = d.dpdk_port_ids()
    d.rule_files = d.write_rules()
    argv = d.argv()
    assert argv[argv.index("--lcores") + 1] == "0@2,1@3"
    assert argv[argv.index("--config") + 1] == "(0,0,0)(1,0,1)(2,0,0)(3,0,1)"
    assert argv[argv.index("-p") + 1] == "0xf" and "-P" in argv and "--lookup=lpm" in argv
    assert "--eth-dest=3,02:00:00:00:a0:03" in argv and "--parse-ptype" in argv
    assert "--single-file-segments" in argv and "--no-pci" in argv and "--ipv6" not in argv
    # net_vhost offers a queue pair per TX queue (one per lcore); the generator's end as many
    assert "net_vhost0,iface=/tmp/s0,queues=2,client=1" in argv
    assert d.tx_queues() == d.peer_queues() == 2
    v4 = Path(d.rule_files["v4"]["path"]).read_text().splitlines()
    assert v4[1:] == ["R198.18.0.0/17 0", "R198.18.128.0/17 1", "R198.19.0.0/17 2", "R198.19.128.0/17 3"]
    assert d.stream_params()[1] == {"src_ip": "198.19.0.1", "dst_ip": "198.19.128.1",
                                    "vary": ["src_ip", "dst_ip"]}
    assert len(d.stream_params()) == 4


def test_af_packet_polls_every_queue_pair_it_opens(tmp_path):
    d = _dut(tmp_path, "af_packet", cpus=(0, 1), queues=1)
    assert d.rx_queues() == 2 == rx_queues_per_port("af_packet", 1, 2)
    assert d.lcore_config() == [(0, 0, 0), (1, 0, 1), (0, 1, 0), (1, 1, 1)]
    assert "qpairs=2" in d.port_devargs(0, d.ports[0])
    d1 = _dut(tmp_path, "memif", cpus=(0, 1), queues=1)
    assert d1.rx_queues() == 1 and d1.lcore_config() == [(0, 0, 0), (1, 0, 1)]


def test_em_ipv6_loads_the_ipv6_hash(tmp_path):
    run = RunContext(run_dir=tmp_path / "run")
    s = L3fwd.fit_traffic(spec(port_kind="memif", l3fwd={"mode": "em"}), Traffic(flows=10, ip_version=6))
    d = L3fwd(run, ResourceTracker(run), cpus=(1,), spec=s)
    for i in range(2):
        d.add_port(PortRef(f"phy{i}", MemifEnd(), socket=Path(f"/tmp/m{i}")))
    d.port_ids = d.dpdk_port_ids()
    d.rule_files = d.write_rules()
    assert "--ipv6" in d.argv() and "--lookup=em" in d.argv()
    assert d.rule_files["v6"]["rules"] == 20 and d.rule_files["v4"]["rules"] == 2


def test_pci_ports_take_dpdks_bus_order(tmp_path):
    run = RunContext(run_dir=tmp_path / "run")
    d = L3fwd(run, ResourceTracker(run), cpus=(1,), spec=spec(port_kind="pci", pci=["0000:09:00.0", "0000:05:00.0",
                                                                               "0000:03:00.0", "0000:04:00.0"]))
    d.add_port(PortRef("phy0", PciNic(), pci="0000:05:00.0"))
    d.add_port(PortRef("phy1", PciNic(), pci="04:00.0"))
    assert d.dpdk_port_ids() == [1, 0]          # 0000:04:00.0 is probed first
    d.port_ids = d.dpdk_port_ids()
    d.flows = 1
    v4, _ = d.route_lines()
    assert list(v4) == ["R198.18.0.0/16 1", "R198.19.0.0/16 0"]


def test_an_instance_refuses_before_starting(tmp_path):
    d = _dut(tmp_path, "af_xdp", cpus=(0, 1))
    with pytest.raises(ValueError, match=r"topology\.l3fwd\.cores: .* af_xdp takes one lcore"):
        d.start()
    assert d.proc is None
    one = _dut(tmp_path, "af_packet", ports=2)
    one.ports.pop()
    with pytest.raises(ValueError, match=r"topology\.ports"):
        one.start()


# ------------------------------------------------------------------------------ the generator's end
def test_vhost_generator_opens_the_queue_pairs_the_dut_asks_for():
    port = HostPort(0, "vhost", mtu=1500, tg_mac="02:00:00:00:a0:00", socket=Path("/tmp/x.sock"),
                    port_kind=Vhost())
    one = port.tg_port_spec(0, dut_tx_queues=3)            # OVS: 3 TX queues, mapped onto 1 pair
    assert "queues=1" in one.devargs and one.rx_queues == 1
    two = port.tg_port_spec(0, dut_tx_queues=2, dut_peer_queues=2)
    assert "queues=2" in two.devargs and two.rx_queues == 2
    m = HostPort(0, "memif", socket=Path("/tmp/m.sock"), port_kind=Memif())
    assert m.tg_port_spec(0, dut_tx_queues=2, dut_peer_queues=2).rx_queues == 2


# ------------------------------------------------------------------------------ telemetry
def test_ethdev_counters_map_dpdks_names():
    c = ethdev_counters({"ipackets": 10, "opackets": 9, "ibytes": 640, "obytes": 576, "imissed": 1,
                         "rx_nombuf": 2, "ierrors": 3, "oerrors": 4, "q_ipackets": [10]})
    assert c["rx_packets"] == 10 and c["tx_packets"] == 9 and c["rx_dropped"] == 3
    assert c["tx_dropped"] == 4 and c["rx_errors"] == 3 and c["tx_bytes"] == 576


def test_telemetry_client_talks_the_v2_protocol(tmp_path):
    """A SEQPACKET server answering like DPDK's: greeting, then one JSON reply per command."""
    path = tmp_path / "dpdk_telemetry.v2"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    srv.bind(str(path))
    srv.listen(1)
    seen = []

    def serve():
        c, _ = srv.accept()
        c.send(json.dumps({"version": "DPDK 22.11.11", "pid": 1, "max_output_len": 16384}).encode())
        while True:
            cmd = c.recv(1024).decode()
            if not cmd:
                break
            seen.append(cmd)
            key = cmd.split(",")[0]
            c.send(json.dumps({key: {"ipackets": 5} if key == "/ethdev/stats" else None}).encode())
            if key == "/quit":
                c.close()
                break

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    t = DpdkTelemetry(path)
    assert t.connect()["version"] == "DPDK 22.11.11"
    assert t.command("/ethdev/stats,1") == {"ipackets": 5}
    t.command("/quit")
    with pytest.raises(TelemetryError):
        t.command("/ethdev/stats,0")
    t.close()
    th.join(2)
    srv.close()
    assert seen == ["/ethdev/stats,1", "/quit"]
    with pytest.raises(TelemetryError, match="nope"):
        DpdkTelemetry(tmp_path / "nope").connect()


def test_cpus_place_the_lcores_on_given_cpus():
    from nfvperf.host.cpu import CoreRequestError, PinningPlan
    s = spec(l3fwd={"cpus": "0-1"})
    assert L3fwd.describe_options(s.l3fwd.model_dump()) == ["CPUs 0-1"]
    plan = PinningPlan(housekeeping=[0], roles={"dut": [1], "tgen": [1]}, topology={"online": "0-1"})
    L3fwd.adjust_plan(plan, s)
    assert plan.roles["dut"] == [0, 1] and plan.cores_shared and "CPU(s) 1" in plan.warnings[-1]
    with pytest.raises(CoreRequestError, match=r"^topology\.l3fwd\.cpus: CPU\(s\) 7 are not on this host"):
        L3fwd.adjust_plan(PinningPlan(housekeeping=[0], topology={"online": "0-1"}), spec(l3fwd={"cpus": "1,7"}))
    with pytest.raises(ValidationError, match="not both"):
        spec(l3fwd={"cpus": "1", "cores": 1})
    with pytest.raises(ValidationError, match="a CPU list"):
        spec(l3fwd={"cpus": "x"})
    with pytest.raises(ValueError, match=r"topology\.l3fwd\.cpus: .* af_xdp"):
        L3fwd.fit_traffic(spec(port_kind="af_xdp", l3fwd={"cpus": "0,1"}), Traffic())


# ------------------------------------------------------------------------------ on a testbed's DUT host
class _RemoteHost:
    """A DUT host reached over SSH or a guest's shell, as far as l3fwd uses it."""

    remote, name, work_dir = True, "vm:dut", "/run/nfvperf"

    def __init__(self, files=("/usr/bin/nfvperf-l3fwd",), answer=""):
        self.files, self.answer = set(files), answer
        self.put_calls: list = []
        self.lines: list = []

    def exists(self, p):
        return str(p) in self.files

    def mkdir(self, p):
        self.files.add(str(p))

    def rmtree(self, p):
        self.files = {f for f in self.files if not f.startswith(str(p))}

    def put(self, local, remote):
        self.put_calls.append((Path(local).read_text(), str(remote)))
        self.files.add(str(remote))

    def run(self, argv, check=True, timeout=30.0, **kw):
        import subprocess
        self.lines.append(argv[-1])
        return subprocess.CompletedProcess(argv, 0, self.answer, "")


def test_l3fwd_on_a_remote_dut_host_takes_its_binary_routes_and_telemetry_there(tmp_path):
    """On a testbed's DUT host (a guest here) l3fwd is the host's build, its route files are
    copied to the host's work directory and named there, and its counters are read with socat
    on that host (HostTelemetry: the greeting then the answer, one JSON object each)."""
    from nfvperf.host.dpdk_telemetry import HostTelemetry
    run = RunContext(run_dir=tmp_path / "run")
    host = _RemoteHost()
    d = L3fwd(run, ResourceTracker(run), cpus=(1,), spec=spec(port_kind="pci"), host=host)
    for i, a in enumerate(("0000:00:04.0", "0000:00:05.0")):
        d.add_port(PortRef(f"phy{i}", PciNic(), pci=a))
    d.port_ids = d.dpdk_port_ids()
    d.rule_files = d.write_rules()
    argv = d.argv()
    assert argv[0] == "/usr/bin/nfvperf-l3fwd" and "--no-pci" not in argv
    there = f"/run/nfvperf/{run.tag}/l3fwd-dut-lpm-v4.cfg"
    assert f"--rule_ipv4={there}" in argv and (Path(d.rule_files["v4"]["path"]).read_text(), there) \
        in host.put_calls
    with pytest.raises(DutFailure, match=r"no l3fwd on vm:dut \(looked for /usr/bin/nfvperf-l3fwd"):
        L3fwd(run, ResourceTracker(run), cpus=(1,), spec=spec(port_kind="pci"),
              host=_RemoteHost(files=())).binary()
    host.answer = ('{"version": "DPDK 22.11.11", "pid": 7, "max_output_len": 16384}\n'
                   '{"/ethdev/stats": {"ipackets": 5, "opackets": 4, "imissed": 1}}')
    t = HostTelemetry(host, "/var/run/dpdk/x/dpdk_telemetry.v2")
    assert t.connect()["version"] == "DPDK 22.11.11"
    c = ethdev_counters(t.command("/ethdev/stats,0"))
    assert (c["rx_packets"], c["tx_packets"], c["rx_dropped"]) == (5, 4, 1)
    assert "UNIX-CONNECT:/var/run/dpdk/x/dpdk_telemetry.v2,type=5" in host.lines[-1]
    assert "printf %s /ethdev/stats,0 |" in host.lines[-1]
    d.tracker.release_all()                   # the run's directory on the host goes with it
    assert not [f for f in host.files if run.tag in f], host.files
    host.answer = "socat: E connect: No such file or directory"
    with pytest.raises(TelemetryError, match="no answer"):
        t.command("/ethdev/stats,0")


def test_a_build_given_by_path_runs_and_a_missing_one_names_the_field(tmp_path):
    """topology.l3fwd.binary: the A/B gate's two builds (suites/ab-l3fwd.yaml) are two paths; the
    study restarts l3fwd between them, and a path that is no program is a DUT failure."""
    from nfvperf.topo.inplace import restart_fields
    from nfvperf.trend.series import build_of
    from nfvperf.trial import DutFailure
    build = tmp_path / "l3fwd-b"
    build.write_text("#!/bin/sh\n")
    build.chmod(0o755)
    a, b = spec(port_kind="memif", l3fwd={"binary": "/a/l3fwd"}), spec(port_kind="memif", l3fwd={"binary": str(build)})
    assert restart_fields(a, b) == ["l3fwd.binary"]
    assert build_of(b.model_dump()) == str(build)
    run = RunContext(run_dir=tmp_path / "run")
    d = L3fwd(run, ResourceTracker(run), cpus=(1,), spec=b)
    for i in range(2):
        d.add_port(PortRef(f"phy{i}", MemifEnd(), socket=Path(f"/tmp/m{i}")))
    d.port_ids = d.dpdk_port_ids()
    d.rule_files = d.write_rules()
    assert d.argv()[0] == str(build)
    d.opts = d.opts.model_copy(update={"binary": str(tmp_path / "nope")})
    with pytest.raises(DutFailure, match="topology.l3fwd.binary: .*nope is not an executable file"):
        d.argv()


def test_only_the_cross_connect_is_programmed() -> None:
    from nfvperf.dut.base import Flow, Unsupported, cross_connect, cross_connect_only
    cross_connect_only(None, 4, "l3fwd routes between")
    cross_connect_only(cross_connect(4), 4, "l3fwd routes between")
    for flows in ([Flow(0, 2)], [Flow(0, 1, {"dl_type": "0x0800"})]):
        with pytest.raises(Unsupported, match="l3fwd routes between port pairs .0<->1, 2<->3.; other flows"):
            cross_connect_only(flows, 4, "l3fwd routes between")
