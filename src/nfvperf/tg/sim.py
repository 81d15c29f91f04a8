"""SimMeasurer: a modelled DUT behind the Measurer boundary.

Nothing sleeps (unless ``time_scale`` > 0: then a trial sleeps duration × time_scale): trials
return at once and *report* their intended durations; the measurer keeps
``total_trial_s`` (traffic time) and ``wall_s`` (traffic + RFC 2544 §23 learning/drain/settle)
so searches can be costed.  Every trial draws from its own ``random.Random`` derived from the
seed and the trial counter, so a run is reproducible.

The model (all rates per interface, i.e. per direction):

* ``capacity_pps`` — None (the default): the configuration model of :mod:`nfvperf.tg.sim_model`
  for the unit (:class:`~nfvperf.tg.sim_model.SimUnit`: DUT, topology, cores, rules ...) and the
  traffic profile (frame size, flows, VXLAN); or fixed: a number, a dict ``{size_b: pps}``
  (interpolated on frame size, clamped at the ends) or a function ``size_b -> pps``; never above
  line rate.  :meth:`SimMeasurer.configure` sets everything again for the next test unit.
* loss models —
  ``"threshold"``: loses iff load > C, lost = (load − C) × duration (at least 1 frame), so the
  loss ratio is (load − C)/load (TV4/TV6);
  ``"poisson"``: the same overflow plus Poisson noise whose rate rises with load,
  ``noise_pps × exp((load/C − 1)/softness)`` lost frames per second;
  ``spike_rate_per_s`` > 0 adds rare spikes of ``spike_frames`` lost frames to either model
  (``"spikes"`` = threshold with 0.01 spikes/s).
* ``buffer_frames`` B: a back-to-back burst at rate R from idle loses
  max(0, burst × (1 − C/R) − B) frames; a queue fills in :meth:`measure_segments` too.
* ``outage_s``: a DUT reset stops forwarding that long (frames lost = outage × load).
* ``recovery_s``: after an overload that overflowed the buffer, the DUT stalls that long once
  the load drops (system recovery).
* latency: ``base_latency_ns`` (default: the model's, from the path) + uniform jitter + exponential queueing with mean
  ``queue_scale_ns × ρ/(1−ρ)`` (ρ = load/C), capped at the buffer time B/C; above C the queue
  is full.  Summaries carry percentiles, a log-linear histogram, PDV and IPDV.
* ``mac_table_size`` and ``learning_rate_pps`` for RFC 2889 address caching/learning
  (:meth:`measure_addresses`); ``tcp_capacity_bps`` (default: the model's streams/TSO/
  multi-queue bounds) for :meth:`measure_tcp`.
* ``invalid_rate``: a share of trials comes back ``valid=False`` with *misleading* counters
  (nothing lost), so a search that used them would be wrong.
* ``host_noise`` (off by default): a shared host whose vCPUs slow down by about half for seconds
  at a time, one at a time (:mod:`nfvperf.tg.sim_noise`).  A trial's DUT capacity is the model's
  × the mean speed of the DUT's CPU over the trial's traffic window on the virtual clock
  (``wall_s``), × a small per-trial jitter, never above line rate; the trial's
  ``extra["host_noise"]`` says what speed it saw.  The clock runs on across :meth:`configure`,
  so the units of a run share one host.
"""
from __future__ import annotations

import dataclasses
import math
import random
import time
from typing import Any, Callable, Optional, Union

from nfvperf import units
from nfvperf.tg.sim_model import SimModel, SimUnit, check_overrides
from nfvperf.tg.sim_noise import HostNoise, HostNoiseParams, HostNoiseSetting
from nfvperf.tg.tgen_results import merge_histograms
from nfvperf.trial import (LatencySummary, Measurer, Segment, StreamResult, TrafficProfile,
                             TrialResult, Unsupported)

Capacity = Union[float, int, dict, Callable[[int], float]]

LOSS_MODELS = ("threshold", "poisson", "spikes")


def _poisson(rng: random.Random, lam: float) -> int:
    if lam <= 0:
        return 0
    if lam < 30:
        limit, k, p = math.exp(-lam), 0, 1.0
        while True:
            p *= rng.random()
            if p <= limit:
                return k
            k += 1
    return max(0, int(round(rng.gauss(lam, math.sqrt(lam)))))


def summarize_latency(samples_ns: list[float], definition: Optional[str] = None) -> LatencySummary:
    """LatencySummary (percentiles, log-linear histogram, PDV, IPDV) of delays in arrival order."""
    if not samples_ns:
        return LatencySummary()
    n = len(samples_ns)
    ordered = sorted(samples_ns)
    hist: dict[float, int] = {}
    ub = -1.0
    for x in ordered:               # in order: a bucket's bound is computed once per bucket
        if x > ub:
            ub = 2.0 ** (math.ceil(math.log2(max(x, 1.0)) * 4) / 4)   # 4 buckets per octave
        hist[ub] = hist.get(ub, 0) + 1
    pdv = units.pdv_series(samples_ns)
    ipdv = units.ipdv_series(samples_ns)

    def stats(v: list[float]) -> dict[str, float]:
        if not v:
            return {}
        return {"min": min(v), "avg": sum(v) / len(v), "max": max(v),
                "p99": units.percentile(v, 99)}

    kw = {} if definition is None else {"definition": definition}
    return LatencySummary(count=n, min_ns=ordered[0], avg_ns=sum(samples_ns) / n,
                          max_ns=ordered[-1],
                          percentiles_ns={p: units.percentile(ordered, float(p), ordered=True)
                                          for p in ("50", "90", "99", "99.9")},
                          histogram=sorted(hist.items()), pdv_ns=stats(pdv), ipdv_ns=stats(ipdv),
                          **kw)


class SimMeasurer(Measurer):
    name = "sim"

    def __init__(self, capacity_pps: Optional[Capacity] = None, *,
                 profile: Optional[TrafficProfile] = None, pace_s: float = 0.0, per_unit: bool = False,
                 **settings: Any) -> None:
        """``settings``: see :meth:`configure`.  ``pace_s``: wall seconds every trial takes (the
        model itself never sleeps; a suite's ``sim.pace_s``).  ``per_unit``: the runner sets this
        measurer up again for each test unit (:func:`nfvperf.topo.measurers.configure_unit`)."""
        self.pace_s = pace_s
        self.per_unit = per_unit
        self.noise: Optional[HostNoise] = None
        self.configure(capacity_pps, **settings)
        self.profile = profile or TrafficProfile()
        self.trials = 0
        self.invalid_trials = 0
        self.total_trial_s = 0.0
        self.wall_s = 0.0

    def configure(self, capacity_pps: Optional[Capacity] = None, *, loss_model: str = "threshold",
                  seed: int = 1, noise_pps: float = 10.0, softness: float = 0.05,
                  spike_rate_per_s: float = 0.0, spike_frames: int = 1000,
                  buffer_frames: int = 4096, outage_s: float = 0.2, recovery_s: float = 0.0,
                  base_latency_ns: Optional[float] = None, jitter_ns: float = 500.0,
                  queue_scale_ns: float = 200.0, latency_samples: int = 1000,
                  mac_table_size: int = 8192, learning_rate_pps: float = 50000.0,
                  tcp_capacity_bps: Optional[float] = None, invalid_rate: float = 0.0,
                  router: bool = False, time_scale: float = 0.0,
                  unit: Optional[SimUnit] = None, model: Optional[dict[str, Any]] = None,
                  host_noise: HostNoiseSetting = None) -> None:
        """All settings at once (what is not given takes its default; the trial counters and the
        virtual clock stay): the runner calls this per test unit with the suite's ``sim:`` merged
        with the test's.  ``capacity_pps`` None: the capacity comes from the model
        (:mod:`nfvperf.tg.sim_model`) for ``unit`` with the ``model`` parameter overrides; a
        number, dict or function fixes it.  ``host_noise``: None/False off, True the defaults,
        or a mapping of :class:`~nfvperf.tg.sim_noise.HostNoiseParams` fields."""
        if loss_model not in LOSS_MODELS:
            raise ValueError(f"loss_model must be one of {LOSS_MODELS}, got {loss_model!r}")
        if loss_model == "spikes" and spike_rate_per_s == 0.0:
            spike_rate_per_s = 0.01
        if not 0.0 <= invalid_rate < 1.0:
            raise ValueError("invalid_rate must be in [0, 1)")
        if time_scale < 0:
            raise ValueError("time_scale must be >= 0")
        problems = check_overrides(model or {})
        if problems:
            raise ValueError("; ".join(problems))
        self._set_noise(HostNoiseParams.from_setting(host_noise), seed)
        self.capacity = capacity_pps
        self.loss_model = loss_model
        self.seed = seed
        self.noise_pps = noise_pps
        self.softness = softness
        self.spike_rate_per_s = spike_rate_per_s
        self.spike_frames = spike_frames
        self.buffer_frames = buffer_frames
        self.outage_s = outage_s
        self.recovery_s = recovery_s
        self.base_latency = base_latency_ns
        self.jitter_ns = jitter_ns
        self.queue_scale_ns = queue_scale_ns
        self.latency_samples = latency_samples
        self.mac_table_size = mac_table_size
        self.learning_rate_pps = learning_rate_pps
        self.tcp_capacity_bps = tcp_capacity_bps
        self.invalid_rate = invalid_rate
        self.router = router
        self.time_scale = time_scale
        unit = unit or SimUnit()
        unit = dataclasses.replace(unit, overrides={**unit.overrides, **(model or {})})
        self.model = SimModel(unit)

    def _set_noise(self, params: Optional[HostNoiseParams], seed: int) -> None:
        """Turn host noise on/off; the same parameters and seed keep the same host object."""
        if params is None:
            self.noise = None
            return
        resolved = params.seed if params.seed is not None else seed
        if self.noise is None or self.noise.params != params or self.noise.seed != resolved:
            self.noise = HostNoise(params, seed=seed)

    @property
    def base_latency_ns(self) -> float:
        """Latency through the idle path: ``base_latency_ns`` if given, else the model's."""
        if self.base_latency is not None:
            return float(self.base_latency)
        return self.model.base_latency_ns(self.profile)

    @property
    def modelled(self) -> bool:
        """True when the capacity comes from the model (no explicit ``capacity_pps``)."""
        return self.capacity is None

    # --- model ---------------------------------------------------------------------------
    def set_profile(self, profile: TrafficProfile) -> None:
        self.profile = profile

    def capacity_pps(self, size_b: Optional[int] = None) -> float:
        """Modelled capacity per interface for a frame size (never above line rate)."""
        return min(self.raw_capacity_pps(size_b), self._line(size_b))

    def _line(self, size_b: Optional[int] = None) -> float:
        p = self.profile
        if size_b is None:
            return p.max_load_pps
        return p.link_speed_bps / ((size_b + (50 if p.vxlan else 0) + 20) * 8)

    def raw_capacity_pps(self, size_b: Optional[int] = None) -> float:
        """The DUT's own forwarding capacity (may exceed line rate: then it never queues)."""
        p = self.profile
        size = p.frame_size_b if size_b is None else size_b
        c = self.capacity
        if c is None:
            return self.model.capacity(p, size).pps
        if callable(c):
            return float(c(size))
        if not isinstance(c, dict):
            return float(c)
        keys = sorted(c)
        if size in c or size <= keys[0] or size >= keys[-1]:     # clamped at the ends
            return float(c[min(max(size, keys[0]), keys[-1])])
        hi = next(k for k in keys if k > size)
        lo = max(k for k in keys if k < size)
        return float(c[lo]) + (size - lo) / (hi - lo) * (float(c[hi]) - float(c[lo]))

    def _rng(self) -> random.Random:
        self.trials += 1
        return random.Random(self.seed * 1_000_003 + self.trials)

    def _directions(self) -> list[tuple[str, int, int]]:
        return [("p0->p1", 0, 1)] + ([("p1->p0", 1, 0)] if self.profile.bidirectional else [])

    def _account(self, duration_s: float) -> None:
        p = self.profile
        self.total_trial_s += duration_s
        if self.time_scale > 0:      # optional: let a trial take scaled wall time (demo, Ctrl-C tests)
            time.sleep(duration_s * self.time_scale)
        self.wall_s += (duration_s + (p.learning_s if p.learning else 0.0) + p.drain_s + p.settle_s
                        + (2.0 if self.router else 0.0))

    def _trial_speed(self, duration_s: float) -> Optional[float]:
        """The DUT CPU's speed over this trial's traffic window (None without host noise): the
        window starts after the learning frames, on the virtual clock ``wall_s``."""
        if self.noise is None:
            return None
        t0 = self.wall_s + (self.profile.learning_s if self.profile.learning else 0.0)
        return self.noise.trial_speed(t0, duration_s)

    def _trial_capacity(self, speed: Optional[float]) -> float:
        """:meth:`capacity_pps` on the host as it is during the trial: raw capacity × speed,
        never above line rate (exactly :meth:`capacity_pps` without host noise)."""
        if speed is None:
            return self.capacity_pps()
        return min(self.raw_capacity_pps() * speed, self._line())

    def _noise_extra(self, speed: Optional[float]) -> dict[str, Any]:
        if speed is None:
            return {}
        return {"host_noise": {"speed": round(speed, 6), "capacity_pps": self._trial_capacity(speed),
                               "cpu": self.noise.params.dut_cpu if self.noise else None}}

    def _lost(self, rng: random.Random, sent: int, load: float, dur: float, cap: float) -> int:
        lost = 0
        if load > cap * (1 + 1e-12):
            lost = max(1, sent - int(math.floor(cap * dur)))
        if self.loss_model == "poisson" and cap > 0:
            lam = self.noise_pps * math.exp(min(50.0, (load / cap - 1.0) / self.softness)) * dur
            lam = min(lam, 0.001 * sent)   # noise saturates; above C the overflow dominates
            lost += _poisson(rng, lam)
        if self.spike_rate_per_s > 0 and rng.random() < 1.0 - math.exp(-self.spike_rate_per_s * dur):
            lost += self.spike_frames
        return min(sent, lost)

    def _latency(self, rng: random.Random, load: float, cap: float, received: int) -> Optional[LatencySummary]:
        if not self.profile.latency or received <= 0:
            return None
        buf_ns = self.buffer_frames / cap * 1e9 if cap > 0 else 0.0
        rho = load / cap if cap > 0 else 1.0
        mean_q = buf_ns if rho >= 1.0 else min(buf_ns, self.queue_scale_ns * rho / (1.0 - rho))
        n = min(received, self.latency_samples)
        base, jitter, uniform, expo = self.base_latency_ns, self.jitter_ns, rng.uniform, rng.expovariate
        samples = []
        for _ in range(n):
            q = (buf_ns * uniform(0.9, 1.0) if rho >= 1.0
                 else min(buf_ns, expo(1.0 / mean_q)) if mean_q > 0 else 0.0)
            samples.append(base + uniform(0, jitter) + q)
        return summarize_latency(samples)

    def _maybe_invalid(self, rng: random.Random, tr: TrialResult) -> TrialResult:
        if self.invalid_rate and rng.random() < self.invalid_rate:
            self.invalid_trials += 1
            for s in tr.streams:
                s.received, s.lost = s.sent, 0
            # misleading counters: no loss reported, so using this trial would be wrong
            return dataclasses.replace(
                tr, valid=False, received=tr.sent, expected=tr.sent,
                invalid_reasons=["sim: injected invalid trial (generator sent less than intended)"])
        return tr

    @staticmethod
    def _merge_latency(streams: list[StreamResult]) -> Optional[LatencySummary]:
        lats = [s.latency for s in streams if s.latency is not None and s.latency.count]
        if not lats:
            return None
        if len(lats) == 1:
            return lats[0]
        n = sum(l.count for l in lats)
        merged = LatencySummary(
            count=n, min_ns=min(l.min_ns for l in lats),
            avg_ns=sum(l.avg_ns * l.count for l in lats) / n, max_ns=max(l.max_ns for l in lats),
            percentiles_ns={k: max(l.percentiles_ns.get(k, 0.0) for l in lats)
                            for k in lats[0].percentiles_ns},
            pdv_ns={k: max(l.pdv_ns.get(k, 0.0) for l in lats) if k != "min" else 0.0
                    for k in lats[0].pdv_ns},
            ipdv_ns={k: (min if k == "min" else max)(l.ipdv_ns.get(k, 0.0) for l in lats)
                     for k in lats[0].ipdv_ns})
        merged.histogram = merge_histograms(l.histogram for l in lats)
        if "avg" in merged.pdv_ns:
            merged.pdv_ns["avg"] = sum(l.pdv_ns["avg"] * l.count for l in lats) / n
        if "avg" in merged.ipdv_ns:
            merged.ipdv_ns["avg"] = sum(l.ipdv_ns["avg"] * l.count for l in lats) / n
        return merged

    def _result(self, duration_s: float, load_pps: float, streams: list[StreamResult],
                **extra: Any) -> TrialResult:
        sent = sum(s.sent for s in streams)
        rec = sum(s.received for s in streams)
        return TrialResult(duration_s=duration_s, load_pps=load_pps, sent=sent, received=rec,
                           expected=sent, effective_duration_s=duration_s, streams=streams,
                           latency=self._merge_latency(streams),
                           tg_counters={"opackets": sent, "ipackets": rec},
                           dut_counters={"capacity_pps": self.capacity_pps()},
                           extra={"sim": True, **self.model_extra(), **extra})

    def model_extra(self) -> dict[str, Any]:
        """What the model said for this trial's configuration (nothing with an explicit capacity)."""
        if not self.modelled:
            return {}
        c = self.model.capacity(self.profile)
        return {"sim_model": {"capacity_pps": c.pps, "cores": round(c.cores, 3),
                              "threads_used": c.threads_used, "threads_idle": c.threads_idle,
                              "ns_per_frame": round(c.ns_per_frame, 2), "bound": c.bound,
                              "tiers": {k: round(v, 4) for k, v in c.tiers.items()}}}

    # --- Measurer API ------------------------------------------------------------------------
    def _pace(self) -> None:
        if self.pace_s > 0:
            time.sleep(self.pace_s)

    def measure(self, duration_s: float, load_pps: float) -> TrialResult:
        self._pace()
        if duration_s <= 0 or load_pps < 0:
            raise ValueError("duration must be > 0 and load >= 0")
        rng = self._rng()
        speed = self._trial_speed(duration_s)
        cap = self._trial_capacity(speed)
        line = self.profile.max_load_pps
        invalid = []
        offered = load_pps
        if load_pps > line * (1 + 1e-9):
            offered = line
            invalid.append(f"generator cannot exceed line rate {line:,.2f} pps "
                           f"(asked {load_pps:,.2f})")
        streams = []
        for name, tx, rx in self._directions():
            sent = units.frames_in(duration_s, offered)
            lost = self._lost(rng, sent, offered, duration_s, cap)
            received = sent - lost
            streams.append(StreamResult(
                name=name, tx_port=tx, rx_port=rx, intended_pps=load_pps,
                achieved_pps=sent / duration_s, sent=sent, received=received, lost=lost,
                latency=self._latency(rng, offered, self.raw_capacity_pps() * (speed or 1.0), received)))
        self._account(duration_s)
        tr = self._result(duration_s, load_pps, streams, **self._noise_extra(speed))
        if invalid:
            return dataclasses.replace(tr, valid=False, invalid_reasons=invalid)
        return self._maybe_invalid(rng, tr)

    def measure_burst(self, burst_frames: int, burst_pps: float, drain_s: float = 2.0) -> TrialResult:
        self._pace()
        if burst_frames <= 0 or burst_pps <= 0:
            raise ValueError("burst_frames and burst_pps must be > 0")
        rng = self._rng()
        dur = burst_frames / burst_pps
        speed = self._trial_speed(dur)
        cap = self._trial_capacity(speed)
        streams = []
        for name, tx, rx in self._directions():
            excess = burst_frames * max(0.0, 1.0 - cap / burst_pps)
            lost = int(min(burst_frames, max(0, math.ceil(excess - self.buffer_frames - 1e-9))))
            streams.append(StreamResult(name=name, tx_port=tx, rx_port=rx, intended_pps=burst_pps,
                                        achieved_pps=burst_pps, sent=burst_frames,
                                        received=burst_frames - lost, lost=lost))
        self._account(dur)
        self.wall_s += drain_s
        tr = self._result(dur, burst_pps, streams, burst_frames=burst_frames, drain_s=drain_s,
                          **self._noise_extra(speed))
        return self._maybe_invalid(rng, tr)

    def measure_reset(self, duration_s: float, load_pps: float, reset_at_s: float) -> TrialResult:
        self._pace()
        if not 0 <= reset_at_s < duration_s:
            raise ValueError("reset_at_s must be inside the trial")
        rng = self._rng()
        if self.reset_hook is not None:
            self.reset_hook()
        speed = self._trial_speed(duration_s)
        cap = self._trial_capacity(speed)
        outage = min(self.outage_s, duration_s - reset_at_s)
        streams = []
        for name, tx, rx in self._directions():
            sent = units.frames_in(duration_s, load_pps)
            lost = int(round(outage * load_pps))
            if load_pps > cap * (1 + 1e-12):
                lost += sent - int(math.floor(cap * duration_s))
            lost = min(sent, lost)
            gap_ns = (int(round(outage * load_pps)) + 1) / load_pps * 1e9 if load_pps > 0 else None
            streams.append(StreamResult(name=name, tx_port=tx, rx_port=rx, intended_pps=load_pps,
                                        achieved_pps=load_pps, sent=sent, received=sent - lost,
                                        lost=lost, first_loss_ns=reset_at_s * 1e9,
                                        last_loss_ns=(reset_at_s + outage) * 1e9,
                                        max_rx_gap_ns=gap_ns))
        self._account(duration_s)
        tr = self._result(duration_s, load_pps, streams, reset_at_s=reset_at_s, outage_s=outage,
                          **self._noise_extra(speed))
        return self._maybe_invalid(rng, tr)

    def measure_segments(self, segments: list[Segment]) -> TrialResult:
        self._pace()
        if not segments:
            raise ValueError("no segments")
        rng = self._rng()
        total = sum(s.duration_s for s in segments)
        speed = self._trial_speed(total)
        cap = self._trial_capacity(speed)
        B = float(self.buffer_frames)
        streams = []
        for name, tx, rx in self._directions():
            t = q = 0.0
            lost = 0.0
            sent = 0
            first = last = None
            stall_pending = False
            for seg in segments:
                L, d = seg.load_pps, seg.duration_s
                sent += units.frames_in(d, L)
                if L > cap:
                    fill = (B - q) / (L - cap)
                    if fill < d:
                        lost += (L - cap) * (d - fill)
                        first = t + fill if first is None else first
                        last = t + d
                        q = B
                        stall_pending = self.recovery_s > 0
                    else:
                        q += (L - cap) * d
                else:
                    stall = 0.0
                    if stall_pending:
                        stall = min(self.recovery_s, d)
                        lost += L * stall
                        if stall > 0:
                            last = t + stall
                        stall_pending = False
                    q = max(0.0, q - (cap - L) * (d - stall))
                t += d
            lost_i = min(sent, int(round(lost)))
            streams.append(StreamResult(
                name=name, tx_port=tx, rx_port=rx, intended_pps=segments[0].load_pps,
                achieved_pps=sent / total, sent=sent, received=sent - lost_i, lost=lost_i,
                first_loss_ns=None if first is None else first * 1e9,
                last_loss_ns=None if last is None else last * 1e9))
        self._account(total)
        tr = self._result(total, max(s.load_pps for s in segments), streams,
                          segments=[(s.duration_s, s.load_pps) for s in segments],
                          **self._noise_extra(speed))
        return self._maybe_invalid(rng, tr)

    def measure_addresses(self, addresses: int, learning_pps: float, duration_s: float,
                          load_pps: float) -> TrialResult:
        """RFC 2889 address caching/learning trial: learn ``addresses`` source MACs at
        ``learning_pps``, then send test frames to all of them at ``load_pps``.  Frames to
        addresses the DUT did not learn are flooded (``extra['flooded']``)."""
        self._pace()
        if addresses <= 0 or learning_pps <= 0:
            raise ValueError("addresses and learning_pps must be > 0")
        rng = self._rng()
        learned = min(addresses, self.mac_table_size)
        if learning_pps > self.learning_rate_pps:
            learned = int(math.floor(learned * self.learning_rate_pps / learning_pps))
        unknown_share = 1.0 - learned / addresses
        sent = units.frames_in(duration_s, load_pps)
        flooded = int(math.ceil(sent * unknown_share - 1e-9))
        speed = self._trial_speed(duration_s)
        cap = self._trial_capacity(speed)
        lost = self._lost(rng, sent, load_pps, duration_s, cap) if self.loss_model == "threshold" else 0
        st = StreamResult(name="p0->p1", tx_port=0, rx_port=1, intended_pps=load_pps,
                          achieved_pps=load_pps, sent=sent, received=sent - lost, lost=lost)
        self._account(duration_s + addresses / learning_pps)
        tr = self._result(duration_s, load_pps, [st], addresses=addresses,
                          learning_pps=learning_pps, learned=learned, flooded=flooded,
                          **self._noise_extra(speed))
        return self._maybe_invalid(rng, tr)

    def measure_tcp(self, streams: int = 1, processes: int = 1, duration_s: float = 60.0,
                    tso: Optional[bool] = None, multiqueue: Union[bool, int, None] = None,
                    **_: Any) -> TrialResult:
        """A modelled iperf3 run.  With an explicit ``tcp_capacity_bps``: goodput shares it and
        more streams help a bit; otherwise the model's streams/TSO/multi-queue/link/DUT bounds."""
        self._pace()
        rng = self._rng()
        speed = self._trial_speed(duration_s)
        info: dict[str, Any] = {}
        if self.tcp_capacity_bps is not None:
            eff = min(1.0, 0.85 + 0.05 * math.log2(max(1, streams * processes)))
            bps = self.tcp_capacity_bps * eff * rng.uniform(0.98, 1.0)
        else:
            info = self.model.tcp_bps(self.profile, streams, processes, tso, multiqueue)
            bps = info.pop("bps") * rng.uniform(0.98, 1.0)
        if speed is not None:
            bps *= speed
        self._account(duration_s)
        return TrialResult(duration_s=duration_s, load_pps=0.0, effective_duration_s=duration_s,
                           extra={"sim": True, "throughput_bps": bps, "streams": streams,
                                  "processes": processes, "retransmits": 0,
                                  "topology": self.model.unit.kind,
                                  **({"sim_model": info} if info else {}),
                                  **({"host_noise": {"speed": round(speed, 6)}} if speed is not None else {})})

    def environment(self) -> dict[str, Any]:
        env: dict[str, Any] = {"measurer": self.name, "loss_model": self.loss_model, "seed": self.seed,
                               "capacity_pps": self.capacity_pps(), "buffer_frames": self.buffer_frames,
                               "note": "simulated DUT; no traffic was sent: every number comes from a model"}
        if self.modelled:
            env["model"] = self.model.describe()
        else:
            env["model"] = {"model": "explicit sim.capacity_pps (the configuration model is not used)",
                            "capacity_pps": self.capacity if not callable(self.capacity) else "a function"}
        if self.noise is not None:
            env["host_noise"] = self.noise.describe()
        return env


__all__ = ["SimMeasurer", "summarize_latency", "LOSS_MODELS", "Unsupported"]
