"""The generator's cores in the plan (issue 27): ``--fit-host`` shrinks a DUT rather than put its
polling on the generator's CPU (fit rule 4; seed 002's l3fwd-vs-OVS on 2 CPUs printed l3fwd at
0.21x OVS with both DUTs' second core on tgen's CPU), then the generator's own ``tgen_cores``;
``nfvperf validate`` runs such units as given and says which would share."""
from __future__ import annotations

import pytest

from nfvperf.suite_load import validate_suite
from nfvperf.fit import HostFacts, _topology, fit_topology
from nfvperf.host.cpu import CpuTopology
from nfvperf.host.polling_overlap import generator_overlap
from nfvperf.plan import plan_run, plan_text
from nfvperf.topo.spec import TopologySpec


def host(cores: int) -> HostFacts:
    return HostFacts(CpuTopology.from_siblings({c: [c] for c in range(cores)}), 16384)


def overlap(spec: TopologySpec, h: HostFacts) -> dict:
    plan = _topology(spec, True).plan_cpus(h.cpus)
    return generator_overlap({"pinning": {"roles": plan.roles}}) or {}


L3FWD2 = TopologySpec(kind="p2p", dut="l3fwd", port_kind="vhost", l3fwd={"cores": 2})


def test_tgen_cores_fit_shrinks_the_dut_off_the_generators_cpu() -> None:
    h = host(2)
    assert overlap(L3FWD2, h) == {"cpus": [0], "roles": ["dut"]}      # as given: shared
    fit = fit_topology(L3FWD2, h)
    assert fit.fits_as_given and fit.unfit_reason() is None           # it still runs as given
    assert [(c.field, c.old, c.new, c.sharing) for c in fit.changes] == [("l3fwd.cores", 2, 1, True)]
    note = fit.sharing_note()
    assert note is not None and "topology.l3fwd.cores 2" in note and "CPU 0" in note
    assert "--fit-host would change l3fwd.cores 2→1" in note
    assert fit.spec.l3fwd.cores == 1 and overlap(fit.spec, h) == {}   # fitted: apart
    # a host with room: no sharing, nothing to change
    assert fit_topology(L3FWD2, host(4)).changes == [] and fit_topology(L3FWD2, host(4)).shares is None
    # no generator on the host (--tg sim / iperf3): nothing to say
    assert fit_topology(L3FWD2, h, start_tgen=False).shares is None


def test_tgen_cores_fit_gives_up_a_generator_core_when_the_dut_has_one() -> None:
    spec = TopologySpec(kind="p-ovs-p", port_kind="vhost", tgen_cores=2)
    fit = fit_topology(spec, host(2))
    assert [(c.field, c.old, c.new) for c in fit.changes] == [("tgen_cores", 2, 1)]
    assert fit.spec.tgen_cores == 1 and overlap(fit.spec, host(2)) == {}
    # one core each and one CPU: nothing left to lower, said
    f = fit_topology(TopologySpec(kind="p-ovs-p", port_kind="vhost", ovs={"pmd_cores": 1}), host(1))
    assert f.shares and "no core count to lower" in (f.sharing_note() or "")


SEED002 = {"name": "s2", "profile": "quick", "traffic": {"frame_sizes": [64]},
           "topology": {"kind": "p2p", "dut": "l3fwd", "port_kind": "vhost", "l3fwd": {"cores": 2}},
           "tests": [{"method": "throughput", "resolution_pct": 10}]}


@pytest.fixture
def no_build_checks(monkeypatch):
    monkeypatch.setattr("nfvperf.plan.build_problems", lambda spec, tg, host: [])


def test_tgen_cores_validate_says_which_units_share(no_build_checks) -> None:
    suite = validate_suite(SEED002)
    plan = plan_run(suite, "tgen", host=host(2))
    assert not plan.skipped and plan.running[0].shares
    lines = plan_text(plan)
    assert any(x.startswith("  sharing the generator's CPUs (1 unit(s)") and "l3fwd.cores 2→1" in x
               for x in lines), lines
    assert plan.record()["sharing"][0]["unit"] == plan.running[0].label
    fitted = plan_run(suite, "tgen", host=host(2), fit_host=True)
    assert [c.text() for c in fitted.running[0].changes][0].startswith("l3fwd.cores 2→1")
    assert not any("sharing the generator" in x for x in plan_text(fitted))
    # the simulated DUT shares no CPU with anything
    assert not plan_run(suite, "sim", host=host(2)).running[0].shares


# -- what line rate needs of the generator --------------------------------------------------------

def test_tgen_cores_line_rate_need() -> None:
    from nfvperf.tg.tgen_cores import line_rate_need
    n = line_rate_need(100e9, 64, 4, 25e6, 1, free_cpus=3)
    assert n["cores_needed"] == 24 and n["cores_per_port"] == 6 and not n["enough"]
    assert n["bound_fps_per_port"] == pytest.approx(6.25e6)
    assert "needs 24 generator core(s) (6 per port)" in n["text"] and "3 CPU(s) no DUT polls on" in n["text"]
    assert "results above ~6.2 Mfps per port will be harness-bound" in n["text"]
    assert line_rate_need(100e9, 64, 4, 25e6, 24)["enough"]
    crowded = line_rate_need(10e9, 64, 2, 30e6, 2, free_cpus=1)
    assert crowded["enough"] and "but only 1 CPU(s) are free of the DUT's polling" in crowded["text"]
    # a kind with one TX queue per port: a port never gets more than one core
    one = line_rate_need(100e9, 64, 2, 25e6, 8, split=False)
    assert one["bound_fps_per_port"] == pytest.approx(25e6) and "one core per port at most" in one["text"]


def test_tgen_cores_validate_says_what_line_rate_needs(no_build_checks) -> None:
    data = dict(SEED002, traffic={"frame_sizes": [64, 128], "link_speed": "25G"},
                topology={"kind": "p2p", "dut": "testpmd", "port_kind": "pci",
                          "pci": ["0000:01:00.0", "0000:01:00.1", "0000:02:00.0", "0000:02:00.1"],
                          "tgen_cores": 2})
    plan = plan_run(validate_suite(data), "tgen", host=host(8), core_rate={"fps": 10e6, "measured_at": "t"})
    (g,) = plan.generator
    # 2 transmitting ports x 37.2 Mfps at 64 B over 10 Mfps per core: 8 cores, 4 per port; 2 given
    assert (g["frame_size_b"], g["cores_needed"], g["cores_per_port"], g["workers"]) == (64, 8, 4, 2)
    assert "topology.tgen_cores: 2" in g["text"] and "above ~10.0 Mfps per port" in g["text"]
    assert any(x.startswith("  generator (p2p on pci, 2 unit(s)): line rate 2 transmitting port(s) x 25G")
               for x in plan_text(plan))
    assert plan.record()["generator_cores"][0]["cores_needed"] == 8
    unknown = plan_run(validate_suite(data), "tgen", host=host(8))
    assert "unknown (tgen's per-core self-test has not run" in unknown.generator[0]["text"]


def test_tgen_cores_report_names_the_cores() -> None:
    from types import SimpleNamespace

    from nfvperf.report.facts import generator_text
    run = SimpleNamespace(tg="tgen")
    env = {"measurer": {"tgen_version": "1", "lcores": "0@0,1@0,2@1",
                        "ports": [{"id": 0, "tx_lcores": [1, 2]}, {"id": 1, "tx_lcores": [1, 2]}]}}
    assert generator_text(run, env) == ("tgen, version 1, lcores 0@0,1@0,2@1, each direction over 2 "
                                        "cores (TX queues on lcores 1,2)")
    one = {"measurer": {"lcores": "0@0,1@0", "ports": [{"id": 0, "tx_lcores": [1]}]}}
    assert generator_text(run, one) == "tgen, lcores 0@0,1@0"


def test_tgen_cores_more_than_a_nic_has_queues_names_the_field(monkeypatch) -> None:
    """tgen refuses a port opened with more queues than the device has; the run says which field
    asked for them and the fix."""
    import nfvperf.topo.base as base
    from nfvperf.host.run import ResourceTracker
    from nfvperf.topo.errors import TopologyError
    from nfvperf.tg.tgen import PortSpec
    from nfvperf.trial import MeasurerError

    class NicWithOneQueue:
        def __init__(self, specs, lcores, **kw):
            self.specs, self.lcores = specs, lcores

        def spawn(self):
            pass

        def start(self):
            raise MeasurerError("tgen did not start: --port 0: rxq=2 txq=2, but the device allows "
                                "at most 1/1")

        def stop(self):
            return 0

    monkeypatch.setattr(base, "TgenProcess", NicWithOneQueue)
    spec = TopologySpec(kind="p2p", dut="testpmd", port_kind="pci", tgen_cores=2,
                        pci=["0000:01:00.0", "0000:01:00.1", "0000:02:00.0", "0000:02:00.1"])
    t = _topology(spec, True)
    t.plan = t.plan_cpus(host(6).cpus)
    t.tracker = ResourceTracker(t.run)
    monkeypatch.setattr(t, "tgen_port_specs", lambda: [PortSpec("0000:01:00.0", tx_queues=2, rx_queues=2)])
    assert t.tgen_workers() == 2
    with pytest.raises(TopologyError, match=r"topology.tgen_cores: 2 gives tgen 2 workers .* allows at "
                       r"most 1/1.*lower topology.tgen_cores or give the NIC more queues"):
        t.start_tgen()


def test_tgen_cores_multiqueue_port_specs() -> None:
    """One TX and one RX queue per worker on the kinds that have them (pci, vhost: virtio-user
    queues=N); one queue on the others (af_packet here)."""
    from pathlib import Path

    from nfvperf.topo.ports import HostPort
    pci = HostPort(index=0, kind="pci", tg_pci="0000:01:00.0").tg_port_spec(0, workers=2)
    assert (pci.devargs, pci.tx_queues, pci.rx_queues) == ("0000:01:00.0", 2, 2)
    vhu = HostPort(index=0, kind="vhost", socket=Path("/tmp/x.sock")).tg_port_spec(0, workers=2)
    assert "queues=2" in vhu.devargs and (vhu.tx_queues, vhu.rx_queues) == (2, 2)
    afp = HostPort(index=0, kind="veth", tg_ifname="x").tg_port_spec(0, workers=2)
    assert "qpairs=1" in afp.devargs and (afp.tx_queues, afp.rx_queues) == (1, 1)
    assert HostPort(index=0, kind="pci", tg_pci="0000:01:00.0").tg_port_spec(0).tx_queues == 1


def test_tgen_cores_from_a_raw_lcores_string() -> None:
    """tgen_lcores with 2 worker lcores (what the harness ceiling runs with) splits the same way."""
    t = _topology(TopologySpec(kind="p2p", dut="testpmd", port_kind="vhost", tgen_lcores="0@0,1@0,2@1",
                               testpmd={"queues": 2}), True)
    assert t.tgen_workers() == 2
    assert _topology(TopologySpec(kind="p2p", dut="testpmd", port_kind="vhost", tgen_lcores="0@0,1@1"),
                     True).tgen_workers() == 1
    assert _topology(TopologySpec(kind="p2p", dut="testpmd", port_kind="vhost"), True).tgen_workers() == 1


def test_tgen_cores_on_vhost_needs_a_forwarder_that_polls_every_queue() -> None:
    """tgen sends each sub-stream on its own vhost queue pair: testpmd or l3fwd polling fewer RX
    queues would never see the others' frames (measured before this check: testpmd with 1 queue
    'lost' exactly half of a tgen_cores: 2 trial).  Refused, naming both fields; OVS polls every
    enabled queue."""
    from pydantic import ValidationError
    with pytest.raises(ValidationError, match=r"tgen_cores 2 makes tgen send on 2 queues of each vhost "
                       r"port, but testpmd.queues is 1.*give testpmd: \{queues: 2\}"):
        TopologySpec(kind="p2p", dut="testpmd", port_kind="vhost", tgen_cores=2)
    with pytest.raises(ValidationError, match=r"tgen_lcores '0@0,1@0,2@1' .* l3fwd.queues is 1"):
        TopologySpec(kind="p2p", dut="l3fwd", port_kind="vhost", tgen_lcores="0@0,1@0,2@1")
    TopologySpec(kind="p2p", dut="testpmd", port_kind="vhost", tgen_cores=2, testpmd={"queues": 2})
    TopologySpec(kind="p-ovs-p", port_kind="vhost", tgen_cores=2)
    TopologySpec(kind="p2p", dut="testpmd", port_kind="af_packet", tgen_cores=2)   # one queue per port
    # the harness ceiling (testpmd io) polls as many queues as the run's generator sends on
    from nfvperf.topo.ceiling import ceiling_spec
    spec = TopologySpec(kind="p-ovs-p", port_kind="vhost", tgen_cores=2)
    assert ceiling_spec(spec, "0@0,1@0,2@1").testpmd.queues == 2
    assert ceiling_spec(spec, "0@0,1@1").testpmd.queues == 1
