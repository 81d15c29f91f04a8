"""The tcp method's ``tso`` / ``multiqueue`` params on real veths (root, iperf3, ethtool): each
setting is applied with ethtool on every veth end of the path, read back independently here, and
a real iperf3 run follows.  About 20 s."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from nfvperf.methods import tcp
from nfvperf.tg.iperf3 import Iperf3Measurer
from nfvperf.trial import MeasurerError, TrafficProfile

pytestmark = [pytest.mark.root, pytest.mark.no_polling,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)"),
              pytest.mark.skipif(not all(shutil.which(p) for p in ("iperf3", "ip", "ethtool")),
                                 reason="needs iperf3, iproute2 and ethtool"),
              pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="veth allows 2 queues on 2+ CPUs")]


def _ethtool(ns: str, *args: str) -> str:
    return subprocess.run(["ip", "netns", "exec", ns, "ethtool", *args], stdout=subprocess.PIPE,
                          text=True, check=True).stdout


def _tso(ns: str, ifc: str) -> str:
    line = next(x for x in _ethtool(ns, "-k", ifc).splitlines() if x.startswith("tcp-segmentation-offload:"))
    return line.split(":", 1)[1].split()[0]


def _queues(ns: str, ifc: str) -> tuple[int, int]:
    cur = _ethtool(ns, "-l", ifc).split("Current hardware settings:")[1]
    vals = {k.strip(): v.strip() for k, _, v in (x.partition(":") for x in cur.splitlines()) if v}
    return int(vals["RX"]), int(vals["TX"])


def test_tso_and_multiqueue_params_are_applied_on_the_veths() -> None:
    m = Iperf3Measurer.standalone(bridge=True)
    ifaces = list(m.ifaces)
    assert len(ifaces) == 4          # client, server and the two bridge ports
    got = {}
    try:
        for tso in (False, True):
            for mq in (1, 2):
                p = tcp.TcpParams(duration_s=2, omit_s=0, streams=2, tso=tso, multiqueue=mq)
                r = tcp.run(m, TrafficProfile(), p)
                for ns, ifc in ifaces:                         # what the kernel says now
                    assert _tso(ns, ifc) == ("on" if tso else "off"), (ns, ifc)
                    assert _queues(ns, ifc) == (mq, mq), (ns, ifc)
                    st = r.interface_settings[f"{ns}/{ifc}"]    # and what the result recorded
                    assert st["tso"].split()[0] == ("on" if tso else "off") and st["queues"] == mq
                assert m.environment()["path"]["interface_settings"] == r.interface_settings
                assert r.mean_throughput_bps and r.mean_throughput_bps > 0
                got[(tso, mq)] = r.mean_throughput_bps / 1e9
        # more queues than the veth allows: a clear error naming the field
        with pytest.raises(MeasurerError, match=r"params\.multiqueue: 64 queues asked but .* allows at most"):
            tcp.run(m, TrafficProfile(), tcp.TcpParams(duration_s=1, omit_s=0, multiqueue=64))
    finally:
        m.close()
    for (tso, mq), gbps in got.items():     # no ordering asserted: 2 shared CPUs are noisy
        print(f"tso={'on' if tso else 'off'} queues={mq}: {gbps:.2f} Gbit/s")


SUITE = """\
name: tcp-axes
topology: {kind: p2p, dut: linux-bridge, ports: 2}
traffic: {frame_sizes: [1518], bidirectional: false}
tests:
  - method: tcp
    name: axes
    streams: 2
    duration_s: 2
    omit_s: 0
    study:
      axes: {tso: [false, true], multiqueue: [1, 2]}
"""


def test_study_axes_through_the_linux_bridge(tmp_path, leak_check) -> None:
    """``nfvperf run --tg iperf3`` of a tso x multiqueue study through a real DUT (Linux bridge):
    every unit records what its client/server interfaces read back, and measures goodput."""
    import json
    import re
    import sys
    from pathlib import Path
    suite = tmp_path / "axes.yaml"
    suite.write_text(SUITE)
    db = f"sqlite:///{tmp_path / 'store.db'}"
    repo = Path(__file__).resolve().parents[2]
    run = [sys.executable, "-m", "nfvperf"]
    p = subprocess.run([*run, "run", str(suite), "--tg", "iperf3", "--db", db, "--out",
                        str(tmp_path / "out"), "--no-progress"], capture_output=True, text=True,
                       cwd=repo, timeout=120)
    m = re.search(r"run (\d+) \((nfv[0-9a-f]{6})\)", p.stdout + p.stderr)
    assert m, p.stdout + p.stderr
    leak_check.watch(m.group(2))
    assert p.returncode == 0, p.stdout + p.stderr
    e = subprocess.run([*run, "export", m.group(1), "--format", "json", "--db", db],
                       capture_output=True, text=True, cwd=repo, timeout=60)
    doc = json.loads(e.stdout)
    tests = [t for t in doc["tests"] if t["method"] == "tcp"]
    assert len(tests) == 4
    for t in tests:
        assert t["status"] == "passed", t
        axes = t["study"]["axes"]
        data = t["results"][0]["data"]
        settings = data["interface_settings"]
        assert len(settings) == 2                  # the client and the server end
        for st in settings.values():
            assert st["tso"].split()[0] == ("on" if axes["tso"] else "off")
            assert st["queues"] == axes["multiqueue"]
        assert t["trials"][0]["detail"]["extra"]["tcp"]["path"]["interface_settings"] == settings
        assert data["mean_throughput_bps"] > 0
        print(f"p2p linux-bridge tso={axes['tso']} queues={axes['multiqueue']}: "
              f"{data['mean_throughput_bps'] / 1e9:.2f} Gbit/s")
