"""Every bench promises its JSON keys and takes ``--quick`` (checked without running it; the
integration test test_bench_quick.py runs each)."""
from __future__ import annotations

import pytest

from bench_keys import REPO, benches, last_json, polls, promised_keys


@pytest.mark.parametrize("bench", benches(), ids=lambda p: p.name)
def test_every_bench_promises_its_keys_and_has_a_quick_mode(bench) -> None:
    assert promised_keys(bench)
    assert "--quick" in bench.read_text(), f"{bench.name}: no --quick mode"


def test_the_key_line_and_the_last_line_are_read_strictly(tmp_path) -> None:
    b = tmp_path / "b.py"
    b.write_text('"""A bench.\n\nJSON keys: a, b_c\n"""\n')
    assert promised_keys(b) == ["a", "b_c"]
    b.write_text('"""A bench.\n\nJSON keys: a,\n  b_c, d\nNeeds root.\n"""\n')
    assert promised_keys(b) == ["a", "b_c", "d"]
    b.write_text('"""A bench without the line."""\n')
    with pytest.raises(ValueError, match="JSON keys"):
        promised_keys(b)
    assert last_json('table\n{"a": 1}\n') == {"a": 1}
    for bad in ('{"a": 1}\ndone\n', "", "[1, 2]\n"):
        with pytest.raises(ValueError):
            last_json(bad)


def test_benches_that_start_polling_processes_are_told_apart(tmp_path) -> None:
    """test_bench_quick.py (serial pass) runs the benches ``polls`` finds, test_bench_quick_sim.py
    (``no_polling`` pass) the others: a bench naming tgen, a DPDK DUT, OVS or a topology, or
    starting an nfvperf run that is not ``--tg sim``, is never run beside another test."""
    assert polls(REPO / "bench" / "ab_gate.py") and polls(REPO / "bench" / "rule_install.py")
    assert not polls(REPO / "bench" / "store_scale.py")
    b = tmp_path / "b.py"
    for src, expect in (('nfv("run", s, "--tg", "sim", "--db", str(db))', False),
                        ("from nfvperf.tg.sim import SimMeasurer", False),
                        ('nfv("run", s, "--db", str(db))', True),            # the default generator
                        ('nfv("run", s, "--tg", "tgen")', True),
                        ("from nfvperf.topo import build", True),
                        ("OvsDpdk(ctx)", True), ("ovs-vsctl show", True), ("start a VNF", True)):
        b.write_text(src + "\n")
        assert polls(b) is expect, src
