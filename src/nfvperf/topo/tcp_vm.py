"""Seed 001's three TCP scenarios with iperf3 *inside* VMs, through OVS-DPDK on vhost-user.

* ``host-vm`` (scenario 1, "external clients -> a server VM"): the iperf3 clients run in a host
  namespace (``<tag>-tcpc``, 198.18.0.1) on a veth whose other end OVS opens with DPDK af_packet
  (an external wire); the server runs in guest ``vm0`` (198.18.0.2) on a vhost-user port of the
  same bridge.  One switching operation.
* ``vm-link-vm`` (scenario 2, "client and server VMs on different nodes"): guest ``vm0`` (client)
  on bridge 0, guest ``vm1`` (server) on bridge 1, the bridges joined by a veth pair whose ends
  OVS opens with DPDK af_packet: the "link" between two nodes.  Here both "nodes" are bridges of
  one OVS on one host (a 2-CPU host cannot run two OVS-DPDK instances and two guests, and the
  testbed path runs the DUT's VNFs only on its DUT host); what the seed's second node adds - frames
  leaving one switch through a NIC-like port and entering the other - is kept.  Two switching
  operations.
* ``vm-vm`` (scenario 3, "client and server VMs on the same node"): both guests on vhost-user
  ports of one bridge.  One switching operation.  OVS runs with ``userspace-tso-enable`` here, so
  the guests' virtio-net can negotiate TSO and checksum offload with the vhost-user ports and
  ``tso: true`` passes TSO super-frames VM to VM (the seed's OVS-DPDK TSO patch).

Forwarding is OVS's ``NORMAL`` action (MAC learning, as an OpenStack bridge), so the guests' ARP
works.  The guests are :class:`nfvperf.vm.guest.TcpGuest` sized by ``topology.vm`` (vCPUs,
memory, virtio queue pairs, image, accelerator); ``--tg iperf3`` (or ``--tg tgen``, which runs tcp
tests with iperf3) measures with :class:`nfvperf.vm.tcp.VmTcpMeasurer`, ``--tg sim`` with the
model (TOPOLOGY_PRESETS of these kinds).

TSO in scenarios 1 and 2: OVS 3.1 (Debian 12) drops a TSO super-frame or a frame that needs its
checksum filled in at a port whose netdev cannot offload it ("No TSO support" / "No TCP checksum
support"; its software fallback came in OVS 3.3), and DPDK af_packet offloads neither: there
userspace TSO stays off, the guests' NICs cannot negotiate TSO and a test with ``tso: true`` is
refused before anything starts.
"""
from __future__ import annotations

from typing import Any, ClassVar, Optional

from nfvperf.dut.base import DutAdapter, KernelIf, PortRef, VhostFrontend
from nfvperf.dut.vswitch import VSwitch
from nfvperf.host import netns as N
from nfvperf.topo import register
from nfvperf.topo.p_ovs_p import OvsTopology
from nfvperf.topo.spec import TopologySpec
from nfvperf.trial import Measurer
from nfvperf.vm.guest import TcpGuest
from nfvperf.methods import runs_on_iperf3
from nfvperf.vm.guest import load_image
from nfvperf.vm.tcp import VmTcpMeasurer

#: the TCP ends' addresses (a /24 of 198.18.0.0/15, RFC 2544's benchmarking range)
NET = "198.18.0"
CLIENT_IP, SERVER_IP = f"{NET}.1", f"{NET}.2"


class TcpVmTopology(OvsTopology):
    """The shared part: OVS-DPDK in ``<tag>-dut``, TCP guests on vhost-user ports, NORMAL rules."""

    duts: ClassVar[Optional[tuple[str, ...]]] = ("ovs-dpdk",)
    #: the external clients' wire (host-vm) and the link (vm-link-vm) are veths OVS opens with
    #: DPDK af_packet (or af_xdp: topology.port_kind); vm-vm has neither
    port_kinds: ClassVar[Optional[tuple[str, ...]]] = ("af_packet", "af_xdp")
    n_vnfs = 0
    #: the client end runs in a guest (else in a host namespace)
    client_in_vm: ClassVar[bool] = True
    #: bridges joined by a veth link (1: both ends on one bridge)
    n_bridge: ClassVar[int] = 1
    #: OVS other_config:userspace-tso-enable (only where every port on the path offloads)
    userspace_tso: ClassVar[bool] = False
    #: seed 001's words for it, for reports
    scenario: ClassVar[str] = ""

    # -- what the kind declares ------------------------------------------------------------------
    @classmethod
    def guest_count(cls) -> int:
        return 2 if cls.client_in_vm else 1

    @classmethod
    def vnf_classes_for(cls, spec: Any) -> list[type[DutAdapter]]:
        return [TcpGuest] * cls.guest_count()

    @classmethod
    def spec_refusal(cls, spec: TopologySpec) -> Optional[str]:
        ovs = spec.ovs
        for f in ("bond_mode", "vlan_translate"):
            if getattr(ovs, f, None):
                return f"topology.ovs.{f}: kind {cls.kind} wires its own bridges; leave {f} unset"
        if int(getattr(ovs, "bridges", 1) or 1) != 1:
            return f"topology.ovs.bridges: kind {cls.kind} makes its own bridges; leave bridges unset"
        return None

    @classmethod
    def tcp_tso_refusal(cls, spec: Any) -> Optional[str]:
        """Why ``tso: true`` cannot pass this kind's path (None: it can)."""
        if cls.userspace_tso:
            return None
        hop = "the external clients' port" if not cls.client_in_vm else "the link between the bridges"
        return (f"kind {cls.kind}: {hop} is a DPDK {spec.port_kind} port, which takes no TSO super-frames "
                "and fills in no checksums; OVS 3.1 drops such frames there (its software "
                "fallback came in OVS 3.3), so userspace TSO stays off and the guests' NICs "
                "cannot negotiate TSO. Use tso: false or unset, or kind vm-vm (both guests on one "
                "bridge)")

    @classmethod
    def test_refusals(cls, spec: Any, method: str, params: Any) -> list[str]:
        """What a test's params ask that the guests cannot do, each naming the field and the fix
        (checked when the suite is validated)."""
        if not runs_on_iperf3(method):
            return [f"method: {method} cannot run on kind {cls.kind}, which runs TCP tests only "
                    f"(method: tcp, iperf3 inside its guests); use another topology.kind for it"]
        vm = spec.vm
        out = []
        pins = list(getattr(params, "pin_cores", None) or [])
        processes = int(getattr(params, "processes", 1) or 1)
        if pins:
            bad = [c for c in pins if not 0 <= c < vm.vcpus]
            if bad:
                out.append(f"pin_cores: {bad} are not vCPUs of the guests (topology.vm.vcpus "
                           f"{vm.vcpus}: 0..{vm.vcpus - 1}); pin to existing vCPUs or raise "
                           f"topology.vm.vcpus")
            if processes > vm.vcpus:
                out.append(f"processes: {processes} iperf3 processes pinned one per vCPU need "
                           f"{processes} vCPUs, the guests have {vm.vcpus} (topology.vm.vcpus); "
                           f"lower processes, raise topology.vm.vcpus or drop pin_cores")
            elif len(pins) < processes:
                out.append(f"pin_cores: {len(pins)} CPU(s) for {processes} processes; give one "
                           f"vCPU per process (seed 001 Table 5: [0, 1, ...]) or drop pin_cores")
            elif len(set(pins[:processes])) < processes:
                out.append(f"pin_cores: {pins} pins two processes to one vCPU; give distinct vCPUs")
        mq = getattr(params, "multiqueue", None)
        want = None if mq is None or mq is False else (vm.virtio_queues() if mq is True else int(mq))
        if want is not None and (mq is True or want > 1):
            if vm.vcpus < 2:
                out.append(f"multiqueue: {str(mq).lower()} needs guests with 2+ vCPUs (topology.vm.vcpus is 1: "
                           "one queue is all one vCPU polls); raise topology.vm.vcpus or set "
                           "multiqueue: false")
            elif vm.virtio_queues() < 2 or want > vm.virtio_queues():
                out.append(f"multiqueue: {str(mq).lower()} asks for {want} queues, the guests' NICs have "
                           f"{vm.virtio_queues()} (topology.vm.queues); raise topology.vm.queues "
                           f"or lower multiqueue")
        # tso: true on the af_packet paths is the run plan's to skip (plan.measurer_refusal via
        # tcp_tso_refusal): the sim models it, iperf3 here cannot run it
        return out

    def cpu_demands(self) -> dict[str, int]:
        """The OVS PMD, then one CPU per guest (on a small host the plan shares them)."""
        return {"dut": int(self.dut_class().polling_cpus), **{f"vm{j}": 1 for j in range(self.guest_count())}}

    def hugepage_demand_mb(self) -> int:
        """OVS's socket memory and the guests' RAM (no generator here)."""
        return (self.dut_class().hugepage_demand_mb(self.spec) +
                sum(v.hugepage_demand_mb(self.spec) for v in self.vnf_classes_for(self.spec)))

    def required_checks(self) -> list[str]:
        return ["root", "hugepages"]

    def tcp_refusal(self) -> Optional[str]:
        return None

    def switching_operations(self, bidirectional: bool = True) -> int:
        return int(self.base_switching_operations)

    def tg_pairs(self) -> list[tuple[int, int]]:
        return []

    # -- building --------------------------------------------------------------------------------
    def setup(self) -> None:
        assert self.tracker is not None and self.plan is not None
        vm = self.spec.vm
        mtu = self.spec_mtu()
        self.dut_netns = self.make_netns("dut")
        N.run_in_netns(self.dut_netns, ["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                                        "net.ipv6.conf.default.disable_ipv6=1"], check=False)
        self.client_ns: Optional[str] = None
        if not self.client_in_vm:
            # the external clients' namespace and their wire into OVS
            self.client_ns = self.make_netns("tcpc")
            N.run_in_netns(self.client_ns, ["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                                            "net.ipv6.conf.default.disable_ipv6=1"], check=False)
            self.add_ports(1, dut_netns=self.dut_netns, tg_netns=self.client_ns)
            port = self.ports[0]
            assert port.tg_ifname is not None
            N.add_address(port.tg_ifname, f"{CLIENT_IP}/24", self.client_ns)
            N.set_link(port.tg_ifname, self.client_ns, state="up")
        self.make_dut(self.spec.dut, netns=self.dut_netns)
        dut = self.switch()
        if self.userspace_tso:
            dut.enable_tso()
        for p in self.ports:
            dut.add_port(p.dut_portref())
        dut.start()
        bridges = [dut.bridges[0]] + [dut.add_bridge() for _ in range(self.n_bridge - 1)]
        self.link: list[str] = []
        if self.n_bridge == 2:
            a, b = self.run.ifname("l0"), self.run.ifname("l1")
            N.create_veth(a, b, self.dut_netns, self.dut_netns, mtu=mtu, tracker=self.tracker)
            for k, (ifc, br) in enumerate(zip((a, b), bridges)):
                dut.attach_portref(PortRef(f"link{k}", KernelIf.of(self.spec.port_kind), ifname=ifc,
                                           netns=self.dut_netns, mtu=mtu), br,
                                   dpdk_index=10 + k)
            self.link = [a, b]
        image = load_image(vm.image)
        # guests: vm0 is the server where the client is external, else vm0 client, vm1 server
        ips = [SERVER_IP] if not self.client_in_vm else [CLIENT_IP, SERVER_IP]
        shared = bool(self.plan.cores_shared)
        self.guests: list[TcpGuest] = []
        self.guest_ports: list[str] = []
        for j, ip in enumerate(ips):
            name = f"vm{j}"
            br = bridges[min(j, len(bridges) - 1)]
            sock = dut.vhost_socket(name)
            pname = f"{name}-vhu0"
            dut.attach_portref(PortRef(pname, VhostFrontend(), socket=sock, mtu=mtu), br)
            self.guest_ports.append(pname)
            g = TcpGuest(self.run, self.tracker, socket=sock, ip=ip, name=name, vcpus=vm.vcpus,
                         memory_mb=vm.memory_mb, queues=vm.virtio_queues(), image=image,
                         accel=vm.accel, mtu=mtu, server=True,
                         cpus=() if shared else self.plan.cpus(name))
            g.start(wait=False)      # boot them side by side
            self.guests.append(g)
            self.vnfs.append(g)
        for br in bridges:
            dut.program(["priority=0,idle_timeout=0,actions=NORMAL"], bridge=br)
        for g in self.guests:
            g.wait_ready()
        self.wait_ports_up(dut)

    def wait_ports_up(self, dut: VSwitch, timeout_s: float = 30.0) -> None:
        """Every guest's vhost-user port (and the link's ends) up in OVS."""
        self.wait_interfaces_up(dut, self.guest_ports + [f"link{k}" for k in range(len(self.link))],
                                timeout_s)

    def forwarding_flows(self) -> None:
        return None

    def measurer(self) -> Measurer:
        raise RuntimeError(f"kind {self.kind} measures TCP with iperf3 inside its guests: "
                           "run its tcp tests with --tg iperf3 (or sim); it has no generator ports")

    def tcp_measurer(self, info: Optional[dict[str, Any]] = None) -> Measurer:
        """The iperf3 measurer between this topology's ends (the runner's ``--tg iperf3``)."""
        path = {"scenario": self.kind, "scenario_text": self.scenario, "topology": self.kind,
                "dut": self.spec.dut, "bridges": self.n_bridge, "link": self.link or None,
                "userspace_tso": self.userspace_tso, "tag": self.run.tag,
                "client": self.client_ns or self.guests[0].iface,
                "server": self.guests[-1].iface, "client_ip": CLIENT_IP, "server_ip": SERVER_IP}
        client: Any = self.client_ns if not self.client_in_vm else self.guests[0]
        m = VmTcpMeasurer(client, self.guests[-1], SERVER_IP, path=path,
                          dut_counters=self.dut_counters, dut_alive=self.dut_alive,
                          workdir=self.run.run_dir, tso_refusal=self.tcp_tso_refusal(self.spec))
        if info is not None:
            info["tcp_endpoints"] = path
        self._measurer = m
        return m

    def environment(self) -> dict[str, Any]:
        env = super().environment()
        env.update(scenario=self.scenario, client_ns=getattr(self, "client_ns", None),
                   link=getattr(self, "link", None), userspace_tso=self.userspace_tso)
        return env


@register("host-vm")
class HostVm(TcpVmTopology):
    """Seed 001 scenario 1: iperf3 clients in a host namespace -> a server VM."""

    client_in_vm = False
    base_switching_operations = 1
    scenario = "seed 001 scenario 1: external iperf3 clients -> a server VM"


@register("vm-link-vm")
class VmLinkVm(TcpVmTopology):
    """Seed 001 scenario 2: client VM and server VM on two bridges joined by a veth link."""

    n_bridge = 2
    base_switching_operations = 2
    scenario = ("seed 001 scenario 2: client and server VMs on different nodes (here: two OVS "
                "bridges joined by a veth link)")


@register("vm-vm")
class VmVm(TcpVmTopology):
    """Seed 001 scenario 3: client and server VMs on one bridge."""

    userspace_tso = True
    base_switching_operations = 1
    scenario = "seed 001 scenario 3: client and server VMs on the same node (one bridge)"
