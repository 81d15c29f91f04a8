"""Defaults of ``nfvperf trend`` and ``gate``, in a module of their own so that building the
command line (every ``nfvperf`` command does) imports neither jumpavg nor the store."""
from __future__ import annotations

#: counted points per series that change detection sees (jumpavg's cost grows with N²)
DEFAULT_WINDOW = 300
#: the gate's threshold: a regression must be larger than this fraction (and than the noise)
DEFAULT_THRESHOLD = 0.02
