"""Issue 30's proof that a new switch is one typed module: ``plugins/testpmd_vswitch.py`` (dpdk-testpmd
in io forwarding behind the :class:`~nfvperf.dut.vswitch.VSwitch` protocol), copied to a temporary
directory and loaded as a plugin of ``nfvperf.dut``, is the switch of a PHY-OVS-PHY and a PVP trial
with tgen: frames cross it (and the VNF) and its own counters account for them."""
from __future__ import annotations

from pathlib import Path

import pytest
from dut_plugins import load_dut_plugin

from nfvperf.dut.base import DUT_REGISTRY
from nfvperf.dut.vswitch import VSwitch
from nfvperf.topo import build
from nfvperf.topo.spec import TopologySpec, allowed_duts
from nfvperf.trial import TrafficProfile

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("need_tgen")]

PLUGIN = Path(__file__).parent / "plugins" / "testpmd_vswitch.py"


@pytest.fixture
def testpmd_vswitch(tmp_path):
    """The plugin's class, loaded from a directory of its own while the test runs."""
    for _ in load_dut_plugin(tmp_path, PLUGIN, "testpmd-vswitch"):
        yield DUT_REGISTRY["testpmd-vswitch"]


def _trial(topo, frames: int):
    m = topo.measurer()
    m.set_profile(TrafficProfile(frame_size_b=64, flows_per_port=1, bidirectional=True,
                                 drain_s=0.5, learning=False))
    return m.measure(0.5, frames)


def _switch_saw_the_trial(res) -> None:
    """The switch's own counters (its protocol's counters()) match the generator's, port by port."""
    after = res.dut_counters
    for i in (0, 1):
        st = res.tg_counters[f"port{i}"]["stats"]
        assert after["ports"][f"phy{i}"]["rx_packets"] == st["opackets"] > 0
        assert after["ports"][f"phy{i}"]["tx_packets"] == st["ipackets"]


def test_vswitch_plugin_is_the_switch_of_p_ovs_p(testpmd_vswitch, run_ctx) -> None:
    assert VSwitch in testpmd_vswitch.__mro__                # it declares the protocol
    assert "testpmd-vswitch" in allowed_duts("p-ovs-p") and "testpmd-vswitch" in allowed_duts("pvp")
    with build(TopologySpec(kind="p-ovs-p", dut="testpmd-vswitch", port_kind="af_packet"), run_ctx) as topo:
        assert isinstance(topo.dut, testpmd_vswitch) and topo.switch() is topo.dut
        res = _trial(topo, 2000)
        assert res.valid, res.invalid_reasons
        assert res.sent == 2000 and res.received >= 1990       # shared cores: a few may be lost
        _switch_saw_the_trial(res)


def test_vswitch_plugin_is_the_switch_of_pvp(testpmd_vswitch, run_ctx) -> None:
    with build(TopologySpec(kind="pvp", dut="testpmd-vswitch", port_kind="af_packet"), run_ctx) as topo:
        sw = topo.switch()
        assert isinstance(sw, testpmd_vswitch) and len(sw.ports) == 4     # phy0, phy1, the VNF's two
        # the rules made testpmd pair phy0 with the VNF's port 0 and its port 1 with phy1
        assert [sw.ports[i].name for i in sw.order] == ["phy0", "vnf0-vhu0", "vnf0-vhu1", "phy1"]
        assert sw.ports_down([p.name for p in sw.ports]) == []
        vnf_before = topo.vnfs[0].counters()
        res = _trial(topo, 2000)
        assert res.valid and res.sent == 2000 and res.received >= 1990
        _switch_saw_the_trial(res)
        vnf_after = topo.vnfs[0].counters()
        vnf_rx = sum(vnf_after["ports"][p]["rx_packets"] - vnf_before["ports"][p]["rx_packets"]
                     for p in vnf_after["ports"])
        assert res.received <= vnf_rx <= res.sent            # every frame went through the VNF
        # and the VNF's frames came back into the switch on its vhost-user ports
        assert sum(res.dut_counters["ports"][f"vnf0-vhu{k}"]["rx_packets"] for k in (0, 1)) >= res.received
