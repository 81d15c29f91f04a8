"""Installing OpenFlow rules at scale on a real OVS-DPDK (issue 9 item 7): bundles of 100k rules
from files in the run dir, progress lines, the installed count checked with dump-aggregate, the
install kept as its own record (rules, seconds, rules/s) in the DUT environment; a duplicate rule
and an exceeded time limit fail with the counts and the time.  A bridge without ports (the rules
name OpenFlow ports 1 and 2, which OVS accepts before they exist), OVS in its own namespace."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.root

if os.geteuid() != 0 or not os.path.exists("/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"):
    pytest.skip("needs root and openvswitch-switch-dpdk", allow_module_level=True)

from nfvperf.dut import ovs_rules  # noqa: E402
from nfvperf.dut.ovs_dpdk import OvsDpdk  # noqa: E402
from nfvperf.dut.ovs_ctl import OvsError  # noqa: E402
from nfvperf.host.netns import create_netns  # noqa: E402
from nfvperf.runner import progress_logs  # noqa: E402
from nfvperf.topo.p_ovs_p import flow_ips  # noqa: E402
from nfvperf.topo.spec import OvsSpec  # noqa: E402


def _rules(n: int) -> list[str]:
    return [f"priority=200,in_port=1,ip,nw_src={s},nw_dst={d},idle_timeout=0,actions=output:2"
            for s, d in flow_ips(n)]


@pytest.fixture
def ovs(run_ctx):
    # in its own namespace, as the topologies run it: the netdev datapath's tap (ovs-netdev) of an
    # OVS in the host's namespace would collide with any other such OVS
    ns = create_netns(run_ctx.netns("dut"), run_ctx.tracker)
    sw = OvsDpdk(run_ctx, run_ctx.tracker, spec=OvsSpec(socket_mem_mb=512), netns=ns)
    sw.start()
    yield sw
    sw.stop()


def test_bundles_progress_count_and_record(ovs) -> None:
    n = 250_000                     # 3 bundles; more than the files kept after the install
    said: list[str] = []
    with progress_logs(said.append):
        first = ovs.program(_rules(n))
    rec = ovs.rule_installs[-1]
    assert (rec.rules, rec.installed, rec.method, rec.chunks) == (n, n, "bundle", 3)
    assert rec.seconds > 0 and rec.rules_per_s and rec.rules_per_s > 0
    # the first file stays in the run dir as the record of what was installed, the rest go
    assert first == Path(rec.files[0]) and first.parent == ovs.dir and rec.files_removed == 2
    assert first.read_text().splitlines()[0] == _rules(1)[0]
    assert said[0].startswith(f"installing {n:,} OpenFlow rules on {ovs.bridges[0]} (bundle, 3 file(s)")
    assert said[-1].startswith(f"installed {n:,} OpenFlow rules") and f"OVS counts {n:,}" in said[-1]
    (env_rec,) = ovs.environment()["rule_installs"]
    assert env_rec["rules"] == n and env_rec["installed"] == n and env_rec["rules_per_s"] > 0
    # replace: a smaller set leaves exactly that set (the old rules are deleted first)
    ovs.program(_rules(64))
    assert ovs.rule_installs[-1].installed == 64 and len(ovs.dump_flows()) == 64


def test_plain_add_flows_still_works(ovs) -> None:
    ovs.program(_rules(1000), method="add-flows")
    rec = ovs.rule_installs[-1]
    assert (rec.method, rec.chunks, rec.installed) == ("add-flows", 1, 1000)


def test_count_mismatch_fails_clearly(ovs) -> None:
    rules = _rules(100)
    with pytest.raises(OvsError, match=r"OVS counts 100 rules on \S+ after installing 101 "):
        ovs.program(rules + rules[:1])          # the same rule twice: OVS keeps one


def test_time_limit_names_the_count_and_time(ovs, monkeypatch) -> None:
    monkeypatch.setattr(ovs_rules, "TIMEOUT_FLOOR_S", 0.0)
    monkeypatch.setattr(ovs_rules, "MIN_RULES_PER_S", 1e9)     # a limit no real install meets
    with pytest.raises(OvsError, match=r"installing 200,000 OpenFlow rules on \S+ \(bundle\) timed out: "
                                       r"200,000 rules are allowed 0 s .*; \d[\d,]* installed in [\d.]+ s"):
        ovs.program(_rules(200_000))


def test_large_plain_install_keeps_a_sample(ovs, monkeypatch) -> None:
    # above the files kept in full (lowered from 200,000 to 110,000 here: the plain add-flows
    # install is the slow one, and what is tested is the cut, not the scale, which the bundle
    # test above and test_ovs_1m_scale cover): the one file is cut to a chunk of 100,000
    monkeypatch.setattr(ovs_rules, "KEEP_FILES_MAX_RULES", 110_000)
    n = 120_000
    assert n > ovs_rules.KEEP_FILES_MAX_RULES and n > ovs_rules.CHUNK_RULES
    first = ovs.program(_rules(n), method="add-flows")
    rec = ovs.rule_installs[-1]
    assert (rec.installed, rec.files_removed) == (n, 1)
    lines = first.read_text().splitlines()
    assert len(lines) == ovs_rules.CHUNK_RULES and lines[0] == _rules(1)[0]
