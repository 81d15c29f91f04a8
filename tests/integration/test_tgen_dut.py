"""tgen against a DUT that drops: dpdk-testpmd forwarding (io mode) between two veth pairs over
net_af_packet, driven above what it can forward.  tgen's loss must agree with testpmd's own
counters and the kernel's:

    tgen --vA0==vA1--> testpmd p0 -> p1 --vB1==vB0--> tgen

    tgen sent      == kernel rx on vA1
    tgen received  == testpmd p1 TX packets (what the DUT forwarded)
    tgen lost      == (kernel rx vA1 - testpmd p0 RX)   [dropped at the DUT's socket ring]
                      + (testpmd p0 RX - testpmd p1 TX)  [dropped inside testpmd]

Needs root, tgen/build/tgen and dpdk-testpmd; skipped otherwise.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from nfvperf.trial import DutFailure, TrafficProfile
from nfvperf.tg.tgen import PortSpec, TgenMeasurer

sys.path.insert(0, str(Path(__file__).resolve().parent))   # tgen_fixtures, whatever the import mode
from tgen_fixtures import (TestpmdPeer, link_stats, start_tgen, tag, need_testpmd,
                           tgen_binary_or_skip, veth_pair, wait_link_up)

pytestmark = pytest.mark.root


@pytest.fixture
def dut_setup(tmp_path: Path):
    tgen_binary_or_skip()
    need_testpmd()
    t = tag()
    a0, a1, b0, b1 = f"{t}a0", f"{t}a1", f"{t}b0", f"{t}b1"
    with veth_pair(a0, a1), veth_pair(b0, b1):
        for i in (a0, a1, b0, b1):
            wait_link_up(i)
        # The DUT polls on the generator's CPU and has a small socket ring on its input: while
        # the scheduler runs tgen, the ring overflows, so it drops even on an idle machine.
        dut = TestpmdPeer([f"net_af_packet0,iface={a1},framecnt=256",
                           f"net_af_packet1,iface={b1}"], t, tmp_path, forward_mode="io",
                          lcores="0@0,1@0", app_args=("--rxd=128", "--txd=512", "--burst=32"))
        dut.start()
        try:
            dut.cmd("start")
            proc = start_tgen([PortSpec(f"net_af_packet0,iface={a0}"),
                               PortSpec(f"net_af_packet1,iface={b0}")], tmp_path, t)
            try:
                yield proc, dut, (a0, a1, b0, b1)
            finally:
                proc.stop()
        finally:
            dut.stop()


def test_loss_agrees_with_testpmd(dut_setup):
    proc, dut, (a0, a1, b0, b1) = dut_setup

    def dut_counters():
        return {"ports": dut.port_stats(), "kernel_rx_a1": link_stats(a1)["rx_packets"]}

    dut.clear()
    m = TgenMeasurer(proc, [(0, 1)], dut_counters=dut_counters, dut_alive=None)
    m.set_profile(TrafficProfile(frame_size_b=64, bidirectional=False, learning=False,
                                 drain_s=0.5, link_speed_bps=10e9))
    # more than a forwarder sharing the generator's CPU can carry
    r = m.measure(1.0, 500_000)
    ports = r.dut_counters["ports"]
    kernel_rx = r.dut_counters["kernel_rx_a1"]      # the trial's delta (measurer snapshots)
    dut_rx, dut_tx = ports[0]["rx_packets"], ports[1]["tx_packets"]
    assert r.sent > 0
    assert kernel_rx == r.sent, (kernel_rx, r.sent)
    assert r.received == dut_tx, (r.received, dut_tx, ports)
    tgen_lost = r.streams[0].lost
    dut_lost = (kernel_rx - dut_rx) + (dut_rx - dut_tx)
    assert tgen_lost == dut_lost, (tgen_lost, dut_lost, kernel_rx, ports)
    assert tgen_lost > 0, f"the DUT did not drop (sent {r.sent}) - the test proves nothing"
    assert r.streams[0].first_loss_ns is not None
    print(f"tgen sent {r.sent} received {r.received} lost {tgen_lost}; kernel rx {kernel_rx}, "
          f"testpmd rx {dut_rx} tx {dut_tx}")


def test_dut_death_raises_within_seconds(dut_setup):
    proc, dut, _ = dut_setup

    def dut_alive():
        if dut.proc is None or dut.proc.poll() is not None:
            raise DutFailure(f"testpmd exited: {dut.tail(300)}")

    m = TgenMeasurer(proc, [(0, 1)], dut_alive=dut_alive)
    m.set_profile(TrafficProfile(bidirectional=False, learning=False, drain_s=0.2))
    import threading
    threading.Timer(0.8, dut.proc.kill).start()
    t0 = time.monotonic()
    with pytest.raises(DutFailure):
        m.measure(20.0, 10000)
    assert time.monotonic() - t0 < 5.0
    # tgen stopped the trial and is ready for the next one
    assert proc.rpc("trial.status")["state"] in ("done", "idle")
