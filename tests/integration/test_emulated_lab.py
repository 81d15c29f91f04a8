"""The two-server lab on emulated NICs (issue 27 item 5): a tester guest and a DUT guest, cabled
NIC to NIC by QEMU, run the shape of every seed lab end to end the way a user does::

    nfvperf validate lab-emulated --testbed testbeds/emulated-lab.yaml
    nfvperf run lab-emulated --testbed testbeds/emulated-lab.yaml --tg tgen

    tester guest: tgen -a 0000:00:04.0 -a 0000:00:05.0   (virtio-net-pci mq=on, uio_pci_generic)
                      |  multi-queue taps joined by tc mirred in <tag>-lab  |
    DUT guest:    OVS-DPDK, 2 PMD threads, type=dpdk ports dpdk-devargs=0000:00:04.0 / 00:05.0
                  then l3fwd -a 0000:00:04.0 -a 0000:00:05.0 (LPM)
    both guests:  sshd on a management NIC (0000:00:0c.0, the kernel's virtio-net) whose tap
                  is in <tag>-lab; nfvperf logs in as to a server (SshHost), once per guest

The guests are reached as a real lab's hosts are: every process, file and tgen's control socket
goes through nfvperf's SSH host (paramiko, the agent's ``guard`` and ``relay``); the serial shell
only binds the NICs at boot and takes the leftover check before power-off.

One run, two topologies (seed 000's PHY-OVS-PHY at 64 B, then the l3fwd PHY-PHY baseline), both
``port_kind: pci``; the guests boot once.  Asserted, from the stored run:

* both tests passed with a throughput result; the hosts are the guests (``vm:tester``,
  ``vm:dut``), each guest's preflight found its programs (tgen; OVS-DPDK's ovs-vswitchd-dpdk and
  ovsdb-server in the image) and its NICs bound;
* the guests were SSH hosts (``via: ssh`` at their management addresses, 10.254.<i>.2 in the
  run's namespace), each guest's sshd accepted exactly one login for the whole run (one
  connection per host, reused), and no process was started through a serial shell;
* OVS: its PCI NICs are ``type=dpdk`` ports with ``dpdk-devargs=<pci>``, its EAL options carry no
  ``--no-pci``, 2 PMD threads (two CPUs in its pmd-cpu-mask and in its CPU plan), 2 RX queues
  per port;
* l3fwd: ``-a <pci>`` for both NICs, no ``--no-pci``, its binary the guest's copy of this
  checkout's build; tgen: ``-a <pci>``, no ``--no-pci``;
* each QEMU's NICs are multi-queue taps (``queues=2``, ``mq=on,rss=on``) in the run's namespace,
  which carried the trials and dropped nothing (``cables.json``: the taps' kernel counters);
* per stored trial and port, what tgen sent is what the DUT received on that port and what tgen
  received is what the DUT sent (OVS's port counters, l3fwd's telemetry read in the guest);
* nothing is left behind: in each guest, before it powered off (``guests-left.json``, written by
  ``TestbedGuests.stop``: no process with the run's tag, no file named after it in the work
  directory, hugetlbfs, DPDK's runtime directory or /tmp, no hugepage in use); on this machine,
  no QEMU, tgen or stand-in process of the tag, no hugepage file or DPDK directory of it
  (``leak_check``), no socket, initramfs copy or login key in the run directory, no cables'
  namespace.

Under TCG (this machine: /dev/kvm cannot boot a stock guest) every vCPU is a thread of this
2-CPU host: PMDs, tgen's lcores and l3fwd share its CPUs, so the suite's trials are 1 s at
0.02 % of 10GE at most.  One guest boot pair and both searches took 2 min 10 s to 2 min 50 s
here through the serial shells, 85 s over SSH (the machine shared with other jobs).
"""
from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.root, pytest.mark.slow]

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cli_runs import REPO, export, nfvperf, run_suite  # noqa: E402
from test_pci_emulated import guest_image  # noqa: E402,F401  (the fixture: the image, built once)

TESTBED = REPO / "testbeds" / "emulated-lab.yaml"
SUITE = REPO / "suites" / "lab-emulated.yaml"
PCI = ["0000:00:04.0", "0000:00:05.0"]


def _need() -> None:
    from nfvperf.dut.l3fwd import find_l3fwd
    from nfvperf.tg.tgen import find_tgen_binary
    for prog in ("qemu-system-x86_64", "socat"):
        if shutil.which(prog) is None:
            pytest.skip(f"{prog} not installed (scripts/install-deps.sh)")
    for find in (find_tgen_binary, find_l3fwd):
        try:
            find()
        except FileNotFoundError as e:
            pytest.skip(f"not built (make build): {e}")


def _topology(env: dict, dut: str) -> dict:
    return next(t["environment"] for t in env["topologies"]
                if t.get("environment") and t["environment"]["dut"]["dut"] == dut)


@pytest.mark.usefixtures("guest_image")
def test_emulated_lab_runs_phy_ovs_phy_and_l3fwd(tmp_path, leak_check):
    from nfvperf.host.netns import list_netns
    _need()
    v = nfvperf("validate", str(SUITE), "--testbed", str(TESTBED), timeout=120)
    assert v.returncode == 0 and "testbed emulated-lab" in v.stdout and "2 of 2" in v.stdout, \
        v.stdout + v.stderr
    t0 = time.monotonic()
    p, run_id, db = run_suite(SUITE, tmp_path, leak_check, "--testbed", str(TESTBED),
                              timeout=420)
    took = time.monotonic() - t0
    out = p.stdout + p.stderr
    print(f"\n[lab] nfvperf run took {took:.1f} s:\n" + "\n".join(
        ln for ln in out.splitlines() if "testbed emulated-lab:" in ln or " 64 B: " in ln))
    assert "guest tester up" in out and "guest dut up" in out, out
    assert "generator on vm:tester, DUT on vm:dut" in out, out

    exp = export(run_id, db)
    env = exp["run"]["environment"]
    assert env["testbed_hosts"]["roles"] == {**env["testbed_hosts"]["roles"],
                                             "generator": "vm:tester", "dut": "vm:dut"}
    pre = {(r["host"], r["check"]): r["status"] for r in env["testbed_hosts"]["preflight"]}
    for row in (("tester", "binary:tgen"), ("dut", "binary:ovs-vswitchd-dpdk"),
                ("dut", "binary:ovsdb-server"), ("tester", "pci:p0"), ("dut", "pci:p1")):
        assert pre.get(row) == "ok", (row, pre)
    # reached over SSH, as a real lab's hosts are
    for i, guest in enumerate(("tester", "dut")):
        h = env["testbed_hosts"]["hosts"][guest]
        assert (h.get("via"), h.get("address"), h.get("user")) == \
            ("ssh", f"10.254.{i}.2", "root"), h

    tests = {t["name"]: t for t in exp["tests"]}
    assert set(tests) == {"phy-ovs-phy", "phy-phy-l3fwd"}, list(tests)
    for name, t in tests.items():
        assert t["status"] == "passed" and t["results"], (name, t["status"], t.get("reason"))
        assert len(t["trials"]) >= 2, f"{name}: the search ran no trial after its calibration"
        _counts_equal_at_both_ends(name, t["trials"])

    # OVS-DPDK in the DUT guest: type=dpdk PCI ports, no --no-pci, 2 PMD threads
    ovs = _topology(env, "ovs-dpdk")["dut"]
    cfg = ovs["other_config"]
    assert "--no-pci" not in cfg["dpdk-extra"], cfg
    assert bin(int(cfg["pmd-cpu-mask"], 16)).count("1") == 2, cfg
    assert len(ovs["cpus"]) == 2, ovs["cpus"]
    for i, addr in enumerate(PCI):
        port = ovs["ports"][f"phy{i}"]
        assert port["kind"] == "dpdk" and port["dpdk-devargs"] == addr, port
        assert port["n_rxq"] == "2", port               # 2 RX queues per NIC, one per PMD

    # l3fwd and tgen on -a <pci>, no --no-pci
    l3 = _topology(env, "l3fwd")
    for argv in (l3["dut"]["argv"], l3["tgen"]["argv"], _topology(env, "ovs-dpdk")["tgen"]["argv"]):
        line = " ".join(argv)
        assert "--no-pci" not in argv and f"-a {PCI[0]} -a {PCI[1]}" in line, line
    for argv in (l3["tgen"]["argv"], _topology(env, "ovs-dpdk")["tgen"]["argv"]):
        ports = [a for a in argv if a.startswith(("0:", "1:"))]
        assert len(ports) == 2 and all("rxq=2" in a and "txq=2" in a for a in ports), argv
    assert l3["dut"]["argv"][0] == "/usr/bin/nfvperf-l3fwd", l3["dut"]["argv"][:3]

    # the NICs: 2 queue pairs each with RSS, on multi-queue taps in the run's namespace
    tag = exp["run"]["tag"]
    run_dir = tmp_path / "out" / "runs" / tag
    for guest in ("tester", "dut"):
        qemu = (run_dir / f"qemu-{guest}.log").read_text().splitlines()[0]
        assert f"ip netns exec {tag}-lab " in qemu, qemu
        for i in (0, 1):
            assert f"tap,id=net{i},ifname={tag}c{i}{guest[0]},script=no,downscript=no,vhost=off," \
                   "queues=2" in qemu, qemu
            dev = next(w for w in qemu.split() if w.startswith(f"virtio-net-pci,netdev=net{i},"))
            assert f"addr={4 + i:#x}" in dev and "mq=on,rss=on" in dev, dev

        # the management NIC: the kernel's virtio-net on a tap in the same namespace
        assert f"tap,id=mgmt,ifname={tag}m{'td'.index(guest[0])},script=no" in qemu, qemu
        assert "virtio-net-pci,netdev=mgmt,addr=0xc" in qemu, qemu

    # one SSH login per guest for the whole run, every process started over it (a process
    # started through the serial shell answers "PID=<pid>" there; the shell bound the NICs and
    # took the counts and leftovers, a handful of lines)
    logins = json.loads((run_dir / "guests-ssh.json").read_text())
    assert logins == {"tester": {"address": "10.254.0.2", "logins": 1},
                      "dut": {"address": "10.254.1.2", "logins": 1}}, logins
    for guest in ("tester", "dut"):
        shell = (run_dir / f"vm-{guest}-shell.log").read_text()
        assert "PID=" not in shell and shell.count("B@@") <= 10, shell[-2000:]

    cables = json.loads((run_dir / "cables.json").read_text())      # the taps' own counters
    assert sorted(cables) == sorted(f"{tag}c{i}{e}" for i in (0, 1) for e in "td"), cables
    for tap, st in cables.items():
        assert st["tx_packets"] > 0 and st["tx_dropped"] == 0, (tap, st)

    # nothing left in either guest (written just before each powered off) ...
    left = json.loads((run_dir / "guests-left.json").read_text())
    assert set(left) == {"tester", "dut"}, left
    for guest, what in left.items():
        assert what == {"processes": [], "files": [], "hugepages_in_use": 0}, (guest, what)
    # ... nor on this machine (and leak_check: processes, hugepage files, DPDK dirs by tag)
    stray = [str(f) for f in tmp_path.rglob("*") if f.suffix in (".sock", ".img", ".key")]
    assert not stray, f"left behind by the run: {stray}"
    assert not [n for n in list_netns() if tag in n], "the cables' namespace is left"


def _counts_equal_at_both_ends(name: str, trials: list) -> None:
    """Per stored trial and port: what tgen sent is what the DUT received on that port, what tgen
    received is what the DUT sent; no stream misrouted or duplicated."""
    for tr in trials:
        d = tr["detail"]
        duts, tgc = d["dut_counters"]["ports"], d["tg_counters"]
        assert tr["sent"] > 0, (name, tr)
        for i in (0, 1):
            st, dp = tgc[f"port{i}"]["stats"], duts[f"phy{i}"]
            assert st["opackets"] == dp["rx_packets"], (name, tr["load_pps"], i, st, dp)
            assert st["ipackets"] == dp["tx_packets"], (name, tr["load_pps"], i, st, dp)
        for s in d["streams"]:
            assert s["misrouted"] == 0 and s["duplicates"] == 0, (name, s)
        # tgen_cores: 2: every direction split over both workers, merged back into one stream
        cores = d["extra"]["tgen_cores"]
        assert cores["cores"] == 2 and cores["sub_streams"] == 2 and not cores["notes"], (name, cores)
        assert len(cores["directions"]) == 2 == len(d["streams"]), (name, cores)
        for dname, dr in cores["directions"].items():
            assert sorted(dr["tx_queues"]) == [0, 1] and len(set(dr["tx_lcores"])) == 2, (name, dname, dr)
