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

pytestmark = pytest.mark.root

if os.geteuid() != 0 or not os.path.exists("/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"):
    pytest.skip("needs root and openvswitch-switch-dpdk", allow_module_level=True)

from nfvperf.testbed.hosts import TestbedHosts, topology_kwargs  # noqa: E402
from nfvperf.topo import build  # noqa: E402
from nfvperf.topo.spec import TopologySpec  # noqa: E402
from nfvperf.trial import DutFailure, TrafficProfile  # noqa: E402


@pytest.fixture(autouse=True)
def _need_tgen():
    from nfvperf.tg.tgen import find_tgen_binary
    try:
        find_tgen_binary()
    except FileNotFoundError as e:
        pytest.skip(str(e))


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


def test_multihost_p_ovs_p_over_ssh_counts_match(testbed_hosts, run_ctx):
    tb = testbed_hosts
    spec = tb.spec
    with TestbedHosts(spec) as hosts:
        kw = topology_kwargs(spec, hosts)
        with build(_spec(), run_ctx, **kw) as topo:
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
            res = m.measure(1.0, 2000)
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
