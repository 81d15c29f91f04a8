"""Line-rate arithmetic and small calculators (METHODOLOGY §1 A1–A4, §3 K4; seeds 000, 003).

Units are in the names: ``_b`` bytes (L2 frame incl. FCS), ``_bps`` bits/s, ``_pps``/``fps``
frames/s, ``_s`` seconds.  Rates are kept fractional (A2: published tables truncate).
Every bit rate says its layer: L1 counts preamble+SFD (8 B) and the minimum IFG (12 B),
L2 counts the frame incl. FCS, the IPv4 layer counts the IP packet (frame − 14 B Ethernet
header − 4 B FCS).
"""
from __future__ import annotations

import math
from typing import Iterable, Mapping, Optional, Sequence

#: preamble + SFD (8 B) + minimum inter-frame gap (12 B)
L1_OVERHEAD_B = 20
#: Ethernet header (14 B) + FCS (4 B): L2 frame size minus this is the IP packet size
ETH_HEADER_FCS_B = 18
#: ETH_HEADER_FCS_B + one 802.1Q tag
ETH_HEADER_FCS_VLAN_B = 22

#: RFC 2544 §9 Ethernet frame sizes (B)
RFC2544_FRAME_SIZES_B = (64, 128, 256, 512, 1024, 1280, 1518)

#: VXLAN encapsulation overhead (A4): outer Ethernet 14 + IPv4 20 + UDP 8 + VXLAN 8
VXLAN_OVERHEAD_IPV4_B = 50
#: same with an IPv6 underlay (outer IPv6 header is 40 B)
VXLAN_OVERHEAD_IPV6_B = 70
#: an 802.1Q tag on the outer frame
VLAN_TAG_B = 4


def max_fps(size_b: float, link_bps: float = 10e9) -> float:
    """Theoretical maximum frame rate (A1): ``link_bps / ((S + 20) × 8)``, fractional."""
    if size_b <= 0:
        raise ValueError(f"frame size must be > 0 B, got {size_b}")
    if link_bps <= 0:
        raise ValueError(f"link speed must be > 0 bit/s, got {link_bps}")
    return link_bps / ((size_b + L1_OVERHEAD_B) * 8)


def l1_bps(fps: float, size_b: float) -> float:
    """Layer-1 bit rate (A3): includes preamble, SFD and minimum IFG."""
    return fps * (size_b + L1_OVERHEAD_B) * 8


def l2_bps(fps: float, size_b: float) -> float:
    """Layer-2 bit rate (A3): the frame incl. FCS."""
    return fps * size_b * 8


def ipv4_bps(fps: float, size_b: float, vlan: bool = False) -> float:
    """IP-layer bit rate: the IP packet only (frame − Ethernet header − FCS [− VLAN tag])."""
    hdr = ETH_HEADER_FCS_VLAN_B if vlan else ETH_HEADER_FCS_B
    return fps * max(0.0, size_b - hdr) * 8


def pct_line_rate(fps: float, size_b: float, link_bps: float = 10e9) -> float:
    """Percent of line rate, L1 (what CSIT and the testers' default layer show)."""
    return l1_bps(fps, size_b) / link_bps * 100.0


def fps_from_pct(pct: float, size_b: float, link_bps: float = 10e9) -> float:
    """Frames/s for a percentage (L1) of line rate."""
    return max_fps(size_b, link_bps) * pct / 100.0


def vxlan_outer_size_b(inner_size_b: int, ip_version: int = 4, outer_vlan: bool = False) -> int:
    """Outer (on-the-wire) L2 size of a VXLAN-encapsulated frame (A4).

    The inner FCS is replaced by the outer one, so outer = inner + 50 (IPv4 underlay),
    + 70 (IPv6 underlay), + 4 more with an outer VLAN tag.
    """
    if ip_version == 4:
        extra = VXLAN_OVERHEAD_IPV4_B
    elif ip_version == 6:
        extra = VXLAN_OVERHEAD_IPV6_B
    else:
        raise ValueError(f"ip_version must be 4 or 6, got {ip_version}")
    return inner_size_b + extra + (VLAN_TAG_B if outer_vlan else 0)


def vxlan_max_fps(inner_size_b: int, link_bps: float = 10e9, ip_version: int = 4,
                  outer_vlan: bool = False) -> float:
    """Max inner-frame rate when the wire carries VXLAN-encapsulated frames (TV3)."""
    return max_fps(vxlan_outer_size_b(inner_size_b, ip_version, outer_vlan), link_bps)


def rate_summary(fps: float, size_b: float, link_bps: float = 10e9) -> dict[str, float]:
    """The default rate output (A3): fps, L1 Mbps, L1 %, L2 Mbps (and IPv4-layer Mbps)."""
    return {
        "fps": fps,
        "l1_mbps": l1_bps(fps, size_b) / 1e6,
        "l1_pct": pct_line_rate(fps, size_b, link_bps),
        "l2_mbps": l2_bps(fps, size_b) / 1e6,
        "ipv4_mbps": ipv4_bps(fps, size_b) / 1e6,
    }


def line_rate_table(sizes_b: Iterable[int] = RFC2544_FRAME_SIZES_B + (9000,),
                    speeds_bps: Sequence[float] = (1e9, 10e9, 25e9, 40e9, 100e9)) -> list[dict]:
    """TV1-style table: one row per size, one column per speed (fractional fps)."""
    return [{"size_b": s, **{f"{int(sp / 1e9)}g_fps": max_fps(s, sp) for sp in speeds_bps}}
            for s in sizes_b]


# --- RFC 2544 §23 trial wall time (TV5) ------------------------------------------------------

def rfc2544_trial_wall_s(duration_s: float, router: bool = False, learning_s: float = 2.0,
                         drain_s: float = 2.0, settle_s: float = 5.0,
                         routing_update_s: float = 2.0) -> float:
    """Wall time of one §23 trial: [routing update 2 s] + learning 2 s + traffic + drain 2 s +
    restabilise 5 s.  11 trials × (60+2+2+5) = 759 s (TV5)."""
    return duration_s + learning_s + drain_s + settle_s + (routing_update_s if router else 0.0)


# --- RFC 9004 buffer time (K4) ----------------------------------------------------------------

def implied_buffer_time_s(mean_b2b_frames: float, max_pps: float) -> float:
    """RFC 9004 implied DUT buffer time = mean back-to-back frames / max theoretical fps."""
    return mean_b2b_frames / max_pps


def corrected_buffer_time_s(mean_b2b_frames: float, max_pps: float, throughput_pps: float) -> float:
    """RFC 9004 corrected buffer time = Implied − Implied × (Throughput / max fps).

    The DUT forwards at its Throughput while the burst arrives, so only the excess fills
    the buffer.  TV9: 8 frames, 1000 fps max, 750 fps throughput -> 2 ms.
    """
    implied = implied_buffer_time_s(mean_b2b_frames, max_pps)
    return implied - implied * (throughput_pps / max_pps)


# --- DPDK socket memory (seed 003 Appendix C / Red Hat NFV guide) ----------------------------

DPDK_MEMPOOL_PACKETS = 4096 * 64
DPDK_MBUF_OVERHEAD_B = 800
DPDK_SOCKET_MEM_BUFFER_B = 512 * 1024 * 1024
DPDK_UNUSED_SOCKET_MB = 1024


def dpdk_port_mempool_bytes(mtu: int) -> int:
    """Bytes of mempool for one DPDK port: (MTU rounded up to 1024 B + 800 B) × 4096 × 64.

    MTU 9000 -> (9216 + 800) × 262144 = 2,625,634,304 B.
    """
    if mtu <= 0:
        raise ValueError(f"MTU must be > 0, got {mtu}")
    rounded = math.ceil(mtu / 1024) * 1024
    return (rounded + DPDK_MBUF_OVERHEAD_B) * DPDK_MEMPOOL_PACKETS


def dpdk_socket_memory_mb(port_mtus: Sequence[int]) -> int:
    """Socket memory (MB) for one NUMA socket given the MTUs of the DPDK ports on it.

    Sum the per-port mempools, add a 512 MB buffer, convert to MB and round *up* to a
    multiple of 1024 MB (the seed's "nearest multiple" example rounds 10,528 up to 11,264).
    A socket with no DPDK ports still gets 1024 MB.
    4 ports at MTU 9000 -> 11,039,408,128 B = 10,528 MB -> 11,264 MB.
    """
    if not port_mtus:
        return DPDK_UNUSED_SOCKET_MB
    total = sum(dpdk_port_mempool_bytes(m) for m in port_mtus) + DPDK_SOCKET_MEM_BUFFER_B
    mb = total / (1024 * 1024)
    return int(math.ceil(mb / 1024) * 1024)


def dpdk_socket_mem(ports_per_socket: Sequence[Sequence[int]]) -> str:
    """The ``dpdk-socket-mem`` string, e.g. ``"11264,1024"`` for [[9000]*4, []]."""
    return ",".join(str(dpdk_socket_memory_mb(m)) for m in ports_per_socket)


# --- OVS pmd-cpu-mask (seed 000 §10.3) ---------------------------------------------------------

def parse_core_list(spec: str) -> list[int]:
    """"2,4-6,20" -> [2, 4, 5, 6, 20]."""
    cores: set[int] = set()
    for part in str(spec).replace(" ", "").split(","):
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-", 1)
            lo, hi = int(a), int(b)
            if hi < lo:
                raise ValueError(f"bad core range {part!r}")
            cores.update(range(lo, hi + 1))
        else:
            cores.add(int(part))
    if any(c < 0 for c in cores):
        raise ValueError("core ids must be >= 0")
    return sorted(cores)


def pmd_cpu_mask(cores: Iterable[int] | str) -> str:
    """Hex CPU mask for ``other_config:pmd-cpu-mask``: core 2 -> "4", cores 2+20 -> "100004",
    cores 2-5 -> "3c" (lower-case hex, no 0x, as in the seed's ovs-vsctl lines)."""
    if isinstance(cores, str):
        cores = parse_core_list(cores)
    mask = 0
    for c in cores:
        if c < 0:
            raise ValueError("core ids must be >= 0")
        mask |= 1 << int(c)
    if mask == 0:
        raise ValueError("empty core list")
    return format(mask, "x")


def cores_from_mask(mask: str) -> list[int]:
    """Inverse of :func:`pmd_cpu_mask`."""
    m = int(mask, 16)
    return [i for i in range(m.bit_length()) if m >> i & 1]


# --- switching operations (seed 000 Table 5-1) -------------------------------------------------

def switching_ops_pps(throughput_pps: float, switching_operations: int) -> float:
    """Switching performance = throughput × number of switching operations on the path.

    Seed 000 Table 5-1: PHY-VM-VM-PHY has 3 switching operations (5,345,806 pps ->
    ~16.04 M switching ops/s); PHY-OVS-PHY has 1.
    """
    if switching_operations < 1:
        raise ValueError("switching_operations must be >= 1")
    return throughput_pps * switching_operations


def frames_in(duration_s: float, load_pps: float) -> int:
    """Frames offered in a trial (rounded to the nearest frame)."""
    return int(round(duration_s * load_pps))


def fmt_rate(fps: float, size_b: float, link_bps: Optional[float] = 10e9) -> str:
    """Human string with layer labels: '7,992,699.03 fps (L1 5,370.9 Mbps, 53.71 % L1; L2 ...)'."""
    s = f"{fps:,.2f} fps (L1 {l1_bps(fps, size_b) / 1e6:,.1f} Mbps"
    if link_bps:
        s += f", {pct_line_rate(fps, size_b, link_bps):.2f} % L1"
    return s + f"; L2 {l2_bps(fps, size_b) / 1e6:,.1f} Mbps)"


# --- delay variation and reordering (METHODOLOGY D3, D4, O1; TV10) ----------------------------

def ipdv_series(delays: Sequence[float]) -> list[float]:
    """RFC 3393 IPDV over consecutive pairs: D(i) − D(i−1), signed."""
    return [b - a for a, b in zip(delays, delays[1:])]


def pdv_series(delays: Sequence[float]) -> list[float]:
    """RFC 5481 PDV: D(i) − D(min), ≥ 0."""
    if not delays:
        return []
    m = min(delays)
    return [d - m for d in delays]


def percentile(values: Sequence[float], pct: float, ordered: bool = False) -> float:
    """Nearest-rank percentile (pct in [0, 100]); 0.0 for no values.  ``ordered``: the values
    are sorted already (several percentiles of one sample sort it once)."""
    if not values:
        return 0.0
    s = values if ordered else sorted(values)
    k = max(0, min(len(s) - 1, int(math.ceil(pct / 100.0 * len(s))) - 1))
    return s[k]


def reorder_stats(seqs: Sequence[int]) -> dict[str, float]:
    """RFC 4737 reordering over arrival sequence numbers.

    A packet is reordered iff s < NextExp (else NextExp = s + 1); only the first copy of a
    duplicate counts; ratio = reordered / L × 100 with L = packets received without duplicates;
    extent e(i) = i − min{ j < i : s[j] > s[i] }.  Arrivals 1,2,4,5,3,6 -> 1 reordered,
    extent 2, ratio 16.67 %.
    """
    seen: set[int] = set()
    arrivals: list[int] = []
    for s in seqs:
        if s in seen:
            continue
        seen.add(s)
        arrivals.append(s)
    next_exp = None
    reordered = 0
    extent_max = 0
    for i, s in enumerate(arrivals):
        if next_exp is not None and s < next_exp:
            reordered += 1
            j = min(j for j in range(i) if arrivals[j] > s)
            extent_max = max(extent_max, i - j)
        else:
            next_exp = s + 1
    n = len(arrivals)
    return {"received": n, "reordered": reordered,
            "ratio_pct": (reordered / n * 100.0) if n else 0.0, "extent_max": extent_max}


def directions(traffic: "Mapping[str, object]", ports: int, pairs: Optional[int] = None) -> int:
    """Transmitting interfaces: aggregate = per-interface load x this (METHODOLOGY G7).
    ``pairs``: the generator port pairs that send (default ports // 2; a topology may send on
    fewer: :func:`nfvperf.topo.tx_pairs`, e.g. an active-backup bond's primaries)."""
    n = max(1, ports // 2) if pairs is None else max(1, int(pairs))
    return n * (2 if traffic.get("bidirectional", True) else 1)
