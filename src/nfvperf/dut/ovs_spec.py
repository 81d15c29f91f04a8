"""The suite's ``topology.ovs:`` section (:class:`OvsSpec`), the bonds nfvperf can measure, and the
preflight checks of its memory and PMD options."""
from __future__ import annotations

from typing import Literal, Optional, Sequence

from pydantic import Field, field_validator, model_validator

from nfvperf.dut.base import AdapterOptions
from nfvperf.host.preflight import Check
from nfvperf.host.cpu import CpuTopology, cpu_mask, format_cpulist
from nfvperf.tg.sim_model import SimTraits, popcount_mask
from nfvperf.units import cores_from_mask


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
    def _socket_mem_list(cls, v: object) -> object:
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
        if v is not None and (not v or any(x < 0 for x in v) or not any(v)):
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

