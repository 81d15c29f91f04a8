"""AF_XDP path facts (issue 8 item 5): the XDP attach mode read from IFLA_XDP, what net_af_xdp
logged about busy polling, and the af_xdp kind's generator EAL option that makes those lines
visible."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from nfvperf.host import xdp as X
from nfvperf.topo.ports import HostPort, port_kind_class
from nfvperf.tg.tgen import PortSpec, TgenProcess


class Nla:
    """An IFLA_XDP attribute as pyroute2 gives it: ``get_attr(name)``."""

    def __init__(self, **attrs: Any):
        self.attrs = attrs

    def get_attr(self, name: str) -> Any:
        return self.attrs.get(name)


def test_xdp_modes_from_prog_ids_and_attached_values():
    assert X.xdp_modes(None) == []
    assert X.xdp_modes(Nla(IFLA_XDP_ATTACHED=None)) == []
    # what pyroute2 gave for a veth whose AF_XDP socket DPDK set up (ip link: "xdp")
    assert X.xdp_modes(Nla(IFLA_XDP_DRV_PROG_ID=10677, IFLA_XDP_ATTACHED="xdp",
                           IFLA_XDP_PROG_ID=10677)) == ["native"]
    assert X.xdp_modes(Nla(IFLA_XDP_SKB_PROG_ID=7, IFLA_XDP_ATTACHED=2)) == ["generic"]
    assert X.xdp_modes(Nla(IFLA_XDP_DRV_PROG_ID=3, IFLA_XDP_SKB_PROG_ID=4,
                           IFLA_XDP_ATTACHED=4)) == ["native", "generic"]
    # only the attached value (older kernels): numbers and pyroute2's names both understood
    assert X.xdp_modes(Nla(IFLA_XDP_ATTACHED=1)) == ["native"]
    assert X.xdp_modes(Nla(IFLA_XDP_ATTACHED="xdpgeneric")) == ["generic"]


def test_busy_poll_read_from_the_pmd_log():
    log = ("rte_pmd_af_xdp_probe(): Initializing pmd_af_xdp for net_af_xdp0\n"
           "configure_preferred_busy_poll(): Busy polling budget set to: 64\n"
           "configure_preferred_busy_poll(): Busy polling budget set to: 64\n")
    assert X.busy_poll_from_log(log) == {"busy_poll_budget": 64}
    assert X.busy_poll_from_log("Busy polling budget set to: 64\nBusy polling budget set to: 8\n") \
        == {"busy_poll_budget": [8, 64]}
    fail = "configure_preferred_busy_poll(): Failed to set SO_PREFER_BUSY_POLL\n"
    assert X.busy_poll_from_log(fail) == {"busy_poll_error": "Failed to set SO_PREFER_BUSY_POLL"}
    assert X.busy_poll_from_log("EAL: Detected CPU lcores: 2\n") == {}


def test_af_xdp_kind_raises_the_pmd_log_level_for_tgen_only(tmp_path):
    kind = port_kind_class("af_xdp")
    assert kind.tgen_eal == ("--log-level=pmd.net.af_xdp:info",)
    assert port_kind_class("af_packet").tgen_eal == ()
    # one token: Topology.start_tgen merges kinds' EAL options as a sorted set of tokens
    proc = TgenProcess([PortSpec("net_af_xdp0,iface=x0,start_queue=0,queue_count=1")], "0@0,1@0",
                       run_dir=tmp_path, tag="t", binary=tmp_path / "tgen", extra_eal=sorted(set(kind.tgen_eal)))
    argv = proc.argv()
    assert "--log-level=pmd.net.af_xdp:info" in argv
    assert argv.index("--log-level=pmd.net.af_xdp:info") < argv.index("--")


def test_path_facts_record_what_cannot_be_read_and_skip_remote_ends(tmp_path):
    kind = port_kind_class("af_xdp")()
    port = HostPort(0, "veth", tg_ifname="nfvnoexist0p0", dut_ifname="nfvnoexist0d0",
                    driver="af_xdp")
    log = tmp_path / "tgen.log"
    log.write_text("configure_preferred_busy_poll(): Busy polling budget set to: 64\n")
    topo = SimpleNamespace(tgen=SimpleNamespace(log_path=log), tg_host=SimpleNamespace(remote=False),
                           dut_host=SimpleNamespace(remote=True))
    facts = kind.path_facts(port, topo)
    assert facts["zero_copy"] is False and facts["queues"] == 1
    assert "nfvnoexist0p0" in facts["tg_xdp_mode_error"]
    assert "dut_xdp_mode" not in facts and "dut_xdp_mode_error" not in facts   # remote: not read
    assert facts["busy_poll_budget"] == 64
    assert port_kind_class("af_packet")().path_facts(port, topo) == {}


def test_report_header_says_which_af_xdp_path_ran():
    from nfvperf.report.facts import af_xdp_text
    assert af_xdp_text({}) == ""
    path = {"zero_copy": False, "queues": 1, "tg_xdp_mode": "native", "dut_xdp_mode": "native",
            "busy_poll_budget": 64}
    env = {"topologies": [{"kind": "p2p", "measurer": {"topology": {
        "ports": [{"index": 0, "path": path}, {"index": 1, "path": dict(path)}]}}}]}
    assert af_xdp_text(env) == "AF_XDP: native XDP, copy mode, 1 queue(s), busy-poll budget 64"
    slow = dict(path, tg_xdp_mode="generic", busy_poll_error="Failed to set SO_PREFER_BUSY_POLL")
    del slow["busy_poll_budget"]
    env["topologies"][0]["measurer"]["topology"]["ports"][1]["path"] = slow
    txt = af_xdp_text(env)
    assert txt.startswith("AF_XDP: native/generic XDP, copy mode") and "budget 64" in txt
    assert "busy polling unavailable (Failed to set SO_PREFER_BUSY_POLL)" in txt
