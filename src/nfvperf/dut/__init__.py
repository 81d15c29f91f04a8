"""DUT adapters: one class per switch or VNF, all behind :class:`nfvperf.dut.base.DutAdapter`.

Adapters register themselves with ``@register_dut("<spec dut name>")``; :func:`load_adapters`
imports every module of this package so a new adapter file needs no edit here.
"""
from __future__ import annotations

from nfvperf.plugins import import_plugins


def load_adapters() -> None:
    """Import every adapter module in this package (each registers itself)."""
    import_plugins(__name__, __path__, skip=("base",))
