"""VXLAN, PHY-OVS-VM-OVS-PHY (seed 000 §7.6): OVS-DPDK is the VTEP in front of a container VNF.

tgen sends VXLAN-encapsulated frames (outer IPv4/UDP 4789, VNI per port) to the VTEP; OVS
decapsulates them (``tnl_pop``) into the VNF, takes the VNF's frames back and encapsulates them
(``tnl_push``) towards the generator's other port.  The OVS userspace tunnel set-up, per port i::

    br-phy<i> (netdev, NORMAL): dpdk port phy<i> (veth) + its internal port (a tap in the DUT
        namespace) holding the VTEP address 10.0.<i>.2/24, fixed MAC 02:<tag>:b0:<i>
    ovs/route/add 10.0.<i>.1/32 br-phy<i>; tnl/arp/set br-phy<i> 10.0.<i>.1 <tgen port i MAC>
    br-int: vxlan port vx<i> (remote_ip 10.0.<i>.1, local_ip 10.0.<i>.2, key 1000+i)
            + the VNF's dpdkvhostuserclient ports; in_port rules vx<a> -> VNF -> vx<b> and back

The generator port i is the remote VTEP 10.0.<i>.1.  Frame sizes are the *inner* sizes (the wire
carries 50 bytes more).  Switching operations per frame: 2, as PHY-VM-PHY.
"""
from __future__ import annotations

from typing import Any, Optional

from nfvperf.topo import register
from nfvperf.topo.p_ovs_p import OvsTopology

VNI_BASE = 1000


def tg_ip(i: int) -> str:
    return f"10.0.{i}.1"


def vtep_ip(i: int) -> str:
    return f"10.0.{i}.2"


@register("vxlan")
class Vxlan(OvsTopology):
    """PHY-OVS(VTEP)-VNF-OVS(VTEP)-PHY with VXLAN on the PHY side."""

    base_switching_operations = 2
    n_vnfs = 1

    def tcp_refusal(self) -> Optional[str]:
        return ("vxlan expects VXLAN-encapsulated traffic from the generator; TCP endpoints work "
                "on p2p, p-ovs-p, pvp, pvvp")

    def vtep_mac(self, i: int) -> str:
        t = self.run.tag[3:]
        return f"02:{t[0:2]}:{t[2:4]}:{t[4:6]}:b0:{i:02x}"

    def setup(self) -> None:
        dut = self.setup_ovs(attach_phys=False)
        dut.start()
        brint = dut.bridges[0]
        for i, hp in enumerate(self.ports):
            brp = dut.add_bridge(self.run.ifname(f"bp{i}"), hwaddr=self.vtep_mac(i), mtu=hp.mtu)
            dut.attach_portref(hp.dut_portref(), brp, dpdk_index=i)
            dut.program(["priority=0,actions=NORMAL"], bridge=brp)
            dut.tunnel_endpoint(brp, vtep_ip(i), 24, tg_ip(i), str(hp.tg_mac))
            # OpenFlow numbers 100+ keep 1.. free for the PortRef ports (the VNF's vhost ports)
            dut.add_tunnel(brint, f"vx{i}", 100 + i, tg_ip(i), vtep_ip(i), VNI_BASE + i)
        rules: list[str] = []
        for p, (a, b) in enumerate(self.tg_pairs()):
            name = f"vnf{p}"
            self.add_vnf(dut, name)
            v0, v1 = f"{name}-vhu0", f"{name}-vhu1"
            rules += [f"priority=100,in_port={src},idle_timeout=0,actions=output:{dst}"
                      for src, dst in ((f"vx{a}", v0), (v1, f"vx{b}"), (f"vx{b}", v1), (v0, f"vx{a}"))]
        dut.program(rules, bridge=brint)
        self.wait_vnfs_ready(dut)

    def stream_params(self) -> Optional[list[dict[str, Any]]]:
        out = super().stream_params() or []
        pairs = self.tg_pairs()
        # the sending port of each direction: the forward pairs', then the reverse
        for i, tx in enumerate([a for a, _ in pairs] + [b for _, b in pairs]):
            out[i]["vxlan"] = {"vni": VNI_BASE + tx, "outer_src_mac": self.ports[tx].tg_mac,
                               "outer_dst_mac": self.vtep_mac(tx), "outer_src_ip": tg_ip(tx),
                               "outer_dst_ip": vtep_ip(tx)}
        return out

    def environment(self) -> dict[str, Any]:
        env = super().environment()
        env["vxlan"] = {"vteps": {f"port{i}": {"vtep_ip": vtep_ip(i), "remote_ip": tg_ip(i),
                                               "vni": VNI_BASE + i, "vtep_mac": self.vtep_mac(i)}
                                  for i in range(len(self.ports))}}
        return env
