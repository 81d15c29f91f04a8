"""Integration tests of the iperf3 TCP measurer (root: network namespaces, veth, Linux bridge).

Traffic stays inside namespaces the tests create (198.18.0.0/24 on their own veths); every
namespace is deleted afterwards.  About 25 s in all on a 2-core machine.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from nfvperf.trial import MeasurerError, Unsupported
from nfvperf.tg.iperf3 import LAYER, Iperf3Measurer, VethTopology

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")
needs_tools = pytest.mark.skipif(not (shutil.which("iperf3") and shutil.which("ip")),
                                 reason="needs iperf3 and iproute2")

pytestmark = [pytest.mark.root, pytest.mark.no_polling, needs_root, needs_tools]


def _netns() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.split()}


def _ns_pids(ns: str) -> list[str]:
    return subprocess.run(["ip", "netns", "pids", ns], stdout=subprocess.PIPE,
                          text=True).stdout.split()


def _procs_with(word: str) -> list[int]:
    """PIDs whose command line mentions ``word`` (our namespace names are unique)."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                if word.encode() in f.read():
                    found.append(int(d))
        except OSError:
            pass
    return found


@pytest.fixture(scope="module", params=["veth", "bridge"])
def measurer(request):
    m = Iperf3Measurer.standalone(bridge=(request.param == "bridge"))
    tag = m.topology.tag
    namespaces = list(m.topology.namespaces)
    assert set(namespaces) <= _netns()
    yield m
    m.close()
    # everything the measurer made is gone: namespaces (and with them veths, bridge), processes
    assert not (set(namespaces) & _netns())
    assert _procs_with(tag) == []


@pytest.mark.parametrize("processes", [1, 2])
@pytest.mark.parametrize("streams", [1, 4])
def test_streams_and_processes(measurer, streams, processes):
    res = measurer.measure_tcp(2, streams=streams, processes=processes, pin_cores=[0, 1])
    assert res.valid and res.errors == []
    assert res.layer == LAYER
    assert res.receiver_bps > 0 and res.sender_bps > 0
    assert len(res.per_process) == processes
    # per-process figures sum to the aggregate (within float rounding)
    assert sum(p.receiver_bps for p in res.per_process) == pytest.approx(res.receiver_bps, rel=1e-9)
    assert sum(p.sender_bps for p in res.per_process) == pytest.approx(res.sender_bps, rel=1e-9)
    for i, p in enumerate(res.per_process):
        assert p.error is None
        assert p.streams == streams                      # TCP connections in iperf3's JSON
        assert p.port == measurer.base_port + i
        assert p.cpu == [0, 1][i % 2]
        assert p.receiver_bps > 0
        # iperf3's rate agrees with its own byte count and duration
        assert p.receiver_bytes * 8 / p.seconds == pytest.approx(p.receiver_bps, rel=0.01)
        assert p.cpu_host_pct is not None and p.cpu_remote_pct is not None
        assert len(p.intervals) >= 2
        assert p.client_cmd[:4] == ["ip", "netns", "exec", measurer.client_ns]
        assert "taskset" in p.client_cmd and "-P" in p.client_cmd
        assert p.client_cmd[p.client_cmd.index("-P") + 1] == str(streams)
        assert p.server_cmd[:4] == ["ip", "netns", "exec", measurer.server_ns]
    assert len(res.commands) == 2 * processes
    assert res.intervals and all(iv["bps"] > 0 for iv in res.intervals)
    # no iperf3 left in either namespace after the trial
    assert _ns_pids(measurer.client_ns) == [] and _ns_pids(measurer.server_ns) == []
    d = res.to_dict()
    assert d["receiver_bps"] == res.receiver_bps and len(d["per_process"]) == processes


def test_reverse_and_bidir(measurer):
    r = measurer.measure_tcp(1, reverse=True)
    assert r.receiver_bps > 0 and "-R" in r.commands[-1]
    b = measurer.measure_tcp(1, streams=2, bidir=True)
    assert b.receiver_bps > 0 and b.reverse_receiver_bps > 0
    assert b.total_bps == pytest.approx(b.receiver_bps + b.reverse_receiver_bps)
    assert b.per_process[0].streams == 2


def test_bad_server_address_is_a_clear_error(measurer):
    bad = Iperf3Measurer(measurer.server_ns, measurer.client_ns, "198.18.0.99",
                         connect_timeout_ms=1000, timeout_margin_s=5)
    t0 = time.monotonic()
    with pytest.raises(MeasurerError) as ei:
        bad.measure_tcp(2, processes=2)
    assert time.monotonic() - t0 < 10                   # no hang
    msg = str(ei.value)
    assert "198.18.0.99" in msg and "unable to connect" in msg
    assert ei.value.result.errors                       # the partial result rides along
    assert _ns_pids(measurer.client_ns) == [] and _ns_pids(measurer.server_ns) == []


def test_measure_is_unsupported(measurer):
    with pytest.raises(Unsupported):
        measurer.measure(1.0, 1e6)


def test_tso_off_and_multiqueue():
    with VethTopology(tso=False, gso=False, queues=4) as topo:
        for state in topo.offload_state.values():
            assert state["tcp-segmentation-offload"].startswith("off")
        txq = subprocess.run(["ip", "netns", "exec", topo.client_ns, "ls",
                              f"/sys/class/net/{topo.client_if}/queues"],
                             stdout=subprocess.PIPE, text=True).stdout.split()
        assert len([q for q in txq if q.startswith("tx-")]) == 4
        m = Iperf3Measurer(topo.server_ns, topo.client_ns, topo.server_ip)
        res = m.measure_tcp(1, streams=2)
        assert res.receiver_bps > 0
        names = topo.namespaces
    assert not (set(names) & _netns())


def test_json_errors_quote_stderr():
    from nfvperf.tg.iperf3 import _parse_json
    doc, err = _parse_json('{"start": {', "iperf3: some complaint", "client 0")
    assert doc is None and "cannot parse" in err and "some complaint" in err
    doc, err = _parse_json("", "iperf3: error - boom", "client 0")
    assert doc is None and "boom" in err
    doc, err = _parse_json('{"error": "unable to connect to server"}', "", "client 0")
    assert "unable to connect" in err


def test_trial_result_view(measurer):
    res = measurer.measure_tcp(1.2, streams=2)          # rounded up to 2 whole seconds
    assert res.duration_s == 2 and "-t" in res.commands[-1]
    assert res.commands[-1][res.commands[-1].index("-t") + 1] == "2"
    tr = res.to_trial_result()
    assert tr.valid and tr.load_pps == 0.0
    assert tr.extra["throughput_bps"] == res.receiver_bps > 0
    assert tr.extra["tcp"]["layer"] == LAYER and tr.effective_duration_s > 1.5
    assert measurer.measure_tcp_supported()


def test_stalled_transfer_is_killed_not_hung():
    m = Iperf3Measurer.standalone(timeout_margin_s=2, connect_timeout_ms=1000)
    topo = m.topology
    try:
        def cut():
            time.sleep(0.7)
            subprocess.run(["ip", "netns", "exec", topo.server_ns, "ip", "link", "set",
                            topo.server_if, "down"])
        import threading
        th = threading.Thread(target=cut)
        th.start()
        t0 = time.monotonic()
        with pytest.raises(MeasurerError) as ei:
            m.measure_tcp(1, processes=2)
        th.join()
        assert time.monotonic() - t0 < 8
        assert "no result within" in str(ei.value) and "198.18.0.2" in str(ei.value)
        assert _ns_pids(topo.client_ns) == [] and _ns_pids(topo.server_ns) == []
    finally:
        m.close()
    assert not (set(topo.namespaces) & _netns())


def test_names_carry_the_run_tag_and_a_given_tracker_releases_them(tmp_path):
    from nfvperf.host.run import TAG_RE, ResourceTracker, RunContext
    run = RunContext(run_dir=tmp_path / "run")
    tracker = ResourceTracker(run, install_signal_handlers=False)
    try:
        topo = VethTopology(bridge=True, run=run, tracker=tracker).create()
        assert topo.tag == run.tag and TAG_RE.fullmatch(topo.tag)
        assert all(ns.startswith(run.tag + "-") for ns in topo.namespaces)
        assert set(topo.namespaces) <= _netns()
        kinds = {k for k, _ in tracker.items()}
        assert {"netns", "veth", "bridge"} <= kinds
        m = Iperf3Measurer(topo.server_ns, topo.client_ns, topo.server_ip, topology=topo)
        assert m.measure_tcp(1).receiver_bps > 0
        m.close()                                     # releases through the run's tracker
        assert tracker.items() == [] and not tracker.errors
        assert not (set(topo.namespaces) & _netns())
    finally:
        tracker.release_all()


def test_nfvperf_cleanup_finds_what_a_killed_run_left(tmp_path):
    """A process that built a VethTopology is SIGKILLed: `nfvperf cleanup` finds the namespaces
    (and its live-run registry entry) by the tag and removes them."""
    import signal
    import sys
    from pathlib import Path

    from nfvperf.host.cleanup import cleanup
    script = tmp_path / "owner.py"
    src = Path(__file__).resolve().parents[2] / "src"
    script.write_text(
        "import sys, time\n"
        f"sys.path.insert(0, {str(src)!r})\n"
        "from nfvperf.tg.iperf3 import VethTopology\n"
        "t = VethTopology(bridge=True).create()\n"
        "print(t.tag, flush=True)\n"
        "time.sleep(60)\n")
    owner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        tag = owner.stdout.readline().strip()
        assert tag, "the topology was not built"
        names = {f"{tag}-tcpc", f"{tag}-tcps", f"{tag}-tcpb"}
        assert names <= _netns()
        owner.send_signal(signal.SIGKILL)
        owner.wait(5)
        rep = cleanup(tag)
        assert names <= set(rep.netns) and not rep.errors
        assert tag in rep.registry
        assert not (names & _netns())
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait(5)
        owner.stdout.close()
