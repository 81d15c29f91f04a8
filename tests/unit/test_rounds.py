"""Interleaved rounds (issue 16): the study block's round settings, the rounds' orders, what the
runner stores per round, the report's ratios with intervals, and the noisy sim's proof that
paired rounds recover a known ratio where units run one after the other do not."""
from __future__ import annotations

import copy
from typing import Any

import pytest

from nfvperf.config import SuiteError
from nfvperf.suite_load import validate_suite
from nfvperf.report.rounds import rounds_result, rounds_tables, round_rows
from nfvperf.runner.rounds import build_groups, round_orders
from nfvperf.runner import execute
from nfvperf.store import Store

SUITE: dict[str, Any] = {
    "name": "rounds-unit",
    "topology": {"kind": "p-ovs-p", "dut": "ovs-dpdk", "ports": 2, "port_kind": "vhost"},
    "traffic": {"frame_sizes": [64], "bidirectional": True, "link_speed": "10G"},
    "profile": "quick",
    "tests": [{"method": "throughput", "name": "flows", "search": "binary", "resolution_pct": 1,
               "study": {"axes": {"flows": [1, 100000]}, "rounds": 6, "seed": 5, "metrics": ["mrr"]}}],
}


def suite(**study: Any) -> dict[str, Any]:
    d = copy.deepcopy(SUITE)
    d["tests"][0]["study"].update(study)
    for k, v in list(d["tests"][0]["study"].items()):
        if v is None:
            del d["tests"][0]["study"][k]
    return d


def problems(d: dict[str, Any]) -> str:
    with pytest.raises(SuiteError) as e:
        validate_suite(d)
    return "\n".join(e.value.problems)


# --------------------------------------------------------------------------- the study block

def test_rounds_are_stored_with_every_unit():
    s = validate_suite(suite())
    rounds = [t.study["rounds"] for t in s.tests]
    assert len(rounds) == 2 and rounds[0] == rounds[1]
    assert rounds[0] == {"rounds": 6, "metrics": ["mrr"], "seed": 5, "round_trial_s": 0.5, "overload_pct": 100.0}


def test_round_trials_default_to_half_a_second_everywhere():
    """0.5 s when a study does not say: in the study block, under ``--rounds N`` (which keeps a
    study's own setting), and in the settings the capacity method reads back from the store."""
    from nfvperf.methods.capacity import RoundSettings
    from nfvperf.study import DEFAULT_ROUND_TRIAL_S
    assert DEFAULT_ROUND_TRIAL_S == 0.5
    assert RoundSettings(metrics=["mrr"]).trial_s == DEFAULT_ROUND_TRIAL_S
    assert RoundSettings.from_study({"rounds": 4}).trial_s == DEFAULT_ROUND_TRIAL_S
    assert RoundSettings.from_study({"rounds": 4, "round_trial_s": 2.0}).trial_s == 2.0
    s = validate_suite(suite(rounds=None, seed=None, metrics=None))
    s.set_rounds(8)
    assert {t.study["rounds"]["round_trial_s"] for t in s.tests} == {0.5}
    s = validate_suite(suite(round_trial_s=0.25))
    s.set_rounds(8)
    assert {t.study["rounds"]["round_trial_s"] for t in s.tests} == {0.25}


def test_seed_is_drawn_and_shared_when_not_given():
    s = validate_suite(suite(seed=None))
    seeds = {t.study["rounds"]["seed"] for t in s.tests}
    assert len(seeds) == 1 and isinstance(seeds.pop(), int)


@pytest.mark.parametrize("field,value,words", [
    ("rounds", 1, "tests[0].study.rounds: a whole number 2..100"),
    ("rounds", True, "tests[0].study.rounds"),
    ("metrics", ["mrr", "foo"], "tests[0].study.metrics"),
    ("metrics", ["mrr", "mrr"], "tests[0].study.metrics"),
    ("overload_pct", 150, "tests[0].study.overload_pct"),
    ("round_trial_s", 0, "tests[0].study.round_trial_s"),
    ("seed", -1, "tests[0].study.seed"),
])
def test_bad_round_settings_name_the_field(field, value, words):
    assert words in problems(suite(**{field: value}))


def test_a_round_setting_without_rounds_is_refused():
    assert "add rounds: N" in problems(suite(rounds=None))


def test_rounds_need_a_throughput_study():
    d = suite()
    d["tests"][0]["method"] = "latency"
    del d["tests"][0]["search"], d["tests"][0]["resolution_pct"]
    assert "cannot run in rounds" in problems(d)


def test_cli_rounds_override_and_refusals():
    s = validate_suite(suite(rounds=None, seed=None, metrics=None))
    assert not any(t.study.get("rounds") for t in s.tests)
    s.set_rounds(8)
    assert {t.study["rounds"]["rounds"] for t in s.tests} == {8}
    with pytest.raises(SuiteError, match="--rounds: must be a whole number 2"):
        s.set_rounds(1)
    plain = copy.deepcopy(SUITE)
    del plain["tests"][0]["study"]
    with pytest.raises(SuiteError, match="no study"):
        validate_suite(plain).set_rounds(4)


def test_suite_rounds_apply_to_studies_without_their_own():
    d = suite(rounds=None, seed=None, metrics=None)
    d["rounds"] = 4
    s = validate_suite(d)
    assert {t.study["rounds"]["rounds"] for t in s.tests} == {4}


# --------------------------------------------------------------------------- orders and builds

def test_orders_are_seeded_permutations_that_change_between_rounds():
    a = round_orders(4, 20, seed=11)
    assert a == round_orders(4, 20, seed=11)
    assert a != round_orders(4, 20, seed=12)
    assert all(sorted(o) == [0, 1, 2, 3] for o in a)
    assert len({tuple(o) for o in a}) > 5          # fresh orders, not one order repeated
    firsts = [o[0] for o in round_orders(2, 200, seed=1)]
    assert 60 < firsts.count(0) < 140              # each unit goes first about half the time


def test_units_on_one_topology_share_one_build():
    s = validate_suite(suite())
    from nfvperf.runner.rounds import RoundUnit
    units = [RoundUnit(t, 64, t.name, t.topology or s.spec.topology) for t in s.tests]
    assert build_groups(units, sim=False) == [[0, 1]]
    d = suite()
    d["tests"][0]["study"]["axes"] = {"port_kind": ["vhost", "memif"]}
    s2 = validate_suite(d)
    units2 = [RoundUnit(t, 64, t.name, t.topology) for t in s2.tests]
    assert build_groups(units2, sim=False) == [[0], [1]]        # port kind: restart between them
    assert build_groups(units2, sim=True) == [[0, 1]]           # the sim switches anything in place


# --------------------------------------------------------------------------- runs on the sim

def run_sim(tmp_path, d: dict[str, Any], name: str = "r") -> tuple[Store, Any]:
    store = Store(f"sqlite:///{tmp_path}/{name}.db")
    out = execute(validate_suite(d), store=store, tg="sim", out_dir=tmp_path / name, show_progress=False,
                  log=lambda _m: None)
    return store, out


def test_every_round_is_stored_with_its_round_and_position(tmp_path):
    store, out = run_sim(tmp_path, suite(metrics=["mrr", "pdr"]))
    assert out.status == "completed"
    run = store.load_run(out.run_id)
    env = run.environment
    info = env["rounds"][0]
    assert info["rounds"] == 6 and info["seed"] == 5 and len(info["orders"]) == 6
    # each round's order is the seed's permutation of the two units, and their stored positions
    labels = [t.name + " 64 B" for t in run.tests]
    assert info["orders"] == [[labels[i] for i in o] for o in round_orders(2, 6, 5)], info["orders"]
    for r, order in enumerate(info["orders"], 1):
        pos = {t.name + " 64 B": x["position"] for t in run.tests for x in round_rows(t) if x["round"] == r}
        assert [pos[lb] for lb in order] == [1, 2], (r, order, pos)
    for t in run.tests:
        rows = round_rows(t)
        assert [x["round"] for x in rows] == [1, 2, 3, 4, 5, 6]
        assert all(x["position"] in (1, 2) for x in rows)
        assert all(x["figures"]["mrr"]["value_pps"] > 0 and x["figures"]["pdr"]["value_pps"] > 0 for x in rows)
        # trials carry the round and position too
        assert {tr.context.get("round") for tr in t.trials} == {1, 2, 3, 4, 5, 6}
        # no round_trial_s in the study: each MRR trial lasts the default 0.5 s
        assert {tr.duration_s for tr in t.trials if tr.context.get("phase") == "mrr"} == {0.5}
        summ = rounds_result(t)
        assert summ["rounds_measured"] == 6 and set(summ["metrics"]) == {"mrr", "pdr"}
    # positions of one round are 1 and 2, once each
    by_round: dict[int, list[int]] = {}
    for t in run.tests:
        for x in round_rows(t):
            by_round.setdefault(x["round"], []).append(x["position"])
    assert all(sorted(p) == [1, 2] for p in by_round.values())


def test_report_prints_the_paired_ratio_with_its_interval(tmp_path):
    store, out = run_sim(tmp_path, suite(rounds=10))
    run = store.load_run(out.run_id)
    tables = rounds_tables(run.tests, run.environment)
    assert len(tables) == 1
    rows = {r[0]: r for r in tables[0].rows}
    assert rows["flows=1"][7] == "baseline"
    cell = rows["flows=100000"][7]
    assert "95 % CI, 10 rounds" in cell and cell.startswith("0.")
    base = next(t for t in run.tests if t.study["baseline"])
    other = next(t for t in run.tests if not t.study["baseline"])
    r = rounds_result(other)["ratios"]["mrr"]
    b = rounds_result(base)["metrics"]["mrr"]["median_pps"]
    o = rounds_result(other)["metrics"]["mrr"]["median_pps"]
    assert r["lo"] <= o / b <= r["hi"] and r["differs"]


def test_equal_units_read_no_difference_measured(tmp_path):
    d = suite(rounds=8)
    d["sim"] = {"host_noise": {"seed": 3}}
    d["tests"][0]["study"]["axes"] = {"flows": [1, 2]}         # the same capacity in the model
    store, out = run_sim(tmp_path, d)
    run = store.load_run(out.run_id)
    cell = {r[0]: r for r in rounds_tables(run.tests, run.environment)[0].rows}["flows=2"][7]
    assert cell.startswith("no difference measured (±"), cell


def test_a_failed_round_is_stored_and_counted(tmp_path, monkeypatch):
    from nfvperf.tg import sim as simmod
    calls = {"n": 0}
    real = simmod.SimMeasurer.measure

    def measure(self, duration_s, load_pps):
        calls["n"] += 1
        if calls["n"] == 3:                  # one round's MRR trial
            raise RuntimeError("link down (injected)")
        return real(self, duration_s, load_pps)
    monkeypatch.setattr(simmod.SimMeasurer, "measure", measure)
    store, out = run_sim(tmp_path, suite())
    run = store.load_run(out.run_id)
    rows = [x for t in run.tests for x in round_rows(t)]
    failed = [x for x in rows if x.get("error")]
    assert len(rows) == 12 and len(failed) == 1 and "link down" in failed[0]["error"]
    t = next(t for t in run.tests if any(x.get("error") for x in round_rows(t)))
    summ = rounds_result(t)
    assert summ["metrics"]["mrr"]["failed_rounds"] == 1
    assert any("1 of 6 rounds gave no figure" in n for n in summ["notes"])
    ratio = next((rounds_result(x)["ratios"].get("mrr") for x in run.tests if not x.study["baseline"]))
    assert ratio["n"] == 5 and ratio["skipped"] == 1


def test_ctrl_c_keeps_the_rounds_measured(tmp_path, monkeypatch):
    from nfvperf.tg import sim as simmod
    calls = {"n": 0}
    real = simmod.SimMeasurer.measure

    def measure(self, duration_s, load_pps):
        calls["n"] += 1
        if calls["n"] == 7:
            raise KeyboardInterrupt
        return real(self, duration_s, load_pps)
    monkeypatch.setattr(simmod.SimMeasurer, "measure", measure)
    store, out = run_sim(tmp_path, suite())
    assert out.status == "interrupted"
    run = store.load_run(out.run_id)
    assert {t.status for t in run.tests} == {"interrupted"}
    assert sum(len(round_rows(t)) for t in run.tests) == 6
    assert all(rounds_result(t)["rounds_measured"] == 3 for t in run.tests)


# --------------------------------------------------------------------------- the point of it all

def noisy(seed: int, rounds: bool) -> dict[str, Any]:
    d = suite(seed=seed, rounds=10) if rounds else copy.deepcopy(SUITE)
    if not rounds:
        del d["tests"][0]["study"]["rounds"], d["tests"][0]["study"]["seed"], d["tests"][0]["study"]["metrics"]
    d["sim"] = {"host_noise": {"seed": seed}, "seed": seed}
    return d


def true_ratio(tmp_path) -> float:
    store, out = run_sim(tmp_path, suite(), "truth")
    run = store.load_run(out.run_id)
    med = {t.study["axes"]["flows"]: rounds_result(t)["metrics"]["mrr"]["median_pps"] for t in run.tests}
    return med[100000] / med[1]


def test_interleaved_rounds_recover_the_ratio_on_a_noisy_host(tmp_path):
    truth = true_ratio(tmp_path)
    assert 0.2 < truth < 0.9
    covered = 0
    for seed in range(20):
        store, out = run_sim(tmp_path, noisy(seed, rounds=True), f"i{seed}")
        run = store.load_run(out.run_id)
        r = next(rounds_result(t)["ratios"]["mrr"] for t in run.tests if not t.study["baseline"])
        covered += r["lo"] <= truth <= r["hi"]
    assert covered >= 19, f"the interval covered the true ratio in {covered} of 20 seeds"


def test_units_one_after_the_other_do_not(tmp_path):
    truth = true_ratio(tmp_path)
    off = 0
    for seed in range(12):
        store, out = run_sim(tmp_path, noisy(seed, rounds=False), f"s{seed}")
        run = store.load_run(out.run_id)
        v = {t.study["axes"]["flows"]: t.results[-1].value_pps for t in run.tests}
        off += abs(v[100000] / v[1] / truth - 1) > 0.05
    assert off >= 3, f"sequential ratios were off by more than 5 % in only {off} of 12 seeds"


def _paired_and_unpaired(tmp_path, noise: Any) -> tuple[dict[str, Any], list[float]]:
    """1 vs 2 flows (the model forwards 2 flows ~2.5 % slower) in 20 rounds of the default 0.5 s
    trials (the demo's settings): the paired ratio's summary, and every unpaired ratio (any
    round's 2-flow figure over any round's 1-flow one).  With 10 rounds a few noise seeds put 3
    straddling rounds on one side, and the rank interval (2nd..9th) ends at one of them."""
    d = suite(rounds=20)
    if noise is not None:
        d["sim"] = {"host_noise": noise}
    d["tests"][0]["study"]["axes"] = {"flows": [1, 2]}
    store, out = run_sim(tmp_path, d)
    run = store.load_run(out.run_id)
    base = next(t for t in run.tests if t.study["baseline"])
    other = next(t for t in run.tests if not t.study["baseline"])
    a = rounds_result(base)["metrics"]["mrr"]["values_pps"]
    b = rounds_result(other)["metrics"]["mrr"]["values_pps"]
    return rounds_result(other)["ratios"]["mrr"], sorted(y / x for y in b for x in a)


def test_ratios_pair_the_rounds_on_a_noisy_host(tmp_path):
    """Two units the model forwards nearly alike, on a host that halves its speed for seconds
    (8 noise seeds): paired per round, the median ratio stays within 3 % of the quiet host's
    ratio every time; where the host moved the unpaired ratios by more than 30 %, the paired
    interval is at most half as wide as their 10–90 % spread."""
    truth, _ = _paired_and_unpaired(tmp_path / "quiet", None)
    moved = 0
    for seed in range(1, 9):
        r, unpaired = _paired_and_unpaired(tmp_path / str(seed), {"seed": seed, "mean_slow_s": 6.0,
                                                                  "mean_steady_s": 6.0})
        assert abs(r["median"] / truth["median"] - 1) < 0.03, (seed, r, truth)
        spread = unpaired[9 * len(unpaired) // 10] - unpaired[len(unpaired) // 10]
        if spread > 0.3:
            moved += 1
            assert r["hi"] - r["lo"] <= spread / 2, (seed, r, spread)
    assert moved >= 4, f"the host moved the figures in only {moved} of 8 seeds: the test shows nothing"


def test_units_restarted_every_round_warm_up_every_round(tmp_path, monkeypatch):
    """Units that interleave by restarting the DUT (two builds of it: docs/ci-gate.md) meet a
    fresh DUT every round, so each round starts with a warm-up trial however soon it follows the
    unit's previous round; units sharing one build warm up only after a pause."""
    import nfvperf.runner.rounds as rounds_mod
    seen: list[tuple[int, bool]] = []
    real = rounds_mod.measure_round

    def spy(measurer, profile, params, settings, ndir, on_trial, ctx, warm):
        seen.append((ctx["round"], warm))
        return real(measurer, profile, params, settings, ndir, on_trial, ctx, warm)
    monkeypatch.setattr(rounds_mod, "measure_round", spy)
    run_sim(tmp_path / "one", suite())                                  # the sim: one build
    assert [w for r, w in seen if r > 1] == [False] * 10 and all(w for r, w in seen if r == 1)
    seen.clear()
    monkeypatch.setattr(rounds_mod, "build_groups", lambda units, sim: [[i] for i in range(len(units))])
    run_sim(tmp_path / "two", suite())                                  # a build per unit and round
    assert len(seen) == 12 and all(w for _, w in seen)
