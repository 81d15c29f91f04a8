"""The simulated DUT's configuration model (nfvperf.tg.sim_model): every study axis moves the
capacity the way the seed reports saw it, the runner configures the sim per test unit, and a
test's own ``sim:`` is honoured."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from nfvperf.config import SuiteError
from nfvperf.suite_load import validate_suite
from nfvperf.dut.l3fwd import L3fwdSpec
from nfvperf.dut.linux_bridge import LinuxBridgeSpec
from nfvperf.dut.ovs_spec import OvsSpec
from nfvperf.dut.testpmd import TestpmdSpec
from nfvperf.runner import execute
from nfvperf.store import Store
from nfvperf.tg.sim import SimMeasurer
from nfvperf.tg.sim_model import SimModel, SimModelParams, SimTraits, SimUnit, check_overrides
from nfvperf.topo.measurers import sim_traits, sim_unit
from nfvperf.trial import TrafficProfile


def cap(size: int = 64, flows: int = 1, vxlan: bool = False, link: float = 10e9, **unit) -> float:
    """Capacity per interface (fps, line-rate capped) through SimMeasurer, as a search sees it."""
    m = SimMeasurer(unit=SimUnit(**unit))
    m.set_profile(TrafficProfile(frame_size_b=size, flows_per_port=flows, vxlan=vxlan, link_speed_bps=link))
    return m.capacity_pps()


def test_cores_scale_near_linearly() -> None:
    c1, c2, c4 = (cap(pmd_cores=n, ports=4) for n in (1, 2, 4))
    assert c1 < c2 < c4
    assert 1.8 < c2 / c1 < 2.0 and 3.5 < c4 / c1 < 4.0          # near-linear, not above linear
    # the per-topology efficiency: added cores help pvp less than p-ovs-p
    pvp = [cap(pmd_cores=n, ports=4, kind="pvp", switching_ops=2, n_vnfs=1, vnf="container") for n in (1, 4)]
    assert pvp[1] / pvp[0] < c4 / c1


def test_cores_beyond_the_rx_queues_stay_idle() -> None:
    """Two ports with one rx queue each keep two PMD threads busy, not four (OVS assigns rxqs)."""
    assert cap(pmd_cores=4, ports=2, n_rxq=1) == pytest.approx(cap(pmd_cores=2, ports=2, n_rxq=1))
    assert cap(pmd_cores=4, ports=2, n_rxq=2) > cap(pmd_cores=2, ports=2, n_rxq=2)
    m = SimModel(SimUnit(pmd_cores=4, ports=2))
    assert m.threads() == (2, 2)


def test_mask_popcount_counts_threads() -> None:
    assert cap(pmd_threads=2, ports=4) == pytest.approx(cap(pmd_cores=2, ports=4))


def test_hyper_threading_gives_a_partial_gain() -> None:
    for n in (1, 2):
        gain = cap(pmd_cores=n, ht=True, ports=4) / cap(pmd_cores=n, ports=4)
        assert 1.0 < gain < 2.0
    # ... and costs latency (seed 000 §7.2.1)
    p = TrafficProfile()
    assert SimModel(SimUnit(pmd_cores=1, ht=True)).base_latency_ns(p) > SimModel(SimUnit(pmd_cores=1)).base_latency_ns(p)


def test_flows_fall_through_the_cache_tiers() -> None:
    f = {n: cap(flows=n) for n in (1, 1000, 10_000, 100_000, 1_000_000)}
    assert f[1] > f[1000] > f[10_000] > f[100_000] > f[1_000_000]
    assert f[1_000_000] < f[1000] / 10                  # past the megaflow limit: upcalls
    m = SimModel(SimUnit())
    assert m.tiers(2000)["emc"] == 1.0 and m.tiers(2_000_000)["upcall"] > 0.5
    # the signature match cache catches what the EMC misses
    assert cap(flows=50_000, smc=True) > cap(flows=50_000)


def test_more_rules_lower_log_shaped() -> None:
    r = [cap(rules=n) for n in (0, 64, 1000, 8000, 64_000, 1_000_000)]
    assert all(a > b for a, b in zip(r, r[1:]))
    assert r[-1] > r[0] / 3                              # log-shaped: 1M rules is not 1M times worse
    # seed 004: flows and rules 1:1, 64 -> 1M on pvp with 4 cores + HT: an order of magnitude and more
    pvp = dict(kind="pvp", switching_ops=2, n_vnfs=1, pmd_cores=4, ht=True, n_rxq=2)
    assert cap(rules=64, flows=64, **pvp) / cap(rules=1_000_000, flows=1_000_000, **pvp) > 10


def test_larger_frames_fewer_fps_more_mbps_until_line_rate() -> None:
    sizes = [64, 128, 256, 512, 1024, 1518]
    fps = [cap(size=s) for s in sizes]
    mbps = [f * (s + 20) * 8 / 1e6 for f, s in zip(fps, sizes)]
    assert all(a > b for a, b in zip(fps, fps[1:]))
    assert all(a <= b + 1e-6 for a, b in zip(mbps, mbps[1:]))
    assert max(mbps) <= 10_000 + 1e-6 and mbps[-1] == pytest.approx(10_000)   # never above line rate
    # per-byte cost: without a line rate the raw capacity still falls with size
    m = SimModel(SimUnit())
    assert m.capacity(TrafficProfile(frame_size_b=1518)).pps < m.capacity(TrafficProfile(frame_size_b=64)).pps


def test_vxlan_costs_and_topologies_order() -> None:
    assert cap(vxlan=True) < cap()
    assert cap(kind="vxlan", switching_ops=2) < cap()
    povsp = cap()
    pvp = cap(kind="pvp", switching_ops=2, n_vnfs=1)
    pvvp = cap(kind="pvvp", switching_ops=3, n_vnfs=2)
    assert pvvp < pvp < povsp


def test_dut_kinds() -> None:
    dpdk = cap()
    assert cap(dut="ovs-dpdk", datapath="system") < dpdk / 5      # seed 000 Tables 7-3/7-4: ~10x
    assert cap(dut="ovs-system") == cap(dut="ovs-dpdk", datapath="system")
    assert cap(dut="linux-bridge") < dpdk / 5
    assert cap(dut="testpmd", kind="p2p", size=128) > dpdk     # no lookups at all
    # kernel datapaths do not scale with PMD cores
    assert cap(dut="linux-bridge", pmd_cores=4, ports=4) == cap(dut="linux-bridge", pmd_cores=1, ports=4)


def test_tcp_streams_tso_multiqueue() -> None:
    m = SimMeasurer(unit=SimUnit())
    m.set_profile(TrafficProfile(link_speed_bps=100e9))

    def gbps(streams: int, tso: bool = True, mq: bool = False) -> float:
        return m.measure_tcp(streams=streams, duration_s=10, tso=tso, multiqueue=mq).extra["throughput_bps"] / 1e9
    s = [gbps(n) for n in (1, 2, 4, 8, 12)]
    assert s[0] < s[1] < s[2] and s[-1] < s[0] * 4          # more streams help, up to a cap
    assert gbps(4, tso=True) > 2 * gbps(4, tso=False)
    assert gbps(12, mq=True) > gbps(12, mq=False)
    m.set_profile(TrafficProfile(link_speed_bps=10e9))
    assert gbps(12) <= 10 * 0.95                              # a 10G link's goodput is the cap
    # the unit's TSO (from the test's params) counts when the call does not say
    m.configure(unit=SimUnit(tso=False))
    assert m.measure_tcp(streams=4, duration_s=10).extra["throughput_bps"] < 6e9
    # params.multiqueue as a queue count: 1 is single-queue, N queues bound at N x per queue
    m.configure(unit=SimUnit(tso=True))
    m.set_profile(TrafficProfile(link_speed_bps=100e9))

    def queues(mq: object) -> tuple[int, bool]:
        x = m.model.tcp_bps(m.profile, 12, 1, multiqueue=mq)  # type: ignore[arg-type]
        return x["queues"], x["multiqueue"]
    assert queues(1) == (1, False) == queues(False) and queues(2) == (2, True)
    assert queues(True) == (m.model.p.tcp_mq_queues, True)
    assert gbps(12, mq=1) == pytest.approx(gbps(12, mq=False), rel=0.03)  # type: ignore[arg-type]


def test_explicit_capacity_still_overrides_the_model() -> None:
    m = SimMeasurer(2e6, unit=SimUnit(pmd_cores=4, ports=4))
    assert m.capacity_pps(64) == 2e6 and "explicit" in m.environment()["model"]["model"]
    env = SimMeasurer().environment()
    assert env["model"]["model"].startswith("nfvperf sim model") and "base_ns" in env["model"]["parameters"]
    assert "model" in env["note"]


def test_overrides_flat_and_scoped() -> None:
    base = cap()
    assert cap(overrides={"base_ns": 172.0}) < base * 0.6
    # scoped to another DUT: no effect here; scoped to this one: effect
    assert cap(overrides={"linux-bridge": {"base_ns": 10.0}}) == base
    assert cap(overrides={"ovs-dpdk": {"base_ns": 172.0}}) < base * 0.6
    assert check_overrides({"base_nz": 1})[0].startswith("sim.model.base_nz: unknown model parameter")
    assert "true or false" in check_overrides({"smc": 3})[0]
    assert check_overrides({"pvp": {"core_efficiency": 0.5}}) == []
    assert SimModelParams().emc_entries == 8192


def test_sim_unit_from_a_topology_spec() -> None:
    opts = OvsSpec(pmd_cores=2, ht=True, n_rxq=2, rules=1000, smc_enable=False)
    spec = SimpleNamespace(dut="ovs-dpdk", kind="pvvp", ports=2, vnf="vm",
                           dut_class=lambda: SimpleNamespace(options=lambda s: opts))
    u = sim_unit(spec, SimpleNamespace(tso=False))
    assert (u.pmd_cores, u.ht, u.n_rxq, u.rules, u.switching_ops, u.n_vnfs, u.vnf, u.tso) == \
        (2, True, 2, 1000, 3, 2, "vm", False)
    suite = validate_suite({"name": "u", "topology": {"ovs": {"pmd_cpu_mask": "0x3c", "n_rxq": 2}},
                            "tests": [{"method": "throughput"}]})
    u = sim_unit(suite.spec.topology)
    assert u.pmd_threads == 4 and u.pmd_cores is None and u.dut == "ovs-dpdk" and u.switching_ops == 1


def test_each_adapter_declares_its_sim_traits() -> None:
    """The sim reads a DUT's options only through the adapter's own ``sim_traits()`` (no option
    read by name outside the adapter): OVS's PMD cores/mask, rx queues, rules and SMC; testpmd's
    and l3fwd's cores and queues; nothing from linux-bridge or from options that are not an
    adapter's model."""
    assert OvsSpec(pmd_cpu_mask="0x3c", n_rxq=2, rules=7, smc_enable=True).sim_traits() == \
        SimTraits(pmd_threads=4, n_rxq=2, rules=7, smc=True)
    assert TestpmdSpec(cores=2, ht=True, queues=4).sim_traits() == SimTraits(pmd_cores=2, ht=True, n_rxq=4)
    assert L3fwdSpec(cores=3, queues=2).sim_traits() == SimTraits(pmd_cores=3, n_rxq=2)
    assert LinuxBridgeSpec().sim_traits() == SimTraits()
    duck = SimpleNamespace(pmd_cores=2, n_rxq=4, rules=9)
    spec = SimpleNamespace(dut="ovs-dpdk", kind="p2p", ports=2, vnf="container",
                           dut_class=lambda: SimpleNamespace(options=lambda s: duck))
    assert sim_traits(spec) == SimTraits()
    suite = validate_suite({"name": "u", "topology": {"kind": "p2p", "dut": "testpmd",
                                                      "testpmd": {"cores": 2, "queues": 2}},
                            "tests": [{"method": "throughput"}]})
    u = sim_unit(suite.spec.topology)
    assert (u.dut, u.pmd_cores, u.n_rxq, u.rules, u.smc) == ("testpmd", 2, 2, 0, None)


def _values(tmp_path, data: dict) -> dict[str, float]:
    store = Store("sqlite:///" + str(tmp_path / "r.db"))
    out = execute(validate_suite(data), store=store, tg="sim", out_dir=tmp_path, show_progress=False,
                  log=lambda s: None)
    run = store.load_run(out.run_id)
    vals = {t.name: t.results[0].value_pps for t in run.tests}
    env = run.environment
    store.close()
    assert out.status == "completed", out.reason
    assert env["measurer"]["model"]["parameters"]["base_ns"] > 0
    return vals


def test_runner_configures_each_unit_and_honours_a_tests_sim(tmp_path) -> None:
    data = {"name": "per-unit", "profile": "quick", "traffic": {"frame_sizes": [64]},
            "topology": {"ports": 4},
            "sim": {"model": {"base_ns": 90.0}},
            "tests": [{"method": "throughput", "name": "base", "resolution_pct": 0.5},
                      {"method": "throughput", "name": "flows", "traffic": {"flows_per_port": 1_000_000},
                       "resolution_pct": 0.5},
                      {"method": "throughput", "name": "slow", "sim": {"model": {"base_ns": 180.0}},
                       "resolution_pct": 0.5},
                      {"method": "throughput", "name": "fixed", "sim": {"capacity_pps": 1e6},
                       "resolution_pct": 0.5},
                      {"method": "throughput", "name": "again", "resolution_pct": 0.5}]}
    v = _values(tmp_path, data)
    assert v["flows"] < v["base"] / 10
    assert 0.4 < v["slow"] / v["base"] < 0.6              # the test's model override, nobody else's
    assert 0.98e6 < v["fixed"] <= 1e6
    assert v["again"] == pytest.approx(v["base"], rel=0.01)   # back to the suite's sim block


def test_a_tests_sim_is_validated() -> None:
    def problems(entry: dict) -> list[str]:
        with pytest.raises(SuiteError) as e:
            validate_suite({"name": "bad", "tests": [dict({"method": "throughput"}, **entry)]})
        return e.value.problems
    assert any(p.startswith("tests[0].sim.pace_s") for p in problems({"sim": {"pace_s": 1}}))
    assert any("tests[0].sim" in p and "base_nz" in p for p in problems({"sim": {"model": {"base_nz": 1}}}))
    assert any(p.startswith("tests[0].sim") for p in problems({"sim": 3}))
    with pytest.raises(SuiteError) as e:
        validate_suite({"name": "bad", "sim": {"model": {"ht_gain": "lots"}}, "tests": [{"method": "throughput"}]})
    assert any(p.startswith("sim.model") and "ht_gain" in p for p in e.value.problems)


def test_jumbo_frames_need_more_rx_queues_at_25g() -> None:
    """Seed 003: at 25G a single rx queue loses jumbo frames; two carry line rate."""
    line = 25e9 / ((9000 + 20) * 8)
    one = cap(size=9000, link=25e9, n_rxq=1, pmd_cores=2)
    two = cap(size=9000, link=25e9, n_rxq=2, pmd_cores=2)
    assert one < 0.9 * line and two == pytest.approx(line)
