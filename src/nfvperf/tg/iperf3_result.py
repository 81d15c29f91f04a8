"""An iperf3 TCP trial's results: one record per client/server pair (:class:`TcpProcessResult`,
parsed from iperf3's ``-J`` JSON) and their sum (:class:`TcpResult`).  Every bit rate is TCP
payload goodput (:data:`LAYER`)."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Optional

from nfvperf.trial import TrialResult


LAYER = "tcp_payload_goodput"


LAYER_NOTE = ("iperf3 bit rates are TCP payload goodput (application bytes per second through the "
              "socket); TCP/IP/Ethernet headers, retransmissions and ACKs are not counted")


@dataclass
class TcpProcessResult:
    """One iperf3 client/server pair (one port)."""

    index: int
    port: int
    cpu: Optional[int] = None
    streams: int = 0                       # TCP connections iperf3 reported in end.streams
    sender_bps: float = 0.0                # TCP payload goodput, sending side
    receiver_bps: float = 0.0              # TCP payload goodput, receiving side
    sender_bytes: int = 0
    receiver_bytes: int = 0
    # --bidir only: the server->client half (sender_* / receiver_* above are client->server)
    reverse_sender_bps: float = 0.0
    reverse_receiver_bps: float = 0.0
    retransmits: Optional[int] = None      # sender-side TCP retransmits (Linux, from tcp_info)
    seconds: float = 0.0                   # iperf3's measured test length
    cpu_host_pct: Optional[float] = None   # client process CPU utilisation (iperf3 -J)
    cpu_remote_pct: Optional[float] = None  # server process CPU utilisation (iperf3 -J)
    sender_tcp_congestion: Optional[str] = None
    intervals: list[dict[str, float]] = field(default_factory=list)  # [{start_s, end_s, bps, retransmits}]
    client_cmd: list[str] = field(default_factory=list)
    server_cmd: list[str] = field(default_factory=list)
    error: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class TcpResult:
    """One TCP trial: N iperf3 processes x M streams each."""

    duration_s: float
    streams: int                    # per process (-P)
    processes: int
    reverse: bool = False
    bidir: bool = False
    server: str = ""
    client_ns: Optional[str] = None
    server_ns: Optional[str] = None
    layer: str = LAYER
    layer_note: str = LAYER_NOTE
    # Aggregate over processes (sum of per-process averages).  For --bidir these are the
    # client->server half; *_reverse_* the server->client half; total_bps both.
    sender_bps: float = 0.0
    receiver_bps: float = 0.0
    reverse_sender_bps: float = 0.0
    reverse_receiver_bps: float = 0.0
    retransmits: Optional[int] = None
    cpu_host_pct: dict[str, Optional[float]] = field(default_factory=dict)    # mean/max over processes
    cpu_remote_pct: dict[str, Optional[float]] = field(default_factory=dict)
    per_process: list[TcpProcessResult] = field(default_factory=list)
    intervals: list[dict[str, float]] = field(default_factory=list)   # aggregate per interval index
    commands: list[list[str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    valid: bool = True
    started_at: float = 0.0          # unix time the clients were launched
    wall_s: float = 0.0              # wall time of the whole trial (servers up to all down)
    iperf3_version: str = ""
    # where it ran (Iperf3Measurer.in_namespaces: topology, DUT, offloads) and the DUT's
    # counters before/after the trial; empty for the standalone topology
    path: dict[str, Any] = field(default_factory=dict)
    dut_counters: dict[str, Any] = field(default_factory=dict)

    @property
    def total_bps(self) -> float:
        """Receiver goodput of all directions (one direction unless bidir)."""
        return self.receiver_bps + (self.reverse_receiver_bps if self.bidir else 0.0)

    @property
    def throughput_bps(self) -> float:
        """The headline figure (TCP payload goodput, receivers, all directions)."""
        return self.total_bps

    @property
    def invalid_reasons(self) -> list[str]:
        return list(self.errors)

    @property
    def effective_duration_s(self) -> float:
        secs = [p.seconds for p in self.per_process if p.error is None]
        return max(secs) if secs else 0.0

    @property
    def extra(self) -> dict[str, Any]:
        """The keys ``SimMeasurer.measure_tcp`` puts in ``TrialResult.extra``, plus the full record."""
        return {"throughput_bps": self.throughput_bps, "layer": self.layer,
                "streams": self.streams, "processes": self.processes,
                "retransmits": self.retransmits, "tcp": self.to_dict()}

    def to_trial_result(self) -> TrialResult:
        """The same trial as a :class:`TrialResult` (load 0, no frame counts) for the recorder."""
        return TrialResult(duration_s=self.duration_s, load_pps=0.0,
                           effective_duration_s=self.effective_duration_s, valid=self.valid,
                           invalid_reasons=self.invalid_reasons, extra=self.extra)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["total_bps"] = self.total_bps
        return d


def _parse_json(text: str, stderr: str, what: str) -> tuple[Optional[dict], Optional[str]]:
    """iperf3 -J output -> (dict, error).  iperf3 puts its own errors in the "error" key."""
    if not text.strip():
        return None, f"{what}: no JSON output (stderr: {stderr.strip()[-500:] or 'empty'})"
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        return None, (f"{what}: cannot parse iperf3 JSON ({e}); stderr: {stderr.strip()[-500:] or 'empty'};"
                      f" stdout starts: {text[:200]!r}")
    if not isinstance(doc, dict):
        return None, f"{what}: iperf3 JSON is not an object"
    if doc.get("error"):
        return doc, f"{what}: iperf3 error: {doc['error']}"
    return doc, None


def parse_end(pr: TcpProcessResult, doc: dict[str, Any], bidir: bool, no_end: str) -> None:
    """A client's iperf3 ``-J`` document (its end summary and intervals) into ``pr``; ``pr.error``
    is ``no_end`` when the document has no end summary."""
    end = doc.get("end") or {}
    ssent = end.get("sum_sent") or {}
    srecv = end.get("sum_received") or {}
    if not ssent and not srecv:
        pr.error = no_end
        return
    pr.sender_bps = float(ssent.get("bits_per_second", 0.0))
    pr.receiver_bps = float(srecv.get("bits_per_second", 0.0))
    pr.sender_bytes = int(ssent.get("bytes", 0))
    pr.receiver_bytes = int(srecv.get("bytes", 0))
    pr.seconds = float(srecv.get("seconds", ssent.get("seconds", 0.0)))
    rtx = ssent.get("retransmits")
    if bidir:
        rs = end.get("sum_sent_bidir_reverse") or {}
        rr = end.get("sum_received_bidir_reverse") or {}
        pr.reverse_sender_bps = float(rs.get("bits_per_second", 0.0))
        pr.reverse_receiver_bps = float(rr.get("bits_per_second", 0.0))
        if rtx is not None and rs.get("retransmits") is not None:
            rtx = int(rtx) + int(rs["retransmits"])
    pr.retransmits = int(rtx) if rtx is not None else None
    # number of TCP connections: bidir lists each stream once per direction
    n = len(end.get("streams") or [])
    pr.streams = n // 2 if bidir else n
    cpu = end.get("cpu_utilization_percent") or {}
    pr.cpu_host_pct = cpu.get("host_total")
    pr.cpu_remote_pct = cpu.get("remote_total")
    pr.sender_tcp_congestion = end.get("sender_tcp_congestion")
    for iv in doc.get("intervals") or []:
        s = iv.get("sum") or {}
        row = {"start_s": float(s.get("start", 0.0)), "end_s": float(s.get("end", 0.0)),
               "bps": float(s.get("bits_per_second", 0.0))}
        if s.get("retransmits") is not None:
            row["retransmits"] = int(s["retransmits"])
        if bidir:
            rsum = iv.get("sum_bidir_reverse") or {}
            row["reverse_bps"] = float(rsum.get("bits_per_second", 0.0))
        pr.intervals.append(row)


def aggregate(res: TcpResult) -> None:
    """The per-process results of ``res`` summed (rates, retransmits, CPU mean/max, intervals)."""
    ok = [p for p in res.per_process if p.error is None]
    res.sender_bps = sum(p.sender_bps for p in ok)
    res.receiver_bps = sum(p.receiver_bps for p in ok)
    res.reverse_sender_bps = sum(p.reverse_sender_bps for p in ok)
    res.reverse_receiver_bps = sum(p.reverse_receiver_bps for p in ok)
    rtx = [p.retransmits for p in ok if p.retransmits is not None]
    res.retransmits = sum(rtx) if rtx else None
    for attr, dst in (("cpu_host_pct", res.cpu_host_pct), ("cpu_remote_pct", res.cpu_remote_pct)):
        vals = [getattr(p, attr) for p in ok if getattr(p, attr) is not None]
        dst["mean"] = sum(vals) / len(vals) if vals else None
        dst["max"] = max(vals) if vals else None
    # aggregate per-interval series by interval index (processes start within ms of each
    # other; the index is the honest alignment -- the start offsets are not shifted)
    n = min((len(p.intervals) for p in ok), default=0)
    for k in range(n):
        rows = [p.intervals[k] for p in ok]
        agg = {"start_s": rows[0]["start_s"], "end_s": rows[0]["end_s"],
               "bps": sum(r["bps"] for r in rows)}
        if all("retransmits" in r for r in rows):
            agg["retransmits"] = sum(r["retransmits"] for r in rows)
        if res.bidir:
            agg["reverse_bps"] = sum(r.get("reverse_bps", 0.0) for r in rows)
        res.intervals.append(agg)
