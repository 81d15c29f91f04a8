"""The p2p topology (PHY-PHY): veth ports, testpmd or linux-bridge, tgen; brought up and torn
down without leaving anything (``leak_check``: netns, links, processes, hugepage files)."""
from __future__ import annotations

import shutil

import pytest

import nfvperf.topo as topo_pkg
from nfvperf.host.run import RunContext
from nfvperf.trial import DutFailure
from nfvperf.topo.spec import TopologySpec

from _p2p_trial import counted_bidir_trial

pytestmark = pytest.mark.root

DUTS = ["testpmd", "linux-bridge"]


def _tgen_available() -> bool:
    try:
        from nfvperf.tg.tgen import find_tgen_binary
        find_tgen_binary()
        return True
    except Exception:  # noqa: BLE001
        return False


def _dut_skip(dut):
    if dut == "testpmd" and not shutil.which("dpdk-testpmd"):
        pytest.skip("dpdk-testpmd not installed")


@pytest.mark.parametrize("dut,port_kind,mtu", [("testpmd", "af_packet", 1500),
                                                ("testpmd", "af_xdp", 1500),
                                                ("linux-bridge", "af_packet", 9000)])
def test_p2p_forwards_raw_frames_and_tears_down(dut, port_kind, mtu, tmp_path, leak_check,
                                                raw_port):
    """Without the generator: frames sent on <tag>p0 come out of <tag>p1 through the DUT."""
    _dut_skip(dut)
    run = RunContext(run_dir=tmp_path / "run")
    leak_check.watch(run.tag)
    spec = TopologySpec(kind="p2p", dut=dut, port_kind=port_kind, mtu=mtu)
    with topo_pkg.build(spec, run, start_tgen=False) as t:
        assert t.kind == "p2p" and len(t.ports) == 2
        assert t.switching_operations(True) == t.switching_operations(False) == 1
        p0, p1 = raw_port(t.ports[0].tg_ifname), raw_port(t.ports[1].tg_ifname)
        got = []
        for _ in range(25):          # the DUT's rings (AF_XDP) come up asynchronously
            p0.send(1, sig=b"WARM")
            got = p1.receive(sig=b"WARM", wait_s=0.2, want=1)
            if got:
                break
        assert got, "nothing forwarded"
        before = t.dut_counters()["total"]
        size = min(mtu + 18, 1518) if dut == "testpmd" else mtu + 18
        p0.send(100, sig=b"P2PT", gap_s=0.0005, size_b=size)
        frames = p1.receive(sig=b"P2PT", wait_s=3, want=100)
        assert len(frames) == 100 and len(frames[0]) == size - 4
        after = t.dut_counters()["total"]
        assert after["tx_packets"] - before["tx_packets"] >= 100
        env = t.environment()
        assert env["topology"] == "p2p" and env["dut"]["dut"] == dut
        assert env["cores_shared"] in (True, False) and isinstance(env["warnings"], list)
        assert {c["name"] for c in env["preflight"]} >= {"root", "hugepages"}
        t.dut_alive()
        with pytest.raises(Exception):
            t.measurer()          # no generator in this topology instance
        # RFC 6201 software reset (the measurer's reset_hook): forwarding resumes afterwards
        t.reset_dut()
        t.dut_alive()
        got = []
        for _ in range(25):
            p0.send(1, sig=b"RSET")
            got = p1.receive(sig=b"RSET", wait_s=0.2, want=1)
            if got:
                break
        assert got, "nothing forwarded after the reset"


def test_p2p_failed_bring_up_releases_everything(tmp_path, leak_check):
    """A DUT that cannot start (bad lcores) fails the bring-up; nothing stays behind."""
    if not shutil.which("dpdk-testpmd"):
        pytest.skip("dpdk-testpmd not installed")
    run = RunContext(run_dir=tmp_path / "run")
    leak_check.watch(run.tag)
    spec = TopologySpec(kind="p2p", dut="testpmd", testpmd={"lcores": "0@0,1@999"})
    with pytest.raises(DutFailure):
        with topo_pkg.build(spec, run, start_tgen=False):
            pass


def test_wrong_dut_and_jumbo_on_af_packet_are_refused(tmp_path, leak_check):
    run = RunContext(run_dir=tmp_path / "run")
    leak_check.watch(run.tag)
    with pytest.raises(Exception, match="p-ovs-p"):
        with topo_pkg.build(TopologySpec(kind="p2p", dut="ovs-dpdk"), run, start_tgen=False,
                            preflight=False):
            pass
    with pytest.raises(Exception, match="1518"):
        with topo_pkg.build(TopologySpec(kind="p2p", dut="testpmd", mtu=9000), run,
                            start_tgen=False, preflight=False):
            pass


@pytest.mark.skipif(not _tgen_available(), reason="tgen not built (make build)")
@pytest.mark.parametrize("dut", DUTS)
def test_p2p_tgen_trial_counts_match(dut, tmp_path, leak_check):
    _dut_skip(dut)
    run = RunContext(run_dir=tmp_path / "run")
    leak_check.watch(run.tag)
    spec = TopologySpec(kind="p2p", dut=dut)
    with topo_pkg.build(spec, run) as t:
        # 0.2 s after the learning frames, not 2 s: testpmd io learns nothing, and a Linux
        # bridge learns a source MAC as the frame arrives
        r, m = counted_bidir_trial(t, 2000, learning_s=0.2)
        assert r.loss_ratio == 0.0
        env = m.environment()
        assert env["topology"]["dut"]["dut"] == dut


def test_sigkilled_run_is_removed_by_cleanup(tmp_path, leak_check):
    """kill -9 of a process with a p2p/testpmd topology up leaves netns, veths, an orphaned
    testpmd and its hugepage files; `nfvperf cleanup --tag` removes all of it."""
    if not shutil.which("dpdk-testpmd"):
        pytest.skip("dpdk-testpmd not installed")
    import os
    import signal
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    from nfvperf.host import cleanup as C
    from nfvperf.host import hugepages as hp
    from nfvperf.host import netns as N

    run = RunContext(run_dir=tmp_path / "run")
    leak_check.watch(run.tag)
    src = str(Path(__file__).resolve().parents[2] / "src")
    code = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {src!r})
        import nfvperf.topo as T
        from nfvperf.topo.spec import TopologySpec
        run = T.RunContext({run.tag!r}, {str(run.run_dir)!r})
        with T.build(TopologySpec(kind="p2p", dut="testpmd"), run, start_tgen=False) as t:
            print("up", t.dut.proc.pid, flush=True)
            time.sleep(120)
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    pmd_pid = None
    try:
        line = p.stdout.readline().split()
        assert line and line[0] == "up", line
        pmd_pid = int(line[1])
        p.send_signal(signal.SIGKILL)
        p.wait(10)
        # what the killed run left behind
        assert N.netns_exists(run.netns("dut")) and N.link_exists(run.ifname("p0"))
        assert hp.tag_files(run.tag) or hp.tag_runtime_dirs(run.tag)
        dry = C.cleanup(None, dry_run=True)          # the owner is dead: found without --tag
        assert run.tag in dry.tags
        # testpmd may be gone by itself (its console pty closed with the owner) or still there
        rep = C.cleanup(run.tag)
        assert not os.path.exists(f"/proc/{pmd_pid}") or \
            open(f"/proc/{pmd_pid}/stat").read().split(")")[1].split()[0] == "Z"
        assert run.netns("dut") in rep.netns
        assert rep.hugepage_files
        assert not N.netns_exists(run.netns("dut")) and not N.link_exists(run.ifname("p0"))
        assert not hp.tag_files(run.tag)
    finally:
        if p.poll() is None:
            p.kill()
        C.cleanup(run.tag)
