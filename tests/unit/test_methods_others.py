"""Latency, back-to-back (TV9), system recovery, reset (TV10), RFC 2889, TCP."""
import pydantic
import pytest

from nfvperf import units
from nfvperf.methods import (REGISTRY, AddressCachingParams, AddressLearningParams,
                             BackToBackParams, ForwardingParams, LatencyParams, ResetParams,
                             SystemRecoveryParams, TcpParams)

from _core_helpers import LINE_64, Recorder, sim


def _run(name, m, params, rec=None):
    return REGISTRY[name].run(m, m.profile, params, rec)


# --- latency -----------------------------------------------------------------------------

def test_latency_fractions_and_repetitions():
    m = sim(8e6, latency=True, seed=4)
    rec = Recorder()
    r = _run("latency", m, LatencyParams(throughput_pps=8e6, fractions=[0, 0.1, 0.5, 0.9, 1.0],
                                          repetitions=3, trial_duration_s=1.0), rec)
    assert [p.fraction for p in r.points] == [0, 0.1, 0.5, 0.9, 1.0]
    assert r.points[0].load_pps == 9000.0 and r.points[2].load_pps == 4e6
    assert len(rec.trials) == 15
    avgs = [p.avg_ns for p in r.points]
    assert avgs[-1] > avgs[0]                   # queueing grows near capacity
    p = r.points[-1]
    assert p.min_of_min_ns <= p.min_ns <= p.avg_ns <= p.max_ns <= p.max_of_max_ns
    assert set(p.percentiles_ns) == {"50", "90", "99", "99.9"} and p.histogram
    assert "max" in p.pdv_ns and "min" in p.ipdv_ns and r.definition.startswith("RFC 1242")


def test_latency_measures_throughput_when_not_given():
    m = sim(8e6, latency=True)
    r = _run("latency", m, LatencyParams(repetitions=1, trial_duration_s=1.0,
                                          throughput={"trial_duration_s": 1.0}))
    assert round(r.throughput_pps, 2) == 7_992_699.03 and r.throughput_result["trials"] == 11


def test_latency_params():
    with pytest.raises(pydantic.ValidationError):
        LatencyParams(fractions=[1.5])
    with pytest.raises(pydantic.ValidationError):
        LatencyParams(repetitions=0)
    assert LatencyParams().trial_duration_s == 120 and LatencyParams().repetitions == 20


# --- back-to-back (RFC 9004) -------------------------------------------------------------

def test_b2b_buffer_times_tv9_shape():
    B = 20_000
    m = sim(8e6, buffer_frames=B)
    r = _run("back_to_back", m, BackToBackParams(throughput_pps=8e6, repetitions=5))
    n = r.mean_frames
    assert n == int(B / (1 - 8e6 / LINE_64))
    assert r.repetitions == 5 and r.min_frames == r.max_frames == n and r.stddev_frames == 0
    assert r.implied_buffer_time_s == pytest.approx(n / LINE_64)
    assert r.corrected_buffer_time_s == pytest.approx(units.corrected_buffer_time_s(n, LINE_64, 8e6))
    # the corrected time is the modelled buffer drained at line rate: B / max fps
    assert r.corrected_buffer_time_s == pytest.approx(B / LINE_64, rel=1e-4)


def test_b2b_tv9_values():
    mx = LINE_64
    assert round(units.corrected_buffer_time_s(100_000, mx, 8e6) * 1e3, 3) == 3.107
    assert units.corrected_buffer_time_s(8, 1000, 750) == pytest.approx(0.002)


def test_b2b_skips_line_rate_sizes():
    m = sim(20e6)
    r = _run("back_to_back", m, BackToBackParams(throughput={"trial_duration_s": 1.0}))
    assert r.skipped and "theoretical maximum" in r.skip_reason and r.trials == 0


def test_b2b_cap_and_params():
    m = sim(8e6, buffer_frames=10**9)
    r = _run("back_to_back", m, BackToBackParams(throughput_pps=8e6, repetitions=1, max_burst_s=0.5))
    assert r.capped and r.max_frames == int(0.5 * LINE_64)
    with pytest.raises(pydantic.ValidationError):
        BackToBackParams(max_burst_s=31)
    with pytest.raises(pydantic.ValidationError):
        BackToBackParams(drain_s=1.0)
    BackToBackParams(max_burst_s=30)


# --- system recovery ---------------------------------------------------------------------

@pytest.mark.parametrize("variant,over,low", [("rfc2544", 1.10, 0.50), ("opnfv", 1.50, 0.75)])
def test_system_recovery_variants(variant, over, low):
    m = sim(8e6, buffer_frames=4096, recovery_s=0.3)
    r = _run("system_recovery", m, SystemRecoveryParams(throughput_pps=8e6, variant=variant))
    assert r.variant == variant
    assert r.overload_pps == pytest.approx(min(8e6 * over, LINE_64))
    assert r.recovery_load_pps == pytest.approx(8e6 * low)
    assert r.recovery_time_s == pytest.approx(0.3)
    assert r.a_s == 60.0


def test_system_recovery_capped_at_line_rate():
    m = sim(12e6, recovery_s=0.1)
    r = _run("system_recovery", m, SystemRecoveryParams(throughput_pps=12e6, variant="opnfv"))
    assert r.overload_capped_at_line_rate and r.overload_pps == pytest.approx(LINE_64)


# --- reset (RFC 6201) ----------------------------------------------------------------------

def test_reset_tv10_200ms():
    m = sim(20e6, outage_s=0.2)
    calls = []
    m.reset_hook = lambda: calls.append("reset")
    r = _run("reset", m, ResetParams(throughput_pps=14_880_952, reset_type="hardware"))
    assert calls == ["reset"] and r.reset_hook_set
    assert r.trials[0]["frames_lost"] == 2_976_190
    assert r.reset_time_frame_loss_s * 1e3 == pytest.approx(200.0, abs=1e-3)
    assert r.reset_time_timestamp_s * 1e3 == pytest.approx(200.0, abs=1e-3)
    from nfvperf.methods.reset import reset_time_frame_loss_s
    assert round(reset_time_frame_loss_s(2_976_190, 14_880_952) * 1e3, 3) == 200.0


def test_reset_params():
    with pytest.raises(pydantic.ValidationError):
        ResetParams(trial_duration_s=5, reset_at_s=10)
    with pytest.raises(pydantic.ValidationError):
        ResetParams(methods=["guess"])


# --- RFC 2889 ------------------------------------------------------------------------------

def test_forwarding_rate_steps_from_throughput():
    m = sim(8e6)
    r = _run("rfc2889_forwarding", m, ForwardingParams(throughput_pps=7e6, trial_duration_s=30))
    assert r.points[0]["offered_pps"] == 7e6 and r.points[-1]["offered_pps"] == pytest.approx(LINE_64)
    assert r.max_forwarding_rate_pps == pytest.approx(8e6, rel=1e-6)
    assert ForwardingParams().trial_duration_s == 30


def test_address_caching_and_learning():
    m = sim(8e6, mac_table_size=3000, learning_rate_pps=20000)
    r = _run("rfc2889_address_caching", m, AddressCachingParams(max_addresses=65536,
                                                                learning_rate_pps=1000))
    assert r.address_capacity == 3000
    r2 = _run("rfc2889_address_learning", m, AddressLearningParams(address_count=2000))
    assert 20000 * 0.99 <= r2.learning_rate_pps <= 20000
    with pytest.raises(pydantic.ValidationError, match="aging"):
        AddressCachingParams(max_addresses=1_000_000, learning_rate_pps=100)


# --- TCP -----------------------------------------------------------------------------------

def test_tcp_sim_and_params():
    m = sim()
    r = _run("tcp", m, TcpParams(streams=4, processes=2, duration_s=10, repetitions=2))
    assert len(r.throughput_bps) == 2 and r.mean_throughput_bps > 0
    with pytest.raises(pydantic.ValidationError):
        TcpParams(streams=0)
    with pytest.raises(ValueError):
        _run("tcp", m, TcpParams(reverse=True, bidirectional=True))
