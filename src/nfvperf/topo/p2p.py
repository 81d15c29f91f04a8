"""PHY-PHY (seed 000 test case 7.1): generator ports <-> DUT ports, the DUT forwards 0<->1, 2<->3.

Emulated PHY (``port_kind: af_packet`` / ``af_xdp``)::

    tgen --net_af_packet--> <tag>p0 ==veth== <tag>d0 --+
                            (root netns)     (<tag>-dut netns)  DUT: testpmd io/mac, or
    tgen <-net_af_packet--- <tag>p1 ==veth== <tag>d1 --+        a Linux bridge

Real NICs (``port_kind: pci``, ``pci: [tg0, dut0, tg1, dut1]``): the generator opens tg0/tg1 and
the DUT (testpmd) dut0/dut1 by PCI address; the cables are tg0-dut0 and tg1-dut1.  All must be
bound to vfio-pci (docs/topologies.md).  linux-bridge cannot use PCI ports.

One switching operation per frame.
"""
from __future__ import annotations

from typing import Any

from . import register
from .base import Topology, TopologyError


@register("p2p")
class P2P(Topology):
    kind = "p2p"
    base_switching_operations = 1

    def cpu_demands(self) -> dict[str, int]:
        # the kernel bridge forwards in softirq context: no polling CPU of its own
        dut = 0 if self.spec.dut == "linux-bridge" else 1
        return {"dut": dut, "tgen": 1}

    def plan_cpus(self):
        plan = super().plan_cpus()
        if self.spec.dut == "linux-bridge" and self.spec.port_kind != "pci":
            # veth transmit runs the receiving side (bridge, peer veth) in the sender's softirq:
            # the kernel DUT forwards on the generator's CPU
            plan.cores_shared = True
            plan.warnings.append("CORES SHARED: the Linux bridge forwards in softirq context on "
                                 "the CPU that transmits into the veth, i.e. the generator's "
                                 f"CPU(s) {plan.cpus('tgen')}; results are a lower bound")
        return plan

    def required_checks(self):
        req = ["root", "tgen"]
        if self.spec.dut != "linux-bridge" or self.want_tgen:   # DPDK: tgen and/or testpmd
            req.append("hugepages")
        return req

    def setup(self) -> None:
        spec = self.spec
        if spec.dut not in ("testpmd", "linux-bridge"):
            raise TopologyError(f"p2p drives testpmd or linux-bridge; for {spec.dut} use kind "
                                "p-ovs-p (PHY-vSwitch-PHY)")
        if spec.port_kind == "pci" and spec.dut == "linux-bridge":
            raise TopologyError("linux-bridge needs kernel interfaces; use port_kind af_packet or "
                                "af_xdp (veth), or dut testpmd with PCI ports")
        if spec.port_kind != "pci":
            self.dut_netns = self.make_netns("dut")
        ports = self.add_ports_from_spec(dut_netns=self.dut_netns)
        if len(ports) < 2 or len(ports) % 2:
            raise TopologyError(f"p2p needs an even number of ports, got {len(ports)}")
        options: dict[str, Any] = {}
        if spec.dut == "testpmd":
            tp = spec.testpmd
            options.update(eth_peers=[p.tg_mac for p in ports], memory=tp.memory,
                           queues=tp.queues, rxd=tp.rxd, txd=tp.txd)
        else:
            options.update(mode=spec.linux_bridge.mode, ageing_s=spec.linux_bridge.ageing_s)
        dut = self.make_dut(spec.dut, netns=self.dut_netns, **options)
        for p in ports:
            dut.add_port(p.dut_portref())
        dut.start()
        dut.program(None)
