"""Paired ratios and a distribution-free confidence interval for their median (issue 16).

On a shared host a vCPU's speed moves by up to half for seconds at a time, so two configurations
measured minutes apart meet different hosts.  A study therefore measures its units in interleaved
rounds (every unit once per round, in a fresh random order) and divides each unit's figure by the
baseline's figure *of the same round*: what the host did to both cancels in the ratio.  The
median of those paired ratios gets a confidence interval from the order statistics alone
(:func:`median_interval`), which assumes nothing about the ratios' distribution beyond the
rounds being independent draws of it.

One method only, stated in every result: the exact rank interval.  For n sorted values
x(1) ≤ … ≤ x(n) the true median m lies below x(k) only if fewer than k values are below m, and
the count of values below m is binomial(n, ½); so [x(k), x(n−k+1)] covers m with probability
1 − 2·P(Bin(n, ½) ≤ k − 1).  That is exact (for continuous values), not an approximation: the
achieved coverage is reported as the interval's ``confidence`` (e.g. 0.979 for n = 10), and it
is the asked confidence or more whenever ``enough`` is True.

Pure Python (``math``, ``statistics``): no numpy.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Optional, Sequence

METHOD = "exact rank interval (order statistics, binomial)"


# --------------------------------------------------------------------------- the rank interval

def rank_coverage(n: int, k: int) -> float:
    """Coverage of [x(k), x(n−k+1)] (1-based order statistics of ``n`` values) for the median:
    1 − 2·P(Bin(n, ½) ≤ k − 1).  0 when the pair is empty or crossed (2k > n + 1)."""
    if n < 1 or k < 1 or 2 * k > n + 1:
        return 0.0
    tail = sum(math.comb(n, i) for i in range(k)) / 2.0 ** n
    return max(0.0, 1.0 - 2.0 * tail)


def rank_pair(n: int, confidence: float = 0.95) -> tuple[int, float]:
    """The largest ``k`` (1-based) whose pair [x(k), x(n−k+1)] covers the median with at least
    ``confidence``, and that coverage.  When even (min, max) falls short, k = 1 and its
    (smaller) coverage: the caller tells by comparing the coverage with ``confidence``."""
    _check_confidence(confidence)
    if n < 1:
        raise ValueError("need at least one value")
    k = 1
    while rank_coverage(n, k + 1) >= confidence:
        k += 1
    return k, rank_coverage(n, k)


def rounds_needed(confidence: float = 0.95) -> int:
    """The fewest values whose (min, max) covers the median with ``confidence``: 6 for 95 %
    (1 − 2/2⁶ = 0.969; 5 give 0.9375), 8 for 99 %."""
    _check_confidence(confidence)
    n = 1
    while rank_coverage(n, 1) < confidence:
        n += 1
    return n


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), e.g. 0.95; got {confidence!r}")


@dataclass
class Interval:
    """A median with its exact rank interval.

    ``confidence`` is the coverage the chosen pair of order statistics *achieves* (≥ ``asked``
    when ``enough``); ``asked`` is the confidence that was asked for.  ``enough`` is False when
    there are too few values for ``asked`` (n < 6 for 95 %): then lo/hi are min/max and
    ``confidence`` is what they give (0.9375 for n = 5, 0 for n = 1)."""

    median: float
    lo: float
    hi: float
    n: int
    confidence: float
    method: str = METHOD
    enough: bool = True
    asked: float = 0.95
    k: int = 1                  #: lo is the k-th smallest value, hi the k-th largest

    def contains(self, x: float) -> bool:
        return self.lo <= x <= self.hi

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def median_interval(values: Iterable[float], confidence: float = 0.95) -> Optional[Interval]:
    """The median of ``values`` and the narrowest symmetric pair of order statistics (k-th
    smallest, k-th largest) that covers the true median with at least ``confidence``.

    None for no values.  Too few values for ``confidence``: (min, max) with its own coverage and
    ``enough=False``; one value: a degenerate interval (lo = hi = the value, coverage 0).
    NaN values are refused (filter failed measurements first, e.g. with :func:`paired_ratios`)."""
    _check_confidence(confidence)
    xs = sorted(float(v) for v in values)
    if any(math.isnan(x) for x in xs):
        raise ValueError("NaN among the values: leave failed measurements out first")
    n = len(xs)
    if n == 0:
        return None
    k, cov = rank_pair(n, confidence)
    return Interval(median=statistics.median(xs), lo=xs[k - 1], hi=xs[n - k], n=n, confidence=cov,
                    enough=cov >= confidence, asked=confidence, k=k)


# --------------------------------------------------------------------------- paired ratios

@dataclass
class PairedRatios:
    """Per-round ratios unit/base, and the rounds left out (either side failed: None, NaN or ≤ 0)."""

    ratios: list[float] = field(default_factory=list)
    skipped: int = 0
    rounds: int = 0             #: rounds offered (len of the shorter input)


def _usable(x: Any) -> Optional[float]:
    """``x`` as a float when it is a usable figure (a number, finite, > 0), else None."""
    if x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and v > 0 else None


def paired_ratios(unit: Sequence[Optional[float]], base: Sequence[Optional[float]]) -> PairedRatios:
    """unit[i] / base[i] for every round i where both are usable figures (not None, not NaN, not
    infinite, > 0): a failed round is not a ratio, it is counted in ``skipped``.  The two lists
    are paired by position (round); they must be equally long."""
    if len(unit) != len(base):
        raise ValueError(f"paired figures need one per round on both sides: {len(unit)} unit "
                         f"figures, {len(base)} baseline figures")
    out = PairedRatios(rounds=len(unit))
    for u, b in zip(unit, base):
        uf, bf = _usable(u), _usable(b)
        if uf is not None and bf is not None:
            out.ratios.append(uf / bf)
        else:
            out.skipped += 1
    return out


# --------------------------------------------------------------------------- the ratio interval

def _pct(c: float) -> str:
    """A coverage as whole percents for text (0.95 -> '95', 0.875 -> '88')."""
    return f"{c * 100:.0f}"


@dataclass
class RatioInterval:
    """The median of paired per-round ratios (unit / baseline of the same round) with its exact
    rank interval.

    ``differs``: the interval excludes 1.0 and there were enough rounds for the asked
    confidence.  ``half_width_pct``: when the interval contains 1.0, the largest distance from
    1.0 to an end, in percent (the change this study could not have missed); None otherwise."""

    median: float
    lo: float
    hi: float
    n: int
    skipped: int
    confidence: float
    method: str = METHOD
    enough: bool = True
    asked: float = 0.95
    differs: bool = False
    half_width_pct: Optional[float] = None

    def contains(self, x: float) -> bool:
        return self.lo <= x <= self.hi

    def text(self) -> str:
        """One line for a report cell, e.g. ``0.75× (0.73–0.77, 95 % CI, 10 rounds)``,
        ``no difference measured (±3.1 %)``, or with too few rounds
        ``0.98× (0.91–1.04, 88 % CI: 4 rounds, 6 give 95 %)``."""
        left_out = f"; {self.skipped} failed round{'s' * (self.skipped != 1)} left out" if self.skipped else ""
        if self.n == 1:
            return f"{self.median:.2f}× (1 round: no interval, {rounds_needed(self.asked)} give " \
                   f"{_pct(self.asked)} %{left_out})"
        if not self.enough:
            return (f"{self.median:.2f}× ({self.lo:.2f}–{self.hi:.2f}, {_pct(self.confidence)} % CI: "
                    f"{self.n} rounds, {rounds_needed(self.asked)} give {_pct(self.asked)} %{left_out})")
        if self.differs:
            return (f"{self.median:.2f}× ({self.lo:.2f}–{self.hi:.2f}, {_pct(self.asked)} % CI, "
                    f"{self.n} rounds{left_out})")
        return f"no difference measured (±{self.half_width_pct:.1f} %{left_out})"

    def to_dict(self) -> dict[str, Any]:
        """Everything, JSON-ready (the text too)."""
        return {**asdict(self), "text": self.text()}


def ratio_interval(unit: Sequence[Optional[float]], base: Sequence[Optional[float]],
                   confidence: float = 0.95) -> Optional[RatioInterval]:
    """The paired ratios unit[i]/base[i] (:func:`paired_ratios`: failed rounds left out) and the
    exact rank interval of their median (:func:`median_interval`).  None when no round has both
    figures."""
    pr = paired_ratios(unit, base)
    iv = median_interval(pr.ratios, confidence)
    if iv is None:
        return None
    contains_one = iv.lo <= 1.0 <= iv.hi
    half = max(abs(iv.lo - 1.0), abs(iv.hi - 1.0)) * 100.0 if contains_one else None
    return RatioInterval(median=iv.median, lo=iv.lo, hi=iv.hi, n=iv.n, skipped=pr.skipped,
                         confidence=iv.confidence, method=iv.method, enough=iv.enough,
                         asked=confidence, differs=iv.enough and not contains_one,
                         half_width_pct=half)


__all__ = ["METHOD", "Interval", "PairedRatios", "RatioInterval", "median_interval", "paired_ratios",
           "rank_coverage", "rank_pair", "ratio_interval", "rounds_needed"]
