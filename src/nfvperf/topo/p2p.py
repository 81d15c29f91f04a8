"""PHY-PHY (seed 000 test case 7.1): generator ports <-> DUT ports, the DUT forwards 0<->1, 2<->3.

Emulated PHY (``port_kind: af_packet`` / ``af_xdp``)::

    tgen --net_af_packet--> <tag>p0 ==veth== <tag>d0 --+
                            (root netns)     (<tag>-dut netns)  DUT: testpmd io/mac, or
    tgen <-net_af_packet--- <tag>p1 ==veth== <tag>d1 --+        a Linux bridge

Userspace ports (``port_kind: vhost`` / ``memif``, testpmd only): tgen's virtio-user (vhost-user
server) or memif client on a socket in the run dir; testpmd's net_vhost (client) / net_memif
(server) on the same socket.  No DUT namespace.

Real NICs (``port_kind: pci``, ``pci: [tg0, dut0, tg1, dut1]``): the generator opens tg0/tg1 and
the DUT (testpmd) dut0/dut1 by PCI address; the cables are tg0-dut0 and tg1-dut1.  All must be
bound to vfio-pci (docs/topologies.md).  linux-bridge cannot use PCI ports.

SR-IOV (seed 002 test cases 7-10, ``vnf: vm`` with ``port_kind: pci``): the DUT's addresses
(the odd ones) are virtual functions passed through to the VM VNF (``-device vfio-pci``), whose
testpmd forwards between them; the generator's addresses are the ports cabled to the VFs'
physical functions.  Preflight refuses it, naming the fix, where the IOMMU, the VFs or their
vfio-pci binding are missing (nfvperf.vm.sriov).

``dut: l3fwd`` (DPDK's l3fwd example, nfvperf.dut.l3fwd) routes instead of cross-connecting:
the generator's streams take the addresses its routes send to each port (:meth:`stream_params`).

One switching operation per frame.
"""
from __future__ import annotations

import importlib
import time
from typing import Any, Optional

from . import register
from .base import Topology, TopologyError
from .ports import HostPort, port_kind_class
from .spec import TopologySpec
from nfvperf.dut.base import DutAdapter, VhostBackend
from nfvperf.host.preflight import Check
from nfvperf.vm import sriov


def _vm_vnf_class() -> Any:
    return importlib.import_module("nfvperf.vm.qemu").VmVnf


@register("p2p")
class P2P(Topology):
    kind = "p2p"
    base_switching_operations = 1
    #: a forwarder on the PHY ports; OVS-DPDK runs in p-ovs-p (PHY-vSwitch-PHY)
    duts = ("testpmd", "l3fwd", "linux-bridge")
    #: on a testbed: tgen on the tester host, the DUT (an adapter that ``runs_remote``: testpmd)
    #: on the DUT host, the testbed's cabled links as ports (issue 19 item 4: run on two
    #: QEMU guests' emulated PCI NICs, nfvperf.testbed.guests)
    testbed_ready = True

    @classmethod
    def sriov(cls, spec: TopologySpec) -> bool:
        """``vnf: vm``: the forwarder runs in a VM on SR-IOV VFs (``port_kind: pci``)."""
        return spec.vnf == "vm"

    @classmethod
    def preflight_needs(cls, spec: Any) -> Any:
        """With ``vnf: vm``: QEMU, the guest's hugepages and the VF checks (IOMMU on, each DUT
        address a VF bound to vfio-pci)."""
        needs = super().preflight_needs(spec)
        if cls.sriov(spec):
            needs.merge(_vm_vnf_class().preflight_needs(spec))
            if not port_kind_class(spec.port_kind).dut_vfs:
                pk = spec.port_kind

                def no_vfs(_req: object) -> Check:
                    return Check("sriov:port_kind", "fail", f"topology.vnf: vm on kind p2p passes "
                                 f"SR-IOV VFs through to the VM; port_kind {pk!r} has none",
                                 "use port_kind: pci with pci: [tg0, vf0, tg1, vf1], or vnf: vm "
                                 "on kind pvp (vhost-user NICs)", required=True)
                needs.checks.append(no_vfs)
            else:
                # the DUT's addresses (the VFs the VM gets) of pci: [tg0, vf0, tg1, vf1, ...]
                needs.checks.append(lambda _req: sriov.vf_checks(list(spec.pci)[1::2]))
        return needs

    def check_testbed(self) -> None:
        """On a testbed as :meth:`Topology.check_testbed` says; ``vnf: vm`` (SR-IOV VFs passed to
        a VM on this machine) is not run across hosts."""
        if self.sriov(self.spec):
            raise TopologyError("topology.vnf: vm on kind p2p passes this machine's SR-IOV VFs to a "
                                "VM here; it does not run on a testbed: drop vnf: vm or --testbed")
        super().check_testbed()

    def setup(self) -> None:
        spec = self.spec
        if self.sriov(spec):
            self.setup_sriov_vm()
            return
        # the DUT ends are interfaces (veth) in a namespace here; on a testbed's DUT host they
        # are that host's own (the cabled links' interfaces or PCI NICs)
        if self.port_kind().dut_netns and not self.dut_host.remote:
            self.dut_netns = self.make_netns("dut")
        ports = self.add_ports_from_spec(dut_netns=self.dut_netns)
        if len(ports) < 2 or len(ports) % 2:
            raise TopologyError(f"p2p needs an even number of ports, got {len(ports)}")
        # the DUT's own options section (testpmd:, linux_bridge:, ...) as the adapter reads it;
        # eth_peers: the generator MACs a rewriting (mac) forwarder sends to
        options: dict[str, Any] = dict(self.dut_class().spec_options(spec),
                                       eth_peers=[p.tg_mac for p in ports])
        dut = self.make_dut(spec.dut, netns=self.dut_netns, **options)
        for p in ports:
            dut.add_port(p.dut_portref())
        self.spawn_tgen_for_clients(ports, dut)
        dut.launch()          # finished by bring_up (await_ready) once the generator is up
        dut.program(None)

    def spawn_tgen_for_clients(self, ports: list[HostPort], dut: DutAdapter, timeout_s: float = 10.0) -> None:
        """A DPDK DUT's vhost-user clients (``net_vhost client=1``) connect to the generator's
        sockets, one per port, each opened by tgen only once the one before it is connected; a
        client that finds no socket retries once a second.  Started after the DUT, tgen waited
        about 1.5 s for its two ports.  So tgen is spawned first, on this machine, and the DUT
        launched once tgen's first socket listens: that port connects at once, the next at the
        DUT's first retry."""
        sock = ports[0].socket if ports else None
        if not (self.want_tgen and sock is not None and not self.tg_host.remote and not self.dut_host.remote
                and all(isinstance(r.end, VhostBackend) and r.end.client for r in dut.ports)):
            return
        proc = self.spawn_tgen()
        deadline = time.monotonic() + timeout_s
        while not sock.exists() and time.monotonic() < deadline:
            proc.check_alive()
            time.sleep(0.01)

    def tgen_port_specs(self) -> list[Any]:
        """The generator's ports, each offering the queue pairs the DUT asks of its peer
        (``DutAdapter.peer_queues``: l3fwd sends on one TX queue per lcore, so a vhost port's
        virtio-user opens that many) besides the RX rings of its TX queues (memif)."""
        dut = self.dut
        txq = dut.tx_queues() if dut is not None else 1
        peer = int(getattr(dut, "peer_queues", lambda: 1)())
        return [p.tg_port_spec(i, dut_tx_queues=txq, dut_peer_queues=peer,
                               workers=self.tgen_workers())
                for i, p in enumerate(self.ports)]

    def stream_params(self) -> Optional[list[dict[str, Any]]]:
        """What the DUT's forwarding needs of the streams (l3fwd: the addresses its routes send
        to each port); None (tgen's defaults) for testpmd and the Linux bridge."""
        fn = getattr(self.dut, "stream_params", None)       # the SR-IOV VM VNF has none
        return fn() if fn is not None else None

    def setup_sriov_vm(self) -> None:
        """testpmd in the VM VNF forwarding between the VFs passed through to it (the DUT's
        addresses); the generator opens the even addresses."""
        spec = self.spec
        if not self.port_kind_class().dut_vfs:
            raise TopologyError(f"topology.vnf: vm on kind p2p needs port_kind: pci (SR-IOV VFs), "
                                f"not {spec.port_kind!r}")
        ports = self.add_ports_from_spec(dut_netns=None)
        if len(ports) != 2:
            raise TopologyError(f"the VM VNF forwards between exactly 2 VFs: give pci: [tg0, vf0, "
                                f"tg1, vf1], got {len(ports)} port pairs")
        assert self.tracker is not None and self.plan is not None
        vm = _vm_vnf_class()(self.run, self.tracker, vf_pci=[p.dut_pci for p in ports],
                             name="dut", cpus=self.plan.cpus("dut"), plan=self.plan, spec=spec,
                             eth_peers=[p.tg_mac for p in ports])
        self.dut = vm
        vm.start(wait=True)
