"""tgen counts a stream's frames only on the stream's rx_port: frames with its signature that
arrive on another port are `misrouted` (per stream, per port and in total), not received, so a
DUT that sends frames out of the wrong port shows loss instead of looking perfect.

net_ring ports each loop back to themselves, so a 0 -> 1 stream comes back on port 0 (a
misforwarding DUT); a veth pair in a network namespace made here is the correct cross-connect
(port 0 -> port 1).  Needs root and tgen/build/tgen; skipped otherwise.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from nfvperf.trial import TrafficProfile
from nfvperf.tg.tgen import PortSpec, TgenMeasurer

sys.path.insert(0, str(Path(__file__).resolve().parent))   # tgen_fixtures, whatever the import mode
from tgen_fixtures import netns_veth_pair, start_tgen, tag, tgen_binary_or_skip, wait_result

pytestmark = pytest.mark.root


def _port(res: dict, pid: int) -> dict:
    return next(p for p in res["ports"] if p["id"] == pid)


# one RX lcore for both ports, or one per port (the stream's rx_port decides, not the lcore)
@pytest.mark.parametrize("lcores", ["0@0,1@0", "0@0,1@0,2@0"])
def test_ring_loopback_frames_are_misrouted_not_received(tmp_path, lcores):
    proc = start_tgen([PortSpec("net_ring0"), PortSpec("net_ring1")], tmp_path, tag(), lcores=lcores)
    try:
        bad = proc.rpc("stream.add", port=0, rx_port=1, size_b=64, rate={"pps": 50000})["stream_id"]
        good = proc.rpc("stream.add", port=1, rx_port=1, size_b=64, rate={"pps": 50000})["stream_id"]
        n = 10000
        proc.rpc("trial.start", streams=[bad, good], frames=n, drain_s=0.2)
        res = wait_result(proc)
        s = {x["id"]: x for x in res["streams"]}
        b, g = s[bad], s[good]
        # the 0 -> 1 stream's frames all came back on port 0: lost, not received
        assert b["sent"] == n, b
        assert b["received"] == 0 and b["misrouted"] == n and b["lost"] == n, b
        assert b["latency"]["count"] == 0 and b["rx_lcores"] == 0, b
        assert b["duplicates"] == 0 and b["reordered"] == 0
        # the 1 -> 1 stream is exact and has nothing misrouted
        assert g["sent"] == g["received"] == n and g["lost"] == 0 and g["misrouted"] == 0, g
        assert g["latency"]["count"] == n
        assert _port(res, 0)["misrouted"] == n and _port(res, 1)["misrouted"] == 0
        assert _port(res, 0)["stats"]["ipackets"] == n
        assert res["misrouted"] == n and res["received"] == n and res["sent"] == 2 * n
        assert res["foreign_test_rx"] == 0 and res["non_test_rx"] == 0
        # frames, not seconds: duration_s is the intended n / rate
        assert res["duration_s"] == pytest.approx(n / 50000)
        # stream.stats says the same
        st = proc.rpc("stream.stats", id=bad)
        assert st["received"] == 0 and st["misrouted"] == n
    finally:
        assert proc.stop() == 0, proc.log_tail()


def test_measurer_misrouted_is_loss_and_noted(tmp_path):
    proc = start_tgen([PortSpec("net_ring0"), PortSpec("net_ring1")], tmp_path, tag())
    try:
        m = TgenMeasurer(proc, [(0, 1)])
        m.set_profile(TrafficProfile(bidirectional=False, learning=False, drain_s=0.2))
        r = m.measure_frames(5000, 20000)
        assert r.sent == 5000 and r.received == 0 and r.loss_ratio == 1.0, r.to_dict()
        (s,) = r.streams
        assert s.misrouted == 5000 and s.lost == 5000
        assert r.extra["misrouted"] == 5000
        assert any("5000 frames misrouted" in x for x in r.extra["notes"]), r.extra
        # misrouting is loss, not an untrustworthy trial
        assert not any("another port" in x for x in r.invalid_reasons), r.invalid_reasons
        m.close()
    finally:
        proc.stop()


def test_veth_pair_in_netns_correct_and_misrouted(tmp_path):
    """port 0 -> port 1 over a veth pair is exact with nothing misrouted; a 0 -> 0 stream in the
    same trial arrives on port 1: misrouted."""
    tgen_binary_or_skip()
    t = tag()
    with netns_veth_pair(t) as (ns, a, b):
        proc = start_tgen([PortSpec(f"net_af_packet0,iface={a}"), PortSpec(f"net_af_packet1,iface={b}")],
                          tmp_path, t, netns=ns)
        try:
            ok = proc.rpc("stream.add", port=0, rx_port=1, size_b=128, rate={"pps": 10000})["stream_id"]
            bad = proc.rpc("stream.add", port=0, rx_port=0, size_b=128, rate={"pps": 5000})["stream_id"]
            proc.rpc("trial.start", streams=[ok, bad], frames=4000, drain_s=0.3)
            res = wait_result(proc)
            s = {x["id"]: x for x in res["streams"]}
            assert s[ok]["sent"] == s[ok]["received"] == 4000, s[ok]
            assert s[ok]["misrouted"] == 0 and s[ok]["lost"] == 0
            assert s[bad]["sent"] == 4000 and s[bad]["received"] == 0, s[bad]
            assert s[bad]["misrouted"] == 4000 and s[bad]["lost"] == 4000
            assert _port(res, 1)["misrouted"] == 4000 and _port(res, 0)["misrouted"] == 0
            assert res["duration_s"] == pytest.approx(4000 / 5000)   # the slower stream
        finally:
            proc.stop()
