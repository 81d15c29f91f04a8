"""Every bench runs to its last line (issue 31 item 4): ``bench/<name>.py --quick`` exits 0 and
its last stdout line is a JSON object with every key its docstring promises (``JSON keys:``).
Benches are found by glob, so a new one is run without being listed.  They start tgen, testpmd
and OVS-DPDK: this module runs in the serial pass (not ``no_polling``)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from bench_keys import REPO, benches, last_json, promised_keys

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.mark.parametrize("bench", benches(), ids=lambda p: p.name)
def test_bench_quick_runs_to_its_json_line(bench) -> None:
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
