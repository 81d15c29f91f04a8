"""Every module of nfvperf imports on its own, first, as if nothing of nfvperf were loaded yet.

``test_import_cycles`` finds circles in the import graph it reads; a circle that only bites at run
time (a package's ``__init__`` importing a module that imports a name back from the half-built
package) shows only when that module is the first one imported.  This test imports each module
first in turn, in one subprocess, dropping every ``nfvperf`` module from ``sys.modules`` between
them (third-party packages stay loaded, which keeps it fast)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

PROBE = r"""
import importlib, pkgutil, sys, traceback
import nfvperf
names = sorted(m.name for m in pkgutil.walk_packages(nfvperf.__path__, "nfvperf.")
               if not m.name.endswith("__main__"))
bad = []
for name in names:
    for k in [k for k in sys.modules if k == "nfvperf" or k.startswith("nfvperf.")]:
        del sys.modules[k]
    try:
        importlib.import_module(name)
    except Exception as e:
        bad.append(f"{name}: {type(e).__name__}: {e}")
print(len(names))
print("\n".join(bad))
"""


def test_every_module_imports_first() -> None:
    p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300,
                       cwd=SRC)
    assert p.returncode == 0, p.stderr[-3000:]
    count, *bad = p.stdout.strip().splitlines()
    assert int(count) > 100
    assert not [b for b in bad if b], ("modules that fail when imported first (an import circle at "
                                       "run time: move the shared names below both modules):\n"
                                       + "\n".join(bad))


def test_the_probe_sees_a_run_time_circle(tmp_path: Path) -> None:
    pkg = tmp_path / "circ"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .x import X\n")      # the package itself imports fine
    (pkg / "x.py").write_text("X = 1\n")
    (pkg / "y.py").write_text("from circ.z import Z\nY = 1\n")
    (pkg / "z.py").write_text("from circ.y import Y\nZ = 2\n")
    probe = PROBE.replace("import nfvperf\n", "import circ as nfvperf\n").replace('"nfvperf."', '"circ."') \
                 .replace('k == "nfvperf" or k.startswith("nfvperf.")', 'k == "circ" or k.startswith("circ.")')
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                       cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    count, *bad = p.stdout.strip().splitlines()
    assert int(count) == 3
    assert sorted(b.split(":")[0] for b in bad if b) == ["circ.y", "circ.z"]
