"""tgen's TX offloads (issue 27 item 4): a port that offers IPv4/UDP checksum offload computes the
checksums (net_tap offers it and computes them as a NIC would, from the flags and header lengths
tgen sets per mbuf, with tgen's pseudo-header sum in the UDP field); a port without it, or with
``cksum_offload=0``, gets them in software with a note.  Either way the frames on the wire carry
valid IPv4 and UDP checksums (captured on the tap's kernel side with tshark).  Also the pools per
NUMA socket: each port's RX and TX pools are on its socket (this host has one).

Needs root, tgen/build/tgen and tshark; skipped otherwise.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from nfvperf.tg.tgen import PortSpec, TgenMeasurer

sys.path.insert(0, str(Path(__file__).resolve().parent))   # tgen_fixtures, whatever the import mode
from tgen_fixtures import Capture, start_tgen, tag, tgen_binary_or_skip, tshark_or_skip, wait_result

pytestmark = pytest.mark.root

GOOD = "1"     # Wireshark's checksum status "good"


@pytest.fixture(scope="module")
def taps(tmp_path_factory):
    """port 0: tap with checksum offload; port 1: tap with cksum_offload=0; port 2: net_ring."""
    tgen_binary_or_skip()
    tshark_or_skip()
    t = tag()
    ifs = (f"{t}o", f"{t}s")
    proc = start_tgen([PortSpec(f"net_tap0,iface={ifs[0]}"), PortSpec(f"net_tap1,iface={ifs[1]}"),
                       PortSpec("net_ring0")], tmp_path_factory.mktemp("tgen-offload"), t,
                      extra_args=["--port", "1:cksum_offload=0"])
    try:
        yield proc, ifs
    finally:
        assert proc.stop() == 0, proc.log_tail()


def test_offload_ports_list_says_what_is_used(taps):
    proc, _ = taps
    p0, p1, p2 = proc.rpc("ports.list")
    assert p0["driver"] == "net_tap" and {"IPV4_CKSUM", "UDP_CKSUM"} <= set(p0["tx_offloads_offered"])
    # offered -> used; the tap offers no fast free, which the note says
    assert p0["tx_offloads_used"] == ["IPV4_CKSUM", "UDP_CKSUM"] and p0["tx_cksum"] == "offload", p0
    assert p0["tx_offload_note"] == "no MBUF_FAST_FREE (the port does not offer it)", p0
    # offered but turned off -> software, said so
    assert p1["tx_offloads_used"] == [] and p1["tx_cksum"] == "software", p1
    assert "IPv4/UDP checksums written in software (cksum_offload=0 was given)" in p1["tx_offload_note"], p1
    # not offered (net_ring) -> software with the reason
    assert p2["tx_offloads_offered"] == ["MULTI_SEGS"] and p2["tx_offloads_used"] == [], p2
    assert p2["tx_offload_note"].startswith("IPv4/UDP checksums written in software (the port offers no "
                                            "IPV4_CKSUM/UDP_CKSUM TX offload); no MBUF_FAST_FREE"), p2
    # the run's generator environment carries them
    env = TgenMeasurer(proc, [(0, 0)]).generator_environment()
    assert [(p["tx_offloads_used"], p["tx_cksum"]) for p in env["ports"]] == \
        [(["IPV4_CKSUM", "UDP_CKSUM"], "offload"), ([], "software"), ([], "software")], env["ports"]
    assert env["ports"][2]["tx_offload_note"] == p2["tx_offload_note"]


def test_offload_tgen_cores_pool_per_numa_socket(taps):
    """Each port's RX (main) and TX pools are on the port's socket (the main lcore's for a port of
    unknown socket, -1); with one NUMA node here every pool is on node 0."""
    proc, _ = taps
    nodes = sorted(Path("/sys/devices/system/node").glob("node[0-9]*"))
    for p in proc.rpc("ports.list"):
        want = p["socket"] if p["socket"] >= 0 else 0
        assert p["pool_socket"] == want and p["tx_pool_socket"] == want, p
        if len(nodes) <= 1:
            assert want == 0, p


@pytest.mark.parametrize("port", [0, 1], ids=["offload", "software"])
def test_offload_checksums_valid_on_the_wire(taps, tmp_path: Path, port: int):
    proc, ifs = taps
    proc.rpc("stream.remove", all=True)
    n_each = 24
    # plain IPv4 at two sizes (whole small frames, and the TX pool's header-only writes), IPv4 with
    # a VLAN tag (l2_len 18) and IPv6 (UDP_CKSUM alone), flows varying every checksummed field
    specs = [dict(size_b=64), dict(size_b=1518), dict(size_b=128, vlan=7), dict(size_b=256, ipv6=True)]
    for sp in specs:
        proc.rpc("stream.add", port=port, rx_port=port, flows=8, rate={"pps": 4000},
                 vary=["src_ip", "dst_ip", "src_port", "dst_port"], **sp)
    n = n_each * len(specs)
    with Capture(ifs[port], n, tmp_path / "off.pcap", bpf="udp or (vlan and udp)") as cap:
        proc.rpc("trial.start", frames=n_each, drain_s=0.2, learning=False)
        res = wait_result(proc)
        cap.wait()
    assert res["sent"] == n, res
    rows = cap.fields("frame.len", "vlan.id", "ip.checksum.status", "ipv6.src", "udp.checksum.status",
                      "udp.payload", checks=True)
    assert len(rows) == n, rows[:3]
    sizes = sorted({int(r[0]) for r in rows})
    assert sizes == [60, 124, 252, 1514], sizes
    for flen, vlan, ipck, v6src, udpck, payload in rows:
        if v6src:
            assert ipck == "", (flen, ipck)
        else:
            assert ipck == GOOD, f"bad IPv4 checksum in a {flen} B frame (vlan {vlan!r})"
        assert udpck == GOOD, f"bad UDP checksum in a {flen} B frame (vlan {vlan!r}, ipv6 {bool(v6src)})"
        assert payload.replace(":", "")[:4] in ("4e46", "6e66"), payload[:20]   # the signature
