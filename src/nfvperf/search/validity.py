"""Trial validity: an invalid trial is retried, never used for a decision.

A trial the measurer marks ``valid=False`` (sent less than intended, counters not settled,
negative loss, generator late, ...) is reported to the recorder as it happens, then repeated
at the same input, up to ``retries`` times (default 3).  If every attempt is invalid the test
fails loudly with :class:`InvalidTrialsError`, listing the reasons.  Searches only ever see
valid trials.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Callable, Optional, Protocol, Sequence

from nfvperf.trial import (Measurer, MeasurerError, Segment, TrialResult, negative_loss_reason,
                           sent_short, stretched)

DEFAULT_RETRIES = 3

#: a trial's context: ``phase``, ``attempt``, ``used``, ``search`` and what the caller passed
TrialContext = dict[str, object]
OnTrial = Callable[[TrialResult, TrialContext], None]


class ValidityRunner(Protocol):
    """What a search calls to run a trial: a valid constant-load trial at ``load_pps`` for
    ``duration_s`` (retried while invalid), ``context`` passed on to the recorder.
    :class:`TrialRunner` is the one the runner gives; tests give their own."""

    def measure(self, duration_s: float, load_pps: float, **context: object) -> TrialResult:
        ...


class InvalidTrialsError(MeasurerError):
    """A trial stayed invalid after all retries; the test cannot continue."""

    def __init__(self, duration_s: float, load_pps: float, attempts: int, reasons: list[list[str]],
                 trials: Optional[list[TrialResult]] = None):
        self.duration_s = duration_s
        self.load_pps = load_pps
        self.attempts = attempts
        self.reasons = reasons
        self.trials = list(trials or [])      # the invalid attempts, in order
        flat = "; ".join(f"attempt {i + 1}: {', '.join(r) or 'no reason given'}"
                         for i, r in enumerate(reasons))
        super().__init__(f"trial at {load_pps:,.2f} pps for {duration_s:g} s was invalid "
                         f"{attempts} times in a row, giving up: {flat}")

    def generator_achieved_pps(self) -> Optional[float]:
        """If every attempt failed because the generator sent less than intended, the best
        per-interface load it achieved; else None (the trials failed for another reason)."""
        got = [generator_shortfall(tr) for tr in self.trials]
        known = [g for g in got if g is not None]
        if not got or len(known) < len(got):
            return None
        return max(known)


def generator_shortfall(tr: TrialResult) -> Optional[float]:
    """The per-interface load the generator actually offered, if it sent less than 99.9 % of the
    intended frames (:func:`nfvperf.trial.sent_short`, over the whole trial) or sent them all over
    a stretched time (:func:`nfvperf.trial.stretched`); None if it kept up,
    if the DUT held it back (``extra["backpressure"]``: the shortfall is the DUT's loss), or if
    the trial says nothing about it."""
    if (tr.extra or {}).get("backpressure"):
        return None         # the DUT held the generator back (a full virtio/memif ring): its loss
    exp = tr.expected or 0
    if exp > 0 and sent_short(tr.sent, exp):
        return tr.load_pps * tr.sent / exp
    # every frame sent, but over a stretched time (tgen: effective duration > 110 % of the
    # trial's): the rate it offered is the load scaled by the two durations
    eff, dur = tr.effective_duration_s or 0.0, tr.duration_s or 0.0
    if tr.sent > 0 and stretched(eff, dur):
        return tr.load_pps * dur / eff
    return None


_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?", re.I)


def reason_kind(reason: str) -> str:
    """An invalid-trial reason with its numbers replaced by ``#``, so that reasons of the same
    kind count together ("p#->p#: sent # < #.# % of intended #")."""
    return _NUMBER.sub("#", reason).strip() or "no reason given"


def count_reasons(by_kind: dict[str, int], reasons: list[str]) -> None:
    """Add one trial's reasons to ``by_kind`` (each kind once per trial)."""
    for kind in dict.fromkeys(reason_kind(r) for r in reasons or ["no reason given"]):
        by_kind[kind] = by_kind.get(kind, 0) + 1


def check_valid(tr: TrialResult) -> list[str]:
    """Reasons why a trial cannot be trusted ([] if it can).  The measurer's own verdict plus
    the sanity checks every trial must pass (negative loss over the whole trial:
    :func:`nfvperf.trial.negative_loss`)."""
    reasons = list(tr.invalid_reasons) if not tr.valid else []
    if not tr.valid and not reasons:
        reasons.append("measurer marked the trial invalid")
    exp = tr.expected or tr.sent
    neg = negative_loss_reason(tr.received, exp, "expected") if exp > 0 and tr.valid else None
    if neg:
        reasons.append(neg)
    return reasons


@dataclass
class TrialRunner:
    """Runs trials through a measurer with the validity rule and reports each trial.

    ``on_trial(trial_result, context)`` is called after *every* trial, valid or not; the
    context carries ``phase``, ``attempt``, ``used`` and whatever the caller passed.
    ``invalid_by_reason`` counts the invalid trials per kind of reason (:func:`reason_kind`; a
    trial with two kinds of reason counts under both).
    """

    measurer: Measurer
    retries: int = DEFAULT_RETRIES
    on_trial: Optional[OnTrial] = None
    total_trial_s: float = 0.0          # valid trials only
    total_invalid_s: float = 0.0
    trials: int = 0
    invalid_trials: int = 0
    log: list[TrialResult] = field(default_factory=list)   # valid trials, in order
    invalid_by_reason: dict[str, int] = field(default_factory=dict)

    def _run(self, fn: Callable[[], TrialResult], duration_s: float, load_pps: float,
             context: TrialContext) -> TrialResult:
        reasons_all: list[list[str]] = []
        invalid: list[TrialResult] = []
        for attempt in range(1, self.retries + 2):
            tr = fn()
            reasons = check_valid(tr)
            ctx = dict(context, attempt=attempt, used=not reasons)
            self.trials += 1
            if reasons:
                tr = dataclasses.replace(tr, valid=False, invalid_reasons=reasons)
                self.invalid_trials += 1
                count_reasons(self.invalid_by_reason, reasons)
                self.total_invalid_s += tr.duration_s
                reasons_all.append(reasons)
                invalid.append(tr)
                if self.on_trial:
                    self.on_trial(tr, ctx)
                continue
            self.total_trial_s += tr.duration_s
            self.log.append(tr)
            if self.on_trial:
                self.on_trial(tr, ctx)
            return tr
        raise InvalidTrialsError(duration_s, load_pps, len(reasons_all), reasons_all, invalid)

    def measure(self, duration_s: float, load_pps: float, **context: object) -> TrialResult:
        """A valid constant-load trial (retried while invalid)."""
        return self._run(lambda: self.measurer.measure(duration_s, load_pps), duration_s, load_pps,
                         context)

    def single(self, duration_s: float, load_pps: float, context: TrialContext,
               accept: Callable[[list[str]], bool] = lambda _r: False) -> TrialResult:
        """One constant-load trial, never retried, outside the counts (a calibration, a warm-up, an
        MRR attempt): an invalid one comes back marked (``valid`` false, its reasons); reported
        with ``context`` and ``used``: ``accept(reasons)`` (default: not used)."""
        tr = self.measurer.measure(duration_s, load_pps)
        reasons = check_valid(tr)
        if reasons:
            tr = dataclasses.replace(tr, valid=False, invalid_reasons=reasons)
        if self.on_trial:
            self.on_trial(tr, dict(context, used=accept(reasons)))
        return tr

    def measure_burst(self, burst_frames: int, burst_pps: float, drain_s: float = 2.0,
                      **context: object) -> TrialResult:
        return self._run(lambda: self.measurer.measure_burst(burst_frames, burst_pps, drain_s),
                         burst_frames / burst_pps, burst_pps, context)

    def measure_segments(self, segments: Sequence[Segment], **context: object) -> TrialResult:
        dur = sum(s.duration_s for s in segments)
        load = max((s.load_pps for s in segments), default=0.0)
        return self._run(lambda: self.measurer.measure_segments(list(segments)), dur, load, context)

    def measure_reset(self, duration_s: float, load_pps: float, reset_at_s: float,
                      **context: object) -> TrialResult:
        return self._run(lambda: self.measurer.measure_reset(duration_s, load_pps, reset_at_s),
                         duration_s, load_pps, context)

    def call(self, fn: Callable[[], TrialResult], duration_s: float, load_pps: float,
             **context: object) -> TrialResult:
        """Any other kind of trial (address caching, TCP): same validity rule."""
        return self._run(fn, duration_s, load_pps, context)
