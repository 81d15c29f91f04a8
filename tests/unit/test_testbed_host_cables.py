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
