"""The measurer factory seam of a run: what :class:`~nfvperf.runner.RunLoop` calls to get the
measurer of one topology group (a context manager that releases the topology on exit), and the
run's own, :func:`measurer_for`, which hands the suite's settings to
:func:`nfvperf.topo.measurers.topology_measurer`.  Tests pass their own factories to
:func:`nfvperf.runner.execute` (``measurer_factory``)."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, ContextManager, Iterator, Optional, Protocol

from nfvperf.config import Suite
from nfvperf.topo.measurers import topology_measurer
from nfvperf.topo.spec import TopologySpec
from nfvperf.trial import Measurer

__all__ = ["MeasurerFactory", "measurer_for"]


class MeasurerFactory(Protocol):
    """What makes the measurer of one topology group: a context manager yielding it (and
    releasing the topology on exit), filling ``info`` with the topology's environment.
    ``topo_kwargs`` (a testbed run only): more arguments of the topology (hosts, cabled links)."""

    def __call__(self, suite: Suite, tg: str, tag: str, run_dir: Path, info: dict[str, Any],
                 spec: Optional[TopologySpec] = None, *,
                 topo_kwargs: Optional[dict[str, Any]] = None) -> ContextManager[Measurer]: ...


@contextlib.contextmanager
def measurer_for(suite: Suite, tg: str, tag: str, run_dir: Path, info: dict[str, Any],
                 spec: Optional[TopologySpec] = None,
                 topo_kwargs: Optional[dict[str, Any]] = None) -> Iterator[Measurer]:
    """The run's :class:`MeasurerFactory`: :func:`nfvperf.topo.measurers.topology_measurer` for
    topology ``spec`` (default: the suite's) with the suite's ``sim:`` and traffic direction."""
    with topology_measurer(tg, spec or suite.spec.topology, sim=suite.spec.sim,
                           bidirectional=bool(suite.spec.traffic.bidirectional), tag=tag, run_dir=run_dir,
                           info=info, topo_kwargs=topo_kwargs) as m:
        yield m
