"""The simulated DUT's performance model: a test unit's configuration -> capacity, latency, TCP.

:class:`~nfvperf.tg.sim.SimMeasurer` asks this module what a configuration forwards, so every
study (cores, flows, rules, frame size, VXLAN, topology, DUT, TCP streams/TSO/multi-queue) shows
its shape on ``--tg sim``.  It is a *model*: the numbers are calibrated to the seed reports'
orders of magnitude (seed 000: OvS-DPDK ~11.6 Mpps on one PMD core at 64 B across 4 ports, native
OvS ~10x slower, near-linear core scaling, +12..19 % from hyper-threading; seed 004: 17.6 Mpps at
64 flows/rules falling 24x at 1M; seed 001: TCP ~4 Gbit/s without TSO, 22-33 with, ~45 with
multi-queue), not measurements.

Per-packet work of one frame on one core (ns)::

    t = ops * (base_ns + lookup_ns(flows, rules) + byte_ns * size)
        + crossings * (vhost_ns + vhost_byte_ns * size)          # pvp/pvvp: 2 per VNF
        + vxlan_ns (encap + decap)  + rule_ns_per_log2 * log2(1 + rules)

    lookup_ns = flow_ns_per_log2 * log2(flows)                   # cache footprint
                + P(EMC miss) * [P(SMC hit) * smc_ns + P(megaflow hit) * dpcls_ns(rules)
                                 + P(past flow-limit) * upcall_ns(rules)]

    cores  = 1 + (usable physical cores - 1) * core_efficiency  [* ht_gain with ht]
             (usable: PMD threads bounded by the rx queues they can poll, when rxq_bound)
    capacity per interface = min(cores * 1e9 / t, VNF's own rate) / directions,
                             <= n_rxq * rxq_bps / wire bits, <= line rate

``ops`` is the topology's switching operations (seed 000 Table 5-1: p-ovs-p 1, pvp 2, pvvp 3).
Every parameter is a field of :class:`SimModelParams` with a documented default; DUT and topology
presets (:data:`DUT_PRESETS`, :data:`TOPOLOGY_PRESETS`) override some; a suite's ``sim.model:``
and a test's ``sim.model:`` override those (flat keys for every unit, or ``{<dut or kind>:
{key: value}}`` for one DUT or topology only).  docs/sim.md describes it.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from nfvperf.trial import TrafficProfile

MODEL_NAME = "nfvperf sim model 1 (per-packet/per-byte cost, cores, cache tiers, rules, VXLAN, ops)"


@dataclass
class SimModelParams:
    """Model parameters (defaults: OvS-DPDK on p-ovs-p).  Times are ns of one core per frame."""

    # --- forwarding cost
    base_ns: float = 86.0             # one switching operation, EMC hit (seed 000: 11.6 Mpps/core)
    byte_ns: float = 0.004            # per frame byte per switching operation (NIC DMA is free)
    vhost_ns: float = 55.0            # per vhost-user crossing (enqueue to / dequeue from a guest)
    vhost_byte_ns: float = 0.05       # per byte per vhost crossing (the copy into guest memory)
    vxlan_ns: float = 120.0           # VXLAN encap + decap of one frame
    encap: bool = False               # the topology itself tunnels (vxlan kind), whatever the traffic
    # --- flows: the datapath caches (OVS-DPDK: EMC -> SMC -> dpcls megaflows -> upcall)
    flow_tiers: bool = True           # False: no flow caches (testpmd io, a learning bridge)
    flow_ns_per_log2: float = 2.0     # cache footprint per doubling of active flows (seed 000: 1 -> 1k ~ -20 %)
    emc_entries: int = 8192           # exact match cache per PMD thread (OVS default 8k)
    smc: bool = False                 # signature match cache (other_config:smc-enable; topology.ovs.smc_enable)
    smc_entries: int = 1_048_576      # SMC entries per PMD thread
    smc_ns: float = 40.0              # extra cost of an SMC hit
    dpcls_ns: float = 150.0           # extra cost of a megaflow (dpcls) lookup
    megaflow_limit: int = 200_000     # datapath flows kept (ofproto flow-limit); beyond: upcalls
    upcall_ns: float = 2000.0         # a miss handled by the OpenFlow classifier (handler thread);
    #                                   seed 004: 64 -> 1M flows/rules on 8 threads ~24x lower
    # --- rules (topology.ovs.rules: extra OpenFlow rules)
    rule_ns_per_log2: float = 1.5     # every frame, per doubling of the rule count
    rule_lookup_factor: float = 0.05  # dpcls/upcall cost grows by this per doubling of rules
    # --- cores
    polling: bool = True              # PMD cores scale the rate; False: kernel softirq, one core
    core_efficiency: float = 0.95     # what each added core adds, as a share of the first one
    ht_gain: float = 1.15             # a core with its sibling thread (seed 000 §7.2.3: +12..19 %)
    rxq_bound: bool = True            # PMD threads beyond the rx queues to poll stay idle
    rxq_bps: float = 20e9             # L1 bit/s one rx queue carries (seed 003: jumbo frames at 25G
    #                                   reach line rate only with 2+ rx queues); 0: no limit
    default_cores: int = 1            # when neither pmd_cores nor a mask says
    # --- the VNF of pvp/pvvp (its own core; caps the chain)
    vnf_container_ns: float = 40.0    # testpmd io in a container (virtio-user)
    vnf_vm_ns: float = 70.0           # testpmd io in a VM (virtio-net)
    # --- latency (ns): generator + wire, then what the path adds
    lat_base_ns: float = 2000.0
    lat_op_ns: float = 1500.0         # per switching operation
    lat_vnf_container_ns: float = 2000.0
    lat_vnf_vm_ns: float = 6000.0
    lat_vxlan_ns: float = 1000.0
    ht_latency_factor: float = 1.5    # the DUT part with HT (seed 000 §7.2.1: avg latency ~2x)
    # --- TCP (iperf3-shaped results)
    tso: bool = True                  # TCP segmentation offload (unless the test says)
    multiqueue: bool = False          # virtio multi-queue (unless the test says)
    tcp_stream_bps_tso: float = 12e9  # one TCP stream with TSO
    tcp_stream_bps_no_tso: float = 2.5e9
    tcp_queue_bps_tso: float = 33e9   # one rx queue / vCPU (seed 001: 22-33.5 Gbit/s without MQ)
    tcp_queue_bps_no_tso: float = 5e9  # seed 001 baseline: 3.9-5.5 Gbit/s
    tcp_mq_queues: int = 8            # queues with multi-queue on (seed 001: 8)
    tcp_host_bps: float = 46e9        # host memory/vSwitch ceiling (seed 001: ~45 Gbit/s)
    tcp_goodput: float = 0.949        # TCP goodput share of the link (1500 B MTU)
    tcp_contention_per_log2: float = 0.005  # loss per doubling of streams (more contention)
    tcp_link: bool = True             # the TCP path crosses a link of link_speed (False: VM to VM
    #                                   on one host, seed 001 scenario 3: no NIC, ~45 Gbit/s)


#: per-DUT presets (fields of SimModelParams); unknown DUTs use the defaults
DUT_PRESETS: dict[str, dict[str, Any]] = {
    "ovs-dpdk": {},
    # OVS with the kernel datapath (seed 000 Tables 7-3/7-4: ~1.1 Mpps on one core, 10x below DPDK)
    "ovs-system": {"base_ns": 860.0, "byte_ns": 0.02, "polling": False, "emc_entries": 0,
                   "dpcls_ns": 0.0, "upcall_ns": 20_000.0, "vhost_ns": 400.0,
                   "lat_op_ns": 25_000.0},
    "linux-bridge": {"base_ns": 1100.0, "byte_ns": 0.02, "polling": False, "flow_tiers": False,
                     "flow_ns_per_log2": 10.0, "rule_ns_per_log2": 0.0, "lat_op_ns": 20_000.0},
    # testpmd io forwarding: no lookups, no rules (the platform baseline, seed 000 7.1)
    "testpmd": {"base_ns": 28.0, "flow_tiers": False, "flow_ns_per_log2": 0.5,
                "rule_ns_per_log2": 0.0, "lat_op_ns": 800.0},
    # DPDK l3fwd: an LPM/exact-match lookup and a header rewrite per frame, no flow caches (seed
    # 000 Table 7-2: 2 cores route 42.95 Mpps at 64 B over 4 ports, 72 % of 4 x 10 GbE)
    "l3fwd": {"base_ns": 44.0, "flow_tiers": False, "flow_ns_per_log2": 0.5,
              "rule_ns_per_log2": 0.0, "lat_op_ns": 1000.0},
}
DUT_ALIASES = {"ovs-kernel": "ovs-system", "ovs": "ovs-system", "ovs-native": "ovs-system"}

#: per-topology presets (the efficiency of added cores falls with the work between them)
TOPOLOGY_PRESETS: dict[str, dict[str, Any]] = {
    "p2p": {"core_efficiency": 0.98},
    "p-ovs-p": {"core_efficiency": 0.95},
    "pvp": {"core_efficiency": 0.9},
    "pvvp": {"core_efficiency": 0.85},
    "vxlan": {"core_efficiency": 0.9, "encap": True},
    # seed 001's TCP scenarios with iperf3 inside VMs (nfvperf.topo.tcp_vm): external clients ->
    # a server VM and VMs on two nodes cross a 10 GbE link; VMs on one node do not
    "host-vm": {},
    "vm-link-vm": {"core_efficiency": 0.9},
    "vm-vm": {"tcp_link": False},
}

FIELDS = {f.name: f for f in dataclasses.fields(SimModelParams)}


@dataclass(frozen=True)
class SimTraits:
    """What a DUT adapter's options say to the model: its polling cores, rx queues, rules and
    caches.  Each adapter's options model declares its own (``AdapterOptions.sim_traits()``),
    so nothing outside the adapter reads its options by name; the defaults are "not said"."""

    datapath: Optional[str] = None    # OVS datapath when the options choose one
    pmd_cores: Optional[int] = None   # polling physical cores (OVS pmd_cores, testpmd/l3fwd cores)
    ht: bool = False                  # with their sibling threads
    pmd_threads: Optional[int] = None  # polling threads from a CPU mask (its popcount)
    n_rxq: int = 1                    # rx queues per port
    rules: int = 0                    # extra flow rules installed
    smc: Optional[bool] = None        # OVS signature match cache on/off


@dataclass
class SimUnit:
    """What the model needs to know about one test unit's configuration (besides the traffic
    profile): filled by the runner from the unit's topology spec and method params."""

    dut: str = "ovs-dpdk"
    datapath: Optional[str] = None    # OVS datapath when the adapter has one ("system": kernel)
    kind: str = "p-ovs-p"
    switching_ops: int = 1
    n_vnfs: int = 0                   # VNFs per port pair (pvp 1, pvvp 2)
    vnf: str = "container"
    ports: int = 2
    pmd_cores: Optional[int] = None   # physical cores
    ht: bool = False                  # with their sibling threads
    pmd_threads: Optional[int] = None  # from a mask (its popcount), when pmd_cores is not given
    n_rxq: int = 1
    rules: int = 0
    smc: Optional[bool] = None
    tso: Optional[bool] = None
    multiqueue: Union[bool, int, None] = None   # tcp params.multiqueue: N queues, or true/false
    overrides: dict[str, Any] = field(default_factory=dict)   # sim.model of the suite/test

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def check_overrides(over: Any, where: str = "sim.model") -> list[str]:
    """Problems with a ``sim.model:`` mapping (unknown keys, wrong types), each naming the key."""
    if not isinstance(over, dict):
        return [f"{where}: must be a mapping of model parameters, e.g. {{base_ns: 100}}"]
    problems = []
    scoped = set(DUT_PRESETS) | set(DUT_ALIASES) | set(TOPOLOGY_PRESETS)
    for k, v in over.items():
        if k in scoped and isinstance(v, dict):
            problems += check_overrides(v, f"{where}.{k}")
        elif k not in FIELDS:
            problems.append(f"{where}.{k}: unknown model parameter; allowed: {', '.join(FIELDS)} "
                            f"(or a DUT/topology name mapping to some of them: {', '.join(sorted(scoped))})")
        else:
            want = type(FIELDS[k].default)
            ok = isinstance(v, bool) if want is bool else (
                isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0)
            if not ok:
                problems.append(f"{where}.{k}: must be {'true or false' if want is bool else 'a number >= 0'}, "
                                f"got {v!r}")
    return problems


def preset_name(unit: SimUnit) -> str:
    """The DUT preset for a unit: ``<dut>-<datapath>`` when that has one (ovs-system), else the
    DUT's name through :data:`DUT_ALIASES`."""
    if unit.datapath:
        for name in (f"{unit.dut}-{unit.datapath}", f"ovs-{unit.datapath}"):
            if name in DUT_PRESETS and unit.datapath not in ("netdev", "dpdk"):
                return name
    return DUT_ALIASES.get(unit.dut, unit.dut)


def resolve_params(unit: SimUnit) -> SimModelParams:
    """Defaults <- DUT preset <- topology preset <- flat overrides <- overrides scoped to the
    unit's DUT or topology kind."""
    dut = preset_name(unit)
    vals: dict[str, Any] = {**DUT_PRESETS.get(dut, {}), **TOPOLOGY_PRESETS.get(unit.kind, {})}
    over = unit.overrides or {}
    vals.update({k: v for k, v in over.items() if k in FIELDS})
    for scope in (unit.dut, dut, unit.kind):
        if isinstance(over.get(scope), dict):
            vals.update(over[scope])
    return SimModelParams(**vals)


@dataclass
class Capacity:
    """The model's answer for one (unit, frame size), with the terms it came from."""

    pps: float                        # per interface, before the line-rate cap
    total_pps: float                  # of the DUT, all directions
    ns_per_frame: float               # one core's work per frame
    cores: float                      # effective cores
    threads_used: int
    threads_idle: int
    tiers: dict[str, float]           # share of frames per cache tier
    bound: str                        # "cores", "vnf" or "rx queues"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class SimModel:
    """Capacity, latency and TCP goodput of a configuration (see the module doc)."""

    name = MODEL_NAME

    def __init__(self, unit: Optional[SimUnit] = None):
        self.unit = unit or SimUnit()
        self.p = resolve_params(self.unit)

    # --- cores
    def threads(self) -> tuple[int, int]:
        """(PMD threads that forward, PMD threads left idle for want of rx queues)."""
        u, p = self.unit, self.p
        if not p.polling:
            return 1, 0
        if u.pmd_cores is not None:
            n = max(1, int(u.pmd_cores)) * (2 if u.ht else 1)
        elif u.pmd_threads:
            n = int(u.pmd_threads)
        else:
            n = p.default_cores
        if not p.rxq_bound:
            return n, 0
        rxqs = (u.ports + 2 * u.n_vnfs * max(1, u.ports // 2)) * max(1, u.n_rxq)
        return min(n, rxqs), max(0, n - rxqs)

    def cores(self) -> float:
        """Effective cores: 1 + (n - 1) x core_efficiency; a core with both threads busy counts
        ht_gain, a lone thread on a core counts as that core without the gain."""
        used, _ = self.threads()
        ce = self.p.core_efficiency
        if not (self.unit.ht and self.unit.pmd_cores is not None and self.p.polling):
            return 1.0 + (used - 1) * ce
        full, lone = divmod(used, 2)
        if not full:
            return 1.0
        return (1.0 + (full - 1) * ce) * self.p.ht_gain + lone * ce

    # --- flows and rules
    def tiers(self, flows: int) -> dict[str, float]:
        """Share of frames served by each cache tier, for ``flows`` active flows (uniform)."""
        p = self.p
        if not p.flow_tiers:
            return {"direct": 1.0}
        used, _ = self.threads()
        per_thread = max(1.0, flows / max(1, used))
        emc = min(1.0, p.emc_entries / per_thread) if p.emc_entries else 0.0
        rest = 1.0 - emc
        smc_on = self.unit.smc if self.unit.smc is not None else p.smc
        smc = rest * min(1.0, p.smc_entries / per_thread) if smc_on else 0.0
        rest -= smc
        upcall = rest * max(0.0, 1.0 - p.megaflow_limit / max(1, flows))
        return {"emc": emc, "smc": smc, "megaflow": rest - upcall, "upcall": upcall}

    def lookup_ns(self, flows: int) -> float:
        p = self.p
        t = self.tiers(flows)
        rule_f = 1.0 + p.rule_lookup_factor * math.log2(1 + max(0, self.unit.rules))
        return (p.flow_ns_per_log2 * math.log2(max(1, flows)) + t.get("smc", 0.0) * p.smc_ns
                + t.get("megaflow", 0.0) * p.dpcls_ns * rule_f + t.get("upcall", 0.0) * p.upcall_ns * rule_f)

    # --- capacity
    def directions(self, profile: TrafficProfile) -> int:
        return max(1, self.unit.ports // 2) * (2 if profile.bidirectional else 1)

    def vxlan(self, profile: TrafficProfile) -> bool:
        return bool(profile.vxlan) or self.p.encap

    def ns_per_frame(self, profile: TrafficProfile, size_b: float) -> float:
        u, p = self.unit, self.p
        flows = max(1, int(profile.flows_per_port)) * self.directions(profile)
        ops = max(1, int(u.switching_ops))
        crossings = 2 * u.n_vnfs
        t = ops * (p.base_ns + self.lookup_ns(flows) + p.byte_ns * size_b)
        t += crossings * (p.vhost_ns + p.vhost_byte_ns * size_b)
        t += p.rule_ns_per_log2 * math.log2(1 + max(0, u.rules))
        if self.vxlan(profile):
            t += p.vxlan_ns
        return t

    def capacity(self, profile: TrafficProfile, size_b: Optional[float] = None) -> Capacity:
        """Forwarding capacity per interface (may exceed line rate; the measurer caps it)."""
        size = float(size_b if size_b is not None else profile.frame_size_b)
        ndir = self.directions(profile)
        t = self.ns_per_frame(profile, size)
        cores = self.cores()
        total = cores * 1e9 / t
        bound = "cores"
        if self.unit.n_vnfs:
            vnf_ns = self.p.vnf_vm_ns if self.unit.vnf == "vm" else self.p.vnf_container_ns
            vnf_total = 1e9 / vnf_ns * max(1, self.unit.ports // 2)   # one chain per port pair
            if vnf_total < total:
                total, bound = vnf_total, "vnf"
        pps = total / ndir
        if self.p.rxq_bps and self.p.polling:
            wire = size + 20 + (50 if self.vxlan(profile) else 0)
            per_if = max(1, self.unit.n_rxq) * self.p.rxq_bps / (wire * 8)
            if per_if < pps:
                pps, bound = per_if, "rx queues"
        used, idle = self.threads()
        flows = max(1, int(profile.flows_per_port)) * ndir
        return Capacity(pps=pps, total_pps=total, ns_per_frame=t, cores=cores,
                        threads_used=used, threads_idle=idle, tiers=self.tiers(flows), bound=bound)

    # --- latency
    def base_latency_ns(self, profile: TrafficProfile) -> float:
        """Latency of a frame through an idle path (queueing comes on top, in the measurer)."""
        u, p = self.unit, self.p
        dut = max(1, u.switching_ops) * p.lat_op_ns
        if u.ht and u.pmd_cores is not None and p.polling:
            dut *= p.ht_latency_factor
        vnf = u.n_vnfs * (p.lat_vnf_vm_ns if u.vnf == "vm" else p.lat_vnf_container_ns)
        return p.lat_base_ns + dut + vnf + (p.lat_vxlan_ns if self.vxlan(profile) else 0.0)

    # --- TCP
    def tcp_bps(self, profile: TrafficProfile, streams: int, processes: int,
                tso: Optional[bool] = None, multiqueue: Union[bool, int, None] = None,
                mtu: int = 1500) -> dict[str, Any]:
        """iperf3 goodput: streams x per-stream rate, bounded by the rx queues, the host, the
        link's goodput and the DUT's frame rate at MTU-size frames."""
        p, u = self.p, self.unit
        tso = bool(next(v for v in (tso, u.tso, p.tso) if v is not None))
        mqv = next(v for v in (multiqueue, u.multiqueue, p.multiqueue) if v is not None)
        # a queue count (the tcp method's params.multiqueue: N), or true = the model's tcp_mq_queues
        queues = max(1, p.tcp_mq_queues) if mqv is True else 1 if mqv is False else max(1, int(mqv))
        mq = queues > 1
        n = max(1, int(streams)) * max(1, int(processes))
        per_stream = p.tcp_stream_bps_tso if tso else p.tcp_stream_bps_no_tso
        per_queue = p.tcp_queue_bps_tso if tso else p.tcp_queue_bps_no_tso
        frame = min(mtu + 18, 9018)
        dut_pps = self.capacity(profile, frame).total_pps
        if p.tcp_link:
            dut_pps = min(dut_pps, profile.link_speed_bps / ((frame + 20) * 8) * self.directions(profile))
        seg_per_frame = 4.0 if tso else 1.0     # TSO: the vSwitch passes oversized frames
        contention = max(0.5, 1.0 - p.tcp_contention_per_log2 * math.log2(n))
        limits = {"streams": n * per_stream * contention, "queues": queues * per_queue, "host": p.tcp_host_bps,
                  "dut": dut_pps * seg_per_frame * (mtu - 40) * 8}
        if p.tcp_link:
            limits["link"] = profile.link_speed_bps * p.tcp_goodput
        bound = min(limits, key=lambda k: limits[k])
        bps = limits[bound]
        return {"bps": bps, "tso": tso, "multiqueue": mq, "queues": queues, "streams_total": n, "bound": bound,
                "limits_bps": limits}

    def describe(self) -> dict[str, Any]:
        """What a report reader needs to see: the model, the unit and the parameters in force
        (with those that differ from the defaults listed apart)."""
        defaults = SimModelParams()
        params = dataclasses.asdict(self.p)
        return {"model": self.name, "unit": self.unit.to_dict(),
                "changed_from_defaults": {k: v for k, v in params.items() if getattr(defaults, k) != v},
                "parameters": params}


def popcount_mask(mask: Optional[str]) -> Optional[int]:
    """Bits set in a hex CPU mask ('0x3c' -> 4); None when there is no (readable) mask."""
    if not mask:
        return None
    try:
        return bin(int(str(mask), 16)).count("1") or None
    except ValueError:
        return None


__all__ = ["SimModel", "SimModelParams", "SimTraits", "SimUnit", "Capacity", "DUT_PRESETS", "TOPOLOGY_PRESETS",
           "MODEL_NAME", "check_overrides", "resolve_params", "popcount_mask"]
