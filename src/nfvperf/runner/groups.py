"""Which test units share a topology build: consecutive units on one topology form a group (torn
down between groups); the units of a study that runs in interleaved rounds form one group
``(None, units)`` that :mod:`nfvperf.runner.rounds` schedules; within a group, consecutive
units on the same measurer run on one build (:func:`by_measurer`)."""
from __future__ import annotations

from typing import Optional

from nfvperf.config import TestConfig
from nfvperf.plan import RunPlan
from nfvperf.topo.spec import TopologySpec

__all__ = ["Unit", "Group", "in_rounds", "topology_groups", "by_measurer"]

#: a test unit: (test entry, frame size; None for IMIX and size-less methods)
Unit = tuple[TestConfig, Optional[int]]
#: units sharing one build: (their topology spec, or None for a study in rounds; the units)
Group = tuple[Optional[TopologySpec], list[Unit]]


def in_rounds(test: TestConfig) -> bool:
    """A unit of a study that runs in interleaved rounds."""
    return bool((test.study or {}).get("rounds"))


def topology_groups(units: list[Unit], default: TopologySpec) -> list[Group]:
    """Consecutive test units on the same topology share one build (torn down between groups).
    The units of a study with ``rounds`` form one group ``(None, units)`` where the study's
    first unit stands (their topologies are built by ``nfvperf.runner.rounds``)."""
    groups: list[Group] = []
    studies: dict[str, list[Unit]] = {}
    for test, size in units:
        if in_rounds(test):
            name = (test.study or {})["name"]
            if name not in studies:
                studies[name] = []
                groups.append((None, studies[name]))
            studies[name].append((test, size))
            continue
        spec = test.topology or default
        if groups and groups[-1][0] == spec:
            groups[-1][1].append((test, size))
        else:
            groups.append((spec, [(test, size)]))
    return groups


def by_measurer(group: list[Unit], plan: Optional[RunPlan], tg: str) -> list[tuple[str, list[Unit]]]:
    """The group's consecutive units by the measurer the plan gives them (``--tg tgen`` runs
    a tcp unit with iperf3 through the same topology, built for it without the generator)."""
    out: list[tuple[str, list[Unit]]] = []
    for test, size in group:
        u = plan.unit(test, size) if plan is not None else None
        unit_tg = u.measurer if u is not None else tg
        if out and out[-1][0] == unit_tg:
            out[-1][1].append((test, size))
        else:
            out.append((unit_tg, [(test, size)]))
    return out
