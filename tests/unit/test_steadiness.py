"""The host CPU steadiness probe (nfvperf.host.steadiness) and how reports show it."""
from __future__ import annotations

import itertools
import os

import pytest

from nfvperf.host import steadiness as st


def test_summarize_uses_percentiles_not_one_slow_chunk() -> None:
    # CPU 0 steady at 100 chunks/s with a single chunk hit by an interrupt; CPU 1 slow for a
    # third of the probe (a neighbour on the vCPU's host core)
    cpu0 = [100.0] * 29 + [20.0]
    cpu1 = [100.0] * 20 + [60.0] * 10
    s = st.summarize({0: cpu0, 1: cpu1}, 2.0)
    assert s["cpus"]["0"]["p10_rel"] == pytest.approx(1.0)      # the one slow chunk is ignored
    assert s["cpus"]["1"]["p10_rel"] == pytest.approx(0.6)      # a third of the time at 60 %
    assert s["spread_pct"] == pytest.approx(40.0)
    assert s["slowest_rel"] == pytest.approx(0.6)


def test_reference_is_the_usual_best_not_one_fast_chunk() -> None:
    # a single chunk timed fast (a clock hiccup) must not make a steady CPU look 50 % slow
    s = st.summarize({0: [100.0] * 29 + [200.0]}, 1.0)
    assert s["cpus"]["0"]["p10_rel"] == pytest.approx(1.0) and s["spread_pct"] == pytest.approx(0.0)


def test_summarize_steady_host_has_no_note() -> None:
    s = st.summarize({0: [100.0, 99.0, 101.0] * 10, 1: [100.5, 99.5] * 15}, 1.0)
    assert s["spread_pct"] < st.NOTE_ABOVE_PCT
    assert st.steadiness_note(s) is None
    assert "speed moved" in st.steadiness_text(s) and "CPU 0" in st.steadiness_text(s)


def test_note_names_the_spread_and_what_to_do() -> None:
    s = st.summarize({0: [100.0] * 20 + [50.0] * 10}, 1.0)
    note = st.steadiness_note(s)
    assert note is not None and "50 %" in note and "--repeat" in note


def test_text_for_missing_or_failed_probe() -> None:
    assert st.steadiness_text(None) == "not measured"
    assert "cannot pin" in st.steadiness_text({"error": "cannot pin to a CPU of [7]: EINVAL"})
    assert st.steadiness_note({"error": "x"}) is None
    assert st.summarize({}, 0.1)["error"]


def test_probe_pins_each_cpu_and_restores_affinity() -> None:
    before = os.sched_getaffinity(0)
    cpus = sorted(before)[:2]
    seen: list[set[int]] = []
    calls = itertools.cycle([0.01, 0.02])

    def chunk() -> float:
        seen.append(os.sched_getaffinity(0))
        return next(calls)

    out = st.probe_cpus(cpus, budget_s=0.05, chunk=chunk)
    assert os.sched_getaffinity(0) == before
    assert {frozenset(s) for s in seen} == {frozenset({c}) for c in cpus}
    assert set(out["cpus"]) == {str(c) for c in cpus}
    # chunks alternate 10 ms / 20 ms: half of them run at half speed
    assert out["spread_pct"] == pytest.approx(50.0)


def test_probe_bad_cpu_is_an_error_not_an_exception() -> None:
    before = os.sched_getaffinity(0)
    out = st.probe_cpus([4095], budget_s=0.01)
    assert "cannot pin" in out["error"] and os.sched_getaffinity(0) == before


def test_combine_keeps_every_probe_and_reports_the_worst() -> None:
    before = dict(st.summarize({0: [100.0] * 30}, 2.0), when="before the run")
    after = dict(st.summarize({0: [100.0] * 20 + [75.0] * 10}, 2.0), when="after it")
    both = st.combine([before, after])
    assert both["spread_pct"] == pytest.approx(25.0) and both["probes"] == [before, after]
    assert "before the run and after it" in st.steadiness_text(both)
    assert st.combine([{"error": "x", "when": "before the run"}])["error"] == "x"


def test_preflight_check_warns_above_the_note_threshold() -> None:
    steady = lambda: st.summarize({0: [100.0] * 30}, 2.0)                    # noqa: E731
    shaky = lambda: st.summarize({0: [100.0] * 20 + [60.0] * 10}, 2.0)       # noqa: E731
    ok = st.check_steadiness(steady)
    assert ok.name == "cpu_steadiness" and ok.status == "ok" and "before" not in ok.detail
    warn = st.check_steadiness(shaky)
    assert warn.status == "warn" and "40 %" in warn.detail and "bare-metal" in warn.fix
    assert st.check_steadiness(lambda: {"error": "cannot pin"}).status == "warn"


def test_budget_from_the_environment(monkeypatch) -> None:
    monkeypatch.delenv(st.BUDGET_ENV, raising=False)
    assert st.budget_from_env() == st.BUDGET_S == 2.0
    monkeypatch.setenv(st.BUDGET_ENV, "0.5")
    assert st.budget_from_env() == 0.5
    asked: list[float] = []
    monkeypatch.setattr(st, "probe_cpu", lambda cpu, seconds, chunk: asked.append(seconds) or [1.0] * 5)
    out = st.probe_cpus([0, 1])
    # 0.25 s per CPU (the budget split, at least MIN_PER_CPU_S), not the default 1 s each
    assert asked == [0.25, 0.25] and "cpus" in out
    monkeypatch.delenv(st.BUDGET_ENV)
    asked.clear()
    st.probe_cpus([0, 1])
    assert asked == [1.0, 1.0]
    for bad in ("0", "-1", "fast", "nan"):
        monkeypatch.setenv(st.BUDGET_ENV, bad)
        with pytest.raises(ValueError, match=r"NFVPERF_STEADINESS_S=.*above 0.*unset it"):
            st.budget_from_env()
