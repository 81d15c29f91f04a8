"""Telemetry per trial (issue 28): what the DUT and the generator counted while a trial ran, where
the trial's frames were lost, and what bound it.

A DUT adapter reads its telemetry with :meth:`nfvperf.dut.base.DutAdapter.telemetry` (one
*reading*: cumulative counters and gauges in the shape below); the measurer reads it before a
trial starts (before its learning frames) and after the generator reports the trial done (after
the drain), both outside the measured interval, and stores the difference
(:func:`telemetry_delta`) with the trial (``TrialResult.telemetry``).  What a DUT cannot report is
:data:`NA` ("not available"), never zero.

A DUT reading::

    {"adapter": "ovs-dpdk",
     "pmds": {"pmd core 1": {packets, simple_match_hits, emc_hits, ...}} | NA,
     "datapath_flows": int | NA,                  # a gauge: the delta keeps before and after
     "drops": {reason: n} | NA,                   # frames the DUT dropped inside (OVS: datapath_drop_*)
     "ports": {name: {rx_packets, tx_packets, rx_dropped, tx_dropped, rx_missed, ...}},
     "vnfs": {vnf name: {"ports": {...}}}}        # (the topology adds its VNFs' readings)

The generator's part (:func:`generator_telemetry`) comes from tgen's own trial result.
:func:`loss_account` says where a trial's lost frames went; :func:`pmd_summary` and
:func:`explain_trial` condense the counters into the one line a report prints.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Optional, Sequence, TypeGuard, Union

#: the value of a counter the DUT (or generator) cannot report: never 0
NA = "not available"

#: per-PMD counters (pmd-stats-show, OVS 3.x names made plain)
PMD_FIELDS = ("packets", "recirculations", "phwol_hits", "simple_match_hits", "emc_hits", "smc_hits",
              "megaflow_hits", "upcalls", "failed_upcalls", "busy_cycles", "idle_cycles")
#: the datapath stages a packet's lookup ends at, in the order OVS tries them; the two upcall
#: counters are the misses (a failed upcall, e.g. the datapath's flow limit reached, still
#: forwards the packet by the slow path but installs no flow)
PATH_FIELDS = ("phwol_hits", "simple_match_hits", "emc_hits", "smc_hits", "megaflow_hits", "upcalls",
               "failed_upcalls")
PATH_NAMES = {"phwol_hits": "HW offload", "simple_match_hits": "simple match", "emc_hits": "EMC",
              "smc_hits": "SMC", "megaflow_hits": "megaflow", "upcalls": "upcalls",
              "failed_upcalls": "failed upcalls"}
#: per-port counters; ``rx_dropped`` includes ``rx_missed`` and ``rx_nombuf`` where a DUT has them
PORT_FIELDS = ("rx_packets", "tx_packets", "rx_dropped", "tx_dropped", "rx_missed", "rx_nombuf",
               "rx_errors", "tx_errors", "tx_retries")
#: readings that are levels, not counts: a delta keeps {"before", "after"}
GAUGES = ("datapath_flows",)


def available(v: Any) -> TypeGuard[Union[int, float]]:
    """A counter the reader could report (an int or float, not :data:`NA` or missing)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def section(d: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``d[key]`` when it is a dict (a telemetry part), else {} (missing, NA, an error)."""
    v = d.get(key)
    return v if isinstance(v, dict) else {}


def port_reading(counters: Mapping[str, Any], offers: Sequence[str] = PORT_FIELDS) -> dict[str, Any]:
    """One port's counters in the telemetry's names: every field of :data:`PORT_FIELDS`, those the
    source does not have (or ``offers`` leaves out) :data:`NA`."""
    return {k: (int(counters[k]) if k in offers and available(counters.get(k)) else NA) for k in PORT_FIELDS}


def dut_reading(adapter: str, ports: Mapping[str, Mapping[str, Any]], *, pmds: Any = NA,
                datapath_flows: Any = NA, drops: Any = NA, port_offers: Sequence[str] = PORT_FIELDS,
                extra: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """A DUT reading (module docstring) from port counters and, where the DUT has them, PMDs,
    datapath flows and drop counters."""
    return {"adapter": adapter, "pmds": pmds, "datapath_flows": datapath_flows, "drops": drops,
            "ports": {str(n): port_reading(c, port_offers) for n, c in ports.items()}, **(extra or {})}


# ------------------------------------------------------------------------------------ deltas
def telemetry_delta(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """``after − before`` of two readings: counters subtracted, :data:`NA` kept, gauges
    (:data:`GAUGES`) as ``{"before", "after"}``.  A counter that went down (the DUT restarted in
    between) keeps its ``after`` value and its path is listed under ``counters_reset``."""
    reset: list[str] = []

    def walk(b: Any, a: Any, path: str) -> Any:
        if isinstance(a, dict):
            bd = b if isinstance(b, dict) else {}
            return {k: (({"before": bd.get(k, NA), "after": v}) if k in GAUGES
                        else walk(bd.get(k), v, f"{path}{k}.")) for k, v in a.items()}
        if available(a) and isinstance(a, int):
            base = b if available(b) and isinstance(b, int) else 0
            if a < base:
                reset.append(path.rstrip("."))
                return a
            return a - base
        return a

    out = walk(before, after, "")
    if reset:
        out["counters_reset"] = reset
    return out


class TelemetryProbe:
    """Reads a telemetry source before and after a trial and gives the trial's difference.

    ``read`` returns a reading (or raises); a failed read is stored as the error, never lost with
    the trial.  The reads' own time is kept (``read_s``), so a report can show they lie outside
    the measured interval and what they cost."""

    def __init__(self, read: Optional[Callable[[], Mapping[str, Any]]]):
        self.read = read
        self._before: Optional[Mapping[str, Any]] = None
        self._error: Optional[str] = None
        self._read_s = 0.0

    def _timed(self) -> Mapping[str, Any]:
        assert self.read is not None
        t0 = time.monotonic()
        try:
            return self.read()
        finally:
            self._read_s += time.monotonic() - t0

    def before(self) -> None:
        self._before, self._error, self._read_s = None, None, 0.0
        if self.read is None:
            return
        try:
            self._before = dict(self._timed())
        except Exception as e:  # noqa: BLE001 - the trial then stores the error, not telemetry
            self._error = f"{type(e).__name__}: {e}"

    def after(self) -> dict[str, Any]:
        """The trial's telemetry: the difference, or ``{"error": ...}``; NA when there is no source."""
        if self.read is None:
            return {"available": NA}
        if self._before is None:
            return {"error": f"reading before the trial failed: {self._error}"}
        try:
            after = dict(self._timed())
        except Exception as e:  # noqa: BLE001
            return {"error": f"reading after the trial failed: {type(e).__name__}: {e}"}
        out = telemetry_delta(self._before, after)
        out["read_s"] = round(self._read_s, 4)
        return out


# --------------------------------------------------------------------------------- generator
def generator_telemetry(raw: Mapping[str, Any], sent: int, expected: int, not_sent_at_tx: int,
                        held_back: bool = False) -> dict[str, Any]:
    """The generator's side of a trial from tgen's ``trial.result`` (PROTOCOL.md §6): frames it
    did not send (``not_sent``: intended − sent, of which ``not_sent_at_tx`` its ports dropped at
    TX; ``held_back``: because the DUT's ring was full, tgen's backpressure), TX ring full / no
    free mbuf events, the pacer's worst lateness, and per port the RX frames it missed
    (``imissed``, ``rx_nombuf``, ``ierrors``), and the frames sent, received and lost per interval
    (``intervals``: loss over time), and how busy its worker lcores were while the traffic ran
    (``lcores``: ``{"lcore N": {"busy_share", "tx", "rx"}}``; ``lcore_busy``: the busiest TX
    lcore's share; :data:`NA` from a tgen that does not report it)."""
    streams = raw.get("streams") or []
    lcores = {f"lcore {w.get('lcore')}": {"busy_share": w["busy_share"], "tx": bool(w.get("tx")),
                                          "rx": bool(w.get("rx"))}
              for w in raw.get("workers") or [] if isinstance(w.get("busy_share"), (int, float))}
    tx_busy = [float(v["busy_share"]) for v in lcores.values() if v["tx"]]
    ports = {}
    for p in raw.get("ports") or []:
        st = p.get("stats") or {}
        ports[f"port{p.get('id')}"] = {"rx_packets": st.get("ipackets", NA), "tx_packets": st.get("opackets", NA),
                                       "rx_missed": st.get("imissed", NA), "rx_nombuf": st.get("rx_nombuf", NA),
                                       "rx_errors": st.get("ierrors", NA), "tx_errors": st.get("oerrors", NA)}
    return {"intended": int(expected), "sent": int(sent), "not_sent": max(0, int(expected) - int(sent)),
            "not_sent_at_tx": int(not_sent_at_tx),
            "tx_ring_full": sum(int(s.get("tx_retries") or 0) for s in streams),
            "tx_nombuf": sum(int(s.get("tx_nombuf") or 0) for s in streams),
            "pacer_late_max_ns": float(raw.get("pacer_late_max_ns") or 0.0),
            "effective_duration_s": float(raw.get("effective_duration_s") or 0.0),
            "held_back": bool(held_back), "lcore_busy": max(tx_busy) if tx_busy else NA,
            "lcores": lcores or NA, "ports": ports,
            # loss over time: tgen's frames sent/received/lost per interval (PROTOCOL.md §6)
            "intervals": raw.get("intervals") if isinstance(raw.get("intervals"), dict) else NA}


# ------------------------------------------------------------------------------ loss account
#: the places a frame can be lost, in the order along its path, and how a report names them
LOSS_NAMES = {"not_sent": "not sent by the generator",
              "dut_rx_full": "held back by the DUT's full RX ring (not taken from the generator)",
              "dut_rx": "missed at the DUT's RX",
              "dut_inside": "dropped inside the DUT", "dut_tx": "dropped at the DUT's TX",
              "vnf": "dropped by the VNFs", "generator_rx": "missed at the generator's RX",
              "misrouted": "arrived on the wrong generator port", "unaccounted": "unaccounted"}


def _sum_ports(ports: Any, field: str) -> tuple[Any, dict[str, int]]:
    """Sum of ``field`` over ports (NA when no port reports it) and the ports with a count."""
    if not isinstance(ports, dict) or not ports:
        return NA, {}
    vals = {n: c.get(field) for n, c in ports.items() if isinstance(c, dict)}
    have = {n: int(v) for n, v in vals.items() if available(v)}
    if not have:
        return NA, {}
    return sum(have.values()), {n: v for n, v in have.items() if v}


def _drops(drops: Any) -> tuple[Any, dict[str, int]]:
    if not isinstance(drops, dict):
        return NA, {}
    have = {k: int(v) for k, v in drops.items() if available(v) and v}
    return sum(have.values()), have


def loss_account(trial: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    """Where a trial's lost frames went (a stored trial: ``TrialResult.to_dict()``), as far as
    its telemetry allows; None for a trial without loss.

    ``{"lost": n, "parts": {place: n | NA}, "ports": {place: {port: n}}, "unaccounted": n,
    "excess": n}``: the parts that are available plus ``unaccounted`` add up to ``lost``.  When
    the counters count more drops than frames were lost (they also see learning and non-test
    frames) ``unaccounted`` is 0 and ``excess`` says by how much they overshoot."""
    expected = int(trial.get("expected") or trial.get("sent") or 0)
    lost = max(0, expected - int(trial.get("received") or 0))
    if lost <= 0:
        return None
    tel = trial.get("telemetry") or {}
    dut = section(tel, "dut")
    gen = section(tel, "generator")
    parts: dict[str, Any] = {}
    ports: dict[str, dict[str, int]] = {}
    sent = int(trial.get("sent") or 0)
    # a vhost-user/memif DUT that does not empty its RX ring holds the generator back: the
    # frames it did not take are the DUT's loss at its RX (tgen's `backpressure`), not the generator's
    held = bool((trial.get("extra") or {}).get("backpressure"))
    parts["not_sent"] = 0 if held else max(0, expected - sent)
    parts["dut_rx_full"] = max(0, expected - sent) if held else 0
    parts["dut_rx"], ports["dut_rx"] = _sum_ports(dut.get("ports"), "rx_dropped")
    parts["dut_inside"], ports["dut_inside"] = _drops(dut.get("drops"))
    parts["dut_tx"], ports["dut_tx"] = _sum_ports(dut.get("ports"), "tx_dropped")
    vnf_total: Any = NA
    for name, v in (dut.get("vnfs") or {}).items():
        for f in ("rx_dropped", "tx_dropped"):
            n, per = _sum_ports((v or {}).get("ports"), f)
            if available(n):
                vnf_total = (vnf_total if available(vnf_total) else 0) + n
                at = ports.setdefault("vnf", {})
                for p, c in per.items():
                    at[f"{name}:{p}"] = at.get(f"{name}:{p}", 0) + c
    parts["vnf"] = vnf_total if dut.get("vnfs") else 0
    gm, gper = _sum_ports(gen.get("ports"), "rx_missed")
    gn, nper = _sum_ports(gen.get("ports"), "rx_nombuf")
    parts["generator_rx"] = (gm if available(gm) else 0) + (gn if available(gn) else 0) \
        if available(gm) or available(gn) else NA
    ports["generator_rx"] = {p: gper.get(p, 0) + nper.get(p, 0) for p in {**gper, **nper}}
    parts["misrouted"] = int((trial.get("extra") or {}).get("misrouted") or 0)
    counted = sum(int(v) for v in parts.values() if available(v))
    return {"lost": lost, "parts": parts, "ports": {k: v for k, v in ports.items() if v},
            "unaccounted": max(0, lost - counted), "excess": max(0, counted - lost)}


def loss_text(acc: Optional[Mapping[str, Any]], top: int = 3) -> str:
    """One line: the loss and its largest parts with their ports, then what is not available."""
    if not acc:
        return "no loss"
    lost = int(acc["lost"])
    parts = acc.get("parts") or {}
    items = [(k, int(v)) for k, v in parts.items() if available(v) and v]
    items.append(("unaccounted", int(acc.get("unaccounted") or 0)))
    items = sorted((kv for kv in items if kv[1]), key=lambda kv: -kv[1])
    items = [kv for kv in items if kv[1] * 200 >= lost] or items[:1]     # parts of 0.5 % and more
    bits = []
    for k, v in items[:top]:
        where = (acc.get("ports") or {}).get(k) or {}
        at = max(where.items(), key=lambda kv: kv[1])[0] if where else ""
        bits.append(f"{100.0 * v / lost:.0f} % {LOSS_NAMES.get(k, k)}" + (f" ({at})" if at else ""))
    na = [LOSS_NAMES[k] for k, v in parts.items() if not available(v)]
    text = f"{lost:,} lost: " + (", ".join(bits) if bits else "nothing located")
    if int(acc.get("excess") or 0) * 1000 > lost:
        text += f"; counters exceed the loss by {int(acc['excess']):,} (they also count non-test frames)"
    if na:
        text += "; not available: " + ", ".join(na)
    return text


# ------------------------------------------------------------------------------ PMD summary
def pmd_summary(tel: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    """The DUT's PMDs over a trial: packets, each lookup stage's share of the packets, processing
    cycles per packet, and the busiest PMD's busy share (processing cycles over processing + idle
    cycles, as OVS's pmd-perf-show counts them: the time the PMD ran, not the time it was
    descheduled).  None when the DUT has no PMD telemetry."""
    dut = section(tel, "dut")
    pmds = dut.get("pmds")
    if not isinstance(pmds, dict) or not pmds:
        return None
    tot: dict[str, int] = {}
    busiest: tuple[float, str] = (-1.0, "")
    for name, c in pmds.items():
        if not isinstance(c, dict):
            continue
        for k in PMD_FIELDS:
            if available(c.get(k)):
                tot[k] = tot.get(k, 0) + int(c[k])
        busy, idle = c.get("busy_cycles"), c.get("idle_cycles")
        if not (available(busy) and available(idle) and (busy + idle) > 0):
            continue
        share = float(busy) / float(busy + idle)
        busiest = max(busiest, (share, name))
    pk = tot.get("packets", 0)
    return {"packets": pk, "pmds": len(pmds),
            "path_shares": {k: tot[k] / pk for k in PATH_FIELDS if k in tot and pk},
            "cycles_per_packet": tot["busy_cycles"] / pk if pk and "busy_cycles" in tot else NA,
            "busiest": {"pmd": busiest[1], "busy_share": busiest[0]} if busiest[0] >= 0 else NA,
            "datapath_flows": section(dut, "datapath_flows").get("after", NA)}


def pmd_text(s: Optional[Mapping[str, Any]]) -> str:
    """``PMD core 1 100 % busy, 212 cycles/packet, 99 % simple match``."""
    if not s:
        return "PMD telemetry not available"
    bits = []
    b = s.get("busiest")
    if isinstance(b, dict):
        bits.append(f"{b['pmd'].replace('pmd', 'PMD')} {100 * b['busy_share']:.0f} % busy")
    if available(s.get("cycles_per_packet")):
        bits.append(f"{s['cycles_per_packet']:,.0f} cycles/packet")
    shares = sorted(((v, k) for k, v in (s.get("path_shares") or {}).items() if v >= 0.01), reverse=True)
    bits += [f"{100 * v:.0f} % {PATH_NAMES[k]}" for v, k in shares[:3]]
    if available(s.get("datapath_flows")):
        bits.append(f"{int(s['datapath_flows']):,} datapath flows")
    return ", ".join(bits) if bits else "no packets through the PMDs"


def generator_cause(tel: Mapping[str, Any]) -> Optional[str]:
    """What held the generator back in a trial (None: it offered the load): frames not sent,
    TX ring full, no free mbuf, a late pacer."""
    gen = section(tel, "generator")
    if not gen or gen.get("held_back"):
        return None     # (a DUT that held the generator back bound the trial, not the generator)
    intended = int(gen.get("intended") or 0)
    ns = int(gen.get("not_sent") or 0)
    if intended <= 0 or ns < 0.001 * intended:
        return None
    bits = [f"{100.0 * ns / intended:.1f} % of frames not sent"]
    if gen.get("not_sent_at_tx"):
        bits.append(f"{int(gen['not_sent_at_tx']):,} dropped at its own TX")
    if gen.get("tx_ring_full"):
        bits.append(f"TX ring full {int(gen['tx_ring_full']):,} times")
    if gen.get("tx_nombuf"):
        bits.append(f"no free mbuf {int(gen['tx_nombuf']):,} times")
    if gen.get("pacer_late_max_ns"):
        bits.append(f"pacer up to {float(gen['pacer_late_max_ns']) / 1e3:,.0f} µs late")
    busy = gen.get("lcore_busy")
    bits.append("lcore busy share not available" if not available(busy) else f"TX lcore {100 * busy:.0f} % busy")
    return "tgen: " + ", ".join(bits)


def explain_trial(trial: Mapping[str, Any], label: str = "") -> str:
    """The one line a report prints for a result made by ``trial`` (a stored trial):
    ``DUT-bound: PMD core 1 100 % busy, 212 cycles/packet, 99 % simple match`` or
    ``harness-bound: tgen: 3.0 % of frames not sent, ...``.  ``label`` is the bound the harness
    ceiling gave (empty or "—": decided here from the telemetry)."""
    tel = trial.get("telemetry") or {}
    if not tel or "dut" not in tel and "generator" not in tel:
        return f"{label + ': ' if label and label != '—' else ''}telemetry not available"
    cause = generator_cause(tel)
    if cause:
        return f"harness-bound: {cause}"
    lab = label if label and label != "—" else "DUT-bound"
    dut = section(tel, "dut")
    if dut.get("error"):
        return f"{lab}: DUT telemetry failed ({dut['error']})"
    s = pmd_summary(tel)
    if s is not None:
        return f"{lab}: {pmd_text(s)}"
    return f"{lab}: PMD telemetry not available ({dut.get('adapter') or 'DUT'})"
