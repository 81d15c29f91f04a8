"""A direction split over several generator cores (nfvperf.tg.tgen_split): flow slices, the
sub-stream objects, and a merge that gives what one stream over the same frames reports."""
from __future__ import annotations

import ipaddress
import random

import pytest

from nfvperf.tg.tgen_split import (HIST_NBUCKETS, _bucket_lo, _hist_index, flow_slices,
                                   merge_latency_exact, merge_streams, split_frames, split_stream,
                                   tgen_percentile)
from nfvperf.trial import LatencySummary, StreamResult


def test_flow_slices_disjoint_and_complete():
    for flows in (1, 2, 3, 7, 256, 1000, 1_000_000):
        for n in (1, 2, 3, 4, 8):
            sl = flow_slices(flows, n)
            assert len(sl) == min(n, flows)
            covered = [f for lo, k in sl for f in range(lo, lo + k)] if flows < 5000 else None
            if covered is not None:
                assert covered == list(range(flows))
            assert sum(k for _, k in sl) == flows
            assert max(k for _, k in sl) - min(k for _, k in sl) <= 1
    assert flow_slices(1, 4) == [(0, 1)]          # one flow: one core


def _tuples(obj: dict) -> set[tuple]:
    """The (src ip, dst ip, src port, dst port) of every flow of a stream object, stepped as
    tgen steps them (tmpl.h: IPs in their low 32 bits, ports wrap in 1..65535, never 4789)."""
    vary = obj.get("vary", ["src_ip", "dst_ip"])
    sip = int(ipaddress.ip_address(obj.get("src_ip", "198.18.0.1")))
    dip = int(ipaddress.ip_address(obj.get("dst_ip", "198.19.0.1")))
    sp, dp = int(obj.get("src_port", 1024)), int(obj.get("dst_port", 1024))
    out = set()
    for f in range(int(obj.get("flows", 1))):
        t_sp = (sp - 1 + f) % 65535 + 1 if "src_port" in vary else sp
        t_dp = (dp - 1 + f) % 65535 + 1 if "dst_port" in vary else dp
        if "dst_port" in vary and t_dp == 4789:
            t_dp = 4790
        out.add((sip + f if "src_ip" in vary else sip, dip + f if "dst_ip" in vary else dip,
                 t_sp, t_dp))
    return out


@pytest.mark.parametrize("obj", [
    {"port": 0, "rx_port": 1, "name": "p0->p1", "flows": 1000},
    {"port": 0, "rx_port": 1, "name": "p0->p1", "flows": 257, "src_ip": "10.0.0.250",
     "vary": ["src_ip", "src_port", "dst_port"], "src_port": 65530, "dst_port": 7},
])
def test_sub_streams_send_the_same_flows(obj):
    whole = _tuples(obj)
    for n in (2, 3, 4):
        subs = split_stream(obj, n)
        assert len(subs) == n and [s["name"] for s in subs] == [f"p0->p1#{i}" for i in range(n)]
        parts = [_tuples(s) for s in subs]
        assert sum(len(p) for p in parts) == len(whole)
        assert set().union(*parts) == whole                       # same flows
        assert all(not (a & b) for i, a in enumerate(parts) for b in parts[i + 1:])  # disjoint
        assert all(s["port"] == 0 and s["rx_port"] == 1 for s in subs)


def test_ipv6_slices_step_the_low_32_bits():
    subs = split_stream({"name": "d", "flows": 4, "ipv6": True}, 2)
    assert [s["src_ip"] for s in subs] == ["2001:2::1", "2001:2::3"]
    assert [s["dst_ip"] for s in subs] == ["2001:2:0:1::1", "2001:2:0:1::3"]


def test_one_flow_is_not_split():
    obj = {"name": "d", "flows": 1}
    assert split_stream(obj, 4) == [obj]


def test_split_frames():
    assert split_frames(1000, 1) == 1000 and split_frames(1000, 2) == 500
    assert split_frames(1001, 2) == 501


# -- tgen's histogram rule, and a merge that is the same as one stream's ---------------------------

def _tgen_hist(values: list[int]) -> tuple[list[tuple[float, int]], int, int, int]:
    """A histogram as tgen's result carries it (non-empty buckets, inclusive upper bound)."""
    acc: dict[int, int] = {}
    for v in values:
        acc[_hist_index(v)] = acc.get(_hist_index(v), 0) + 1
    hist = []
    for i, c in sorted(acc.items()):
        nxt = _bucket_lo(i + 1) - 1 if i + 1 < HIST_NBUCKETS else max(values)
        hist.append((float(nxt), c))
    return hist, min(values), max(values), sum(values)


def _summary(values: list[int]) -> LatencySummary:
    hist, mn, mx, total = _tgen_hist(values)
    n = len(values)
    pct = {k: tgen_percentile(hist, float(k), n, mn, mx) for k in ("50", "90", "99", "99.9", "99.99")}
    return LatencySummary(count=n, min_ns=mn, avg_ns=total / n, max_ns=mx, percentiles_ns=pct,
                          histogram=hist, pdv_ns={"min": 0.0, "avg": total / n - mn, "max": mx - mn,
                                                  "p99": pct["99"] - mn},
                          ipdv_ns={"min": -5.0, "avg": 0.0, "max": 5.0, "p99": 4.0, "count": n - 1})


def test_bucket_bounds_match_hist_h():
    # hist.h: 1 ns buckets below 256, then 128 per power of two; a value is inside its bucket
    for v in (0, 1, 255, 256, 257, 511, 512, 1000, 123456, 2**40 + 17):
        i = _hist_index(v)
        assert _bucket_lo(i) <= v < _bucket_lo(i + 1)
    assert _bucket_lo(_hist_index(256)) == 256 and _bucket_lo(_hist_index(256) + 1) == 258
    assert _hist_index(2**50) == HIST_NBUCKETS - 1


def test_merged_latency_is_one_streams():
    rng = random.Random(7)
    values = [int(rng.lognormvariate(9, 0.6)) for _ in range(20000)]
    whole = _summary(values)
    a, b = values[0::2], values[1::2]            # the same frames over two sub-streams
    merged = merge_latency_exact([_summary(a), _summary(b)])
    assert merged is not None
    assert merged.count == whole.count and merged.min_ns == whole.min_ns
    assert merged.max_ns == whole.max_ns and merged.histogram == whole.histogram
    assert merged.percentiles_ns == whole.percentiles_ns          # tgen's rule, exactly
    assert merged.avg_ns == pytest.approx(whole.avg_ns, rel=1e-12)
    assert merged.pdv_ns["p99"] == whole.pdv_ns["p99"] and merged.pdv_ns["max"] == whole.pdv_ns["max"]
    # IPDV is per sub-stream: min of minima, max of maxima, counts add up
    assert merged.ipdv_ns["count"] == (len(a) - 1) + (len(b) - 1)


def test_merge_streams_sums_and_keeps_one_when_unsplit():
    lat = _summary([1000, 1100, 1200])
    one = StreamResult(name="p0->p1", sent=10, received=9, lost=1, latency=lat)
    assert merge_streams("p0->p1", [one]) is one                  # N = 1: today's result
    p0 = StreamResult(name="p0->p1#0", tx_port=0, rx_port=1, intended_pps=500.0, sent=500,
                      received=499, lost=1, duplicates=2, reordered=3, reorder_extent_max=4,
                      seq_gaps=1, first_loss_ns=5e6, last_loss_ns=5e6, max_rx_gap_ns=4000.0,
                      latency=_summary([1000, 2000]))
    p1 = StreamResult(name="p0->p1#1", tx_port=0, rx_port=1, intended_pps=500.0, sent=500,
                      received=500, reordered=1, reorder_extent_max=9, max_rx_gap_ns=2000.0,
                      misrouted=2, latency=_summary([1500]))
    m = merge_streams("p0->p1", [p0, p1])
    assert (m.name, m.sent, m.received, m.lost, m.duplicates, m.reordered) == \
        ("p0->p1", 1000, 999, 1, 2, 4, )
    assert m.intended_pps == 1000.0 and m.reorder_extent_max == 9 and m.misrouted == 2
    assert (m.first_loss_ns, m.last_loss_ns, m.max_rx_gap_ns) == (5e6, 5e6, 4000.0)
    assert m.latency is not None and m.latency.count == 3 and m.latency.min_ns == 1000
