"""A direction over several generator cores (issue 27): split one direction's stream into
sub-streams, one per TX queue and worker lcore of tgen, and merge their results back into one.

Split (:func:`split_stream`): sub-stream ``i`` of ``n`` carries a disjoint, contiguous slice of the
direction's flows (slice sizes differ by at most one), so together they send the same flows as the
unsplit stream: every varied field (``vary``: source/destination IP, UDP ports) starts at the
base value + the slice's first flow index, as tgen steps it (PROTOCOL.md §4: IPs in their low 32
bits, ports wrapping in 1..65535).  Each sub-stream is its own tgen stream with its own sequence
space.  The caller gives each sub-stream 1/n of the direction's rate (tgen's trial-level ``pps``
is per stream), so the rates add up to the asked one; frame counts (``frames``, ``burst_frames``)
are ceil(frames / n) per sub-stream, so a direction sends up to n - 1 frames more than asked, and
the result's ``expected`` counts what was scheduled.

Merge (:func:`merge_streams`): sent, received, lost, duplicates, reordered, sequence gaps and
misrouted frames are sums (each sub-stream's own exact figures); the latency histogram is the sum
of the sub-streams' histograms bucket by bucket (tgen's buckets: the same bounds in every stream),
count, min and max exact, the mean count-weighted, and the percentiles recomputed from the merged
histogram with tgen's own rule (:func:`tgen_percentile`), so a split direction reports what one
stream over the same frames would.  PDV (D(i) - D(min)) is recomputed from the merged figures, so
it covers the whole direction.  IPDV (D(i) - D(i-1)) is between consecutive received frames of ONE
sub-stream: min of the minima, count-weighted mean, max of the maxima, and the largest p99.
"""
from __future__ import annotations

import dataclasses
import ipaddress
import math
from typing import Any, Optional, Sequence

from nfvperf.tg.tgen_results import merge_histograms
from nfvperf.trial import LatencySummary, StreamResult

#: tgen's latency histogram (tgen/src/hist.h): 1 ns buckets below 256 ns, then 128 sub-buckets
#: per power of two; values of 2^48 ns and more in the last bucket
HIST_LIN = 256
HIST_SUB = 128
HIST_MAX_MSB = 47
HIST_NBUCKETS = HIST_LIN + (HIST_MAX_MSB - 8 + 1) * HIST_SUB

#: tgen's defaults for the fields a slice shifts (PROTOCOL.md §4)
_DEFAULT_IP = {(4, "src_ip"): "198.18.0.1", (4, "dst_ip"): "198.19.0.1",
               (6, "src_ip"): "2001:2::1", (6, "dst_ip"): "2001:2:0:1::1"}
_DEFAULT_PORT = 1024
_VXLAN_PORT = 4789


def flow_slices(flows: int, n: int) -> list[tuple[int, int]]:
    """``n`` contiguous slices (first flow, count) of ``flows`` flows, sizes differing by at most
    one; fewer slices when there are fewer flows than ``n`` (one flow cannot be split)."""
    flows, n = int(flows), max(1, int(n))
    n = min(n, max(1, flows))
    base, extra = divmod(flows, n)
    # the first ``extra`` slices take one flow more
    return [(i * base + min(i, extra), base + (1 if i < extra else 0)) for i in range(n)]


def _shift_ip(addr: str, k: int) -> str:
    ip = ipaddress.ip_address(addr)
    v = int(ip)
    low = (v + k) & 0xFFFFFFFF              # tgen steps an address in its low 32 bits
    return str(ipaddress.ip_address((v & ~0xFFFFFFFF) | low if ip.version == 6 else low))


def _shift_port(port: int, k: int, dst: bool) -> int:
    p = (int(port) - 1 + k) % 65535 + 1     # tgen: (base - 1 + flow) % 65535 + 1
    if dst and p == _VXLAN_PORT:            # tgen never sends 4789 (and refuses it as a base)
        p += 1
    return p


def split_stream(obj: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """The ``stream.add`` objects of ``obj``'s sub-streams (:func:`flow_slices`): one object (the
    original) when it cannot or need not be split."""
    flows = int(obj.get("flows", 1))
    slices = flow_slices(flows, n)
    if len(slices) == 1:
        return [obj]
    ipv = 6 if obj.get("ipv6") else 4
    vary = obj.get("vary", ["src_ip", "dst_ip"])
    out = []
    for i, (lo, k) in enumerate(slices):
        s = dict(obj, flows=k, name=f"{obj.get('name', 'stream')}#{i}")
        for field in vary:
            if field in ("src_ip", "dst_ip"):
                s[field] = _shift_ip(str(obj.get(field, _DEFAULT_IP[(ipv, field)])), lo)
            elif field in ("src_port", "dst_port"):
                s[field] = _shift_port(int(obj.get(field, _DEFAULT_PORT)), lo, field == "dst_port")
        out.append(s)
    return out


def split_frames(frames: int, n: int) -> int:
    """Frames per sub-stream for a direction of ``frames`` frames over ``n`` sub-streams."""
    return int(math.ceil(int(frames) / max(1, int(n))))


# ------------------------------------------------------------------------------------ latency
def _hist_index(v: int) -> int:
    msb = (v | 1).bit_length() - 1
    if msb > HIST_MAX_MSB:
        return HIST_NBUCKETS - 1
    shift = msb - 7 if msb > 7 else 0
    return (shift << 7) + (v >> shift)


def _bucket_lo(i: int) -> int:
    if i < HIST_LIN:
        return i
    j = i - HIST_LIN
    msb = 8 + j // HIST_SUB
    return (HIST_SUB + j % HIST_SUB) << (msb - 7)


def tgen_percentile(hist: Sequence[tuple[float, int]], p: float, count: int, min_ns: float,
                    max_ns: float) -> float:
    """tgen's percentile (hist.c ``hist_percentile``) from its histogram as the result carries it
    ((inclusive upper bound ns, count) of the non-empty buckets): the midpoint of the bucket
    holding rank ceil(p/100 x count), clamped to [min, max]."""
    if count <= 0:
        return 0.0
    rank = min(max(math.ceil(p / 100.0 * count), 1), count)
    cum = 0
    for hi, c in sorted(hist):
        cum += int(c)
        if cum >= rank:
            i = _hist_index(int(hi))
            lo = float(_bucket_lo(i))
            top = float(max_ns) if i == HIST_NBUCKETS - 1 else float(hi)
            return min(max((lo + top) / 2.0, float(min_ns)), float(max_ns))
    return float(max_ns)


def _merge_ipdv(parts: list[tuple[int, dict[str, float]]]) -> dict[str, float]:
    parts = [(int(d.get("count", n)), d) for n, d in parts if d]
    if not parts:
        return {}
    out: dict[str, float] = {}
    for key, pick in (("min", min), ("max", max), ("p99", max)):
        vals = [d[key] for _, d in parts if key in d]
        if vals:
            out[key] = pick(vals)
    avgs = [(n, d["avg"]) for n, d in parts if "avg" in d and n > 0]
    if avgs:
        out["avg"] = sum(n * a for n, a in avgs) / sum(n for n, _ in avgs)
    counts = [n for n, d in parts if "count" in d]
    if counts:
        out["count"] = float(sum(counts))
    return out


def merge_latency_exact(parts: Sequence[Optional[LatencySummary]]) -> Optional[LatencySummary]:
    """One latency summary for the sub-streams of one direction (module docstring)."""
    have = [p for p in parts if p is not None]
    if not have:
        return None
    ls = [p for p in have if p.count > 0]
    if not ls:
        return LatencySummary(count=0, definition=have[0].definition)
    if len(ls) == 1:
        return ls[0]
    count = sum(s.count for s in ls)
    mn, mx = min(s.min_ns for s in ls), max(s.max_ns for s in ls)
    avg = sum(s.avg_ns * s.count for s in ls) / count
    hist = merge_histograms(s.histogram for s in ls)
    pct = {k: tgen_percentile(hist, float(k), count, mn, mx) for k in ls[0].percentiles_ns}
    pdv: dict[str, float] = {"min": 0.0, "avg": avg - mn, "max": mx - mn}
    if "99" in pct:
        pdv["p99"] = max(0.0, pct["99"] - mn)
    return LatencySummary(count=count, min_ns=mn, avg_ns=avg, max_ns=mx, percentiles_ns=pct,
                          histogram=hist, pdv_ns=pdv,
                          ipdv_ns=_merge_ipdv([(s.count, s.ipdv_ns) for s in ls]),
                          definition=ls[0].definition)


def merge_streams(name: str, parts: Sequence[StreamResult]) -> StreamResult:
    """One direction's result from its sub-streams' (module docstring); one part: itself."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]

    def opt(vals: list[Optional[float]], pick: Any) -> Optional[float]:
        got = [v for v in vals if v is not None]
        return pick(got) if got else None

    by_port: dict[str, int] = {}
    for p in parts:
        for k, v in p.rx_by_port.items():
            by_port[k] = by_port.get(k, 0) + int(v)
    return dataclasses.replace(
        first, name=name,
        intended_pps=sum(p.intended_pps for p in parts),
        achieved_pps=sum(p.achieved_pps for p in parts),
        sent=sum(p.sent for p in parts), received=sum(p.received for p in parts),
        lost=sum(p.lost for p in parts), duplicates=sum(p.duplicates for p in parts),
        reordered=sum(p.reordered for p in parts),
        reorder_extent_max=max(p.reorder_extent_max for p in parts),
        seq_gaps=sum(p.seq_gaps for p in parts),
        latency=merge_latency_exact([p.latency for p in parts]),
        first_loss_ns=opt([p.first_loss_ns for p in parts], min),
        last_loss_ns=opt([p.last_loss_ns for p in parts], max),
        max_rx_gap_ns=opt([p.max_rx_gap_ns for p in parts], max),
        misrouted=sum(p.misrouted for p in parts), rx_by_port=by_port)
