"""Host layer: namespaces/veth, resource tracking, hugepages, CPU plan, preflight, cleanup."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from nfvperf.host import cleanup as C
from nfvperf.store.cleanup import main as cleanup_command
from nfvperf.host import cpu
from nfvperf.host import hugepages as hp
from nfvperf.host import netns as N
from nfvperf.host import preflight as pf
from nfvperf.host.run import REGISTRY_DIR, ResourceTracker, RunContext, normalize_tag

pytestmark = pytest.mark.root
# not no_polling: test_tracker_releases_on_sigterm_and_ctrl_c timed out (15 s) waiting for a
# signalled run to release its netns in the no_polling pass, beside the other worker's test;
# alone it takes 2 s

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_tags_and_names():
    run = RunContext()
    assert run.tag.startswith("nfv") and len(run.tag) == 9
    assert RunContext("20261122-demo").tag == normalize_tag("20261122-demo")
    assert RunContext("nfv00aa11").tag == "nfv00aa11"
    assert len(run.ifname("br10")) <= 15
    with pytest.raises(ValueError):
        run.ifname("toolongsuffix")


def test_netns_veth_create_and_teardown(run_ctx):
    t = run_ctx.tracker
    tg = N.create_netns(run_ctx.netns("tg"), t)
    dut = N.create_netns(run_ctx.netns("dut"), t)
    a, b = run_ctx.ifname("p0"), run_ctx.ifname("d0")
    pair = N.create_veth(a, b, tg, dut, mtu=2000, tracker=t)
    assert a in N.list_links(tg) and b in N.list_links(dut)
    assert a not in N.list_links() and b not in N.list_links()
    # up, MTU, IPv6 off, offloads off
    out = N.run_in_netns(tg, ["ip", "-d", "link", "show", a]).stdout
    assert "state UP" in out or "LOWER_UP" in out
    assert "mtu 2000" in out
    assert N.run_in_netns(tg, ["sysctl", "-n", f"net.ipv6.conf.{a}.disable_ipv6"]).stdout.strip() == "1"
    if N.shutil.which("ethtool"):
        k = N.run_in_netns(dut, ["ethtool", "-k", b]).stdout
        assert "tx-checksumming: off" in k
    assert set(pair.stats()) == {a, b}
    t.release_all()
    assert not N.netns_exists(tg) and not N.netns_exists(dut)
    assert not N.link_exists(a) and not N.link_exists(b)


def test_tracker_releases_on_sigterm_and_ctrl_c(tmp_path, leak_check):
    """A run killed by SIGTERM or SIGINT (Ctrl-C) still releases what it created."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        tag = RunContext().tag
        leak_check.watch(tag)
        code = textwrap.dedent(f"""
            import signal, sys, time
            # Ctrl-C as at a terminal: a shell starts background jobs (CI under `cmd &`) with
            # SIGINT ignored, and Python then installs no KeyboardInterrupt handler
            signal.signal(signal.SIGINT, signal.default_int_handler)
            sys.path.insert(0, {SRC!r})
            from nfvperf.host.run import RunContext, ResourceTracker
            from nfvperf.host import netns as N
            run = RunContext({tag!r}, {str(tmp_path / 'r')!r})
            with ResourceTracker(run) as t:
                ns = N.create_netns(run.netns("dut"), t)
                N.create_veth(run.ifname("p0"), run.ifname("d0"), None, ns, tracker=t)
                print("ready", flush=True)
                time.sleep(60)
        """)
        p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        try:
            assert p.stdout.readline().strip() == "ready"
            assert N.netns_exists(f"{tag}-dut") and N.link_exists(f"{tag}p0")
            assert (REGISTRY_DIR / tag).exists()          # announced as a live run
            p.send_signal(sig)
            p.wait(15)
        finally:
            if p.poll() is None:
                p.kill()
        assert not N.netns_exists(f"{tag}-dut"), sig
        assert not N.link_exists(f"{tag}p0"), sig
        assert not (REGISTRY_DIR / tag).exists()


def test_tracker_release_order_and_errors(run_ctx):
    order = []
    t = ResourceTracker(None, install_signal_handlers=False)
    t.callback("first", lambda: order.append(1))
    t.callback("broken", lambda: 1 / 0)
    t.callback("last", lambda: order.append(3))
    t.release_all()
    assert order == [3, 1]
    assert len(t.errors) == 1 and "broken" in t.errors[0]


def test_hugepages_pools_reserve_and_leftover_files(run_ctx):
    pools = {p.size_kb: p for p in hp.pools()}
    assert 2048 in pools
    before = pools[2048].total
    # reserve never lowers the shared pool
    assert hp.reserve(max(1, before // 2)) == before
    mounts = hp.hugetlbfs_mounts()
    if not mounts:
        pytest.skip("no hugetlbfs mounted")
    d = Path(mounts[0].path)
    # Not "<prefix>map_N": any DPDK process starting on this host (EAL clear_hugedir) deletes
    # every unlocked "*map_*" file in the hugepage directory, whoever's it is.
    dead = d / f"{run_ctx.file_prefix('dut')}-leftover"
    held = d / f"{run_ctx.file_prefix('vnf0')}-leftover"
    other = d / "nfvperf-test-not-a-tag-file"
    for f in (dead, held):
        f.touch()
    holder = subprocess.Popen(["sleep", "30"], stdin=open(held, "rb"))
    try:
        assert set(hp.tag_files(run_ctx.tag)) == {dead, held}
        removed = hp.remove_leftovers(run_ctx.tag)
        assert str(dead) in removed and str(held) not in removed     # a live process holds it
        assert not dead.exists() and held.exists()
        assert not other.exists() or str(other) not in removed
    finally:
        holder.kill()
        holder.wait()
    assert str(held) in hp.remove_leftovers(run_ctx.tag)
    assert hp.tag_files(run_ctx.tag) == []


def test_cpu_topology_and_plan():
    topo = cpu.CpuTopology.read()
    assert topo.online and set(topo.allowed) <= set(topo.online)
    for c in topo.cpus.values():
        assert c.id in c.siblings
    plan = cpu.plan_pinning({"dut": 1, "tgen": 1}, topo)
    assert plan.cpus("dut") and plan.cpus("tgen")
    if len(topo.allowed) <= 2:
        assert plan.cores_shared
        assert plan.warnings and "share" in plan.warnings[0]
    lc = plan.dpdk_lcores("tgen")
    assert lc.startswith(f"0@{plan.housekeeping[0]},1@")
    assert cpu.parse_cpulist("0-2,5,7-8") == [0, 1, 2, 5, 7, 8]
    assert cpu.format_cpulist([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert cpu.cpu_mask([1, 2]) == "0x6"


def test_cpu_plan_on_a_big_host_is_dedicated():
    # synthetic 8-CPU, 4-core HT host: dedicated cores, hyper-threads kept together
    cpus = {i: cpu.Cpu(i, i % 4, 0, 0, sorted({i % 4, i % 4 + 4})) for i in range(8)}
    topo = cpu.CpuTopology(cpus, list(range(8)), list(range(8)), [], [])
    plan = cpu.plan_pinning({"dut": 2, "tgen": 2, "vnf0": 1}, topo)
    assert not plan.cores_shared and not plan.warnings
    used = plan.cpus("dut") + plan.cpus("tgen") + plan.cpus("vnf0")
    assert len(set(used)) == 5 and 0 not in used
    assert plan.cpus("dut") == [1, 5]        # siblings of core 1
    plan = cpu.plan_pinning({"dut": 6, "tgen": 4}, topo)
    assert plan.cores_shared and any("CORES SHARED" in w for w in plan.warnings)


def test_preflight_results_and_error():
    from nfvperf.topo import preflight as tpf      # the checks with what the adapters declare
    checks = tpf.run_checks(None, required=("root",))
    names = {c.name for c in checks}
    assert {"root", "hugepages", "irqbalance", "cpu_governor", "isolcpus", "nohz_full",
            "binary:dpdk-testpmd", "binary:ovs-vswitchd-dpdk", "binary:ovsdb-server",
            "binary:tshark", "binary:iperf3", "tgen"} <= names
    for c in checks:
        assert c.status in ("ok", "warn", "fail") and c.detail
        json.dumps(c.to_dict())
    assert next(c for c in checks if c.name == "root").status == "ok"
    pf.raise_on_failure(checks)      # nothing required failed here
    bad = pf.Check("binary:nope", "fail", "nope not found", "apt-get install nope", required=True)
    with pytest.raises(pf.PreflightError) as ei:
        pf.raise_on_failure(checks + [bad])
    assert "apt-get install nope" in str(ei.value)
    # a PCI address that does not exist is a required failure with a fix
    from nfvperf.topo.spec import TopologySpec
    spec = TopologySpec(kind="p2p", dut="testpmd", port_kind="pci",      # [tg0, dut0, tg1, dut1]
                        pci=["0000:ff:1f.7", "0000:ff:1f.6", "0000:ff:1f.5", "0000:ff:1f.4"])
    pci = [c for c in tpf.run_checks(spec) if c.name.startswith("pci:")]
    assert len(pci) == 4 and all(c.status == "fail" and c.required and c.fix for c in pci)
    assert tpf.main(["--json"]) in (0, 1)


def test_cleanup_removes_a_killed_runs_leftovers(tmp_path, leak_check):
    """Leftovers of a run killed with SIGKILL (no release ran) are found by tag and removed."""
    run = RunContext()
    tag = run.tag
    leak_check.watch(tag)
    # what a killed run leaves: netns with a veth end, a root-namespace link, a tagged process,
    # a hugepage file, a socket in its run dir, a registry entry whose owner is dead
    ns = N.create_netns(run.netns("dut"))
    N.create_veth(run.ifname("p0"), run.ifname("d0"), None, ns)
    N.create_veth(run.ifname("p1"), run.ifname("d1"))      # both ends in the root namespace
    proc = subprocess.Popen([f"{tag}-sleep", "300"], executable="/bin/sleep",
                            start_new_session=True, env={**os.environ, **run.env()})
    mounts = hp.hugetlbfs_mounts()
    # (not "...map_N": a DPDK process starting elsewhere on the host would delete that itself)
    hfile = Path(mounts[0].path) / f"{run.file_prefix('dut')}-leftover" if mounts else None
    if hfile:
        hfile.touch()
    rdir = Path("/run/nfvperf") / tag
    rdir.mkdir(parents=True, exist_ok=True)
    import socket as S
    sock_path = rdir / "ctl.sock"
    srv = S.socket(S.AF_UNIX, S.SOCK_STREAM)
    srv.bind(str(sock_path))
    srv.close()
    REGISTRY_DIR.mkdir(parents=True, exist_ok=True)
    (REGISTRY_DIR / tag).write_text(json.dumps({"tag": tag, "pid": 999999999, "starttime": 1}))
    try:
        # a dry run without --tag lists this run (its owner is dead) but spares the sleep
        # (its parent, this test, is alive)
        dry = C.cleanup(None, dry_run=True)
        assert f"{ns}" in dry.netns and run.ifname("p0") in dry.links
        assert N.netns_exists(ns)
        rep = C.cleanup(tag)
        assert ns in rep.netns
        assert run.ifname("p1") in rep.links or run.ifname("d1") in rep.links
        assert any(r.startswith(f"{proc.pid} ") for r in rep.processes)
        assert str(sock_path) in rep.sockets
        if hfile:
            assert str(hfile) in rep.hugepage_files
        assert tag in rep.registry
        assert proc.wait(5) is not None
        assert not N.netns_exists(ns)
        for name in ("p0", "p1", "d1"):
            assert not N.link_exists(run.ifname(name))
        assert not sock_path.exists() and not rdir.exists()
        assert not (REGISTRY_DIR / tag).exists()
        assert hfile is None or not hfile.exists()
        assert "removed" in rep.format()
        # idempotent
        assert C.cleanup(tag).removed_count == 0
        assert cleanup_command(["--tag", tag]) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        N.delete_netns(ns)
        N.delete_link(run.ifname("p0"))
        N.delete_link(run.ifname("p1"))
        if hfile:
            hfile.unlink(missing_ok=True)
        sock_path.unlink(missing_ok=True)
        (REGISTRY_DIR / tag).unlink(missing_ok=True)
        if rdir.exists():
            rdir.rmdir()


def test_cleanup_spares_a_live_run(run_ctx):
    ns = N.create_netns(run_ctx.netns("dut"), run_ctx.tracker)    # tracker claimed the tag
    assert run_ctx.tag in RunContext.live_tags()
    rep = C.cleanup(None, dry_run=True)
    assert ns not in rep.netns and run_ctx.tag in rep.spared_live
    assert N.netns_exists(ns)


@pytest.mark.root
def test_prepare_hugepages_grows_the_pool_to_the_demand_and_never_shrinks_it() -> None:
    from nfvperf.host import hugepages as hp
    pool = {p.size_kb: p for p in hp.pools()}[2048]
    want_mb = pool.free * 2 + 64                       # more than is free now
    try:
        r = hp.prepare(want_mb)
        assert r["enough"] and r["free_mb"] >= want_mb and r["added_pages"] > 0
        assert any(m.pagesize_kb == 2048 for m in hp.hugetlbfs_mounts())
        after = {p.size_kb: p for p in hp.pools()}[2048].total
        again = hp.prepare(64)                         # a smaller demand keeps the pool as it is
        assert again["added_pages"] == 0
        assert {p.size_kb: p for p in hp.pools()}[2048].total == after
    finally:
        (hp.SYS_HUGEPAGES / "hugepages-2048kB" / "nr_hugepages").write_text(str(pool.total))
