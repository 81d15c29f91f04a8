"""TCP inside VMs (seed 001, issue 19 item 3) without root: the suite's refusals (naming the field
and the fix), the guest image check, the iperf3 and QEMU command lines, the guest shell's marker
protocol against a real shell loop, the run plan's TSO skips, the sim's scenarios and the report's
TCP row."""
from __future__ import annotations

import json
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from nfvperf.config import SuiteError
from nfvperf.suite_load import validate_suite


def _suite(topology: dict[str, Any], *tests: dict[str, Any]) -> dict[str, Any]:
    return {"name": "s", "topology": topology,
            "tests": list(tests) or [{"method": "tcp", "duration_s": 5}]}


def _problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(SuiteError) as ei:
        validate_suite(data)
    return ei.value.problems


# --------------------------------------------------------------------------- refusals
def test_a_valid_scenario_validates() -> None:
    s = validate_suite(_suite({"kind": "vm-vm", "vm": {"vcpus": 4, "queues": 8}},
                              {"method": "tcp", "processes": 4, "pin_cores": [0, 1, 2, 3],
                               "multiqueue": True, "tso": True, "duration_s": 5}))
    t = s.tests[0]
    assert t.topology.vm.vcpus == 4 and t.topology.vm.virtio_queues() == 8
    assert validate_suite(_suite({"kind": "host-vm"})).spec.topology.vm.virtio_queues() == 2


def test_more_pinned_processes_than_vcpus_is_refused() -> None:
    probs = _problems(_suite({"kind": "vm-link-vm", "vm": {"vcpus": 2}},
                             {"method": "tcp", "processes": 4, "pin_cores": [0, 1, 2, 3]}))
    assert any(p.startswith("tests[0].pin_cores: [2, 3] are not vCPUs of the guests "
                            "(topology.vm.vcpus 2: 0..1)") for p in probs), probs
    assert any(p.startswith("tests[0].processes: 4 iperf3 processes pinned one per vCPU need 4 "
                            "vCPUs, the guests have 2") and "raise topology.vm.vcpus" in p
               for p in probs), probs
    # unpinned, more processes than vCPUs is fine (seed 001 scenario 1: five clients)
    validate_suite(_suite({"kind": "host-vm", "vm": {"vcpus": 2}}, {"method": "tcp", "processes": 5}))
    probs = _problems(_suite({"kind": "vm-vm", "vm": {"vcpus": 2}},
                             {"method": "tcp", "processes": 2, "pin_cores": [1, 1]}))
    assert probs == ["tests[0].pin_cores: [1, 1] pins two processes to one vCPU; give distinct vCPUs"]


def test_multiqueue_needs_vcpus_and_queues() -> None:
    probs = _problems(_suite({"kind": "vm-vm", "vm": {"vcpus": 1}},
                             {"method": "tcp", "multiqueue": True}))
    assert probs == ["tests[0].multiqueue: true needs guests with 2+ vCPUs (topology.vm.vcpus is 1: "
                     "one queue is all one vCPU polls); raise topology.vm.vcpus or set multiqueue: false"]
    probs = _problems(_suite({"kind": "vm-vm", "vm": {"vcpus": 2}}, {"method": "tcp", "multiqueue": 4}))
    assert probs == ["tests[0].multiqueue: 4 asks for 4 queues, the guests' NICs have 2 "
                     "(topology.vm.queues); raise topology.vm.queues or lower multiqueue"]
    validate_suite(_suite({"kind": "vm-vm", "vm": {"vcpus": 1}}, {"method": "tcp", "multiqueue": False}))


def test_other_methods_and_wiring_are_refused() -> None:
    probs = _problems(_suite({"kind": "vm-vm"}, {"method": "throughput"}))
    assert probs[0].startswith("tests[0].method: throughput cannot run on kind vm-vm, which runs TCP "
                               "tests only"), probs
    probs = _problems(_suite({"kind": "vm-vm", "ovs": {"bridges": 2}}))
    assert "topology.ovs.bridges: kind vm-vm makes its own bridges" in probs[0], probs
    probs = _problems(_suite({"kind": "vm-vm", "port_kind": "vhost"}))
    assert "cannot use port_kind 'vhost'" in probs[0] and "'af_packet' or 'af_xdp'" in probs[0]
    probs = _problems(_suite({"kind": "vm-vm", "vm": {"vcpus": 0}}))
    assert probs[0].startswith("topology.vm.vcpus:"), probs


def _image(d: Path, roots: list[str], modes: list[str]) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "vmlinuz").write_bytes(b"k")
    (d / "initrd.img").write_bytes(b"i")
    (d / "manifest.json").write_text(json.dumps({
        "key": "k", "content_sha256": "0" * 64, "size_b": 2, "kernel_release": "6.1.0-x-amd64",
        "dpdk_version": "22.11", "packages": {}, "roots": roots, "modes": modes}))
    return d


def test_a_custom_image_without_iperf3_is_refused(tmp_path) -> None:
    from nfvperf.vm import image
    from nfvperf.vm.guest import image_refusal, load_image
    bad = _image(tmp_path / "old", ["usr/bin/dpdk-testpmd"], ["vnf"])
    probs = _problems(_suite({"kind": "vm-vm", "vm": {"image": str(bad)}}))
    assert len(probs) == 1 and probs[0].startswith(f"topology.vm.image: the image {bad} has no iperf3 "
                                                   "or ethtool"), probs
    assert "python3 -m nfvperf.vm.image build" in probs[0]
    assert image_refusal(str(tmp_path / "nothing")).endswith("or leave topology.vm.image unset")
    no_mode = _image(tmp_path / "nomode", list(image.TCP_TOOLS), ["vnf"])
    assert "no TCP mode" in image_refusal(str(no_mode))
    good = _image(tmp_path / "good", list(image.ROOT_FILES), ["vnf", "tcp"])
    assert image_refusal(str(good)) is None and image_refusal(None) is None
    assert load_image(str(good)).kernel == good / "vmlinuz"
    with pytest.raises(ValueError, match="topology.vm.image"):
        load_image(str(bad))


# --------------------------------------------------------------------------- the plan's TSO skips
def test_tso_on_an_af_packet_path_is_skipped_by_the_plan_not_refused() -> None:
    from nfvperf.plan import measurer_refusal, tso_refusal
    from nfvperf.topo.spec import TopologySpec
    s = validate_suite(_suite({"kind": "vm-link-vm"}, {"method": "tcp", "tso": True}))
    t = s.tests[0]
    why = measurer_refusal(t, None, "iperf3", t.topology)
    assert why is not None and why.startswith("params.tso: true: kind vm-link-vm: the link between the "
                                              "bridges is a DPDK af_packet port"), why
    assert "OVS 3.1 drops" in why and "kind vm-vm" in why
    assert measurer_refusal(t, None, "sim", t.topology) is None
    assert tso_refusal(TopologySpec(kind="vm-vm")) is None
    assert "external clients' port" in tso_refusal(TopologySpec(kind="host-vm"))


# --------------------------------------------------------------------------- command lines
def test_iperf3_command_lines_in_the_guest() -> None:
    from nfvperf.vm.tcp import PREFIX, guest_argv, guest_line
    assert guest_argv("server", 5202, 1) == ["iperf3", "-s", "-p", "5202", "-1", "-J", "-A", "1"]
    assert guest_argv("server", 5201, None) == ["iperf3", "-s", "-p", "5201", "-1", "-J"]
    c = guest_argv("client", 5201, 0, "198.18.0.2", 60, 8, reverse=True, mss=1400, omit_s=2)
    assert c[:10] == ["iperf3", "-c", "198.18.0.2", "-p", "5201", "-t", "60", "-P", "8", "-J"]
    assert c[c.index("-A") + 1] == "0" and "-R" in c and c[c.index("-M") + 1] == "1400"
    assert c[c.index("-O") + 1] == "2"
    assert "--bidir" in guest_argv("client", 1, None, "x", 1, bidir=True, reverse=True)
    with pytest.raises(ValueError):
        guest_argv("both", 1, None)
    line = guest_line(["iperf3", "-c", "198.18.0.2", "-A", "0"], "client0", 20.2)
    assert line == (f"timeout -s KILL 21 iperf3 -c 198.18.0.2 -A 0 </dev/null "
                    f">/tmp/{PREFIX}client0.json 2>/tmp/{PREFIX}client0.err & echo PID=$!")


def _guest(tmp_path: Path, accel: str, vcpus: int = 2, queues: Any = None) -> Any:
    from nfvperf.host.run import ResourceTracker, RunContext
    from nfvperf.vm.guest import TcpGuest
    from nfvperf.vm.image import ImageInfo
    run = RunContext(run_dir=tmp_path / "run")
    img = ImageInfo(key="k", directory=tmp_path, kernel=tmp_path / "vmlinuz", initrd=tmp_path / "initrd.img",
                    manifest=tmp_path / "manifest.json", content_sha256="0" * 64, size_b=1,
                    kernel_release="6.1.0-x-amd64", dpdk_version="22.11", packages={})
    tr = ResourceTracker(run, install_signal_handlers=False)
    g = TcpGuest(run, tr, socket=tmp_path / "vhu.sock", ip="198.18.0.2", name="vm1", vcpus=vcpus,
                 memory_mb=512, queues=queues, image=img, mtu=1500)
    g.accel = accel
    return g


def test_qemu_command_line_of_a_tcp_guest(tmp_path) -> None:
    g = _guest(tmp_path, "tcg")
    argv = " ".join(g.argv())
    assert "nfvperf.mode=tcp nfvperf.ip=198.18.0.2/24 nfvperf.mtu=1500" in g.kernel_cmdline()
    assert "-smp 2 " in argv and "size=512M" in argv
    assert "type=vhost-user,id=net0,chardev=vhu0,vhostforce=on,queues=2" in argv
    # TCG: no MSI-X (QEMU 7.2 dies setting up a vhost-user NIC's vectors under TCG)
    assert "rx_queue_size=256,tx_queue_size=256,vectors=0,mq=on" in argv and "vectors=6" not in argv
    assert "mrg_rxbuf=off" not in argv and g.shell_log.name == "vm-vm1-shell.log"
    k = _guest(tmp_path, "kvm")
    assert "rx_queue_size=256,tx_queue_size=256,mq=on,vectors=6" in " ".join(k.argv())
    one = _guest(tmp_path, "kvm", vcpus=1)
    assert "mq=on" not in " ".join(one.argv()) and one.queues == 1
    assert _guest(tmp_path, "kvm", vcpus=2, queues=8).queues == 8


# --------------------------------------------------------------------------- the guest shell
def test_guest_shell_markers_against_a_real_shell_loop(tmp_path) -> None:
    """The guest init's loop (``while IFS= read -r line; do eval "$line"; done``) run by the host's
    sh on the accepted end of a Unix socket: exit status, output, background jobs, noise."""
    from nfvperf.vm.guest import GuestShell
    path = tmp_path / "ctl.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(1)
    procs: list[subprocess.Popen] = []

    def serve() -> None:
        conn, _ = srv.accept()
        procs.append(subprocess.Popen(["sh", "-c", 'echo noise-before; while IFS= read -r line; do '
                                       'eval "$line"; done'], stdin=conn, stdout=conn, stderr=conn))
        conn.close()

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    sh = GuestShell(path, "vm9")
    sh.connect(timeout=5)
    try:
        th.join(5)
        assert sh.run_line("echo hello; echo world") == (0, "hello\nworld")
        rc, out = sh.run_line("ls /nonexistent-nfvperf")
        assert rc != 0 and "nonexistent-nfvperf" in out
        assert sh.run_line("false")[0] == 1
        rc, out = sh.run_line("sleep 0.2 </dev/null >/dev/null & echo PID=$!")
        assert rc == 0 and out.startswith("PID=")
        pid = out.split("=")[1]
        assert sh.run_line(f"wait {pid}; echo waited")[1] == "waited"
        with pytest.raises(ValueError):
            sh.run_line("echo a\necho b")
        from nfvperf.dut.base import DutFailure
        with pytest.raises(DutFailure, match="no end of"):
            sh.run_line("sleep 2", timeout=0.3)
    finally:
        sh.close()
        for p in procs:
            p.kill()
            p.wait(5)
        srv.close()


# --------------------------------------------------------------------------- sim and report
def test_sim_shows_seed_001s_three_scenarios() -> None:
    from nfvperf.tg.sim_model import SimModel, SimUnit
    from nfvperf.trial import TrafficProfile
    prof = TrafficProfile(frame_size_b=1518, bidirectional=False, link_speed_bps=10e9)

    def gbps(kind: str, tso: bool, mq: bool) -> tuple[float, str]:
        r = SimModel(SimUnit(kind=kind, pmd_cores=2)).tcp_bps(prof, 4, 2, tso, mq)
        return r["bps"] / 1e9, r["bound"]

    for kind in ("host-vm", "vm-link-vm"):      # over a 10 GbE link: TSO lifts it to the link
        base, tso = gbps(kind, False, False), gbps(kind, True, False)
        assert 3.5 < base[0] < 6 and tso[1] == "link" and 9 < tso[0] < 10
    base, tso, mq = gbps("vm-vm", False, False), gbps("vm-vm", True, False), gbps("vm-vm", True, True)
    assert 3.5 < base[0] < 6 and 20 < tso[0] < 34 and 40 < mq[0] < 50    # seed 001 Figure 7
    assert "link" not in SimModel(SimUnit(kind="vm-vm")).tcp_bps(prof, 1, 1, True, True)["limits_bps"]


def test_tcp_table_row_shows_scenario_settings_and_accelerator() -> None:
    from types import SimpleNamespace

    from nfvperf.methods import TcpResult
    note, cols = TcpResult.TABLE.note, list(TcpResult.TABLE.columns)

    def row(t, d):               # the test's name is the table's first cell
        return TcpResult.from_dict(d).table_row(t.name)
    d = {"streams": 2, "processes": 2, "duration_s": 5.0, "mean_throughput_bps": 4.15e8,
         "throughput_bps": [4.15e8], "retransmits": [1813], "tso": True, "multiqueue": True,
         "scenario": "vm-vm", "guest_accel": "tcg",
         "interface_settings": {"vm:vm0/eth0": {"tso": "on", "queues": 2},
                                "vm:vm1/eth0": {"tso": "on", "queues": 2}}}
    r = dict(zip(cols, row(SimpleNamespace(name="t"), d)))
    assert r["Scenario"] == "vm-vm" and r["TSO"] == "on" and r["MQ"] == "true (2 q)"
    assert r["Goodput Gbps (mean)"] == "0.415" and r["Guest accel"] == "TCG"
    r = dict(zip(cols, row(SimpleNamespace(name="t"), {"streams": 1, "tso": False})))
    assert r["TSO"] == "off" and r["MQ"] == "—" and r["Guest accel"] == "—" and r["Scenario"] == "—"
    assert "TCG" in note and "vm-link-vm" in note
