"""End to end through the real CLI (subprocesses) on the simulated DUT:
run -> store -> report (terminal + HTML) -> history -> compare -> export; Ctrl-C mid-run."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from _trials import wait_for_trials

REPO = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           COLUMNS="200")


def nfv(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "nfvperf", *args], capture_output=True, text=True, cwd=REPO,
                       env=ENV, timeout=timeout)
    if check:
        assert p.returncode == 0, f"{args}: rc={p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


@pytest.fixture(scope="module")
def tour(tmp_path_factory):
    """Two runs of suites/sim-tour.yaml: as shipped, then with a 25 % dearer packet (~20 % less
    capacity at 64 B; 1518 B stays at line rate)."""
    tmp = tmp_path_factory.mktemp("e2e")
    db = str(tmp / "results.db")
    r1 = nfv("run", "suites/sim-tour.yaml", "--tg", "sim", "--quick", "--db", db, "--out", str(tmp / "out"))
    data = yaml.safe_load((REPO / "suites" / "sim-tour.yaml").read_text())
    data["sim"]["model"] = {"base_ns": 86.0 * 1.25}
    changed = tmp / "sim-tour-slower.yaml"
    changed.write_text(yaml.safe_dump(data))
    r2 = nfv("run", str(changed), "--tg", "sim", "--quick", "--db", db, "--out", str(tmp / "out"))
    return tmp, db, r1, r2


def test_run_stores_everything(tour) -> None:
    tmp, db, r1, _ = tour
    assert "run 1 (nfv" in r1.stdout and "completed" in r1.stdout
    con = sqlite3.connect(db)
    status, env, run_dir = con.execute("select status, environment, run_dir from runs where id=1").fetchone()
    assert status == "completed"
    env = json.loads(env)
    assert env["host"]["python"] and env["host"]["kernel"] and "cpu_model" in env["host"]
    assert env["tg"] == "sim" and env["topologies"][0]["kind"] == "p-ovs-p"
    assert env["profile_deviations"]
    assert Path(run_dir, "suite.yaml").exists() and Path(run_dir).name.startswith("nfv")
    n_tests, n_trials = con.execute("select count(*), (select count(*) from trials) from tests where run_id=1"
                                    ).fetchone()
    assert n_tests == 23 and n_trials > 100
    assert con.execute("select count(*) from tests where run_id=1 and status!='passed'").fetchone()[0] == 0


def test_report_terminal_and_html(tour) -> None:
    tmp, db, _, _ = tour
    out = nfv("report", "1", "--db", db, "--html", str(tmp / "r.html")).stdout
    for s in ("zero-loss throughput (RFC 2544 §26.1)", "L1 Mbps / interface", "L2 Mbps / interface",
              "% line rate (L1)", "aggregate fps (×2)", "per interface (per direction",
              "Switching ops/s", "RLB fps", "latency (RFC 2544 §26.2)", "p99.9 µs",
              "frame loss rate (RFC 2544 §26.3)", "back-to-back frames (RFC 9004)", "system recovery",
              "reset (RFC 6201)", "throughput-pvp [pvp]"):
        assert s in out, s
    html = (tmp / "r.html").read_text()
    assert html.count("data:image/png;base64,") == 4 and "cpu_model" in html


def test_configurations_give_different_numbers(tour) -> None:
    """The modelled DUT responds to the configuration: the 64 B throughput of 1 vs 1k flows,
    1 vs 2 PMD cores and p-ovs-p vs pvp differ (ordered as on a real OvS-DPDK), and the run's
    environment names the model and its parameters."""
    tmp, db, _, _ = tour
    con = sqlite3.connect(db)
    rows = dict(con.execute("select t.name, r.value_pps from tests t join results r on r.test_id = t.id "
                            "where t.run_id = 1 and t.frame_size_b = 64 and t.method = 'throughput'"))
    assert rows["throughput-2-pmd-cores"] > 1.8 * rows["throughput"]
    assert rows["throughput-1k-flows"] < rows["throughput"]
    assert rows["throughput-pvp"] < rows["throughput"] / 2
    assert len({round(v, -3) for v in rows.values()}) >= 4, rows
    env = json.loads(con.execute("select environment from runs where id=1").fetchone()[0])
    assert env["measurer"]["model"]["model"].startswith("nfvperf sim model")
    assert "cpu_steadiness" not in env          # a model's numbers do not move with the host's CPU
    assert "numbers come from a model" in nfv("report", "1", "--db", db).stdout


def test_history_lists_runs(tour) -> None:
    tmp, db, _, _ = tour
    out = nfv("history", "--db", db).stdout
    assert "sim-tour" in out and "completed" in out and "p-ovs-p+pvp" in out and "fps/if" in out
    hist = json.loads(nfv("history", "--json", "--db", db).stdout)
    assert [h["id"] for h in hist] == [2, 1]


def test_compare_flags_capacity_change(tour) -> None:
    tmp, db, _, _ = tour
    out = nfv("compare", "1", "2", "--db", db).stdout
    flagged = [ln for ln in out.splitlines() if "CHANGED" in ln and "│" in ln]
    assert any(ln.split("│")[1].strip() == "throughput" and ln.split("│")[2].strip() == "64" for ln in flagged), out
    assert not any(ln.split("│")[2].strip() == "1518" and "throughput" in ln.split("│")[1] for ln in flagged)
    assert "change(s) above the noise threshold:" in out


def test_export_round_trip(tour) -> None:
    tmp, db, _, _ = tour
    j = json.loads(nfv("export", "1", "--db", db).stdout)
    csv_text = nfv("export", "1", "--format", "csv", "--db", db).stdout
    ntrials = sum(len(t["trials"]) for t in j["tests"])
    assert len(csv_text.strip().splitlines()) == ntrials + 1
    (tmp / "run1.json").write_text(json.dumps(j))
    db2 = str(tmp / "imported.db")
    nfv("import", str(tmp / "run1.json"), "--db", db2)
    j2 = json.loads(nfv("export", "latest", "--db", db2).stdout)
    assert j2["tests"] == [dict(t, id=t2["id"]) for t, t2 in zip(j["tests"], j2["tests"])]


def test_ctrl_c_keeps_trials_and_marks_interrupted(tmp_path) -> None:
    suite = tmp_path / "slow.yaml"
    suite.write_text(yaml.safe_dump({
        "name": "slow", "topology": {"kind": "p-ovs-p"}, "profile": "quick",
        "traffic": {"frame_sizes": [64, 128, 256, 512, 1024, 1280, 1518]},
        "sim": {"capacity_pps": 1000000, "pace_s": 0.15},
        "tests": [{"method": "throughput", "resolution_pct": 0.1}]}))
    db = tmp_path / "r.db"
    p = subprocess.Popen([sys.executable, "-m", "nfvperf", "run", str(suite), "--tg", "sim", "--db", str(db),
                          "--out", str(tmp_path / "out")], cwd=REPO, env=ENV, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        n = wait_for_trials(db, 4)
        assert n >= 4, "the run did not get going"
        p.send_signal(signal.SIGINT)
        time.sleep(0.05)
        p.send_signal(signal.SIGINT)       # an impatient second Ctrl-C must not break the clean-up
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, (out, err)
    con = sqlite3.connect(db)
    status, reason = con.execute("select status, reason from runs").fetchone()
    assert status == "interrupted" and "interrupted" in reason
    kept = con.execute("select count(*) from trials").fetchone()[0]
    assert kept >= n
    assert con.execute("select count(*) from tests where status='interrupted'").fetchone()[0] == 1
    assert con.execute("select count(*) from tests where status='running'").fetchone()[0] == 0


def test_forked_child_signal_does_not_touch_the_run(tmp_path) -> None:
    """Topology helpers fork (netns); a child killed by SIGTERM/SIGINT must die, not unwind into
    the runner and mark the run interrupted."""
    import contextlib

    from nfvperf.suite_load import validate_suite
    from nfvperf.runner import execute
    from nfvperf.topo.measurers import sim_measurer
    from nfvperf.store import Store

    statuses: list[int] = []

    @contextlib.contextmanager
    def factory(suite, tg, tag, run_dir, info, spec=None):
        m = sim_measurer(suite.spec.sim, suite.spec.topology)
        real = m.measure

        def measure(d, load):
            pid = os.fork()
            if pid == 0:            # child: wait to be killed
                time.sleep(30)
                os._exit(0)
            time.sleep(0.05)
            os.kill(pid, signal.SIGTERM)
            statuses.append(os.waitpid(pid, 0)[1])
            return real(d, load)
        m.measure = measure
        yield m

    suite = validate_suite({"name": "fork", "profile": "quick", "traffic": {"frame_sizes": [64]},
                            "sim": {"capacity_pps": 1e6}, "tests": [{"method": "throughput", "resolution_pct": 5}]})
    store = Store("sqlite:///" + str(tmp_path / "r.db"))
    out = execute(suite, store=store, tg="sim", out_dir=tmp_path, show_progress=False, log=lambda s: None,
                  measurer_factory=factory)
    assert out.status == "completed"
    assert statuses and all(os.WIFSIGNALED(s) and os.WTERMSIG(s) == signal.SIGTERM for s in statuses)
    assert store.load_run(out.run_id).status == "completed"


def test_kill_9_keeps_trials_and_history_says_killed(tmp_path) -> None:
    suite = tmp_path / "slow.yaml"
    suite.write_text(yaml.safe_dump({
        "name": "slow9", "profile": "quick", "traffic": {"frame_sizes": [64, 128, 256]},
        "sim": {"capacity_pps": 1000000, "pace_s": 0.15}, "tests": [{"method": "throughput"}]}))
    db = tmp_path / "r.db"
    p = subprocess.Popen([sys.executable, "-m", "nfvperf", "run", str(suite), "--tg", "sim", "--db", str(db),
                          "--out", str(tmp_path / "out")], cwd=REPO, env=ENV, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        n = wait_for_trials(db, 3)
        p.kill()
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert n >= 3
    con = sqlite3.connect(db)
    kept = con.execute("select count(*) from trials").fetchone()[0]
    passed = con.execute("select count(*) from tests where status='passed'").fetchone()[0]
    assert kept >= n
    assert con.execute("select status from runs").fetchone()[0] == "running"    # nobody closed the books
    out = nfv("history", "--db", str(db)).stdout
    assert "running (killed?)" in out
    # history marked it aborted (its pid is gone), with the reason; every stored trial stays
    status, reason = con.execute("select status, reason from runs").fetchone()
    assert status == "aborted" and "the run was killed or crashed" in reason
    assert json.loads(nfv("history", "--json", "--db", str(db)).stdout)[0]["status"] == "aborted"
    assert con.execute("select count(*) from trials").fetchone()[0] == kept
    assert con.execute("select count(*) from tests where status='passed'").fetchone()[0] == passed
    assert con.execute("select count(*) from tests where status='running'").fetchone()[0] == 0
    rep = nfv("report", "latest", "--db", str(db)).stdout
    assert "the run was killed or crashed" in rep


def test_topology_too_big_for_the_host_is_skipped_and_the_run_goes_on(tmp_path) -> None:
    """A topology whose cores the host cannot give (HostTooSmall, found before anything starts)
    has its units stored as skipped with the reason; the other topologies still run."""
    import contextlib

    from nfvperf.suite_load import validate_suite
    from nfvperf.runner import execute
    from nfvperf.topo.measurers import sim_measurer
    from nfvperf.store import Store
    from nfvperf.topo.base import HostTooSmall

    @contextlib.contextmanager
    def factory(suite, tg, tag, run_dir, info, spec=None):
        if spec is not None and getattr(spec.ovs, "pmd_cores", None) == 4:
            raise HostTooSmall("topology.ovs.pmd_cores: 4 wanted, but this host has 2 physical core(s)")
        with sim_measurer(suite.spec.sim, spec or suite.spec.topology) as m:
            yield m

    suite = validate_suite({"name": "fit", "profile": "quick", "traffic": {"frame_sizes": [64]},
                            "sim": {"capacity_pps": 1e6},
                            "tests": [{"method": "throughput", "name": "cores",
                                       "study": {"axes": {"pmd_cores": [4, 1]}}}]})
    store = Store("sqlite:///" + str(tmp_path / "r.db"))
    out = execute(suite, store=store, tg="sim", out_dir=tmp_path, show_progress=False, log=lambda s: None,
                  measurer_factory=factory)
    assert out.status == "completed" and out.skipped_tests == ["cores[pmd_cores=4] 64 B"]
    run = store.load_run(out.run_id)
    assert "1 of 2 test unit(s) skipped (see the tests' reasons)" in run.reason
    by_name = {t.name: t for t in run.tests}
    big, small = by_name["cores[pmd_cores=4]"], by_name["cores[pmd_cores=1]"]
    assert big.status == "skipped" and "pmd_cores: 4 wanted" in big.reason and not big.results
    assert big.study["axes"] == {"pmd_cores": 4}
    assert small.status == "passed" and small.results
    assert run.environment["topologies"][0]["skipped"].startswith("topology.ovs.pmd_cores")

    # every topology too big: nothing was measured, so the run is failed, not completed
    suite = validate_suite({"name": "fit", "profile": "quick", "traffic": {"frame_sizes": [64]},
                            "tests": [{"method": "throughput", "topology": {"ovs": {"pmd_cores": 4}}}]})
    out = execute(suite, store=store, tg="sim", out_dir=tmp_path, show_progress=False, log=lambda s: None,
                  measurer_factory=factory)
    assert out.status == "failed" and out.exit_code != 0
    assert "all 1 test unit(s) skipped" in store.load_run(out.run_id).reason


def test_which_preflight_failures_mean_the_host_lacks_something() -> None:
    """Capacity (cores, NUMA sockets, mask CPUs) and missing hardware (VFs, IOMMU, the OVS kernel
    module) make a topology HostTooSmall; a broken host or a configuration error is a
    PreflightError naming the check (the runner skips that topology's units for either)."""
    from nfvperf.topo.base import host_lacks
    for name in ("ovs.socket_mem", "ovs.pmd_cpu_mask", "sriov:iommu", "sriov:0000:04:02.0", "kmod:openvswitch"):
        assert host_lacks(name), name
    for name in ("root", "hugepages", "binary:dpdk-testpmd", "sriov:port_kind", "sriov:vfs", "tgen"):
        assert not host_lacks(name), name
