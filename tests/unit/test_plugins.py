"""One plugin loader (issue 18 item 5): DUT adapters, topologies, port kinds and methods load
through :func:`nfvperf.plugins.import_plugins`, which names a module that fails to import and
raises at once instead of logging a warning and leaving an "unknown DUT" for later."""
from __future__ import annotations

import sys

import pytest

from nfvperf.plugins import PluginImportError, import_plugins


def _package(tmp_path, name: str, modules: dict[str, str]) -> str:
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for mod, src in modules.items():
        (pkg / f"{mod}.py").write_text(src)
    sys.path.insert(0, str(tmp_path))
    return str(pkg)


def test_every_module_is_imported_in_name_order_except_skipped(tmp_path) -> None:
    path = _package(tmp_path, "plug_ok", {"b": "X = 'b'\n", "a": "X = 'a'\n", "base": "X = 1\n",
                                          "_private": "raise RuntimeError('never imported')\n"})
    try:
        mods = import_plugins("plug_ok", [path], skip=("base",))
        assert [m.X for m in mods] == ["a", "b"]
    finally:
        sys.path.remove(str(tmp_path))


def test_a_broken_plugin_fails_loudly_naming_module_and_error(tmp_path) -> None:
    path = _package(tmp_path, "plug_bad", {"good": "X = 1\n", "broken": "import no_such_module_here\n"})
    try:
        with pytest.raises(PluginImportError) as e:
            import_plugins("plug_bad", [path])
        assert e.value.module == "plug_bad.broken"
        assert "plug_bad.broken failed to import" in str(e.value)
        assert "no_such_module_here" in str(e.value)
        assert isinstance(e.value.__cause__, ModuleNotFoundError)
    finally:
        sys.path.remove(str(tmp_path))


def test_the_four_registries_load_through_it() -> None:
    from nfvperf.dut import load_adapters
    from nfvperf.dut.base import DUT_REGISTRY as DUTS
    from nfvperf.methods import REGISTRY as METHODS
    from nfvperf.topo import registered_kinds
    from nfvperf.topo.ports import port_kind_names

    load_adapters()
    assert {"ovs-dpdk", "testpmd", "linux-bridge"} <= set(DUTS)
    assert {"p2p", "p-ovs-p", "pvp"} <= set(registered_kinds())
    assert {"af_packet", "af_xdp", "vhost", "memif", "pci"} <= set(port_kind_names())
    assert {"throughput", "latency"} <= set(METHODS)
