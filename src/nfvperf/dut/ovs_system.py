"""Open vSwitch on the kernel datapath (``dut: ovs-system``): seed 000 §7.2.1's "native OvS".

The same daemons as :mod:`nfvperf.dut.ovs_dpdk` (ovsdb-server and the distribution's plain
``ovs-vswitchd``, everything in the run directory, optionally in the DUT namespace), but the
bridges are ``datapath_type=system``: frames are switched by the ``openvswitch`` kernel module in
softirq context, on the CPU that transmits into the veth (like the Linux bridge), and the ports
are the kernel interfaces themselves (the veth DUT ends), not DPDK vdevs.  No hugepages, no PMD
threads; the OpenFlow rules and counters are OVS's own, so a study can put ``dut: ovs-dpdk``
and ``dut: ovs-system`` side by side (seed 000 Tables 7-3/7-4).

It needs the ``openvswitch`` kernel module: preflight checks that it is loaded or loadable
(``modprobe -n``) and fails with what the host lacks otherwise (a kernel without the module,
as in containers and microVMs with a minimal kernel); :meth:`OvsSystem.start` loads it.
"""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import ClassVar, Optional

from nfvperf.dut.ovs_telemetry import OVS_OFFERS
from nfvperf.host.cpu import CoreRequest, PinningPlan
from nfvperf.trial import Unsupported
from nfvperf.host.preflight import Binary, Check, Needs

from .base import PortRef, TopologyView, register_dut
from .ovs_ctl import OvsError, OvsPort
from .ovs_dpdk import OVSDB_SERVER, OvsDpdk

#: the plain (kernel-datapath) ovs-vswitchd of the openvswitch-switch package
VSWITCHD_SYSTEM = Binary("ovs-vswitchd", "openvswitch-switch", candidates=("/usr/sbin/ovs-vswitchd",),
                         env="NFVPERF_OVS_VSWITCHD_SYSTEM")
KMOD = "openvswitch"
SYS_MODULE = Path("/sys/module")


def kmod_check(module: str = KMOD, sys_module: Path = SYS_MODULE, required: bool = True) -> Check:
    """Preflight: the kernel module ``module`` is loaded (``/sys/module/<module>``) or loadable
    (``modprobe -n`` finds it); the failure says why and what to do."""
    name = f"kmod:{module}"
    if (sys_module / module).exists():
        return Check(name, "ok", f"{module} kernel module loaded", required=required)
    try:
        cp = subprocess.run(["modprobe", "-n", "-q", module], capture_output=True, text=True,
                            timeout=10)
        ok, why = cp.returncode == 0, (cp.stderr.strip() or cp.stdout.strip())
    except (OSError, subprocess.TimeoutExpired) as e:
        ok, why = False, str(e)
    if ok:
        return Check(name, "ok", f"{module} kernel module loadable (modprobe {module})",
                     required=required)
    return Check(name, "fail" if required else "warn",
                 f"dut ovs-system needs the {module} kernel module (the OVS kernel datapath); it "
                 f"is not loaded and cannot be loaded on this kernel"
                 + (f": {why}" if why else " (modprobe -n found nothing)"),
                 f"install the kernel's modules (e.g. linux-modules-extra-$(uname -r)) and "
                 f"`modprobe {module}`, or use dut: ovs-dpdk (the userspace datapath)",
                 required=required)


@register_dut("ovs-system")
class OvsSystem(OvsDpdk):
    """OVS with the kernel datapath (see the module doc); ports are veth DUT ends."""

    builds_bonds = False     # nfvperf builds bonds on OVS-DPDK's vhost-user ports only

    name = "ovs-system"
    #: no PMD threads on the kernel datapath
    telemetry_offers: ClassVar[frozenset[str]] = OVS_OFFERS - {"pmds"}
    datapath_type = "system"
    runs_remote = False        # loads the kernel module on this machine
    binaries = (VSWITCHD_SYSTEM, OVSDB_SERVER)
    #: kernel interfaces only: the DUT ends of veth pairs (af_packet / af_xdp on the generator)
    port_kinds: ClassVar[tuple[str, ...]] = ("af_packet", "af_xdp")
    port_kind_notes = {"vhost": "the kernel datapath has no vhost-user ports",
                       "memif": "the kernel datapath has no memif ports",
                       "pci": "the kernel datapath uses kernel NIC drivers; give the NICs' "
                              "netdevs as veth-like ports (not supported yet)"}
    polling_cpus = 0                           # forwards in softirq context
    #: the rule set changes in place as on OVS-DPDK; the PMD, queue, EMC/SMC and pmd-maxsleep
    #: fields are declared too because this datapath ignores them at a start as well (no PMDs,
    #: other_config empty, kernel ports have no n_rxq): changing them changes nothing, so a study
    #: needs no restart for them
    in_place: ClassVar[frozenset[str]] = OvsDpdk.in_place
    dpdk_ports = False                         # takes the kernel veths: jumbo MTUs (TCP tests)

    @classmethod
    def hugepage_demand_mb(cls, spec: TopologyView) -> int:
        return 0

    @classmethod
    def core_request(cls, spec: TopologyView) -> Optional[CoreRequest]:
        return None                            # no PMD threads (ovs.pmd_cores is ignored)

    @classmethod
    def preflight_needs(cls, spec: TopologyView) -> Needs:
        needs = super().preflight_needs(spec)
        needs.checks.append(lambda required: kmod_check())
        return needs

    @classmethod
    def adjust_plan(cls, plan: PinningPlan, spec: TopologyView) -> None:
        plan.cores_shared = True
        plan.warnings.append("CORES SHARED: kernel OVS forwards in softirq context on the CPU "
                             "that transmits into the veth, i.e. the generator's CPU(s) "
                             f"{plan.cpus('tgen')}; results are a lower bound")

    @classmethod
    def describe_options(cls, section: dict[str, object]) -> list[str]:
        return ["kernel datapath"] + [b for b in super().describe_options(section)
                                      if "PMD" not in b and "pmd" not in b and "socket" not in b]

    def _start_daemons(self) -> None:
        check = kmod_check()
        if check.status != "ok":
            raise OvsError(f"{check.detail}; fix: {check.fix}")
        if not (SYS_MODULE / KMOD).exists():
            cp = subprocess.run(["modprobe", KMOD], capture_output=True, text=True, timeout=30)
            if cp.returncode != 0:
                raise OvsError(f"modprobe {KMOD} failed: {cp.stderr.strip()}")
        self.vswitchd_bin = self.vswitchd_bin or VSWITCHD_SYSTEM.find()
        if not self.vswitchd_bin:
            raise OvsError("ovs-vswitchd not found (apt-get install openvswitch-switch, or set "
                           "NFVPERF_OVS_VSWITCHD_SYSTEM)")
        super()._start_daemons()

    def other_config(self) -> dict[str, str]:
        return {}                              # no DPDK, no PMDs

    def _wait_datapath(self) -> None:
        self._raise_if_dead()

    def attach_portref(self, port: PortRef, bridge: str, ofport: Optional[int] = None,
                       dpdk_index: int = 0) -> int:
        """A kernel interface (the veth DUT end) as a system port of ``bridge``."""
        if not port.end.kernel or not port.ifname:
            raise OvsError(f"kernel OVS attaches kernel interfaces (veth); port {port.name} is "
                           f"{port.end.name!r}")
        if port.netns != self.netns:
            raise OvsError(f"port {port.name} is in netns {port.netns}, OVS in {self.netns}")
        args = ["--may-exist", "add-port", bridge, port.ifname]
        extra = [f"ofport_request={int(ofport)}"] if ofport is not None else []
        if port.mtu is not None:
            extra.append(f"mtu_request={int(port.mtu)}")
        if extra:
            args += ["--", "set", "Interface", port.ifname, *extra]
        self.vsctl(*args)
        p = OvsPort(port.ifname, "system", bridge, mtu=port.mtu)
        p.ofport = self._ofport(port.ifname)
        self.ovs_ports[port.name] = p          # keyed by the PortRef name: ofport(index) finds it
        return p.ofport

    def tx_queues(self) -> int:
        return 1

    def vhost_socket(self, name: str) -> Path:
        raise Unsupported("ovs-system: the kernel datapath has no vhost-user ports")

    def enable_tso(self) -> None:
        raise Unsupported("ovs-system: userspace TSO is OVS-DPDK's; the kernel datapath offloads "
                          "by its netdevs")

    def pmd_stats(self) -> dict[str, object]:
        return {}                              # no PMD threads on the kernel datapath

    def versions(self) -> dict[str, str]:
        v = super().versions()
        v.pop("dpdk", None)
        return v

    def version(self) -> str:
        return self.versions().get("ovs", "")
