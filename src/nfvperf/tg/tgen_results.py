"""Reading tgen's answers: ``trial.result`` streams and latency (histograms merged, percentiles
recomputed), the frames a port did not send, and what ``ping`` says of the generator's clock
(``tgen/PROTOCOL.md`` §3, §6)."""
from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence

from nfvperf.trial import LatencySummary, StreamResult

PERCENTILES = ("50", "90", "99", "99.9", "99.99")
LATENCY_DEFINITION = ("tgen: tx timestamp (TSC, written as the frame is queued for TX) to rx "
                      "poll time on the generator clock; includes both generator ports' "
                      "queueing; RFC 1242 store-and-forward approximation")


def tsc_calibration_record(ping: dict[str, Any]) -> dict[str, Any]:
    """What tgen said about its clock (``ping``: PROTOCOL.md §3), for the run's environment: the
    frequency DPDK reported, the one tgen uses, the correction in ppm and how it was measured."""
    used, dpdk = ping.get("tsc_hz"), ping.get("tsc_hz_dpdk")
    cal = ping.get("tsc_calibration")
    if dpdk is None or not isinstance(cal, dict):
        # a tgen from before the calibration used DPDK's value (rounded to 10 MHz)
        return {"method": "dpdk", "tsc_hz": used, "tsc_hz_dpdk": used, "correction_ppm": 0.0,
                "reason": "tgen without TSC calibration"}
    rec: dict[str, Any] = {"method": cal.get("method"), "tsc_hz": used, "tsc_hz_dpdk": dpdk,
                           "correction_ppm": (float(used) / float(dpdk) - 1.0) * 1e6
                           if used and dpdk else None}
    rec.update({k: v for k, v in cal.items() if k not in rec and k != "correction_ppm"})
    return rec


def split_not_sent(raw: dict[str, Any]) -> tuple[dict[int, int], list[str]]:
    """Frames tgen's workers handed a port that the port's own counters did not count out
    (``ports[].tx.not_sent``, PROTOCOL.md §6), split over the streams sending on that port in
    proportion to what each handed it (largest remainder, so the shares add up).  Returns
    {stream id: frames not sent} and one note per such port."""
    streams = [s for s in raw.get("streams") or [] if "id" in s]
    cut: dict[int, int] = {}
    notes: list[str] = []
    for p in raw.get("ports") or []:
        tx = p.get("tx")
        if not isinstance(tx, dict) or not int(tx.get("not_sent") or 0) or "id" not in p:
            continue
        port = int(p["id"])
        mine = [(int(s["id"]), int(s.get("sent") or 0)) for s in streams
                if int(s.get("tx_port", -1)) == port]
        total = sum(n for _, n in mine)
        if total <= 0:
            continue
        n = min(int(tx["not_sent"]), total)
        shares = {sid: n * sent // total for sid, sent in mine}
        rest = n - sum(shares.values())
        for sid, _ in sorted(mine, key=lambda x: -((n * x[1]) % total))[:rest]:
            shares[sid] += 1
        for sid, k in shares.items():
            if k:
                cut[sid] = cut.get(sid, 0) + k
        counted = [f"the PMD counted {int(tx['port_opackets']):,} out"
                   if tx.get("port_opackets") is not None else None,
                   f"kernel interface {tx.get('iface')} transmitted {int(tx['iface_tx_packets']):,}"
                   f" (tx_dropped {int(tx.get('iface_tx_dropped') or 0):,})"
                   if tx.get("iface_tx_packets") is not None else None]
        notes.append(f"generator's port {port} dropped {n:,} frames at TX: tgen handed it "
                     f"{total:,}, " + ", ".join(c for c in counted if c)
                     + "; counted as not sent")
    return cut, notes

def percentiles_from_histogram(hist: Sequence[tuple[float, int]], pcts: Iterable[str] = PERCENTILES,
                               min_ns: Optional[float] = None, max_ns: Optional[float] = None
                               ) -> dict[str, float]:
    """Percentiles from a histogram of (bucket upper bound ns, count), sorted by bound.

    The value is interpolated linearly inside the bucket that holds the rank and clamped to the
    observed [min, max]; a bucket's lower bound is the previous bucket's upper bound (or min)."""
    buckets = sorted((float(b), int(c)) for b, c in hist if int(c) > 0)
    total = sum(c for _, c in buckets)
    out: dict[str, float] = {}
    if total <= 0:
        return out
    for p in pcts:
        rank = float(p) / 100.0 * total
        cum = 0
        prev: Optional[float] = None
        val = buckets[-1][0]
        for bound, cnt in buckets:
            lo = prev if prev is not None else min(float(min_ns or 0.0), bound)
            if cum + cnt >= rank:
                val = lo + (bound - lo) * (rank - cum) / cnt
                break
            cum += cnt
            prev = bound
        if min_ns is not None:
            val = max(val, float(min_ns))
        if max_ns is not None:
            val = min(val, float(max_ns))
        out[p] = val
    return out


def merge_histograms(hists: Iterable[Sequence[tuple[float, int]]]) -> list[tuple[float, int]]:
    acc: dict[float, int] = {}
    for h in hists:
        for b, c in h:
            acc[float(b)] = acc.get(float(b), 0) + int(c)
    return sorted((b, c) for b, c in acc.items() if c)


def _merge_var(parts: list[tuple[int, dict[str, float]]]) -> dict[str, float]:
    """Merge PDV/IPDV dicts (min/avg/max/p99) of several streams: min of mins, count-weighted
    average, max of maxes, and the largest per-stream p99 (a conservative bound)."""
    parts = [(n, d) for n, d in parts if d and n > 0]
    if not parts:
        return {}
    out: dict[str, float] = {}
    for k in ("min", "avg", "max", "p99"):
        have = [(n, d[k]) for n, d in parts if k in d]
        if have:
            out[k] = (sum(n * v for n, v in have) / sum(n for n, _ in have) if k == "avg"
                      else (min if k == "min" else max)(v for _, v in have))
    return out


def merge_latency(summaries: Iterable[Optional[LatencySummary]]) -> Optional[LatencySummary]:
    """Merge per-stream latency: min of mins, count-weighted mean, max of maxes, the histograms
    summed and the percentiles recomputed from the merged histogram."""
    ls = [s for s in summaries if s is not None and s.count > 0]
    if not ls:
        return None
    count = sum(s.count for s in ls)
    mn, mx = min(s.min_ns for s in ls), max(s.max_ns for s in ls)
    avg = sum(s.avg_ns * s.count for s in ls) / count
    hist = merge_histograms(s.histogram for s in ls)
    if len(ls) == 1 and ls[0].percentiles_ns:
        pct = dict(ls[0].percentiles_ns)     # one stream: the generator's own figures
    else:
        pct = percentiles_from_histogram(hist, min_ns=mn, max_ns=mx) if hist else {}
    return LatencySummary(count=count, min_ns=mn, avg_ns=avg, max_ns=mx, percentiles_ns=pct,
                          histogram=hist,
                          pdv_ns=_merge_var([(s.count, s.pdv_ns) for s in ls]),
                          ipdv_ns=_merge_var([(s.count, s.ipdv_ns) for s in ls]),
                          definition=ls[0].definition)


def latency_from_wire(d: Optional[dict[str, Any]]) -> Optional[LatencySummary]:
    if not d:
        return None
    count = int(d.get("count") or 0)
    if count <= 0:
        return LatencySummary(count=0)
    hist = [(float(b), int(c)) for b, c in (d.get("histogram") or [])]
    pct = {str(k): float(v) for k, v in (d.get("percentiles_ns") or {}).items() if v is not None}
    return LatencySummary(
        count=count, min_ns=float(d.get("min_ns") or 0.0), avg_ns=float(d.get("avg_ns") or 0.0),
        max_ns=float(d.get("max_ns") or 0.0), percentiles_ns=pct, histogram=hist,
        pdv_ns={k: float(v) for k, v in (d.get("pdv_ns") or {}).items() if v is not None},
        ipdv_ns={k: float(v) for k, v in (d.get("ipdv_ns") or {}).items() if v is not None},
        definition=LATENCY_DEFINITION)


def _opt_float(v: Any) -> Optional[float]:
    return None if v is None else float(v)


def stream_from_wire(s: dict[str, Any], sid: int) -> StreamResult:
    """One stream of ``trial.result`` (PROTOCOL.md §6) as a :class:`StreamResult`."""
    multi = len(s.get("rx_ports") or []) > 1
    return StreamResult(
        name=str(s.get("name") or f"stream{sid}"), tx_port=int(s.get("tx_port", 0)),
        rx_port=int(s.get("rx_port", 0)), intended_pps=float(s.get("intended_pps") or 0.0),
        achieved_pps=float(s.get("achieved_pps") or 0.0), sent=int(s.get("sent") or 0),
        received=int(s.get("received") or 0), lost=int(s.get("lost") or 0),
        duplicates=int(s.get("duplicates") or 0), reordered=int(s.get("reordered") or 0),
        reorder_extent_max=int(s.get("reorder_extent_max") or 0),
        seq_gaps=int(s.get("seq_gaps") or 0), latency=latency_from_wire(s.get("latency")),
        first_loss_ns=_opt_float(s.get("first_loss_ns")),
        last_loss_ns=_opt_float(s.get("last_loss_ns")),
        max_rx_gap_ns=_opt_float(s.get("max_rx_gap_ns")),
        misrouted=int(s.get("misrouted") or 0),
        rx_ports=[int(p) for p in s.get("rx_ports") or []] if multi else [],
        rx_by_port={str(k): int(v) for k, v in (s.get("rx_by_port") or {}).items()} if multi else {})
