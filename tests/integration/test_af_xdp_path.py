"""AF_XDP on veth (issue 8 item 5): a p2p topology with a testpmd DUT on ``port_kind: af_xdp``
carries a tgen trial with counts matching at tgen and testpmd, and the run records the path it
measured: both ends' AF_XDP programs in native XDP mode, copy mode, one queue, and the busy-polling
budget tgen's PMD set.  Nothing (veths, namespaces, XDP programs on them) stays behind."""
from __future__ import annotations

import shutil

import pytest

import nfvperf.topo as topo_pkg
from nfvperf.host import netns as N
from nfvperf.host import xdp as X
from nfvperf.host.run import RunContext
from nfvperf.topo.spec import TopologySpec

from _p2p_trial import counted_bidir_trial

pytestmark = pytest.mark.root


@pytest.mark.usefixtures("need_tgen")
def test_p2p_testpmd_af_xdp_counts_match_and_native_xdp_is_recorded(tmp_path, leak_check):
    if not shutil.which("dpdk-testpmd"):
        pytest.skip("dpdk-testpmd not installed")
    run = RunContext(run_dir=tmp_path / "run")
    leak_check.watch(run.tag)
    spec = TopologySpec(kind="p2p", dut="testpmd", port_kind="af_xdp")
    with topo_pkg.build(spec, run) as t:
        counted_bidir_trial(t, 20000)
        # the veth's own counters agree: what tgen's end sent, the DUT's end received
        env = t.environment()
        for p, port in zip(env["ports"], t.ports):
            path = p["path"]
            assert path["tg_xdp_mode"] == "native", path      # veth gives AF_XDP the driver hook
            assert path["dut_xdp_mode"] == "native", path     # testpmd's net_af_xdp on the DUT end
            assert path["zero_copy"] is False and path["queues"] == 1
            assert path.get("busy_poll_budget") == 64 or "busy_poll_error" in path, path
            assert X.xdp_mode(port.tg_ifname, port.tg_netns) == "native"
        ifnames = [(port.tg_ifname, port.tg_netns) for port in t.ports]
    # the veths (and the programs on them) went with the topology
    for ifname, ns in ifnames:
        assert not N.link_exists(ifname, ns)


def test_a_plain_veth_has_no_xdp_program(tmp_path, leak_check):
    """The reader says None, not a mode, for a veth nobody opened with AF_XDP."""
    run = RunContext(run_dir=tmp_path / "run")
    leak_check.watch(run.tag)
    a, b = run.ifname("x0"), run.ifname("y0")
    pair = N.create_veth(a, b)
    try:
        assert X.xdp_mode(a) is None and X.xdp_mode(b) is None
        with pytest.raises(LookupError, match="nosuch"):
            X.xdp_mode(run.ifname("nosuch")[:15])
    finally:
        pair.delete()
