"""CPU plans per host of a testbed (issue 10): the DUT's and the VNFs' polling cores on the DUT
host, tgen's lcores on the tester host, each from that host's own sysfs.

A host reached over SSH is read through its host object (``CpuTopology.read(reader=
host.read_text)``: ``/sys/devices/system/cpu/...`` and ``/sys/devices/system/node/...`` of that
host over SFTP), never from the controller's CPUs.  The testbed's ``cpu:`` hints of the host
apply on top of what sysfs says: ``isolated`` CPUs are preferred for polling threads (as the
host's own ``isolcpus=``), ``housekeeping`` CPUs never poll — a plan that would need them fails
with the field to change instead of sharing them.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from nfvperf.host.cpu import (CoreRequest, CoreRequestError, CpuTopology, PinningPlan, ResolvedCores,
                              format_cpulist, parse_cpulist, plan_pinning, resolve_cores)


@dataclass
class HostCpuHints:
    """What the testbed says about one host's CPUs (``hosts.<name>.cpu``) and its NICs' node."""

    host: str                                   # the testbed's host name, e.g. dut1
    isolated: list[int] = field(default_factory=list)
    housekeeping: list[int] = field(default_factory=list)
    numa: Optional[int] = None                  # NUMA node of the host's first linked NIC

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "HostCpuHints":
        return cls(str(d.get("host", "?")), parse_cpulist(str(d.get("isolated") or "")),
                   parse_cpulist(str(d.get("housekeeping") or "")), d.get("numa"))


def read_host_topology(host: Any) -> CpuTopology:
    """The CPU topology of ``host``: this machine's sysfs for the local host, the host's own
    sysfs through ``host.read_text`` for a remote one."""
    return CpuTopology.read(reader=host.read_text) if getattr(host, "remote", False) else CpuTopology.read()


def plan_host(topo: CpuTopology, demands: dict[str, int], requests: dict[str, CoreRequest],
              hints: HostCpuHints, adjust: Optional[Callable[[PinningPlan], None]] = None
              ) -> PinningPlan:
    """The plan of the roles that run on one host (``demands``: role -> polling CPUs;
    ``requests``: roles given as core counts).  Raises :class:`CoreRequestError` naming the
    host and the testbed field when polling would need a housekeeping CPU."""
    # the testbed's isolated CPUs added to those the host booted with
    topo = dataclasses.replace(topo, isolated=sorted((set(topo.isolated) | set(hints.isolated)) & set(topo.cpus)))
    hk = [c for c in hints.housekeeping if c in topo.cpus] or None
    fixed: dict[str, ResolvedCores] = {}
    taken: list[int] = []
    for role, req in requests.items():
        try:
            res = resolve_cores(req.cores, req.ht, field=req.field, ht_field=req.ht_field,
                                topo=topo, housekeeping=hk, exclude=taken, numa_node=hints.numa)
        except CoreRequestError as e:
            raise CoreRequestError(f"host {hints.host}: {e}") from None
        fixed[role] = res
        taken += res.cpus
    plan = plan_pinning(demands, topo, housekeeping=hk, numa_node=hints.numa, fixed=fixed)
    if adjust is not None:
        adjust(plan)
    if hk:
        on_hk = sorted({c for cpus in plan.roles.values() for c in cpus} & set(hk))
        if on_hk:
            need = sum(len(c) for c in plan.roles.values())
            counts = "".join(f" or lower {r['field']}" for r in plan.resolved.values())
            raise CoreRequestError(
                f"host {hints.host}: {need} polling CPU(s) wanted ({', '.join(plan.roles)}), but "
                f"CPU(s) {format_cpulist(on_hk)} of them are housekeeping "
                f"(hosts.{hints.host}.cpu.housekeeping: {format_cpulist(hk)}; the host has "
                f"{len(topo.cpus)} CPU(s)); housekeeping CPUs never poll: shrink "
                f"hosts.{hints.host}.cpu.housekeeping{counts or ' or ask for fewer cores'}")
    plan.topology["host"] = hints.host
    if hints.isolated or hints.housekeeping:
        plan.topology["testbed_hints"] = {"isolated": format_cpulist(hints.isolated),
                                          "housekeeping": format_cpulist(hints.housekeeping)}
    return plan
