"""Build B of the CI gate (issue 29 item 4): scripts/build-l3fwd.sh with L3FWD_PATCH applies
l3fwd/patches/urpf-flowstats.patch (a uRPF check with per-flow accounting) to a copy of
dpdk-doc's l3fwd sources and builds it into its own directory, leaving the sources and build A
alone: B's binary holds the patch's flow table (its name) and A's does not; a second call finds
it up to date; a patch that does not exist is refused.  (Its cost is measured by
bench/l3fwd_cpu_cost.py, its gate by bench/ab_gate.py.)"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = Path("/usr/share/dpdk/examples")
PATCH = "l3fwd/patches/urpf-flowstats.patch"
BUILD_A = REPO / "build" / "l3fwd" / "l3fwd"
#: the flow table's name format, a string of the patched code only
MARK = b"l3fwd_flows_%u"

pytestmark = [pytest.mark.no_polling,
              pytest.mark.skipif(not (EXAMPLES / "l3fwd" / "main.c").exists(), reason="needs dpdk-doc (l3fwd sources)")]


def build_l3fwd(out: Path, patch: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "scripts/build-l3fwd.sh"], cwd=REPO, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, L3FWD_BUILD=str(out), L3FWD_PATCH=patch))


def test_build_b_is_the_patched_sources_in_its_own_dir(tmp_path: Path) -> None:
    out = tmp_path / "l3fwd-b"
    p = build_l3fwd(out, PATCH)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert (out / "l3fwd").is_file() and os.access(out / "l3fwd", os.X_OK)
    patched = (out / "examples" / "l3fwd" / "l3fwd_lpm_sse.h").read_text()
    assert "l3fwd_lpm_urpf_account(nb_rx, pkts_burst, qconf);" in patched
    assert "l3fwd_lpm_urpf_account" not in (EXAMPLES / "l3fwd" / "l3fwd_lpm_sse.h").read_text()
    assert MARK in (out / "l3fwd").read_bytes()                      # the patched code is in B
    if BUILD_A.is_file():
        assert MARK not in BUILD_A.read_bytes()                      # and not in A
    again = build_l3fwd(out, PATCH)
    assert again.returncode == 0 and "up to date" in again.stdout


def test_a_missing_patch_is_refused(tmp_path: Path) -> None:
    p = build_l3fwd(tmp_path / "b", "l3fwd/patches/nope.patch")
    assert p.returncode == 1 and "L3FWD_PATCH=l3fwd/patches/nope.patch: no such file" in p.stderr
