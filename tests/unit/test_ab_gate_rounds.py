"""bench/ab_gate.py's ``rounds_for_threshold`` (issue 29 item 4: the rounds a 2 % gate needs on a
host): the fewest rounds from which the A/A' interval stays at most 2 x threshold wide at every
larger count measured; None when even the whole run is wider."""
from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def ab_gate():
    spec = importlib.util.spec_from_file_location("ab_gate", REPO / "bench" / "ab_gate.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_fewest_rounds_from_which_the_width_stays_within_the_threshold():
    rounds_for = ab_gate().rounds_for
    # 8 rounds were narrow by chance, 10 were not: the count is 12, from which on all stay within 4 %
    assert rounds_for({6: 10.0, 8: 3.0, 10: 5.0, 12: 3.5, 14: 4.0}, 2.0) == 12
    assert rounds_for({6: 3.9, 8: 3.0}, 2.0) == 6
    assert rounds_for({6: 3.0, 30: 4.1}, 2.0) is None            # the whole run is too wide
    assert rounds_for({6: 7.0, 30: 5.5}, 3.0) == 30               # a 3 % gate takes 6 % wide
    assert rounds_for({}, 2.0) is None
