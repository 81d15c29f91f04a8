"""The real-NIC path (``port_kind: pci``) run end to end on emulated PCI NICs (issue 19 item 4).

    guest (QEMU): tgen -a 0000:00:04.0 -a 0000:00:05.0    (virtio-net-pci, bound to uio_pci_generic)
                        |  vhost-user  |
    host:         dpdk-testpmd io, net_vhost client ports (nfvperf's Testpmd DUT adapter)

The guest is :class:`nfvperf.vm.pci_guest.PciGuest`; nfvperf reaches it as a Host
(:class:`~nfvperf.vm.pci_guest.GuestPciHost`), so what runs there is the code a testbed's tester
host runs: ``TgenProcess`` with PCI ``PortSpec``s (``-a <addr>``, no ``--no-pci``) and the
testbed's per-host NIC preflight (``nfvperf.testbed.hosts.nic_pci_checks``) reading the guest's
own ``/sys/bus/pci``.  Asserted:

* preflight, against the guest's real sysfs, in the order a server goes through: NICs not bound
  (fresh boot), bound to the wrong driver (the kernel's virtio-pci), an address with no device,
  an address that is not a network device; each refused naming ``hosts.tester.nics.<nic>.pci``
  and the fix; then, bound to uio_pci_generic as ``testbed prepare`` binds them, ok.  The same
  for the single-host preflight's ``check_pci`` reading through the guest's host object;
* one trial over the path, counted at both ends: per direction, what tgen sent on a PCI port is
  what the host DUT received on that port's vhost-user socket, what tgen received is what the
  DUT transmitted towards it;
* cleanup: tgen's socket and DPDK runtime directory gone in the guest; then no QEMU, no vhost or
  control sockets, no hugepage files of the run on the host (and the ``leak_check`` fixture's
  process/hugepage/DPDK-directory check by tag).

The throughput search over the same path runs the way a user does: ``nfvperf run pci-guests
--testbed testbeds/emulated-pci-host.yaml`` (the tester guest's NICs cabled to this machine by
vhost-user, the testpmd DUT here), per stored trial the counts at both ends, nothing left.

Another test puts PCI at both ends the way a user does: ``nfvperf run pci-guests --testbed
testbeds/emulated-pci.yaml``, whose two ``guest:`` hosts nfvperf boots (a tester guest and a DUT
guest cabled NIC to NIC by QEMU), p2p built by ``nfvperf.topo`` with tgen in the tester and
nfvperf's Testpmd DUT adapter on ``-a <pci>`` in the DUT guest; per stored trial tgen's port
counters equal the DUT's, and nothing of the run is left.

Not here, because it needs hardware: vfio-pci behind an IOMMU (the guest has none and Debian's
kernel has no VFIO no-IOMMU mode: uio_pci_generic stands in) and SR-IOV VFs (no emulated NIC
here offers SR-IOV to a guest without an IOMMU); see docs/testbeds.md.
"""
from __future__ import annotations

import re
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

pytestmark = [pytest.mark.root, pytest.mark.slow]

HAVE_QEMU = shutil.which("qemu-system-x86_64") is not None
HAVE_TESTPMD = shutil.which("dpdk-testpmd") is not None
HAVE_SOCAT = shutil.which("socat") is not None

NEEDS_HARDWARE = ("vfio-pci behind an IOMMU and SR-IOV VFs need a physical NIC and VT-d/AMD-Vi: "
                  "the emulated path binds uio_pci_generic (docs/testbeds.md)")


@pytest.fixture(scope="module")
def guest_image():
    from nfvperf.vm import image
    return image.build()          # an ImageError fails the tests: it is nfvperf's own


def _need() -> Path:
    from nfvperf.tg.tgen import find_tgen_binary
    if not HAVE_QEMU:
        pytest.skip("qemu-system-x86_64 not installed (scripts/install-deps.sh)")
    if not HAVE_TESTPMD:
        pytest.skip("dpdk-testpmd not installed (scripts/install-deps.sh)")
    if not HAVE_SOCAT:
        pytest.skip("socat not installed (scripts/install-deps.sh)")
    try:
        return find_tgen_binary()
    except FileNotFoundError as e:
        pytest.skip(str(e))


def _testbed(addrs: list[str], extra: dict[str, str], tgen: str):
    """The testbed file a user would write for this set-up: the guest is the tester host with the
    two PCI NICs (plus ``extra`` NICs that are wrong on purpose), cabled to the DUT host's
    vhost-user ports."""
    from nfvperf.testbed.spec import TestbedSpec
    nics = [{"name": f"p{i}", "pci": a, "driver": "uio_pci_generic"} for i, a in enumerate(addrs)]
    nics += [{"name": n, "pci": a, "driver": "uio_pci_generic"} for n, a in extra.items()]
    return TestbedSpec(name="emulated-pci", hosts={
        "tester": {"role": "tester", "local": True, "nics": nics, "tgen": tgen},
        "dut": {"role": "dut", "local": True,
                "nics": [{"name": f"v{i}", "iface": f"vhu{i}"} for i in range(len(addrs))]}},
        links=[{"tester": f"tester.p{i}", "dut": f"dut.v{i}"} for i in range(len(addrs))])


def _rows(spec, host) -> dict[str, object]:
    """The testbed preflight's NIC rows of the tester host, read through ``host``."""
    from nfvperf.testbed.hosts import nic_pci_checks
    linked = [r for lk in spec.links for r in (lk.tester, lk.dut)] + \
        [f"tester.{n.name}" for n in spec.hosts["tester"].nics]
    return {r.check.split(":", 1)[1]: r
            for r in nic_pci_checks("tester", spec.hosts["tester"], host, "pci", linked)}


def test_pci_path_on_emulated_nics(run_ctx, guest_image):
    from nfvperf.dut.base import PortRef, VhostBackend
    from nfvperf.dut.testpmd import Testpmd
    from nfvperf.host import hugepages as hp
    from nfvperf.host.preflight import check_pci
    from nfvperf.testbed.hosts import TestbedHosts, topology_kwargs
    from nfvperf.tg.tgen import TgenMeasurer, TgenProcess
    from nfvperf.topo.ports import port_kind_class
    from nfvperf.trial import TrafficProfile
    from nfvperf.vm.pci_guest import GUEST_TGEN, PciGuest

    tgen_host_binary = _need()
    tracker = run_ctx.tracker
    s0, s1 = run_ctx.path("vhu0.sock"), run_ctx.path("vhu1.sock")
    guest = PciGuest(run_ctx, tracker, sockets=[s0, s1], name="tester", vcpus=2,
                     memory_mb=1024, guest_hugepages_mb=512, image=guest_image,
                     tgen=tgen_host_binary)
    dut_cls = type("HostDut", (Testpmd,), {"role": "dut", "__test__": False})
    dut = dut_cls(run_ctx, tracker, forward_mode="io", lcores="0@0,1@1", memory="in-memory",
                  mbufs=8192, name="testpmd-dut")
    dut.add_port(PortRef("dut0", VhostBackend(client=True), socket=s0))
    dut.add_port(PortRef("dut1", VhostBackend(client=True), socket=s1))
    t0 = time.monotonic()
    guest.start(wait=False)             # QEMU listens on s0, s1 ...
    dut.start()                         # ... the host end connects (net_vhost client=1)
    guest.wait_ready()
    print(f"\n[pci] guest up in {time.monotonic() - t0:.1f} s (accel {guest.accel}: "
          f"{guest.accel_reason}); NICs {guest.guest_nics}")
    host = guest.host
    addrs = guest.pci_addresses()
    assert guest.guest_nics == addrs, "the guest's NICs are not where the topology expects them"

    # -- preflight against the guest's sysfs ------------------------------------------------
    spec = _testbed(addrs, {"gone": "0000:00:1f.6", "bridge": "0000:00:00.0"}, GUEST_TGEN)
    rows = _rows(spec, host)
    local = {a: check_pci(a, host=host) for a in addrs + ["0000:00:1f.6", "0000:00:00.0"]}
    for a in addrs:                                   # the single-host preflight's own check
        assert local[a].status == "fail" and "driver (none)" in local[a].detail, local[a]
        assert f"dpdk-devbind.py --bind=vfio-pci {a}" in local[a].fix
    assert local["0000:00:1f.6"].status == "fail" and "no PCI device" in local["0000:00:1f.6"].detail
    assert local["0000:00:00.0"].status == "fail" and "not a network device" in \
        local["0000:00:00.0"].detail
    for n in ("p0", "p1"):                            # a fresh boot: nothing bound
        r = rows[n]
        assert r.status == "fail" and r.required, r
        assert f"hosts.tester.nics.{n}.pci" in r.detail and "no driver" in r.detail, r.detail
        assert "nfvperf testbed prepare" in r.fix and "uio_pci_generic" in r.fix, r.fix
    assert rows["gone"].status == "fail" and "no PCI device 0000:00:1f.6" in rows["gone"].detail
    assert "hosts.tester.nics.gone.pci" in rows["gone"].fix
    assert rows["bridge"].status == "fail" and "not a network device" in rows["bridge"].detail
    assert "hosts.tester.nics.bridge.pci" in rows["bridge"].fix

    guest.load_module("virtio_pci")                   # the kernel's driver takes the NICs
    rows = _rows(spec, host)
    for n in ("p0", "p1"):
        assert rows[n].status == "fail" and "bound to virtio-pci, not uio_pci_generic" in \
            rows[n].detail, rows[n]
    for a in addrs:
        c = check_pci(a, host=host)
        assert c.status == "fail" and "driver virtio-pci" in c.detail, c

    guest.bind(addrs, "uio_pci_generic")              # what testbed prepare does on a server
    rows = _rows(spec, host)
    for n in ("p0", "p1"):
        assert rows[n].status == "ok" and rows[n].ok, rows[n]
    for a in addrs:
        c = check_pci(a, host=host)
        assert c.status == "ok" and "driver uio_pci_generic" in c.detail, c

    # -- tgen on the PCI ports, in the guest, through the Host protocol -----------------------
    # the testbed path: the testbed's hosts (the guest as its tester) -> the topology's
    # arguments (tg_host, cabled links, tgen's path there) -> port_kind pci's ports -> tgen's
    # PortSpecs, as nfvperf.topo builds them for a run on a testbed
    hosts = TestbedHosts(spec)
    hosts.hosts["tester"] = host
    kw = topology_kwargs(spec, hosts)
    assert kw["tg_host"] is host and [lk["tester_pci"] for lk in kw["testbed_links"]] == addrs
    topo = SimpleNamespace(testbed_links=kw["testbed_links"], ports=[],
                           spec=SimpleNamespace(ports=2))
    hports = port_kind_class("pci")().create(topo, 2, dut_netns=None, tg_netns=None, mtu=1500)
    specs = [hp.tg_port_spec(i) for i, hp in enumerate(hports)]
    assert [ps.devargs for ps in specs] == addrs and all(ps.is_pci for ps in specs)
    tg = TgenProcess(specs, lcores="0@0,1@1", run_dir=run_ctx.run_dir, tag=run_ctx.tag,
                     binary=kw["tgen_binary"], hugepages=port_kind_class("pci").tgen_hugepages,
                     tracker=tracker, host=kw["tg_host"])
    tg.start()
    assert "--no-pci" not in tg.argv_used and ["-a", addrs[0]] == tg.argv_used[
        tg.argv_used.index("-a"):tg.argv_used.index("-a") + 2]
    ports = tg.info["ports"]
    assert [p["name"] for p in ports] == addrs and {p["driver"] for p in ports} == {"net_virtio"}
    assert all(p["link_up"] for p in ports), ports

    # one 1 s trial at 3 kfps per direction, counted at both ends (the throughput search over
    # this path runs from the testbed file: test_guest_cabled_to_this_machine_from_the_cli)
    m = TgenMeasurer(tg, [(0, 1)], dut_counters=lambda: {"ports": dut.raw_port_stats()})
    m.set_profile(TrafficProfile(frame_size_b=64, bidirectional=True, learning=False,
                                 drain_s=0.5, link_speed_bps=10e9))
    t = m.measure(1.0, 3000)
    print(f"[pci] one trial, 3 kfps per direction: sent {t.sent}, received {t.received}")
    d = t.dut_counters["ports"]                       # this trial's delta at the host end
    for s in t.streams:
        assert s.sent == d[s.tx_port]["rx_packets"], (s.tx_port, s.sent, d)
        assert s.received == d[s.rx_port]["tx_packets"], (s.rx_port, s.received, d)
        assert s.misrouted == 0 and s.duplicates == 0, s
    assert t.sent == sum(s.sent for s in t.streams) > 0

    # -- cleanup ------------------------------------------------------------------------------
    sock, prefix = tg.socket_path, tg.file_prefix
    tg.stop()
    assert not host.exists(sock) and not host.exists(f"/var/run/dpdk/{prefix}")
    assert host.cleanup_tag(run_ctx.tag)["processes"] == [], "a tagged process outlived tgen.stop()"
    qemu_pid = guest.proc.pid
    dut.stop()
    guest.stop()
    guest.stop()                                      # idempotent
    assert not Path(f"/proc/{qemu_pid}").exists() or \
        Path(f"/proc/{qemu_pid}/stat").read_text().split()[2] in ("Z", "X")
    for p in (s0, s1, guest.ctl_sock, guest.qmp_sock, guest.rpc_sock, guest.initrd):
        assert not p.exists(), f"left behind: {p}"
    assert not [f for f in hp.snapshot_files() if run_ctx.tag in f]


def test_pci_guests_testbed_run_from_the_cli(tmp_path, leak_check, guest_image):
    """The user's path: ``nfvperf validate`` and ``nfvperf run pci-guests --testbed
    testbeds/emulated-pci.yaml --tg tgen``: nfvperf boots both guests (tester and DUT, cabled NIC
    to NIC), binds their NICs, runs p2p with tgen in one and its testpmd DUT adapter in the other
    (both ``port_kind: pci``), a binary search of 1 s trials, stores it, stops the guests.
    Per stored trial, per port: what tgen sent is what the DUT received, what tgen received is
    what the DUT sent.  Nothing of the run is left (processes, sockets, the initramfs copies)."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from cli_runs import REPO, export, nfvperf, run_suite

    _need()
    testbed = str(REPO / "testbeds" / "emulated-pci.yaml")
    v = nfvperf("validate", "pci-guests", "--testbed", testbed, timeout=120)
    assert v.returncode == 0 and "testbed emulated-pci" in v.stdout and "ok" in v.stdout, \
        v.stdout + v.stderr
    t0 = time.monotonic()
    p, run_id, db = run_suite(REPO / "suites" / "pci-guests.yaml", tmp_path, leak_check,
                              "--testbed", testbed, timeout=600)
    print(f"\n[pci-cli] nfvperf run took {time.monotonic() - t0:.1f} s:\n" + p.stdout[-1500:]
          + p.stderr[-1500:])
    out = p.stdout + p.stderr
    assert "guest tester up" in out and "guest dut up" in out and "bound to uio_pci_generic" in out
    exp = export(run_id, db)
    env = exp["run"]["environment"]
    roles = env["testbed_hosts"]["roles"]
    assert roles["generator"] == "vm:tester" and roles["dut"] == "vm:dut", roles
    pre = {(r["host"], r["check"]): r["status"] for r in env["testbed_hosts"]["preflight"]}
    assert pre[("tester", "pci:p0")] == pre[("dut", "pci:p1")] == "ok", pre
    assert pre[("dut", "binary:dpdk-testpmd")] == pre[("tester", "binary:tgen")] == "ok", pre
    topo = env["topologies"][0]["environment"]
    pci = ["-a", "0000:00:04.0", "-a", "0000:00:05.0"]
    for argv in (topo["dut"]["argv"], topo["tgen"]["argv"]):   # port_kind pci at both ends
        assert "--no-pci" not in argv and " ".join(pci) in " ".join(argv), argv
    for h in ("dut", "tester"):         # each host's CPU plan from its own (the guest's) sysfs
        assert topo["pinning_hosts"][h]["topology"]["host"] == h, topo["pinning_hosts"]
    (test,) = exp["tests"]
    assert test["status"] == "passed" and test["results"], (test["status"], test["reason"])
    trials = test["trials"]
    assert len(trials) >= 2, "the search ran no trial after its calibration"
    _counts_equal_at_both_ends(trials, tmp_path)


def _counts_equal_at_both_ends(trials: list, tmp_path: Path) -> None:
    """Per stored trial and port: what tgen sent is what the DUT received on that port, what tgen
    received is what the DUT sent; no stream sent more than its DUT port took, none misrouted or
    duplicated; and the run left no socket or image copy under ``tmp_path``."""
    for tr in trials:
        d = tr["detail"]
        duts, tgc = d["dut_counters"]["ports"], d["tg_counters"]
        assert tr["sent"] > 0
        for i in (0, 1):
            st = tgc[f"port{i}"]["stats"]
            assert st["opackets"] == duts[f"phy{i}"]["rx_packets"], (tr["load_pps"], i, st, duts)
            assert st["ipackets"] == duts[f"phy{i}"]["tx_packets"], (tr["load_pps"], i, st, duts)
        for s in d["streams"]:
            assert s["sent"] <= duts[f"phy{s['tx_port']}"]["rx_packets"], s
            assert s["misrouted"] == 0 and s["duplicates"] == 0, s
    left = [str(f) for f in tmp_path.rglob("*") if f.suffix in (".sock", ".img")]
    assert not left, f"left behind by the run (its run dir is under {tmp_path}): {left}"


def test_guest_cabled_to_this_machine_from_the_cli(tmp_path, leak_check, guest_image):
    """``nfvperf run pci-guests --testbed testbeds/emulated-pci-host.yaml --tg tgen``: nfvperf
    boots the tester guest with its NICs on vhost-user sockets (a stand-in testpmd holds them
    while it boots), binds them; tgen runs there on port_kind pci, the testpmd DUT on this
    machine on a net_vhost client per cable.  Per stored trial and port: what tgen sent is what
    the DUT here received on that cable, what tgen received is what the DUT sent.  Nothing of
    the run is left (QEMU, the DUT and the stand-in, sockets, the initramfs copy, DPDK runtime
    directories and hugepage files of its tag: leak_check)."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from cli_runs import REPO, export, run_suite

    _need()
    testbed = str(REPO / "testbeds" / "emulated-pci-host.yaml")
    t0 = time.monotonic()
    p, run_id, db = run_suite(REPO / "suites" / "pci-guests.yaml", tmp_path, leak_check,
                              "--testbed", testbed, timeout=600)
    print(f"\n[pci-host] nfvperf run took {time.monotonic() - t0:.1f} s:\n" + p.stdout[-1200:]
          + p.stderr[-1200:])
    out = p.stdout + p.stderr
    assert "guest tester up" in out and "bound to uio_pci_generic" in out, out
    assert "generator on vm:tester, DUT on local" in out, out
    exp = export(run_id, db)
    env = exp["run"]["environment"]
    assert env["testbed_hosts"]["roles"]["generator"] == "vm:tester"
    pre = {(r["host"], r["check"]): r["status"] for r in env["testbed_hosts"]["preflight"]}
    assert pre[("tester", "pci:p0")] == pre[("tester", "pci:p1")] == "ok", pre
    assert pre[("dut", "binary:dpdk-testpmd")] == "ok", pre
    topo = env["topologies"][0]["environment"]
    dut_argv, tg_argv = " ".join(topo["dut"]["argv"]), " ".join(topo["tgen"]["argv"])
    assert "-a 0000:00:04.0 -a 0000:00:05.0" in tg_argv and "--no-pci" not in tg_argv, tg_argv
    for i in (0, 1):                    # the DUT here: a vhost-user client on each cable
        assert f"net_vhost{i},iface=" in dut_argv and f"cable{i}.sock" in dut_argv, dut_argv
    assert "client=1" in dut_argv, dut_argv
    (test,) = exp["tests"]
    assert test["status"] == "passed" and test["results"], (test["status"], test["reason"])
    trials = test["trials"]
    assert trials, "no trial stored"
    _counts_equal_at_both_ends(trials, tmp_path)
    tag = re.search(r"run \d+ \((nfv[0-9a-f]{6})\)", out).group(1)  # type: ignore[union-attr]
    assert (tmp_path / "out" / "runs" / tag / "vhost-standin.log").is_file(), "no stand-in ran"
    assert not Path(f"/var/run/dpdk/{tag}-standin").exists(), "the stand-in's DPDK dir is left"


@pytest.mark.skip(reason=NEEDS_HARDWARE)
def test_pci_path_vfio_and_sriov_need_hardware():
    """Placeholder so the report of a run lists what this path does not prove."""

