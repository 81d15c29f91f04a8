"""One plugin loader for DUT adapters, topologies, port kinds and methods (issue 18 item 5).

Each of those packages is a registry whose entries are its own modules: a module registers itself
when imported (``@register_dut``, ``@register``, ``@register_port_kind``) or declares ``METHODS``.
:func:`import_plugins` imports every module of such a package.  A module that cannot be imported is
an error that names it and the cause, raised at once: a broken adapter must not show up later as
"unknown DUT".
"""
from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Iterable


class PluginImportError(ImportError):
    """A plugin module failed to import; ``module`` is its dotted name, ``__cause__`` the error."""

    def __init__(self, module: str, error: BaseException):
        self.module = module
        super().__init__(f"plugin module {module} failed to import: {type(error).__name__}: {error} "
                         f"(fix or remove {module.replace('.', '/')}.py)")


def import_plugins(package: str, path: Iterable[str], skip: Iterable[str] = ()) -> list[ModuleType]:
    """Import every module of ``package`` (its ``__path__``), in name order, except names starting
    with ``_`` and those in ``skip``.  Raises :class:`PluginImportError` on the first that fails."""
    skipped = set(skip)
    out = []
    for mod in sorted(pkgutil.iter_modules(list(path)), key=lambda m: m.name):
        if mod.name.startswith("_") or mod.name in skipped:
            continue
        name = f"{package}.{mod.name}"
        try:
            out.append(importlib.import_module(name))
        except Exception as e:  # noqa: BLE001 - re-raised with the module's name
            raise PluginImportError(name, e) from e
    return out
