"""One test unit's stored result, and what a later unit of the run takes from it.

It reads a method's result through the method's result class (``nfvperf.methods.result_of``),
as the report does, never by the method's name: a search run ``repeat`` times is stored as one
result (:func:`combine_repetitions`); a unit's result with its summary and pass/fail
(:class:`UnitResult`); the zero-loss Throughput that a later unit needing it first (latency,
back-to-back, recovery, reset, RFC 2889 forwarding) reuses at the same size, topology and traffic
(:class:`ThroughputReuse`)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

from nfvperf.config import TestConfig
from nfvperf.methods import MethodParams, MethodResult, result_of
from nfvperf.methods.common import rates
from nfvperf.methods.throughput import ThroughputPrereq
from nfvperf.search.result import repeat_summary
from nfvperf.store.db import jsonable
from nfvperf.topo.spec import TopologySpec
from nfvperf.trial import TrafficProfile

__all__ = ["UnitResult", "ThroughputReuse", "combine_repetitions", "throughput_key", "result_dict"]


def result_dict(res: MethodResult) -> dict[str, Any]:
    """A method's result as the dict the store keeps."""
    d = jsonable(res)
    return d if isinstance(d, dict) else {"value": d}


@dataclass
class UnitResult:
    """What is stored for one unit: the result (its repetitions combined), the report's summary of
    it (``value_pps``, ``text``), and whether the method reported a failure."""

    method: str
    data: dict[str, Any]
    summary: dict[str, Any]

    @classmethod
    def of(cls, method: str, datas: list[dict[str, Any]], profile: TrafficProfile, ndir: int) -> "UnitResult":
        """The result of one or more repetitions (``datas``: :func:`result_dict` of each run)."""
        data = combine_repetitions(method, datas, profile, ndir) if len(datas) > 1 else datas[0]
        return cls(method, data, result_of(method, data).summary(profile, ndir).to_dict())

    @property
    def failed(self) -> bool:
        return self.data.get("passed") is False or self.data.get("status") == "failed"

    @property
    def reason(self) -> Optional[str]:
        """Why it failed (None when it passed)."""
        return str(self.data.get("reason") or "the method reported a failure") if self.failed else None

    @property
    def value_pps(self) -> Optional[float]:
        return self.summary.get("value_pps")

    @property
    def text(self) -> str:
        return str(self.summary.get("text", "done"))


class ThroughputReuse:
    """The zero-loss Throughput the run has measured so far (by size, topology, traffic and the
    test's own sim settings), for the later units that need one first."""

    def __init__(self) -> None:
        self.measured: dict[str, float] = {}

    def params(self, test: TestConfig, size: Optional[int],
               topo_spec: TopologySpec) -> tuple[MethodParams, Optional[float]]:
        """The unit's method params and the Throughput it reuses (None: none).  A method that needs
        the Throughput first (latency, back-to-back, recovery, reset, RFC 2889 forwarding) gets the
        zero-loss Throughput an earlier test of this run measured at the same size, topology and
        traffic, unless its entry sets ``throughput_pps`` (its ``throughput:`` block is then only the
        fallback when no earlier measurement exists)."""
        params = test.params_for(size)
        v = self.measured.get(throughput_key(test, size, topo_spec))
        if isinstance(params, ThroughputPrereq) and params.throughput_pps is None and v:
            return params.model_copy(update={"throughput_pps": v}), v
        return params, None

    def note(self, test: TestConfig, size: Optional[int], topo_spec: TopologySpec, result: UnitResult) -> None:
        """Keep a throughput unit's result when it is an RFC 2544 (zero-loss) Throughput."""
        if result.value_pps and result_of(test.method, result.data).zero_loss_throughput():
            self.measured.setdefault(throughput_key(test, size, topo_spec), result.value_pps)


def combine_repetitions(method: str, datas: list[dict[str, Any]], profile: TrafficProfile,
                        ndir: int) -> dict[str, Any]:
    """One stored result for a search run ``len(datas)`` times (``repeat``): the repetition with
    the median headline (the lower middle one for an even count) with every repetition under
    ``repetitions`` and ``repeat`` = :func:`nfvperf.search.result.repeat_summary` (median, min,
    max, relative range, max/min) plus ``median_repetition`` (1-based).  The headline fields
    (``throughput_pps`` and its ``rates``) hold the median itself."""
    values = [result_of(method, d).rate_pps() for d in datas]
    summ = repeat_summary(values)
    order = sorted(range(len(datas)), key=lambda i: values[i] or 0.0)
    mid = order[(len(order) - 1) // 2]
    data = dict(datas[mid])
    data["repeat"] = dict(summ, median_repetition=mid + 1)
    data["repetitions"] = datas
    if "throughput_pps" in data and summ["median_pps"] is not None:
        data["throughput_pps"] = summ["median_pps"]
        data["rates"] = rates(summ["median_pps"], profile)
    return data


def throughput_key(test: TestConfig, size: Optional[int], topo_spec: TopologySpec) -> str:
    traffic = test.traffic.model_dump(exclude={"frame_sizes", "rate_unit", "latency"})
    sim = getattr(test, "sim", None)     # a test's own sim: settings model another DUT
    return json.dumps([size, topo_spec.model_dump(mode="json"), traffic] +
                      ([sim.model_dump(mode="json")] if sim is not None else []), sort_keys=True, default=str)


