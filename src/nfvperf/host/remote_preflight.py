"""The preflight checks (:mod:`nfvperf.host.preflight`) on a host reached over SSH.

The checks read the host's own ``/proc``, ``/sys`` and ``$PATH``, so they must run there.  The
modules they need (``preflight``, ``hugepages``, ``run``, ``cpu``: stdlib only) go to the host as one zip
(:func:`bundle`, uploaded once per content hash) that the host's ``python3`` imports; :data:`SCRIPT`
runs the checks and prints them as JSON.  Nothing else of nfvperf needs to be installed there.
"""
from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path
from typing import Iterable

from .preflight import Binary, Check, PreflightNeeds

_PKG = Path(__file__).resolve().parent.parent
_FILES = ("__init__.py", "host/__init__.py", "host/run.py", "host/hugepages.py", "host/cpu.py",
          "host/preflight.py")


def bundle() -> bytes:
    """The zip the host imports ``nfvperf.host.preflight`` from."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for rel in _FILES:
            info = zipfile.ZipInfo(f"nfvperf/{rel}", date_time=(2020, 1, 1, 0, 0, 0))
            z.writestr(info, (_PKG / rel).read_bytes())
    return buf.getvalue()


BUNDLE_NAME = "nfvperf-preflight-" + hashlib.sha256(bundle()).hexdigest()[:12] + ".zip"

SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from nfvperf.host import preflight as pf
print(json.dumps(pf.checks_for(json.loads(sys.argv[2]))))
"""


def needs_dict(binaries: Iterable[tuple[Binary, bool]], pci: Iterable[str] = (),
               required: Iterable[str] = ("root",)) -> PreflightNeeds:
    """The ``needs`` argument of ``SshHost.preflight``."""
    return {"binaries": [{"name": b.name, "package": b.package, "candidates": list(b.candidates),
                          "env": b.env, "required": req} for b, req in binaries],
            "pci": list(pci), "required": list(required)}


__all__ = ["bundle", "BUNDLE_NAME", "SCRIPT", "needs_dict", "Check", "PreflightNeeds"]
