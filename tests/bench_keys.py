"""The convention every bench under bench/ follows (docs/testing.md, "Benches"): ``--quick`` runs it
in seconds, and its last stdout line is one JSON object holding at least the keys its module
docstring names on a line ``JSON keys: key1, key2, ...`` (wrapped after a comma, it goes on)."""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

#: what a bench names when it starts a busy-polling process: the generator, a DPDK DUT or VNF,
#: OVS, a topology, a guest (any case, as a word or a name's first part: "OvsDpdk", "ovs-dpdk", "TGEN";
#: not "topology")
POLLING = re.compile(r"(?i:\b(tgen|testpmd|ovs|l3fwd|qemu|vnf|dpdk|topo))(?![a-z])")


def benches() -> list[Path]:
    """Every bench, found by glob: a new one is covered without being listed."""
    return sorted((REPO / "bench").glob("*.py"))


def polls(bench: Path) -> bool:
    """Whether ``bench`` may start a busy-polling process: unless its source names none of
    ``POLLING`` and every ``nfvperf run`` it starts (``"run", ...``) is ``"--tg", "sim"``.  The
    benches that poll run in the serial integration pass (test_bench_quick.py), the others in the
    ``no_polling`` pass (test_bench_quick_sim.py); a new bench is in one of them, unlisted."""
    src = bench.read_text()
    if POLLING.search(src):
        return True
    return any('"--tg", "sim"' not in run for run in re.findall(r'"run",[^)]*', src))


def run_quick(bench: Path) -> None:
    """``bench --quick`` exits 0 and its last stdout line is a JSON object with every promised key
    and no ``skipped`` (the body of both test_bench_quick modules)."""
    keys = promised_keys(bench)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, str(bench), "--quick"], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=300)
    took = time.monotonic() - t0
    print(f"\n[{bench.name} --quick] {took:.1f} s")
    assert p.returncode == 0, f"{bench.name} --quick exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
    doc = last_json(p.stdout)
    missing = [k for k in keys if k not in doc]
    assert not missing, f"{bench.name}: its JSON line lacks {missing} (promised: {keys}): {str(doc)[:1500]}"
    assert "skipped" not in doc, f"{bench.name} skipped on this machine: {doc['skipped']}"


def promised_keys(bench: Path) -> list[str]:
    """The keys the bench's docstring promises (``JSON keys: a, b, ...``); ValueError without."""
    doc = ast.get_docstring(ast.parse(bench.read_text())) or ""
    lines = [ln.strip() for ln in doc.splitlines()]
    starts = [i for i, ln in enumerate(lines) if ln.startswith("JSON keys:")]
    if len(starts) != 1:
        raise ValueError(f"{bench.name}: its docstring needs one line 'JSON keys: key1, key2, ...' "
                         f"(found {len(starts)})")
    text, i = lines[starts[0]], starts[0]
    while text.endswith(",") and i + 1 < len(lines):     # a list wrapped after a comma goes on
        i += 1
        text += " " + lines[i]
    keys = [k.strip() for k in text[len("JSON keys:"):].split(",")]
    if not all(keys):
        raise ValueError(f"{bench.name}: an empty key in {text!r}")
    return keys


def last_json(stdout: str) -> dict[str, Any]:
    """The bench's last stdout line as a JSON object; ValueError naming what it was instead."""
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    if not lines:
        raise ValueError("printed nothing on stdout")
    try:
        doc = json.loads(lines[-1])
    except json.JSONDecodeError as e:
        raise ValueError(f"last line is not JSON ({e}): {lines[-1][:300]!r}") from e
    if not isinstance(doc, dict):
        raise ValueError(f"last line is JSON but not an object: {lines[-1][:300]!r}")
    return doc
