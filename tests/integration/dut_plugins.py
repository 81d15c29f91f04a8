"""Loading a DUT adapter module of ``plugins/`` as a plugin of ``nfvperf.dut`` (the fake forwarder,
the testpmd vSwitch)."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Iterator

import nfvperf.dut as dut_pkg
from nfvperf.dut.base import DUT_REGISTRY


def load_dut_plugin(tmp_path: Path, source: Path, registered: str) -> Iterator[Path]:
    """Copy the DUT adapter module ``source`` into a directory of its own and load it as a plugin
    of ``nfvperf.dut`` (it registers ``registered``); a generator for a fixture: yields the copy,
    then unloads it."""
    d = tmp_path / "plugins"
    d.mkdir()
    shutil.copy(source, d / source.name)
    dut_pkg.__path__.append(str(d))
    try:
        dut_pkg.load_adapters()
        yield d / source.name
    finally:
        dut_pkg.__path__.remove(str(d))
        DUT_REGISTRY.pop(registered, None)
        sys.modules.pop(f"nfvperf.dut.{source.stem}", None)
