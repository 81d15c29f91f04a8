"""A unit whose DUT (or VNF) polling threads ran on the generator's polling CPU is marked † at its
figures in the study pivots and the per-test throughput table, with a note naming the CPU; a ratio
between such a unit and one that did not share says so.  The rows are seed 000's real run on a
2-CPU host (run nfv3cfc86): l3fwd with 1 core polled on CPU 1, with 2 cores on CPUs 0-1 where tgen
polls on CPU 0 (58,129 fps against 4,708,426)."""
from __future__ import annotations

import io

import pytest

from nfvperf.host.polling_overlap import generator_overlap
from nfvperf.report.html import render_html
from nfvperf.report.markdown import render_markdown
from nfvperf.report.polling import KEY, overlap_text
from nfvperf.report.tables import build
from nfvperf.report.terminal import print_report
from nfvperf.store import Store

from _study_runs import add_test, new_run, topo_row

L3FWD_TOPOLOGY = {"kind": "p2p", "dut": "l3fwd", "ports": 4, "port_kind": "vhost", "l3fwd": {"cores": 1}}
LOCAL = {"generator_on": "local", "dut_on": "local"}


def pinning(roles: dict[str, list[int]]) -> dict:
    return {"housekeeping": [0], "roles": roles, "cores_shared": True, "warnings": []}


def topo_entry(cores: int, roles: dict[str, list[int]]) -> dict:
    """A ``runs.environment["topologies"]`` entry as the runner stores it (kind, overrides, the
    topology's environment with its pinning)."""
    return {"kind": "p2p", "overrides": {"l3fwd": {"cores": cores}},
            "environment": {"pinning": pinning(roles), "hosts": LOCAL}}


SEED000_ENV = {"cores_shared": True, "topologies": [topo_entry(1, {"tgen": [0], "dut": [1]}),
                                                    topo_entry(2, {"tgen": [0], "dut": [0, 1]})]}
FPS = {(1, 64): 4_708_426.0, (2, 64): 58_129.0, (1, 128): 2_639_358.0, (2, 128): 65_984.0}


@pytest.fixture()
def store(tmp_path):
    s = Store("sqlite:///" + str(tmp_path / "s.db"))
    yield s
    s.close()


def phy_phy(store: Store, env: dict, row_extra: dict | None = None) -> int:
    """Study phy-phy (axis topology.l3fwd.cores, baseline cores=2 as in seed000-intel-onp.yaml) at
    64 and 128 B; ``row_extra``: cores -> fields the runner stored in the test's topology row."""
    rid = new_run(store, env=env, topology=L3FWD_TOPOLOGY)
    for (cores, size), v in FPS.items():
        row = dict(topo_row("p2p", {"l3fwd": {"cores": cores}}), **((row_extra or {}).get(cores) or {}))
        add_test(store, rid, f"phy-phy[topology.l3fwd.cores={cores}]", "throughput", size, v, topology=row,
                 study={"name": "phy-phy", "axes": {"topology.l3fwd.cores": cores}, "baseline": cores == 2})
    return rid


def tables_of(store: Store, rid: int) -> dict:
    return {t.title: t for t in build(store.load_run(rid)).tables}


# ----------------------------------------------------------------------------- the fact

def test_overlap_from_the_stored_pinning() -> None:
    assert generator_overlap(topo_entry(2, {"tgen": [0], "dut": [0, 1]})["environment"]) == \
        {"cpus": [0], "roles": ["dut"]}
    assert generator_overlap(topo_entry(1, {"tgen": [0], "dut": [1]})["environment"]) == {}
    # pvp on 2 CPUs: both VMs' forwarding on tgen's CPU, the switch's PMD on its own
    assert generator_overlap({"pinning": pinning({"vnf0": [0], "vnf1": [0], "tgen": [0], "dut": [1]})}) == \
        {"cpus": [0], "roles": ["vnf0", "vnf1"]}
    # a generator on another host shares no CPU with the DUT, whatever the numbers say
    assert generator_overlap({"pinning": pinning({"tgen": [0], "dut": [0]}),
                              "hosts": {"generator_on": "tg-host", "dut_on": "dut-host"}}) == {}
    # a testbed run: one plan per host, ``pinning`` is the DUT host's (no tgen role in it)
    assert generator_overlap({"pinning": pinning({"dut": [0]}), "pinning_hosts": {"dut": {}, "tester": {}},
                              "hosts": {"generator_on": "tester", "dut_on": "dut"}}) == {}
    # no pinning, no generator role (--tg sim): unknown, not "no overlap"
    assert generator_overlap({}) is None
    assert generator_overlap({"pinning": pinning({"dut": [1]})}) is None
    assert overlap_text({"cpus": [0], "roles": ["vnf0", "vnf1"]}) == \
        "VNF vnf0's and VNF vnf1's polling threads shared CPU 0 with the generator's"


# ----------------------------------------------------------------------------- the study pivot

def test_pivot_marks_the_configuration_that_shared_the_generators_cpu(store) -> None:
    """A run stored before the fact was kept per test: read from the run's topology entries."""
    tabs = tables_of(store, phy_phy(store, SEED000_ENV))
    fps = tabs["study phy-phy: zero-loss throughput, fps per interface"]
    assert fps.columns == ["Frame B", "topology.l3fwd.cores=1", "topology.l3fwd.cores=1 ×",
                           "topology.l3fwd.cores=2 †", "topology.l3fwd.cores=2 ×"]
    row64 = fps.rows[0]
    assert row64 == ["64", "4,708,426", "81.00× †", "58,129", "1.00×"]
    assert ("† the DUT's polling threads shared CPU 0 with the generator's (topology.l3fwd.cores=2): "
            "these figures measure two busy-pollers time-sliced on one CPU, not the DUT.") in fps.note
    assert "Ratios marked † (topology.l3fwd.cores=1) set a unit that shared the generator's CPU " \
           "against one that did not" in fps.note
    # every pivot of the study carries the mark (L1 Mbps, % line rate have no ratios)
    l1 = tabs["study phy-phy: zero-loss throughput, L1 Mbps per interface"]
    assert l1.columns == ["Frame B", "topology.l3fwd.cores=1", "topology.l3fwd.cores=2 †"]
    assert "shared CPU 0" in l1.note and "Ratios marked" not in l1.note


def test_per_test_throughput_table_marks_the_shared_unit_only(store) -> None:
    tabs = tables_of(store, phy_phy(store, SEED000_ENV))
    two = next(t for title, t in tabs.items() if title.startswith("phy-phy[topology.l3fwd.cores=2]")
               and "zero-loss throughput (RFC" in title)
    one = next(t for title, t in tabs.items() if title.startswith("phy-phy[topology.l3fwd.cores=1]")
               and "zero-loss throughput (RFC" in title)
    assert [r[1] for r in two.rows] == ["58,129 †", "65,984 †"]
    assert "† the DUT's polling threads shared CPU 0 with the generator's (every frame size)" in two.note
    assert [r[1] for r in one.rows] == ["4,708,426", "2,639,358"]
    assert "†" not in one.note


def test_run_note_counts_the_marked_units(store) -> None:
    notes = build(store.load_run(phy_phy(store, SEED000_ENV))).notes
    (note,) = [n for n in notes if "measured units had" in n]
    assert note.startswith("2 of 4 measured units had the DUT's or a VNF's polling threads on the generator's "
                           "CPU (phy-phy[topology.l3fwd.cores=2]): their figures are marked †")
    assert not any("measured units had" in n for n in build(store.load_run(phy_phy(store, {}))).notes)


def test_fact_stored_with_the_test_row_wins(store) -> None:
    """Runs from now on keep the fact in tests.topology (the runner); no topology entry needed."""
    rid = phy_phy(store, {"cores_shared": True},
                  row_extra={1: {KEY: {}}, 2: {KEY: {"cpus": [0], "roles": ["dut"]}}})
    fps = tables_of(store, rid)["study phy-phy: zero-loss throughput, fps per interface"]
    assert fps.columns[3] == "topology.l3fwd.cores=2 †" and fps.columns[1] == "topology.l3fwd.cores=1"


def test_no_mark_when_the_environment_is_ambiguous_or_silent(store) -> None:
    # two builds of cores=2 that disagree: unknown, so no mark (never a guess)
    env = dict(SEED000_ENV, topologies=SEED000_ENV["topologies"] + [topo_entry(2, {"tgen": [0], "dut": [1]})])
    fps = tables_of(store, phy_phy(store, env))["study phy-phy: zero-loss throughput, fps per interface"]
    assert not any("†" in c for c in fps.columns) and "†" not in fps.note
    assert not any("†" in cell for row in fps.rows for cell in row)
    # no topology entries at all (a sim run): nothing marked
    fps = tables_of(store, phy_phy(store, {}))["study phy-phy: zero-loss throughput, fps per interface"]
    assert "†" not in fps.note


def test_cell_mark_when_the_overlap_varies_down_a_column(store) -> None:
    """One frame size, rows = the core axis: the cell of the shared unit is marked, not the column."""
    rid = new_run(store, env={"topologies": [
        {"kind": "p-ovs-p", "overrides": {"ovs": {"pmd_cores": n}},
         "environment": {"pinning": pinning({"tgen": [0], "dut": [1] if n == 1 else [0, 1]})}}
        for n in (1, 2)]})
    for n, v in ((1, 2.0e6), (2, 0.2e6)):
        add_test(store, rid, f"grid[pmd_cores={n}]", "throughput", 64, v,
                 topology=topo_row(overrides={"ovs": {"pmd_cores": n}}),
                 study={"name": "grid", "axes": {"pmd_cores": n, "flows": 1}, "baseline": n == 1})
    fps = tables_of(store, rid)["study grid: zero-loss throughput, fps per interface"]
    assert fps.columns[1] == "flows=1"
    assert fps.rows == [["1", "2,000,000", "1.00×"], ["2", "200,000 †", "0.10× †"]]
    assert "(pmd_cores=2, flows=1)" in fps.note


def test_renderers_show_the_mark_and_the_note(store) -> None:
    run = store.load_run(phy_phy(store, SEED000_ENV))
    md = render_markdown(run)
    assert "| topology.l3fwd.cores=2 † |" in md and "81.00× †" in md
    html = render_html(run)
    assert "topology.l3fwd.cores=2 †" in html and "time-sliced on one CPU" in html
    out = io.StringIO()
    print_report(run, out)
    text = out.getvalue()
    assert "topology.l3fwd.cores=2 †" in text and "81.00× †" in text


# ----------------------------------------------------------------------------- the runner keeps it

def test_runner_stores_the_fact_with_each_test_row(tmp_path) -> None:
    """The runner puts the fact of the topology a unit ran on into its test row (from the pinning
    the topology's environment recorded); the report reads it from there."""
    import contextlib

    from nfvperf.suite_load import validate_suite
    from nfvperf.runner import execute, measurer_for

    @contextlib.contextmanager
    def factory(suite, tg, tag, run_dir, info, spec=None):
        with measurer_for(suite, "sim", tag, run_dir, info, spec) as m:
            cores = (spec or suite.spec.topology).ovs.pmd_cores
            # what a real build records on a 2-CPU host: 2 PMD cores take tgen's CPU 0
            info["environment"] = {"pinning": pinning({"tgen": [0], "dut": [1] if cores == 1 else [0, 1]}),
                                   "hosts": LOCAL}
            yield m

    d = {"name": "pinned", "profile": "quick", "sim": {"capacity_pps": 1e6},
         "topology": {"kind": "p-ovs-p", "dut": "ovs-dpdk", "port_kind": "vhost"},
         "traffic": {"frame_sizes": [64]},
         "tests": [{"method": "throughput", "name": "c", "search": "binary",
                    "study": {"axes": {"topology.ovs.pmd_cores": [1, 2]}}}]}
    store = Store(f"sqlite:///{tmp_path}/r.db")
    try:
        out = execute(validate_suite(d), store=store, tg="sim", out_dir=tmp_path, show_progress=False,
                      log=lambda _m: None, measurer_factory=factory)
        assert out.status == "completed", out.reason
        run = store.load_run(out.run_id)
        rows = {t.name: t.topology for t in run.tests}
        assert rows["c[topology.ovs.pmd_cores=1]"][KEY] == {}
        assert rows["c[topology.ovs.pmd_cores=2]"][KEY] == {"cpus": [0], "roles": ["dut"]}
        fps = next(t for t in build(run).tables if t.key == "study_fps")
        # one frame size: rows are the axis, so the shared unit's cells carry the mark
        assert [r[0] for r in fps.rows] == ["1", "2"]
        assert "†" not in fps.rows[0][1] and fps.rows[1][1].endswith(" †") and fps.rows[1][2].endswith("× †")
        assert "(topology.ovs.pmd_cores=2): these figures measure two busy-pollers" in fps.note
    finally:
        store.close()


def _pinned_rounds(tmp_path, reconfigure=None):
    """A rounds study over ``topology.ovs.pmd_cores`` 1 and 2 on the sim, whose builds store a
    pinning with the PMD on tgen's CPU 0 for pmd_cores 1 (CPU 1 otherwise); ``reconfigure``, when
    given, is the measurer's in-place switch.  Returns the store, the stored run and the pmd_cores
    of each build."""
    import contextlib

    from nfvperf.suite_load import validate_suite
    from nfvperf.runner import execute, measurer_for

    built: list[int] = []

    @contextlib.contextmanager
    def factory(suite, tg, tag, run_dir, info, spec=None):
        with measurer_for(suite, "sim", tag, run_dir, info, spec) as m:
            cores = (spec or suite.spec.topology).ovs.pmd_cores
            built.append(cores)
            info["environment"] = {"pinning": pinning({"tgen": [0], "dut": [0] if cores == 1 else [1]}),
                                   "hosts": LOCAL}
            if reconfigure is not None:
                m.reconfigure_topology = reconfigure
            yield m

    d = {"name": "pinned-rounds", "profile": "quick", "sim": {"capacity_pps": 1e6},
         "topology": {"kind": "p-ovs-p", "dut": "ovs-dpdk", "port_kind": "vhost"},
         "traffic": {"frame_sizes": [64]},
         "tests": [{"method": "throughput", "name": "c",
                    "study": {"axes": {"topology.ovs.pmd_cores": [1, 2]}, "rounds": 2,
                              "round_trial_s": 0.05, "metrics": ["mrr"]}}]}
    store = Store(f"sqlite:///{tmp_path}/r.db")
    out = execute(validate_suite(d), store=store, tg="sim", out_dir=tmp_path, show_progress=False,
                  log=lambda _m: None, measurer_factory=factory)
    assert out.status == "completed", out.reason
    return store, store.load_run(out.run_id), built


def test_a_rounds_study_stores_the_fact_with_the_units_built_as_their_own_spec(tmp_path) -> None:
    """Interleaved rounds open every unit's row before any build; a build's pinning then says
    whether the DUT polled on the generator's CPU, and the rows of the units built as that spec
    get the fact.  A unit the DUT was switched to by a switch that does not say where the DUT
    polls now (the sim's: no reconfigure hook) keeps none: the build's pinning is not its own, so
    no mark either way.  The build here (pmd_cores 1, the first unit) put its PMD on tgen's CPU 0."""
    store, run, built = _pinned_rounds(tmp_path)
    try:
        assert built == [1]                                   # one build, the first unit's spec
        rows = {t.name: t.topology for t in run.tests}
        assert rows["c[topology.ovs.pmd_cores=1]"][KEY] == {"cpus": [0], "roles": ["dut"]}
        assert rows["c[topology.ovs.pmd_cores=1]"]["kind"] == "p-ovs-p"      # the rest of the row kept
        assert KEY not in rows["c[topology.ovs.pmd_cores=2]"]                 # switched in place: unknown
        (t,) = [t for t in build(run).tables if t.key == "rounds:mrr"]
        by = {r[0]: r for r in t.rows}
        one, two = by["topology.ovs.pmd_cores=1"], by["topology.ovs.pmd_cores=2"]
        assert one[2].endswith(" †") and not two[2].endswith("†")           # the median column
        assert one[7] == "baseline" and two[7].endswith(" †")     # a ratio to the shared baseline
        assert "† the DUT's polling threads shared CPU 0 with the generator's (topology.ovs.pmd_cores=1)" \
            in t.note, t.note
    finally:
        store.close()


def test_a_rounds_study_takes_an_in_place_unit_s_fact_from_the_switch(tmp_path) -> None:
    """A unit the DUT is switched to in place gets its own fact from the switch: the topology's
    reconfigure says where the DUT polls afterwards (generator_cpu_overlap).  Here the build
    (pmd_cores 1) put the PMD on tgen's CPU 0 and the switch to pmd_cores 2 moved it off."""
    switched: list[int] = []

    def reconfigure(new_spec):
        switched.append(new_spec.ovs.pmd_cores)
        shared = new_spec.ovs.pmd_cores == 1
        return {"changes": {"ovs.pmd_cores": new_spec.ovs.pmd_cores},
                "generator_cpu_overlap": {"cpus": [0], "roles": ["dut"]} if shared else {}}

    store, run, _built = _pinned_rounds(tmp_path, reconfigure)
    try:
        assert 2 in switched, switched                        # unit 2 was reached by a switch
        rows = {t.name: t.topology for t in run.tests}
        assert rows["c[topology.ovs.pmd_cores=1]"][KEY] == {"cpus": [0], "roles": ["dut"]}
        assert rows["c[topology.ovs.pmd_cores=2]"][KEY] == {}               # its own: not shared
        (t,) = [t for t in build(run).tables if t.key == "rounds:mrr"]
        two = {r[0]: r for r in t.rows}["topology.ovs.pmd_cores=2"]
        assert not two[2].endswith("†") and two[7].endswith(" †")  # ratio to the shared baseline
    finally:
        store.close()


def test_a_rounds_ratio_is_marked_when_exactly_one_of_its_two_figures_shared() -> None:
    """The rounds table marks a ratio as the pivots do: when the unit and the baseline differ in
    whether the DUT polled on the generator's CPU (both shared, or neither: no mark; unknown counts
    as not shared)."""
    from nfvperf.report.rounds import UnitRounds, metric_table

    def unit(label: str, baseline: bool, overlap):
        summ = {"metrics": {"mrr": {"median_pps": 1e6, "values_pps": [1e6, 1e6]}},
                "ratios": {"mrr": {"text": "0.900 [0.850, 0.950]"}}, "rounds_measured": 2}
        return UnitRounds(label, {"x": label}, 64, baseline, summ, {}, "vhost", overlap)

    shared, alone = {"cpus": [0], "roles": ["dut"]}, {}

    def marks(base_overlap, others):
        units = [unit("b", True, base_overlap)] + [unit(k, False, o) for k, o in others.items()]
        t = metric_table("s", "mrr", units, {"rounds": 2})
        by = {r[0]: r for r in t.rows}
        return {k: (by[k][2].endswith(" †"), by[k][7].endswith(" †")) for k in others}

    # baseline shared: the shared unit's ratio compares like with like, the others' do not
    assert marks(shared, {"s": shared, "a": alone, "u": None}) == \
        {"s": (True, False), "a": (False, True), "u": (False, True)}
    # baseline alone: only the shared unit's ratio is marked
    assert marks(alone, {"s": shared, "a": alone, "u": None}) == \
        {"s": (True, True), "a": (False, False), "u": (False, False)}


def test_study_plot_marks_the_shared_points(store) -> None:
    """The study plot draws an × on each point whose DUT polled on the generator's CPU (legend: †)."""
    import matplotlib.pyplot as plt

    from nfvperf.report.plots import study_figures

    run = store.load_run(phy_phy(store, SEED000_ENV))
    title, _stem, fig = next(f for f in study_figures(run) if f[0].startswith("Study phy-phy"))
    try:
        (marks,) = [c for c in fig.axes[0].collections if c.get_gid() == "generator-cpu-shared"]
        # phy-phy: x = topology.l3fwd.cores; the cores=2 points (64 and 128 B) only
        assert sorted(tuple(xy) for xy in marks.get_offsets().tolist()) == \
            [(2.0, pytest.approx(58_129 / 1e6)), (2.0, pytest.approx(65_984 / 1e6))]
        assert any(t.get_text().startswith("† DUT polling on the generator's CPU")
                   for t in fig.axes[0].get_legend().get_texts())
    finally:
        plt.close(fig)


def test_compare_says_which_run_polled_on_the_generators_cpu(store) -> None:
    """Run #1 as on the 2-CPU host; run #2 with the two cores off tgen's CPU (a bigger host): the
    cores=2 rows say #1's value was two busy-pollers on one CPU, so the change is the sharing's."""
    from nfvperf.report.compare import compare_many

    a = phy_phy(store, SEED000_ENV)
    bigger = {"topologies": [topo_entry(1, {"tgen": [0], "dut": [1]}), topo_entry(2, {"tgen": [0], "dut": [1, 2]})]}
    b = phy_phy(store, bigger)
    cmp = compare_many([store.load_run(a), store.load_run(b)])
    rows = {(r.test, r.frame_size_b): r for r in cmp.rows}
    two = rows[("phy-phy[topology.l3fwd.cores=2]", 64)]
    assert "† DUT polling on the generator's CPU in #1: busy-pollers time-sliced on one CPU, not the DUT, " \
           "so a change is the CPU sharing's as much as the DUT's" in two.note
    assert "†" not in rows[("phy-phy[topology.l3fwd.cores=1]", 64)].note
