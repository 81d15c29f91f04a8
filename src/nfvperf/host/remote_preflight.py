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
from typing import Iterable, TypedDict

from .preflight import Binary, Check
from . import preflight as pf

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
a = json.loads(sys.argv[2])
needs = pf.Needs()
for b in a.get("binaries", []):
    needs.need(pf.Binary(b["name"], b.get("package", ""), tuple(b.get("candidates", ())),
                         b.get("env", "")), required=bool(b.get("required")))
needs.pci = list(a.get("pci", []))
checks = pf.run_checks(needs, required=a.get("required", ["root"]))
print(json.dumps([c.to_dict() for c in checks]))
"""


class BinaryNeed(TypedDict):
    """A :class:`Binary` as JSON, and whether it is required."""

    name: str
    package: str
    candidates: list[str]
    env: str
    required: bool


class PreflightNeeds(TypedDict):
    """What :data:`SCRIPT` checks on the host (``SshHost.preflight``, :func:`local_checks`)."""

    binaries: list[BinaryNeed]
    pci: list[str]
    required: list[str]


def needs_dict(binaries: Iterable[tuple[Binary, bool]], pci: Iterable[str] = (),
               required: Iterable[str] = ("root",)) -> PreflightNeeds:
    """The ``needs`` argument of ``SshHost.preflight``."""
    return {"binaries": [{"name": b.name, "package": b.package, "candidates": list(b.candidates),
                          "env": b.env, "required": req} for b, req in binaries],
            "pci": list(pci), "required": list(required)}


def local_checks(needs: PreflightNeeds) -> list[dict[str, object]]:
    """The same checks on this machine (a testbed host with ``local: true``)."""
    n = pf.Needs()
    for b in needs["binaries"]:
        n.need(Binary(b["name"], b["package"], tuple(b["candidates"]), b["env"]), required=b["required"])
    n.pci = list(needs["pci"])
    return [c.to_dict() for c in pf.run_checks(n, required=needs["required"])]


__all__ = ["bundle", "BUNDLE_NAME", "SCRIPT", "needs_dict", "local_checks", "Check"]
