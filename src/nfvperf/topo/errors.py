"""The topology layer's base error, below :mod:`nfvperf.topo.base` and the port kinds (which raise
it too), so neither imports the other for it."""
from __future__ import annotations


class TopologyError(RuntimeError):
    """A topology cannot be built as asked (named field and fix in the message)."""
