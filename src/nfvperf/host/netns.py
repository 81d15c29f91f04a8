"""Network namespaces and veth pairs (pyroute2), the emulated physical ports of a topology.

An emulated PHY port is one veth pair: the generator's end (``<tag>p<i>``) and the DUT's end
(``<tag>d<i>``), usually each in its own namespace (``<tag>-tg``, ``<tag>-dut``) so no host traffic
reaches them.  Links get IPv6 disabled (no router/neighbour solicitations on test ports), are set up,
and may get checksum/segmentation offloads turned off (a kernel-built frame on a veth keeps a partial
checksum that an AF_PACKET / AF_XDP reader would otherwise forward as is).

Nothing here builds a shell string: commands that must run inside a namespace go through
``ip netns exec <ns> <argv...>`` as an argument list.
"""
from __future__ import annotations

import contextlib
import logging
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

from pyroute2 import IPRoute, NetNS, netns as _netns
from pyroute2.ethtool import Ethtool

from .run import ResourceTracker
import ctypes
import os
import signal
import socket
import threading

log = logging.getLogger(__name__)

NETNS_DIR = Path("/var/run/netns")
CLONE_NEWNET = 0x40000000


class NetnsError(RuntimeError):
    pass


# --------------------------------------------------------------------------------------- helpers
def netns_argv(ns: Optional[str], argv: Sequence[str]) -> list[str]:
    """``argv`` prefixed so it runs inside namespace ``ns`` (unchanged when ns is None)."""
    argv = [str(a) for a in argv]
    return ["ip", "netns", "exec", ns, *argv] if ns else argv


def run_in_netns(ns: Optional[str], argv: Sequence[str], check: bool = True, timeout: float = 30,
                 input: Optional[str] = None) -> subprocess.CompletedProcess:
    cmd = netns_argv(ns, argv)
    cp = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input)
    if check and cp.returncode != 0:
        raise NetnsError(f"{' '.join(cmd)} failed ({cp.returncode}): {cp.stderr.strip() or cp.stdout.strip()}")
    return cp


def connect_in_netns(ns: str, address: str, port: int, timeout: float) -> socket.socket:
    """A TCP connection to ``address:port`` made inside namespace ``ns``: a thread of this process
    enters it (setns), connects and ends; the socket stays in ``ns``, the process where it is.
    Raises OSError."""
    out: dict[str, Any] = {}

    def connect() -> None:
        try:
            fd = os.open(NETNS_DIR / ns, os.O_RDONLY)
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    e = ctypes.get_errno()
                    raise OSError(e, f"setns {ns}: {os.strerror(e)}")
            finally:
                os.close(fd)
            out["sock"] = socket.create_connection((address, port), timeout=timeout)
        except OSError as e:
            out["error"] = e

    t = threading.Thread(target=connect, name=f"connect-{ns}", daemon=True)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["sock"]


@contextlib.contextmanager
def ipr(ns: Optional[str] = None) -> Iterator[IPRoute]:
    """An IPRoute for the root namespace or a NetNS for ``ns``, closed afterwards."""
    h = NetNS(ns) if ns else IPRoute()
    try:
        yield h
    finally:
        h.close()


def _index(h, ifname: str) -> int:
    idx = h.link_lookup(ifname=ifname)
    if not idx:
        raise NetnsError(f"no link {ifname!r}")
    return idx[0]


# ------------------------------------------------------------------------------------ namespaces
def list_netns() -> list[str]:
    try:
        return sorted(_netns.listnetns())
    except FileNotFoundError:
        return []


def netns_exists(name: str) -> bool:
    return (NETNS_DIR / name).exists()


def netns_pids(name: str) -> list[int]:
    cp = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True)
    return [int(p) for p in cp.stdout.split() if p.isdigit()]


def create_netns(name: str, tracker: Optional[ResourceTracker] = None) -> str:
    """Create namespace ``name`` with ``lo`` up; registered with ``tracker`` for deletion."""
    if netns_exists(name):
        raise NetnsError(f"netns {name} already exists (leftover of a killed run? try `nfvperf cleanup`)")
    _netns.create(name)
    if tracker is not None:
        tracker.add("netns", name, lambda: delete_netns(name))
    with ipr(name) as h:
        h.link("set", index=_index(h, "lo"), state="up")
    return name


def delete_netns(name: str, kill: bool = True) -> None:
    """Delete a namespace (its veth ends go with it, taking their peers along)."""
    if not netns_exists(name):
        return
    if kill:
        for pid in netns_pids(name):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    # Delete the links explicitly first: a veth whose namespace is gone is freed asynchronously,
    # and the peer in another namespace would linger for a moment.
    with contextlib.suppress(Exception):
        with ipr(name) as h:
            for link in h.get_links():
                if link.get_attr("IFLA_LINKINFO") is not None and link.get_attr("IFLA_IFNAME") != "lo":
                    with contextlib.suppress(Exception):
                        h.link("del", index=link["index"])
    _netns.remove(name)


# ------------------------------------------------------------------------------------------ links
def list_links(ns: Optional[str] = None) -> list[str]:
    with ipr(ns) as h:
        return sorted(l.get_attr("IFLA_IFNAME") for l in h.get_links())


def link_exists(ifname: str, ns: Optional[str] = None) -> bool:
    if ns and not netns_exists(ns):
        return False
    with ipr(ns) as h:
        return bool(h.link_lookup(ifname=ifname))


def delete_link(ifname: str, ns: Optional[str] = None) -> None:
    if ns and not netns_exists(ns):
        return
    with ipr(ns) as h:
        idx = h.link_lookup(ifname=ifname)
        if idx:
            h.link("del", index=idx[0])


def set_link(ifname: str, ns: Optional[str] = None, **attrs) -> None:
    """``set_link("x", ns, state="up", mtu=9000, address="02:..", master=<index>)``."""
    with ipr(ns) as h:
        h.link("set", index=_index(h, ifname), **attrs)


def link_mac(ifname: str, ns: Optional[str] = None) -> str:
    with ipr(ns) as h:
        return h.get_links(_index(h, ifname))[0].get_attr("IFLA_ADDRESS")


def add_address(ifname: str, cidr: str, ns: Optional[str] = None) -> None:
    addr, plen = cidr.split("/")
    with ipr(ns) as h:
        h.addr("add", index=_index(h, ifname), address=addr, prefixlen=int(plen))


STAT_KEYS = ("rx_packets", "tx_packets", "rx_bytes", "tx_bytes", "rx_dropped", "tx_dropped",
             "rx_errors", "tx_errors", "multicast")


def link_stats(ifname: str, ns: Optional[str] = None) -> dict[str, int]:
    """Kernel counters of a link (IFLA_STATS64)."""
    with ipr(ns) as h:
        link = h.get_links(_index(h, ifname))[0]
    st = link.get_attr("IFLA_STATS64") or link.get_attr("IFLA_STATS") or {}
    return {k: int(st.get(k, 0)) for k in STAT_KEYS}


def disable_ipv6(ifname: str, ns: Optional[str] = None) -> None:
    if ns is None:
        p = Path("/proc/sys/net/ipv6/conf") / ifname / "disable_ipv6"
        if p.exists():
            p.write_text("1")
        return
    run_in_netns(ns, ["sysctl", "-q", "-w", f"net.ipv6.conf.{ifname}.disable_ipv6=1"], check=False)


OFFLOAD_FEATURES = ("rx", "tx", "sg", "tso", "gso", "gro")


def disable_offloads(ifname: str, ns: Optional[str] = None) -> bool:
    """Turn off checksum and segmentation offloads (ethtool -K ... off).  Returns False when
    neither ethtool nor pyroute2's ethtool could do it (a warning, not an error)."""
    if shutil.which("ethtool"):
        cp = run_in_netns(ns, ["ethtool", "-K", ifname, *(w for f in OFFLOAD_FEATURES for w in (f, "off"))],
                          check=False)
        if cp.returncode == 0:
            return True
        log.debug("ethtool -K %s: %s", ifname, cp.stderr.strip())
    if ns is None:
        try:
            et = Ethtool()
            try:
                feats = et.get_features(ifname)
                for name in ("tx-checksum-ip-generic", "rx-checksum", "tx-scatter-gather",
                             "tx-tcp-segmentation", "tx-generic-segmentation",
                             "rx-gro"):
                    if name in feats.features:
                        feats.features[name].enable = False
                et.set_features(ifname, feats)
                return True
            finally:
                et.close()
        except Exception as e:  # noqa: BLE001
            log.debug("pyroute2 ethtool on %s: %s", ifname, e)
    return False


# ------------------------------------------------------------------------------------------ veth
@dataclass
class VethPair:
    """One emulated PHY port: ``a`` (generator side) in ``ns_a``, ``b`` (DUT side) in ``ns_b``."""

    a: str
    b: str
    ns_a: Optional[str] = None
    ns_b: Optional[str] = None
    mtu: int = 1500
    offloads_off: bool = False

    def stats(self) -> dict[str, dict[str, int]]:
        return {self.a: link_stats(self.a, self.ns_a), self.b: link_stats(self.b, self.ns_b)}

    def delete(self) -> None:
        # deleting one end deletes the pair
        for name, ns in ((self.a, self.ns_a), (self.b, self.ns_b)):
            with contextlib.suppress(Exception):
                if link_exists(name, ns):
                    delete_link(name, ns)
                    return


def create_veth(a: str, b: str, ns_a: Optional[str] = None, ns_b: Optional[str] = None,
                mtu: int = 1500, up: bool = True, ipv6: bool = False, offloads_off: bool = True,
                tracker: Optional[ResourceTracker] = None, mac_a: Optional[str] = None,
                mac_b: Optional[str] = None, queues: int = 1) -> VethPair:
    """Create veth ``a``<->``b`` in the root namespace, tune both ends, move them into ``ns_a`` /
    ``ns_b`` (None = stay in the root namespace) and set them up.  ``queues``: TX and RX queues
    of each end (multi-queue veth)."""
    if queues < 1:
        raise NetnsError("queues must be >= 1")
    for n in (a, b):
        if len(n) > 15:
            raise NetnsError(f"interface name {n!r} longer than 15 characters")
    pair = VethPair(a, b, ns_a, ns_b, mtu, offloads_off)
    with IPRoute() as h:
        if h.link_lookup(ifname=a) or h.link_lookup(ifname=b):
            raise NetnsError(f"link {a} or {b} already exists (leftover? try `nfvperf cleanup`)")
        q = {} if queues == 1 else {"num_tx_queues": queues, "num_rx_queues": queues}
        h.link("add", ifname=a, kind="veth", peer={"ifname": b, **q}, **q)
    if tracker is not None:
        tracker.add("veth", a, pair.delete)
    try:
        for name, mac in ((a, mac_a), (b, mac_b)):
            set_link(name, None, mtu=mtu, **({"address": mac} if mac else {}))
            if offloads_off and not disable_offloads(name):
                log.warning("could not disable offloads on %s (no ethtool)", name)
        with IPRoute() as h:
            for name, ns in ((a, ns_a), (b, ns_b)):
                if ns:
                    h.link("set", index=_index(h, name), net_ns_fd=ns)
        for name, ns in ((a, ns_a), (b, ns_b)):
            if not ipv6:
                disable_ipv6(name, ns)
            if up:
                set_link(name, ns, state="up")
    except Exception:
        if tracker is None:
            pair.delete()
        raise
    return pair


# ---------------------------------------------------------------------------------------- bridge
def create_bridge(name: str, ns: Optional[str] = None, ports: Sequence[str] = (), mtu: int = 1500,
                  tracker: Optional[ResourceTracker] = None) -> str:
    """A Linux bridge ``name`` in ``ns`` (STP off, no forward delay) with ``ports`` (links in the
    same namespace) enslaved; all set to ``mtu`` and up.  Registered with ``tracker``."""
    if len(name) > 15:
        raise NetnsError(f"interface name {name!r} longer than 15 characters")
    with ipr(ns) as h:
        if h.link_lookup(ifname=name):
            raise NetnsError(f"link {name} already exists (leftover? try `nfvperf cleanup`)")
        h.link("add", ifname=name, kind="bridge", br_stp_state=0, br_forward_delay=0)
    if tracker is not None:
        tracker.add("bridge", name, lambda: delete_link(name, ns))
    with ipr(ns) as h:
        idx = _index(h, name)
        for port in ports:
            h.link("set", index=_index(h, port), master=idx, mtu=mtu, state="up")
        h.link("set", index=idx, mtu=mtu, state="up")
    return name
