"""Open vSwitch with DPDK as the device under test.

The adapter runs its *own* ``ovsdb-server`` and ``ovs-vswitchd`` (the DPDK build) as children of
this process, with every file (database, pidfiles, logs, control and OpenFlow sockets) in a
directory of the run, and the DPDK EAL tagged with ``--file-prefix=<tag>``.  No system service,
database or bridge is touched.  Optionally the daemons run inside a network namespace (``netns``),
which keeps the bridge's tap devices and the VXLAN tunnel addresses out of the host's namespace;
the DPDK ``af_packet`` / ``af_xdp`` ports then open the veth ends that live in that namespace.

Life cycle (the DUT adapter convention): ``start()`` → ``add_bridge()`` / ``add_port()`` ...  →
``program(flows)`` → ``counters()`` around trials, ``alive()`` while traffic runs → ``stop()``.
``attach()`` points the adapter at an OVS that is already running (it then only creates and deletes
its own bridges).

Everything is driven through the OVS command-line tools with argument lists (no shell), always with
an explicit ``--db`` / ``-t`` / bridge management socket, so nothing falls back to the system paths.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Literal, Optional, Sequence, Union

from pydantic import Field, field_validator, model_validator

from nfvperf.dut.base import AdapterOptions, DutAdapter, Flow, PortRef, TopologyView, cross_connect, \
    register_dut
from nfvperf.dut.ovs_telemetry import OVS_OFFERS, ovs_reading
from nfvperf.dut.ovs_rules import RuleInstall, RuleInstallError, install_rules, install_timeout_s
from nfvperf.host import hugepages as hp
from nfvperf.host.preflight import Check, Needs
from nfvperf.host.cpu import CoreRequest, CpuTopology, cpu_mask, format_cpulist
from nfvperf.host.netns import add_address, set_link
from nfvperf.host.preflight import Binary
from nfvperf.host.proc import LOCAL, CommandError, Process
from nfvperf.host.run import PROGRESS_LOGGER, ResourceTracker, RunContext
from nfvperf.tg.sim_model import SimTraits, popcount_mask
from nfvperf.trial import DutFailure, Unsupported
from nfvperf.units import cores_from_mask

log = logging.getLogger(__name__)
_progress_log = logging.getLogger(PROGRESS_LOGGER)

SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
_UNIX_PATH_MAX = 107


class OvsError(RuntimeError):
    """An OVS command or set-up step failed (the message carries the command and its output)."""


@dataclass
class OvsPort:
    name: str
    kind: str                     # dpdk | dpdkvhostuserclient | vxlan | internal
    bridge: str
    ofport: int = -1
    options: dict[str, str] = field(default_factory=dict)
    mtu: Optional[int] = None     # mtu_request


#: Interface types that take ``mtu_request`` (tunnels and patch ports have no MTU of their own)
MTU_KINDS = ("dpdk", "dpdkvhostuser", "dpdkvhostuserclient", "internal")


OVS_VSWITCHD_DPDK = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"
#: the programs the adapter runs (preflight requires them)
VSWITCHD = Binary("ovs-vswitchd-dpdk", "openvswitch-switch-dpdk", candidates=(OVS_VSWITCHD_DPDK,),
                  env="NFVPERF_OVS_VSWITCHD")
OVSDB_SERVER = Binary("ovsdb-server", "openvswitch-switch")

#: OVS bond modes (Port bond_mode, ovs-vswitchd.conf.db(5) "Bonding Configuration")
BOND_MODES = ("active-backup", "balance-slb", "balance-tcp")


def bond_refusal(mode: Optional[str], lacp: str, fallback_ab: bool) -> Optional[str]:
    """Why a bond of ``mode`` with ``lacp`` cannot be measured by nfvperf's generator (None if it
    can).  OVS 3.1 (ovs-vswitchd.conf.db(5), ofproto/bond.c): balance-tcp needs 802.3ad with
    successfully negotiated LACP; with ``lacp: off`` such a bond admits no frame and chooses no
    output member (everything is dropped), and with LACP on but no partner it is disabled, or
    with ``lacp-fallback-ab`` runs as active-backup.  tgen does not speak LACP (802.3ad), so it
    is never OVS's partner: LACP cannot negotiate."""
    if mode is None:
        return None
    if mode == "balance-tcp" and lacp == "off":
        return ("topology.ovs.bond_lacp: off with bond_mode balance-tcp: OVS balances TCP/UDP "
                "flows over a bond only once LACP is negotiated (ovs-vswitchd.conf.db(5)); "
                "without LACP it drops every frame on the bond. tgen does not speak LACP, so "
                "use bond_mode: balance-slb (hashes the source MAC and VLAN, no LACP) or "
                "active-backup")
    if lacp != "off":
        fb = (" with lacp_fallback_ab OVS falls back to active-backup, which is bond_mode: "
              "active-backup with bond_lacp: off" if fallback_ab else
              " without lacp_fallback_ab OVS disables the bond")
        return (f"topology.ovs.bond_lacp: {lacp} needs an LACP (802.3ad) partner on the "
                f"generator's side, and tgen does not speak LACP, so negotiation never succeeds:"
                f"{fb}; use bond_lacp: off with bond_mode balance-slb or active-backup")
    return None


# the suite's ``topology.ovs:`` section
class OvsSpec(AdapterOptions):
    alternatives = (("pmd_cores", "pmd_cpu_mask"), ("socket_mem", "socket_mem_mb"))

    pmd_cpu_mask: Optional[str] = Field(None, description="hex mask of PMD cores, e.g. '0x2' "
                                        "(or give pmd_cores)")
    pmd_cores: Optional[int] = Field(
        None, ge=1, le=512, description="PMD cores as a count of physical cores (seed 000: 1, 2, "
        "4); resolved to pmd-cpu-mask from the host's thread siblings when the topology is built, "
        "avoiding the housekeeping core 0 where the host has others")
    ht: bool = Field(False, description="with pmd_cores: a PMD on both hyper-threads of each "
                     "core (pmd_cores: 2, ht: true = 4 PMD threads, seed 000's '2 cores and 4 "
                     "threads'); the host must have hyper-threading")
    n_rxq: int = Field(1, ge=1, le=64)
    n_rxq_desc: int = Field(1024, ge=64, le=8192)
    n_txq_desc: int = Field(1024, ge=64, le=8192)
    emc_insert_inv_prob: Optional[int] = Field(None, ge=0, le=4294967295)
    smc_enable: bool = False
    socket_mem_mb: int = Field(1024, ge=256, description="DPDK socket memory (MB) on one "
                               "NUMA socket (or give socket_mem per socket)")
    socket_mem: Optional[list[int]] = Field(
        None, description="DPDK socket memory (MB) per NUMA socket, other_config:dpdk-socket-mem "
        "as a list or a string: '11264,1024' (seed 003) = 11264 MB on socket 0, 1024 on socket 1")
    rules: int = Field(0, ge=0, le=4_194_304, description="extra src/dst-IP rules for rule-complexity "
                       "tests, per direction (OVS holds ~1.1 GB per million rules)")
    bridges: int = Field(
        1, ge=1, le=2, description="p-ovs-p: 1 bridge, or 2 (seed 003's dual bridge) with PHY "
        "port 0 on the first, port 1 on the second, joined by a pair of patch ports")
    vlan_translate: Optional[dict[int, int]] = Field(
        None, description="p-ovs-p VLAN translation (seed 003): {100: 200} rewrites the tag of "
        "frames arriving tagged 100 to 200 (OpenFlow mod_vlan_vid) and forwards only those; "
        "with bridges: 2 the ingress bridge rewrites and the egress bridge forwards only tag 200. "
        "The generator sends the tag with traffic.vlan")
    bond_mode: Optional[Literal["active-backup", "balance-slb", "balance-tcp"]] = Field(
        None, description="p-ovs-p: bond the ports of each side into one OVS bond (seed 003's "
        "bonding): ports 0, 2, ... form one bond and 1, 3, ... the other (ports: 4 = two members "
        "each); forwarding is OVS's NORMAL action (MAC learning), which picks the member by the "
        "bond's hash; the generator counts each stream over its bond's members (a receive group). "
        "balance-slb hashes the source MAC and VLAN; active-backup sends everything through the "
        "primary member (the generator transmits only there); balance-tcp needs LACP, which the "
        "generator does not speak (refused)")
    bond_lacp: Literal["off", "active", "passive"] = Field(
        "off", description="the bonds' Port lacp; only off can be measured (tgen is no LACP "
        "partner)")
    lacp_fallback_ab: bool = Field(False, description="other_config:lacp-fallback-ab of the bonds")
    bond_rebalance_ms: Optional[int] = Field(
        None, ge=0, le=2_147_483_647, description="other_config:bond-rebalance-interval of the "
        "bonds (balance-slb/tcp: how often OVS moves hashes between members; 0 = never; None = "
        "OVS's 10000)")
    pmd_maxsleep_us: Optional[int] = Field(
        None, ge=0, le=10000, description="OVS other_config:pmd-maxsleep (idle PMDs sleep up to this "
        "long); None = 500 when the CPU plan shares cores (the PMD then yields its CPU to the "
        "generator/VNF when idle), else off")
    existing_db: Optional[str] = Field(
        None, description="use an OVS that is already running: its ovsdb socket "
        "(e.g. /var/run/openvswitch/db.sock); nfvperf then only adds and deletes its own bridge")
    existing_ctl: Optional[str] = Field(
        None, description="that ovs-vswitchd's unixctl socket (default: the ovs-vswitchd.<pid>.ctl "
        "next to existing_db)")
    vswitchd: Optional[str] = Field(
        None, description="the ovs-vswitchd binary to run, a DUT build (default: the installed one); "
        "two builds compared in one run: a study axis topology.ovs.vswitchd: [/usr/sbin/ovs-vswitchd, "
        "/opt/ovs-b/sbin/ovs-vswitchd] with rounds (interleaved by restarting), gated by nfvperf gate --ab")


    @field_validator("socket_mem", mode="before")
    @classmethod
    def _socket_mem_list(cls, v: Any) -> Any:
        """'11264,1024' (the ovs-vsctl form) or 11264 -> [11264, 1024] / [11264]."""
        if isinstance(v, int):
            return [v]
        if isinstance(v, str):
            try:
                return [int(x) for x in v.replace(" ", "").split(",") if x != ""]
            except ValueError:
                raise ValueError(f"socket_mem {v!r}: MB per NUMA socket, comma-separated, e.g. "
                                 f"'11264,1024'") from None
        return v

    @field_validator("socket_mem")
    @classmethod
    def _socket_mem_sane(cls, v: Optional[list[int]]) -> Optional[list[int]]:
        if v is not None:
            if not v or any(x < 0 for x in v) or not any(v):
                raise ValueError(f"socket_mem {v}: MB per NUMA socket, at least one > 0 "
                                 f"(e.g. [1024] or '11264,1024')")
        return v

    @field_validator("vlan_translate")
    @classmethod
    def _vlan_ids(cls, v: Optional[dict[int, int]]) -> Optional[dict[int, int]]:
        if v is not None:
            bad = [x for pair in v.items() for x in pair if not 1 <= int(x) <= 4094]
            if not v or bad:
                raise ValueError(f"vlan_translate {v}: map VLAN ids 1..4094, e.g. {{100: 200}}")
        return v

    @model_validator(mode="after")
    def _one_way_each(self) -> "OvsSpec":
        why = bond_refusal(self.bond_mode, self.bond_lacp, self.lacp_fallback_ab)
        if why:
            raise ValueError(why)
        if self.bond_mode is None and (self.bond_lacp != "off" or self.lacp_fallback_ab or
                                       self.bond_rebalance_ms is not None):
            raise ValueError("bond_lacp, lacp_fallback_ab and bond_rebalance_ms configure bonds: "
                             "give bond_mode too (or leave them out)")
        if self.bond_mode and self.rules:
            raise ValueError(f"bond_mode and rules: give one (a bond forwards by OVS's NORMAL "
                             f"action, MAC learning; the {self.rules} IP rules output to one port)")
        if self.vlan_translate and self.rules:
            raise ValueError("vlan_translate and rules: give one (the IP rules do not match "
                             "on VLANs)")
        if self.pmd_cores is not None and self.pmd_cpu_mask:
            raise ValueError(f"give pmd_cores ({self.pmd_cores}) or pmd_cpu_mask "
                             f"({self.pmd_cpu_mask}), not both")
        if self.ht and self.pmd_cores is None:
            raise ValueError("ht: true applies to pmd_cores (both hyper-threads of each core); "
                             "give pmd_cores, or put the sibling CPUs in pmd_cpu_mask")
        if self.socket_mem is not None and \
                self.socket_mem_mb != type(self).model_fields["socket_mem_mb"].default:
            raise ValueError(f"give socket_mem ({self.socket_mem}, per NUMA socket) or "
                             f"socket_mem_mb ({self.socket_mem_mb}), not both")
        return self

    def socket_mem_list(self) -> list[int]:
        """MB per NUMA socket (socket_mem, else [socket_mem_mb])."""
        return list(self.socket_mem) if self.socket_mem is not None else [self.socket_mem_mb]

    def dpdk_socket_mem(self) -> str:
        """other_config:dpdk-socket-mem, e.g. '11264,1024'."""
        return ",".join(str(x) for x in self.socket_mem_list())

    def pmd_threads(self) -> Optional[int]:
        """PMD threads the options ask for, without the host: pmd_cores × (2 with ht), or the
        bits of pmd_cpu_mask (None when neither is given: the CPU plan decides)."""
        if self.pmd_cores is not None:
            return self.pmd_cores * (2 if self.ht else 1)
        if self.pmd_cpu_mask:
            return bin(int(self.pmd_cpu_mask, 16)).count("1")
        return None

    def sim_traits(self) -> SimTraits:
        return SimTraits(pmd_cores=self.pmd_cores or None, ht=self.ht,
                         pmd_threads=popcount_mask(self.pmd_cpu_mask), n_rxq=self.n_rxq or 1,
                         rules=self.rules or 0, smc=self.smc_enable)


def socket_mem_check(per_socket: Sequence[int], nodes: Optional[Sequence[int]] = None) -> Check:
    """Preflight: ``ovs.socket_mem`` gives memory only to NUMA sockets this host has (DPDK
    refuses to start otherwise)."""
    nodes = list(nodes) if nodes is not None else CpuTopology.read().nodes()
    missing = [i for i, mb in enumerate(per_socket) if mb and i not in nodes]
    given = ",".join(str(x) for x in per_socket)
    if not missing:
        return Check("ovs.socket_mem", "ok", f"dpdk-socket-mem={given} on NUMA node(s) "
                     f"{', '.join(map(str, nodes))}", required=True)
    fit = ",".join(str(x) if i in nodes else "0" for i, x in enumerate(per_socket))
    return Check("ovs.socket_mem", "fail",
                 f"topology.ovs.socket_mem {given!r} gives memory to NUMA socket(s) "
                 f"{', '.join(map(str, missing))}, but this host has node(s) "
                 f"{', '.join(map(str, nodes))}",
                 f"give memory only to the host's sockets, e.g. socket_mem: '{fit}'", required=True)


def pmd_mask_check(mask: str, allowed: Optional[Sequence[int]] = None) -> Check:
    """Preflight: every CPU of ``ovs.pmd_cpu_mask`` is one this process may run on (OVS starts no
    PMD thread on a CPU the host lacks, and then forwards nothing)."""
    allowed = list(allowed) if allowed is not None else CpuTopology.read().allowed
    cpus = cores_from_mask(mask)
    missing = [c for c in cpus if c not in allowed]
    if not missing:
        return Check("ovs.pmd_cpu_mask", "ok", f"PMD CPUs {format_cpulist(cpus)}", required=True)
    return Check("ovs.pmd_cpu_mask", "fail",
                 f"topology.ovs.pmd_cpu_mask {mask} names CPU(s) {format_cpulist(missing)}, but this "
                 f"host has CPU(s) {format_cpulist(allowed)} (OVS would start no PMD thread there "
                 f"and forward nothing)",
                 "give pmd_cores: N (resolved on this host) or a mask of the host's CPUs, e.g. "
                 f"pmd_cpu_mask: '{cpu_mask(allowed[-1:])}'", required=True)


def _find_vswitchd() -> str:
    path = VSWITCHD.find()       # also honours $NFVPERF_OVS_VSWITCHD
    if not path:
        raise OvsError("ovs-vswitchd with DPDK not found (apt-get install openvswitch-switch-dpdk, "
                       "or set NFVPERF_OVS_VSWITCHD)")
    return path


@register_dut("ovs-dpdk")
class OvsDpdk(DutAdapter):
    """OVS-DPDK in the run directory (see the module doc).

    ``cpus`` are the PMD CPUs (``pmd-cpu-mask``) unless ``spec.pmd_cpu_mask`` says otherwise;
    ``spec`` is :class:`OvsSpec` (or a TopologySpec); ``lcore_cpu`` runs the non-PMD threads.
    Ports given to :meth:`add_port` (a :class:`PortRef`) go on the first bridge with OpenFlow port
    number index + 1; a ``veth`` port's namespace becomes OVS's namespace when ``netns`` is not set.
    """

    builds_bonds = True
    #: PMD counters, datapath flows, live port counters (dut/ovs_telemetry.py)
    telemetry_offers: ClassVar[frozenset[str]] = OVS_OFFERS

    name = "ovs-dpdk"
    runs_remote = True
    switching_operations = 1
    #: the bridges' datapath: netdev (userspace, DPDK); the kernel datapath is ``ovs-system``
    datapath_type = "netdev"
    options_key = "ovs"
    options_model = OvsSpec
    binaries = (VSWITCHD, OVSDB_SERVER)
    #: PHY ports: veth (af_packet/af_xdp vdevs), vhost-user (dpdkvhostuserclient), memif (a
    #: dpdk port on net_memif, role=server; the peer must poll tx_queues() rings), real NICs
    port_kinds: ClassVar[tuple[str, ...]] = ("af_packet", "af_xdp", "vhost", "memif", "pci")
    #: what a running OVS changes (:meth:`reconfigure`, see :meth:`apply_in_place`): the rule set
    #: (del-flows + the bundle installer of ovs_rules, counted with dump-aggregate), the rx queues
    #: of its dpdk ports (Interface options:n_rxq; on veth also the af_packet/af_xdp vdev's queue
    #: pairs, for which OVS re-creates the port), the PMD CPUs given as a mask, the EMC insertion
    #: probability, SMC and pmd-maxsleep (Open_vSwitch other_config, read by a running OVS).
    #: Not ``ovs.pmd_cores`` / ``ovs.ht``: a core count is resolved by the topology's CPU plan
    #: together with the generator's and the VNFs' CPUs (resolve_cores excludes what the DUT took,
    #: plan_pinning places the rest), so another count can move tgen or a VNF, which already run
    #: pinned, to other CPUs: that needs a new plan, i.e. a restart.  ``ovs.pmd_cpu_mask`` does not
    #: enter the plan (the plan's ``dut`` CPUs are only the default when no mask is given), so the
    #: mask a restart would give is computed here the same way (:meth:`other_config`).
    in_place: ClassVar[frozenset[str]] = frozenset({
        "ovs.rules", "ovs.n_rxq", "ovs.pmd_cpu_mask", "ovs.emc_insert_inv_prob", "ovs.smc_enable",
        "ovs.pmd_maxsleep_us"})
    #: the in-place fields that are Open_vSwitch other_config (global to the OVS)
    GLOBAL_IN_PLACE: ClassVar[frozenset[str]] = frozenset({
        "ovs.pmd_cpu_mask", "ovs.emc_insert_inv_prob", "ovs.smc_enable", "ovs.pmd_maxsleep_us"})
    #: the other_config keys those fields set (:meth:`other_config`)
    IN_PLACE_CONFIG: ClassVar[tuple[str, ...]] = ("pmd-cpu-mask", "emc-insert-inv-prob",
                                                  "smc-enable", "pmd-maxsleep")

    @classmethod
    def options(cls, spec: TopologyView) -> Optional[OvsSpec]:
        return cls.options_as(spec, OvsSpec)

    @classmethod
    def in_place_for(cls, spec: TopologyView) -> frozenset[str]:
        """:attr:`in_place`, less the PMD mask on memif (the generator polls ``tx_queues()`` =
        PMD threads + 1 rings per port, fixed when it started) and the global other_config of an
        OVS that nfvperf only attached to (``existing_db``: not nfvperf's to change; a start
        does not set them either)."""
        out = cls.in_place
        if spec.port_kind == "memif":
            out = out - {"ovs.pmd_cpu_mask"}
        ovs = cls.options(spec)
        if ovs is not None and ovs.existing_db:
            out = out - cls.GLOBAL_IN_PLACE
        return out

    @classmethod
    def hugepage_demand_mb(cls, spec: TopologyView) -> int:
        ovs = cls.options(spec)
        return int(sum((ovs if ovs is not None else OvsSpec()).socket_mem_list()))

    @classmethod
    def preflight_needs(cls, spec: TopologyView) -> Needs:
        needs = super().preflight_needs(spec)
        ovs = cls.options(spec)
        if ovs is not None and ovs.socket_mem:
            needs.checks.append(lambda required: socket_mem_check(ovs.socket_mem_list()))
        if ovs is not None and ovs.pmd_cpu_mask:
            mask = ovs.pmd_cpu_mask
            needs.checks.append(lambda required: pmd_mask_check(mask))
        return needs

    @classmethod
    def polling_cpus_of(cls, spec: TopologyView) -> Optional[list[int]]:
        """``ovs.pmd_cpu_mask``'s CPUs: the PMD threads run there, not on the plan's ``dut``
        CPUs (the mask does not enter the plan; it can also change in place)."""
        ovs = cls.options(spec)
        if ovs is None or not ovs.pmd_cpu_mask:
            return None
        return cores_from_mask(ovs.pmd_cpu_mask)

    @classmethod
    def core_request(cls, spec: TopologyView) -> Optional[CoreRequest]:
        ovs = cls.options(spec)
        if ovs is None or ovs.pmd_cores is None:
            return None
        return CoreRequest("topology.ovs.pmd_cores", int(ovs.pmd_cores), bool(ovs.ht))

    @classmethod
    def describe_options(cls, section: dict[str, Any]) -> list[str]:
        bits = []
        if section.get("pmd_cpu_mask"):
            bits.append(f"pmd-cpu-mask {section['pmd_cpu_mask']}")
        if section.get("pmd_cores"):
            n = int(section["pmd_cores"])
            bits.append(f"{n} PMD core{'s' if n != 1 else ''}" +
                        (f" ({2 * n} threads, HT)" if section.get("ht") else ""))
        if int(section.get("bridges") or 1) > 1:
            bits.append(f"{section['bridges']} bridges (patch ports)")
        if section.get("vlan_translate"):
            bits.append("VLAN " + ", ".join(f"{a}->{b}" for a, b in section["vlan_translate"].items()))
        if section.get("bond_mode"):
            bits.append(f"bond {section['bond_mode']}")
        if section.get("socket_mem"):
            bits.append("socket-mem " + ",".join(str(x) for x in section["socket_mem"]))
        if section.get("n_rxq", 1) != 1:
            bits.append(f"{section['n_rxq']} rxq")
        if section.get("rules"):
            bits.append(f"{section['rules']:,} rules")
        return bits

    def __init__(self, run: RunContext, tracker: Optional[ResourceTracker] = None,
                 cpus: Sequence[int] = (), spec: Union[OvsSpec, TopologyView, None] = None, *,
                 netns: Optional[str] = None, lcore_cpu: int = 0, socket_mem_mb: Optional[int] = None,
                 vswitchd: Optional[str] = None, start_timeout_s: float = 30.0, **options: Any) -> None:
        super().__init__(run, tracker, cpus=cpus, **options)
        #: the topology's port kind (pci: the ports are NICs, so no --no-pci in the EAL options)
        self.port_kind: Optional[str] = None
        if spec is not None and not isinstance(spec, OvsSpec):   # a TopologySpec: its ovs section
            self.port_kind = spec.port_kind
            spec = self.options(spec)
        plan = options.get("plan")
        if plan is not None and getattr(plan, "housekeeping", None):
            lcore_cpu = plan.housekeeping[0]
        self.tag = run.tag
        self.run_dir = Path(run.run_dir)
        #: the options (None: an instance built without them, on the defaults below)
        self.spec: Optional[OvsSpec] = spec
        self.netns = netns
        self.lcore_cpu = lcore_cpu
        self.pmd_cpu_mask = (spec.pmd_cpu_mask if spec is not None else None) or \
            (cpu_mask(self.cpus) if self.cpus else None)
        self.socket_mem_mb = socket_mem_mb or (spec.socket_mem_mb if spec is not None else None) or 512
        #: other_config:dpdk-socket-mem (and -limit): MB per NUMA socket, e.g. '11264,1024'
        self.socket_mem = str(socket_mem_mb) if socket_mem_mb else \
            (spec.dpdk_socket_mem() if spec is not None else str(self.socket_mem_mb))
        self.vswitchd_bin = vswitchd or (spec.vswitchd if spec is not None else None)
        #: other_config:userspace-tso-enable (read once at start): vhost-user ports then offer the
        #: guests TSO and checksum offload (the TCP topology vm-vm sets it; nfvperf.topo.tcp_vm)
        self.userspace_tso = False
        self.start_timeout_s = start_timeout_s
        self.file_prefix = run.file_prefix("ovs")
        # where the daemons run (nfvperf.host.proc.LOCAL, or an SshHost of a testbed: then the
        # files below are on that host, reached through self.host)
        self.host: Any = options.get("host") or LOCAL
        self.remote = bool(getattr(self.host, "remote", False))
        # Unix socket paths are limited to 108 bytes; fall back to a short tagged directory.
        d = (Path(self.host.work_dir) / self.tag / "ovs") if self.remote \
            else self.run_dir / "ovs"
        if len(str(d / "ovs-vswitchd.00000.ctl")) + 20 > _UNIX_PATH_MAX:
            d = Path(f"/tmp/{self.tag}-ovs")
            self._own_dir = True
        else:
            self._own_dir = False
        self.dir = d
        self.vhost_dir = d               # where the VNFs' vhost-user sockets go
        self.db_sock = d / "db.sock"
        self.ctl = d / "ovs-vswitchd.ctl"
        self.db_ctl = d / "ovsdb-server.ctl"
        self.ovs_ports: dict[str, OvsPort] = {}
        #: dpdkvhostuserclient ports added without their socket path, connected by
        #: :meth:`connect_vhost` (see :meth:`defer_vhost_connect`): name -> socket
        self.deferred_vhost: dict[str, str] = {}
        self._defer_vhost: set[str] = set()
        #: bonds made by add_bond(): {name: {"bridge", "members", "mode", "lacp", "other_config"}}
        self.bonds: dict[str, dict[str, Any]] = {}
        self.bridges: list[str] = []
        self._procs: dict[str, Process] = {}
        self._attached = False
        self._flow_files = 0
        self.rule_installs: list[RuleInstall] = []
        #: what reconfigure() applied, in order (in environment())
        self.reconfigurations: list[dict[str, Any]] = []
        #: the topology's rule set for the current spec (set by the OVS topologies; returns None
        #: when ``ovs.rules`` does not shape their forwarding): what an in-place ``ovs.rules``
        #: change installs
        self.forwarding: Optional[Callable[[], Optional[Sequence[Union[Flow, str]]]]] = None
        if spec is not None and spec.existing_db:
            self.attach(spec.existing_db, spec.existing_ctl)

    # ------------------------------------------------------------------ plumbing
    @property
    def ovs_env(self) -> dict[str, str]:
        """What OVS's processes get on top of their host's environment."""
        e = dict(self.run.env())          # NFVPERF_TAG: `nfvperf cleanup` finds our processes
        for k in ("OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVS_SYSCONFDIR"):
            e[k] = str(self.dir)
        return e

    @property
    def env(self) -> dict[str, str]:
        e = dict(os.environ)
        e.update(self.ovs_env)
        return e

    def _run(self, argv: Sequence[str], timeout: float = 30.0, check: bool = True) -> str:
        try:
            cp = self.host.run(list(argv), env=self.ovs_env, timeout=timeout, check=False)
        except CommandError as e:
            self._raise_if_dead()
            raise OvsError(f"{' '.join(argv)}: {e}") from e
        if check and cp.returncode != 0:
            self._raise_if_dead()
            raise OvsError(f"{' '.join(argv)} failed ({cp.returncode}): {cp.stderr.strip() or cp.stdout.strip()}")
        return cp.stdout

    def vsctl(self, *args: str, wait: bool = True, timeout: float = 30.0) -> str:
        argv = ["ovs-vsctl", f"--db=unix:{self.db_sock}", f"--timeout={int(timeout)}"]
        if not wait:
            argv.append("--no-wait")
        return self._run([*argv, *args], timeout=timeout + 5)

    def appctl(self, *args: str, timeout: float = 15.0) -> str:
        return self._run(["ovs-appctl", "-t", str(self.ctl), f"--timeout={int(timeout)}", *args],
                         timeout=timeout + 5)

    def ofctl(self, cmd: str, bridge: str, *args: str, timeout: float = 30.0) -> str:
        return self._run(["ovs-ofctl", f"--timeout={int(timeout)}", cmd, self.mgmt(bridge), *args],
                         timeout=timeout + 5)

    def mgmt(self, bridge: str) -> str:
        return f"unix:{self.dir / (bridge + '.mgmt')}"

    # ------------------------------------------------------------------ life cycle
    def start(self) -> None:
        """Start ovsdb-server and ovs-vswitchd-dpdk (unless attached to a running OVS), create the
        bridge and attach the ports added so far."""
        if self.started:
            return
        if self.netns is None and not self._attached:
            spaces = {p.netns for p in self.ports if p.end.kernel}
            if len(spaces) > 1:
                raise OvsError(f"OVS runs in one namespace; its veth ports are in {sorted(map(str, spaces))}")
            if spaces:
                self.netns = spaces.pop()
        if self.tracker is not None and self._own_dir and \
                ("dir", str(self.vhost_dir)) not in self.tracker.items():
            # the /tmp fallback dir goes at the end of the run, after the VNFs using it
            self.tracker.add("dir", str(self.vhost_dir), lambda: self.host.rmtree(self.vhost_dir))
        if not self._attached:
            self._start_daemons()
        self.started = True
        if self.tracker is not None:
            self.tracker.add("dut", f"ovs-dpdk:{self.tag}", self.stop)
        try:
            self.add_bridge()
            for i, port in enumerate(self.ports):
                self._attach_port(port, i)
        except BaseException:
            self.stop()
            raise

    def _vswitchd(self) -> str:
        if self.vswitchd_bin:
            if not self.host.exists(self.vswitchd_bin):
                raise DutFailure(f"topology.ovs.vswitchd: {self.vswitchd_bin} does not exist on "
                                 f"{getattr(self.host, 'name', 'this host')}; give the path of an ovs-vswitchd build")
            return self.vswitchd_bin
        if not self.remote:
            return _find_vswitchd()
        for cand in VSWITCHD.candidates:
            if self.host.exists(cand):
                return cand
        return VSWITCHD.name

    def _start_daemons(self) -> None:
        binary = self._vswitchd()
        self.host.mkdir(self.dir)
        if self.remote and self.tracker is not None:
            # the run's directory on that host (never the /tmp fallback's parent)
            root = Path(self.host.work_dir) / self.tag
            if root in self.dir.parents:
                self.tracker.add("dir", f"{self.host.name}:{root}", lambda: self.host.rmtree(root))
        db = self.dir / "conf.db"
        self.host.remove(db)
        self._run(["ovsdb-tool", "create", str(db), SCHEMA])
        self._spawn("ovsdb-server", [
            "ovsdb-server", str(db), f"--remote=punix:{self.db_sock}",
            f"--pidfile={self.dir / 'ovsdb-server.pid'}", f"--unixctl={self.db_ctl}",
            f"--log-file={self.dir / 'ovsdb-server.log'}", "-vconsole:off"])
        try:
            self._wait_path(self.db_sock, "ovsdb-server")
            self.vsctl("init", wait=False)
            cfg = self.other_config()
            if cfg:
                self.vsctl("set", "Open_vSwitch", ".",
                           *[f'other_config:{k}="{v}"' for k, v in cfg.items()], wait=False)
            self._spawn("ovs-vswitchd", [
                binary, f"unix:{self.db_sock}", f"--pidfile={self.dir / 'ovs-vswitchd.pid'}",
                f"--unixctl={self.ctl}", f"--log-file={self.dir / 'ovs-vswitchd.log'}",
                "-vconsole:off"], netns=self.netns)
            self._wait_path(self.ctl, "ovs-vswitchd")
            self._wait_datapath()
        except BaseException:
            self.started = True
            self.stop()
            raise
        log.info("%s up in %s (netns %s, pmd-cpu-mask %s)", self.name, self.dir, self.netns,
                 cfg.get("pmd-cpu-mask"))

    def other_config(self) -> dict[str, str]:
        """The Open_vSwitch other_config set before ovs-vswitchd starts: DPDK memory per NUMA
        socket, EAL options, the PMD and non-PMD CPU masks, EMC/SMC tuning."""
        # --no-pci keeps DPDK off this host's NICs, except when the ports are PCI NICs
        # (port_kind pci: each one is probed by its dpdk-devargs=<pci> when the port is added)
        pci = self.port_kind == "pci"
        eal = f"--file-prefix={self.file_prefix}{'' if pci else ' --no-pci'} --single-file-segments"
        cfg = {
            "dpdk-init": "true",
            "dpdk-socket-mem": self.socket_mem,
            "dpdk-socket-limit": self.socket_mem,
            "dpdk-extra": eal,
            "dpdk-lcore-mask": cpu_mask([self.lcore_cpu]),
            "pmd-cpu-mask": self._pmd_mask(),
            "vhost-sock-dir": str(self.dir),
        }
        sleep = self.pmd_maxsleep_us()
        if sleep:
            cfg["pmd-maxsleep"] = str(sleep)
        if self.userspace_tso:
            cfg["userspace-tso-enable"] = "true"
        if self.spec is not None:
            if self.spec.emc_insert_inv_prob is not None:
                cfg["emc-insert-inv-prob"] = str(self.spec.emc_insert_inv_prob)
            if self.spec.smc_enable:
                cfg["smc-enable"] = "true"
        return cfg

    def _wait_datapath(self) -> None:
        """Wait until DPDK in ovs-vswitchd has initialised (dpdk_initialized)."""
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            self._raise_if_dead()
            out = self.vsctl("get", "Open_vSwitch", ".", "dpdk_initialized", wait=False).strip()
            if out == "true":
                return
            if time.monotonic() > deadline:
                raise OvsError(f"DPDK in ovs-vswitchd did not initialise in {self.start_timeout_s:.0f} s; "
                               f"log: {self.log_tail()}")
            time.sleep(0.2)

    def attach(self, db_sock: Union[str, Path], ctl: Union[str, Path, None] = None,
               rundir: Union[str, Path, None] = None) -> "OvsDpdk":
        """Use an OVS that is already running (call before :meth:`start`): nfvperf then only creates
        and deletes its own bridge.  ``ctl`` is that ovs-vswitchd's unixctl socket (default: the
        ``ovs-vswitchd.<pid>.ctl`` next to ``db_sock``); ``rundir`` where it keeps
        ``<bridge>.mgmt`` (default: the directory of ``db_sock``)."""
        self.vhost_dir.mkdir(parents=True, exist_ok=True)     # ours, not the shared OVS's
        self.db_sock = Path(db_sock)
        self.dir = Path(rundir) if rundir else self.db_sock.parent
        if ctl is None:
            cands = sorted(self.dir.glob("ovs-vswitchd*.ctl"))
            if not cands:
                raise OvsError(f"no ovs-vswitchd*.ctl next to {db_sock}; give existing_ctl")
            ctl = cands[0]
        self.ctl = Path(ctl)
        self._attached = True
        if self.vsctl("get", "Open_vSwitch", ".", "dpdk_initialized", wait=False).strip() != "true":
            raise OvsError(f"the OVS at {db_sock} has no DPDK initialised (other_config:dpdk-init=true)")
        return self

    def pmd_maxsleep_us(self) -> int:
        """``pmd-maxsleep``: the spec's value, else 500 us when the CPU plan shares cores."""
        v = self.spec.pmd_maxsleep_us if self.spec is not None else None
        if v is not None:
            return int(v)
        plan = self.init_options.get("plan")
        return 500 if plan is not None and getattr(plan, "cores_shared", False) else 0

    def _pmd_mask(self) -> str:
        if self.pmd_cpu_mask:
            return self.pmd_cpu_mask if self.pmd_cpu_mask.startswith("0x") else "0x" + self.pmd_cpu_mask
        ncpu = os.cpu_count() or 1
        return cpu_mask([ncpu - 1])

    def _spawn(self, key: str, argv: list[str], netns: Optional[str] = None) -> None:
        """Start one daemon (nfvperf.host.proc.Process): its console output in ``<key>.out``,
        registered with the tracker, stopped by :meth:`stop`."""
        # a remote daemon's console output comes to the controller's run directory
        out = self.run.path(f"{key}.out") if self.remote else self.dir / f"{key}.out"
        p = Process(key, argv, self.run, self.tracker, netns=netns, env=self.ovs_env,
                    host=self.host, log_path=out, died=OvsError)
        p.start()
        self._procs[key] = p

    def _wait_path(self, path: Path, what: str, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.host.exists(path):
            p = self._procs.get(what)
            if p is not None and p.returncode() is not None:
                raise OvsError(f"{what} exited with {p.returncode()} at start: {self.log_tail(what)}")
            if time.monotonic() > deadline:
                raise OvsError(f"{what} did not create {path} in {timeout:.0f} s")
            time.sleep(0.05)

    def log_tail(self, what: str = "ovs-vswitchd", lines: int = 8) -> str:
        text = ""
        for f in (self.dir / f"{what}.log", self.dir / f"{what}.out"):
            try:
                if self.remote and f.suffix == ".out":
                    text += self.run.path(f.name).read_text(errors="replace")
                else:
                    text += self.host.read_text(f)
            except Exception:  # noqa: BLE001 - a log is best effort (the host may be gone)
                pass
        return " | ".join(text.strip().splitlines()[-lines:])

    def pids(self) -> dict[str, Optional[int]]:
        return {k: p.pid for k, p in self._procs.items()}

    def alive(self) -> None:
        """Raise :class:`DutFailure` if ovs-vswitchd or ovsdb-server is gone (or their host)."""
        if hasattr(self.host, "check"):
            self.host.check()
        self._raise_if_dead(DutFailure)
        if self._attached:
            try:
                self._run(["ovs-appctl", "-t", str(self.ctl), "--timeout=2", "version"], timeout=4)
            except OvsError as e:
                raise DutFailure(f"ovs-vswitchd at {self.ctl} does not answer: {e}") from e

    def _raise_if_dead(self, exc: type = OvsError) -> None:
        for key, p in self._procs.items():
            rc = p.returncode()
            if rc is not None:
                how = f"signal {-rc}" if rc < 0 else f"exit code {rc}"
                lost = getattr(p.proc, "lost", None)
                if lost:
                    raise exc(f"{key} (pid {p.pid} on {self.host.name}) unreachable: {lost}")
                raise exc(f"{key} (pid {p.pid}) died ({how}); log: {self.log_tail(key, 4)}")

    def stop(self) -> None:
        """Delete our bridges, stop the daemons, remove sockets, pidfiles and hugepage files."""
        if self.tracker is not None:
            self.tracker.forget("dut", f"ovs-dpdk:{self.tag}")
        if self._attached:
            for br in list(self.bridges):
                try:
                    self.vsctl("--if-exists", "del-br", br, timeout=10)
                except OvsError as e:
                    log.warning("could not delete bridge %s: %s", br, e)
            self.bridges.clear()
            self.bonds.clear()
            self._release_dir()
            self.started = False
            return
        vsd = self._procs.get("ovs-vswitchd")
        if vsd is not None and vsd.running():
            try:
                self.host.run(["ovs-appctl", "-t", str(self.ctl), "--timeout=5", "exit", "--cleanup"],
                              env=self.ovs_env, timeout=8, check=False)
            except Exception:  # noqa: BLE001 - stopping goes on (the host may be gone)
                pass
        # ovs-vswitchd was asked to exit: a grace for that, then SIGTERM, then SIGKILL
        for key, grace in (("ovs-vswitchd", 5.0), ("ovsdb-server", 0.0)):
            p = self._procs.get(key)
            if p is not None:
                p.stop(timeout=5.0, grace=grace)
        self._procs.clear()
        # OVS's sockets and pidfiles; logs and flow files stay in the run directory for the record.
        # The VNFs' vhost-user sockets are theirs (a reset() keeps the VNFs running).
        with contextlib.suppress(Exception):      # the host may be gone
            for pat in ("db.sock", "*.ctl", "*.mgmt", "*.snoop", "*.pid"):
                for stale in self.host.glob(self.dir, pat):
                    with contextlib.suppress(OSError):
                        self.host.remove(stale)
        if self.remote:
            with contextlib.suppress(Exception):
                for f in self.host.glob("/dev/hugepages", f"{self.file_prefix}*"):
                    self.host.remove(f)
                self.host.rmtree(f"/var/run/dpdk/{self.file_prefix}")
        else:
            hp.remove_leftovers(self.file_prefix)     # hugepage files and /var/run/dpdk/<prefix>
        self._release_dir()
        self.bridges.clear()
        self.bonds.clear()
        self.ovs_ports.clear()
        self.started = False

    def _release_dir(self) -> None:
        """Remove the /tmp fallback directory unless VNF sockets still live in it (reset())."""
        if self._own_dir:
            with contextlib.suppress(Exception):
                if not self.host.glob(self.vhost_dir, "vhu-*"):
                    self.host.rmtree(self.vhost_dir)

    # ------------------------------------------------------------------ topology
    def add_bridge(self, name: Optional[str] = None, hwaddr: Optional[str] = None,
                   mtu: Optional[int] = None) -> str:
        """A bridge of ``datapath_type`` (netdev: userspace), fail-mode secure: it forwards only what ``program`` says.
        ``mtu``: ``mtu_request`` of its internal port (a tap in OVS's namespace, e.g. a VTEP's)."""
        name = name or f"{self.tag}br{len(self.bridges)}"
        if len(name) > 15:
            raise OvsError(f"bridge name {name!r} longer than 15 characters")
        args = ["--may-exist", "add-br", name, "--", "set", "Bridge", name,
                f"datapath_type={self.datapath_type}",
                "fail_mode=secure", "other_config:disable-in-band=true"]
        if hwaddr:
            args.append(f"other_config:hwaddr={hwaddr}")
        if mtu is not None:
            args += ["--", "set", "Interface", name, f"mtu_request={int(mtu)}"]
        self.vsctl(*args)
        self.bridges.append(name)
        return name

    def _attach_port(self, port: PortRef, index: Optional[int] = None) -> None:
        """Attach a :class:`PortRef` to the first bridge as OpenFlow port index + 1."""
        index = len(self.ports) if index is None else index
        self.attach_portref(port, self.bridges[0], ofport=index + 1, dpdk_index=index)

    def attach_portref(self, port: PortRef, bridge: str, ofport: Optional[int] = None,
                       dpdk_index: int = 0) -> int:
        """Add the port a :class:`PortRef` describes to ``bridge`` with its MTU (``mtu_request``):
        ``veth``/``tap``/``pci``/``memif`` as a ``dpdk`` port (af_packet/af_xdp/memif vdev or PCI
        address),
        ``vhost-backend`` with ``client`` (a vhost-user server socket, e.g. the generator's
        virtio-user) or ``vhost-user`` (a VNF's server socket) as ``dpdkvhostuserclient``.
        Returns the OpenFlow port number."""
        kind, kw = self._portref_iface(port, dpdk_index)
        return self.add_ovs_port(bridge, port.name, kind, ofport=ofport, mtu=port.mtu, **kw)

    def _portref_iface(self, port: PortRef, dpdk_index: int) -> tuple[str, dict[str, Any]]:
        """(Interface type, add_ovs_port keywords) of a :class:`PortRef` (see attach_portref)."""
        n_rxq = int(self.spec.n_rxq or 1) if self.spec is not None else 1
        if port.end.kernel and port.netns != self.netns and not self._attached:
            raise OvsError(f"port {port.name} is in netns {port.netns}, OVS in {self.netns}")
        try:
            kind, kw = port.end.ovs_interface(port, dpdk_index, n_rxq)
        except Unsupported as e:
            raise OvsError(str(e)) from None
        if self._attached and "devargs" in kw:  # a shared OVS: vdev names must not clash with its other ports
            kw["devargs"] = re.sub(r"^(net_af_packet|net_af_xdp|net_memif)(\d+)", rf"\g<1>{self.tag}\g<2>",
                                   kw["devargs"])
        return kind, kw

    def add_bond(self, bridge: str, name: str, members: Sequence[tuple[PortRef, int, int]], mode: str,
                 lacp: str = "off", other_config: Optional[dict[str, str]] = None) -> list[int]:
        """An OVS bond ``name`` on ``bridge`` of ``members`` [(PortRef, ofport, dpdk index), ...]
        (each an Interface as :meth:`attach_portref` makes it, at that OpenFlow port number), with
        ``bond_mode`` ``mode``, ``lacp`` and the Port's ``other_config`` (bond-primary,
        lacp-fallback-ab, bond-rebalance-interval ...).  One ovs-vsctl transaction.  Returns the
        members' OpenFlow port numbers (each member keeps its own: OVS's per-member counters)."""
        if len(members) < 2:
            raise OvsError(f"bond {name}: a bond needs two or more members, got {len(members)}")
        if mode not in BOND_MODES:
            raise OvsError(f"bond {name}: bond_mode {mode!r} is not one of {', '.join(BOND_MODES)}")
        names = [p.name for p, _, _ in members]
        args = ["--may-exist", "add-bond", bridge, name, *names]
        ifaces = []
        for port, ofport, index in members:
            kind, kw = self._portref_iface(port, index)
            opts = self._iface_options(kind, kw.get("devargs"), kw.get("sock"), None)
            args += self._iface_args(port.name, kind, self._set_now(port.name, opts), ofport, port.mtu)
            ifaces.append(OvsPort(port.name, kind, bridge, options=opts,
                                  mtu=port.mtu if kind in MTU_KINDS else None))
        args += ["--", "set", "Port", name, f"bond_mode={mode}", f"lacp={lacp}"]
        args += [f'other_config:{k}="{v}"' for k, v in (other_config or {}).items()]
        self.vsctl(*args)
        out = []
        for iface in ifaces:
            iface.ofport = self._ofport(iface.name)
            self.ovs_ports[iface.name] = iface
            out.append(iface.ofport)
        self.bonds[name] = {"bridge": bridge, "members": names, "mode": mode, "lacp": lacp,
                            "other_config": dict(other_config or {})}
        return out

    def bond_show(self, name: str) -> dict[str, Any]:
        """``ovs-appctl bond/show <bond>`` parsed (:func:`parse_bond_show`)."""
        return parse_bond_show(self.appctl("bond/show", name))

    def wait_bond(self, name: str, timeout_s: float = 20.0,
                  active: Optional[str] = None) -> dict[str, Any]:
        """Wait until every member of bond ``name`` is enabled (its link is up: a vhost-user
        member once the generator connected) and, if given, ``active`` is the active member;
        returns :meth:`bond_show`."""
        want = list(self.bonds.get(name, {}).get("members") or [])
        deadline = time.monotonic() + timeout_s
        while True:
            self._raise_if_dead()
            st = self.bond_show(name)
            members = st.get("members", {})
            ok = all(members.get(m, {}).get("enabled") for m in want) and \
                (active is None or st.get("active_member") == active)
            if ok:
                return st
            if time.monotonic() > deadline:
                raise OvsError(f"bond {name} did not settle in {timeout_s:.0f} s (want members "
                               f"{want} enabled{f', {active} active' if active else ''}): {st}; "
                               f"log: {self.log_tail()}")
            time.sleep(0.1)

    def tx_queues(self) -> int:
        """TX queues OVS uses on each port: one per PMD thread plus one for the main thread.
        A memif peer must poll as many RX rings: OVS's PMD sends on queue 1 (the main thread
        on 0), and with one ring on the peer every PMD transmit fails (``ovs_tx_failure_drops``;
        measured with OVS 3.1 / DPDK 22.11)."""
        mask = self._pmd_mask()
        return bin(int(mask, 16)).count("1") + 1

    def ofport(self, index_or_name: Union[int, str]) -> int:
        """OpenFlow port number of a port (add_port index or name)."""
        if isinstance(index_or_name, int):
            index_or_name = self.ports[index_or_name].name
        return self.ovs_ports[index_or_name].ofport

    def add_ovs_port(self, bridge: str, name: str, kind: str = "dpdk", *,
                     devargs: Optional[str] = None, sock: Optional[str] = None,
                     ofport: Optional[int] = None, options: Optional[dict[str, Any]] = None,
                     mtu: Optional[int] = None) -> int:
        """Add a port to ``bridge``; return its OpenFlow port number.

        ``mtu``: the Interface's ``mtu_request`` (OVS sizes the port's mempool for it; a vhost
        port's MTU is what OVS accepts from and sends to the virtio side).  Ignored by tunnel
        and patch ports, which have no MTU of their own in the userspace datapath.

        kind ``dpdk``: ``devargs`` as from :meth:`PortRef.dpdk_devargs` (af_packet / af_xdp vdev
        on a veth, or a PCI address), with the spec's n_rxq / descriptor counts.  kind
        ``dpdkvhostuserclient``: OVS connects to the vhost-user server socket ``sock`` (the VNF's
        virtio-user, ``server=1``).  kind ``vxlan``: ``options`` give ``remote_ip``, ``key``,
        ``local_ip``...
        """
        opts = self._iface_options(kind, devargs, sock, options)
        args = ["--may-exist", "add-port", bridge, name,
                *self._iface_args(name, kind, self._set_now(name, opts), ofport, mtu)]
        self.vsctl(*args)
        port = OvsPort(name, kind, bridge, options=opts, mtu=mtu if kind in MTU_KINDS else None)
        port.ofport = self._ofport(name)
        self.ovs_ports[name] = port
        return port.ofport

    def defer_vhost_connect(self, names: Sequence[str]) -> None:
        """Add the dpdkvhostuserclient ports ``names`` without their socket path, to be given by
        :meth:`connect_vhost` once their server listens.

        A vhost-user server that is a DPDK virtio-user port (``server=1``: tgen) opens its sockets
        one at a time, each blocking until its client connects; OVS retries a socket that was not
        there when the port was added only once a second (DPDK's vhost reconnect thread), so a
        generator with N such ports took about N seconds to start.  With the path given as each
        socket appears, OVS connects at once.  Only the first start defers: a restart adds the
        ports with their paths (the generator's sockets are there by then).  The same for a
        VNF's sockets (testpmd's virtio-user, ``server=1``)."""
        self._defer_vhost |= set(names)

    def _set_now(self, name: str, opts: dict[str, str]) -> dict[str, str]:
        """The Interface options to set when the port is added: without ``vhost-server-path``
        for a deferred port (kept in :attr:`deferred_vhost`)."""
        if name not in self._defer_vhost or "vhost-server-path" not in opts:
            return opts
        self._defer_vhost.discard(name)
        self.deferred_vhost[name] = opts["vhost-server-path"]
        return {k: v for k, v in opts.items() if k != "vhost-server-path"}

    def connect_vhost(self, name: str) -> None:
        """Give a deferred port its socket path: OVS registers the vhost-user client and
        connects to the socket at once."""
        sock = self.deferred_vhost.pop(name)
        self.vsctl("set", "Interface", name, f'options:vhost-server-path="{sock}"')

    def _iface_options(self, kind: str, devargs: Optional[str], sock: Optional[str],
                       options: Optional[dict[str, Any]]) -> dict[str, str]:
        """The Interface options of a port of ``kind`` (see :meth:`add_ovs_port`)."""
        opts: dict[str, str] = {k: str(v) for k, v in (options or {}).items()}
        if kind == "dpdk":
            if not devargs:
                raise OvsError("a dpdk port needs devargs=")
            opts.setdefault("dpdk-devargs", devargs)
            if self.spec is not None:
                opts.setdefault("n_rxq", str(self.spec.n_rxq))
                opts.setdefault("n_rxq_desc", str(self.spec.n_rxq_desc))
                opts.setdefault("n_txq_desc", str(self.spec.n_txq_desc))
        elif kind == "dpdkvhostuserclient":
            if not sock:
                raise OvsError("a dpdkvhostuserclient port needs sock=")
            opts.setdefault("vhost-server-path", str(sock))
        elif kind not in ("vxlan", "internal", "patch", "geneve", "gre"):
            raise OvsError(f"unknown port kind {kind!r}")
        return opts

    @staticmethod
    def _iface_args(name: str, kind: str, opts: dict[str, str], ofport: Optional[int],
                    mtu: Optional[int]) -> list[str]:
        """``-- set Interface <name> type=... options:...`` for an ovs-vsctl transaction."""
        args = ["--", "set", "Interface", name, f"type={kind}"]
        for k, v in opts.items():
            args.append(f'options:{k}="{v}"')
        if ofport is not None:
            args.append(f"ofport_request={int(ofport)}")
        if mtu is not None and kind in MTU_KINDS:
            args.append(f"mtu_request={int(mtu)}")
        return args

    def _ofport(self, name: str, timeout: float = 10.0) -> int:
        deadline = time.monotonic() + timeout
        while True:
            raw = self.vsctl("get", "Interface", name, "ofport", wait=False).strip()
            of = int(raw) if raw.lstrip("-").isdigit() else -1
            if of > 0:
                return of
            err = self.vsctl("get", "Interface", name, "error", wait=False).strip()
            if err and err != "[]" or time.monotonic() > deadline:
                raise OvsError(f"port {name} was not added: {err or 'no ofport'}; log: {self.log_tail()}")
            time.sleep(0.1)

    def port_mac(self, name: str) -> str:
        return self.vsctl("get", "Interface", name, "mac_in_use", wait=False).strip().strip('"')

    # ------------------------------------------------------------------ flows
    def program(self, flows: Optional[Sequence[Union[Flow, str]]] = None, bridge: Optional[str] = None,
                replace: bool = True, method: str = "bundle") -> Path:
        """Install OpenFlow rules from files in the run dir (``ovs-ofctl --bundle add-flows``, in
        chunks: :mod:`nfvperf.dut.ovs_rules`); returns the first file.

        ``flows``: None = cross-connect 0<->1, 2<->3 (the seed reports' ``in_port=1,dl_type=0x800,
        idle_timeout=0,action=output:2``); :class:`Flow` entries (port *indices*; ``match`` keys
        ``src_ip``/``dst_ip``/``src_mac``/``dst_mac``/``vlan`` or raw ovs-ofctl fields); or strings
        in ovs-ofctl flow syntax.  ``replace`` deletes the bridge's flows first (``del-flows``) and
        then requires OVS to count exactly these rules.  Each install is kept in
        :attr:`rule_installs` (rules, seconds, rules/s; in :meth:`environment`)."""
        bridge = bridge or self.bridges[0]
        if flows is None:
            flows = cross_connect(len(self.ports))
        lines = [f if isinstance(f, str) else self.flow_rule(f) for f in flows]
        if bridge == self.bridges[0]:
            self._last_flows = list(flows)
        self._flow_files += 1

        def ofctl(args: list[str], timeout: float) -> str:
            args = [self.mgmt(bridge) if a == "{br}" else a for a in args]
            return self._run(["ovs-ofctl", f"--timeout={int(timeout) + 1}", *args], timeout=timeout + 5)

        def publish(path: Path) -> str:
            """Rule files are written in the controller's run directory; a remote OVS reads a copy."""
            target = self.dir / path.name
            self.host.write_text(target, path.read_text())
            return str(target)

        directory = self.run.run_dir if self.remote else self.dir
        try:
            rec = install_rules(lines, bridge=bridge, directory=directory,
                                stem=f"flows-{bridge}-{self._flow_files}", ofctl=ofctl,
                                replace=replace, method=method, say=_progress_log.info,
                                publish=publish if self.remote else None)
        except RuleInstallError as e:
            raise OvsError(f"{e}; log: {self.log_tail()}") from e
        self.rule_installs.append(rec)
        return Path(rec.files[0])

    _MATCH_KEYS = {"src_ip": "nw_src", "dst_ip": "nw_dst", "src_mac": "dl_src", "dst_mac": "dl_dst",
                   "vlan": "dl_vlan"}

    def flow_rule(self, f: Flow, priority: int = 100) -> str:
        """One :class:`Flow` in ovs-ofctl syntax (port indices turned into OpenFlow port numbers)."""
        parts = [f"priority={priority + (100 if f.match else 0)}", f"in_port={self.ofport(f.in_port)}"]
        match = dict(f.match)
        if any(k in match for k in ("src_ip", "dst_ip", "nw_src", "nw_dst")):
            parts.append("ip")
        elif not match:
            parts.append("dl_type=0x800")
        for k, v in match.items():
            parts.append(f"{self._MATCH_KEYS.get(k, k)}={v}")
        parts.append(f"idle_timeout=0,actions=output:{self.ofport(f.out_port)}")
        return ",".join(parts)

    def reset(self) -> None:
        """RFC 6201 reset: restart OVS and re-install the last programmed flows."""
        flows = getattr(self, "_last_flows", None)
        self.stop()
        self.start()
        self.program(flows)

    def dump_flows(self, bridge: Optional[str] = None) -> list[dict[str, Any]]:
        """``ovs-ofctl dump-flows`` parsed: [{"match": ..., "actions": ..., "n_packets": .., ...}]."""
        bridge = bridge or self.bridges[0]
        n = next((r.rules for r in reversed(self.rule_installs) if r.bridge == bridge), 0)
        out = self.ofctl("dump-flows", bridge, "--no-names", timeout=install_timeout_s(n))
        return parse_dump_flows(out)

    def dump_ports(self, bridge: Optional[str] = None) -> dict[str, dict[str, int]]:
        """Live port counters (``ovs-ofctl dump-ports``), keyed by port name ("LOCAL" for the bridge)."""
        bridge = bridge or self.bridges[0]
        # port numbers, not names: ovs-ofctl prints names when its output is a terminal (a
        # testbed guest's shell runs on a serial port)
        out = self.ofctl("dump-ports", bridge, "--no-names")
        by_of = {p.ofport: p.name for p in self.ovs_ports.values() if p.bridge == bridge}
        res: dict[str, dict[str, int]] = {}
        for of, stats in parse_dump_ports(out).items():
            name = "LOCAL" if of == "LOCAL" else by_of.get(int(of), f"ofport{of}")
            res[name] = stats
        return res

    # ------------------------------------------------------------------ in-place changes
    def apply_in_place(self, changes: dict[str, Any]) -> dict[str, Any]:
        """Change ``ovs.*`` fields of :attr:`in_place` on the running OVS, in the order a start
        applies them: other_config (the PMD threads first: the rx queues go to them), rx queues,
        rules.  Each step waits until OVS shows it: ovs-vsctl waits until ovs-vswitchd applied the
        database change, ``pmd-rxq-show`` lists PMD threads on the mask's CPUs and every queue of
        every dpdk port, ``dump-aggregate`` counts the rules.  Returns ``{field: {"from", "to",
        ...}}`` and what was set (``other_config``); kept in :attr:`reconfigurations`.  A failure
        part-way leaves OVS partly changed: restart it."""
        self._check_in_place(changes)
        keys = {k.split(".", 1)[1]: v for k, v in changes.items()}
        old = self.spec if self.spec is not None else OvsSpec()
        t0 = time.monotonic()
        before = self.other_config()
        self.spec = old.model_copy(update=keys)
        # as __init__ computes it: the spec's mask, else the CPU plan's dut CPUs
        self.pmd_cpu_mask = self.spec.pmd_cpu_mask or (cpu_mask(self.cpus) if self.cpus else None)
        was, now = dict(old), dict(self.spec)          # the models' fields by name
        done: dict[str, Any] = {f"ovs.{k}": {"from": was[k], "to": now[k]} for k in keys}
        done.update(self._apply_other_config(before, self.other_config()))
        if "n_rxq" in keys:
            done["ovs.n_rxq"].update(self._apply_n_rxq(int(self.spec.n_rxq)))
        if "rules" in keys:
            done["ovs.rules"].update(self._apply_rules())
        done["seconds"] = round(time.monotonic() - t0, 3)
        self.reconfigurations.append({"changes": dict(changes), **done})
        _progress_log.info("OVS reconfigured in place in %.1f s: %s", done["seconds"],
                           ", ".join(f"{k} = {v}" for k, v in changes.items()))
        return done

    def _check_in_place(self, changes: dict[str, Any]) -> None:
        """What this instance cannot change although the class declares it (ValueError, before
        anything is applied)."""
        if self.port_kind == "memif" and "ovs.pmd_cpu_mask" in changes:
            raise ValueError("ovs.pmd_cpu_mask cannot change in place on port_kind memif: the "
                             "generator polls one ring per OVS TX queue (PMD threads + 1), fixed "
                             "when it started; restart")
        glob = sorted(set(changes) & self.GLOBAL_IN_PLACE)
        if self._attached and glob:
            raise ValueError(f"{', '.join(glob)}: global settings of an OVS nfvperf only attached "
                             f"to (ovs.existing_db); not changed by nfvperf")
        mask = changes.get("ovs.pmd_cpu_mask")
        if mask and not self.remote:
            check = pmd_mask_check(mask)
            if check.status != "ok":
                raise ValueError(check.detail)

    def _apply_other_config(self, before: dict[str, str], after: dict[str, str]) -> dict[str, Any]:
        """Set the in-place other_config keys that :meth:`other_config` gives differently now,
        remove those it no longer gives (OVS's default, as at a start); wait for the PMDs."""
        put = {k: after[k] for k in self.IN_PLACE_CONFIG if k in after and before.get(k) != after[k]}
        gone = [k for k in self.IN_PLACE_CONFIG if k in before and k not in after]
        if not put and not gone:
            return {}
        cmds: list[list[str]] = []
        if put:
            cmds.append(["set", "Open_vSwitch", ".", *[f'other_config:{k}="{v}"' for k, v in put.items()]])
        cmds += [["remove", "Open_vSwitch", ".", "other_config", k] for k in gone]
        args: list[str] = []
        for c in cmds:
            args += (["--"] if args else []) + c
        self.vsctl(*args)
        out: dict[str, Any] = {"other_config": {"set": put, "removed": gone}}
        if "pmd-cpu-mask" in put:
            out["pmd_threads"] = self._wait_pmds(put["pmd-cpu-mask"])
        return out

    def _wait_pmds(self, mask: str, timeout_s: float = 20.0) -> list[int]:
        """Wait until ``pmd-rxq-show`` lists PMD threads on exactly the CPUs of ``mask``."""
        want = set(cores_from_mask(mask))
        text = self._wait_rxq_show(lambda r: set(r["pmds"]) == want, timeout_s,
                                   f"PMD threads on CPU(s) {format_cpulist(sorted(want))}")
        return sorted(parse_pmd_rxq(text)["pmds"])

    def _apply_n_rxq(self, n: int) -> dict[str, Any]:
        """``options:n_rxq`` of every dpdk port (as :meth:`add_ovs_port` sets it), with the
        queue pairs of an af_packet / af_xdp vdev in its devargs (a new ``dpdk-devargs`` makes OVS
        re-create the port, same ofport); waits until every queue is on a PMD.  vhost-user ports
        take the virtio side's queues (a start sets no n_rxq on them either)."""
        ports = [p for p in self.ovs_ports.values() if p.kind == "dpdk"]
        args: list[str] = []
        for p in ports:
            opts = {"n_rxq": str(n)}
            dev = p.options.get("dpdk-devargs", "")
            new_dev = requeue_devargs(dev, n)
            if new_dev != dev:
                opts["dpdk-devargs"] = new_dev
            p.options.update(opts)
            args += (["--"] if args else []) + ["set", "Interface", p.name,
                                                *[f'options:{k}="{v}"' for k, v in opts.items()]]
        if not args:
            return {"ports": {}, "note": "no dpdk ports (vhost-user ports take the virtio side's "
                                         "queues; the kernel datapath has no rx queues to set)"}
        self.vsctl(*args)
        names = [p.name for p in ports]

        def settled(r: dict[str, Any]) -> bool:
            for name in names:
                err = self.vsctl("get", "Interface", name, "error", wait=False).strip()
                if err and err != "[]":
                    raise OvsError(f"port {name} with n_rxq {n}: {err}; log: {self.log_tail()}")
            return all(r["ports"].get(name) == list(range(n)) for name in names)

        text = self._wait_rxq_show(settled, 20.0, f"{n} rx queue(s) on each of {', '.join(names)}")
        rxq = parse_pmd_rxq(text)
        return {"ports": {name: {"queues": rxq["ports"].get(name, []),
                                 "ofport": self._ofport(name)} for name in names},
                "pmds": {str(c): q for c, q in rxq["pmds"].items()}}

    def _wait_rxq_show(self, ok: Callable[[dict[str, Any]], bool], timeout_s: float, what: str) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            self._raise_if_dead()
            text = self.pmd_rxq()
            if ok(parse_pmd_rxq(text)):
                return text
            if time.monotonic() > deadline:
                raise OvsError(f"OVS did not settle in {timeout_s:.0f} s: wanted {what}; "
                               f"pmd-rxq-show: {' | '.join(text.strip().splitlines()[:12])}; "
                               f"log: {self.log_tail()}")
            time.sleep(0.1)

    def _apply_rules(self) -> dict[str, Any]:
        """Install the topology's rule set for the new ``ovs.rules`` (del-flows, bundles,
        dump-aggregate count: :meth:`program`)."""
        if self.forwarding is None:
            raise OvsError("ovs.rules in place: no forwarding source (the OVS topologies set "
                           "OvsDpdk.forwarding); program() the rules instead")
        flows = self.forwarding()
        if flows is None:
            return {"note": "ovs.rules does not shape this topology's forwarding; rules unchanged"}
        self.program(flows)
        return {"rule_install": self.rule_installs[-1].to_dict()}

    # ------------------------------------------------------------------ counters
    def pmd_stats(self) -> dict[str, Any]:
        return parse_pmd_stats(self.appctl("dpif-netdev/pmd-stats-show"))

    def clear_stats(self) -> None:
        self.appctl("dpif-netdev/pmd-stats-clear")

    def counters(self) -> dict[str, Any]:
        """Port counters of every bridge and the PMD statistics, for the record beside a result."""
        ports: dict[str, dict[str, int]] = {}
        for br in self.bridges:
            for name, st in self.dump_ports(br).items():
                ports[name if name != "LOCAL" else br] = st
        return {"ports": ports, "pmd": self.pmd_stats(), "dut": self.name}

    def telemetry(self) -> dict[str, Any]:
        """PMD counters, datapath flows and port counters (:mod:`nfvperf.dut.ovs_telemetry`)."""
        return ovs_reading(self.name, self.counters(), self.appctl("dpctl/show"),
                           self.appctl("coverage/show"))

    def pmd_rxq(self) -> str:
        return self.appctl("dpif-netdev/pmd-rxq-show")

    def versions(self) -> dict[str, str]:
        v = {"ovs": "", "dpdk": ""}
        try:
            out = self._run(["ovs-appctl", "-t", str(self.ctl), "--timeout=5", "version"], timeout=8)
            m = re.search(r"(\d+\.\d+[\w.\-]*)", out)
            v["ovs"] = m.group(1) if m else out.strip()
            v["dpdk"] = self.vsctl("get", "Open_vSwitch", ".", "dpdk_version",
                                   wait=False).strip().strip('"').replace("DPDK ", "")
        except OvsError:
            pass
        return v

    def version(self) -> str:
        """E.g. ``3.1.0 (DPDK 22.11.11)``."""
        v = self.versions()
        return f"{v['ovs']} (DPDK {v['dpdk']})" if v["ovs"] else ""

    def environment(self) -> dict[str, Any]:
        cfg = {}
        try:
            raw = self.vsctl("--format=json", "--columns=other_config", "list", "Open_vSwitch", wait=False)
            data = json.loads(raw)["data"][0][0][1]
            cfg = {k: v for k, v in data}
        except (OvsError, ValueError, KeyError, IndexError):
            pass
        return {"dut": self.name, "version": self.version(), "versions": self.versions(),
                "cpus": self.cpus, "pmd_cpu_mask": cfg.get("pmd-cpu-mask"), "other_config": cfg,
                "bridges": list(self.bridges), "netns": self.netns,
                "rule_installs": [r.to_dict() for r in self.rule_installs],
                "bonds": self._bonds_environment(),
                "reconfigurations": list(self.reconfigurations),
                "ports": {p.name: {"kind": p.kind, "ofport": p.ofport, "bridge": p.bridge,
                                    "mtu_request": p.mtu, **p.options}
                          for p in self.ovs_ports.values()}}

    def _bonds_environment(self) -> dict[str, Any]:
        """The bonds as configured and as OVS shows them now (mode, LACP status, active
        member, each member's state and hash buckets)."""
        out: dict[str, Any] = {}
        for name, cfg in self.bonds.items():
            try:
                shown: Any = self.bond_show(name)
            except OvsError as e:
                shown = {"error": str(e)}
            out[name] = {**cfg, "show": shown}
        return out

    # ------------------------------------------------------------------ VXLAN (userspace tunnels)
    def tunnel_endpoint(self, bridge: str, local_ip: str, prefix: int, remote_ip: str,
                        remote_mac: str) -> None:
        """Make ``bridge`` (holding the physical port) a VTEP underlay: the tunnel IP on its internal
        port (a tap in OVS's namespace), a route to the remote VTEP and its ARP entry in OVS's
        userspace tables (``ovs/route/add``, ``tnl/arp/set``)."""
        add_address(bridge, f"{local_ip}/{prefix}", self.netns)
        set_link(bridge, self.netns, state="up")
        try:
            self.appctl("ovs/route/add", f"{remote_ip}/32", bridge)
        except OvsError as e:
            if "exist" not in str(e).lower():
                raise
        self.appctl("tnl/arp/set", bridge, remote_ip, remote_mac)


# ---------------------------------------------------------------------- parsers
_KV = re.compile(r"(\w+)=([^,\s]+)")


def parse_dump_flows(text: str) -> list[dict[str, Any]]:
    flows = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("NXST_FLOW", "OFPST_FLOW")) or "actions=" not in line:
            continue
        head, actions = line.split("actions=", 1)
        d: dict[str, Any] = {"actions": actions.strip()}
        match_parts = []
        for part in [p.strip() for p in head.split(",") if p.strip()]:
            k, _, v = part.partition("=")
            if k in ("cookie", "duration", "table", "n_packets", "n_bytes", "idle_age", "hard_age",
                     "idle_timeout", "hard_timeout", "priority", "reset_counts"):
                if k in ("n_packets", "n_bytes", "table", "priority", "idle_timeout"):
                    d[k] = int(v)
                else:
                    d[k] = v
            else:
                match_parts.append(part)
        d["match"] = ",".join(match_parts)
        flows.append(d)
    return flows


def requeue_devargs(devargs: str, queues: int) -> str:
    """``devargs`` of an af_packet / af_xdp vdev with ``queues`` queue pairs (other devargs, a
    PCI address or a memif vdev, unchanged)."""
    return re.sub(r"\b(qpairs|queue_count)=\d+", rf"\g<1>={int(queues)}", devargs)


_RXQ_PMD = re.compile(r"^pmd thread numa_id (\d+) core_id (\d+):")
_RXQ_PORT = re.compile(r"^\s*port:\s+(\S+)\s+queue-id:\s+(\d+)")


def parse_pmd_rxq(text: str) -> dict[str, Any]:
    """``dpif-netdev/pmd-rxq-show`` -> ``{"pmds": {core_id: [[port, queue], ...]}, "ports": {port:
    [queue ids, sorted]}}`` (queues listed under a PMD thread)."""
    pmds: dict[int, list[list[Any]]] = {}
    ports: dict[str, list[int]] = {}
    cur: Optional[int] = None
    for line in text.splitlines():
        m = _RXQ_PMD.match(line)
        if m:
            cur = int(m.group(2))
            pmds.setdefault(cur, [])
            continue
        m = _RXQ_PORT.match(line)
        if m and cur is not None:
            pmds[cur].append([m.group(1), int(m.group(2))])
            ports.setdefault(m.group(1), []).append(int(m.group(2)))
    return {"pmds": pmds, "ports": {k: sorted(v) for k, v in ports.items()}}


_BOND_MEMBER = re.compile(r"^(?:member|slave) (\S+): (enabled|disabled)")
_BOND_HASH = re.compile(r"^\s+hash (\d+): (\d+) kB load")


def parse_bond_show(text: str) -> dict[str, Any]:
    """``ovs-appctl bond/show <bond>`` -> ``{"bond_mode", "lacp_status", "primary",
    "active_member", "members": {name: {"enabled": bool, "active": bool, "hashes": [int]}}, ...}``
    (the other ``key: value`` lines keyed as they read, spaces and dashes as underscores)."""
    out: dict[str, Any] = {"members": {}}
    cur: Optional[dict[str, Any]] = None
    for line in text.splitlines():
        if not line.strip() or line.startswith("----"):
            continue
        m = _BOND_MEMBER.match(line)
        if m:
            cur = {"enabled": m.group(2) == "enabled", "active": False, "hashes": []}
            out["members"][m.group(1)] = cur
            continue
        if cur is not None and line.startswith(" "):
            h = _BOND_HASH.match(line)
            if h:
                cur["hashes"].append(int(h.group(1)))
            elif line.strip() in ("active member", "active slave"):
                cur["active"] = True
                out["active_member"] = next(k for k, v in out["members"].items() if v is cur)
            continue
        k, sep, v = line.partition(":")
        if sep:
            key = re.sub(r"[^a-z0-9]+", "_", k.strip().lower()).strip("_")
            out[key] = v.strip()
    if "active_backup_primary" in out:
        out["primary"] = out["active_backup_primary"]
    return out


def _num(v: str) -> int:
    return int(v) if v.isdigit() else 0


#: ovs-ofctl dump-ports names -> the adapter counter names (dut/base.py)
_PORT_KEYS = {"pkts": "packets", "drop": "dropped", "errs": "errors"}


def parse_dump_ports(text: str) -> dict[Union[int, str], dict[str, int]]:
    """``ovs-ofctl dump-ports`` → {ofport or "LOCAL": {rx_packets, rx_bytes, rx_dropped, rx_errors,
    rx_frame, rx_over, rx_crc, tx_packets, tx_bytes, tx_dropped, tx_errors, tx_coll}}."""
    res: dict[Union[int, str], dict[str, int]] = {}
    cur = None
    for line in text.splitlines():
        m = re.match(r"\s*port\s+\"?([^:\"]+)\"?:\s*rx\s+(.*)", line)
        if m:
            key = m.group(1).strip()
            cur = int(key) if key.isdigit() else key
            res[cur] = {f"rx_{_PORT_KEYS.get(k, k)}": _num(v) for k, v in _KV.findall(m.group(2))}
            continue
        m = re.match(r"\s*tx\s+(.*)", line)
        if m and cur is not None:
            res[cur].update({f"tx_{_PORT_KEYS.get(k, k)}": _num(v) for k, v in _KV.findall(m.group(1))})
    return res


def parse_pmd_stats(text: str) -> dict[str, Any]:
    """``dpif-netdev/pmd-stats-show`` → {"threads": {"pmd core 1": {...}}, "total": {...}}.

    Keys are snake_case (``packets_received``, ``emc_hits``, ``smc_hits``, ``megaflow_hits``,
    ``idle_cycles``, ``processing_cycles``, ``avg_cycles_per_packet``, ...); the total sums the
    counts over PMD threads and recomputes cycles per packet and the hit ratios.
    """
    threads: dict[str, dict[str, float]] = {}
    cur: Optional[dict[str, float]] = None
    for line in text.splitlines():
        if not line.startswith(" ") and line.rstrip().endswith(":"):
            head = line.rstrip()[:-1]
            m = re.search(r"core_id (\d+)", head)
            name = f"pmd core {m.group(1)}" if m else head.strip()
            cur = threads.setdefault(name, {})
            continue
        if cur is None or ":" not in line:
            continue
        k, _, v = line.strip().partition(":")
        key = re.sub(r"[^a-z0-9]+", "_", k.strip().lower()).strip("_")
        m = re.match(r"\s*([0-9.]+)", v)
        if m:
            cur[key] = float(m.group(1)) if "." in m.group(1) else int(m.group(1))
    total: dict[str, float] = {}
    for name, st in threads.items():
        if not name.startswith("pmd"):
            continue
        for k, count in st.items():
            if k.startswith("avg"):
                continue
            total[k] = total.get(k, 0) + count
    pk = total.get("packets_received", 0)
    if pk:
        total["avg_processing_cycles_per_packet"] = total.get("processing_cycles", 0) / pk
        for hit in ("emc_hits", "smc_hits", "megaflow_hits"):
            if hit in total:
                total[hit.replace("_hits", "_hit_ratio")] = total[hit] / pk
    return {"threads": threads, "total": total}
