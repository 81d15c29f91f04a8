"""Testpmd counters are deltas from the last clear_counters() snapshot.

testpmd's own `clear port stats` races the af_packet PMD, which adds to its counters on every
poll: the old value can come back after the clear (seen in CI: 301 of 300 frames).  The adapter
therefore never clears; it subtracts a snapshot."""
from __future__ import annotations

from pathlib import Path

from nfvperf.dut.base import PortRef
from nfvperf.dut.testpmd import Testpmd
from nfvperf.host.run import ResourceTracker, RunContext


def _stats(rx0: int, tx1: int) -> dict[int, dict[str, int]]:
    z = {"rx_packets": 0, "rx_missed": 0, "rx_bytes": 0, "rx_errors": 0, "rx_nombuf": 0,
         "tx_packets": 0, "tx_errors": 0, "tx_bytes": 0, "rx_dropped": 0, "tx_dropped": 0}
    return {0: dict(z, rx_packets=rx0, rx_bytes=64 * rx0), 1: dict(z, tx_packets=tx1, tx_bytes=64 * tx1)}


def test_counters_are_deltas_since_clear_and_a_restart_starts_from_zero(tmp_path: Path, monkeypatch) -> None:
    run = RunContext(run_dir=tmp_path)
    pmd = Testpmd(run, ResourceTracker(run))
    pmd.ports = [PortRef("phy0", ifname="d0"), PortRef("phy1", ifname="d1")]
    seq = iter([_stats(1, 1),            # clear_counters(): the warm-up frame already counted
                _stats(301, 301),        # counters(): 300 more
                _stats(7, 7)])           # after a restart testpmd counts from zero
    monkeypatch.setattr(pmd, "raw_port_stats", lambda: next(seq))
    pmd.clear_counters()
    c = pmd.counters()
    assert c["ports"]["phy0"]["rx_packets"] == 300 and c["ports"]["phy1"]["tx_packets"] == 300
    assert c["ports"]["phy0"]["rx_bytes"] == 300 * 64
    assert c["total"]["rx_packets"] == 300 and c["total"]["tx_packets"] == 300
    pmd._baseline = {}                   # what start() does for a (re)started testpmd
    assert pmd.counters()["ports"]["phy0"]["rx_packets"] == 7
