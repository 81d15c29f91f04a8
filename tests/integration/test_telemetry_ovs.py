"""Telemetry on real OVS-DPDK (issue 28): the PMD counters stored with each trial say which lookup
path the packets took, where an overload's frames were lost, and what bound a trial.

- the flows study with the default in_port cross-connect: OVS >= 2.16 forwards both units by
  "simple match" (>= 90 % of the PMD's packets), so the explanation cannot name the EMC;
- the same study with rules that match the flows' addresses (ovs.rules: 100000): the 100k-flow
  unit misses the EMC and goes to the megaflow cache or the slow path (upcalls), and the
  explanation line the report prints names them;
- an overloaded PVP whose VNF is slower than OVS (the VNF's testpmd shares a CPU with the
  generator; OVS polls alone): most of the loss is at OVS's TX to the VNF's vhost port;
- a trial the generator cannot offer (af_packet ports at 14 Mfps): harness-bound, with tgen's
  cause.
"""
from __future__ import annotations

import json
import os
import re
import sqlite3
from pathlib import Path

import pytest
import yaml

from tests.integration.cli_runs import nfvperf, run_suite

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("need_tgen")]

if os.geteuid() != 0 or not os.path.exists("/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"):
    pytest.skip("needs root and openvswitch-switch-dpdk", allow_module_level=True)

from nfvperf.tg.telemetry import explain_trial, loss_account  # noqa: E402
from nfvperf.topo import build  # noqa: E402
from nfvperf.topo.spec import TopologySpec  # noqa: E402
from nfvperf.trial import TrafficProfile  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def _flows_suite(tmp_path: Path, rules: int) -> Path:
    data = {"name": f"t28-flows-{rules}",
            "topology": {"kind": "p-ovs-p", "dut": "ovs-dpdk", "ports": 2, "port_kind": "vhost",
                         "ovs": {"socket_mem_mb": 512, "rules": rules}},
            "traffic": {"frame_sizes": [64], "bidirectional": True, "link_speed": "40G"},
            "profile": "quick", "ceiling": {"enabled": False},
            "tests": [{"method": "throughput", "name": "flows", "search": "binary", "resolution_pct": 0.1,
                       "study": {"axes": {"flows": [1, 100000]}, "baseline": {"flows": 1}, "rounds": 3,
                                 "metrics": ["mrr"], "round_trial_s": 0.5}}]}
    p = tmp_path / f"flows-{rules}.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def _unit_pmds(db: str, unit: str) -> dict[str, int]:
    """The PMD counters summed over a unit's measured round trials."""
    con = sqlite3.connect(db.removeprefix("sqlite:///"))
    tot: dict[str, int] = {}
    for (detail, ctx) in con.execute("select tr.detail, tr.context from trials tr join tests t on t.id = "
                                     "tr.test_id where t.name = ?", (f"flows[flows={unit}]",)):
        if json.loads(ctx).get("warmup"):
            continue
        for c in json.loads(detail)["telemetry"]["dut"]["pmds"].values():
            for k, v in c.items():
                tot[k] = tot.get(k, 0) + (v if isinstance(v, int) else 0)
    con.close()
    assert tot.get("packets", 0) > 0, tot
    return tot


def _explanation(run_id: str, db: str) -> str:
    rep = nfvperf("report", run_id, "--db", db, timeout=120)
    assert rep.returncode == 0, rep.stderr
    m = re.search(r"(flows=100000 vs flows=1: .*?)\s*│", rep.stdout)
    assert m, rep.stdout[-3000:]
    return m.group(1)


def test_in_port_cross_connect_is_simple_match_for_both_units(tmp_path, leak_check) -> None:
    _, run_id, db = run_suite(_flows_suite(tmp_path, 0), tmp_path, leak_check, timeout=400)
    for unit in (1, 100000):
        pmd = _unit_pmds(db, str(unit))
        assert pmd["simple_match_hits"] >= 0.9 * pmd["packets"], (unit, pmd)
    line = _explanation(run_id, db)
    # whatever differs between the two (noise on a shared host), the EMC is not it
    assert "EMC" not in line, line


def test_address_rules_at_100k_flows_miss_the_emc_and_the_line_says_so(tmp_path, leak_check) -> None:
    _, run_id, db = run_suite(_flows_suite(tmp_path, 100000), tmp_path, leak_check, timeout=400)
    one, many = _unit_pmds(db, "1"), _unit_pmds(db, "100000")
    assert one["emc_hits"] >= 0.9 * one["packets"], one           # one flow: the EMC holds it
    assert many["emc_hits"] < 0.5 * many["packets"], many           # 100k flows: EMC misses
    slow = many["megaflow_hits"] + many["upcalls"] + many["failed_upcalls"]
    assert slow > 0.5 * many["packets"], many                      # megaflow lookups or upcalls
    line = _explanation(run_id, db)
    assert "EMC hits" in line and any(w in line for w in ("megaflow hits", "upcalls", "cycles/packet")), line


def test_overloaded_pvp_loses_most_frames_at_ovs_tx_to_the_vnf(run_ctx) -> None:
    # on 2 CPUs the VNF's testpmd shares a CPU (with OVS's PMD): it empties its vhost rings more
    # slowly than OVS fills them, so OVS drops at its TX to the VNF's ports.  The generator's
    # vhost-user ports push back: what OVS did not take is "held back by the DUT's full RX ring";
    # of the frames OVS took (sent - received) most are lost at its TX to the VNF.
    spec = TopologySpec(kind="pvp", ports=2, port_kind="vhost", ovs={"socket_mem_mb": 512})
    with build(spec, run_ctx) as topo:
        vnf_ports = {p.name for v in topo.vnfs for p in v.ports}
        m = topo.measurer()
        m.set_profile(TrafficProfile(frame_size_b=64, flows_per_port=1, learning=False, drain_s=0.3,
                                     latency=False, link_speed_bps=40e9))
        m.measure(0.3, 5e6)                                # warm-up
        tr = m.measure(0.5, 20e6)
    acc = tr.telemetry["loss"]
    assert acc is not None and acc["lost"] > 0, tr.telemetry
    entered_lost = tr.sent - tr.received
    to_vnf = sum(v for n, v in (acc["ports"].get("dut_tx") or {}).items() if n in vnf_ports)
    assert entered_lost > 0 and to_vnf >= 0.5 * entered_lost, (acc, vnf_ports, entered_lost)
    # the account adds up: located parts + unaccounted = the loss (or the counters overshoot)
    located = sum(v for v in acc["parts"].values() if isinstance(v, int))
    assert located + acc["unaccounted"] - acc["excess"] == acc["lost"], acc


def test_a_trial_the_generator_cannot_offer_is_harness_bound(run_ctx) -> None:
    spec = TopologySpec(kind="p-ovs-p", ports=2, port_kind="af_packet", ovs={"socket_mem_mb": 512})
    with build(spec, run_ctx) as topo:
        m = topo.measurer()
        m.set_profile(TrafficProfile(frame_size_b=64, flows_per_port=1, learning=False, drain_s=0.3,
                                     latency=False, link_speed_bps=10e9))
        tr = m.measure(0.3, 14e6)                   # 94 % of 10G at 64 B: far above af_packet's rate
    gen = tr.telemetry["generator"]
    assert gen["not_sent"] > 0.5 * gen["intended"] and not gen["held_back"], gen
    line = explain_trial(tr.to_dict(), "DUT-bound")
    assert line.startswith("harness-bound: tgen: "), line
    assert "of frames not sent" in line, line
    acc = loss_account(tr.to_dict())
    assert acc["parts"]["not_sent"] == gen["not_sent"]
    # the generator's TX lcore was the limit: it moved frames in nearly every iteration of its loop
    assert gen["lcore_busy"] > 0.8 and f"TX lcore {100 * gen['lcore_busy']:.0f} % busy" in line, (gen, line)


def test_loss_over_time_intervals_add_up_to_the_trial(run_ctx) -> None:
    """Item 5: tgen's frames sent and received per 100 ms interval (PROTOCOL.md §6 `intervals`),
    from the start of the traffic through the drain, add up to the trial's counts."""
    spec = TopologySpec(kind="p-ovs-p", ports=2, port_kind="vhost", ovs={"socket_mem_mb": 512})
    with build(spec, run_ctx) as topo:
        m = topo.measurer()
        m.set_profile(TrafficProfile(frame_size_b=64, flows_per_port=1, learning=False, drain_s=0.3,
                                     latency=False, link_speed_bps=40e9))
        tr = m.measure(1.0, 100_000)
    iv = tr.telemetry["generator"]["intervals"]
    assert iv["interval_ms"] == pytest.approx(100, rel=0.01), iv
    assert 10 <= len(iv["sent"]) <= 16, iv           # 1 s of traffic + 0.3 s drain (+ a late tick)
    assert sum(iv["sent"]) == tr.sent + tr.extra["tx_not_sent"], (iv, tr.sent)
    assert sum(iv["received"]) == tr.received
    assert [s - r for s, r in zip(iv["sent"], iv["received"])] == iv["lost"]
    # 100 kfps is a small part of what one TX lcore offers: it idles between bursts most of the time
    assert 0 < tr.telemetry["generator"]["lcore_busy"] < 0.5, tr.telemetry["generator"]["lcores"]
    # steady traffic: every full interval of the traffic carries about a tenth of it
    assert all(abs(s - 20_000) < 4_000 for s in iv["sent"][1:9]), iv["sent"]
