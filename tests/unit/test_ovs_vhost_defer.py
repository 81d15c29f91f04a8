"""OVS's generator-facing vhost-user ports are added without their socket path and get it as the
generator's socket appears (OvsDpdk.defer_vhost_connect / connect_vhost, OvsTopology.start_tgen):
tgen opens its virtio-user server sockets one by one, each blocking until OVS connects, and OVS
retries a socket that was missing when its port was added only once a second."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from nfvperf.dut.base import PortRef, VhostBackend
from nfvperf.dut.ovs_dpdk import OvsDpdk
from nfvperf.dut.ovs_spec import OvsSpec
from nfvperf.host.run import RunContext


class RecordingOvs(OvsDpdk):
    """OvsDpdk whose ovs-vsctl calls are recorded, not run (ovs-ofctl calls are dropped)."""

    def __init__(self, tmp_path: Path):
        super().__init__(RunContext("vd1", tmp_path), spec=OvsSpec())
        self.calls: list[tuple[str, ...]] = []

    def vsctl(self, *args: str, wait: bool = True, timeout: float = 30.0) -> str:
        self.calls.append(args)
        return ""

    def ofctl(self, cmd: str, bridge: str, *args: str, timeout: float = 30.0) -> str:
        return ""

    def _ofport(self, name: str, timeout: float = 10.0) -> int:
        return int(name[-1]) + 1


def _ref(i: int) -> PortRef:
    return PortRef(f"phy{i}", VhostBackend(client=True), socket=Path(f"/s/vhu{i}.sock"), mtu=1500)


def test_deferred_ports_are_added_without_their_path_and_connected_later(tmp_path: Path) -> None:
    ovs = RecordingOvs(tmp_path)
    ovs.defer_vhost_connect(["phy0"])
    ovs.attach_portref(_ref(0), "br0", ofport=1, dpdk_index=0)
    ovs.attach_portref(_ref(1), "br0", ofport=2, dpdk_index=1)       # not deferred
    add0, add1 = (" ".join(c) for c in ovs.calls)
    assert "set Interface phy0 type=dpdkvhostuserclient ofport_request=1" in add0
    assert "vhost-server-path" not in add0
    assert 'options:vhost-server-path="/s/vhu1.sock"' in add1
    # the port's record keeps its socket; the path waits in deferred_vhost
    assert ovs.ovs_ports["phy0"].options["vhost-server-path"] == "/s/vhu0.sock"
    assert ovs.deferred_vhost == {"phy0": "/s/vhu0.sock"}
    ovs.connect_vhost("phy0")
    assert ovs.calls[-1] == ("set", "Interface", "phy0", 'options:vhost-server-path="/s/vhu0.sock"')
    assert ovs.deferred_vhost == {}
    # only the first add defers: a restart adds the port with its path
    ovs.calls.clear()
    ovs.attach_portref(_ref(0), "br0", ofport=1, dpdk_index=0)
    assert 'options:vhost-server-path="/s/vhu0.sock"' in " ".join(ovs.calls[0])


def test_bond_members_defer_too(tmp_path: Path) -> None:
    ovs = RecordingOvs(tmp_path)
    ovs.defer_vhost_connect(["phy0", "phy2"])
    ovs.add_bond("br0", "bond0", [(_ref(0), 1, 0), (_ref(2), 3, 2)], "balance-slb")
    (call,) = ovs.calls
    assert "vhost-server-path" not in " ".join(call)
    assert ovs.deferred_vhost == {"phy0": "/s/vhu0.sock", "phy2": "/s/vhu2.sock"}


def test_start_tgen_gives_each_path_as_its_socket_appears(tmp_path: Path, monkeypatch) -> None:
    """While the generator starts, each deferred port gets its path once its socket exists, in
    the order the generator creates them; a socket that never appears is given at the end."""
    from nfvperf.topo.base import Topology
    from nfvperf.topo.p_ovs_p import OvsTopology

    socks = [tmp_path / f"vhu{i}.sock" for i in range(3)]
    ovs = RecordingOvs(tmp_path)
    ovs.deferred_vhost = {f"phy{i}": str(s) for i, s in enumerate(socks)}
    seen: list[tuple[str, bool]] = []
    real_connect = ovs.connect_vhost

    def connect(name: str) -> None:
        seen.append((name, Path(ovs.deferred_vhost[name]).exists()))
        real_connect(name)

    monkeypatch.setattr(ovs, "connect_vhost", connect)

    def fake_tgen_start(self: Any) -> None:        # tgen: socket 0, then 1, each after a wait
        for s in socks[:2]:
            s.touch()
            deadline = time.monotonic() + 5
            while ovs.deferred_vhost.get(f"phy{socks.index(s)}") and time.monotonic() < deadline:
                time.sleep(0.01)

    monkeypatch.setattr(Topology, "start_tgen", fake_tgen_start)
    topo = OvsTopology.__new__(OvsTopology)
    topo.dut = ovs
    topo.run = RunContext("vd2", tmp_path)
    topo.start_tgen()
    assert seen == [("phy0", True), ("phy1", True), ("phy2", False)]
    assert ovs.deferred_vhost == {}
    assert not any(t.name.startswith("vhost-connect-") for t in threading.enumerate())
