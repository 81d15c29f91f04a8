"""``nfvperf baseline`` without root, DPDK or a measurement.

``cmd_baseline`` first asks ``_tgen_problem()`` (root, the tgen binary); the tests replace that
one check (``no_tgen_check``) so the rest of the command runs as it would as root: argument
validation, the cache lookup, the table and ``--json`` output.  The measurement itself
(``nfvperf.topo.ceiling.measure_sizes``) is replaced by one that fails the test, unless a test
gives its own; with ``--tgen-lcores`` no topology is built to plan the generator's cores, and with
the cache (``OUT/harness-ceiling.json``, keyed by ``ceiling_key(host, port kind, link speed, MTU,
tgen lcores, frame size)``) pre-filled, nothing is measured at all.
"""
from __future__ import annotations

import copy
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import pytest

from nfvperf import cli
from nfvperf.report.ceiling import LOWER_BOUND_NOTE
from nfvperf.store.ceiling import CACHE_FILE, CeilingCache, ceiling_key
from nfvperf.topo import ceiling as tc
from nfvperf.trial import TrafficProfile

LCORES = "0@0,1@1"
TAG = "nfv0b1c2d"
LINE_1518 = TrafficProfile(frame_size_b=1518, link_speed_bps=10e9).max_load_pps


@pytest.fixture
def no_tgen_check(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Root and the tgen binary are taken as given; any measurement fails the test (its calls are
    recorded in the returned list if a test puts its own ``measure_sizes`` in)."""
    monkeypatch.setattr(cli, "_tgen_problem", lambda: None)

    def no_measurement(cspec: Any, run: Any, todo: Any, **kw: Any) -> Any:
        raise AssertionError(f"a measurement was started for sizes {sorted(todo)}")

    monkeypatch.setattr(tc, "measure_sizes", no_measurement)
    return []


def _entry(fps: float, at_line_rate: bool, **kw: Any) -> dict[str, Any]:
    return dict({"fps": fps, "zero_loss_fps": fps, "forwarding_fps": fps, "at_line_rate": at_line_rate,
                 "method": tc.CEILING_METHOD, "measured_at_epoch": time.time(),
                 "measured_at": "2025-01-01T00:00:00Z",
                 "self_latency_ns": {"min": 4_000.0, "p50": 8_000.0, "p99": 15_000.0}}, **kw)


def _prefill(out: Path, entries: dict[int, dict[str, Any]], port_kind: str = "af_packet",
             mtu: int = 1500, link_bps: float = 10e9) -> Path:
    """Put ceilings in OUT/harness-ceiling.json under the keys ``nfvperf baseline`` looks up."""
    cache = CeilingCache(out / CACHE_FILE)
    for size, e in entries.items():
        cache.put(ceiling_key(platform.node(), port_kind, link_bps, mtu, LCORES, size), e)
    return cache.path


def _baseline(out: Path, *extra: str) -> int:
    return cli.main(["baseline", "--out", str(out), "--tgen-lcores", LCORES, "--link-speed", "10G",
                     "--tag", TAG, *extra])


# ----------------------------------------------------------------- refusals and bad input (exit 2)
def test_refused_without_root_before_anything_else(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(tc, "harness_ceiling", lambda *a, **k: pytest.fail("measured without root"))
    assert cli.main(["baseline", "--out", str(tmp_path), "--size", "64"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "nfvperf: error: baseline needs root" in err and "--tg tgen" not in err
    assert not (tmp_path / CACHE_FILE).exists() and not (tmp_path / "baseline").exists()


@pytest.mark.parametrize("argv,says", [
    (["--size", "abc"], "argument --size: invalid int value: 'abc'"),
    (["--mtu", "jumbo"], "argument --mtu: invalid int value: 'jumbo'"),
    (["--port-kind", "bogus"], "nfvperf: error: baseline: "),
    (["--port-kind", "bogus"], "port_kind"),
    (["--mtu", "10"], "greater than or equal to 68"),
    (["--link-speed", "fast"], "baseline: cannot read link speed 'fast'"),
    (["no-such-suite.yaml"], "file not found: no-such-suite.yaml"),
])
def test_bad_input_is_a_clear_error_and_exit_2(tmp_path, capsys, no_tgen_check, argv, says) -> None:
    assert cli.main(["baseline", "--out", str(tmp_path), *argv]) == cli.EXIT_USAGE
    captured = capsys.readouterr()
    assert says in captured.err
    assert captured.out == ""
    assert not (tmp_path / CACHE_FILE).exists()


def test_an_invalid_suite_is_exit_2(tmp_path, capsys, no_tgen_check) -> None:
    suite = tmp_path / "bad.yaml"
    suite.write_text("name: bad\ntopology: {kind: p2p, port_kind: nonsense}\n"
                     "traffic: {frame_sizes: [64]}\ntests: [{method: throughput}]\n")
    assert cli.main(["baseline", str(suite), "--out", str(tmp_path)]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "the suite is not valid" in err and "nothing was run" in err


@pytest.mark.parametrize("argv,says", [
    (["--size", "10"], "out of range; allowed 60..16128"),
    (["--size", "1600"], "--size: frames of 1600 B do not fit MTU 1500"),
    (["--port-kind", "vhost", "--mtu", "9000", "--size", "9100"], "raise --mtu to at least 9082"),
    (["--port-kind", "af_packet", "--mtu", "9000", "--size", "64"], "carries an MTU of at most 1500"),
])
def test_sizes_and_mtus_the_suite_would_refuse_are_refused(tmp_path, capsys, no_tgen_check, argv,
                                                           says) -> None:
    """--size/--mtu/--port-kind get the suite's checks: nothing is measured with a 10 B frame, a
    frame above the MTU, or an MTU tgen cannot carry on the kind."""
    assert _baseline(tmp_path, *argv) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "baseline:" in err and says in err, err
    assert not (tmp_path / "harness-ceiling.json").exists()


# ----------------------------------------------------------------- from the cache: nothing measured
def test_json_from_a_prefilled_cache(tmp_path, capsys, no_tgen_check) -> None:
    _prefill(tmp_path, {64: _entry(3_000_000.0, False), 1518: _entry(LINE_1518, True)})
    assert _baseline(tmp_path, "--size", "64", "--size", "1518", "--json") == cli.EXIT_OK
    captured = capsys.readouterr()
    res = json.loads(captured.out)           # stdout is the JSON alone (logs go to stderr)
    assert res["cached"] is True and "error" not in res
    assert res["port_kind"] == "af_packet" and res["mtu"] == 1500 and res["tgen_lcores"] == LCORES
    assert res["link_speed_bps"] == 10e9
    assert sorted(res["per_size"]) == ["1518", "64"]
    assert res["per_size"]["64"]["fps"] == 3_000_000.0 and res["per_size"]["64"]["at_line_rate"] is False
    assert res["per_size"]["1518"]["at_line_rate"] is True and res["per_size"]["1518"]["cached"] is True
    assert f"baseline {TAG}: logs in {(tmp_path / 'baseline' / TAG).resolve()}" in captured.err
    assert "from the cache" in captured.err


def test_table_from_a_prefilled_cache_shows_the_lower_bound(tmp_path, capsys, no_tgen_check) -> None:
    path = _prefill(tmp_path, {64: _entry(3_000_000.0, False), 1518: _entry(LINE_1518, True)})
    assert _baseline(tmp_path, "--size", "64", "--size", "1518", "--max-age-h", "2") == cli.EXIT_OK
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"harness ceiling: tgen through testpmd io on af_packet, tgen lcores {LCORES}, MTU 1500"
    (l64,) = [ln for ln in lines if ln.split()[:1] == ["64"]]
    (l1518,) = [ln for ln in lines if ln.split()[:1] == ["1518"]]
    assert "3,000,000" in l64 and "≥" not in l64 and l64.rstrip().endswith("cached")
    assert "4.0/8.0/15.0" in l64                                   # self-latency in us
    assert "≥ 812,744" in l1518 and "100.00" in l1518               # at line rate: a lower bound
    assert LOWER_BOUND_NOTE in out
    assert f"cache: {path} (max age 2 h)" in out


def test_another_mtu_is_another_cache_entry(tmp_path, capsys, no_tgen_check) -> None:
    """The cache is keyed by MTU too: a ceiling at MTU 1500 is not reused for --mtu 1400 (the
    stand-in measurement fails, which harness_ceiling reports as the result's error: exit 1)."""
    _prefill(tmp_path, {64: _entry(3_000_000.0, False)})
    assert _baseline(tmp_path, "--size", "64", "--mtu", "1400", "--json") == cli.EXIT_FAILED
    res = json.loads(capsys.readouterr().out)
    assert "a measurement was started for sizes [64]" in res["error"]


# ----------------------------------------------------------------- measured (a stand-in measurement)
def test_refresh_measures_and_fills_the_cache(tmp_path, capsys, no_tgen_check, monkeypatch) -> None:
    path = _prefill(tmp_path, {64: _entry(3_000_000.0, False)})
    calls: list[list[int]] = []

    def fake(cspec: Any, run: Any, todo: Any, **kw: Any) -> Any:
        assert cspec.kind == "p2p" and cspec.dut == "testpmd" and cspec.tgen_lcores == LCORES
        calls.append(sorted(todo))
        return {s: {"fps": 1_234_567.0, "at_line_rate": False,
                    "self_latency_ns": {"min": 1_000.0, "p50": None, "p99": 3_000.0}} for s in todo}

    monkeypatch.setattr(tc, "measure_sizes", fake)
    assert _baseline(tmp_path, "--size", "64", "--refresh") == cli.EXIT_OK
    out = capsys.readouterr().out
    assert calls == [[64]]
    (l64,) = [ln for ln in out.splitlines() if ln.split()[:1] == ["64"]]
    assert "1,234,567" in l64 and "1.0/—/3.0" in l64 and l64.rstrip().endswith("measured")
    assert LOWER_BOUND_NOTE not in out
    (entry,) = json.loads(path.read_text())["entries"].values()
    assert entry["fps"] == 1_234_567.0 and entry["method"] == tc.CEILING_METHOD


def test_a_failed_measurement_exits_1_with_the_error(tmp_path, capsys, no_tgen_check, monkeypatch) -> None:
    def broken(*a: Any, **k: Any) -> Any:
        raise RuntimeError("testpmd would not start")

    monkeypatch.setattr(tc, "measure_sizes", broken)
    assert _baseline(tmp_path, "--size", "64") == cli.EXIT_FAILED
    captured = capsys.readouterr()
    assert "error: RuntimeError: testpmd would not start" in captured.out
    (l64,) = [ln for ln in captured.out.splitlines() if ln.split()[:1] == ["64"]]
    assert l64.split() == ["64", "—"]                        # no ceiling for that size
    assert "FAILED" in captured.err
    assert not (tmp_path / CACHE_FILE).exists()              # nothing cached


# ----------------------------------------------------------------- _print_baseline alone
def test_print_baseline_rows_sources_and_missing_sizes(capsys, tmp_path) -> None:
    res = {"port_kind": "memif", "tgen_lcores": "2@2", "mtu": 9000,
           "per_size": {"64": dict(_entry(2_000_000.0, False), cached=True),
                        "9000": dict(_entry(138_000.0, True), cached=False, self_latency_ns={})}}
    profiles = {s: TrafficProfile(frame_size_b=s, link_speed_bps=10e9) for s in (64, 512, 9000)}
    cli._print_baseline(copy.deepcopy(res), profiles, CeilingCache(tmp_path / "c.json", max_age_s=1800))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "harness ceiling: tgen through testpmd io on memif, tgen lcores 2@2, MTU 9000"
    rows = [ln.split() for ln in lines if ln.split()[:1] in (["64"], ["512"], ["9000"])]
    assert [r[0] for r in rows] == ["64", "512", "9000"]          # sorted by size, every size shown
    assert rows[0][-1] == "cached" and "≥" not in rows[0]
    assert rows[1] == ["512", "—"]                                # asked for, not in the result
    assert rows[2][1:3] == ["≥", "138,000"] and rows[2][-2:] == ["—/—/—", "measured"]
    assert lines[-2] == LOWER_BOUND_NOTE
    assert lines[-1] == f"cache: {tmp_path / 'c.json'} (max age 0.5 h)"
    assert not any(ln.startswith("error:") for ln in lines)
