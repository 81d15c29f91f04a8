"""OVS ``mtu_request`` on every port the OVS adapters create, without a real OVS.

The seam is the adapter's ``host`` (``self.host.run(argv, ...)`` is where every ``ovs-vsctl``
goes, see ``OvsDpdk._run``): a recorder answers ``get Interface <name> ofport`` with a number and
keeps each argument list, so the tests see exactly what ``ovs-vsctl`` would have been given.

The PHY ports come from the real port kinds (``HostPort.dut_portref()``), the VNF ports are built
as ``PhyOvsPhy.add_vnf`` builds them, so a port kind that stops carrying its MTU shows here too.

MTU 1500: ``PortRef.mtu`` is an ``int`` (default 1500, never None) and ``attach_portref`` passes
it on unconditionally; ``add_ovs_port`` / ``attach_portref`` (ovs-system) only leave
``mtu_request`` out when ``mtu is None``.  So a standard-MTU port gets an explicit
``mtu_request=1500`` (what OVS's environment reports and the integration tests expect), and only
the lower-level calls without an MTU (``add_ovs_port(..., mtu=None)``, ``add_bridge()``) omit it.
"""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from nfvperf.dut.base import AfPacketIf, PortRef, VhostFrontend
from nfvperf.dut.ovs_ctl import MTU_KINDS
from nfvperf.dut.ovs_dpdk import OvsDpdk
from nfvperf.dut.ovs_spec import OvsSpec
from nfvperf.dut.ovs_system import OvsSystem
from nfvperf.host.run import RunContext
from nfvperf.topo.ports.base import HostPort

OFPORT = 7


class RecordingHost:
    """Stands in for ``nfvperf.host.proc.LOCAL``: records every command, runs none."""

    remote = False

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def run(self, argv: list[str], env: Any = None, timeout: Any = None,
            check: bool = False) -> subprocess.CompletedProcess:
        argv = list(argv)
        self.calls.append(argv)
        out = f"{OFPORT}\n" if argv[-1] == "ofport" and "get" in argv else ""
        return subprocess.CompletedProcess(argv, 0, out, "")

    def changes(self) -> list[list[str]]:
        """The ovs-vsctl calls that change the database (add-br / add-port), options stripped."""
        out = []
        for argv in self.calls:
            assert argv[0] == "ovs-vsctl", argv
            args = [a for a in argv[1:] if not a.startswith("--db=") and not a.startswith("--timeout=")]
            if "add-port" in args or "add-br" in args:
                out.append(args)
        return out

    def add_port(self, name: str) -> list[str]:
        """The one ``add-port ... <name>`` call."""
        (args,) = [a for a in self.changes() if "add-port" in a and a[a.index("add-port") + 2] == name]
        return args


def iface_settings(args: list[str], iface: str) -> list[str]:
    """What ``-- set Interface <iface> k=v ...`` of one ovs-vsctl call sets (up to the next ``--``)."""
    for i in range(len(args) - 2):
        if args[i:i + 3] == ["set", "Interface", iface]:
            rest = args[i + 3:]
            return rest[:rest.index("--")] if "--" in rest else rest
    return []


def mtu_requests(args: list[str], iface: str) -> list[str]:
    return [a for a in iface_settings(args, iface) if a.startswith("mtu_request")]


def _adapter(cls: type, tmp_path: Path) -> tuple[Any, RecordingHost]:
    host = RecordingHost()
    dut = cls(RunContext("nfv0a1b2c", tmp_path / "run"), spec=OvsSpec(), host=host)
    dut.bridges.append("br0")          # as add_bridge() left it (tests of add_bridge record their own)
    return dut, host


# every kind of PHY port OVS-DPDK attaches, from the port kinds' own dut_portref()
def _phy(family: str, mtu: int, tmp_path: Path) -> PortRef:
    sock = tmp_path / f"{family}.sock"
    return {
        "af_packet": lambda: HostPort(0, "veth", dut_ifname="v0dut", driver="af_packet", mtu=mtu),
        "af_xdp": lambda: HostPort(0, "veth", dut_ifname="v0dut", driver="af_xdp", mtu=mtu),
        "pci": lambda: HostPort(0, "pci", tg_pci="0000:03:00.0", dut_pci="0000:03:00.1", mtu=mtu),
        "memif": lambda: HostPort(0, "memif", socket=sock, mtu=mtu),
        "vhost": lambda: HostPort(0, "vhost", socket=sock, mtu=mtu),
    }[family]().dut_portref()


#: family -> (OVS Interface type, a piece of its options that says which device it is)
PHY_KINDS = {
    "af_packet": ("dpdk", 'options:dpdk-devargs="net_af_packet0,iface=v0dut'),
    "af_xdp": ("dpdk", 'options:dpdk-devargs="net_af_xdp0,iface=v0dut'),
    "pci": ("dpdk", 'options:dpdk-devargs="0000:03:00.1"'),
    "memif": ("dpdk", 'options:dpdk-devargs="net_memif0,role=server'),
    "vhost": ("dpdkvhostuserclient", 'options:vhost-server-path="'),
}


def test_every_phy_port_kind_of_ovs_dpdk_is_covered() -> None:
    assert sorted(PHY_KINDS) == sorted(OvsDpdk.port_kinds)


@pytest.mark.parametrize("family", sorted(PHY_KINDS))
@pytest.mark.parametrize("mtu", [9000, 1500])
def test_phy_port_requests_the_spec_mtu(tmp_path: Path, family: str, mtu: int) -> None:
    dut, host = _adapter(OvsDpdk, tmp_path)
    port = _phy(family, mtu, tmp_path)
    assert port.mtu == mtu
    assert dut.attach_portref(port, "br0", ofport=1) == OFPORT
    args = host.add_port(port.name)
    kind, devargs = PHY_KINDS[family]
    settings = iface_settings(args, port.name)
    assert f"type={kind}" in settings
    assert any(s.startswith(devargs) for s in settings), settings
    # on the port's own Interface record, exactly once, with the spec's MTU (1500 too: see the doc)
    assert mtu_requests(args, port.name) == [f"mtu_request={mtu}"]
    assert dut.ovs_ports[port.name].mtu == mtu          # what environment() reports as mtu_request


@pytest.mark.parametrize("mtu", [9000, 1500])
def test_start_attaches_the_phy_ports_with_their_mtu(tmp_path: Path, mtu: int) -> None:
    """The p-ovs-p path: ports given to add_port() before start() go on the first bridge."""
    dut, host = _adapter(OvsDpdk, tmp_path)
    dut.bridges.clear()
    dut._start_daemons = lambda: None      # no ovsdb-server / ovs-vswitchd: only the vsctl calls
    ports = [_phy("af_packet", mtu, tmp_path),
             PortRef("phy1", AfPacketIf(), ifname="v1dut", mtu=mtu)]
    for p in ports:
        dut.add_port(p)
    dut.start()
    (br,) = dut.bridges
    assert [a for a in host.changes() if "add-br" in a][0][2] == br
    for i, p in enumerate(ports):
        args = host.add_port(p.name)
        assert args[args.index("add-port") + 1] == br
        assert f"ofport_request={i + 1}" in iface_settings(args, p.name)
        assert mtu_requests(args, p.name) == [f"mtu_request={mtu}"]


@pytest.mark.parametrize("mtu", [9000, 1500])
def test_vnf_vhost_ports_request_the_spec_mtu(tmp_path: Path, mtu: int) -> None:
    """A VNF's two ports as PhyOvsPhy.add_vnf adds them (vhost-user, after start())."""
    dut, host = _adapter(OvsDpdk, tmp_path)
    dut.started = True
    for k in range(2):
        dut.add_port(PortRef(f"vnf0-vhu{k}", VhostFrontend(),
                             socket=tmp_path / f"vhu-vnf0-{k}.sock", mtu=mtu))
    for k in range(2):
        args = host.add_port(f"vnf0-vhu{k}")
        settings = iface_settings(args, f"vnf0-vhu{k}")
        assert "type=dpdkvhostuserclient" in settings
        assert f'options:vhost-server-path="{tmp_path / f"vhu-vnf0-{k}.sock"}"' in settings
        assert mtu_requests(args, f"vnf0-vhu{k}") == [f"mtu_request={mtu}"]


@pytest.mark.parametrize("kind", ["dpdk", "dpdkvhostuserclient", "internal"])
def test_add_ovs_port_mtu_kinds(tmp_path: Path, kind: str) -> None:
    dut, host = _adapter(OvsDpdk, tmp_path)
    extra: dict[str, Any] = {"dpdk": {"devargs": "0000:03:00.1"},
                             "dpdkvhostuserclient": {"sock": str(tmp_path / "s.sock")},
                             "internal": {}}[kind]
    assert kind in MTU_KINDS
    dut.add_ovs_port("br0", "p9000", kind, mtu=9000, **extra)
    assert mtu_requests(host.add_port("p9000"), "p9000") == ["mtu_request=9000"]
    assert dut.ovs_ports["p9000"].mtu == 9000
    # no MTU given: OVS's default is left alone
    dut.add_ovs_port("br0", "pnone", kind, **extra)
    assert mtu_requests(host.add_port("pnone"), "pnone") == []
    assert dut.ovs_ports["pnone"].mtu is None


@pytest.mark.parametrize("kind,options", [
    ("vxlan", {"remote_ip": "10.0.0.2", "local_ip": "10.0.0.1", "key": 100}),
    ("patch", {"peer": "patch-br1"}),
])
def test_tunnel_and_patch_ports_get_no_mtu_request(tmp_path: Path, kind: str, options: dict) -> None:
    """Tunnel and patch ports have no MTU of their own in the userspace datapath: an MTU given
    (as vxlan.py / p_ovs_p.py could) is dropped, not sent to OVS (which would flag the port)."""
    dut, host = _adapter(OvsDpdk, tmp_path)
    dut.add_ovs_port("br0", "t0", kind, ofport=100, options=options, mtu=9000)
    args = host.add_port("t0")
    assert f"type={kind}" in iface_settings(args, "t0")
    assert not [a for a in args if "mtu_request" in a]
    assert dut.ovs_ports["t0"].mtu is None


@pytest.mark.parametrize("mtu", [9000, 1500])
def test_vtep_bridge_internal_port_requests_the_mtu(tmp_path: Path, mtu: int) -> None:
    """vxlan.py: add_bridge(..., mtu=hp.mtu) -- the bridge's internal port is the VTEP (a tap in
    OVS's namespace) and carries the encapsulated frames at the PHY port's MTU."""
    dut, host = _adapter(OvsDpdk, tmp_path)
    dut.bridges.clear()
    br = dut.add_bridge("nfv0a1b2cbp0", hwaddr="02:0a:1b:2c:b0:00", mtu=mtu)
    (args,) = host.changes()
    assert args[args.index("add-br") + 1] == br
    assert mtu_requests(args, br) == [f"mtu_request={mtu}"]
    # a bridge without an MTU (the p-ovs-p / pvp bridges): none requested
    dut.add_bridge()
    assert not [a for a in host.changes()[1] if "mtu_request" in a]


# ----------------------------------------------------------------- ovs-system (kernel datapath)
@pytest.mark.parametrize("driver", ["af_packet", "af_xdp"])
@pytest.mark.parametrize("mtu", [9000, 1500])
def test_ovs_system_kernel_port_requests_the_spec_mtu(tmp_path: Path, driver: str, mtu: int) -> None:
    dut, host = _adapter(OvsSystem, tmp_path)
    port = HostPort(0, "veth", dut_ifname="v0dut", driver=driver, mtu=mtu).dut_portref()
    assert dut.attach_portref(port, "br0", ofport=1) == OFPORT
    args = host.add_port("v0dut")            # the kernel interface itself, no type= / devargs
    assert args[args.index("add-port") + 1:args.index("add-port") + 3] == ["br0", "v0dut"]
    assert not [a for a in args if a.startswith("type=") or "devargs" in a]
    assert iface_settings(args, "v0dut") == ["ofport_request=1", f"mtu_request={mtu}"]
    assert dut.ovs_ports[port.name].mtu == mtu


def test_ovs_system_mtu_request_without_an_ofport(tmp_path: Path) -> None:
    """No ofport_request: the ``-- set Interface`` is still there for the MTU alone."""
    dut, host = _adapter(OvsSystem, tmp_path)
    dut.attach_portref(PortRef("phy0", AfPacketIf(), ifname="v0dut", mtu=9000), "br0")
    assert iface_settings(host.add_port("v0dut"), "v0dut") == ["mtu_request=9000"]


@pytest.mark.parametrize("mtu", [9000, 1500])
def test_ovs_system_start_attaches_the_ports_with_their_mtu(tmp_path: Path, mtu: int) -> None:
    dut, host = _adapter(OvsSystem, tmp_path)
    dut.bridges.clear()
    dut._start_daemons = lambda: None
    for i in range(2):
        dut.add_port(PortRef(f"phy{i}", AfPacketIf(), ifname=f"v{i}dut", mtu=mtu))
    dut.start()
    for i in range(2):
        assert mtu_requests(host.add_port(f"v{i}dut"), f"v{i}dut") == [f"mtu_request={mtu}"]

