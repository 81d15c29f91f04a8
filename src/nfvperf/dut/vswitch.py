"""The :class:`VSwitch` protocol: what the switch topologies (p-ovs-p, pvp, pvvp, vxlan, the TCP VM
kinds) may ask of the virtual switch between the generator and the VNFs, as OVS's
``netdev-provider.h`` declares one struct of operations with each one's error contract.

Implementations subclass it explicitly (its methods below are the defaults of a switch without the
feature): :class:`nfvperf.dut.ovs_dpdk.OvsDpdk` (one file per concern: ``ovs_ctl``, ``ovs_ports``,
``ovs_flows``, ``ovs_pmd``, ``ovs_telemetry``), :class:`nfvperf.dut.ovs_system.OvsSystem` and
:class:`nfvperf.dut.linux_bridge.LinuxBridge`.  A topology gets one with
:meth:`nfvperf.topo.p_ovs_p.OvsTopology.setup_switch` and calls nothing else on it.

Error contracts:

- A feature the switch does not have raises :class:`nfvperf.trial.Unsupported` naming the switch
  and the feature (the defaults here), before anything is changed.
- A set-up step the switch has but that fails (a command rejected, a port that does not come up,
  rules that do not count) raises the implementation's error, a ``RuntimeError`` naming the step
  and carrying the switch's log (``OvsError``); a switch process that died raises
  :class:`nfvperf.trial.DutFailure` from :meth:`alive` and from any call after it.
- :meth:`stop` never raises for what is already gone and may be called twice.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, ClassVar, Optional, Protocol, Sequence, Union, runtime_checkable

from nfvperf.trial import Unsupported

if TYPE_CHECKING:
    from nfvperf.dut.base import Flow, PortRef, TopologyView
    from nfvperf.host.cpu import CoreRequest

#: the rule set of the current spec (None: the options do not shape the forwarding)
ForwardingSource = Callable[[], Optional[Sequence[Union["Flow", str]]]]


@runtime_checkable
class VSwitch(Protocol):
    """A switch with bridges, ports of several kinds, rules, polling cores and counters."""

    name: str
    #: the ports :meth:`add_port` attached, in index order (``Flow`` indices refer to them)
    ports: list[PortRef]
    #: its bridges, the first one made by :meth:`start`
    bridges: list[str]
    #: busy-polling CPUs it takes by default (the CPU plan's ``dut`` role); 0: it forwards in the
    #: kernel and no polling thread competes with the generator
    polling_cpus: ClassVar[int]

    @classmethod
    def core_request(cls, spec: TopologyView) -> Optional[CoreRequest]:
        """Polling cores the spec asks for as a count (``pmd_cores``, ``ht``), which the topology
        resolves from the host's sibling map before :meth:`start`; None: ``polling_cpus``."""
        ...

    @classmethod
    def polling_cpus_of(cls, spec: TopologyView) -> Optional[list[int]]:
        """The CPUs its polling threads run on when the spec pins them itself (a raw mask, kept
        out of the CPU plan and stored with the run); None: the plan's ``dut`` CPUs."""
        ...

    def start(self) -> None:
        """Start the switch and make its first bridge with the ports added so far; idempotent."""
        ...

    def stop(self) -> None:
        """Stop it and release what :meth:`start` made; idempotent, never raises for what is gone."""
        ...

    def reset(self) -> None:
        """RFC 6201 reset: restart with the same ports and re-install the last rules."""
        ...

    def alive(self) -> None:
        """DutFailure when the switch (or its host) is gone."""
        ...

    def add_port(self, port: PortRef) -> int:
        """Attach ``port`` to the first bridge (before start: at start); returns its index, whose
        OpenFlow port number is index + 1 (:meth:`ofport`)."""
        ...

    def add_bridge(self, name: Optional[str] = None, hwaddr: Optional[str] = None,
                   mtu: Optional[int] = None) -> str:
        """Another bridge (fail-secure: it forwards only what :meth:`program` installs)."""
        raise Unsupported(f"{self.name} makes no bridges of its own choosing")

    def attach_portref(self, port: PortRef, bridge: str, ofport: Optional[int] = None,
                       dpdk_index: int = 0) -> int:
        """Attach ``port`` to ``bridge`` (at OpenFlow port ``ofport``); returns its port number.
        Unsupported when the port's end is one the switch cannot open."""
        raise Unsupported(f"{self.name} attaches ports only to its own bridges (add_port)")

    def ofport(self, index_or_name: Union[int, str]) -> int:
        """The OpenFlow port number of a port (its :meth:`add_port` index or its name)."""
        raise Unsupported(f"{self.name} has no OpenFlow port numbers")

    def add_patch(self, bridge: str, peer: str, ofport: int) -> int:
        """A patch port ``patch-<peer>`` on ``bridge`` joined to ``patch-<bridge>`` on ``peer``
        (each bridge gets one); returns its port number."""
        raise Unsupported(f"{self.name} has no patch ports")

    def add_tunnel(self, bridge: str, name: str, ofport: int, remote_ip: str, local_ip: str,
                   key: int, kind: str = "vxlan") -> int:
        """A tunnel port (``kind`` vxlan, geneve, gre) on ``bridge``; returns its port number."""
        raise Unsupported(f"{self.name} has no {kind} tunnel ports")

    def tunnel_endpoint(self, bridge: str, local_ip: str, prefix: int, remote_ip: str,
                        remote_mac: str) -> None:
        """Make ``bridge`` a tunnel endpoint: ``local_ip`` on it, a route and ARP entry for the
        remote endpoint."""
        raise Unsupported(f"{self.name} terminates no tunnels")

    def add_bond(self, bridge: str, name: str, members: Sequence[tuple[PortRef, int, int]], mode: str,
                 lacp: str = "off", other_config: Optional[dict[str, str]] = None) -> list[int]:
        """A bond of ``members`` [(PortRef, ofport, index)] with ``mode`` and ``lacp``; the
        bridge's own port stops flooding; returns the members' port numbers."""
        raise Unsupported(f"{self.name} builds no bonds")

    def wait_bond(self, name: str, timeout_s: float = 20.0, active: Optional[str] = None) -> object:
        """Until every member of bond ``name`` is enabled (and ``active`` is the active one)."""
        raise Unsupported(f"{self.name} builds no bonds")

    def bond_hash(self, mac: str, vlan: int, basis: int) -> int:
        """The hash bucket a balance-slb bond puts source ``mac`` with ``vlan`` in."""
        raise Unsupported(f"{self.name} builds no bonds")

    def vhost_socket(self, name: str) -> Path:
        """Where the vhost-user server socket of the switch's port ``name`` goes (a VNF listens
        there, the switch connects as client)."""
        raise Unsupported(f"{self.name} has no vhost-user ports")

    def defer_vhost_connect(self, names: Sequence[str]) -> None:
        """Add the vhost-user client ports ``names`` without their socket; :meth:`connect_while`
        connects each as its server listens.  A switch that connects at once ignores it."""

    def connect_while(self, start: Callable[[], None], names: Optional[Sequence[str]] = None) -> None:
        """Run ``start()`` (a vhost-user server starting: the generator, a VNF) while connecting
        the deferred ports ``names`` (None: all) as their sockets appear.  Raises what ``start``
        or a connect raised.  Default: ``start()``."""
        start()

    def ports_down(self, names: Sequence[str]) -> list[str]:
        """Those of the ports ``names`` whose link is not up (now; the caller polls)."""
        return []

    def program(self, flows: Optional[Sequence[Union[Flow, str]]] = None, bridge: Optional[str] = None,
                replace: bool = True, method: str = "bundle") -> Optional[Path]:
        """Install ``flows`` on ``bridge`` (None: the first): :class:`Flow` entries (port indices)
        or rules in the switch's own syntax (OpenFlow for OVS); None cross-connects port pairs.
        ``replace`` removes the bridge's rules first and then requires the switch to count
        exactly these.  Returns the rule file when there is one.  Unsupported for a rule the
        switch cannot express; a rule rejected or miscounted raises the switch's error."""
        ...

    def set_forwarding(self, source: ForwardingSource) -> None:
        """The topology's rule set for the current spec, which an in-place rules change
        installs.  A switch that changes no rules in place ignores it."""

    def tx_queues(self) -> int:
        """TX queues it sends on per port (a memif peer polls as many rings)."""

    def enable_tso(self) -> None:
        """Before :meth:`start`: offer TSO and checksum offload to vhost-user guests."""
        raise Unsupported(f"{self.name} offers vhost-user guests no TSO")

    def counters(self) -> dict[str, object]:
        """``{"ports": {name: {rx_packets, tx_packets, rx_dropped, tx_dropped, ...}}, ...}``."""
        ...

    def telemetry(self) -> dict[str, object]:
        """One reading of :mod:`nfvperf.tg.telemetry` (what it lacks reads "not available")."""
        ...

    def log_tail(self, what: str = "", lines: int = 8) -> str:
        """The last lines of the switch's log, for error messages ('' without one)."""
        return ""
