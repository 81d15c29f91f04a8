"""``dut: ovs-system`` (OVS on the kernel datapath): declared needs, and the preflight message
where the openvswitch kernel module is missing (as on this CI host)."""
from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from nfvperf.dut.base import dut_class
from nfvperf.dut.ovs_system import KMOD, SYS_MODULE, kmod_check
from nfvperf.host.preflight import PreflightError, raise_on_failure
from nfvperf.host.run import RunContext
from nfvperf.topo import build
from nfvperf.topo.base import HostTooSmall
from nfvperf.topo.preflight import needs_for
from nfvperf.topo.spec import TopologySpec


def test_spec_and_declared_needs() -> None:
    spec = TopologySpec(kind="p-ovs-p", dut="ovs-system", port_kind="af_packet")
    cls = dut_class("ovs-system")
    assert cls.hugepage_demand_mb(spec) == 0 and cls.polling_cpus == 0
    assert cls.core_request(TopologySpec(dut="ovs-system", ovs={"pmd_cores": 2})) is None
    needs = needs_for(spec)
    assert needs.binaries["ovs-vswitchd"][1] and needs.binaries["ovsdb-server"][1]
    assert "ovs-vswitchd-dpdk" not in needs.binaries or not needs.binaries["ovs-vswitchd-dpdk"][1]
    with pytest.raises(ValidationError, match="the kernel datapath has no vhost-user ports"):
        TopologySpec(kind="p-ovs-p", dut="ovs-system", port_kind="vhost")
    with pytest.raises(ValidationError, match="kind pvp cannot use dut 'ovs-system'"):
        TopologySpec(kind="pvp", dut="ovs-system")


def test_missing_module_message(tmp_path: Path) -> None:
    """No /sys/module/<mod> and modprobe cannot find it: a required failure that says which DUT
    needs what, why it is missing and the two ways out."""
    c = kmod_check("nfvperf_no_such_module", sys_module=tmp_path)
    assert c.status == "fail" and c.required and c.name == "kmod:nfvperf_no_such_module"
    assert c.detail.startswith("dut ovs-system needs the nfvperf_no_such_module kernel module "
                               "(the OVS kernel datapath); it is not loaded and cannot be loaded")
    assert "modprobe nfvperf_no_such_module" in c.fix and "dut: ovs-dpdk" in c.fix
    with pytest.raises(PreflightError) as ei:
        raise_on_failure([c])
    assert "kmod:nfvperf_no_such_module: dut ovs-system needs" in str(ei.value)
    (tmp_path / "nfvperf_no_such_module").mkdir()          # loaded
    assert kmod_check("nfvperf_no_such_module", sys_module=tmp_path).status == "ok"


def test_this_host(tmp_path: Path) -> None:
    """The real check on this host: ok where the module is loaded, else the clear failure, and a
    topology preflight with dut ovs-system fails on it (not on something later)."""
    c = kmod_check()
    if (SYS_MODULE / KMOD).exists():
        assert c.status == "ok"
        return
    spec = TopologySpec(kind="p-ovs-p", dut="ovs-system", port_kind="af_packet")
    checks = [ch for ch in needs_for(spec).checks]
    got = [ch(("root",)) for ch in checks]
    kmods = [g for g in got if getattr(g, "name", "") == f"kmod:{KMOD}"]
    assert kmods and kmods[0].status == c.status
    if c.status == "fail":
        topo = build(spec, RunContext("kmod0", tmp_path), start_tgen=False)
        # a host without the module lacks hardware: the runner skips the topology, naming why
        with pytest.raises(HostTooSmall, match="dut ovs-system needs the openvswitch kernel module"):
            topo.plan = topo.plan_cpus()
            topo.preflight()
