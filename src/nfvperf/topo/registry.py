"""The topology registry: ``spec.kind`` -> the Topology class registered for it.

Its own module, below :mod:`nfvperf.topo.spec` (which validates ``kind`` against it) and the
package (which re-exports it), so neither imports the other while it is half initialised."""
from __future__ import annotations

import importlib
from typing import Any, Callable

from nfvperf.plugins import import_plugins

#: kind -> Topology subclass (or any callable (spec, run, **kw) -> Topology)
REGISTRY: dict[str, Callable[..., Any]] = {}
_NOT_TOPOLOGIES = {"registry", "base", "errors", "spec", "preflight", "ports", "ceiling", "inplace", "measurers"}
_loaded = False


def register(kind: str):
    """Class decorator registering a Topology subclass for ``spec.kind == kind``."""

    def deco(cls):
        REGISTRY[kind] = cls
        # its own kind, also for a subclass of another registered kind (pvvp of pvp)
        if "kind" not in vars(cls):
            cls.kind = kind
        return cls

    return deco


def load_topologies() -> None:
    """Import every module of this package (each registers its kinds)."""
    global _loaded
    _loaded = True
    import_plugins("nfvperf.topo", importlib.import_module("nfvperf.topo").__path__, skip=_NOT_TOPOLOGIES)


def registered_kinds() -> list[str]:
    """Every registered kind (the topology modules imported once), in module order."""
    if not _loaded:
        load_topologies()
    return sorted(REGISTRY, key=lambda k: (getattr(REGISTRY[k], "__module__", ""), k))


def topology_class(kind: str) -> Callable[..., Any]:
    """The class registered for topology ``kind`` (imports the topology modules on demand)."""
    if kind not in REGISTRY:
        load_topologies()
    try:
        return REGISTRY[kind]
    except KeyError:
        raise ValueError(f"no topology registered for kind {kind!r}; known: {sorted(REGISTRY)}") from None
