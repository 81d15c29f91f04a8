"""PHY-VM-PHY (seed 000 §7.3) with a container VNF: tgen <-> OVS-DPDK <-> testpmd VNF <-> OVS-DPDK <-> tgen.

For every generator port pair (a, b) a chain of ``n_vnfs`` testpmd VNFs (``TestpmdVnf``, io
forwarding, virtio-user as vhost-user *server*) hangs off the bridge through ``dpdkvhostuserclient``
ports; the rules steer phy a -> VNF 1 port 0, VNF 1 port 1 -> VNF 2 port 0, ..., VNF n port 1 ->
phy b and the same way back.  Switching operations per frame: n_vnfs + 1 (OVS passes; seed 000
Table 5-1: PHY-VM-PHY 2, PHY-VM-VM-PHY 3).  ``pvvp.py`` is this with two VNFs.
"""
from __future__ import annotations

from typing import Optional

from nfvperf.dut.base import Flow
from nfvperf.dut.vswitch import VSwitch
from nfvperf.topo import register
from nfvperf.topo.p_ovs_p import OvsTopology


@register("pvp")
class Pvp(OvsTopology):
    """PHY-OVS-VNF-OVS-PHY."""

    n_vnfs = 1
    base_switching_operations = n_vnfs + 1     # phy -> VNF, VNF -> phy
    #: on a testbed OVS-DPDK and the container VNFs run on the DUT host (issue 10)
    testbed_ready = True

    def vnf_chain(self, pair: int, dut: VSwitch) -> list[tuple[int, int]]:
        """The VNFs of one port pair, each as (in port index, out port index) on the bridge."""
        return [self.add_vnf(dut, f"vnf{pair * self.n_vnfs + k}") for k in range(self.n_vnfs)]

    def setup(self) -> None:
        dut = self.setup_ovs()
        dut.start()
        #: per port pair, its VNFs' (in, out) port indices on the bridge
        self.chains = [self.vnf_chain(p, dut) for p in range(len(self.tg_pairs()))]
        dut.program(self.forwarding_flows())
        self.wait_vnfs_ready(dut)

    def forwarding_flows(self) -> Optional[list[Flow]]:
        """Each port pair through its VNF chain, both ways (``ovs.rules``: IP rules at the
        first hop)."""
        pairs = self.tg_pairs()
        flows: list[Flow] = []
        for p, ((a, b), chain) in enumerate(zip(pairs, self.chains)):
            # forward: a -> vnf1.in, vnf1.out -> vnf2.in, ..., vnfN.out -> b
            fwd = list(zip([a] + [vout for _, vout in chain], [vin for vin, _ in chain] + [b]))
            rev = [(o, i) for i, o in reversed(fwd)]
            flows += self.path_flows(fwd, p)
            flows += self.path_flows(rev, len(pairs) + p)
        return flows
