"""PVP across two hosts over SSH (issue 10 item 2): tgen on the tester host, OVS-DPDK and the
testpmd VNF (container) on the DUT host, both started through the DUT host object (the VNF on a
terminal of that host: agent ``guard-pty``), its vhost-user sockets and hugepage files there,
tagged with the run tag.  Counts match at tgen, OVS and the VNF; a VNF killed on the DUT host
ends the measurement within seconds; a whole PVVP run stores its
results; nothing is left on either host."""
from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))   # testbed_hosts, whatever the import mode
from test_multihost_run import _assert_hosts_clean, _netns_inode, _pid_netns_inode, _trials  # noqa: E402
from testbed_hosts import make_testbed, testbed_hosts  # noqa: E402,F401,F811

pytestmark = pytest.mark.root

if os.geteuid() != 0 or not os.path.exists("/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"):
    pytest.skip("needs root and openvswitch-switch-dpdk", allow_module_level=True)

from nfvperf.testbed.hosts import TestbedHosts, topology_kwargs  # noqa: E402
from nfvperf.topo import build  # noqa: E402
from nfvperf.topo.spec import TopologySpec  # noqa: E402
from nfvperf.trial import DutFailure, TrafficProfile  # noqa: E402


@pytest.fixture(autouse=True)
def _need_tgen_and_testpmd():
    import shutil

    from nfvperf.tg.tgen import find_tgen_binary
    try:
        find_tgen_binary()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    if not shutil.which("dpdk-testpmd"):
        pytest.skip("dpdk-testpmd not installed (Debian: dpdk)")


def test_multihost_pvp_over_ssh_vnf_on_the_dut_host_counts_match(testbed_hosts, run_ctx):
    tb = testbed_hosts
    spec = tb.spec
    dut_ns = _netns_inode(tb.hosts["dut1"].netns)
    with TestbedHosts(spec) as hosts:
        kw = topology_kwargs(spec, hosts)
        tspec = TopologySpec(kind="pvp", port_kind="af_packet", ovs={"socket_mem_mb": 512})
        with build(tspec, run_ctx, **kw) as topo:
            assert _pid_netns_inode(topo.tgen.process.pid) == \
                _netns_inode(tb.hosts["tester1"].netns)
            (vnf,) = topo.vnfs
            # the VNF runs on the DUT host, started over SSH, tagged with the run
            assert _pid_netns_inode(vnf.proc.pid) == dut_ns
            assert _pid_netns_inode(topo.dut._procs["ovs-vswitchd"].pid) == dut_ns
            assert Path(f"/proc/{vnf.proc.pid}/environ").read_bytes().count(
                f"NFVPERF_TAG={run_ctx.tag}".encode()) == 1
            # its vhost-user sockets in OVS's directory on the DUT host, not the controller's
            socks = [str(p.socket) for p in vnf.ports]
            assert all(s.startswith(str(topo.dut.vhost_dir)) for s in socks), socks
            assert not str(topo.dut.vhost_dir).startswith(str(run_ctx.run_dir))
            assert all(hosts.hosts["dut1"].exists(s) for s in socks)
            assert hosts.hosts["dut1"].glob("/dev/hugepages", f"{vnf.file_prefix}*")
            m = topo.measurer()
            m.set_profile(TrafficProfile(frame_size_b=64, flows_per_port=4, bidirectional=True,
                                         drain_s=0.5, learning=False))
            m.measure(0.5, 1000)                 # warm-up
            res = m.measure(0.5, 4000)
            assert res.valid, res.invalid_reasons
            assert res.sent == 4000 and res.received == 4000
            dc = res.dut_counters
            for i in (0, 1):
                st = res.tg_counters[f"port{i}"]["stats"]
                assert dc["ports"][f"phy{i}"]["rx_packets"] == st["opackets"]
                assert dc["ports"][f"phy{i}"]["tx_packets"] == st["ipackets"]
            # every frame crossed the VNF on the DUT host, both directions
            vc = dc["vnfs"]["vnf0"]["total"]
            assert vc["rx_packets"] == vc["tx_packets"] == 4000, dc["vnfs"]
            env = topo.environment()
            assert env["hosts"]["dut_on"] == "dut1" and env["switching_operations"] == 2
            assert env["vnfs"][0]["vnf"] == "vnf0" and env["vnfs"][0]["version"]
            assert str(tb.user_key) not in repr(env)
            prefix, vhost_dir = vnf.file_prefix, topo.dut.vhost_dir
            # a VNF that dies on the DUT host ends the next measurement within seconds
            os.kill(vnf.proc.pid, signal.SIGKILL)
            t0 = time.monotonic()
            with pytest.raises(DutFailure, match="testpmd-vnf0"):
                m.measure(5.0, 1000)
            assert time.monotonic() - t0 < 8
        _assert_hosts_clean(tb)
        dut = hosts.hosts["dut1"]
        assert not dut.glob("/dev/hugepages", f"{prefix}*")
        assert not dut.exists(f"/var/run/dpdk/{prefix}")
        assert not dut.glob(vhost_dir, "vhu-*")


SUITE = """
name: multihost-pvvp
topology: {kind: pvvp, dut: ovs-dpdk, ports: 2, port_kind: af_packet,
           ovs: {socket_mem_mb: 512}}
traffic: {frame_sizes: [64], flows_per_port: 4, bidirectional: true, link_speed: 10M}
profile: quick
tests:
  - method: frame_loss_rate
    trial_duration_s: 0.5
    step_pct: 10
    zero_loss_stop: 2
"""


def test_multihost_pvvp_run_on_testbed_stores_results(testbed_hosts, tmp_path, leak_check):
    """A whole run of PVVP (two VNFs chained through OVS on the DUT host: the same code as PVP
    with a longer chain): completed, trials and roles in the store, both hosts clean."""
    from nfvperf.suite_load import load_suite
    from nfvperf.runner import execute
    from nfvperf.store import Store
    tb = testbed_hosts
    (tmp_path / "pvvp.yaml").write_text(SUITE)
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    out = execute(load_suite(tmp_path / "pvvp.yaml"), store=store, tg="tgen",
                  out_dir=tmp_path / "out", show_progress=False, testbed=tb.spec)
    tag = out.run_dir.name
    leak_check.watch(tag)
    assert out.status == "completed", out.reason
    env = store.load_run(out.run_id).environment
    assert env["testbed_hosts"]["roles"]["dut"] == "dut1"
    # the VNFs' testpmd is checked on the DUT host before the run
    assert any(r["host"] == "dut1" and r["status"] == "ok" and "dpdk-testpmd" in r["check"]
               for r in env["testbed_hosts"]["preflight"]), env["testbed_hosts"]["preflight"]
    topo_env = env["topologies"][0]["environment"]
    assert topo_env["topology"] == "pvvp" and topo_env["hosts"]["dut_on"] == "dut1"
    assert [v["vnf"] for v in topo_env["vnfs"]] == ["vnf0", "vnf1"]
    assert topo_env["switching_operations"] == 3
    assert _trials(tmp_path / "r.db") >= 2
    assert str(tb.user_key).encode() not in (tmp_path / "r.db").read_bytes()
    _assert_hosts_clean(tb)
    assert not (Path(tb.spec.hosts["dut1"].work_dir) / tag).exists()
    assert not Path(f"/tmp/{tag}-ovs").exists()
    store.close()
