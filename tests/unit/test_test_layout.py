"""pytest collects tests/ in rootdir mode (no __init__.py): two test modules with one basename in
different folders stop the whole run with a collection error.  That happened once
(tests/unit/test_ceiling.py and tests/integration/test_ceiling.py) and only a clean clone showed it."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_test_module_basenames_are_unique():
    seen: dict[str, list[str]] = defaultdict(list)
    for f in TESTS.rglob("test_*.py"):
        seen[f.name].append(str(f.relative_to(TESTS)))
    dups = {k: v for k, v in seen.items() if len(v) > 1}
    assert not dups, f"rename one of each: {dups}"
