"""A report table and the pieces every table module builds on: the rate methods and the latency a
throughput row shows.  Below :mod:`nfvperf.report.tables` (which assembles a run's tables from
``rounds``, ``study``, ``rule_install`` and its own), so none of them imports back up."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from nfvperf.methods import rate_methods, result_class, result_of
from nfvperf.report.configuration import same_configuration
from nfvperf.report.extract import result

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
        if is_latency(t.method) and t.frame_size_b == test.frame_size_b and t.results and \
                same_configuration(t, test):
            res = result(t)
            lat = res.latency_at_throughput() if res is not None else None
            if lat:
                return lat
    if own is not None:
        return result_of(test.method, own).latency_at_throughput()
    return None


def is_latency(method: str) -> bool:
    """The method's result is latency per load point (its result class declares ``LATENCY``)."""
    return result_class(method).LATENCY


def is_loss_steps(method: str) -> bool:
    """The method's result is frame loss per load step (``LOSS_STEPS``)."""
    return result_class(method).LOSS_STEPS
