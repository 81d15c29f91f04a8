"""Trending and regression detection over the results history (issue 17).

- :mod:`.series`: what a series is (identity, id), :mod:`.selector`: naming series;
- :mod:`.points`: reading series out of the store with SQL, :mod:`.noise`: a point's own noise;
- :mod:`.detect`: change detection (CSIT's jumpavg) checked against the noise;
- :mod:`.compute`: a trend, and :func:`trend_json` (``nfvperf trend --json``);
- :mod:`.gate`: the newest run against its history, :mod:`.ab`: two builds in one run;
- :mod:`.render`: the terminal tables.
"""
from nfvperf.trend.compute import trend_json, trend_series
from nfvperf.trend.selector import Selector, SelectorError

__all__ = ["Selector", "SelectorError", "trend_json", "trend_series"]
