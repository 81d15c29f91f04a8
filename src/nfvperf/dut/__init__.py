"""DUT adapters: one class per switch or VNF, all behind :class:`nfvperf.dut.base.DutAdapter`.

Adapters register themselves with ``@register_dut("<spec dut name>")``; :func:`load_adapters`
imports every module of this package so a new adapter file needs no edit here.
"""
from __future__ import annotations

import importlib
import logging
import pkgutil

log = logging.getLogger(__name__)


def load_adapters() -> None:
    """Import every adapter module in this package (each registers itself)."""
    for mod in pkgutil.iter_modules(__path__):
        if mod.name.startswith("_") or mod.name == "base":
            continue
        try:
            importlib.import_module(f"{__name__}.{mod.name}")
        except Exception as e:  # noqa: BLE001 - one broken adapter must not hide the others
            log.warning("DUT adapter module %s failed to import: %s", mod.name, e)
