"""The iperf3 measurer's standalone topology (seed 001's TSO and multi-queue knobs): client and
server namespaces joined by one veth pair, or by two veth pairs and a Linux bridge in a third
namespace, built with :mod:`nfvperf.host.netns`, registered with a run's
:class:`~nfvperf.host.run.ResourceTracker` and named by its tag, so ``nfvperf cleanup`` finds
what a killed run left."""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from nfvperf.host import netns as N
from nfvperf.host.proc import LOCAL, CommandError
from nfvperf.host.run import ResourceTracker, RunContext, normalize_tag
from nfvperf.trial import MeasurerError


def _run(argv: Sequence[str], check: bool = True, timeout: float = 20.0,
         netns: Optional[str] = None, host: Any = None) -> subprocess.CompletedProcess:
    """Run a short helper command (ethtool) from an argument list, in ``netns`` on ``host``."""
    try:
        return (host or LOCAL).run(argv, netns=netns, check=check, timeout=timeout)
    except CommandError as e:
        raise MeasurerError(str(e)) from None


@dataclass
class VethTopology:
    """Client and server namespaces joined by a veth pair (``bridge=False``) or by two veth
    pairs to a Linux bridge in a third namespace (``bridge=True``, resembles a switch).

    ``tso``/``gso``/``gro``: None leaves the kernel default (on for veth), True/False sets it on
    every veth end.  ``queues`` sets numtxqueues/numrxqueues of every veth end (multi-queue).
    Addresses: client ``<net>.1``, server ``<net>.2`` in a /24 of 198.18.0.0/15.

    Names come from the run tag (``run.tag``; or ``tag``, normalised to ``nfv`` + 6 hex; or a
    new one): namespaces ``<tag>-tcpc``, ``<tag>-tcps``, ``<tag>-tcpb``, links ``<tag>c0``,
    ``<tag>s0``, ``<tag>cb``, ``<tag>sb``, bridge ``<tag>br``.  Everything is registered with
    ``tracker`` (a run's tracker; without one the topology has its own, which claims the tag as a
    live run) and :meth:`delete` releases it through that tracker.
    """

    tag: str = ""
    bridge: bool = False
    tso: Optional[bool] = None
    gso: Optional[bool] = None
    gro: Optional[bool] = None
    queues: int = 1
    mtu: int = 1500
    net: str = "198.18.0"
    up: bool = False
    offload_state: dict[str, dict[str, str]] = field(default_factory=dict)
    run: Optional[RunContext] = field(default=None, repr=False)
    tracker: Optional[ResourceTracker] = field(default=None, repr=False)
    host: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.queues < 1:
            raise ValueError("queues must be >= 1")
        self._own_run = self.run is None
        if self.run is None:
            self.run = RunContext(tag=self.tag or None)
        elif self.tag and normalize_tag(self.tag) != self.run.tag:
            raise ValueError(f"tag {self.tag!r} is not the run's tag {self.run.tag!r}")
        self.tag = self.run.tag
        self.host = self.host or LOCAL
        run = self.run
        self.client_ns = run.netns("tcpc")
        self.server_ns = run.netns("tcps")
        self.bridge_ns = run.netns("tcpb") if self.bridge else None
        self.client_if = run.ifname("c0")
        self.server_if = run.ifname("s0")
        self.bridge_if = run.ifname("br")
        self.bridge_ports = (run.ifname("cb"), run.ifname("sb"))
        self.client_ip = f"{self.net}.1"
        self.server_ip = f"{self.net}.2"
        self._tracker: Optional[ResourceTracker] = None

    # names of all namespaces this topology owns
    @property
    def namespaces(self) -> list[str]:
        return [n for n in (self.client_ns, self.server_ns, self.bridge_ns) if n]

    def _ifaces(self) -> list[tuple[str, str]]:
        out = [(self.client_ns, self.client_if), (self.server_ns, self.server_if)]
        if self.bridge_ns:
            out += [(self.bridge_ns, p) for p in self.bridge_ports]
        return out

    def _resources(self) -> list[tuple[str, str]]:
        """(kind, name) of what create() registers, oldest first."""
        out = [("netns", ns) for ns in self.namespaces]
        out += [("veth", self.client_if), ("veth", self.server_if)]
        if self.bridge_ns:
            out.append(("bridge", self.bridge_if))
        return out

    def create(self) -> "VethTopology":
        if self.up:
            return self
        # without a tracker its own, which claims the tag as a live run only when the run is ours too
        tr = self.tracker if self.tracker is not None else ResourceTracker(self.run if self._own_run else None)
        self._tracker = tr
        veth: dict[str, Any] = dict(mtu=self.mtu, up=True, ipv6=True, offloads_off=False, tracker=tr,
                                    queues=self.queues)
        try:
            for ns in self.namespaces:
                N.create_netns(ns, tr)
            if self.bridge_ns:
                cb, sb = self.bridge_ports
                N.create_veth(self.client_if, cb, self.client_ns, self.bridge_ns, **veth)
                N.create_veth(self.server_if, sb, self.server_ns, self.bridge_ns, **veth)
                N.create_bridge(self.bridge_if, self.bridge_ns, ports=(cb, sb), mtu=self.mtu,
                                tracker=tr)
            else:
                N.create_veth(self.client_if, self.server_if, self.client_ns, self.server_ns,
                              **veth)
            for ns, ifc, ip in ((self.client_ns, self.client_if, self.client_ip),
                                (self.server_ns, self.server_if, self.server_ip)):
                N.add_address(ifc, f"{ip}/24", ns)
            self._set_offloads()
            self.up = True
            return self
        except N.NetnsError as e:
            self.delete()
            raise MeasurerError(f"TCP topology {self.tag}: {e}") from e
        except BaseException:
            self.delete()
            raise

    def _set_offloads(self) -> None:
        feats = [(k, v) for k, v in (("tso", self.tso), ("gso", self.gso), ("gro", self.gro)) if v is not None]
        if feats and not shutil.which("ethtool"):
            raise MeasurerError("ethtool not found (apt-get install ethtool): needed for tso/gso/gro options")
        for ns, ifc in self._ifaces():
            if feats:
                _run(["ethtool", "-K", ifc, *(w for k, v in feats for w in (k, "on" if v else "off"))],
                     netns=ns, host=self.host)
            if shutil.which("ethtool"):
                cp = _run(["ethtool", "-k", ifc], check=False, netns=ns, host=self.host)
                want = {"tcp-segmentation-offload", "generic-segmentation-offload",
                        "generic-receive-offload"}
                pairs = (line.partition(":") for line in cp.stdout.splitlines())
                self.offload_state[f"{ns}/{ifc}"] = {k.strip(): v.strip() for k, _, v in pairs
                                                     if k.strip() in want}

    def delete(self) -> None:
        """Release what create() made through the tracker: deleting a namespace kills what still
        runs in it and takes its veths and bridge along.  Idempotent."""
        tr = self._tracker
        self._tracker = None
        self.up = False
        if tr is None:
            return
        if tr is not self.tracker:
            tr.release_all()                      # our own tracker: everything in it is ours
            errors = tr.errors
        else:
            n = len(tr.errors)
            for kind, name in reversed(self._resources()):
                tr.release(kind, name)
            errors = tr.errors[n:]
        if errors:
            raise MeasurerError(f"TCP topology {self.tag}: " + "; ".join(errors))

    def describe(self) -> dict[str, Any]:
        return {"kind": "veth+linux-bridge" if self.bridge else "direct-veth",
                "client_ns": self.client_ns, "server_ns": self.server_ns,
                "bridge_ns": self.bridge_ns, "client_ip": self.client_ip,
                "server_ip": self.server_ip, "queues": self.queues, "mtu": self.mtu,
                "tso": self.tso, "gso": self.gso, "gro": self.gro,
                "offloads": self.offload_state}

    def __hash__(self) -> int:
        return id(self)

    def __enter__(self) -> "VethTopology":
        return self.create()

    def __exit__(self, *exc: object) -> None:
        self.delete()
