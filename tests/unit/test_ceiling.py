"""The harness ceiling without a harness: cache keying and expiry, harness-bound labelling, the
report's ceiling columns and plot line, latency net of the generator's self-latency, and the
runner storing (or skipping, or surviving the failure of) a ceiling."""
from __future__ import annotations

import json

import pytest

from nfvperf.suite_load import validate_suite
from nfvperf.report import ceiling as hc
from nfvperf.report.html import render_html
from nfvperf.report.plots import throughput_figure
from nfvperf.report.tables import build
from nfvperf.runner import CeilingOptions, execute
from nfvperf.store import Store
from nfvperf.store.ceiling import CeilingCache, ceiling_key, key_fields
from nfvperf.trial import TrafficProfile

SUITE = {
    "name": "ceiling-test",
    "topology": {"kind": "p2p", "dut": "testpmd"},
    "traffic": {"frame_sizes": [64, 1518], "link_speed": "10G"},
    "profile": "quick",
    "sim": {"capacity_pps": 1_000_000, "seed": 3, "base_latency_ns": 20_000, "jitter_ns": 0},
    "tests": [
        {"method": "throughput", "resolution_pct": 0.5},
        {"method": "latency", "fractions": [1.0], "repetitions": 1, "frame_sizes": [64]},
    ],
}

# the ceiling the run is given: at 64 B just above the sim's 1 Mfps capacity (harness-bound),
# at 1518 B far above it (DUT-bound)
CEILING = {"port_kind": "af_packet", "tgen_lcores": "0@0,1@1", "mtu": 1500, "cached": False,
           "measured_at": "2025-01-01T00:00:00Z",
           "per_size": {"64": {"fps": 1_050_000.0, "self_latency_ns": {"min": 4000.0, "p50": 8000.0,
                                                                       "p99": 15000.0}},
                        "1518": {"fps": 800_000.0 * 10, "self_latency_ns": {"min": 5000.0, "p50": 9000.0,
                                                                            "p99": 20000.0}}}}


# ------------------------------------------------------------------------------ cache

def test_cache_key_names_every_field_and_differs_per_field() -> None:
    base = dict(hostname="h", port_kind="af_packet", link_speed_bps=10e9, mtu=1500,
                tgen_lcores="0@0,1@1", frame_size_b=64)
    k = ceiling_key(**base)
    assert key_fields(k) == {"hostname": "h", "port_kind": "af_packet", "link_speed_bps": "10000000000",
                             "mtu": "1500", "tgen_lcores": "0@0,1@1", "frame_size_b": "64"}
    for field, other in (("hostname", "h2"), ("port_kind", "vhost"), ("link_speed_bps", 25e9),
                         ("mtu", 9000), ("tgen_lcores", "0@0,1@0"), ("frame_size_b", 1518)):
        assert ceiling_key(**dict(base, **{field: other})) != k, field


def test_cache_hit_expiry_refresh_and_corrupt_file(tmp_path) -> None:
    now = [1_000_000.0]
    path = tmp_path / "c.json"
    cache = CeilingCache(path, max_age_s=3600, clock=lambda: now[0])
    key = ceiling_key("h", "af_packet", 10e9, 1500, "0@0,1@1", 64)
    assert cache.get(key) is None
    cache.put(key, {"fps": 123.0, "self_latency_ns": {"min": 1, "p50": 2, "p99": 3}})
    hit = cache.get(key)
    assert hit["fps"] == 123.0 and hit["key"]["port_kind"] == "af_packet" and hit["measured_at"]
    assert cache.get(ceiling_key("h", "af_xdp", 10e9, 1500, "0@0,1@1", 64)) is None
    now[0] += 3599
    assert cache.get(key) is not None                    # still fresh
    now[0] += 2
    assert cache.get(key) is None                        # older than max age
    now[0] -= 10
    assert CeilingCache(path, max_age_s=3600, refresh=True, clock=lambda: now[0]).get(key) is None
    # a second process sees the same file
    assert CeilingCache(path, max_age_s=3600, clock=lambda: now[0]).get(key)["fps"] == 123.0
    path.write_text("{not json")
    assert cache.get(key) is None                        # a broken cache is an empty one
    cache.put(key, {"fps": 5.0})
    assert json.loads(path.read_text())["entries"][key]["fps"] == 5.0


def test_harness_ceiling_uses_the_cache_and_never_raises(tmp_path, monkeypatch) -> None:
    from nfvperf.host.run import RunContext
    from nfvperf.topo import TopologySpec
    from nfvperf.topo import ceiling as tc
    spec = TopologySpec(kind="p2p", dut="testpmd", tgen_lcores="0@0,1@1")
    profiles = {64: TrafficProfile(frame_size_b=64), 1518: TrafficProfile(frame_size_b=1518)}
    cache = CeilingCache(tmp_path / "c.json")
    measured: list[list[int]] = []

    def fake_measure(cspec, run, todo, **kw):
        assert cspec.kind == "p2p" and cspec.dut == "testpmd" and cspec.testpmd.forward_mode == "io"
        assert cspec.tgen_lcores == "0@0,1@1" and cspec.port_kind == spec.port_kind
        measured.append(sorted(todo))
        return {s: {"fps": 1000.0 * s, "self_latency_ns": {"min": 1.0, "p50": 2.0, "p99": 3.0}} for s in todo}

    monkeypatch.setattr(tc, "measure_sizes", fake_measure)
    run = RunContext(run_dir=tmp_path / "r")
    a = tc.harness_ceiling(spec, run, profiles, cache=cache, hostname="h")
    assert measured == [[64, 1518]] and a["cached"] is False and "error" not in a
    assert a["per_size"]["64"]["fps"] == 64000.0 and a["tgen_lcores"] == "0@0,1@1"
    b = tc.harness_ceiling(spec, run, profiles, cache=cache, hostname="h")
    assert measured == [[64, 1518]] and b["cached"] is True          # nothing measured again
    assert b["per_size"]["1518"]["fps"] == 1518000.0 and b["per_size"]["1518"]["cached"] is True

    def broken(*a, **kw):
        raise RuntimeError("testpmd would not start")

    monkeypatch.setattr(tc, "measure_sizes", broken)
    c = tc.harness_ceiling(spec, run, {256: TrafficProfile(frame_size_b=256)}, cache=cache, hostname="h")
    assert "testpmd would not start" in c["error"] and c["per_size"] == {}


def test_a_cached_entry_of_an_older_method_is_measured_again(tmp_path, monkeypatch) -> None:
    """Entries from before the forwarding-rate floor and the larger vhost rings: not reused."""
    from nfvperf.host.run import RunContext
    from nfvperf.topo import TopologySpec
    from nfvperf.topo import ceiling as tc
    spec = TopologySpec(kind="p2p", dut="testpmd", tgen_lcores="0@0,1@1")
    cache = CeilingCache(tmp_path / "c.json")
    key = ceiling_key("h", spec.port_kind, 10e9, 1500, "0@0,1@1", 64)
    monkeypatch.setattr(tc, "measure_sizes", lambda cspec, run, todo, **kw: {
        s: {"fps": 7.0} for s in todo})

    def ceiling() -> dict:
        return tc.harness_ceiling(spec, RunContext(run_dir=tmp_path / "r"), {64: TrafficProfile(frame_size_b=64)},
                                  cache=cache, hostname="h")
    # the method before this one, and an entry from before entries said their method
    for older in ({"method": tc.CEILING_METHOD - 1, "fps": 5.0}, {"fps": 5.0}):
        cache.put(key, older)
        out = ceiling()
        assert out["per_size"]["64"]["fps"] == 7.0 and out["cached"] is False, (older, out)
    # while an entry of this method is reused (what the older ones were refused)
    cache.put(key, {"method": tc.CEILING_METHOD, "fps": 5.0})
    out = ceiling()
    assert out["per_size"]["64"]["fps"] == 5.0 and out["cached"] is True, out


class _LossyForwarder:
    """A forwarder on shared cores: carries up to ``cap`` fps per interface, and above ``clean``
    loses a few frames in every trial (a descheduled poller), so a zero-loss search stops at
    ``clean`` although ``cap`` frames per second come back."""

    def __init__(self, cap: float, clean: float) -> None:
        self.cap, self.clean = cap, clean

    def set_profile(self, profile) -> None:
        self.profile = profile

    def measure(self, duration_s: float, load_pps: float):
        from nfvperf.trial import TrialResult
        exp = round(load_pps * duration_s) * 2
        got = round(min(load_pps, self.cap) * duration_s) * 2
        if load_pps > self.clean:
            got = min(got, exp - 3)
        return TrialResult(duration_s=duration_s, load_pps=load_pps, sent=exp, received=got, expected=exp)


def test_the_ceiling_is_what_the_path_carries_not_only_its_zero_loss_rate() -> None:
    from nfvperf.topo.ceiling import zero_loss_fps
    prof = TrafficProfile(frame_size_b=1518, link_speed_bps=10e9)       # 812,744 fps line rate
    res = zero_loss_fps(_LossyForwarder(cap=700_000, clean=300_000), prof)
    assert res["zero_loss_fps"] <= 300_000
    assert res["forwarding_fps"] == pytest.approx(700_000, rel=1e-3)
    assert res["fps"] == res["forwarding_fps"]
    clean = zero_loss_fps(_LossyForwarder(cap=1e9, clean=1e9), prof)    # carries line rate, no loss
    assert clean["fps"] == clean["zero_loss_fps"] == pytest.approx(prof.max_load_pps)


def test_a_recheck_finds_a_search_that_a_slow_stretch_covered_and_keeps_it_out_of_the_cache(
        tmp_path, monkeypatch) -> None:
    """The host ran the path at 40 % of its speed for the whole search: the recheck, a second
    later, carries the full rate; the higher one stands, the entry says ``unsteady`` and names
    both, it is not cached (the next run measures again) and the report's header says so.  A
    steady or slower recheck changes nothing (the search's best trial stands) and the entry is
    cached."""
    from nfvperf.host.run import RunContext
    from nfvperf.topo import TopologySpec
    from nfvperf.topo import ceiling as tc
    prof = TrafficProfile(frame_size_b=1518, link_speed_bps=10e9)
    fwd = _LossyForwarder(cap=280_000, clean=120_000)                  # the slow stretch
    res = tc.zero_loss_fps(fwd, prof)
    assert res["forwarding_fps"] == pytest.approx(280_000, rel=1e-3)
    fwd.cap, fwd.clean = 700_000, 300_000                              # over: full speed
    tc.recheck(fwd, prof, res)
    assert res["unsteady"] is True and res["forwarding_fps_search"] == pytest.approx(280_000, rel=1e-3)
    assert res["recheck_fps"] == pytest.approx(700_000, rel=1e-3) and res["fps"] == res["recheck_fps"]
    steady = tc.zero_loss_fps(fwd, prof)
    tc.recheck(fwd, prof, steady)
    assert steady["unsteady"] is False and steady["fps"] == pytest.approx(700_000, rel=1e-3)
    fwd.cap = 300_000                                  # slower recheck: the search's figure stands
    tc.recheck(fwd, prof, steady)
    assert steady["unsteady"] is False and steady["fps"] == pytest.approx(700_000, rel=1e-3)

    spec = TopologySpec(kind="p2p", dut="testpmd", tgen_lcores="0@0,1@1")
    cache = CeilingCache(tmp_path / "c.json")
    monkeypatch.setattr(tc, "measure_sizes", lambda cspec, run, todo, **kw: {
        1518: dict(res), 64: {"fps": 9.0, "unsteady": False}})
    run = RunContext(run_dir=tmp_path / "r")
    out = tc.harness_ceiling(spec, run, {64: TrafficProfile(frame_size_b=64), 1518: prof}, cache=cache,
                             hostname="h")
    assert out["per_size"]["1518"]["unsteady"] is True and out["per_size"]["1518"]["cached"] is False
    assert cache.get(ceiling_key("h", spec.port_kind, 10e9, 1500, "0@0,1@1", 1518)) is None
    assert cache.get(ceiling_key("h", spec.port_kind, 10e9, 1500, "0@0,1@1", 64))["fps"] == 9.0
    line = hc.summary({"harness_ceiling": out}, "tgen")
    assert "unsteady host: search 280,000, recheck 700,000" in line.replace("279,999", "280,000"), line


# ------------------------------------------------------------------------------ labelling

def test_bound_label_threshold() -> None:
    assert hc.bound_label(91.0, 100.0) == "harness-bound"
    assert hc.bound_label(120.0, 100.0) == "harness-bound"
    assert hc.bound_label(90.0, 100.0) == "DUT-bound"            # "above 90 %"
    assert hc.bound_label(50.0, 100.0) == "DUT-bound"
    assert hc.bound_label(50.0, None) == "—"
    assert hc.bound_label(None, 100.0) == "—"


def test_net_of_harness() -> None:
    lat = {"min_ns": 10_000.0, "avg_ns": 30_000.0, "max_ns": 90_000.0,
           "percentiles_ns": {"50": 25_000.0, "99": 80_000.0}, "count": 5}
    sl = {"min": 4_000.0, "p50": 8_000.0, "p99": 15_000.0}
    net = hc.net_of_harness(lat, sl)
    assert net["min_ns"] == 6_000.0 and net["avg_ns"] == 22_000.0 and net["max_ns"] == 82_000.0
    assert net["percentiles_ns"] == {"50": 17_000.0, "99": 72_000.0} and net["count"] == 5
    assert hc.net_of_harness({"min_ns": 1_000.0, "avg_ns": 2_000.0}, sl)["min_ns"] == 0.0   # floored
    assert hc.net_of_harness(lat, None) is lat
    assert lat["min_ns"] == 10_000.0                              # the stored point is untouched


# ------------------------------------------------------------------------------ runs and reports

def _run(tmp_path, *, tg="sim", ceiling=None, suite=None):
    store = Store("sqlite:///" + str(tmp_path / "r.db"))
    factory = None
    if tg == "tgen":     # a "real" run whose measurer is the sim: the runner's ceiling path runs
        from nfvperf.runner import measurer_for

        def factory(suite_, _tg, tag, run_dir, info, spec=None):
            return measurer_for(suite_, "sim", tag, run_dir, info, spec)
    out = execute(validate_suite(suite or SUITE), store=store, tg=tg, out_dir=tmp_path,
                  show_progress=False, log=lambda s: None, measurer_factory=factory, ceiling=ceiling)
    assert out.status == "completed", out.reason
    return store, store.load_run(out.run_id)


@pytest.fixture(scope="module")
def ceiling_run(tmp_path_factory):
    """A run whose ceiling came from the runner's own path (a fake measurement)."""
    tmp = tmp_path_factory.mktemp("ceil")
    calls = []

    def measure(spec, profiles, log):
        calls.append((spec.port_kind, sorted(profiles)))
        log("measuring the ceiling (fake)")
        return json.loads(json.dumps(CEILING))

    store, run = _run(tmp, tg="tgen", ceiling=CeilingOptions(measure_fn=measure))
    yield run, calls
    store.close()


def _tput_table(run, **kw):
    (tt,) = [t for t in build(run, **kw).tables if t.key == "throughput"]
    return tt


def test_runner_stores_the_ceiling_once_per_path(ceiling_run) -> None:
    run, calls = ceiling_run
    assert calls == [("af_packet", [64, 1518])]
    env = run.environment
    assert env["harness_ceiling"]["per_size"]["64"]["fps"] == 1_050_000.0
    assert env["harness_ceilings"] == [env["harness_ceiling"]]


def test_report_columns_show_ceiling_and_bound(ceiling_run) -> None:
    run, _ = ceiling_run
    tt = _tput_table(run)
    assert tt.columns[-2:] == ["harness ceiling fps", "bound"]
    rows = {r[0]: r for r in tt.rows}
    assert rows["64"][-2] == "1,050,000" and rows["64"][-1] == "harness-bound"
    assert rows["1,518"][-2] == "8,000,000" and rows["1,518"][-1] == "DUT-bound"
    data = build(run)
    assert any("harness-bound is above 90%" in n for n in data.notes)
    assert dict(data.header)["Harness ceiling"].startswith("af_packet, tgen lcores 0@0,1@1: 64 B 1,050,000 fps")
    html = render_html(run)
    assert "<th>harness ceiling fps</th>" in html and "<td>harness-bound</td>" in html


def test_plot_draws_the_ceiling(ceiling_run) -> None:
    run, _ = ceiling_run
    fig = throughput_figure(run)
    lines = [ln for ln in fig.axes[0].get_lines() if ln.get_gid() == "harness-ceiling"]
    assert len(lines) == 1
    assert list(lines[0].get_xdata()) == [64, 1518]
    assert list(lines[0].get_ydata()) == pytest.approx([1.05, 8.0])


def test_latency_self_latency_column_and_net(ceiling_run) -> None:
    run, _ = ceiling_run
    (lt,) = [t for t in build(run).tables if t.key == "latency"]
    assert lt.columns[-1] == "harness self-latency min/p50/p99 µs"
    row = lt.rows[0]
    assert row[-1] == "4.00 / 8.00 / 15.00"
    gross_min, gross_avg = float(row[5]), float(row[6])
    (nt,) = [t for t in build(run, net_of_harness=True).tables if t.key == "latency"]
    assert "net of harness self-latency" in nt.title
    assert float(nt.rows[0][5]) == pytest.approx(max(0.0, gross_min - 4.0), abs=0.011)
    assert float(nt.rows[0][6]) == pytest.approx(max(0.0, gross_avg - 8.0), abs=0.011)


def test_sim_has_no_ceiling_and_no_ceiling_option(tmp_path) -> None:
    store, run = _run(tmp_path / "a")
    assert "harness_ceiling" not in run.environment and "--tg sim" in run.environment["harness_ceiling_off"]
    tt = _tput_table(run)
    assert all(r[-2] == "—" and r[-1] == "—" for r in tt.rows)
    assert dict(build(run).header)["Harness ceiling"].startswith("—")
    store.close()

    def never(*a, **kw):
        raise AssertionError("--no-ceiling must not measure")

    store, run = _run(tmp_path / "b", tg="tgen", ceiling=CeilingOptions(enabled=False, measure_fn=never))
    assert "harness_ceiling" not in run.environment
    assert "turned off" in run.environment["harness_ceiling_off"]
    store.close()
    off = dict(SUITE, ceiling={"enabled": False})
    store, run = _run(tmp_path / "c", tg="tgen", ceiling=CeilingOptions(measure_fn=never), suite=off)
    assert "harness_ceiling" not in run.environment
    store.close()


def test_a_failed_ceiling_does_not_fail_the_run(tmp_path) -> None:
    def broken(spec, profiles, log):
        raise RuntimeError("no hugepages left")

    store, run = _run(tmp_path, tg="tgen", ceiling=CeilingOptions(measure_fn=broken))
    assert run.status == "completed"
    assert "no hugepages left" in run.environment["harness_ceiling"]["error"]
    data = build(run)
    assert any("could not be measured" in n for n in data.notes)
    store.close()


def test_suite_option_selects_net_latency(tmp_path) -> None:
    suite = dict(SUITE, ceiling={"latency_net_of_harness": True})
    store, run = _run(tmp_path, tg="tgen", suite=suite,
                      ceiling=CeilingOptions(measure_fn=lambda s, p, log: json.loads(json.dumps(CEILING))))
    (lt,) = [t for t in build(run).tables if t.key == "latency"]
    assert "net of harness self-latency" in lt.title
    (gt,) = [t for t in build(run, net_of_harness=False).tables if t.key == "latency"]
    assert "net of" not in gt.title
    store.close()


def test_a_ceiling_measured_at_a_higher_link_speed_answers_a_lower_one(tmp_path, monkeypatch) -> None:
    """The demo's two suites share one path (vhost, same generator cores) at 40G and 10G nominal:
    the second reads the first's ceiling instead of measuring the path again.  Where the harness
    carried the lower line rate with zero loss, the ceiling is that line rate ("≥"); else the
    measured figures, never above the lower line rate.  A slower entry, another MTU or
    --refresh-ceiling are measured."""
    from nfvperf.host.run import RunContext
    from nfvperf.topo import TopologySpec
    from nfvperf.topo import ceiling as tc
    spec = TopologySpec(kind="p2p", dut="testpmd", tgen_lcores="0@0,1@1")
    p10 = {s: TrafficProfile(frame_size_b=s, link_speed_bps=10e9) for s in (64, 1518)}
    line10 = {s: p.max_load_pps for s, p in p10.items()}           # 14,880,952 and 812,744
    cache = CeilingCache(tmp_path / "c.json")
    k40 = {s: ceiling_key("h", spec.port_kind, 40e9, 1500, "0@0,1@1", s) for s in (64, 1518)}
    cache.put(k40[64], {"method": tc.CEILING_METHOD, "fps": 5e6, "zero_loss_fps": 1.8e6, "forwarding_fps": 5e6,
                        "offered_max_fps": 59.5e6, "line_rate_fps": 59.5e6, "at_line_rate": False,
                        "self_latency_ns": {"min": 1.0, "p50": 2.0, "p99": 3.0}})
    cache.put(k40[1518], {"method": tc.CEILING_METHOD, "fps": 2e6, "zero_loss_fps": 1.2e6, "forwarding_fps": 2e6,
                          "offered_max_fps": 3.25e6, "line_rate_fps": 3.25e6, "at_line_rate": False})
    measured: list[list[int]] = []

    def fake_measure(cspec, run, todo, **kw):
        measured.append(sorted(todo))
        return {s: {"fps": 9.0, "zero_loss_fps": 9.0} for s in todo}

    monkeypatch.setattr(tc, "measure_sizes", fake_measure)
    logs: list[str] = []
    run = RunContext(run_dir=tmp_path / "r")
    out = tc.harness_ceiling(spec, run, p10, cache=cache, hostname="h", log=logs.append)
    assert measured == [] and out["cached"] is True and "error" not in out, out
    small, big = out["per_size"]["64"], out["per_size"]["1518"]
    # 64 B: the path carried less than 10G's line rate: the measured figures
    assert small["fps"] == 5e6 and small["zero_loss_fps"] == 1.8e6 and small["at_line_rate"] is False
    assert small["line_rate_fps"] == pytest.approx(line10[64]) and small["offered_max_fps"] == pytest.approx(line10[64])
    assert small["derived_from"]["link_speed_bps"] == 40e9 and small["self_latency_ns"]["p50"] == 2.0
    # 1518 B: zero loss above 10G's line rate: the ceiling is that line rate, a lower bound
    assert big["fps"] == pytest.approx(line10[1518]) and big["at_line_rate"] is True
    assert big["forwarding_fps"] == pytest.approx(line10[1518]) and big["derived_from"]["fps"] == 2e6
    assert hc.is_lower_bound(big) and not hc.is_lower_bound(small)      # the report shows "≥" at 1518 B
    assert any("higher nominal link speed (40G) and read at 10G" in ln for ln in logs), logs
    # the report's header says where the ceiling came from
    line = hc.summary({"harness_ceiling": dict(out, measured_at="2026-01-01T00:00:00Z")}, "tgen")
    assert "(cached 2026-01-01T00:00:00Z, measured at 40G nominal)" in line, line
    assert line.startswith(f"{spec.port_kind}, tgen lcores 0@0,1@1: 64 B 5,000,000 fps, 1518 B ≥ 812,744 fps"), line
    # the cache keeps only what was measured: nothing was written for 10G
    assert set(cache.entries()) == set(k40.values())

    # a ceiling measured at a lower speed does not answer a higher one
    p100 = {64: TrafficProfile(frame_size_b=64, link_speed_bps=100e9)}
    assert tc.harness_ceiling(spec, run, p100, cache=cache, hostname="h")["per_size"]["64"]["fps"] == 9.0
    assert measured == [[64]]
    # another MTU is another path
    spec9k = TopologySpec(kind="p2p", dut="testpmd", tgen_lcores="0@0,1@1", mtu=1400)
    tc.harness_ceiling(spec9k, run, {64: p10[64]}, cache=cache, hostname="h")
    assert measured == [[64], [64]]
    # the nearest faster entry wins, and an entry of an older method is not read
    cache.put(ceiling_key("h", spec.port_kind, 25e9, 1500, "0@0,1@1", 64), {"method": tc.CEILING_METHOD,
                                                                            "fps": 4e6, "zero_loss_fps": 1e6})
    cache.put(ceiling_key("h", spec.port_kind, 20e9, 1500, "0@0,1@1", 64), {"method": tc.CEILING_METHOD - 1,
                                                                            "fps": 1.0, "zero_loss_fps": 1.0})
    got = tc.harness_ceiling(spec, run, {64: p10[64]}, cache=cache, hostname="h")["per_size"]["64"]
    assert got["fps"] == 4e6 and got["derived_from"]["link_speed_bps"] == 25e9
    # --refresh-ceiling measures
    fresh = CeilingCache(tmp_path / "c.json", refresh=True)
    tc.harness_ceiling(spec, run, {64: p10[64]}, cache=fresh, hostname="h")
    assert measured == [[64], [64], [64]]


def test_header_names_a_ceiling_reused_by_later_groups_once() -> None:
    """Seed 000's real run stored its one vhost measurement again (cached) for each later topology
    group; the header printed the same sizes five times. One measurement is one entry, with how
    many groups used it; another measurement of the same path stays its own entry."""
    per = {"64": {"fps": 5e6}, "1518": {"fps": 8e5}}
    first = {"port_kind": "vhost", "tgen_lcores": "0@0,1@0", "measured_at": "T1", "per_size": per}
    again = dict(first, cached=True)
    other = dict(first, measured_at="T2", per_size={"1418": {"fps": 8.2e5}})
    line = hc.summary({"harness_ceilings": [first, again, again, other]}, "tgen")
    assert line.count("64 B 5,000,000 fps") == 1, line
    assert "(measured T1) (the same measurement for 3 topology groups)" in line, line
    assert "1418 B 820,000 fps (measured T2);" in line or line.endswith("1418 B 820,000 fps (measured T2)"), line
    # a stored ceiling without a measurement time is never merged
    assert hc.summary({"harness_ceilings": [dict(first, measured_at=None)] * 2}, "tgen").count("64 B") == 2
