"""Trending and regression detection over the results history (issue 17).

- :mod:`.series`: what a series is (identity, id), :mod:`.selector`: naming series;
- :mod:`.points`: reading series out of the store with SQL, :mod:`.noise`: a point's own noise;
- :mod:`.detect`: change detection (CSIT's jumpavg) checked against the noise;
- :mod:`.compute`: a trend, and :func:`trend_json` (``nfvperf trend --json``);
- :mod:`.gate`: the newest run against its history, :mod:`.ab`: two builds in one run;
- :mod:`.render`: the terminal tables.
"""
from typing import Any

from nfvperf.trend.selector import Selector, SelectorError


def __getattr__(name: str) -> Any:
    """``trend_json`` and ``trend_series`` are imported on first use (PEP 562): the command line
    imports this package to build its parser, and the trend machinery takes ~0.4 s to import."""
    if name in ("trend_json", "trend_series"):
        from nfvperf.trend import compute
        return getattr(compute, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["Selector", "SelectorError", "trend_json", "trend_series"]
