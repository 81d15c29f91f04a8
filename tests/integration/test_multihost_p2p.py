"""p2p across two hosts over SSH (issue 19 item 4: p2p ``testbed_ready``, the testpmd DUT adapter
``runs_remote``): tgen on the tester host, nfvperf's Testpmd DUT adapter on the DUT host, started
through its host object on the cabled links' interfaces (``port_kind: af_packet``), its console
and counters over SSH.  Counts match at tgen and testpmd; testpmd's hugepage files and DPDK
runtime directory are removed on the DUT host; nothing is left on either host.  (The same
adapter in a QEMU guest on PCI NICs: test_pci_emulated.py.)"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))   # testbed_hosts, whatever the import mode
from test_multihost_run import _assert_hosts_clean, _netns_inode, _pid_netns_inode  # noqa: E402
from testbed_hosts import make_testbed, testbed_hosts  # noqa: E402,F401,F811

pytestmark = pytest.mark.root

if os.geteuid() != 0 or not shutil.which("dpdk-testpmd"):
    pytest.skip("needs root and dpdk-testpmd", allow_module_level=True)

from nfvperf.testbed.hosts import TestbedHosts, topology_kwargs  # noqa: E402
from nfvperf.topo import build  # noqa: E402
from nfvperf.topo.spec import TopologySpec  # noqa: E402
from nfvperf.trial import TrafficProfile  # noqa: E402


def test_multihost_p2p_testpmd_on_the_dut_host_counts_match(testbed_hosts, run_ctx, need_tgen):
    tb = testbed_hosts
    spec = tb.spec
    with TestbedHosts(spec) as hosts:
        kw = topology_kwargs(spec, hosts)
        tspec = TopologySpec(kind="p2p", dut="testpmd", port_kind="af_packet")
        with build(tspec, run_ctx, **kw) as topo:
            dut = topo.dut
            assert dut is not None and dut.host is hosts.hosts["dut1"]
            pid = dut.proc.pid
            assert _pid_netns_inode(pid) == _netns_inode(tb.hosts["dut1"].netns)
            assert _pid_netns_inode(topo.tgen.process.pid) == _netns_inode(tb.hosts["tester1"].netns)
            assert Path(f"/proc/{pid}/environ").read_bytes().count(
                f"NFVPERF_TAG={run_ctx.tag}".encode()) == 1
            prefix = dut.file_prefix
            assert hosts.hosts["dut1"].exists(f"/var/run/dpdk/{prefix}")
            m = topo.measurer()
            m.set_profile(TrafficProfile(frame_size_b=64, flows_per_port=4, bidirectional=True,
                                         drain_s=0.5, learning=False))
            m.measure(0.5, 1000)                 # warm-up
            res = m.measure(0.5, 2000)
            assert res.sent == 2000, res.sent
            dc = res.dut_counters
            for i in (0, 1):                     # the console's counters, read over SSH
                st = res.tg_counters[f"port{i}"]["stats"]
                assert dc["ports"][f"phy{i}"]["rx_packets"] == st["opackets"], (i, dc, st)
                assert dc["ports"][f"phy{i}"]["tx_packets"] == st["ipackets"], (i, dc, st)
            assert res.received > 0
        # released: testpmd gone from the DUT host, its DPDK directory removed there
        assert not Path(f"/proc/{pid}").exists() or \
            Path(f"/proc/{pid}/stat").read_text().split()[2] in ("Z", "X")
        assert not hosts.hosts["dut1"].exists(f"/var/run/dpdk/{prefix}")
        assert not hosts.hosts["dut1"].glob("/dev/hugepages", f"{prefix}*")
    _assert_hosts_clean(tb)
