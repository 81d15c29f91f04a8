"""The measurer boundary.

The search and the test methods see only a :class:`Measurer`.  The core call is
``measure(duration_s, load_pps) -> TrialResult`` (MLRsearch's AbstractMeasurer boundary):
``load_pps`` is the Trial Load *per interface* (per direction), in frames per second.

A few methods need more than a constant-load trial (RFC 9004 back-to-back bursts, system
recovery with a rate change inside one trial, reset with a DUT reset hook).  Those use
:meth:`Measurer.measure_segments`, :meth:`Measurer.measure_burst` and the optional
``reset_hook``; a measurer that cannot do one raises :class:`Unsupported`.

Units are in the names: ``_pps`` frames per second, ``_s`` seconds, ``_ns`` nanoseconds,
``size_b`` L2 frame size including FCS.
"""
from __future__ import annotations

import abc
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping, Optional


class Unsupported(RuntimeError):
    """The measurer cannot run this kind of trial."""


class MeasurerError(RuntimeError):
    """The trial could not be run at all (generator or DUT failure)."""


class DutFailure(MeasurerError):
    """The DUT (switch, VNF) died or stopped answering during a trial."""


@dataclass
class TrafficProfile:
    """Everything about the offered traffic that stays fixed for a search (MLR Traffic Profile)."""

    frame_size_b: int = 64               # L2 incl. FCS; for VXLAN the *inner* size
    imix: Optional[list[tuple[int, int]]] = None   # [(size_b, weight), ...] instead of frame_size_b
    flows_per_port: int = 1
    bidirectional: bool = True
    link_speed_bps: float = 10e9         # per port, used for % line rate and max load
    vxlan: bool = False                  # frames are VXLAN-encapsulated on the wire (+50 B outer)
    vlan: Optional[int] = None
    ip_version: Literal[4, 6] = 4
    latency: bool = True                 # timestamp/measure latency on the test frames
    learning: bool = True                # send RFC 2544 §23 learning frames before the trial
    learning_s: float = 2.0              # and wait this long after them, before the trial's traffic
    drain_s: float = 2.0                 # wait for residual frames after traffic stops
    settle_s: float = 0.0                # wait for the DUT to restabilise after the trial

    @property
    def wire_size_b(self) -> float:
        """Mean L2 size on the wire (outer size for VXLAN)."""
        if self.imix:
            tot = sum(w for _, w in self.imix)
            size = sum(s * w for s, w in self.imix) / tot
        else:
            size = self.frame_size_b
        return size + (50 if self.vxlan else 0)

    @property
    def max_load_pps(self) -> float:
        """Theoretical line rate per interface in fps (METHODOLOGY A1)."""
        return self.link_speed_bps / ((self.wire_size_b + 20) * 8)

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


@dataclass
class LatencySummary:
    """One-way latency of the received test frames (RFC 1242-style: tx timestamp to rx)."""

    count: int = 0
    min_ns: float = 0.0
    avg_ns: float = 0.0
    max_ns: float = 0.0
    percentiles_ns: dict[str, float] = field(default_factory=dict)   # {"50": .., "99.9": ..}
    histogram: list[tuple[float, int]] = field(default_factory=list)  # [(bucket upper bound ns, count)]
    pdv_ns: dict[str, float] = field(default_factory=dict)   # RFC 5481 PDV D(i)-D(min): min/avg/max/p99
    ipdv_ns: dict[str, float] = field(default_factory=dict)  # RFC 3393 IPDV D(i)-D(i-1): min/avg/max/p99 (signed)
    definition: str = "RFC 1242 store-and-forward: tx timestamp to rx, generator clock"

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


@dataclass
class StreamResult:
    """What happened to one stream (one direction, one tx port -> rx port) in one trial."""

    name: str                 # e.g. "p0->p1"
    tx_port: int = 0
    rx_port: int = 1
    intended_pps: float = 0.0
    achieved_pps: float = 0.0
    sent: int = 0
    received: int = 0         # unique test frames received (no duplicates)
    lost: int = 0             # after the drain
    duplicates: int = 0
    reordered: int = 0        # RFC 4737
    reorder_extent_max: int = 0
    seq_gaps: int = 0
    latency: Optional[LatencySummary] = None
    # Time (ns since the trial's first tx) of the last / first lost frame, estimated from the tx
    # timestamps around the gap; None when nothing was lost.  Used by system recovery.
    first_loss_ns: Optional[float] = None
    last_loss_ns: Optional[float] = None
    # Largest tx-time gap between two consecutively received frames (reset, timestamp method).
    max_rx_gap_ns: Optional[float] = None
    # Test frames of this stream that arrived on another port than rx_port (a misforwarding DUT);
    # not in `received`, so they count as lost.  Copies count too (a flooded frame can be both).
    misrouted: int = 0
    # The stream's receive group when its frames may come back on several ports (the members of a
    # bond: tgen's rx_ports): [] = rx_port alone.  rx_by_port: frames received on each member,
    # keyed by the port id as a string (the result's JSON form).
    rx_ports: list[int] = field(default_factory=list)
    rx_by_port: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class TrialResult:
    """One trial, aggregated over all directions, plus the per-stream detail."""

    duration_s: float                  # intended duration (MLR Trial Duration)
    load_pps: float                    # intended load per interface (MLR Trial Load)
    sent: int = 0                      # test frames sent, all directions
    received: int = 0                  # unique test frames received, all directions
    expected: int = 0                  # frames that should have been forwarded (= intended)
    effective_duration_s: float = 0.0  # how long traffic actually took
    streams: list[StreamResult] = field(default_factory=list)
    latency: Optional[LatencySummary] = None   # merged over streams
    valid: bool = True
    invalid_reasons: list[str] = field(default_factory=list)
    tg_counters: dict[str, Any] = field(default_factory=dict)    # port stats + xstats of the generator
    dut_counters: dict[str, Any] = field(default_factory=dict)   # DUT's own counters, if any
    non_test_rx: int = 0               # frames received without a signature (ARP, LLDP, ...)
    pacer_late_max_ns: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    #: what the DUT and the generator counted during this trial (``nfvperf.tg.telemetry``: "dut" =
    #: the difference of the DUT's readings before and after the trial, "generator" = tgen's own
    #: counts) and where its lost frames went ("loss"); {} when the measurer reads none
    telemetry: dict[str, object] = field(default_factory=dict)

    @property
    def loss_ratio(self) -> float:
        """MLR Trial Loss Ratio = 1 - forwarded/expected, over all outputs."""
        exp = self.expected or self.sent
        return 1.0 if exp <= 0 else max(0.0, 1.0 - self.received / exp)

    @property
    def lost(self) -> int:
        return max(0, (self.expected or self.sent) - self.received)

    @property
    def forwarding_rate_pps(self) -> float:
        return self.load_pps * (1.0 - self.loss_ratio)

    def to_dict(self) -> dict[str, object]:
        d = dataclasses.asdict(self)
        d["loss_ratio"] = self.loss_ratio
        d["lost"] = self.lost
        return d


# --- Trial-validity rules (DESIGN "a trial that cannot be trusted ... is marked invalid") ---
# One definition, used by the measurers (tg.tgen, per stream) and by the search's validity
# runner (search.validity, per trial).  Both import them from here: the measurer side must not
# depend on the search package.

#: The generator must send at least this fraction of the intended frames (99.9 %); a trial that
#: sent less did not offer its Trial Load and is invalid.
MIN_SENT_RATIO = 0.999


#: a trial whose traffic took more than 110 % of its intended duration did not offer its Trial
#: Load: the generator sent every frame, but slower (a generator that shares its CPU)
MAX_DURATION_STRETCH = 0.10


def stretched(effective_s: float, intended_s: float) -> bool:
    """The traffic took longer than ``intended_s`` × (1 + :data:`MAX_DURATION_STRETCH`)."""
    return intended_s > 0 and effective_s > intended_s * (1.0 + MAX_DURATION_STRETCH)


def sent_short(sent: float, intended: float) -> bool:
    """The generator sent less than 99.9 % (:data:`MIN_SENT_RATIO`) of the ``intended`` frames.

    Exactly 99.9 % is enough; with ``intended`` ≤ 0 nothing can be short."""
    return sent < MIN_SENT_RATIO * intended


def sent_short_reason(sent: int, intended: int, who: str = "") -> Optional[str]:
    """The invalid-trial reason for :func:`sent_short`, or None if the generator kept up."""
    if not sent_short(sent, intended):
        return None
    return f"{who}{': ' if who else ''}sent {sent} < {MIN_SENT_RATIO * 100:g} % of intended {intended}"


def negative_loss(received: float, reference: float) -> bool:
    """More frames received than were sent (or expected): the counters cannot be trusted."""
    return received > reference


def negative_loss_reason(received: int, reference: int, what: str = "sent",
                         who: str = "") -> Optional[str]:
    """The invalid-trial reason for :func:`negative_loss` (``what`` names the reference:
    "sent" or "expected"), or None."""
    if not negative_loss(received, reference):
        return None
    return f"{who}{': ' if who else ''}received {received} > {what} {reference} (negative loss)"


def counter_deltas(before: Mapping[str, object], after: Mapping[str, object]) -> dict[str, object]:
    """``after − before`` for every integer counter in two readings of a DUT's counters (nested
    dicts), so a trial stores what happened during that trial, not since the DUT came up.

    Floats (averages, ratios, cycles per packet) cannot be subtracted and are left out; a key
    missing from ``before`` counts from 0; a counter that went down (the DUT restarted or
    cleared it in between) keeps its ``after`` value, and its path is listed under
    ``counters_reset``.  Strings and other values are kept as in ``after``."""
    reset: list[str] = []

    def walk(b: object, a: object, path: str) -> object:
        if isinstance(a, dict):
            return {k: walk(b.get(k) if isinstance(b, dict) else None, v, f"{path}{k}.")
                    for k, v in a.items() if not isinstance(v, float)}
        if isinstance(a, int) and not isinstance(a, bool):
            base = b if isinstance(b, int) and not isinstance(b, bool) else 0
            if a < base:
                reset.append(path.rstrip("."))
                return a
            return a - base
        return a

    out = {str(k): walk(before.get(k), v, f"{k}.") for k, v in after.items() if not isinstance(v, float)}
    if reset:
        out["counters_reset"] = reset
    return out


@dataclass
class Segment:
    """One constant-rate piece of a trial whose rate changes over time (system recovery)."""

    duration_s: float
    load_pps: float


class Measurer(abc.ABC):
    """The boundary.  Implementations: tg.sim.SimMeasurer, tg.tgen.TgenMeasurer, tg.iperf3."""

    name: str = "abstract"
    #: True for a software generator that may offer less than the intended load (shared cores,
    #: kernel-backed ports).  The throughput search then calibrates its max load first.
    rate_limited: bool = False
    #: True for a real generator in front of a real DUT: a search then starts with a discarded
    #: warm-up trial that reaches every flow (vhost reconnects, flow set-up, caches), unless the
    #: method's params say otherwise.  False for the modelled DUT.
    warmup_default: bool = False
    #: set by the runner; a measurer may call it before a reset trial (RFC 6201)
    reset_hook: Optional[Callable[[], None]] = None
    #: set by the measurer factory when the topology it measures can change its DUT in place
    #: (``Topology.reconfigure(new_spec)``: between the units of an interleaved study)
    reconfigure_topology: Optional[Callable[..., dict[str, object]]] = None

    @abc.abstractmethod
    def set_profile(self, profile: TrafficProfile) -> None:
        """Fix the traffic profile for the following trials."""

    @abc.abstractmethod
    def measure(self, duration_s: float, load_pps: float) -> TrialResult:
        """One constant-load trial: learning, traffic, drain, settled counters."""

    def measure_segments(self, segments: list[Segment]) -> TrialResult:
        """One trial whose rate changes at segment boundaries (e.g. 110 % then 50 %)."""
        raise Unsupported(f"{self.name} cannot change the rate inside a trial")

    def measure_burst(self, burst_frames: int, burst_pps: float, drain_s: float = 2.0) -> TrialResult:
        """Send ``burst_frames`` back to back at ``burst_pps`` from idle (RFC 9004), then drain."""
        raise Unsupported(f"{self.name} cannot send back-to-back bursts")

    def measure_reset(self, duration_s: float, load_pps: float, reset_at_s: float) -> TrialResult:
        """Constant load with the DUT reset (``reset_hook``) at ``reset_at_s`` (RFC 6201)."""
        raise Unsupported(f"{self.name} cannot reset the DUT")

    def environment(self) -> dict[str, object]:
        """What this measurer knows about the set-up (versions, cores, shared-core warning)."""
        return {"measurer": self.name}

    def close(self) -> None:  # noqa: B027 - optional hook, measurers without resources keep it
        """Release what the measurer holds (no-op by default)."""

    def __enter__(self) -> "Measurer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
