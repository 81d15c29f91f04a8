"""The OVS topologies end to end with tgen: p-ovs-p, pvp, vxlan come up, pass traffic with
matching counts at the generator and in OVS, go down leaving nothing; a killed ovs-vswitchd
makes measure() raise DutFailure within seconds."""
from __future__ import annotations

import os
import signal
import threading
import time

import pytest

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("need_tgen")]

if os.geteuid() != 0 or not os.path.exists("/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"):
    pytest.skip("needs root and openvswitch-switch-dpdk", allow_module_level=True)

from nfvperf.trial import DutFailure, TrafficProfile  # noqa: E402
from nfvperf.topo import build  # noqa: E402
from nfvperf.topo.spec import TopologySpec  # noqa: E402


def _spec(kind: str, **kw) -> TopologySpec:
    return TopologySpec(kind=kind, ovs={"socket_mem_mb": 512, **kw.pop("ovs", {})}, **kw)


def _tg_stats(res, port: int) -> dict:
    return res.tg_counters[f"port{port}"]["stats"]


def test_p_ovs_p_counts_match(run_ctx) -> None:
    with build(_spec("p-ovs-p"), run_ctx) as topo:
        assert topo.switching_operations() == 1
        m = topo.measurer()
        m.set_profile(TrafficProfile(frame_size_b=64, flows_per_port=4, bidirectional=True,
                                     drain_s=0.5, learning=False))
        res = m.measure(0.5, 4000)
        after = res.dut_counters           # this trial's deltas (read before it and after its drain)
        assert res.valid, res.invalid_reasons
        assert res.sent == 4000 and res.received == 4000
        assert after["scope"] == "trial"
        # generator tx on port i == OVS rx on phy i, OVS tx on phy i == generator rx on port i
        for i in (0, 1):
            st = _tg_stats(res, i)
            assert after["ports"][f"phy{i}"]["rx_packets"] == st["opackets"]
            assert after["ports"][f"phy{i}"]["tx_packets"] == st["ipackets"]
        assert after["pmd"]["total"]["packets_received"] >= 4000
        assert "cycles" in " ".join(after["pmd"]["total"])
        env = topo.environment()
        assert env["dut"]["version"].startswith("3.")
        flows = topo.dut.dump_flows()
        assert {f["match"] for f in flows} == {"ip,in_port=1", "ip,in_port=2"}
    # leak_check (via run_ctx) asserts nothing of the run is left


def test_p_ovs_p_rule_complexity(run_ctx) -> None:
    with build(_spec("p-ovs-p", ovs={"rules": 64}), run_ctx) as topo:
        assert len(topo.dut.dump_flows()) == 128
        m = topo.measurer()
        m.set_profile(TrafficProfile(frame_size_b=64, flows_per_port=64, bidirectional=True,
                                     drain_s=0.5, learning=False))
        m.measure(0.5, 1000)          # warm-up: datapath flows installed
        res = m.measure(0.5, 4000)
        assert res.valid and res.received == res.sent == 4000
        hit = [f for f in topo.dut.dump_flows() if f["n_packets"]]
        assert len(hit) == 128


def test_pvp_counts_match(run_ctx) -> None:
    with build(_spec("pvp"), run_ctx) as topo:
        assert topo.switching_operations() == 2
        m = topo.measurer()
        m.set_profile(TrafficProfile(frame_size_b=64, flows_per_port=1, bidirectional=True,
                                     drain_s=0.5, learning=False))
        vnf_before = topo.vnfs[0].counters()
        res = m.measure(0.5, 2000)
        assert res.valid and res.sent == 2000
        assert res.received >= 1990          # shared cores: a few frames may be lost
        after = res.dut_counters             # this trial's deltas
        vnf_after = topo.vnfs[0].counters()
        for i in (0, 1):
            st = _tg_stats(res, i)
            assert after["ports"][f"phy{i}"]["rx_packets"] == st["opackets"]
            assert after["ports"][f"phy{i}"]["tx_packets"] == st["ipackets"]
        vnf_rx = sum(vnf_after["ports"][p]["rx_packets"] - vnf_before["ports"][p]["rx_packets"]
                     for p in vnf_after["ports"])
        vnf_tx = sum(vnf_after["ports"][p]["tx_packets"] - vnf_before["ports"][p]["tx_packets"]
                     for p in vnf_after["ports"])
        assert vnf_tx == vnf_rx and res.received <= vnf_tx <= res.sent


def test_vxlan_decapsulated_at_vnf(run_ctx) -> None:
    with build(_spec("vxlan"), run_ctx) as topo:
        m = topo.measurer()
        m.set_profile(TrafficProfile(frame_size_b=64, flows_per_port=1, bidirectional=False,
                                     vxlan=True, drain_s=0.5, learning=False))
        vnf = topo.vnfs[0]
        v0 = vnf.counters()["ports"]["vnf0-vhu0"]
        res = m.measure(0.5, 2000)
        v1 = vnf.counters()["ports"]["vnf0-vhu0"]
        rx = v1["rx_packets"] - v0["rx_packets"]
        assert rx >= 990 and rx <= res.sent
        # the VNF sees the inner frame (64 B incl. FCS = 60 B), not the 110 B VXLAN frame
        assert (v1["rx_bytes"] - v0["rx_bytes"]) == rx * 60
        assert res.received >= 990       # re-encapsulated back to the generator's other port
        st = _tg_stats(res, 1)
        assert st["ibytes"] >= res.received * 110 - 0   # what came back is VXLAN again
        ports = res.dut_counters["ports"]
        assert ports["vx0"]["rx_packets"] >= rx


def test_kill_vswitchd_mid_trial_raises_dutfailure(run_ctx) -> None:
    with build(_spec("p-ovs-p"), run_ctx) as topo:
        m = topo.measurer()
        m.set_profile(TrafficProfile(frame_size_b=64, bidirectional=True, drain_s=0.5,
                                     learning=False))
        pid = topo.dut.pids()["ovs-vswitchd"]
        killed_at: list[float] = []

        def kill() -> None:
            time.sleep(1.5)
            killed_at.append(time.monotonic())
            os.kill(pid, signal.SIGKILL)

        th = threading.Thread(target=kill)
        th.start()
        with pytest.raises(DutFailure, match="ovs-vswitchd"):
            m.measure(20.0, 2000)
        raised = time.monotonic()
        th.join()
        assert raised - killed_at[0] < 5.0


@pytest.mark.parametrize("kind,ports,bidir,sw_ops,n_vnfs", [
    ("p-ovs-p", 4, False, 1, 0),     # two independent pairs, unidirectional, 8 flows per port
    ("pvvp", 2, True, 3, 2),         # two chained VNFs
])
def test_more_shapes_pass_traffic(run_ctx, kind, ports, bidir, sw_ops, n_vnfs) -> None:
    with build(_spec(kind, ports=ports), run_ctx) as topo:
        assert topo.switching_operations() == sw_ops and len(topo.vnfs) == n_vnfs
        m = topo.measurer()
        m.set_profile(TrafficProfile(frame_size_b=128, flows_per_port=8, bidirectional=bidir,
                                     drain_s=0.5, learning=False))
        m.measure(0.5, 500)           # warm-up
        res = m.measure(0.5, 2000)
        n_dirs = (ports // 2) * (2 if bidir else 1)
        assert res.valid and len(res.streams) == n_dirs and res.sent == 1000 * n_dirs
        assert res.received >= res.sent * 0.99
        assert {(s.tx_port, s.rx_port) for s in res.streams} >= {(0, 1)}
        if n_vnfs:
            # one entry per VNF, under its own name, and every VNF of the chain forwarded frames
            names = [f"vnf{j}" for j in range(n_vnfs)]
            assert [v.vnf_name for v in topo.vnfs] == names
            after = res.dut_counters          # this trial's deltas
            assert sorted(after["vnfs"]) == names
            for name in names:
                assert after["vnfs"][name]["vnf"] == name
                for key in ("rx_packets", "tx_packets"):
                    fwd = after["vnfs"][name]["total"][key]
                    assert fwd >= res.received, (name, key, fwd, res.received)
        # the VNFs' virtqueues: testpmd.vnf_queue_size (default 1024) in their devargs
        for v in topo.vnfs:
            assert v.queue_size == 1024 and "queue_size=1024" in " ".join(v.proc.argv)


def test_pvp_reset_reconnects_vnf(run_ctx) -> None:
    """RFC 6201 reset hook: OVS restarts, reconnects to the running VNF, forwards again."""
    with build(_spec("pvp"), run_ctx) as topo:
        m = topo.measurer()
        m.set_profile(TrafficProfile(frame_size_b=64, bidirectional=True, drain_s=0.5,
                                     learning=False))
        old = topo.dut.pids()["ovs-vswitchd"]
        topo.reset_dut()
        assert topo.dut.pids()["ovs-vswitchd"] != old
        m.measure(0.5, 500)           # warm-up after the restart
        res = m.measure(0.5, 2000)
        assert res.valid and res.sent == 2000 and res.received >= 1980


def test_pvp_with_vm_vnf(run_ctx) -> None:
    """vnf: vm — testpmd in a QEMU guest on the same dpdkvhostuserclient ports."""
    import shutil
    if not shutil.which("qemu-system-x86_64"):
        pytest.skip("qemu-system-x86_64 not installed")
    with build(_spec("pvp", vnf="vm"), run_ctx) as topo:
        assert type(topo.vnfs[0]).__name__ == "VmVnf" and topo.switching_operations() == 2
        m = topo.measurer()
        m.set_profile(TrafficProfile(frame_size_b=64, bidirectional=True, drain_s=0.5,
                                     learning=False))
        m.measure(0.5, 500)
        res = m.measure(0.5, 2000)
        assert res.valid and res.sent == 2000 and res.received >= 1980
