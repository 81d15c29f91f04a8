"""TCP inside VMs (seed 001, issue 19 item 3) on real parts: QEMU guests (TCG where /dev/kvm cannot
boot a stock kernel) with kernel virtio-net on vhost-user ports of OVS-DPDK, iperf3 started in the
guests through their control port.

* scenario 3, kind ``vm-vm`` (client VM and server VM on one bridge), built once: a baseline trial
  (TSO off, one queue) and a tuned one (TSO on, both queues), each with two iperf3 processes
  pinned to vCPU 0 and 1 (``-A``); Gbit/s from iperf3's own JSON read back from the guests, the
  settings read back with ``ethtool -k`` / ``ethtool -l`` in the guests, the guests' NIC counters
  moved, and nothing of the run left (``leak_check``).
* scenario 1, kind ``host-vm`` (iperf3 clients in a host namespace -> a server VM), through the
  runner (``nfvperf run --tg iperf3``): the stored result has goodput > 0, the scenario and the
  guest's accelerator, and the report's TCP table and header say which accelerator ran.

Trials are a few seconds; nothing asserts a speed (the CPUs are shared).
"""
from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HAVE_QEMU = shutil.which("qemu-system-x86_64") is not None
HAVE_OVS = shutil.which("ovs-vsctl") is not None
REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(not HAVE_QEMU, reason="qemu-system-x86_64 not installed"),
              pytest.mark.skipif(not HAVE_OVS, reason="Open vSwitch not installed")]


@pytest.fixture(scope="module", autouse=True)
def guest_image():
    """The guest image (built once from Debian packages, then cached)."""
    from nfvperf.vm import image
    return image.build()          # an ImageError fails the tests: it is nfvperf's own


def _ethtool(guest, *args: str) -> str:
    return guest.run_argv(["ethtool", *args, guest.ifname]).stdout


def test_vm_vm_tso_and_multiqueue_inside_the_guests(run_ctx) -> None:
    from nfvperf import topo
    from nfvperf.topo.spec import TopologySpec

    spec = TopologySpec(kind="vm-vm", vm={"vcpus": 2, "memory_mb": 512},
                        ovs={"pmd_maxsleep_us": 500})
    with topo.build(spec, run_ctx, start_tgen=False) as t:
        client, server = t.guests
        print(f"\n[tcp-vm] guests up in {[g.boot_s for g in t.guests]} s, accel "
              f"{[g.accel for g in t.guests]} ({client.accel_reason})")
        assert client.ifname and server.ifname
        assert client.queues == server.queues == 2       # QEMU side: mq=on, 2 queue pairs
        m = t.tcp_measurer({})
        assert m.path_info["guest_accel"] in ("kvm", "tcg")
        runs = {}
        for tso, mq in ((False, False), (True, True)):
            applied = m.apply_tcp_settings(tso=tso, multiqueue=mq)
            # read back by ethtool inside each guest, raw
            for g in t.guests:
                k = _ethtool(g, "-k")
                assert re.search(rf"^tcp-segmentation-offload: {'on' if tso else 'off'}$", k, re.M), k
                lq = _ethtool(g, "-l")
                cur = lq.split("Current hardware settings")[1]
                assert re.search(rf"Combined:\s+{2 if mq else 1}\b", cur), lq
                assert applied[f"{g.iface}/{g.ifname}"]["queues"] == (2 if mq else 1)
            before = {g.vnf_name: g.counters()["total"] for g in t.guests}
            r = m.measure_tcp(duration_s=1, streams=2, processes=2, pin_cores=[0, 1], omit_s=0)
            after = {g.vnf_name: g.counters()["total"] for g in t.guests}
            runs[(tso, mq)] = r
            print(f"[tcp-vm] tso {tso} mq {mq}: {r.receiver_bps / 1e9:.3f} Gbit/s "
                  f"({[round(p.receiver_bps / 1e9, 3) for p in r.per_process]}), retransmits "
                  f"{r.retransmits}, wall {r.wall_s:.1f} s")
            assert r.valid and not r.errors, r.errors
            assert len(r.per_process) == 2
            for i, p in enumerate(r.per_process):
                assert p.receiver_bps > 0 and p.receiver_bytes > 0 and p.seconds > 0
                assert p.streams == 2
                # iperf3 ran in the guests, pinned to vCPU i (the seed's Table 5)
                assert p.client_cmd[0] == client.iface and p.server_cmd[0] == server.iface
                assert p.client_cmd[p.client_cmd.index("-A") + 1] == str(i)
                assert p.server_cmd[p.server_cmd.index("-A") + 1] == str(i)
            assert r.receiver_bps == pytest.approx(sum(p.receiver_bps for p in r.per_process))
            # the bytes crossed the guests' NICs
            sent = after[client.vnf_name]["tx_packets"] - before[client.vnf_name]["tx_packets"]
            got = after[server.vnf_name]["rx_packets"] - before[server.vnf_name]["rx_packets"]
            assert sent > 100 and got > 100, (before, after)
            assert r.path["interface_settings"] == applied
            assert r.path["scenario"] == "vm-vm" and r.path["userspace_tso"] is True
        env = t.environment()
        assert [v["role"] for v in env["vnfs"]] == ["tcp", "tcp"]
        assert all(v["kind"] == "vm" and v["accel"] in ("kvm", "tcg") for v in env["vnfs"])
        pids = [g.proc.pid for g in t.guests]
    # everything of the topology is gone (leak_check checks processes, netns, hugepage files)
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or \
            Path(f"/proc/{pid}/stat").read_text().split()[2] in ("Z", "X")


def test_host_vm_through_the_runner(tmp_path, leak_check) -> None:
    suite = tmp_path / "tcp-host-vm.yaml"
    suite.write_text(textwrap.dedent("""\
        name: tcp-host-vm
        topology:
          kind: host-vm
          dut: ovs-dpdk
          ovs: {pmd_maxsleep_us: 500}
          vm: {vcpus: 1, memory_mb: 512}
        traffic: {frame_sizes: [1518], bidirectional: false}
        tests:
          - {method: tcp, name: pinned, processes: 1, streams: 2, pin_cores: [0], duration_s: 1,
             omit_s: 0, tso: false}
          - {method: tcp, name: two-clients, processes: 2, streams: 1, duration_s: 1, omit_s: 0}
        """))
    db = tmp_path / "r.db"
    p = subprocess.run([sys.executable, "-m", "nfvperf", "run", str(suite), "--tg", "iperf3",
                        "--db", str(db), "--out", str(tmp_path / "out"), "--no-progress"],
                       capture_output=True, text=True, cwd=REPO, timeout=900)
    m = re.search(r"run \d+ \((nfv[0-9a-f]{6})\)", p.stdout)
    if m:
        leak_check.watch(m.group(1))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    con = sqlite3.connect(db)
    rows = con.execute("select t.name, t.status, r.data from tests t join results r on r.test_id = t.id "
                       "order by t.id").fetchall()
    con.close()
    assert [(n, s) for n, s, _ in rows] == [("pinned", "passed"), ("two-clients", "passed")], rows
    for name, _, data in rows:
        d = json.loads(data)
        print(f"\n[tcp-vm] host-vm {name}: {d['mean_throughput_bps'] / 1e9:.3f} Gbit/s, accel "
              f"{d['guest_accel']}")
        assert d["mean_throughput_bps"] > 0 and d["scenario"] == "host-vm"
        assert d["guest_accel"] in ("kvm", "tcg")
    pinned = json.loads(rows[0][2])
    assert list(pinned["interface_settings"].values())[0]["tso"].startswith("off")
    rep = subprocess.run([sys.executable, "-m", "nfvperf", "report", "1", "--db", str(db)],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert rep.returncode == 0, rep.stderr
    accel = json.loads(rows[0][2])["guest_accel"]
    assert "host-vm" in rep.stdout and accel.upper() in rep.stdout
    assert re.search(rf"VM accelerator\W+{accel.upper()}", rep.stdout), rep.stdout[:3000]
