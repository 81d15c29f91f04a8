"""The run plan (nfvperf.plan): which units run here and why the others are skipped, decided once
for `nfvperf validate` and `nfvperf run`; and the runner following it: skipped units stored with
the plan's reason, the run going on and failing only when nothing ran, --fit-host's changes in the
run's environment, its test rows and the report."""
from __future__ import annotations

import contextlib

import pytest

import nfvperf.topo as topo
from nfvperf.suite_load import validate_suite
from nfvperf.fit import HostFacts
from nfvperf.host.cpu import CpuTopology
from nfvperf.host.preflight import Check, PreflightError
from nfvperf.plan import build_problems, compact_units, measurer_refusal, plan_run, plan_text
from nfvperf.report.tables import build
from nfvperf.runner import CeilingOptions, execute
from nfvperf.topo.measurers import sim_measurer
from nfvperf.store import Store
from nfvperf.tg.sim import SimMeasurer

SMALL = HostFacts(CpuTopology.from_siblings({0: [0], 1: [1]}), 16384)     # 2 cores, no SMT

CORES = {"name": "cores", "profile": "quick", "traffic": {"frame_sizes": [64, 128]},
         "sim": {"capacity_pps": 1e6},
         "topology": {"kind": "p-ovs-p", "port_kind": "vhost"},
         "tests": [{"method": "throughput", "name": "pmd", "resolution_pct": 10,
                    "study": {"axes": {"pmd_cores": [1, 4]}}},
                   {"method": "throughput", "name": "ht", "frame_sizes": [64], "resolution_pct": 10,
                    "topology": {"ovs": {"pmd_cores": 1, "ht": True}}}]}


@pytest.fixture
def no_build_checks(monkeypatch):
    """The plan's preflight of nfvperf's builds (root, binaries ...) off: the decision under test
    is the host's fit."""
    monkeypatch.setattr("nfvperf.plan.build_problems", lambda spec, tg, host: [])


def _suite(data=CORES):
    return validate_suite(data)


# ------------------------------------------------------------------------------ the decision

def test_measurer_refusals_name_the_measurer_that_can() -> None:
    s = validate_suite({"name": "m", "topology": {"kind": "p-ovs-p", "port_kind": "af_packet"},
                        "traffic": {"frame_sizes": [64]},
                        "tests": [{"method": "tcp", "tso": True}, {"method": "throughput"},
                                  {"method": "rfc2889_address_caching"}]})
    tcp, thr, addr = s.tests
    spec = s.spec.topology
    assert "needs --tg iperf3 or sim" in (measurer_refusal(tcp, None, "tgen", spec) or "")
    assert "needs --tg tgen or sim" in (measurer_refusal(thr, 64, "iperf3", spec) or "")
    assert "needs --tg sim" in (measurer_refusal(addr, 64, "tgen", spec) or "")
    assert all(measurer_refusal(t, 64, "sim", spec) is None for t in s.tests)
    # tso: true through a polling DUT cannot work under iperf3; through a kernel bridge it can
    assert "params.tso: true: the ovs-dpdk DUT" in (measurer_refusal(tcp, None, "iperf3", spec) or "")
    lb = spec.model_copy(update={"kind": "p2p", "dut": "linux-bridge"})
    assert measurer_refusal(tcp, None, "iperf3", lb) is None


def test_unfit_units_are_skipped_naming_what_fit_host_would_change(no_build_checks) -> None:
    plan = plan_run(_suite(), "tgen", host=SMALL)
    skipped = {u.label: u.skip for u in plan.skipped}
    assert set(skipped) == {"pmd[pmd_cores=4] 64 B", "pmd[pmd_cores=4] 128 B", "ht 64 B"}
    # 2 cores would resolve, but the second would be the generator's CPU: 1 (fit rule 4)
    assert "--fit-host would change ovs.pmd_cores 4→1" in skipped["pmd[pmd_cores=4] 64 B"]
    assert "ovs.ht true→false (no SMT" in skipped["ht 64 B"]
    assert [u.label for u in plan.running] == ["pmd[pmd_cores=1] 64 B", "pmd[pmd_cores=1] 128 B"]
    assert not plan.fitted()


def test_fit_host_runs_every_unit_on_its_fitted_topology(no_build_checks) -> None:
    suite = _suite()
    plan = plan_run(suite, "tgen", host=SMALL, fit_host=True)
    assert not plan.skipped and plan.suite is not suite
    four = [u for u in plan.units if u.label.startswith("pmd[pmd_cores=4]")]
    assert all(u.test.topology.ovs.pmd_cores == 1 for u in four)
    assert all([c.text() for c in u.changes] == [four[0].changes[0].text()] for u in four)
    rows = {r["field"]: r for r in plan.fitted()}
    assert rows["ovs.pmd_cores"]["units"] == ["pmd[pmd_cores=4] 64 B", "pmd[pmd_cores=4] 128 B"]
    assert rows["ovs.ht"]["units"] == ["ht 64 B"] and rows["ovs.ht"]["to"] is False
    assert "ovs.pmd_cores 4→1" in plan.fitted_summary() and "[2 units]" in plan.fitted_summary()
    # the suite given is untouched; the unit that fitted as given has no change
    assert suite.tests[1].topology.ovs.pmd_cores == 4
    assert not plan.unit(*[(u.test, u.size) for u in plan.units][0]).changes


def test_the_sim_builds_nothing_so_skips_nothing_unless_fitted() -> None:
    plan = plan_run(_suite(), "sim", host=SMALL)
    assert not plan.skipped and not plan.fitted()
    assert plan.suite.tests[1].topology.ovs.pmd_cores == 4        # the model runs the seed's host
    fitted = plan_run(_suite(), "sim", host=SMALL, fit_host=True)
    assert not fitted.skipped and fitted.suite.tests[1].topology.ovs.pmd_cores == 2
    # a measurer's refusal holds without a build too
    tcp = {"name": "t", "topology": {"kind": "p-ovs-p"}, "traffic": {"frame_sizes": [64]},
           "tests": [{"method": "tcp"}, {"method": "throughput"}]}
    assert [u.skip for u in plan_run(validate_suite(tcp), "iperf3", host=SMALL, builds=False).units] \
        == [None, "method throughput needs --tg tgen or sim (--tg iperf3 runs only the tcp method)"]


def test_a_real_run_gives_tcp_units_to_iperf3(no_build_checks) -> None:
    """--tg tgen: tgen has no TCP, so a tcp unit runs with iperf3 through the same topology (its
    iperf3 refusals apply); the rate units stay on tgen."""
    s = validate_suite({"name": "t", "topology": {"kind": "p-ovs-p", "port_kind": "af_packet"},
                        "traffic": {"frame_sizes": [64]},
                        "tests": [{"method": "tcp"}, {"method": "tcp", "name": "tso", "tso": True},
                                  {"method": "throughput"}]})
    plan = plan_run(s, "tgen", host=SMALL)
    assert [(u.label, u.measurer, u.skip is None) for u in plan.units] == [
        ("tcp", "iperf3", True), ("tso", "iperf3", False), ("throughput 64 B", "tgen", True)]
    assert "params.tso: true" in (plan.units[1].skip or "")
    assert plan.record()["measurers"] == {"iperf3": 1, "tgen": 1}
    assert "  1 unit(s) run with iperf3 through the same topologies (--tg tgen has no measure_tcp)" \
        in plan_text(plan)


def test_a_topology_this_port_kind_cannot_build_is_a_build_problem() -> None:
    """p2p with vnf: vm passes SR-IOV VFs into a guest: vhost-user ports have none (the preflight
    check the build runs, judged before anything is built)."""
    s = validate_suite({"name": "vf", "topology": {"kind": "p2p", "dut": "testpmd", "vnf": "vm",
                                                   "port_kind": "vhost"},
                        "traffic": {"frame_sizes": [64]}, "tests": [{"method": "throughput"}]})
    problems = build_problems(s.spec.topology, "tgen", HostFacts.read())
    assert any(p.startswith("sriov:port_kind: topology.vnf: vm on kind p2p") for p in problems), problems
    plan = plan_run(s, "tgen")
    assert plan.units[0].skip and "sriov:port_kind" in plan.units[0].skip


def test_tcp_through_a_topology_that_forwards_only_the_generators_rules_is_a_build_problem() -> None:
    s = validate_suite({"name": "r", "topology": {"kind": "p-ovs-p", "port_kind": "af_packet",
                                                  "ovs": {"rules": 64}},
                        "tests": [{"method": "tcp"}]})
    problems = build_problems(s.spec.topology, "iperf3", HostFacts.read())
    assert any(p.startswith("TCP: ovs.rules matches tgen's flow addresses only") for p in problems), problems


def test_validate_text_counts_reasons_and_units(no_build_checks) -> None:
    plan = plan_run(_suite(), "tgen", host=SMALL)
    lines = plan_text(plan)
    assert lines[0] == "on this host (--tg tgen): 2 of 5 test unit(s) run, 3 skipped"
    assert any(line.startswith("  skipped (2 unit(s)): does not fit this host") for line in lines)
    assert "      pmd[pmd_cores=4] 64/128 B" in lines
    assert compact_units(plan.skipped) == ["pmd[pmd_cores=4] 64/128 B", "ht 64 B"]
    fitted = plan_text(plan_run(_suite(), "tgen", host=SMALL, fit_host=True))
    assert fitted[0].endswith("5 of 5 test unit(s) run, 0 skipped")
    assert any("ovs.pmd_cores 4→1" in line and "[2 unit(s)]" in line for line in fitted)
    nothing = plan_text(plan_run(validate_suite(dict(CORES, tests=CORES["tests"][1:])), "tgen", host=SMALL))
    assert "nothing would run, so `nfvperf run` would fail" in nothing[0]


# ------------------------------------------------------------------------------ the runner follows it

class _Topo:
    def __init__(self, spec, run):
        self.spec = spec

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def measurer(self):
        return SimMeasurer(capacity_pps=1e6)

    def environment(self):
        return {}

    def switching_operations(self, bidirectional):
        return 1


def test_run_stores_the_plans_skips_and_goes_on(monkeypatch, tmp_path, no_build_checks) -> None:
    monkeypatch.setattr(HostFacts, "read", classmethod(lambda cls: SMALL))
    monkeypatch.setattr(topo, "build", lambda spec, run: _Topo(spec, run))
    store = Store("sqlite:///" + str(tmp_path / "r.db"))
    out = execute(_suite(), store=store, tg="tgen", out_dir=tmp_path, show_progress=False,
                  log=lambda s: None, ceiling=CeilingOptions(enabled=False))
    assert out.status == "completed" and out.exit_code == 0, out.reason
    assert out.skipped_tests == ["pmd[pmd_cores=4] 64 B", "pmd[pmd_cores=4] 128 B", "ht 64 B"]
    run = store.load_run(out.run_id)
    by = {(t.name, t.frame_size_b): t for t in run.tests}
    assert [(t.name, t.frame_size_b) for t in run.tests] == [("pmd[pmd_cores=1]", 64), ("pmd[pmd_cores=1]", 128),
                                                             ("pmd[pmd_cores=4]", 64), ("pmd[pmd_cores=4]", 128),
                                                             ("ht", 64)]
    big = by[("pmd[pmd_cores=4]", 64)]
    assert big.status == "skipped" and "--fit-host would change ovs.pmd_cores 4→1" in big.reason
    assert not big.results and by[("pmd[pmd_cores=1]", 64)].status == "passed"
    plan = run.environment["plan"]
    assert plan["tg"] == "tgen" and [s["unit"] for s in plan["skipped"]] == out.skipped_tests
    assert "3 of 5 test unit(s) skipped" in run.reason
    # the report says each reason once, with the units it skipped ("Skipped here")
    (sk,) = [t for t in build(run).tables if t.key == "skipped"]
    assert [(r[1], r[2]) for r in sk.rows] == [("2", "pmd[pmd_cores=4] 64/128 B"), ("1", "ht 64 B")]
    assert all(r[0].startswith("does not fit this host; --fit-host would change") for r in sk.rows)
    # nothing fits: nothing ran, so the run failed
    out = execute(validate_suite(dict(CORES, tests=CORES["tests"][1:])), store=store, tg="tgen",
                  out_dir=tmp_path, show_progress=False, log=lambda s: None,
                  ceiling=CeilingOptions(enabled=False))
    assert out.status == "failed" and out.exit_code == 1
    assert "nothing ran: all 1 test unit(s) skipped" in (out.reason or "")


def test_fit_host_run_stores_and_reports_its_changes(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(HostFacts, "read", classmethod(lambda cls: SMALL))
    store = Store("sqlite:///" + str(tmp_path / "r.db"))
    out = execute(_suite(), store=store, tg="sim", out_dir=tmp_path, show_progress=False,
                  log=lambda s: None, fit_host=True)
    assert out.status == "completed" and not out.skipped_tests, out.reason
    run = store.load_run(out.run_id)
    fit = run.environment["fit_host"]
    assert fit["host"] == SMALL.describe()
    assert {c.split(" (")[0] for c in fit["changes"]} == {"ovs.pmd_cores 4→2", "ovs.ht true→false"}
    by = {(t.name, t.frame_size_b): t for t in run.tests}
    assert by[("pmd[pmd_cores=4]", 64)].topology["fitted_to_host"][0].startswith("ovs.pmd_cores 4→2")
    assert "fitted_to_host" not in by[("pmd[pmd_cores=1]", 64)].topology
    assert run.config["topology"]["ovs"]["pmd_cores"] is None       # the suite's default: nothing to fit
    data = build(run)
    row = dict(data.header)["Fitted to host"]
    assert row.startswith(SMALL.describe() + ": ") and "ovs.ht true→false (no SMT" in row
    assert any(n.startswith("Fitted to host (--fit-host)") for n in data.notes)


def test_a_failed_build_skips_or_fails_its_group_and_the_run_goes_on(tmp_path) -> None:
    """A preflight failure of one topology skips its units; any other failed build fails them;
    the next topology runs either way."""
    @contextlib.contextmanager
    def factory(suite, tg, tag, run_dir, info, spec=None):
        cores = spec.ovs.pmd_cores
        if cores == 2:
            raise PreflightError([Check("binary:x", "fail", "x not found", "apt-get install x", True)])
        if cores == 3:
            raise RuntimeError("the switch did not start")
        with sim_measurer(suite.spec.sim, spec or suite.spec.topology) as m:
            yield m

    data = dict(CORES, tests=[{"method": "throughput", "name": "c", "frame_sizes": [64], "resolution_pct": 10,
                               "study": {"axes": {"pmd_cores": [2, 3, 1]}}}])
    store = Store("sqlite:///" + str(tmp_path / "r.db"))
    out = execute(validate_suite(data), store=store, tg="sim", out_dir=tmp_path, show_progress=False,
                  log=lambda s: None, measurer_factory=factory)
    run = store.load_run(out.run_id)
    st = {t.name: (t.status, t.reason) for t in run.tests}
    assert st["c[pmd_cores=2]"][0] == "skipped" and "binary:x: x not found" in st["c[pmd_cores=2]"][1]
    assert st["c[pmd_cores=3]"] == ("failed", "topology set-up failed: RuntimeError: the switch did not start")
    assert st["c[pmd_cores=1]"][0] == "passed"
    assert out.status == "failed" and "the switch did not start" in (out.reason or "")
    assert (tmp_path / "runs" / run.tag / "errors.log").read_text().count("the switch did not start") >= 1


def test_a_dut_that_dies_while_its_topology_is_built_still_ends_the_run(tmp_path) -> None:
    from nfvperf.trial import DutFailure

    @contextlib.contextmanager
    def factory(suite, tg, tag, run_dir, info, spec=None):
        if spec.ovs.pmd_cores == 2:
            raise DutFailure("the DUT host is lost")
        with sim_measurer(suite.spec.sim, spec or suite.spec.topology) as m:
            yield m

    data = dict(CORES, tests=[{"method": "throughput", "name": "c", "frame_sizes": [64], "resolution_pct": 10,
                               "study": {"axes": {"pmd_cores": [2, 1]}}}])
    store = Store("sqlite:///" + str(tmp_path / "r.db"))
    out = execute(validate_suite(data), store=store, tg="sim", out_dir=tmp_path, show_progress=False,
                  log=lambda s: None, measurer_factory=factory)
    assert out.status == "failed" and "the DUT host is lost" in (out.reason or "")
    assert not store.load_run(out.run_id).tests          # the next topology was not built
