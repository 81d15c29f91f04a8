"""nfvperf.topo: topologies under test, built from host ports, a DUT adapter and VNFs.

``build(spec, run) -> Topology`` (a context manager: ``with build(spec, run) as t: t.measurer()``)
picks the class registered for ``spec.kind``.  A topology module registers itself::

    from nfvperf.topo import register
    from nfvperf.topo.base import Topology

    @register("my-kind")
    class MyKind(Topology):
        duts = ("my-switch",)        # the DUT adapters it can drive (None: any)
        def setup(self): ...

Modules of this package are imported on demand (every module, so a new topology file needs no
edit here); there is no ``if kind == ...`` chain.  A topology class declares what it can use
(``duts``, ``port_kinds``) and needs (``cpu_demands()``, ``hugepage_demand_mb()``,
``preflight_needs()``); ``TopologySpec`` validates ``kind``/``dut`` against these registries.
"""
from __future__ import annotations

from typing import Any

from nfvperf.host.run import ResourceTracker, RunContext

from .registry import REGISTRY, load_topologies, register, registered_kinds, topology_class
from .spec import TopologySpec

__all__ = ["build", "register", "topology_class", "switching_operations", "REGISTRY", "RunContext", "ResourceTracker",
           "TopologySpec", "load_topologies", "registered_kinds"]


def switching_operations(spec: TopologySpec) -> int:
    """Switching operations per frame (seed 000 Table 5-1) that ``spec.kind``'s class declares,
    without building it (the simulated DUT and reports use it)."""
    return int(getattr(topology_class(spec.kind), "base_switching_operations", 1))


def tx_pairs(spec: TopologySpec) -> int:
    """The generator port pairs that send traffic in ``spec`` (``Topology.tx_pair_count``; by
    default ports // 2), without building it: the transmitting interfaces of the aggregate."""
    cls = topology_class(spec.kind)
    count = getattr(cls, "tx_pair_count", None)
    return int(count(spec)) if count is not None else max(1, int(spec.ports) // 2)


def build(spec: TopologySpec, run: Any, **kwargs: Any):
    """The Topology for ``spec`` (not yet up: enter it, ``with build(spec, run) as topo:``).

    ``run`` is a RunContext (or anything with ``tag`` and ``run_dir``).  ``kwargs`` go to the
    topology class (``preflight=False``, ``tgen_binary=...``, ``start_tgen=False``)."""
    if isinstance(spec, dict):
        spec = TopologySpec.model_validate(spec)
    if not isinstance(run, RunContext):
        run = RunContext(getattr(run, "tag", None), getattr(run, "run_dir", None))
    return topology_class(spec.kind)(spec, run, **kwargs)
