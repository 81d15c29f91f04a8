"""tgen over net_ring loopback (each net_ring port receives what it sends): exact counts.

Needs root and tgen/build/tgen; skipped otherwise.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from nfvperf.trial import Segment, TrafficProfile
from nfvperf.tg.tgen import PortSpec, TgenMeasurer

sys.path.insert(0, str(Path(__file__).resolve().parent))   # tgen_fixtures, whatever the import mode
from tgen_fixtures import ring_tgen_process, start_tgen, tag, until_generator_on_time, wait_result

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def ring_tgen(tmp_path_factory):
    yield from ring_tgen_process(tmp_path_factory.mktemp("tgen-ring"))


def _clean(proc):
    proc.rpc("stream.remove", all=True)


def test_ports_listed(ring_tgen):
    ports = ring_tgen.rpc("ports.list")
    assert [p["id"] for p in ports] == [0, 1]
    assert all(p["driver"] == "net_ring" for p in ports), ports
    # net_ring hands the mbufs over on tgen's own core: no reuse of RX mbufs, no prefetching
    assert all(p["tx_reuse"] is False and p["prefetch"] is False for p in ports), ports
    assert ring_tgen.rpc("ping")["pong"] is True


def check_tsc_calibrated(reply: dict) -> None:
    """A ping or trial.result reply carries a TSC frequency calibrated against
    CLOCK_MONOTONIC_RAW, within 1 % of DPDK's (which is rounded to 10 MHz), and its record."""
    hz, dpdk, cal = reply["tsc_hz"], reply["tsc_hz_dpdk"], reply["tsc_calibration"]
    assert abs(hz / dpdk - 1) < 0.01, (hz, dpdk)
    assert cal["method"] == "CLOCK_MONOTONIC_RAW", cal
    assert cal["samples"] >= 3 and cal["windows"] >= 2 and 0.1 <= cal["window_s"] < 0.6, cal
    # an attempt takes one window (~0.3 s); a loaded host may make tgen try again (a spread above
    # its 100 ppm limit): each attempt within 0.7 s, not the whole calibration
    assert cal["spread_ppm"] <= 100 and 1 <= cal["attempts"] and cal["took_s"] <= 0.7 * cal["attempts"], cal
    assert cal["correction_ppm"] == pytest.approx((hz / dpdk - 1) * 1e6, abs=0.01), cal


def test_tsc_calibrated(ring_tgen):
    ping = ring_tgen.rpc("ping")
    check_tsc_calibrated(ping)
    env = TgenMeasurer(ring_tgen, [(0, 1)]).environment()["tsc_calibration"]
    assert env["tsc_hz"] == ping["tsc_hz"] and env["tsc_hz_dpdk"] == ping["tsc_hz_dpdk"]
    assert env["method"] == "CLOCK_MONOTONIC_RAW"


def test_tsc_hz_dpdk_option(tmp_path):
    """--tsc-hz dpdk (NFVPERF_TGEN_TSC_HZ=dpdk): DPDK's frequency, said so."""
    proc = start_tgen([PortSpec("net_ring0")], tmp_path, tag(), tsc_hz="dpdk")
    try:
        ping = proc.rpc("ping")
        assert ping["tsc_hz"] == ping["tsc_hz_dpdk"] and ping["tsc_hz"] % 10_000_000 == 0, ping
        assert ping["tsc_calibration"]["method"] == "dpdk", ping
    finally:
        assert proc.stop() == 0


def test_frame_count_trial_exact(ring_tgen):
    _clean(ring_tgen)
    sid = ring_tgen.rpc("stream.add", port=0, rx_port=0, size_b=64, rate={"pps": 200000})["stream_id"]
    n = 100003
    for attempt in (1, 2):
        ring_tgen.rpc("trial.start", streams=[sid], frames=n, drain_s=0.2)
        res = wait_result(ring_tgen)
        eff = res["effective_duration_s"]
        # the rate was kept: n frames at 200 kpps take ~0.5 s.  Never faster; slower only where
        # the pacer says it fell behind (a loaded host took its CPU), and then once more
        assert eff > 0.45, eff
        if eff < 0.6:
            break
        assert eff <= n / 200000 + res["pacer_late_max_ns"] / 1e9 + 0.05, res
        print(f"[frame count trial] {eff:.3f} s, pacer late by up to {res['pacer_late_max_ns'] / 1e6:.0f} ms: "
              + ("once more" if attempt == 1 else "twice in a row"))
    assert 0.45 < eff < 0.6, f"the rate was not kept in two trials: {eff} s"
    (s,) = res["streams"]
    assert s["sent"] == n and s["received"] == n
    assert s["lost"] == 0 and s["duplicates"] == 0 and s["reordered"] == 0 and s["seq_gaps"] == 0
    assert s["first_loss_ns"] is None
    port0 = next(p for p in res["ports"] if p["id"] == 0)["stats"]
    assert port0["opackets"] == n and port0["ipackets"] == n
    # (net_ring counts packets only, no bytes: byte counts are checked over veth)
    assert res["non_test_rx"] == 0
    # a frame-count trial's duration_s is the intended one, frames / rate (was 0.0)
    assert res["duration_s"] == pytest.approx(n / 200000), res["duration_s"]
    assert s["misrouted"] == 0 and res["misrouted"] == 0 and port0_misrouted(res) == 0
    check_tsc_calibrated(res)
    # the port counted out every frame the worker handed it (PROTOCOL.md §6 ports[].tx)
    tx0 = next(p for p in res["ports"] if p["id"] == 0)["tx"]
    assert tx0["sent"] == tx0["port_opackets"] == n and tx0["not_sent"] == 0, tx0
    assert tx0["iface"] is None and res["tx_not_sent"] == 0


def port0_misrouted(res: dict) -> int:
    return next(p for p in res["ports"] if p["id"] == 0)["misrouted"]


def test_imix_all_sizes_arrive(ring_tgen):
    _clean(ring_tgen)
    imix = [[64, 7], [570, 4], [1518, 1]]
    sid = ring_tgen.rpc("stream.add", port=1, rx_port=1, imix=imix, rate={"pps": 100000})["stream_id"]
    n = 12 * 2000
    ring_tgen.rpc("trial.start", streams=[sid], frames=n, drain_s=0.2, latency=False)
    res = wait_result(ring_tgen)
    (s,) = res["streams"]
    assert s["sent"] == s["received"] == n
    assert s["latency"] is None
    wire = ring_tgen.rpc("stream.list")[0]["wire_size_b"]
    assert abs(wire - (7 * 64 + 4 * 570 + 1518) / 12) < 0.01, wire


def test_measurer_measure_ring(ring_tgen):
    m = TgenMeasurer(ring_tgen, [(0, 0), (1, 1)])
    m.set_profile(TrafficProfile(frame_size_b=128, flows_per_port=16, bidirectional=False,
                                 learning=False, drain_s=0.2))
    r = until_generator_on_time(lambda: m.measure(1.0, 50000))
    assert r.valid, r.invalid_reasons
    assert r.expected == 2 * 50000
    assert r.sent == r.received == 2 * 50000
    assert r.loss_ratio == 0.0 and r.lost == 0
    assert abs(r.effective_duration_s - 1.0) < 0.05
    lat = r.latency
    assert lat is not None and lat.count == r.received
    assert 0 < lat.min_ns <= lat.percentiles_ns["50"] <= lat.percentiles_ns["99"] <= lat.max_ns
    assert lat.min_ns <= lat.avg_ns <= lat.max_ns
    assert sum(c for _, c in lat.histogram) == lat.count
    assert set(r.tg_counters) == {"port0", "port1"}
    assert r.tg_counters["port0"]["stats"]["opackets"] == 50000
    for s in r.streams:
        assert s.sent == s.received == 50000 and s.tx_port == s.rx_port
        assert abs(s.achieved_pps - 50000) / 50000 < 0.02
    env = m.environment()
    assert env["cores_shared"] is True and len(env["ports"]) == 2
    m.close()


def test_measurer_burst_and_segments(ring_tgen):
    m = TgenMeasurer(ring_tgen, [(0, 0)])
    m.set_profile(TrafficProfile(frame_size_b=64, bidirectional=False, learning=False, drain_s=0.2))
    r = m.measure_burst(5000, 1_000_000, drain_s=0.2)
    assert r.expected == 5000 and r.sent == 5000 and r.received == 5000, r.to_dict()
    r = until_generator_on_time(lambda: m.measure_segments([Segment(0.4, 20000), Segment(0.3, 60000)]))
    assert r.expected == 8000 + 18000
    assert r.sent == r.received == 26000, r.to_dict()
    assert r.valid, r.invalid_reasons
    assert abs(r.effective_duration_s - 0.7) < 0.05
    m.close()


def test_learning_frames_are_not_test_frames(ring_tgen):
    m = TgenMeasurer(ring_tgen, [(0, 0)], learning_wait_s=0.2, learning_frames=3)
    m.set_profile(TrafficProfile(bidirectional=False, learning=True, drain_s=0.2))
    r = until_generator_on_time(lambda: m.measure(0.5, 10000))
    assert r.valid, r.invalid_reasons
    assert r.sent == r.received == 5000
    # the three learning frames come back on the ring but carry no signature
    assert r.non_test_rx == 3
    m.close()


@pytest.mark.parametrize("learning", [False, True])
def test_measure_reset_calls_hook_mid_trial(ring_tgen, learning):
    m = TgenMeasurer(ring_tgen, [(0, 0)], learning_wait_s=0.6)
    m.set_profile(TrafficProfile(bidirectional=False, learning=learning, drain_s=0.2))
    fired = []
    m.reset_hook = lambda: fired.append(ring_tgen.rpc("trial.status"))

    def run():
        fired.clear()
        return m.measure_reset(1.0, 20000, 0.5)

    r = until_generator_on_time(run)
    assert len(fired) == 1
    # the hook ran while traffic was flowing, about half-way through
    # about half-way through the traffic (learning, if any, not counted)
    assert fired[0]["state"] == "running", fired
    assert 0.3 * 20000 < fired[0]["sent"] < 0.8 * 20000, fired
    assert r.sent == r.received == 20000 and r.valid
    m.close()


def test_tgen_death_is_reported(tmp_path):
    import os
    import signal
    import threading

    from nfvperf.trial import MeasurerError

    proc = start_tgen([PortSpec("net_ring0")], tmp_path, tag())
    try:
        m = TgenMeasurer(proc, [(0, 0)])
        m.set_profile(TrafficProfile(bidirectional=False, learning=False, drain_s=0.2))
        threading.Timer(0.5, os.kill, (proc.proc.pid, signal.SIGKILL)).start()
        t0 = time.monotonic()
        with pytest.raises(MeasurerError) as ei:
            m.measure(10.0, 10000)
        assert time.monotonic() - t0 < 5
        assert "exited with status -9" in str(ei.value)
        assert "log tail" in str(ei.value)
    finally:
        proc.stop()


def test_frames_on_the_wrong_port_are_lost(ring_tgen):
    # each net_ring port loops back to itself: a 0->1 stream comes back on port 0, as from a
    # DUT that sends frames out of the wrong port.  tgen counts them as misrouted, not
    # received: all lost (more in test_tgen_misrouted.py)
    m = TgenMeasurer(ring_tgen, [(0, 1)])
    m.set_profile(TrafficProfile(bidirectional=False, learning=False, drain_s=0.2))
    r = m.measure(0.2, 10000)
    assert r.received == 0 and r.loss_ratio == 1.0, r.to_dict()
    assert r.streams[0].misrouted == r.sent > 0
    assert any("misrouted" in x for x in r.extra["notes"]), r.extra
    m.close()


def test_oneshot_cli(tmp_path):
    """tgen --oneshot: one trial from the command line, the trial.result JSON on stdout, exit 0."""
    import json
    import shutil
    import subprocess

    from tgen_fixtures import tgen_binary_or_skip

    t = tag()
    argv = [str(tgen_binary_or_skip()), "--no-huge", "-m", "256", "--no-pci", "--file-prefix",
            f"nfvperf-{t}", "--lcores", "0@0,1@0", "--log-level", "lib.eal:warning",
            "--vdev", "net_ring0", "--vdev", "net_ring1", "--",
            "--oneshot", "--stream", "port=0,rx_port=0,size=128,flows=8,pps=50000",
            "--stream", "port=1,rx_port=1,imix=64:7/570:4/1518:1,pps=20000",
            "--frames", "12000", "--drain", "0.2"]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    finally:
        shutil.rmtree(f"/var/run/dpdk/nfvperf-{t}", ignore_errors=True)
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads(p.stdout)
    assert res["state"] == "done" and len(res["streams"]) == 2
    for s in res["streams"]:
        assert s["sent"] == s["received"] == 12000 and s["lost"] == 0 and s["misrouted"] == 0, s
    assert res["streams"][0]["latency"]["count"] == 12000
    # the slower stream (12000 frames at 20 kpps) sets the intended duration
    assert res["duration_s"] == pytest.approx(0.6), res["duration_s"]
    # only the two ports that exist are looked at (was: "Invalid port_id=2" ... "31")
    assert "Invalid port_id" not in p.stderr, p.stderr[-2000:]


@pytest.mark.parametrize("kw", [
    dict(imix=[(64, 7), (570, 4), (1518, 1)]),
    dict(frame_size_b=256, vlan=42),
    dict(frame_size_b=128, ip_version=6),
    dict(frame_size_b=128, vxlan=True),
])
def test_profile_variants_end_to_end(ring_tgen, kw):
    """Every profile field maps onto the stream and the frames come back as test frames."""
    m = TgenMeasurer(ring_tgen, [(0, 0), (1, 1)])
    m.set_profile(TrafficProfile(bidirectional=False, learning=False, drain_s=0.2,
                                 flows_per_port=10, **kw))
    streams = ring_tgen.rpc("stream.list")
    assert len(streams) == 2
    for st in streams:
        if "imix" in kw:
            assert [list(x) for x in st["imix"]] == [[64, 7], [570, 4], [1518, 1]]
        if kw.get("vlan"):
            assert st["vlan"] == 42
        if kw.get("ip_version") == 6:
            assert st["ipv6"] is True
        if kw.get("vxlan"):
            assert st["vxlan"] and st["wire_size_b"] == 128 + 50
    r = m.measure_frames(6000, 30000)
    assert r.sent == r.received == 12000, r.to_dict()
    assert r.valid and r.non_test_rx == 0, r.invalid_reasons
    m.close()
