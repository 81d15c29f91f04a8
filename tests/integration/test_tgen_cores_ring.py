"""A direction over 2 generator cores on real tgen (net_ring loopback, 2 TX and 2 RX queues per
port, 2 worker lcores): every frame accounted, the sub-streams on both lcores, the merged result
named by its cores; tgen's own percentiles are what the Python merge computes from its histogram.

Needs root and tgen/build/tgen; skipped otherwise.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from nfvperf.tg.tgen import TgenMeasurer
from nfvperf.tg.tgen_split import tgen_percentile
from nfvperf.trial import TrafficProfile

sys.path.insert(0, str(Path(__file__).resolve().parent))   # tgen_fixtures, whatever the import mode
from tgen_fixtures import ring_tgen_process, until_generator_on_time

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def mq_tgen(tmp_path_factory):
    yield from ring_tgen_process(tmp_path_factory.mktemp("tgen-cores"), queues=2, lcores="0@0,1@0,2@1")


def test_tgen_cores_ports_list_names_queue_lcores(mq_tgen):
    ports = mq_tgen.rpc("ports.list")
    assert [(p["txq"], p["rxq"], p["tx_lcores"], p["rx_lcores"]) for p in ports] == \
        [(2, 2, [1, 2], [1, 2])] * 2
    # NUMA and NIC features: the port's socket and the pool's, the TX offloads offered, none used
    assert all(p["socket"] in (-1, 0) and p["pool_socket"] == 0 for p in ports), ports
    assert all(p["tx_offloads_offered"] == ["MULTI_SEGS"] and p["tx_offloads_used"] == [] for p in ports), ports


def test_tgen_cores_two_sub_streams_every_frame_accounted(mq_tgen):
    m = TgenMeasurer(mq_tgen, [(0, 0), (1, 1)], cores=2)
    m.set_profile(TrafficProfile(frame_size_b=64, flows_per_port=256, learning=False, drain_s=0.2,
                                 bidirectional=False))
    assert m.split_n == 2 and len(m.stream_ids) == 4
    adds = {s["id"]: s for s in mq_tgen.rpc("stream.list")}
    # one sub-stream per TX queue of the port, disjoint flow slices of 128 flows
    assert sorted((adds[i]["port"], adds[i]["txq"], adds[i]["flows"]) for i in m.stream_ids) == \
        [(0, 0, 128), (0, 1, 128), (1, 0, 128), (1, 1, 128)]
    r = until_generator_on_time(lambda: m.measure(1.0, 100_000))
    assert r.valid, r.invalid_reasons
    assert [s.name for s in r.streams] == ["p0->p0", "p1->p1"]       # one result per direction
    for s in r.streams:
        assert s.sent == s.received and s.lost == 0 and s.duplicates == 0 and s.reordered == 0, s
        assert s.sent == pytest.approx(100_000, abs=2)
        assert s.latency is not None and s.latency.count == s.received
        assert sum(c for _, c in s.latency.histogram) == s.received
    assert r.expected == r.sent == r.received
    cores = r.extra["tgen_cores"]
    assert cores["sub_streams"] == 2 and cores["notes"] == []
    d = cores["directions"]["p0->p0"]
    assert d["tx_lcores"] == [1, 2] and d["rx_lcores"] == [1, 2] and d["tx_cpus"] == [0, 1], d
    # tgen's own percentiles of each sub-stream = tgen's rule applied to its histogram (the rule
    # the merge uses), so a merged direction reports what one stream would
    raw = m.last_raw
    assert raw is not None
    for st in raw["streams"]:
        lat = st["latency"]
        hist = [(float(b), int(c)) for b, c in lat["histogram"]]
        for k, v in lat["percentiles_ns"].items():
            assert tgen_percentile(hist, float(k), lat["count"], lat["min_ns"], lat["max_ns"]) == v, (k, lat)
    assert "tgen_cores" in m.environment()


def test_tgen_cores_one_flow_uses_one_core(mq_tgen):
    m = TgenMeasurer(mq_tgen, [(0, 0)], cores=2)
    m.set_profile(TrafficProfile(frame_size_b=64, flows_per_port=1, learning=False, drain_s=0.2,
                                 bidirectional=False))
    assert m.split_n == 1 and len(m.stream_ids) == 1
    r = until_generator_on_time(lambda: m.measure(0.5, 50_000))
    assert r.valid and r.streams[0].name == "p0->p0" and r.streams[0].lost == 0
    assert any("1 flow(s) per direction cannot be split over 2 generator cores" in n
               for n in r.extra["notes"]), r.extra["notes"]


def test_tgen_cores_frame_count_and_burst_split(mq_tgen):
    m = TgenMeasurer(mq_tgen, [(0, 0)], cores=2)
    m.set_profile(TrafficProfile(frame_size_b=64, flows_per_port=100, learning=False, drain_s=0.2,
                                 bidirectional=False))
    r = m.measure_frames(10_001, 100_000)
    assert r.streams[0].sent == 10_002 == r.expected and r.streams[0].lost == 0   # ceil(10001/2) x 2
    b = m.measure_burst(5_000, 200_000, drain_s=0.2)
    assert b.streams[0].sent == 5_000 and b.streams[0].received == 5_000


def test_tgen_cores_selftest_is_measured_once_and_cached(tmp_path):
    from nfvperf.plan import CORE_RATE_FILE as CACHE_FILE, generator_core_rate as core_rate
    first = core_rate(tmp_path)
    assert first is not None and first.get("error") is None, first
    assert first["cached"] is False and first["fps"] > 1e5, first
    again = core_rate(tmp_path)
    assert again is not None and again["cached"] is True and again["fps"] == first["fps"]
    assert (tmp_path / CACHE_FILE).exists()
