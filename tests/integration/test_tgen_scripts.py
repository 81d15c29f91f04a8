"""The generator's own checks (tgen/tests/), run by `make test` through pytest.

- selftest.py: RPC over net_ring — exact counts for rates, frame counts, IMIX/VLAN/IPv6/VXLAN,
  segments and bursts, refusals, stop, stats and shutdown.
- fuzz_rpc.py: random and hostile JSON-RPC requests; every one answered, no crash.
- impair_check.sh: through a Python "DUT" that drops, duplicates and swaps 1 % each by sequence
  number; tgen must report exactly those counts and the first/last loss times.
- veth_check.sh: AF_PACKET/AF_XDP over a veth pair in a private netns, frames decoded by tshark.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tgen" / "tests"
pytestmark = pytest.mark.root


@pytest.fixture(autouse=True)
def _built() -> None:
    if not (REPO / "tgen" / "build" / "tgen").exists():
        pytest.fail("tgen is not built: `make test` builds it before pytest runs")


@pytest.mark.parametrize("argv", [
    [sys.executable, str(TESTS / "selftest.py")],
    [sys.executable, str(TESTS / "fuzz_rpc.py"), "1500"],
    ["bash", str(TESTS / "impair_check.sh")],
    ["bash", str(TESTS / "veth_check.sh")],
], ids=["selftest", "fuzz_rpc", "impair_check", "veth_check"])
def test_tgen_check_script(argv: list[str], leak_check) -> None:
    p = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    assert " 0 failed" in out or "OK" in out, out[-2000:]
    assert "FAIL" not in p.stdout, out[-4000:]
