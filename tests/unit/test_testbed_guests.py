"""A testbed's ``guest:`` hosts (issue 19 item 4): the schema (NICs at the guest's own PCI
addresses, bound to uio_pci_generic, cabled only guest to guest), what stops a guest from booting
(the image), and whether a suite's topology runs on the testbed, each naming the field and the
fix; nothing here boots a guest (tests/integration/test_pci_emulated.py does)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from nfvperf.testbed import TestbedError, validate_testbed
from nfvperf.testbed.guests import guest_image, guest_problems
from nfvperf.testbed.hosts import check_testbed, suite_problems
from nfvperf.topo.spec import TopologySpec

REPO = Path(__file__).resolve().parents[2]


def _bed(tester=None, dut=None, links=None):
    return {"name": "emu",
            "hosts": {"tester": tester or {"role": "tester", "guest": {"nics": 2}},
                      "dut": dut or {"role": "dut", "guest": {"nics": 2}}},
            "links": links if links is not None else
            [{"tester": f"tester.p{i}", "dut": f"dut.p{i}"} for i in (0, 1)]}


def _refused(d) -> str:
    with pytest.raises(TestbedError) as e:
        validate_testbed(d)
    return str(e.value)


def _image(tmp_path: Path, roots=("usr/bin/dpdk-testpmd",)) -> Path:
    d = tmp_path / "img"
    d.mkdir(parents=True)
    (d / "manifest.json").write_text(json.dumps({
        "key": "k", "content_sha256": "0", "size_b": 1, "kernel_release": "6.1", "dpdk_version": "22.11",
        "packages": {}, "roots": list(roots), "modes": ["vnf"]}))
    for f in ("vmlinuz", "initrd.img"):
        (d / f).write_bytes(b"x")
    return d


def test_guest_nics_listed_at_the_guests_addresses():
    tb = validate_testbed(_bed())
    nics = tb.hosts["dut"].nics
    assert [(n.name, n.pci, n.driver) for n in nics] == [
        ("p0", "0000:00:04.0", "uio_pci_generic"), ("p1", "0000:00:05.0", "uio_pci_generic")]
    assert not tb.hosts["dut"].local and tb.hosts["dut"].ssh is None
    assert [n for n, _ in tb.guests()] == ["tester", "dut"]     # the listening side boots first
    # the shipped example is one of these
    from nfvperf.testbed.spec import load_testbed
    shipped = load_testbed(REPO / "testbeds" / "emulated-pci.yaml")
    assert [n for n, _ in shipped.guests()] == ["tester", "dut"]


def test_a_guest_with_no_nics_is_refused():
    msg = _refused(_bed(tester={"role": "tester", "guest": {"nics": 0}}))
    assert "hosts.tester.guest.nics" in msg and "greater than or equal to 1" in msg


def test_an_address_the_guest_does_not_have_is_refused():
    msg = _refused(_bed(tester={"role": "tester", "guest": {"nics": 2},
                                "nics": [{"name": "p0", "pci": "0000:00:04.0"},
                                         {"name": "p1", "pci": "0000:00:09.0"}]}))
    assert "hosts.tester" in msg and "nics.1.pci: 0000:00:09.0 is not a NIC of the guest" in msg
    assert "0000:00:04.0, 0000:00:05.0" in msg and "raise guest.nics" in msg


def test_a_guest_nic_on_another_driver_is_refused():
    msg = _refused(_bed(dut={"role": "dut", "guest": {"nics": 2},
                             "nics": [{"name": "p0", "pci": "0000:00:04.0", "driver": "vfio-pci"},
                                      {"name": "p1", "pci": "0000:00:05.0"}]}))
    assert "nics.0.driver" in msg and "uio_pci_generic" in msg


def test_guest_cabling_is_guest_to_guest_and_complete():
    msg = _refused(_bed(links=[{"tester": "tester.p0", "dut": "dut.p0"}]))
    assert "hosts.tester.guest: NIC p1 (0000:00:05.0) is in no link" in msg and "lower guest.nics" in msg
    msg = _refused(_bed(dut={"role": "dut", "nics": [{"name": "p0", "iface": "eth1"},
                                                     {"name": "p1", "iface": "eth2"}]}))
    assert "links.0: tester.p0 is a guest's NIC" in msg
    msg = _refused(_bed(tester={"role": "tester", "guest": {"nics": 2},
                                "ssh": {"address": "x", "known_hosts": "/k"}}))
    assert "hosts.tester" in msg and "drop ssh:" in msg


def test_multi_queue_guests_are_cabled_guest_to_guest():
    tb = validate_testbed(_bed(tester={"role": "tester", "guest": {"nics": 2, "queues": 2}}))
    assert tb.hosts["tester"].guest.queues == 2 and tb.hosts["dut"].guest.queues == 1
    msg = _refused(_bed(tester={"role": "tester", "guest": {"nics": 2, "queues": 9}}))
    assert "hosts.tester.guest.queues" in msg
    here = {"name": "emu-host", "links": [{"tester": f"tester.p{i}", "dut": f"dut.v{i}"}
                                          for i in (0, 1)],
            "hosts": {"tester": {"role": "tester", "guest": {"nics": 2, "queues": 2}},
                      "dut": {"role": "dut", "local": True,
                              "nics": [{"name": f"v{i}", "vhost": True} for i in (0, 1)]}}}
    msg = _refused(here)
    assert "hosts.tester.guest.queues: 2, but its NICs are cabled to this machine's vhost NICs" \
        in msg and "leave queues: 1" in msg, msg


def test_guest_memory_must_leave_room_for_its_kernel():
    msg = _refused(_bed(dut={"role": "dut", "guest": {"nics": 2, "memory_mb": 512,
                                                      "hugepages_mb": 512}}))
    assert "hosts.dut.guest" in msg and "raise memory_mb to at least 768" in msg


def test_an_image_that_is_not_built_is_refused(tmp_path):
    tb = validate_testbed(_bed(dut={"role": "dut", "guest": {"nics": 2, "image": str(tmp_path)}}))
    with pytest.raises(ValueError) as e:
        guest_image("dut", tb.hosts["dut"])
    assert "hosts.dut.guest.image" in str(e.value) and "nfvperf image build" in str(e.value)
    assert any("hosts.dut.guest.image" in p for p in guest_problems(tb))
    rows = [r for r in check_testbed(tb, dut="testpmd") if r.host == "dut"]
    assert rows and rows[0].status == "fail" and rows[0].required, rows
    img = _image(tmp_path)
    tb = validate_testbed(_bed(dut={"role": "dut", "guest": {"nics": 2, "image": str(img)}}))
    assert guest_image("dut", tb.hosts["dut"]).directory == img
    assert not [p for p in guest_problems(tb) if "hosts.dut.guest.image" in p]


def test_suite_topology_on_a_guest_testbed(tmp_path):
    img = str(_image(tmp_path))
    tb = validate_testbed(_bed(tester={"role": "tester", "guest": {"nics": 2, "image": img}},
                               dut={"role": "dut", "guest": {"nics": 2, "image": img}}))
    ok = TopologySpec(kind="p2p", dut="testpmd", ports=2, port_kind="pci")
    assert not [p for p in suite_problems(tb, ok) if "topology" in p or "links" in p]
    ovs = TopologySpec(kind="p-ovs-p", dut="ovs-dpdk", ports=2, port_kind="pci")
    # an image built before recipe 3 (no OVS): refused, naming the rebuild
    assert any("topology.dut ovs-dpdk: the DUT host dut is a guest whose image has no "
               "ovs-vswitchd" in p and "rebuild the image (nfvperf image build" in p
               for p in suite_problems(tb, ovs))
    from nfvperf.vm.image import ROOT_FILES
    img3 = str(_image(tmp_path / "3", roots=ROOT_FILES))     # today's image holds OVS-DPDK
    tb3 = validate_testbed(_bed(tester={"role": "tester", "guest": {"nics": 2, "image": img3}},
                                dut={"role": "dut", "guest": {"nics": 2, "image": img3}}))
    assert not [p for p in suite_problems(tb3, ovs) if "topology" in p], suite_problems(tb3, ovs)
    veth = TopologySpec(kind="p2p", dut="testpmd", ports=2, port_kind="af_packet")
    assert any("hosts.tester.nics.p0 has no iface" in p for p in suite_problems(tb, veth))
    bridge = TopologySpec(kind="p2p", dut="linux-bridge", ports=2, port_kind="af_packet")
    assert any("runs on this machine only" in p for p in suite_problems(tb, bridge))


def test_validate_and_run_refuse_before_anything_is_written(tmp_path, capsys):
    """``nfvperf validate --testbed`` and ``nfvperf run --testbed`` on a guest testbed whose DUT
    guest has no image, and on a suite whose DUT the guest image lacks: exit 2 naming the field,
    no store written."""
    from nfvperf.cli import main
    import yaml
    bed = tmp_path / "bed.yaml"
    bed.write_text(yaml.safe_dump(_bed(dut={"role": "dut", "guest": {"nics": 2,
                                                                      "image": str(tmp_path / "none")}})))
    db = tmp_path / "s.db"
    assert main(["validate", "pci-guests", "--testbed", str(bed)]) == 2
    assert "hosts.dut.guest.image" in capsys.readouterr().err
    from nfvperf.cli import _tgen_problem
    if _tgen_problem() is None:         # run --tg tgen refuses an unbuilt tgen first
        assert main(["run", "pci-guests", "--testbed", str(bed), "--tg", "tgen", "--db",
                     f"sqlite:///{db}", "--out", str(tmp_path / "o"), "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert "hosts.dut.guest.image" in err and "nfvperf image build" in err, err
        assert not db.exists()
    img = str(_image(tmp_path))
    bed.write_text(yaml.safe_dump(_bed(tester={"role": "tester", "guest": {"nics": 2, "image": img}},
                                       dut={"role": "dut", "guest": {"nics": 2, "image": img}})))
    assert main(["validate", "quick", "--port-kind", "pci", "--testbed", str(bed)]) == 2
    assert "topology.dut ovs-dpdk: the DUT host dut is a guest" in capsys.readouterr().err


def test_prepare_refuses_guest_hosts():
    """``nfvperf testbed prepare`` would make a guest host this machine (no ssh:): refused, the
    guest being prepared at each boot."""
    from nfvperf.testbed.prepare import run_prepare
    tb = validate_testbed(_bed())
    with pytest.raises(TestbedError) as e:
        run_prepare(tb, check=True)
    assert "hosts.tester: a guest: host is booted and prepared by nfvperf" in str(e.value)
    assert "hosts.dut" in str(e.value)
    with pytest.raises(TestbedError) as e:
        run_prepare(tb, check=True, limit="dut")
    assert "hosts.dut" in str(e.value) and "hosts.tester" not in str(e.value)


def test_pci_without_addresses_or_testbed_names_the_fix():
    """port_kind pci with no pci: and no testbed: the refusal names topology.pci and the
    emulated-PCI testbed (was: 'p2p needs an even number of ports, got 0')."""
    from types import SimpleNamespace

    from nfvperf.topo.errors import TopologyError
    from nfvperf.topo.ports import port_kind_class
    topo = SimpleNamespace(testbed_links=[], ports=[], spec=TopologySpec(kind="p2p", dut="testpmd",
                                                                        port_kind="pci"))
    with pytest.raises(TopologyError) as e:
        port_kind_class("pci")().create(topo, 2, dut_netns=None, tg_netns=None, mtu=1500)
    assert "topology.pci" in str(e.value) and "testbeds/emulated-pci.yaml" in str(e.value)


def test_a_guest_reached_over_ssh():
    from nfvperf.testbed.spec import load_testbed
    tb = validate_testbed(_bed(tester={"role": "tester", "guest": {"nics": 2, "ssh": True}}))
    assert tb.hosts["tester"].guest.ssh is True and tb.hosts["dut"].guest.ssh is False
    assert "hosts.tester.guest.ssh" in _refused(_bed(tester={"role": "tester",
                                                             "guest": {"nics": 2, "ssh": "maybe"}}))
    lab = load_testbed(Path(__file__).resolve().parents[2] / "testbeds" / "emulated-lab.yaml")
    assert all(h.guest is not None and h.guest.ssh for h in lab.hosts.values())
