"""The measurer on nfvperf's own DPDK traffic generator (``tgen/``).

* :class:`TgenProcess` (``tgen_proc``) starts ``tgen`` and is its JSON-RPC client.
* :class:`TgenMeasurer` is the :class:`~nfvperf.trial.Measurer` on top of it: one stream per
  direction (``tgen_streams``), a trial per ``measure()``, results converted to
  :class:`TrialResult` (``tgen_results``).

Wire protocol: ``tgen/PROTOCOL.md`` (JSON-RPC 2.0, one JSON object per line, Unix socket).
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
from typing import Any, Callable, Optional, Sequence

from nfvperf.tg.telemetry import NA, TelemetryProbe, generator_telemetry, loss_account
from nfvperf.tg.tgen_proc import PortSpec, TgenError, TgenProcess, _lcore_cpus, find_tgen_binary  # noqa: F401
from nfvperf.tg.tgen_results import (LATENCY_DEFINITION, merge_latency, split_not_sent,  # noqa: F401
                                     stream_from_wire, tsc_calibration_record)
from nfvperf.tg.tgen_split import flow_slices, merge_streams, split_frames, split_stream
from nfvperf.tg.tgen_streams import (check_rx_groups, directions_for, rx_group, split_base_name,
                                     split_record, stream_object)
from nfvperf.trial import (
    DutFailure,
    Measurer,
    MeasurerError,
    Segment,
    StreamResult,
    TrafficProfile,
    TrialResult,
    Unsupported,
    counter_deltas,
    negative_loss_reason,
    sent_short_reason,
    stretched,
)

__all__ = [
    "TgenError",
    "PortSpec",
    "TgenProcess",
    "TgenMeasurer",
    "find_tgen_binary",
    "merge_latency",
]

#: drivers whose TX ring is the DUT's RX ring (virtio-user on vhost-user, memif): a full ring
#: holds the generator back instead of dropping frames, so the frames the DUT did not take at the
#: offered rate are its loss, not a generator shortfall (``TgenMeasurer._convert``)
BACKPRESSURE_DRIVERS = frozenset({"net_virtio_user", "net_memif", "net_vhost"})


class TgenMeasurer(Measurer):
    """The Measurer on a running :class:`TgenProcess`.

    ``pairs`` are (tx_port, rx_port) directions.  With a bidirectional profile the directions
    are ``pairs`` followed by each pair reversed; ``stream_params[i]`` (if given) is merged into
    the ``stream.add`` object of direction ``i`` in that order (MACs, IPs, ``vxlan`` endpoints,
    ``vary``...), so a topology can supply what its DUT needs.

    ``rx_groups``: receive groups of generator ports (e.g. ``[[0, 2], [1, 3]]``: the members of
    two OVS bonds): a direction whose rx port is in a group is received on every port of the
    group (tgen's ``rx_ports``, PROTOCOL.md §4), so a frame the DUT sends out of another member
    is the stream's, not misrouted.  Groups must not overlap.
    """

    name = "tgen"
    rate_limited = True
    warmup_default = True
    LATENCY_DEFINITION = LATENCY_DEFINITION
    #: trial.status polls (and DUT checks) while a trial runs
    POLL_S = 0.2
    #: polls once the trial's schedule (learning wait, traffic, drain) should be over: at POLL_S
    #: every trial would end up to 0.2 s late (0.1 s on average, on every trial of a search)
    END_POLL_S = 0.02

    def __init__(self, proc: TgenProcess, pairs: list[tuple[int, int]],
                 dut_counters: Optional[Callable[[], dict]] = None,
                 dut_alive: Optional[Callable[[], None]] = None,
                 stream_params: Optional[list[dict]] = None,
                 learning_wait_s: Optional[float] = None, learning_frames: int = 3,
                 rx_groups: Optional[Sequence[Sequence[int]]] = None,
                 topology_environment: Optional[Callable[[], dict]] = None,
                 dut_telemetry: Optional[Callable[[], dict]] = None,
                 cores: int = 1):
        if not pairs:
            raise ValueError("TgenMeasurer needs at least one (tx_port, rx_port) pair")
        self.proc = proc
        # the topology's own record (DUT, versions, pinning), kept under "topology" in environment()
        self.topology_environment = topology_environment
        self.pairs = [(int(a), int(b)) for a, b in pairs]
        self.rx_groups = check_rx_groups(rx_groups)
        self.dut_counters = dut_counters
        self.dut_alive = dut_alive
        #: the DUT's telemetry, read before and after every trial (outside its measured interval);
        #: None: the trials store the generator's side only (``telemetry_enabled`` off)
        self.dut_telemetry = TelemetryProbe(dut_telemetry) if dut_telemetry is not None else None
        self.telemetry_enabled = True
        self.stream_params = stream_params
        self.learning_wait_s = learning_wait_s
        self.learning_frames = learning_frames
        if int(cores) < 1:
            raise ValueError(f"cores: {cores} must be >= 1 (generator cores per direction)")
        #: generator cores (TX queues / worker lcores) each direction is split over (tgen_split)
        self.cores = int(cores)
        self.profile: Optional[TrafficProfile] = None
        self.stream_ids: list[int] = []
        self.directions: list[tuple[int, int]] = []
        #: sub-streams per direction (1: no split), each direction's positions in stream_ids, and
        #: what the split used (notes, each direction's TX/RX lcores): set_profile
        self.split_n = 1
        self.split_groups: list[list[int]] = []
        self.split_info: dict[str, Any] = {}
        self.last_raw: Optional[dict[str, Any]] = None
        self._dut_before: Optional[dict[str, Any]] = None
        self._dut_before_error: Optional[str] = None

    def _backpressure_ports(self) -> set[int]:
        """Indices of the generator ports whose driver is in :data:`BACKPRESSURE_DRIVERS`."""
        return {i for i, p in enumerate(getattr(self.proc, "ports", None) or [])
                if getattr(p, "driver", None) in BACKPRESSURE_DRIVERS}

    # -- streams ---------------------------------------------------------------------------
    def set_profile(self, profile: TrafficProfile) -> None:
        self.proc.rpc("stream.remove", all=True)
        self.stream_ids = []
        self.split_groups = []
        self.directions = directions_for(self.pairs, profile)
        self.profile = profile
        params = self.stream_params or []
        objs = [stream_object(profile, tx, rx, reverse=i >= len(self.pairs), group=rx_group(self.rx_groups, rx),
                              extra=params[i] if i < len(params) else None)
                for i, (tx, rx) in enumerate(self.directions)]
        # every direction is split the same way (tgen's trial-level rate is per stream)
        flows = min(int(o.get("flows", 1)) for o in objs)
        self.split_n = len(flow_slices(flows, self.cores))
        try:
            for o in objs:
                group = []
                for sub in (split_stream(o, self.split_n) if self.split_n > 1 else [o]):
                    r = self.proc.call("stream.add", sub)
                    group.append(len(self.stream_ids))
                    self.stream_ids.append(int(r["stream_id"]))
                self.split_groups.append(group)
            self.split_info = split_record(self.proc, objs, flows, self.cores, self.split_n,
                                           self.split_groups, self.directions, self.stream_ids)
        except BaseException:
            self.profile = None
            raise

    # -- trials -----------------------------------------------------------------------------
    def _need_profile(self) -> TrafficProfile:
        if self.profile is None or not self.stream_ids:
            raise MeasurerError("TgenMeasurer: set_profile() first")
        return self.profile

    def _trial_base(self, drain_s: Optional[float] = None, **fields: Any) -> dict:
        """The ``trial.start`` object with ``fields`` (set_profile() first)."""
        profile = self._need_profile()
        t: dict[str, Any] = {"streams": list(self.stream_ids),
                             "drain_s": float(profile.drain_s if drain_s is None else drain_s),
                             "latency": bool(profile.latency)}
        if profile.learning:
            # the wait after the learning frames: the profile's (RFC 2544 §23; quick: 0.1 s)
            # unless the measurer was given its own
            wait = profile.learning_s if self.learning_wait_s is None else self.learning_wait_s
            t.update(learning=True, learning_frames=int(self.learning_frames),
                     learning_wait_s=float(wait))
        return dict(t, **fields)

    def _each(self, frames: int) -> list[int]:
        """``frames`` expected of every (sub-)stream."""
        return [int(frames)] * len(self.stream_ids)

    def _check_dut(self) -> None:
        if self.dut_alive is not None:
            self.dut_alive()

    def _run(self, trial: dict, expect_s: float, on_running: Optional[Callable[[float], None]] = None,
             dut_checks: Optional[Callable[[], bool]] = None) -> dict:
        """Start a trial, poll it to the end (checking the DUT every poll), return trial.result."""
        self._check_dut()
        self._snapshot_dut()
        try:
            self.proc.call("trial.start", trial)
        except TgenError as e:
            if e.code != -32000:        # not "wrong state": a real error in the request
                raise
            self._abort()               # a previous trial is still winding down
            self.proc.call("trial.start", trial)
        learn_s = float(trial.get("learning_wait_s", 2.0)) if trial.get("learning") else 0.0
        # tgen's watchdog ends a trial at the latest max(5 s, its length) after the schedule
        budget = expect_s * 2.2 + float(trial.get("drain_s", 2.0)) + learn_s + 20.0
        started = time.monotonic()
        deadline = started + budget
        ends_at = started + learn_s + expect_s + float(trial.get("drain_s", 2.0))
        next_dut_check = started        # the DUT is checked every POLL_S, not every poll
        try:
            while True:
                st = self.proc.rpc("trial.status")
                state = st.get("state")
                if state == "done":
                    break
                if state == "idle":
                    raise MeasurerError("tgen: trial went idle without finishing")
                if on_running is not None and state in ("running", "draining"):
                    # elapsed_s counts from trial.start, learning included
                    on_running(max(0.0, float(st.get("elapsed_s") or 0.0) - learn_s))
                now = time.monotonic()
                if (dut_checks is None or dut_checks()) and now >= next_dut_check:
                    self._check_dut()
                    next_dut_check = now + self.POLL_S
                if now > deadline:
                    raise MeasurerError(f"tgen: trial not done after {budget:.1f} s "
                                        f"(state {state}, {st})")
                time.sleep(self._poll_gap(ends_at - now))
        except BaseException:
            self._abort()
            raise
        res = self.proc.rpc("trial.result")
        self.last_raw = res
        return res

    def _poll_gap(self, left_s: float) -> float:
        """The wait before the next trial.status, ``left_s`` before the trial's scheduled end:
        POLL_S while more is left, then up to that end, then END_POLL_S until tgen says done."""
        if left_s >= self.POLL_S:
            return self.POLL_S
        return max(self.END_POLL_S, left_s)

    def _snapshot_dut(self) -> None:
        """Read the DUT's counters before the trial starts (before its learning frames), so
        the trial stores its own deltas: DUT counters are cumulative (OVS PMD statistics since
        the topology came up, port counters since start)."""
        self._dut_before, self._dut_before_error = None, None
        if self.dut_telemetry is not None and self.telemetry_enabled:
            self.dut_telemetry.before()
        if self.dut_counters is None:
            return
        try:
            self._dut_before = dict(self.dut_counters() or {})
        except DutFailure:
            raise
        except Exception as e:  # noqa: BLE001 - the trial then stores cumulative counters
            self._dut_before_error = f"{type(e).__name__}: {e}"

    def _dut_trial_counters(self) -> dict[str, Any]:
        """The DUT's counters for the trial that just ended: read after the generator reported
        ``done`` (traffic stopped and the drain over), minus the reading before the trial
        (:func:`nfvperf.trial.counter_deltas`).  ``scope`` says which it is."""
        if self.dut_counters is None:
            return {}
        try:
            after = dict(self.dut_counters() or {})
        except DutFailure:
            raise
        except Exception as e:   # a counter read failure must not lose the trial
            return {"error": f"{type(e).__name__}: {e}"}
        if self._dut_before is None:
            after["scope"] = "cumulative"
            if self._dut_before_error:
                after["scope_error"] = f"reading before the trial failed: {self._dut_before_error}"
            return after
        out = counter_deltas(self._dut_before, after)
        out["scope"] = "trial"
        return out

    def _abort(self) -> None:
        """Stop a running trial after a failure, so the next one can start."""
        if not self.proc.alive():
            return
        with contextlib.suppress(MeasurerError):
            self.proc.rpc("trial.stop", _timeout=5.0)
            end = time.monotonic() + 10.0
            while time.monotonic() < end:
                if self.proc.rpc("trial.status", _timeout=5.0).get("state") in ("done", "idle"):
                    break
                time.sleep(0.1)

    def _convert(self, raw: dict, duration_s: float, load_pps: float,
                 expected_per_stream: list[int]) -> TrialResult:
        streams: list[StreamResult] = []
        by_id = {int(s["id"]): s for s in raw.get("streams") or []}
        reasons: list[str] = []
        pushed_back: list[str] = []
        expected = 0
        # frames the workers handed a port that the port did not count out were not sent
        # (PROTOCOL.md §6 ports[].tx): taken off the streams' `sent`, so they are neither offered
        # load nor the DUT's loss
        not_sent, tx_notes = split_not_sent(raw)
        for sid, exp in zip(self.stream_ids, expected_per_stream):
            s = by_id.get(sid)
            if s is None:
                raise MeasurerError(f"tgen: trial.result has no stream {sid}")
            cut = not_sent.get(sid, 0)
            if cut:
                s = dict(s, sent=int(s.get("sent") or 0) - cut)
                s["lost"] = max(0, int(s["sent"]) - int(s.get("received") or 0))
            sr = stream_from_wire(s, sid)
            streams.append(sr)
            # The frames the generator's schedule asked for (PROTOCOL.md §6: ceil(duration x
            # rate) per timed segment) are what was offered; it differs from round(load x
            # duration) by at most one frame per segment, and using the smaller number could
            # hide a lost frame.
            if s.get("intended_frames") is not None:
                exp = int(s["intended_frames"])
            expected += exp
            short = sent_short_reason(sr.sent, exp, sr.name)
            retries = int(s.get("tx_retries") or 0)
            if short and cut:
                short += (f" (the generator's port {sr.tx_port} dropped {cut:,} of this stream's "
                          "frames at TX)")
            elif short and retries > 0 and sr.tx_port in self._backpressure_ports():
                pushed_back.append(f"{sr.name}: took {sr.sent:,} of {exp:,} frames (TX ring full "
                                   f"{retries:,} times)")
                short = None
            reasons += [r for r in (short, negative_loss_reason(sr.received, sr.sent, "sent", sr.name))
                        if r]
            if sr.duplicates > 0:
                reasons.append(f"{sr.name}: {sr.duplicates} duplicate frames")
        # tgen counts a stream's frames that arrive on another port than its rx_port as
        # `misrouted`, not received (PROTOCOL.md §6): they are loss, and the trial stays valid;
        # the notes say so, for the report.
        notes: list[str] = list(tx_notes)
        misrouted = sum(sr.misrouted for sr in streams)
        if misrouted:
            per = ", ".join(f"{sr.name}: {sr.misrouted}" for sr in streams if sr.misrouted)
            notes.append(f"{misrouted} frames misrouted (arrived on a port outside the stream's "
                         f"rx port; counted as lost): {per}")
        if any("misrouted" not in s for s in raw.get("streams") or []):
            # a tgen older than the `misrouted` field counted a frame on whatever port it
            # arrived: a port cannot have received fewer frames than the streams expecting it
            # say they received.
            port_rx = {int(p["id"]): p.get("stats", {}).get("ipackets")
                       for p in raw.get("ports") or [] if "id" in p}
            for rxp in sorted({sr.rx_port for sr in streams}):
                got = port_rx.get(rxp)
                want = sum(sr.received for sr in streams if sr.rx_port == rxp)
                if got is not None and want > int(got):
                    reasons.append(f"streams to port {rxp} received {want} test frames but the "
                                   f"port received only {int(got)} frames: frames arrived on "
                                   "another port")
        if pushed_back:
            notes.append("backpressure: the DUT's ring was full and held the generator back; the "
                         "frames it did not take at the offered load count as lost: " + "; ".join(pushed_back))
        if self.split_n > 1 and len(self.split_groups) * self.split_n == len(streams):
            # one result per direction from its sub-streams (tgen_split: sums, histogram merged)
            streams = [merge_streams(split_base_name(streams[g[0]].name),
                                     [streams[j] for j in g]) for g in self.split_groups]
        if self.split_info.get("notes"):
            notes += [f"tgen_cores: {n}" for n in self.split_info["notes"]]
        eff = float(raw.get("effective_duration_s") or 0.0)
        if stretched(eff, duration_s) and not pushed_back:
            # (held back by the DUT, the generator stops at its time limit: that is the DUT's loss)
            reasons.append(f"effective duration {eff:.6f} s > 110 % of intended {duration_s:g} s")
        stopped_by = raw.get("stopped_by")
        if stopped_by:
            reasons.append(f"traffic stopped early by {stopped_by}")
        late_rx = int(raw.get("late_rx") or 0)
        if late_rx > 0:
            reasons.append(f"{late_rx} test frames arrived after the drain (counters not settled)")
        ports = raw.get("ports") or []
        tg_counters = {f"port{p.get('id')}": {"stats": p.get("stats", {}),
                                               "xstats": p.get("xstats", {})} for p in ports}
        dut = self._dut_trial_counters()
        lat = merge_latency(s.latency for s in streams) if (self.profile and self.profile.latency) \
            else None
        res = TrialResult(
            duration_s=float(duration_s), load_pps=float(load_pps),
            sent=sum(s.sent for s in streams), received=sum(s.received for s in streams),
            expected=expected, effective_duration_s=eff, streams=streams, latency=lat,
            valid=not reasons, invalid_reasons=reasons, tg_counters=tg_counters,
            dut_counters=dut, non_test_rx=int(raw.get("non_test_rx") or 0),
            pacer_late_max_ns=float(raw.get("pacer_late_max_ns") or 0.0),
            extra={"late_rx": late_rx, "stopped_by": stopped_by,
                   "foreign_test_rx": int(raw.get("foreign_test_rx") or 0),
                   "tx_retries": sum(int(s.get("tx_retries") or 0) for s in raw.get("streams") or []),
                   "tx_nombuf": sum(int(s.get("tx_nombuf") or 0) for s in raw.get("streams") or []),
                   "tsc_hz": raw.get("tsc_hz"), "tsc_hz_dpdk": raw.get("tsc_hz_dpdk"),
                   "tx_not_sent": sum(not_sent.values()),
                   "misrouted": misrouted, "notes": notes, "tgen_cores": self.split_info or None,
                   "backpressure": bool(pushed_back)})
        return dataclasses.replace(res, telemetry=self._trial_telemetry(raw, res, sum(not_sent.values())))

    def _trial_telemetry(self, raw: dict, res: TrialResult, not_sent_at_tx: int) -> dict[str, Any]:
        """The trial's telemetry (``nfvperf.tg.telemetry``): the DUT's difference of the readings
        before and after it, the generator's own counts, and the loss account."""
        dut = (self.dut_telemetry.after() if self.dut_telemetry is not None and self.telemetry_enabled
               else {"available": NA})
        held = bool(res.extra.get("backpressure"))
        tel: dict[str, Any] = {"dut": dut, "generator": generator_telemetry(raw, res.sent, res.expected,
                                                                            not_sent_at_tx, held_back=held)}
        tel["loss"] = loss_account({"expected": res.expected, "sent": res.sent, "received": res.received,
                                    "telemetry": tel, "extra": {"misrouted": res.extra.get("misrouted"),
                                                                "backpressure": held}})
        return tel

    def measure(self, duration_s: float, load_pps: float) -> TrialResult:
        self._need_profile()
        if duration_s <= 0 or load_pps <= 0:
            raise ValueError("measure() needs duration_s > 0 and load_pps > 0")
        n = self.split_n        # a split direction: each sub-stream 1/n of the rate (tgen_split)
        raw = self._run(self._trial_base(duration_s=float(duration_s), pps=float(load_pps) / n), duration_s)
        return self._convert(raw, duration_s, load_pps, self._each(round(load_pps / n * duration_s)))

    def measure_frames(self, frames: int, load_pps: float) -> TrialResult:
        """A constant-load trial of exactly ``frames`` frames per stream."""
        n = self.split_n
        trial = self._trial_base(frames=split_frames(frames, n), pps=float(load_pps) / n)
        dur = frames / load_pps
        return self._convert(self._run(trial, dur), dur, load_pps, self._each(split_frames(frames, n)))

    def measure_segments(self, segments: list[Segment]) -> TrialResult:
        self._need_profile()
        if not segments:
            raise ValueError("measure_segments() needs at least one segment")
        n = self.split_n
        trial = self._trial_base(segments=[{"duration_s": float(s.duration_s), "pps": float(s.load_pps) / n}
                                           for s in segments])
        total = sum(s.duration_s for s in segments)
        frames = sum(int(round(s.load_pps / n * s.duration_s)) for s in segments)
        res = self._convert(self._run(trial, total), total, frames * n / total if total else 0.0,
                            self._each(frames))
        res.extra["segments"] = [{"duration_s": s.duration_s, "load_pps": s.load_pps}
                                 for s in segments]
        return res

    def measure_burst(self, burst_frames: int, burst_pps: float, drain_s: float = 2.0
                      ) -> TrialResult:
        n = self.split_n
        trial = self._trial_base(drain_s, mode="burst", burst_frames=split_frames(burst_frames, n), bursts=1,
                                 pps=float(burst_pps) / n)
        dur = burst_frames / burst_pps
        res = self._convert(self._run(trial, dur), dur, burst_pps, self._each(split_frames(burst_frames, n)))
        res.extra["burst_frames"] = int(burst_frames)
        return res

    def measure_reset(self, duration_s: float, load_pps: float, reset_at_s: float) -> TrialResult:
        self._need_profile()
        if self.reset_hook is None:
            raise Unsupported("tgen measure_reset needs a reset_hook (set by the runner)")
        if not 0 <= reset_at_s < duration_s:
            raise ValueError("reset_at_s must be inside the trial")
        hook = self.reset_hook
        state: dict[str, Any] = {"timer": None, "done": False, "error": None, "t": None}

        def fire() -> None:
            state["t"] = time.monotonic()
            try:
                hook()
            except BaseException as e:   # reported after the trial
                state["error"] = e
            finally:
                state["done"] = True

        def on_running(elapsed: float) -> None:
            if state["timer"] is None:
                t = threading.Timer(max(0.0, reset_at_s - elapsed), fire)
                t.daemon = True
                state["timer"] = t
                t.start()

        def dut_checks() -> bool:
            # the DUT is expected to be down while it resets: check it only before and after
            return state["timer"] is None or state["done"]

        n = self.split_n
        trial = self._trial_base(duration_s=float(duration_s), pps=float(load_pps) / n)
        try:
            raw = self._run(trial, duration_s, on_running=on_running, dut_checks=dut_checks)
        finally:
            if state["timer"] is not None:
                state["timer"].join(60)
        if state["error"] is not None:
            raise MeasurerError(f"reset hook failed: {state['error']}") from state["error"]
        if state["timer"] is None:
            raise MeasurerError("tgen: the trial ended before the reset could be triggered")
        res = self._convert(raw, duration_s, load_pps, self._each(round(load_pps / n * duration_s)))
        res.extra["reset_at_s"] = reset_at_s
        return res

    # -- environment ------------------------------------------------------------------------
    def environment(self) -> dict[str, Any]:
        env = self.generator_environment()
        if self.topology_environment is not None:
            env["topology"] = self.topology_environment()
        return env

    def generator_environment(self) -> dict[str, Any]:
        env: dict[str, Any] = {"measurer": self.name}
        try:
            ping = self.proc.rpc("ping")
            ports = self.proc.rpc("ports.list")
        except MeasurerError as e:
            return {**env, "error": str(e)}
        lc = _lcore_cpus(self.proc.lcores)
        cpus = [c for s in lc.values() for c in s]
        workers = sorted(lc)[1:] if len(lc) > 1 else sorted(lc)
        worker_cpus = [c for w in workers for c in lc[w]]
        env.update({
            "tgen_version": ping.get("version"), "tsc_hz": ping.get("tsc_hz"),
            # DPDK's TSC frequency (rounded to 10 MHz), the calibrated one tgen paces and times
            # with, the correction in ppm and how it was measured
            "tsc_calibration": tsc_calibration_record(ping),
            "binary": str(self.proc.binary or find_tgen_binary()),
            "netns": self.proc.netns,
            "lcores": self.proc.lcores, "lcore_cpus": {str(k): sorted(v) for k, v in lc.items()},
            "ports": [{k: p.get(k) for k in ("id", "name", "driver", "mac", "link_up",
                                            "link_speed_bps", "speed_bps", "rxq", "txq", "mtu",
                                            "tx_lcores", "rx_lcores", "socket", "pool_socket",
                                            "tx_pool_socket", "tx_offloads_offered",
                                            "tx_offloads_used", "tx_cksum", "tx_offload_note")}
                      for p in ports],
            "pairs": self.pairs,
            "rx_groups": self.rx_groups,
            # each direction's sub-streams and the lcores/CPUs they ran on (tgen_cores)
            "tgen_cores": self.split_info or None,
            # shared: two lcores on one CPU, or a worker on the control lcore's CPU, or fewer
            # host CPUs than lcores
            "cores_shared": (len(cpus) != len(set(cpus))
                             or len(set(worker_cpus)) < len(worker_cpus)
                             or (os.cpu_count() or 1) < len(lc)),
            "host_cpus": os.cpu_count(),
        })
        return env

    def close(self) -> None:
        if self.proc.alive() and self.stream_ids:
            with contextlib.suppress(MeasurerError):
                self.proc.rpc("stream.remove", all=True, _timeout=5.0)
        self.stream_ids = []
