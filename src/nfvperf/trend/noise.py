"""A point's value and its own noise: how far it may move without a change being measured.

The noise of one run's value is the threshold ``nfvperf compare`` would use for that result
against itself (:func:`nfvperf.report.compare.noise_threshold`, one rule for both commands):

- a unit of an interleaved study (``rounds``): the width of its median's 95 % exact rank
  interval relative to the median, (hi − lo) / median, of the series' metric; the per-round
  figures also go to the change detection as the run's samples, so a run whose rounds spread
  widely weighs its mean accordingly.  The host steadiness probe does not raise it: the rounds
  measured the host's noise themselves;
- a repeated search (``--repeat N``): the relative range (max − min) / median of the repetitions,
  at least the search's width;
- a single search: its relative width (RUB − RLB) / RLB (the resolution of the result), at least
  twice the coefficient of variation of any repeated values it stores;
- and for the last two, when the run's host steadiness probe (``environment.cpu_steadiness``)
  saw the CPU speed move more than that: the probe's spread (``noise_source`` says which).

:mod:`nfvperf.trend.detect` keeps a change only when it is larger than the noise of the runs on
both sides of it.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Optional

from nfvperf.report.compare import ROUNDS_SOURCE, host_noise, noise_threshold
from nfvperf.report.extract import headline_pps, num, repeat_of


def rounds_figures(data: dict[str, Any], metric: str) -> tuple[Optional[float], list[float], Optional[float]]:
    """(median, per-round figures, relative interval width) of ``metric`` in a rounds summary."""
    mm = (data.get("metrics") or {}).get(metric) or {}
    med = num(mm.get("median_pps"))
    samples = [float(v) for v in mm.get("values_pps") or [] if num(v) is not None and v > 0]
    iv = mm.get("interval") or {}
    lo, hi, ivm = num(iv.get("lo")), num(iv.get("hi")), num(iv.get("median"))
    width = (hi - lo) / ivm if ivm and lo is not None and hi is not None else None
    return med, samples, width


def point_value(p: Any, kind: str, value: Optional[float], data: dict[str, Any]) -> None:
    """Set ``p.value``, ``p.samples``, ``p.noise`` and ``p.noise_source`` from the test's result."""
    metric = p.data.get("metric")
    env = p.data.get("run_env") or {}
    if kind == "rounds":
        med, samples, width = rounds_figures(data, str(metric))
        p.value, p.samples = med, samples
        p.noise, p.noise_source = (width or 0.0), ROUNDS_SOURCE
        return
    p.value = value if value is not None else (headline_pps(data) if data else None)
    if not data:
        return
    # the threshold of the result against itself (a repeated search needs both sides to say so)
    thr, source = noise_threshold(data, data if repeat_of(data) is not None else {}, 0.0)
    if not source and thr > 0:
        source = "search width"
    host = host_noise(SimpleNamespace(environment=env))
    if host > thr:
        thr, source = host, "host CPU steadiness"
    p.noise, p.noise_source = thr, source
