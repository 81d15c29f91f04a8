"""The benches of test_bench_quick.py that run only simulated parts (``bench_keys.polls`` is
False: their source names no generator, DPDK DUT, OVS, topology or guest, and every nfvperf run
they start is ``--tg sim``), in the ``no_polling`` pass: ``bench/<name>.py --quick`` exits 0
and its last stdout line is a JSON object with every key its docstring promises."""
from __future__ import annotations

import pytest

from bench_keys import benches, polls, run_quick

pytestmark = [pytest.mark.root, pytest.mark.no_polling, pytest.mark.slow]


@pytest.mark.parametrize("bench", [b for b in benches() if not polls(b)], ids=lambda p: p.name)
def test_sim_bench_quick_runs_to_its_json_line(bench) -> None:
    run_quick(bench)
