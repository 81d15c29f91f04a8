"""Issue 8: trial hygiene (warm-up, invalid-trial counts, per-trial DUT counters) and
repeatable results (repeat, median and spread, compare's noise from the spread)."""
from __future__ import annotations

import statistics
from dataclasses import replace
from types import SimpleNamespace

import pytest

from nfvperf.cli import main
from nfvperf.config import SuiteError
from nfvperf.suite_load import validate_suite
from nfvperf.methods import REGISTRY, ThroughputParams
from nfvperf.methods.throughput import warmup_duration
from nfvperf.report.compare import compare_runs
from nfvperf.report.tables import build
from nfvperf.runner import execute
from nfvperf.store import Store
from nfvperf.trial import TrafficProfile

from _core_helpers import LINE_64, Recorder, sim

run = REGISTRY["throughput"].run


def cold_dut(capacity=8e6, flows=1, **kw):
    """A sim DUT whose first trial loses 30 % of its frames (flow set-up, caches, vhost
    reconnects), as a real one does; ``warmup_default`` as a real generator (tgen) sets it."""
    m = sim(capacity, **kw)
    m.set_profile(TrafficProfile(frame_size_b=64, bidirectional=False, latency=False,
                                 flows_per_port=flows))
    real, n = m.measure, [0]

    def measure(d, load):
        n[0] += 1
        tr = real(d, load)
        if n[0] == 1:
            tr = replace(tr, received=int(tr.received * 0.7))
        return tr
    m.measure = measure
    m.warmup_default = True
    return m


# ----------------------------------------------------------------------------- warm-up

def test_warmup_is_recorded_marked_and_excluded_from_the_search():
    m = cold_dut()
    rec = Recorder()
    p = ThroughputParams(trial_duration_s=1.0, max_load_pct=50.0, calibrate=False)
    r = run(m, m.profile, p, rec)
    first = rec.trials[0][2]
    assert first["phase"] == "warmup" and first["warmup"] is True and first["used"] is False
    assert [c["phase"] for _, _, c in rec.trials].count("warmup") == 1
    # the search never saw it: not in its trials nor in its trace, and the cold DUT's loss did
    # not pull the result down (max load 50 % of line rate is below the 8 Mfps capacity)
    assert r.trials == len(rec.trials) - 1 == len(r.trace)
    assert all(t["phase"] != "warmup" for t in r.trace)
    assert r.warmup["loss_ratio"] == pytest.approx(0.3, abs=1e-3)
    assert r.warmup["load_pps"] == pytest.approx(LINE_64 / 2)
    assert r.throughput_pps == pytest.approx(LINE_64 / 2)
    assert r.total_trial_s == r.trials * 1.0 + r.warmup["duration_s"] and r.warmup["passes"] == 1


def test_without_warmup_the_cold_first_trial_misleads_the_search():
    m = cold_dut()
    p = ThroughputParams(trial_duration_s=1.0, max_load_pct=50.0, calibrate=False, warmup=False)
    r = run(m, m.profile, p, Recorder())
    assert r.warmup is None and r.throughput_pps < LINE_64 / 2 * (1 - 1e-4)   # one bisection below


def test_warmup_reaches_every_flow_and_is_off_on_the_plain_sim():
    # 2M flows per port at 1 % of line rate: 3 passes over every flow take ~40 s
    m = cold_dut(flows=2_000_000)
    rec = Recorder()
    r = run(m, m.profile, ThroughputParams(trial_duration_s=1.0, max_load_pct=1.0, calibrate=False), rec)
    want = 3 * 2_000_000 / (LINE_64 / 100)
    assert r.warmup["duration_s"] == pytest.approx(want) and rec.trials[0][1].duration_s == pytest.approx(want)
    assert warmup_duration(1, 1e6) == 1.0
    plain = sim(8e6)
    rec2 = Recorder()
    r2 = run(plain, plain.profile, ThroughputParams(trial_duration_s=1.0), rec2)
    assert r2.warmup is None and rec2.trials[0][2]["phase"] != "warmup"
    # explicit on, explicit length
    r3 = run(plain, plain.profile, ThroughputParams(trial_duration_s=1.0, warmup=True, warmup_s=2.5), Recorder())
    assert r3.warmup["duration_s"] == 2.5


def test_a_warmup_longer_than_the_time_budget_is_skipped_with_a_note():
    # 2M flows per port at 1 % of line rate need ~40 s of warm-up; the search has 10 s
    m = cold_dut(flows=2_000_000)
    rec = Recorder()
    p = ThroughputParams(trial_duration_s=1.0, max_load_pct=1.0, calibrate=False, time_budget_s=10)
    r = run(m, m.profile, p, rec)
    assert r.warmup is None and all(c["phase"] != "warmup" for _, _, c in rec.trials)
    (note,) = [n for n in r.notes if n.startswith("no warm-up")]
    assert "2,000,000 per interface" in note and "time budget (10.0 s)" in note and "warmup_s" in note
    # inside the budget: a warm-up and no such note
    r2 = run(cold_dut(flows=2_000_000), m.profile, ThroughputParams(
        trial_duration_s=1.0, max_load_pct=1.0, calibrate=False, time_budget_s=100), Recorder())
    assert r2.warmup is not None and not any(n.startswith("no warm-up") for n in r2.notes)


def test_a_dut_that_held_the_generator_back_gets_a_second_warmup_pass_at_the_rate_it_took():
    """vhost backpressure: the DUT took 1/4 of the warm-up's frames, so not every flow was sent
    three times; a second pass at 90 % of what it took, long enough for that, follows."""
    flows = 1_000_000
    m = cold_dut(flows=flows)
    real = m.measure

    def measure(d, load):
        tr = real(d, load)
        if load > 1e6:                     # held back: took 1 Mfps of what was asked
            n = int(tr.expected * 1e6 / load)
            tr = replace(tr, sent=n, received=n, extra=dict(tr.extra or {}, backpressure=True))
        return tr
    m.measure = measure
    rec = Recorder()
    r = run(m, m.profile, ThroughputParams(trial_duration_s=1.0, max_load_pct=100.0, calibrate=False), rec)
    warm = [(tr, c) for _, tr, c in rec.trials if c["phase"] == "warmup"]
    assert [c["attempt"] for _, c in warm] == [1, 2] and r.warmup["passes"] == 2
    assert warm[1][0].load_pps == pytest.approx(0.9e6, rel=1e-3)
    assert warm[1][0].duration_s == pytest.approx(3 * flows / 0.9e6, rel=1e-3)
    assert r.warmup["total_s"] == pytest.approx(warm[0][0].duration_s + warm[1][0].duration_s)
    assert r.total_trial_s == pytest.approx(r.trials * 1.0 + r.warmup["total_s"])


def _tgen_like(flows: int = 1, took_pps: float = 1e6):
    """A cold DUT behind a generator like tgen (``rate_limited``: the search calibrates first,
    ``warmup_default``) on vhost: above ``took_pps`` it holds the generator back (backpressure)."""
    m = cold_dut(flows=flows)
    m.rate_limited = True
    real = m.measure

    def measure(d, load):
        tr = real(d, load)
        if load > took_pps:
            n = int(tr.expected * took_pps / load)
            tr = replace(tr, sent=n, received=n, extra=dict(tr.extra or {}, backpressure=True))
        return tr
    m.measure = measure
    return m


def test_the_calibration_trial_is_the_warmups_first_pass():
    """The calibration trial runs at the max load for 1 s, right where the warm-up would run
    at that load for 1 s: it is the warm-up's first pass (stored once, phase ``warmup``,
    ``calibration: true``), not followed by a second trial doing the same.  One flow per
    interface held back to 1 Mfps still got every flow three times over: no second pass either."""
    m = _tgen_like(flows=1)
    rec = Recorder()
    r = run(m, m.profile, ThroughputParams(trial_duration_s=1.0, max_load_pct=100.0), rec)
    phases = [c["phase"] for _, _, c in rec.trials]
    assert phases[0] == "warmup" and phases.count("warmup") == 1 and "calibration" not in phases, phases
    cal, first = rec.trials[0][1], rec.trials[0][2]
    assert first["warmup"] is True and first["calibration"] is True and first["used"] is False
    assert first["attempt"] == 1
    assert r.warmup["from_calibration"] is True and r.warmup["passes"] == 1
    assert r.warmup["duration_s"] == 1.0 and r.warmup["load_pps"] == pytest.approx(LINE_64)
    assert r.warmup["sent"] == cal.sent and r.warmup["loss_ratio"] == cal.loss_ratio
    # the cold DUT lost its frames in the calibration, and the search found what it takes
    assert 0.98e6 < r.throughput_pps <= 1e6 and r.trials == len(rec.trials) - 1
    assert r.total_trial_s == pytest.approx(r.trials * 1.0 + r.warmup["total_s"])
    # 1M flows per interface held back to 1 Mfps: the calibration is the first pass, and a
    # second one at 90 % of what the DUT took sends every flow three times
    m = _tgen_like(flows=1_000_000)
    rec = Recorder()
    r = run(m, m.profile, ThroughputParams(trial_duration_s=1.0), rec)
    phases = [c["phase"] for _, _, c in rec.trials]
    assert phases[:2] == ["warmup", "warmup"] and phases.count("warmup") == r.warmup["passes"] == 2, phases
    assert [c["attempt"] for _, _, c in rec.trials[:2]] == [1, 2] and r.warmup["from_calibration"]
    assert rec.trials[0][2]["calibration"] is True and "calibration" not in rec.trials[1][2]
    assert rec.trials[1][1].load_pps == pytest.approx(0.9e6, rel=1e-3)
    assert rec.trials[1][1].duration_s == pytest.approx(3 * 1_000_000 / 0.9e6, rel=1e-3)


def test_a_warmup_the_calibration_cannot_be_gets_its_own_trial():
    """The calibration is no warm-up where the warm-up must be longer (every flow three times:
    40M flows per interface at line rate are 8 s), slower (warmup_load_pct) or where shorter
    trials make the calibration shorter than the warm-up's 1 s minimum."""
    for params, flows in ((ThroughputParams(trial_duration_s=1.0), 40_000_000),
                          (ThroughputParams(trial_duration_s=1.0, warmup_load_pct=50.0), 1),
                          (ThroughputParams(trial_duration_s=0.5), 1)):
        m = _tgen_like(flows=flows, took_pps=1e9)
        rec = Recorder()
        r = run(m, m.profile, params, rec)
        phases = [c["phase"] for _, _, c in rec.trials]
        assert phases[0] == "calibration" and "warmup" not in rec.trials[0][2], (params, phases)
        assert "calibration" not in rec.trials[1][2]
        assert phases[1] == "warmup" and "from_calibration" not in r.warmup, (params, phases)
        assert phases.count("warmup") == r.warmup["passes"] == 1, (params, phases)


# ----------------------------------------------------------------------------- invalid trials

def test_invalid_trials_are_counted_per_kind_of_reason():
    m = sim(8e6)
    real, n = m.measure, [0]

    def measure(d, load):
        n[0] += 1
        tr = real(d, load)
        if n[0] % 3 == 0:
            tr = replace(tr, valid=False, invalid_reasons=[f"p0->p1: sent {n[0] * 7} < 99.9 % of intended {n[0] * 9}"])
        elif n[0] % 5 == 0:
            tr = replace(tr, valid=False, invalid_reasons=[f"{n[0]} test frames arrived after the drain"])
        return tr
    m.measure = measure
    rec = Recorder()
    r = run(m, m.profile, ThroughputParams(trial_duration_s=1.0), rec)
    bad = [c for _, tr, c in rec.trials if not tr.valid]
    assert r.invalid_trials == len(bad) >= 4
    assert r.invalid_reasons == {
        "p#->p#: sent # < # % of intended #": sum(1 for _, tr, _c in rec.trials
                                                   if not tr.valid and "sent" in tr.invalid_reasons[0]),
        "# test frames arrived after the drain": sum(1 for _, tr, _c in rec.trials
                                                     if not tr.valid and "drain" in tr.invalid_reasons[0])}
    assert sum(r.invalid_reasons.values()) == r.invalid_trials
    assert any(f"{r.invalid_trials} invalid trial(s) repeated" in note for note in r.notes)


def test_a_clean_search_reports_no_invalid_trials():
    m = sim(8e6)
    r = run(m, m.profile, ThroughputParams(trial_duration_s=1.0), Recorder())
    assert r.invalid_trials == 0 and r.invalid_reasons == {}
    assert not any("invalid" in note for note in r.notes)


# ----------------------------------------------------------------------------- loss-tolerant goal

def test_loss_tolerant_preset_chooses_mlr():
    p = ThroughputParams(preset="loss_tolerant")
    assert p.search == "mlr"
    (g,) = p.mlr_goals()
    assert (g.name, g.loss_ratio, g.exceed_ratio) == ("loss_tolerant", 0.0, 0.5)
    with pytest.raises(Exception, match="preset/goals apply only"):
        ThroughputParams(preset="loss_tolerant", search="binary")


# ----------------------------------------------------------------------------- repeat

NOISY = {"capacity_pps": 5e6, "loss_model": "poisson", "noise_pps": 200.0, "seed": 7}


def suite(**extra):
    d = {"name": "rep", "profile": "quick", "sim": NOISY,
         "traffic": {"frame_sizes": [64], "bidirectional": False},
         "tests": [{"method": "throughput", "resolution_pct": 0.5}]}
    d.update(extra)
    return d


def _run(tmp_path, data, **kw):
    store = Store("sqlite:///" + str(tmp_path / "r.db"))
    s = validate_suite(data)
    out = execute(s, store=store, tg="sim", out_dir=tmp_path, show_progress=False, log=lambda s: None, **kw)
    return store, store.load_run(out.run_id)


def test_repeat_three_stores_every_repetition_and_reports_median_and_spread(tmp_path):
    store, run_ = _run(tmp_path, suite(repeat=3))
    (t,) = run_.tests
    data, value = t.results[-1].data, t.results[-1].value_pps
    reps = data["repetitions"]
    assert len(reps) == 3
    vals = [x["throughput_pps"] for x in reps]
    assert len(set(vals)) > 1                           # the noisy sim: they differ
    rep = data["repeat"]
    assert rep["n"] == 3 and rep["values_pps"] == vals
    assert value == rep["median_pps"] == statistics.median(vals) == data["throughput_pps"]
    assert rep["min_pps"] == min(vals) and rep["max_pps"] == max(vals)
    assert rep["relative_range"] == pytest.approx((max(vals) - min(vals)) / statistics.median(vals))
    # every trial says which repetition it belongs to
    assert {tr.context.get("repetition") for tr in t.trials} == {1, 2, 3}
    # the throughput table shows the median and the spread
    (tt,) = [x for x in build(run_).tables if x.key == "throughput"]
    assert tt.columns[-1].startswith("Repeats")
    assert tt.rows[0][1] == f"{statistics.median(vals):,.0f}" and tt.rows[0][-1].startswith("3×: ")


def test_cli_repeat_overrides_the_suite(tmp_path):
    import yaml
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(suite()))
    db = tmp_path / "c.db"
    assert main(["run", str(path), "--tg", "sim", "--db", str(db), "--out", str(tmp_path / "o"),
                 "--no-progress", "--repeat", "3"]) == 0
    (t,) = Store("sqlite:///" + str(db)).load_run(1).tests
    assert len(t.results[-1].data["repetitions"]) == 3
    assert main(["run", str(path), "--tg", "sim", "--db", str(db), "--repeat", "0"]) == 2


def test_repeat_validation_names_the_field():
    with pytest.raises(SuiteError, match=r"tests\[0\]\.repeat: method latency is not a searched rate"):
        validate_suite(suite(tests=[{"method": "latency", "repeat": 3}]))
    with pytest.raises(SuiteError, match=r"tests\[0\]\.repeat: must be a whole number"):
        validate_suite(suite(tests=[{"method": "throughput", "repeat": "x"}]))
    with pytest.raises(SuiteError, match="repeat"):
        validate_suite(suite(repeat=0))
    # a suite-level repeat leaves non-rate methods alone
    s = validate_suite(suite(repeat=3, tests=[{"method": "throughput"}, {"method": "latency", "throughput_pps": 1e6}]))
    assert [t.repeat for t in s.tests] == [3, 1]


# ----------------------------------------------------------------------------- compare

def _fake_run(i, value, spread=None):
    data = {"throughput_pps": value}
    if spread is not None:
        data["repeat"] = {"n": 3, "median_pps": value, "relative_range": spread,
                          "min_pps": value, "max_pps": value * (1 + spread)}
        data["repetitions"] = [{"throughput_pps": value}] * 3
    res = SimpleNamespace(data=data, value_pps=value)
    test = SimpleNamespace(name="throughput", frame_size_b=64, method="throughput", results=[res])
    return SimpleNamespace(id=i, tag=f"nfv{i}", suite="s", tests=[test])


def test_compare_uses_the_repeat_spread_as_noise_when_both_runs_repeated():
    # a 5 % change: flagged by the 2 % default, not when both runs vary by 8 % between repetitions
    assert compare_runs(_fake_run(1, 1e6), _fake_run(2, 1.05e6)).rows[0].flagged
    noisy = compare_runs(_fake_run(1, 1e6, 0.08), _fake_run(2, 1.05e6, 0.02)).rows[0]
    assert not noisy.flagged and noisy.threshold == pytest.approx(0.08) and "repeat spread" in noisy.note
    # a 1.5 % change: hidden by the 2 % default, flagged when both runs are stable to 0.5 %
    assert not compare_runs(_fake_run(1, 1e6), _fake_run(2, 1.015e6)).rows[0].flagged
    stable = compare_runs(_fake_run(1, 1e6, 0.005), _fake_run(2, 1.015e6, 0.004)).rows[0]
    assert stable.flagged and stable.threshold == pytest.approx(0.005)
    # only one side repeated: the default rule
    assert compare_runs(_fake_run(1, 1e6, 0.005), _fake_run(2, 1.015e6)).rows[0].threshold == 0.02
