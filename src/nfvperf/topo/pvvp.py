"""PHY-VM-VM-PHY (seed 000 §7.4): two container VNFs chained through OVS-DPDK.

phy a -> VNF 1 -> OVS -> VNF 2 -> phy b and back; three switching operations per frame
(seed 000 Table 5-1).  Everything else as :mod:`nfvperf.topo.pvp`.
"""
from __future__ import annotations

from nfvperf.topo import register
from nfvperf.topo.pvp import Pvp


@register("pvvp")
class Pvvp(Pvp):
    """PHY-OVS-VNF-OVS-VNF-OVS-PHY."""

    n_vnfs = 2
    base_switching_operations = n_vnfs + 1
