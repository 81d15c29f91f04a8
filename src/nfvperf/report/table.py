"""A report table and the pieces every table module builds on: the rate methods and the latency a
throughput row shows.  Below :mod:`nfvperf.report.tables` (which assembles a run's tables from
``rounds``, ``study``, ``rule_install`` and its own), so none of them imports back up."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from nfvperf.methods import rate_methods
from nfvperf.report.configuration import same_configuration
from nfvperf.report.extract import latency_at_throughput

# the methods whose result is a rate per interface (they declare ``headline=RATE``)
THROUGHPUT_METHODS = rate_methods()


@dataclass
class Table:
    title: str
    note: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    key: str = ""


def latency_for(tests: list[Any], test: Any, own: Any) -> Optional[dict[str, Any]]:
    """Latency for a throughput result: a latency test of the run at the same frame size in the
    same configuration (topology overrides, traffic, study axes: report.configuration), else the
    throughput result's own; None (an empty cell) when neither exists — never the latency of
    another configuration."""
    for t in tests:
        if t.method == "latency" and t.frame_size_b == test.frame_size_b and t.results and \
                same_configuration(t, test):
            lat = latency_at_throughput(t.results[-1].data or {})
            if lat:
                return lat
    if own is not None:
        return latency_at_throughput(own)
    return None
