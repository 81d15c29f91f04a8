"""The runner's tgen path against a fake topology (no root): RunContext, environment, switching
operations, one build per topology group, teardown on DUT failure / Ctrl-C, errors per test."""
from __future__ import annotations

import dataclasses
import os

import pytest

import nfvperf.topo as topo
from nfvperf.suite_load import validate_suite
from nfvperf.report.tables import build
from nfvperf.runner import execute
from nfvperf.runner.ceilings import CeilingOptions
from nfvperf.store import Store
from nfvperf.trial import DutFailure
from nfvperf.tg.sim import SimMeasurer


class FakeTopology:
    def __init__(self, spec, run, log, fail_after=None, interrupt_after=None):
        self.spec, self.run, self.log = spec, run, log
        self.fail_after, self.interrupt_after = fail_after, interrupt_after

    def __enter__(self):
        self.log.append(("up", self.spec.kind, self.run.tag, str(self.run.run_dir)))
        return self

    def __exit__(self, *exc):
        self.log.append(("down", self.spec.kind, exc[0].__name__ if exc[0] else None))

    def measurer(self):
        m = SimMeasurer(capacity_pps=1e6)
        real, n = m.measure, [0]

        def measure(d, load):
            n[0] += 1
            if self.fail_after and n[0] > self.fail_after:
                raise DutFailure("ovs-vswitchd died")
            if self.interrupt_after and n[0] > self.interrupt_after:
                raise KeyboardInterrupt
            return real(d, load)
        m.measure = measure
        return m

    def environment(self):
        return {"dut": "fake-ovs 9.9", "cores_shared": True}

    def switching_operations(self, bidirectional):
        return 7


@pytest.fixture
def fake(monkeypatch):
    log: list = []
    opts: dict = {}
    monkeypatch.setattr(topo, "build", lambda spec, run: FakeTopology(spec, run, log, **opts))
    # the run plan judges nfvperf's own builds on this host (preflight: root, binaries ...); the
    # fake topology needs none of it
    monkeypatch.setattr("nfvperf.plan.build_problems", lambda spec, tg, host: [])
    # the run's CPU steadiness probes (2 s before and after by default) still run, shorter
    monkeypatch.setenv("NFVPERF_STEADINESS_S", "0.2")
    return log, opts


SUITE = {"name": "fake", "profile": "quick", "traffic": {"frame_sizes": [64, 1518]},
         "tests": [{"method": "throughput", "resolution_pct": 5},
                   {"method": "throughput", "name": "pvp", "topology": {"kind": "pvp"}, "resolution_pct": 5},
                   {"method": "latency", "name": "lat-pvp", "fractions": [0.5], "repetitions": 1,
                    "topology": {"kind": "pvp"}}]}


def _execute(tmp_path, data=SUITE):
    """A run on the fake topologies.  The harness ceiling is off: measuring it (16 s of real
    tgen trials on net_ring) is test_harness_ceiling's subject, not these tests'."""
    store = Store("sqlite:///" + str(tmp_path / "r.db"))
    out = execute(validate_suite(data), store=store, tg="tgen", out_dir=tmp_path, show_progress=False,
                  log=lambda s: None, ceiling=CeilingOptions(enabled=False))
    return store, out, store.load_run(out.run_id)


def test_tgen_path_builds_each_topology_once(fake, tmp_path) -> None:
    log, _ = fake
    store, out, run = _execute(tmp_path)
    assert out.status == "completed" and out.exit_code == 0
    assert [e[:2] for e in log] == [("up", "p-ovs-p"), ("down", "p-ovs-p"), ("up", "pvp"), ("down", "pvp")]
    assert log[0][2] == run.tag and log[0][3] == str(out.run_dir)
    env = run.environment
    assert env["cores_shared"] is True
    assert [t["switching_operations"] for t in env["topologies"]] == [7, 7]
    assert env["topologies"][1]["environment"]["dut"] == "fake-ovs 9.9"
    st = env["cpu_steadiness"]                  # probed before anything was built and after
    assert [p["when"] for p in st["probes"]] == ["before the run", "after it"]
    assert set(st["cpus"]) == {str(c) for c in sorted(os.sched_getaffinity(0))[:8]}, st
    assert 0.0 <= st["spread_pct"] <= 100.0
    assert run.topology == "p-ovs-p+pvp" and run.dut == "ovs-dpdk" and run.tg == "tgen"
    (sw,) = [t for t in build(run).tables if t.key == "switching" and "pvp" in t.title]
    assert sw.rows[0][2] == "7"
    assert any("Cores were shared" in n for n in build(run).notes)
    store.close()


def test_dut_failure_stops_the_run_and_releases(fake, tmp_path) -> None:
    log, opts = fake
    opts["fail_after"] = 3
    store, out, run = _execute(tmp_path)
    assert out.status == "failed" and out.exit_code == 1 and "DUT failure" in out.reason
    assert log[-1] == ("down", "p-ovs-p", None)
    assert len(run.tests) == 1 and run.tests[0].status == "failed"
    assert "ovs-vswitchd died" in run.tests[0].reason
    assert len(run.tests[0].trials) == 3
    store.close()


def test_interrupt_inside_topology_releases_it(fake, tmp_path) -> None:
    log, opts = fake
    opts["interrupt_after"] = 2
    store, out, run = _execute(tmp_path)
    assert out.status == "interrupted" and out.exit_code == 130
    assert log[-1] == ("down", "p-ovs-p", "KeyboardInterrupt")
    assert run.status == "interrupted" and run.tests[0].status == "interrupted"
    assert len(run.tests[0].trials) == 2
    store.close()


def test_error_in_one_test_does_not_stop_the_run(monkeypatch, tmp_path) -> None:
    from nfvperf import methods
    real = methods.REGISTRY["latency"]

    def boom(*a, **k):
        raise ValueError("bad latency stream")
    monkeypatch.setitem(methods.REGISTRY, "latency", dataclasses.replace(real, run=boom))
    data = {"name": "err", "profile": "quick", "traffic": {"frame_sizes": [64]}, "sim": {"capacity_pps": 1e6},
            "tests": [{"method": "latency", "fractions": [0.5]}, {"method": "throughput", "resolution_pct": 5}]}
    store = Store("sqlite:///" + str(tmp_path / "r.db"))
    out = execute(validate_suite(data), store=store, tg="sim", out_dir=tmp_path, show_progress=False,
                  log=lambda s: None)
    run = store.load_run(out.run_id)
    assert out.status == "failed" and out.exit_code == 1 and out.failed_tests == ["latency 64 B"]
    assert [(t.name, t.status) for t in run.tests] == [("latency", "failed"), ("throughput", "passed")]
    assert run.tests[0].reason == "ValueError: bad latency stream"
    assert "bad latency stream" in (out.run_dir / "errors.log").read_text()
    store.close()


def test_stored_run_holds_the_config_once(tmp_path) -> None:
    """run.config has the suite; environment.topologies[] and the test rows keep only what differs
    (overrides) plus the small fields reports read; the report still sees the full topology."""
    import json

    from nfvperf.store.db import run_to_dict
    mask = "0x5eed1e55"            # distinctive: appears in the suite's topology only
    data = {"name": "once", "profile": "quick", "topology": {"ovs": {"pmd_cpu_mask": mask}},
            "traffic": {"frame_sizes": [64, 512]}, "sim": {"capacity_pps": 1e6},
            "tests": [{"method": "throughput", "resolution_pct": 5},
                      {"method": "throughput", "name": "pvp", "topology": {"kind": "pvp"}, "resolution_pct": 5}]}
    store = Store("sqlite:///" + str(tmp_path / "r.db"))
    out = execute(validate_suite(data), store=store, tg="sim", out_dir=tmp_path, show_progress=False,
                  log=lambda s: None)
    run = store.load_run(out.run_id)
    doc = json.dumps(run_to_dict(run))
    assert out.status == "completed" and doc.count(f'"{mask}"') == 1
    assert run.config["topology"]["ovs"]["pmd_cpu_mask"] == mask
    assert [t["overrides"] for t in run.environment["topologies"]] == [{}, {"kind": "pvp"}]
    rows = [t.topology for t in run.tests]
    assert rows[0] == {"kind": "p-ovs-p", "ports": 2, "switching_operations": 1, "directions": 2, "overrides": {}}
    assert rows[2]["kind"] == "pvp" and rows[2]["overrides"] == {"kind": "pvp"}
    assert all(t.traffic["frame_size_b"] == t.frame_size_b and t.traffic["link_speed_bps"] == 10e9
               for t in run.tests)
    titles = [t.title for t in build(run).tables if t.key == "throughput"]
    assert titles and all(f"pmd-cpu-mask {mask}" in title for title in titles)
    ref = json.loads((out.run_dir / "run.json").read_text())
    assert ref["run_id"] == run.id and ref["tag"] == run.tag
    assert not (out.run_dir / "suite.resolved.json").exists()
    store.close()
