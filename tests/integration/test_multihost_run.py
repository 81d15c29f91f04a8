"""p-ovs-p across two hosts over SSH (issue 10): tgen on the tester host, OVS-DPDK on the DUT
host, both namespaces with their own sshd (tests/integration/testbed_hosts.py), cabled by veth
pairs.  Counts match at tgen and OVS; a lost DUT host (sshd killed) or a killed ovs-vswitchd
ends the measurement with a clear error within seconds; nothing is left on either host."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))   # testbed_hosts, whatever the import mode
from testbed_hosts import make_testbed, restart_sshd, testbed_hosts  # noqa: E402,F401

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("need_tgen")]

if os.geteuid() != 0 or not os.path.exists("/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"):
    pytest.skip("needs root and openvswitch-switch-dpdk", allow_module_level=True)

from nfvperf.testbed.hosts import TestbedHosts, topology_kwargs  # noqa: E402
from nfvperf.topo import build  # noqa: E402
from nfvperf.topo.spec import TopologySpec  # noqa: E402
from nfvperf.trial import DutFailure, TrafficProfile  # noqa: E402


def _spec(port_kind: str = "af_packet") -> TopologySpec:
    return TopologySpec(kind="p-ovs-p", port_kind=port_kind, ovs={"socket_mem_mb": 512})


def _profile() -> TrafficProfile:
    return TrafficProfile(frame_size_b=64, flows_per_port=4, bidirectional=True, drain_s=0.5,
                          learning=False)


def _netns_inode(ns: str) -> int:
    return os.stat(f"/run/netns/{ns}").st_ino


def _pid_netns_inode(pid: int) -> int:
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def _assert_hosts_clean(tb) -> None:
    deadline = time.monotonic() + 8
    left = {}
    while time.monotonic() < deadline:
        left = {h: tb.processes(h) for h in tb.hosts}
        if not any(left.values()):
            break
        time.sleep(0.2)
    assert not any(left.values()), f"processes left on the hosts: {left}"


@pytest.mark.parametrize("port_kind", ["af_packet", "af_xdp"])
def test_multihost_p_ovs_p_over_ssh_counts_match(testbed_hosts, run_ctx, port_kind):
    tb = testbed_hosts
    spec = tb.spec
    with TestbedHosts(spec) as hosts:
        kw = topology_kwargs(spec, hosts)
        with build(_spec(port_kind), run_ctx, **kw) as topo:
            # tgen runs in the tester host, OVS in the DUT host, started over SSH
            assert _pid_netns_inode(topo.tgen.process.pid) == \
                _netns_inode(tb.hosts["tester1"].netns)
            vsd = topo.dut._procs["ovs-vswitchd"]
            assert _pid_netns_inode(vsd.pid) == _netns_inode(tb.hosts["dut1"].netns)
            assert Path(f"/proc/{vsd.pid}/environ").read_bytes().count(
                f"NFVPERF_TAG={run_ctx.tag}".encode()) == 1
            m = topo.measurer()
            m.set_profile(_profile())
            m.measure(0.5, 1000)                 # warm-up (datapath flows, ARP-free: static)
            res = m.measure(0.5, 4000)
            assert res.valid, res.invalid_reasons
            assert res.sent == 4000 and res.received == 4000
            after = res.dut_counters
            for i in (0, 1):
                st = res.tg_counters[f"port{i}"]["stats"]
                assert after["ports"][f"phy{i}"]["rx_packets"] == st["opackets"]
                assert after["ports"][f"phy{i}"]["tx_packets"] == st["ipackets"]
            assert res.latency is not None
            env = topo.environment()
            assert env["hosts"]["generator_on"] == "tester1" and env["hosts"]["dut_on"] == "dut1"
            assert env["hosts"]["dut"]["address"] == tb.hosts["dut1"].address
            assert str(tb.user_key) not in repr(env)
            assert env["dut"]["version"].startswith("3.")
        _assert_hosts_clean(tb)


def test_multihost_lost_dut_host_ends_the_measurement_within_seconds(testbed_hosts, run_ctx):
    tb = testbed_hosts
    spec = tb.spec
    with TestbedHosts(spec) as hosts:
        with build(_spec(), run_ctx, **topology_kwargs(spec, hosts)) as topo:
            m = topo.measurer()
            m.set_profile(_profile())
            res = m.measure(0.5, 1000)
            assert res.valid
            t0 = time.monotonic()
            tb.hosts["dut1"].kill_sshd()
            with pytest.raises(DutFailure, match=r"dut1.*(lost|unreachable)"):
                m.measure(5.0, 1000)
            took = time.monotonic() - t0
            assert took < 8, f"the lost DUT host was noticed after {took:.1f} s"
        # ovs died with its channels; tgen stopped over the tester's connection
        _assert_hosts_clean(tb)
    # what OVS left on the DUT host (its DPDK runtime directory) goes once the host is back
    restart_sshd(tb, "dut1")
    from nfvperf.testbed.hosts import cleanup_testbed
    rep = cleanup_testbed(spec, run_ctx.tag)
    # (the hosts share this machine's file system: either host's cleanup may find the files)
    found = [i for h in rep.values() for items in h[run_ctx.tag].values() for i in items]
    assert any(f"/dpdk/{run_ctx.tag}ovs" in i for i in found), rep
    again = cleanup_testbed(spec, run_ctx.tag, dry_run=True)
    assert all(v == [] for h in again.values() for v in h[run_ctx.tag].values()), again
    assert not (Path(spec.hosts["dut1"].work_dir) / run_ctx.tag).exists()
    assert not Path(f"/tmp/{run_ctx.tag}-ovs").exists()


def test_multihost_killed_remote_vswitchd_ends_the_measurement(testbed_hosts, run_ctx):
    import signal
    tb = testbed_hosts
    spec = tb.spec
    with TestbedHosts(spec) as hosts:
        with build(_spec(), run_ctx, **topology_kwargs(spec, hosts)) as topo:
            m = topo.measurer()
            m.set_profile(_profile())
            assert m.measure(0.5, 1000).valid
            os.kill(topo.dut._procs["ovs-vswitchd"].pid, signal.SIGKILL)
            t0 = time.monotonic()
            with pytest.raises(DutFailure, match="ovs-vswitchd"):
                m.measure(5.0, 1000)
            assert time.monotonic() - t0 < 8
        _assert_hosts_clean(tb)


# ------------------------------------------------------------------ whole runs on the testbed
SUITE = """
name: multihost-{name}
topology: {{kind: p-ovs-p, dut: ovs-dpdk, ports: 2, port_kind: af_packet,
           ovs: {{socket_mem_mb: 512}}}}
traffic: {{frame_sizes: [64], flows_per_port: 4, bidirectional: true, link_speed: 10M}}
profile: quick
tests:
  - method: frame_loss_rate
    trial_duration_s: 1
    step_pct: 10
    zero_loss_stop: {stop}
"""


def _suite(tmp_path: Path, name: str, stop: int):
    from nfvperf.suite_load import load_suite
    p = tmp_path / f"{name}.yaml"
    p.write_text(SUITE.format(name=name, stop=stop))
    return load_suite(p)


def _trials(db: Path) -> int:
    import sqlite3
    with sqlite3.connect(db) as con:
        return con.execute("select count(*) from trials").fetchone()[0]


def _trials_so_far(db: Path) -> int:
    """Trials stored by a run that is still starting: 0 before its store has its tables (the
    file exists a moment before them; the query raised "no such table" in that moment)."""
    import sqlite3
    if not db.exists():
        return 0
    try:
        return _trials(db)
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):
            return 0
        raise


def test_multihost_run_on_testbed_stores_results_and_roles(testbed_hosts, tmp_path, leak_check):
    from nfvperf.runner import execute
    from nfvperf.store import Store
    tb = testbed_hosts
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    out = execute(_suite(tmp_path, "ok", 2), store=store, tg="tgen", out_dir=tmp_path / "out",
                  show_progress=False, testbed=tb.spec)
    leak_check.watch(out.run_dir.name)
    assert out.status == "completed", out.reason
    run = store.load_run(out.run_id)
    env = run.environment
    roles = env["testbed_hosts"]["roles"]
    assert roles == {"generator": "tester1", "dut": "dut1", "latency_clock": "tester1"}
    assert {r["host"] for r in env["testbed_hosts"]["preflight"]} == {"tester1", "dut1"}
    topo_env = env["topologies"][0]["environment"]
    assert topo_env["hosts"]["dut_on"] == "dut1"
    assert [lk["tester_iface"] for lk in topo_env["hosts"]["links"]] == \
        [tb.hosts["tester1"].nics["p0"], tb.hosts["tester1"].nics["p1"]]
    assert _trials(tmp_path / "r.db") >= 2
    text = (tmp_path / "r.db").read_bytes()
    assert str(tb.user_key).encode() not in text       # no key path in the store
    assert b"BEGIN OPENSSH PRIVATE KEY" not in text
    _assert_hosts_clean(tb)
    store.close()


def test_multihost_run_lost_dut_host_fails_the_run_keeps_trials(testbed_hosts, tmp_path,
                                                                leak_check):
    import threading

    from nfvperf.runner import execute
    from nfvperf.store import Store
    tb = testbed_hosts
    db = tmp_path / "r.db"
    store = Store(f"sqlite:///{db}")
    killed: dict[str, float] = {}

    def killer() -> None:
        deadline = time.monotonic() + 120
        while _trials(db) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        killed["at"] = time.monotonic()
        tb.hosts["dut1"].kill_sshd()

    threading.Thread(target=killer, daemon=True).start()
    out = execute(_suite(tmp_path, "lost", 10), store=store, tg="tgen", out_dir=tmp_path / "out",
                  show_progress=False, testbed=tb.spec)
    ended = time.monotonic()
    leak_check.watch(out.run_dir.name)
    assert "at" in killed
    assert out.status == "failed"
    assert "dut1" in (out.reason or "") and ("lost" in out.reason or "unreachable" in out.reason), \
        out.reason
    assert ended - killed["at"] < 15, f"the run ended {ended - killed['at']:.1f} s after the kill"
    assert _trials(db) >= 2                             # the finished trials are kept
    _assert_hosts_clean(tb)
    restart_sshd(tb, "dut1")
    from nfvperf.testbed.hosts import cleanup_testbed
    tag = out.run_dir.name
    cleanup_testbed(tb.spec, tag)
    assert not (Path(tb.spec.hosts["dut1"].work_dir) / tag).exists()
    assert not Path(f"/tmp/{tag}-ovs").exists()
    store.close()


_CONTROLLER = """
import sys
from pathlib import Path
from nfvperf.suite_load import load_suite
from nfvperf.runner import execute
from nfvperf.store import Store
from nfvperf.testbed.spec import load_testbed
suite, testbed, db, out = sys.argv[1:5]
execute(load_suite(suite), store=Store(f"sqlite:///{db}"), tg="tgen", out_dir=Path(out),
        show_progress=False, testbed=load_testbed(testbed))
"""


def test_multihost_cleanup_testbed_after_kill9_of_the_controller(testbed_hosts, tmp_path,
                                                                 leak_check):
    import signal
    import sqlite3
    import subprocess

    tb = testbed_hosts
    db = tmp_path / "r.db"
    _suite(tmp_path, "kill9", 10)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))
    ctl = subprocess.Popen([sys.executable, "-c", _CONTROLLER, str(tmp_path / "kill9.yaml"),
                            str(tb.path), str(db), str(tmp_path / "out")], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while _trials_so_far(db) < 1 and time.monotonic() < deadline:
            assert ctl.poll() is None, "the controller ended before its first trial"
            time.sleep(0.2)
        with sqlite3.connect(db) as con:
            tag = con.execute("select tag from runs").fetchone()[0]
        leak_check.watch(tag)
        assert any("tgen" in c for _, c in tb.processes("tester1"))
        assert any("ovs-vswitchd" in c for _, c in tb.processes("dut1"))
        ctl.send_signal(signal.SIGKILL)
        ctl.wait(10)
    finally:
        if ctl.poll() is None:
            ctl.kill()
            ctl.wait()
    # the remote processes die with their SSH channels ...
    _assert_hosts_clean(tb)
    # ... what they leave on disk goes with `nfvperf cleanup --testbed FILE`
    cp = subprocess.run([sys.executable, "-m", "nfvperf", "cleanup", "--testbed", str(tb.path),
                         "--tag", tag, "--db", f"sqlite:///{db}"], env=env, capture_output=True,
                        text=True, timeout=120)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "tester1: " in cp.stdout and "dut1: " in cp.stdout
    assert "removed" in cp.stdout
    cp = subprocess.run([sys.executable, "-m", "nfvperf", "cleanup", "--testbed", str(tb.path),
                         "--tag", tag, "--dry-run", "--json"], env=env, capture_output=True,
                        text=True, timeout=120)
    import json
    first = json.loads(cp.stdout[:cp.stdout.index("\n}\n") + 2])
    assert all(v == [] for h in first["hosts"].values() for v in h[tag].values()), cp.stdout
    with sqlite3.connect(db) as con:
        assert con.execute("select status from runs").fetchone()[0] == "aborted"


def test_multihost_run_refuses_a_changed_host_key(testbed_hosts, tmp_path):
    from testbed_hosts import rotate_host_key

    from nfvperf.runner import execute
    from nfvperf.store import Store
    tb = testbed_hosts
    rotate_host_key(tb, "dut1")
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    out = execute(_suite(tmp_path, "key", 2), store=store, tg="tgen", out_dir=tmp_path / "out",
                  show_progress=False, testbed=tb.spec)
    assert out.status == "failed"
    assert "dut1" in out.reason and "CHANGED" in out.reason and "refused" in out.reason
    assert _trials(tmp_path / "r.db") == 0
    assert not tb.processes("tester1") and not tb.processes("dut1")
    store.close()
