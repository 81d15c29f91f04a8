"""A guest's NIC cabled to this machine (issue 19 item 4, ``nics: [{name, vhost: true}]`` on the
testbed's local host): the schema's refusals, the topology's ports (the guest's PCI NIC for tgen,
a vhost-user backend here for the DUT), and what ``validate`` and ``--tg iperf3`` say about PCI
and guests.  Nothing here boots a guest (tests/integration/test_pci_emulated.py does)."""
from __future__ import annotations

from pathlib import Path

from nfvperf.testbed.hold import remote_hosts_problem
from nfvperf.testbed.spec import validate_testbed

REPO = Path(__file__).resolve().parents[2]


def test_validate_without_testbed_says_what_run_says_about_topology_pci(capsys):
    """port_kind pci, no pci: list, no --testbed: validate names topology.pci and the fix (it
    said 'ok', 1 of 1 unit runs, and the run then failed at set-up)."""
    from nfvperf.cli import main
    main(["validate", str(REPO / "suites" / "pci-guests.yaml"), "--tg", "tgen"])
    out = capsys.readouterr().out
    assert "0 of 1 test unit(s) run, 1 skipped" in out, out
    assert "topology.pci: port_kind pci drives NICs by PCI address" in out, out
    assert "--testbed FILE" in out and "testbeds/emulated-pci.yaml" in out, out


def test_iperf3_on_a_guest_testbed_says_guests_not_ssh():
    spec = validate_testbed({"name": "emu", "hosts": {
        "tester": {"role": "tester", "guest": {"nics": 2}},
        "dut": {"role": "dut", "guest": {"nics": 2}}},
        "links": [{"tester": f"tester.p{i}", "dut": f"dut.p{i}"} for i in (0, 1)]})
    msg = remote_hosts_problem(spec, "iperf3")
    assert msg and "reached over SSH" not in msg, msg
    assert "host(s) tester, dut are QEMU guests nfvperf boots" in msg and "use --tg tgen" in msg


# ------------------------------------------------------------------------------ the schema
import pytest  # noqa: E402

from nfvperf.testbed import TestbedError  # noqa: E402

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGV4YW1wbGU"


def _bed(dut=None, tester=None, links=None):
    return {"name": "emu-host",
            "hosts": {"tester": tester or {"role": "tester", "guest": {"nics": 2}},
                      "dut": dut or {"role": "dut", "local": True,
                                     "nics": [{"name": "v0", "vhost": True},
                                              {"name": "v1", "vhost": True}]}},
            "links": links if links is not None else
            [{"tester": f"tester.p{i}", "dut": f"dut.v{i}"} for i in (0, 1)]}


def _refused(d) -> str:
    with pytest.raises(TestbedError) as e:
        validate_testbed(d)
    return str(e.value)


def test_the_shipped_host_cabled_testbed_validates():
    from nfvperf.testbed.spec import load_testbed
    spec = load_testbed(REPO / "testbeds" / "emulated-pci-host.yaml")
    assert [spec.host_cable(i) for i in range(len(spec.links))] == [True, True]
    assert spec.hosts["dut"].local and [n.vhost for n in spec.hosts["dut"].nics] == [True, True]
    assert spec == validate_testbed(_bed() | {"name": "emulated-pci-host", "description":
                                              spec.description})


def test_vhost_nic_refusals_name_the_field_and_the_fix():
    ssh = {"role": "dut", "ssh": {"address": "192.0.2.2", "host_key": HOST_KEY},
           "nics": [{"name": "v0", "vhost": True}, {"name": "v1", "vhost": True}]}
    msg = _refused(_bed(dut=ssh))
    assert "hosts.dut" in msg and "nics.0.vhost" in msg and "reached over SSH" in msg, msg
    assert "local: true" in msg, msg
    # a vhost NIC on a guest host: its NICs are PCI devices
    msg = _refused(_bed(tester={"role": "tester", "guest": {"nics": 2},
                                "nics": [{"name": "p0", "vhost": True}]}))
    assert "hosts.tester: nics.0.pci: a guest's NIC is a PCI device" in msg, msg
    # vhost with an address
    msg = _refused(_bed(dut={"role": "dut", "local": True,
                             "nics": [{"name": "v0", "vhost": True, "pci": "0000:05:00.0"},
                                      {"name": "v1", "vhost": True}]}))
    assert "vhost: true is a vhost-user socket nfvperf makes" in msg and "drop pci:" in msg, msg
    # a vhost NIC cabled to a NIC that is not a guest's
    tester = {"role": "tester", "local": True, "nics": [{"name": "p0", "iface": "veth0"},
                                                        {"name": "p1", "iface": "veth1"}]}
    msg = _refused(_bed(tester=tester))
    assert "links.0: dut.v0 is a vhost-user NIC of this machine" in msg, msg
    assert "cable it to a NIC of a guest: host" in msg, msg
    # a vhost NIC in no link
    msg = _refused(_bed(dut={"role": "dut", "local": True,
                             "nics": [{"name": "v0", "vhost": True}, {"name": "v1", "vhost": True},
                                      {"name": "v2", "vhost": True}]}))
    assert "hosts.dut.nics.v2: a vhost NIC is in no link" in msg, msg


def test_tester_here_with_a_guest_dut_gives_tgen_a_vhost_backend(tmp_path):
    """The other direction (testbeds/emulated-pci-dut.yaml): tgen here on a net_vhost client per
    cable, the DUT in the guest on its PCI NICs."""
    from types import SimpleNamespace

    from nfvperf.dut.base import PciNic
    from nfvperf.host.run import RunContext
    from nfvperf.testbed.hosts import cabled_links, suite_problems
    from nfvperf.testbed.spec import load_testbed
    from nfvperf.topo.ports import port_kind_class
    from nfvperf.topo.spec import TopologySpec
    spec = load_testbed(REPO / "testbeds" / "emulated-pci-dut.yaml")
    assert spec.hosts["tester"].local and spec.hosts["dut"].guest is not None
    tspec = TopologySpec(kind="p2p", dut="testpmd", port_kind="pci")
    assert not [p for p in suite_problems(spec, tspec) if "links" in p or "topology" in p]
    links = cabled_links(spec, "tester", "dut")
    for i, lk in enumerate(links):
        assert lk["tester_vhost"] is True and lk["tester_pci"] is None
        lk["tester_vhost"] = str(tmp_path / f"cable{i}.sock")
    topo = SimpleNamespace(testbed_links=links, ports=[], spec=SimpleNamespace(ports=2),
                           run=RunContext(run_dir=tmp_path))
    ports = port_kind_class("pci")().create(topo, 2, dut_netns=None, tg_netns=None, mtu=1500)
    assert [p.tg_port_spec(i).devargs for i, p in enumerate(ports)] == [
        f"net_vhost{i},iface={tmp_path / f'cable{i}.sock'},queues=1,client=1" for i in (0, 1)]
    refs = [p.dut_portref() for p in ports]
    assert all(isinstance(r.end, PciNic) for r in refs)
    assert [r.pci for r in refs] == ["0000:00:04.0", "0000:00:05.0"]


def test_a_guest_cabled_both_to_a_guest_and_here_is_refused():
    d = {"name": "mixed", "hosts": {
        "tester": {"role": "tester", "guest": {"nics": 2}},
        "dut": {"role": "dut", "guest": {"nics": 1}},
        "here": {"role": "dut", "local": True, "nics": [{"name": "v0", "vhost": True}]}},
        "links": [{"tester": "tester.p0", "dut": "dut.p0"}, {"tester": "tester.p1", "dut": "here.v0"}]}
    msg = _refused(d)
    assert "hosts.tester.guest: some NICs are cabled to guests, some to this machine" in msg, msg


# ------------------------------------------------------------------------------ the ports
def test_pci_ports_of_a_host_cable_are_the_guest_nic_and_a_vhost_backend_here(tmp_path):
    """p2p port_kind pci on the host-cabled testbed: tgen opens the guest's NIC (-a), the DUT a
    net_vhost client on the cable's socket; validate's topology check passes it."""
    from types import SimpleNamespace

    from nfvperf.dut.base import VhostBackend
    from nfvperf.host.run import RunContext
    from nfvperf.testbed.hosts import cabled_links, suite_problems
    from nfvperf.topo.ports import port_kind_class
    from nfvperf.topo.spec import TopologySpec
    spec = validate_testbed(_bed())
    tspec = TopologySpec(kind="p2p", dut="testpmd", port_kind="pci")
    assert not [p for p in suite_problems(spec, tspec) if "links" in p or "topology" in p]
    links = cabled_links(spec, "tester", "dut")
    assert [lk["dut_vhost"] for lk in links] == [True, True] and links[0]["dut_pci"] is None
    for i, lk in enumerate(links):                 # what topology_kwargs puts once booted
        lk["dut_vhost"] = str(tmp_path / f"cable{i}.sock")
    run = RunContext(run_dir=tmp_path)
    topo = SimpleNamespace(testbed_links=links, ports=[], spec=SimpleNamespace(ports=2), run=run)
    ports = port_kind_class("pci")().create(topo, 2, dut_netns=None, tg_netns=None, mtu=1500)
    specs = [p.tg_port_spec(i) for i, p in enumerate(ports)]
    assert [s.devargs for s in specs] == ["0000:00:04.0", "0000:00:05.0"]
    refs = [p.dut_portref() for p in ports]
    assert all(isinstance(r.end, VhostBackend) and r.end.client for r in refs), refs
    assert refs[1].dpdk_devargs(1) == f"net_vhost1,iface={tmp_path / 'cable1.sock'},queues=1,client=1"


def test_validate_and_run_refuse_a_vhost_cable_to_another_machine(tmp_path, capsys):
    """The cable's vhost end on a host reached over SSH: ``validate --testbed`` and ``run
    --testbed`` exit 2 naming hosts.dut nics.0.vhost and the fix, no store written."""
    import yaml

    from nfvperf.cli import main
    bed = tmp_path / "bed.yaml"
    bed.write_text(yaml.safe_dump(_bed(dut={
        "role": "dut", "ssh": {"address": "192.0.2.2", "host_key": HOST_KEY},
        "nics": [{"name": "v0", "vhost": True}, {"name": "v1", "vhost": True}]})))
    assert main(["validate", "pci-guests", "--testbed", str(bed)]) == 2
    err = capsys.readouterr().err
    assert "hosts.dut: nics.0.vhost" in err and "give vhost: true on the testbed's local host" in err
    db = tmp_path / "s.db"
    assert main(["run", "pci-guests", "--testbed", str(bed), "--tg", "tgen", "--db",
                 f"sqlite:///{db}", "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    assert "nics.0.vhost" in capsys.readouterr().err and not db.exists()


def test_standin_holds_each_cable_without_hugepages(tmp_path):
    """The stand-in while a host-cabled guest boots: one net_vhost client per cable, no
    hugepages, no shared config, interactive (idle), its DPDK prefix carrying the run's tag."""
    from nfvperf.host.run import ResourceTracker, RunContext
    from nfvperf.testbed.standin import VhostStandIn
    run = RunContext(run_dir=tmp_path)
    s = VhostStandIn(run, ResourceTracker(run), [tmp_path / "cable0.sock", tmp_path / "cable1.sock"])
    a = s.argv()
    assert a[0].endswith("dpdk-testpmd") and "--no-huge" in a and "--no-shconf" in a
    assert f"--file-prefix={run.tag}-standin" in a and "--no-pci" in a
    vdevs = [a[i + 1] for i, x in enumerate(a) if x == "--vdev"]
    assert vdevs == [f"net_vhost0,iface={tmp_path / 'cable0.sock'},client=1",
                     f"net_vhost1,iface={tmp_path / 'cable1.sock'},client=1"]
    assert a[a.index("--") + 1] == "-i"
