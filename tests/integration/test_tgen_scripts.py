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


#: DPDK keeps a runtime directory per --file-prefix (/var/run/dpdk/<prefix>); each script names its
#: tgen's prefix after its own pid.  tgen removes the directory when it exits.
DPDK_RUN_DIRS = {Path("/var/run/dpdk").resolve(), Path("/run/dpdk").resolve()}


@pytest.mark.parametrize("argv,prefix", [
    ([sys.executable, str(TESTS / "selftest.py")], "tgst"),
    ([sys.executable, str(TESTS / "fuzz_rpc.py"), "1500"], "tgfz"),
    (["bash", str(TESTS / "impair_check.sh")], "tgenimp"),
    (["bash", str(TESTS / "veth_check.sh")], "tgenchk"),
], ids=["selftest", "fuzz_rpc", "impair_check", "veth_check"])
def test_tgen_check_script(argv: list[str], prefix: str, leak_check) -> None:
    p = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # the leak check looks at this script's own tag (its netns, tgen process, DPDK directory are
    # named <prefix><pid>), not at whatever other sessions on the machine are doing
    leak_check.watch(f"{prefix}{p.pid}")
    try:
        stdout, stderr = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    out = stdout + stderr
    assert p.returncode == 0, out[-4000:]
    assert " 0 failed" in out or "OK" in out, out[-2000:]
    assert "FAIL" not in stdout, out[-4000:]
    # the script's prefix is <prefix><its pid>; other sessions may run the same scripts, so only
    # this run's directory is checked
    left = [str(d / f"{prefix}{p.pid}") for d in DPDK_RUN_DIRS if (d / f"{prefix}{p.pid}").exists()]
    assert not left, f"DPDK runtime directories left behind: {left}"
