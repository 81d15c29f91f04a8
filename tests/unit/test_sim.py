"""The simulated DUT: TV6 loss shape, bursts, reset, recovery, latency, streams, determinism."""
import time

import pytest

from nfvperf.trial import Segment, TrafficProfile
from nfvperf.tg.sim import SimMeasurer, summarize_latency

from _core_helpers import LINE_64, sim


@pytest.mark.parametrize("pct,loss", [(100, 46.24), (90, 40.2667), (80, 32.80), (70, 23.20),
                                      (60, 10.40), (50, 0.0), (40, 0.0)])
def test_tv6_threshold_loss_shape(pct, loss):
    tr = sim(8e6).measure(60.0, LINE_64 * pct / 100)
    assert round((tr.sent - tr.received) * 100 / tr.sent, 4) == pytest.approx(loss, abs=1e-4)


def test_threshold_loses_iff_above_capacity():
    m = sim(8e6)
    assert m.measure(60, 8e6).lost == 0
    assert m.measure(60, 8e6 + 0.01).lost >= 1


def test_bidirectional_streams_and_aggregate():
    m = sim(8e6, bidirectional=True, latency=True)
    tr = m.measure(10.0, 9e6)
    assert [s.name for s in tr.streams] == ["p0->p1", "p1->p0"]
    assert tr.sent == 2 * 90_000_000 and tr.loss_ratio == pytest.approx(1 / 9, rel=1e-6)
    assert tr.forwarding_rate_pps == pytest.approx(8e6, rel=1e-6)   # per interface
    assert tr.latency.count == 2 * m.latency_samples


def test_capacity_per_size_dict_and_line_cap():
    m = SimMeasurer({64: 8e6, 128: 6e6, 1518: 812_743.82})
    m.set_profile(TrafficProfile(frame_size_b=96))
    assert m.capacity_pps() == pytest.approx(7e6)
    m.set_profile(TrafficProfile(frame_size_b=1518))
    assert m.capacity_pps() == pytest.approx(812_743.82, rel=1e-6)
    m2 = SimMeasurer(lambda s: 1e9)
    m2.set_profile(TrafficProfile(frame_size_b=64))
    assert m2.capacity_pps() == pytest.approx(LINE_64)


def test_poisson_loss_rises_with_load_and_is_reproducible():
    def lost(load, seed):
        return sum(sim(8e6, loss_model="poisson", seed=seed).measure(1.0, load).lost for _ in range(1))
    lows = [sim(8e6, loss_model="poisson", seed=s).measure(1.0, 5e6).lost for s in range(30)]
    highs = [sim(8e6, loss_model="poisson", seed=s).measure(1.0, 7.8e6).lost for s in range(30)]
    assert sum(lows) < sum(highs)
    assert lost(7.5e6, 3) == lost(7.5e6, 3)


def test_spikes():
    m = sim(8e6, loss_model="spikes", spike_rate_per_s=1.0, spike_frames=500, seed=1)
    losses = [m.measure(1.0, 1e6).lost for _ in range(50)]
    assert set(losses) <= {0, 500} and 0 < losses.count(500) < 50


def test_burst_buffer_model():
    m = sim(8e6, buffer_frames=1000)
    # lossless iff burst × (1 − C/R) ≤ B
    n_max = int(1000 / (1 - 8e6 / LINE_64))
    assert m.measure_burst(n_max, LINE_64).lost == 0
    assert m.measure_burst(n_max + 2, LINE_64).lost > 0
    assert m.measure_burst(10**6, 7e6).lost == 0     # below capacity never loses


def test_reset_outage_tv10():
    m = sim(20e6, outage_s=0.2)
    hooked = []
    m.reset_hook = lambda: hooked.append(1)
    tr = m.measure_reset(60.0, 14_880_952, 10.0)
    assert hooked == [1]
    assert tr.lost == 2_976_190
    assert tr.lost / 14_880_952 * 1e3 == pytest.approx(200.0, abs=1e-3)
    assert tr.streams[0].max_rx_gap_ns / 1e6 == pytest.approx(200.0, abs=0.001)


def test_segments_recovery():
    m = sim(8e6, buffer_frames=4096, recovery_s=0.25)
    tr = m.measure_segments([Segment(60.0, 8.8e6), Segment(60.0, 4e6)])
    s = tr.streams[0]
    assert s.first_loss_ns / 1e9 == pytest.approx(4096 / 0.8e6)
    assert s.last_loss_ns / 1e9 == pytest.approx(60.25)
    m2 = sim(8e6, buffer_frames=4096)
    tr2 = m2.measure_segments([Segment(60.0, 7e6), Segment(60.0, 4e6)])
    assert tr2.lost == 0 and tr2.streams[0].last_loss_ns is None


def test_latency_grows_near_capacity_and_summaries():
    m = sim(8e6, latency=True, seed=2)
    lo = m.measure(10.0, 1e6).latency
    hi = m.measure(10.0, 7.9e6).latency
    assert hi.avg_ns > lo.avg_ns and hi.percentiles_ns["99"] > lo.percentiles_ns["99"]
    assert lo.min_ns >= m.base_latency_ns and set(lo.percentiles_ns) == {"50", "90", "99", "99.9"}
    assert sum(c for _, c in lo.histogram) == lo.count
    assert lo.pdv_ns["min"] == 0.0 and lo.ipdv_ns["min"] < 0 < lo.ipdv_ns["max"]


def test_summarize_latency_tv10():
    s = summarize_latency([10_000, 12_000, 11_000, 15_000, 10_000])
    assert s.pdv_ns["max"] == 5_000 and s.pdv_ns["avg"] == pytest.approx(1_600)
    assert s.ipdv_ns["min"] == -5_000 and s.ipdv_ns["max"] == 4_000
    assert s.min_ns == 10_000 and s.max_ns == 15_000


def test_addresses_and_tcp():
    m = sim(8e6, mac_table_size=100, learning_rate_pps=1000)
    assert m.measure_addresses(100, 500, 1.0, 1e5).extra["flooded"] == 0
    assert m.measure_addresses(101, 500, 1.0, 1e5).extra["flooded"] > 0
    assert m.measure_addresses(100, 2000, 1.0, 1e5).extra["flooded"] > 0
    assert m.measure_tcp(streams=4, duration_s=10).extra["throughput_bps"] > 0


def test_no_sleep_and_time_accounting():
    m = sim(8e6)
    t0 = time.monotonic()
    for _ in range(20):
        m.measure(3600.0, 7e6)
    assert time.monotonic() - t0 < 2.0
    assert m.total_trial_s == 20 * 3600.0 and m.wall_s == 20 * 3604.0


def test_bad_loss_model():
    with pytest.raises(ValueError):
        SimMeasurer(1e6, loss_model="nope")


def test_no_queueing_at_line_rate_when_capacity_is_higher():
    m = sim(30e6, latency=True)        # the DUT is faster than the 10G line
    lat = m.measure(1.0, LINE_64).latency
    assert lat.avg_ns < m.base_latency_ns + m.jitter_ns + 10 * m.queue_scale_ns
    assert m.capacity_pps() == pytest.approx(LINE_64) and m.raw_capacity_pps() == 30e6


def test_time_scale_sleeps_scaled():
    m = sim(8e6, time_scale=0.001)
    t0 = time.monotonic()
    m.measure(50.0, 1e6)
    assert time.monotonic() - t0 >= 0.045
    with pytest.raises(ValueError):
        SimMeasurer(1e6, time_scale=-1)
