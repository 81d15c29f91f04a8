"""PHY-VM-PHY (seed 000 §7.3) with a container VNF: tgen <-> OVS-DPDK <-> testpmd VNF <-> OVS-DPDK <-> tgen.

For every generator port pair (a, b) a chain of ``n_vnfs`` testpmd VNFs (``TestpmdVnf``, io
forwarding, virtio-user as vhost-user *server*) hangs off the bridge through ``dpdkvhostuserclient``
ports; the rules steer phy a -> VNF 1 port 0, VNF 1 port 1 -> VNF 2 port 0, ..., VNF n port 1 ->
phy b and the same way back.  Switching operations per frame: n_vnfs + 1 (OVS passes; seed 000
Table 5-1: PHY-VM-PHY 2, PHY-VM-VM-PHY 3).  ``pvvp.py`` is this with two VNFs.
"""
from __future__ import annotations

from typing import Any

from nfvperf.dut.base import Flow, PortRef
from nfvperf.dut.testpmd import TestpmdVnf
from nfvperf.topo import register
from nfvperf.topo.p_ovs_p import OvsTopology


@register("pvp")
class Pvp(OvsTopology):
    """PHY-OVS-VNF-OVS-PHY."""

    n_vnfs = 1

    @property
    def base_switching_operations(self) -> int:   # type: ignore[override]
        return self.n_vnfs + 1

    def cpu_demands(self) -> dict[str, int]:
        d = {"dut": 1}
        for j in range(self.n_vnfs * max(1, self.spec.ports // 2)):
            d[f"vnf{j}"] = 1
        d["tgen"] = 1
        return d

    def vnf_chain(self, pair: int, dut: Any) -> list[tuple[int, int]]:
        """Start the VNFs of one port pair and attach their sockets to OVS; return each VNF's
        (in port index, out port index) on the bridge, in forward order."""
        ports: list[tuple[int, int]] = []
        for k in range(self.n_vnfs):
            name = f"vnf{pair * self.n_vnfs + k}"
            socks = [dut.dir / f"vhu-{name}-{i}.sock" for i in range(2)]
            # OVS first: virtio-user in server mode waits for its client while it starts
            idx = [dut.add_port(PortRef(f"{name}-vhu{i}", kind="vhost-user", socket=s))
                   for i, s in enumerate(socks)]
            tp = getattr(self.spec, "testpmd", None)
            vnf = TestpmdVnf(self.run, self.tracker, sockets=socks, server=True, name=name,
                             plan=self.plan, spec=self.spec,
                             forward_mode=tp.forward_mode if tp else "io")
            vnf.start()
            self.vnfs.append(vnf)
            ports.append((idx[0], idx[1]))
        return ports

    def setup(self) -> None:
        dut = self.setup_ovs()
        dut.start()
        pairs = self.tg_pairs()
        flows: list[Flow] = []
        for p, (a, b) in enumerate(pairs):
            chain = self.vnf_chain(p, dut)
            # forward: a -> vnf1.in, vnf1.out -> vnf2.in, ..., vnfN.out -> b
            fwd, cur = [], a
            for vin, vout in chain:
                fwd.append((cur, vin))
                cur = vout
            fwd.append((cur, b))
            rev = [(o, i) for i, o in reversed(fwd)]
            flows += self.path_flows(fwd, p)
            flows += self.path_flows(rev, len(pairs) + p)
        dut.program(flows)
        self.wait_vhost_up(dut)

    def wait_vhost_up(self, dut: Any, timeout_s: float = 20.0) -> None:
        """OVS connects to the VNF sockets asynchronously; wait until every vhost port is up."""
        import time
        deadline = time.monotonic() + timeout_s
        names = [p.name for p in dut.ports if p.kind == "vhost-user"]
        while True:
            down = [n for n in names
                    if dut.vsctl("get", "Interface", n, "link_state", wait=False).strip() != "up"]
            if not down:
                return
            self.dut_alive()
            if time.monotonic() > deadline:
                raise RuntimeError(f"vhost-user ports {down} not up after {timeout_s:.0f} s; "
                                   f"OVS log: {dut.log_tail()}")
            time.sleep(0.2)
