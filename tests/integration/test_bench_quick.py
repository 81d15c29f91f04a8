"""Every bench runs to its last line (issue 31 item 4): ``bench/<name>.py --quick`` exits 0 and
its last stdout line is a JSON object with every key its docstring promises (``JSON keys:``).
Benches are found by glob, so a new one is run without being listed.  This module runs the
benches that start tgen, testpmd, l3fwd or OVS-DPDK (``bench_keys.polls``), in the serial pass
(not ``no_polling``); test_bench_quick_sim.py runs the others in the ``no_polling`` pass."""
from __future__ import annotations

import pytest

from bench_keys import benches, polls, run_quick

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.mark.parametrize("bench", [b for b in benches() if polls(b)], ids=lambda p: p.name)
def test_bench_quick_runs_to_its_json_line(bench) -> None:
    run_quick(bench)
