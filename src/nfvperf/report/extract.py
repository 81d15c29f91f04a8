"""Read the numbers a report needs out of stored results.

A stored method result is read back as its method's result class (:func:`result`:
``nfvperf.methods.result_of``), which knows its own fields: its rate, main scalar, run-log line and
latency points.  The tolerant readers (``num``, ``find_key``, ``fmt_num``, ``headline_pps``...) live
with the result classes in :mod:`nfvperf.methods.result` and are re-exported here; a report
degrades to "not available" instead of failing when a method adds or moves a field.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from nfvperf import units
from nfvperf.methods import MethodResult, rate_methods, result_of
from nfvperf.methods.result import (HEADLINE_KEYS, find_key, fmt_num, goals_of, headline_pps, latency_of, num,
                                    repeat_of, scalars, spread_text, walk)
from nfvperf.trial import TrafficProfile
from nfvperf.validation import deep_merge

__all__ = ["HEADLINE_KEYS", "find_key", "fmt_num", "goals_of", "headline_pps", "latency_of", "num", "repeat_of",
           "scalars", "spread_text", "walk", "result", "RATE_METHODS",
           "headline_of_run", "traffic_profile", "test_topology", "TestView", "resolved_tests", "size_of", "rates"]


def result(test: Any) -> Optional[MethodResult]:
    """A stored test's last result as its method's result class (None: the test has none)."""
    return result_of(test.method, test.results[-1].data or {}) if test.results else None


def result_value(t: Any) -> Optional[float]:
    """The test's headline figure (fps per interface), or None."""
    if not getattr(t, "results", None):
        return None
    r = t.results[-1]
    if getattr(r, "value_pps", None) is not None:
        return float(r.value_pps)
    return headline_pps(r.data or {})


def traffic_profile(d: dict[str, Any]) -> TrafficProfile:
    """The stored ``tests.traffic`` dict back as a TrafficProfile (wire size, max load)."""
    known = {f.name for f in dataclasses.fields(TrafficProfile)}
    return TrafficProfile(**{k: v for k, v in (d or {}).items() if k in known})


def test_topology(config_topology: Optional[dict[str, Any]], row: Optional[dict[str, Any]]) -> dict[str, Any]:
    """A stored ``tests.topology`` row as the full topology the test ran on: the run config's
    ``topology`` with the row's ``overrides``, plus the row's own fields (kind, ports,
    switching_operations, directions).  A row without ``overrides`` (stored before they were
    split out) already holds the full spec."""
    row = row or {}
    if "overrides" not in row:
        return row
    full = deep_merge(config_topology or {}, row.get("overrides") or {})
    full.update((k, v) for k, v in row.items() if k != "overrides")
    return full


class TestView:
    """A stored test with ``topology`` resolved by :func:`test_topology`; everything else is the
    test's own."""

    __test__ = False          # not a pytest class

    def __init__(self, test: Any, topology: dict[str, Any]):
        self._test = test
        self.topology = topology
        self.stored_topology = test.topology or {}      # the row as stored (kind, overrides, ...)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._test, name)


def resolved_tests(run: Any) -> list[Any]:
    """The run's tests, each with its full topology (see :func:`test_topology`)."""
    cfg_topo = (run.config or {}).get("topology") or {}
    return [TestView(t, test_topology(cfg_topo, t.topology)) for t in run.tests]


def size_of(profile: dict[str, Any]) -> float:
    """Mean L2 size on the wire (outer size for VXLAN), from a stored TrafficProfile dict."""
    return traffic_profile(profile).wire_size_b


def rates(pps: float, profile: dict[str, Any]) -> dict[str, float]:
    """fps, L1/L2 Mbps and % line rate (L1) per interface for one rate (units.rate_summary)."""
    tp = traffic_profile(profile)
    return dict(units.rate_summary(pps, tp.wire_size_b, tp.link_speed_bps), max_fps=tp.max_load_pps)


# methods whose result *is* a rate in fps per interface (stored as Result.value_pps)
RATE_METHODS = rate_methods()      # what the methods declare (MethodInfo.headline == RATE)


def headline_of_run(run: Any) -> Optional[str]:
    """E.g. 'throughput 64 B: 7,992,699 fps/if (53.71 % L1)' from the first throughput-like result."""
    for t in run.tests:
        for r in t.results:
            if r.value_pps is None:
                continue
            prof = t.traffic or {}
            rr = rates(r.value_pps, prof)
            size = f"{t.frame_size_b} B" if t.frame_size_b else "IMIX"
            unit = ((run.config or {}).get("traffic") or {}).get("rate_unit", "pps")
            value = {"l1_mbps": f"{rr['l1_mbps']:,.1f} L1 Mbps/if", "l2_mbps": f"{rr['l2_mbps']:,.1f} L2 Mbps/if",
                     "percent": f"{rr['l1_pct']:.2f} % line rate (L1)"}.get(unit, f"{r.value_pps:,.0f} fps/if")
            return f"{t.name} {size}: {value} ({rr['l1_pct']:.2f} % L1)" if unit != "percent" else \
                f"{t.name} {size}: {value}"
    return None
