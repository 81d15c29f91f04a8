"""Bridges and ports of the OVS adapters: PortRefs as Interfaces, bonds, vhost-user client ports
connected as their servers listen, patch and tunnel ports, VTEP underlays."""
from __future__ import annotations

import contextlib
import re
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

from nfvperf.dut.base import PortRef
from nfvperf.dut.ovs_ctl import MTU_KINDS, OvsCtl, OvsError, OvsPort
from nfvperf.dut.ovs_spec import BOND_MODES
from nfvperf.host.netns import add_address, set_link
from nfvperf.trial import Unsupported


class OvsPorts(OvsCtl):
    """Bridges, ports, bonds and tunnels (the :class:`~nfvperf.dut.vswitch.VSwitch` port operations)."""

    def add_bridge(self, name: Optional[str] = None, hwaddr: Optional[str] = None,
                   mtu: Optional[int] = None) -> str:
        """A bridge of ``datapath_type`` (netdev: userspace), fail-mode secure: it forwards only what ``program`` says.
        ``mtu``: ``mtu_request`` of its internal port (a tap in OVS's namespace, e.g. a VTEP's)."""
        name = name or f"{self.tag}br{len(self.bridges)}"
        if len(name) > 15:
            raise OvsError(f"bridge name {name!r} longer than 15 characters")
        args = ["--may-exist", "add-br", name, "--", "set", "Bridge", name,
                f"datapath_type={self.datapath_type}",
                "fail_mode=secure", "other_config:disable-in-band=true"]
        if hwaddr:
            args.append(f"other_config:hwaddr={hwaddr}")
        if mtu is not None:
            args += ["--", "set", "Interface", name, f"mtu_request={int(mtu)}"]
        self.vsctl(*args)
        self.bridges.append(name)
        return name

    def _attach_port(self, port: PortRef, index: Optional[int] = None) -> None:
        """Attach a :class:`PortRef` to the first bridge as OpenFlow port index + 1."""
        index = len(self.ports) if index is None else index
        self.attach_portref(port, self.bridges[0], ofport=index + 1, dpdk_index=index)

    def attach_portref(self, port: PortRef, bridge: str, ofport: Optional[int] = None,
                       dpdk_index: int = 0) -> int:
        """Add the port a :class:`PortRef` describes to ``bridge`` with its MTU (``mtu_request``):
        ``veth``/``tap``/``pci``/``memif`` as a ``dpdk`` port (af_packet/af_xdp/memif vdev or PCI
        address),
        ``vhost-backend`` with ``client`` (a vhost-user server socket, e.g. the generator's
        virtio-user) or ``vhost-user`` (a VNF's server socket) as ``dpdkvhostuserclient``.
        Returns the OpenFlow port number."""
        kind, kw = self._portref_iface(port, dpdk_index)
        return self.add_ovs_port(bridge, port.name, kind, devargs=kw.get("devargs"), sock=kw.get("sock"),
                                 ofport=ofport, mtu=port.mtu)

    def _portref_iface(self, port: PortRef, dpdk_index: int) -> tuple[str, dict[str, str]]:
        """(Interface type, add_ovs_port keywords) of a :class:`PortRef` (see attach_portref)."""
        n_rxq = int(self.spec.n_rxq or 1) if self.spec is not None else 1
        if port.end.kernel and port.netns != self.netns and not self._attached:
            raise OvsError(f"port {port.name} is in netns {port.netns}, OVS in {self.netns}")
        try:
            kind, kw = port.end.ovs_interface(port, dpdk_index, n_rxq)
        except Unsupported as e:
            raise OvsError(str(e)) from None
        if self._attached and "devargs" in kw:  # a shared OVS: vdev names must not clash with its other ports
            kw["devargs"] = re.sub(r"^(net_af_packet|net_af_xdp|net_memif)(\d+)", rf"\g<1>{self.tag}\g<2>",
                                   kw["devargs"])
        return kind, kw

    def add_bond(self, bridge: str, name: str, members: Sequence[tuple[PortRef, int, int]], mode: str,
                 lacp: str = "off", other_config: Optional[dict[str, str]] = None) -> list[int]:
        """An OVS bond ``name`` on ``bridge`` of ``members`` [(PortRef, ofport, dpdk index), ...]
        (each an Interface as :meth:`attach_portref` makes it, at that OpenFlow port number), with
        ``bond_mode`` ``mode``, ``lacp`` and the Port's ``other_config`` (bond-primary,
        lacp-fallback-ab, bond-rebalance-interval ...).  One ovs-vsctl transaction.  Returns the
        members' OpenFlow port numbers (each member keeps its own: OVS's per-member counters).
        The bridge's own (LOCAL) port is taken out of flooding, so a frame to an address not
        learned yet goes to the other bond only."""
        if len(members) < 2:
            raise OvsError(f"bond {name}: a bond needs two or more members, got {len(members)}")
        if mode not in BOND_MODES:
            raise OvsError(f"bond {name}: bond_mode {mode!r} is not one of {', '.join(BOND_MODES)}")
        names = [p.name for p, _, _ in members]
        args = ["--may-exist", "add-bond", bridge, name, *names]
        ifaces = []
        for port, ofport, index in members:
            kind, kw = self._portref_iface(port, index)
            opts = self._iface_options(kind, kw.get("devargs"), kw.get("sock"), None)
            args += self._iface_args(port.name, kind, self._set_now(port.name, opts), ofport, port.mtu)
            ifaces.append(OvsPort(port.name, kind, bridge, options=opts, mtu=port.mtu))
        args += ["--", "set", "Port", name, f"bond_mode={mode}", f"lacp={lacp}"]
        args += [f'other_config:{k}="{v}"' for k, v in (other_config or {}).items()]
        self.vsctl(*args)
        out = [self._added(iface) for iface in ifaces]
        self.bonds[name] = {"bridge": bridge, "members": names, "mode": mode, "lacp": lacp,
                            "other_config": dict(other_config or {})}
        self.ofctl("mod-port", bridge, bridge, "no-flood")
        return out

    def bond_hash(self, mac: str, vlan: int, basis: int) -> int:
        """``ovs-appctl bond/hash <mac> <vlan> <basis>``: the bucket of a balance-slb bond."""
        return int(self.appctl("bond/hash", mac, str(vlan), str(basis)).strip())

    def bond_show(self, name: str) -> dict[str, object]:
        """``ovs-appctl bond/show <bond>`` parsed (:func:`parse_bond_show`)."""
        return parse_bond_show(self.appctl("bond/show", name))

    def wait_bond(self, name: str, timeout_s: float = 20.0,
                  active: Optional[str] = None) -> dict[str, object]:
        """Wait until every member of bond ``name`` is enabled (its link is up: a vhost-user
        member once the generator connected) and, if given, ``active`` is the active member;
        returns :meth:`bond_show`."""
        want = list(self.bonds.get(name, {}).get("members") or [])

        def probe() -> tuple[bool, dict[str, object]]:
            st = self.bond_show(name)
            members = st.get("members")
            members = members if isinstance(members, dict) else {}
            return all(members.get(m, {}).get("enabled") for m in want) and \
                (active is None or st.get("active_member") == active), st
        return self._settle(probe, timeout_s, lambda st: f"bond {name} did not settle in {timeout_s:.0f} s "
                            f"(want members {want} enabled{f', {active} active' if active else ''}): {st}")

    def ofport(self, index_or_name: Union[int, str]) -> int:
        """OpenFlow port number of a port (add_port index or name)."""
        if isinstance(index_or_name, int):
            index_or_name = self.ports[index_or_name].name
        return self.ovs_ports[index_or_name].ofport

    def add_ovs_port(self, bridge: str, name: str, kind: str = "dpdk", *,
                     devargs: Optional[str] = None, sock: Optional[str] = None,
                     ofport: Optional[int] = None, options: Optional[dict[str, object]] = None,
                     mtu: Optional[int] = None) -> int:
        """Add a port to ``bridge``; return its OpenFlow port number.

        ``mtu``: the Interface's ``mtu_request`` (OVS sizes the port's mempool for it; a vhost
        port's MTU is what OVS accepts from and sends to the virtio side).  Ignored by tunnel
        and patch ports, which have no MTU of their own in the userspace datapath.

        kind ``dpdk``: ``devargs`` as from :meth:`PortRef.dpdk_devargs` (af_packet / af_xdp vdev
        on a veth, or a PCI address), with the spec's n_rxq / descriptor counts.  kind
        ``dpdkvhostuserclient``: OVS connects to the vhost-user server socket ``sock`` (the VNF's
        virtio-user, ``server=1``).  kind ``vxlan``: ``options`` give ``remote_ip``, ``key``,
        ``local_ip``...
        """
        opts = self._iface_options(kind, devargs, sock, options)
        args = ["--may-exist", "add-port", bridge, name,
                *self._iface_args(name, kind, self._set_now(name, opts), ofport, mtu)]
        self.vsctl(*args)
        return self._added(OvsPort(name, kind, bridge, options=opts, mtu=mtu))

    def _added(self, port: OvsPort) -> int:
        """Record ``port`` (just added; its ``mtu`` kept only for kinds with one) with its OpenFlow
        port number, which it returns."""
        if port.kind not in MTU_KINDS:
            port.mtu = None
        port.ofport = self._ofport(port.name)
        self.ovs_ports[port.name] = port
        return port.ofport

    def defer_vhost_connect(self, names: Sequence[str]) -> None:
        """Add the dpdkvhostuserclient ports ``names`` without their socket path, to be given by
        :meth:`connect_vhost` once their server listens.

        A vhost-user server that is a DPDK virtio-user port (``server=1``: tgen) opens its sockets
        one at a time, each blocking until its client connects; OVS retries a socket that was not
        there when the port was added only once a second (DPDK's vhost reconnect thread), so a
        generator with N such ports took about N seconds to start.  With the path given as each
        socket appears, OVS connects at once.  Only the first start defers: a restart adds the
        ports with their paths (the generator's sockets are there by then).  The same for a
        VNF's sockets (testpmd's virtio-user, ``server=1``)."""
        self._defer_vhost |= set(names)

    def _set_now(self, name: str, opts: dict[str, str]) -> dict[str, str]:
        """The Interface options to set when the port is added: without ``vhost-server-path``
        for a deferred port (kept in :attr:`deferred_vhost`)."""
        if name not in self._defer_vhost or "vhost-server-path" not in opts:
            return opts
        self._defer_vhost.discard(name)
        self.deferred_vhost[name] = opts["vhost-server-path"]
        return {k: v for k, v in opts.items() if k != "vhost-server-path"}

    def connect_vhost(self, name: str) -> None:
        """Give a deferred port its socket path: OVS registers the vhost-user client and
        connects to the socket at once."""
        sock = self.deferred_vhost.pop(name)
        self.vsctl("set", "Interface", name, f'options:vhost-server-path="{sock}"')

    def connect_while(self, start: Callable[[], None], names: Optional[Sequence[str]] = None) -> None:
        """Run ``start()`` (a vhost-user server starting: tgen, a VNF) while giving OVS the path
        of each deferred port of ``names`` (None: all) as its socket appears; what is still
        deferred when ``start()`` ends gets its path then."""
        pending = {n: s for n, s in self.deferred_vhost.items() if names is None or n in names}
        if not pending:
            start()
            return
        done = threading.Event()
        errors: list[BaseException] = []

        def connect() -> None:
            try:
                while pending and not done.is_set():
                    for name, sock in list(pending.items()):
                        if self.host.exists(sock):
                            self.connect_vhost(name)
                            del pending[name]
                    done.wait(0.01)
            except BaseException as e:  # noqa: BLE001 - raised in the starting thread
                errors.append(e)

        t = threading.Thread(target=connect, name=f"vhost-connect-{self.run.tag}", daemon=True)
        t.start()
        try:
            start()
        finally:
            done.set()
            t.join(30.0)
            for name in list(pending):      # the server failed or the thread stopped: give the rest
                if name in self.deferred_vhost:
                    with contextlib.suppress(Exception):
                        self.connect_vhost(name)
        if errors:
            raise errors[0]

    def vhost_socket(self, name: str) -> Path:
        """``vhu-<name>.sock`` in OVS's directory (vhost-sock-dir)."""
        return Path(self.vhost_dir) / f"vhu-{name}.sock"

    def ports_down(self, names: Sequence[str]) -> list[str]:
        """The Interfaces of ``names`` whose ``link_state`` is not up."""
        return [n for n in names if self.vsctl("get", "Interface", n, "link_state", wait=False).strip() != "up"]

    def add_patch(self, bridge: str, peer: str, ofport: int) -> int:
        return self.add_ovs_port(bridge, f"patch-{peer}", "patch", ofport=ofport,
                                 options={"peer": f"patch-{bridge}"})

    def add_tunnel(self, bridge: str, name: str, ofport: int, remote_ip: str, local_ip: str,
                   key: int, kind: str = "vxlan") -> int:
        return self.add_ovs_port(bridge, name, kind, ofport=ofport,
                                 options={"remote_ip": remote_ip, "local_ip": local_ip, "key": key})

    def _iface_options(self, kind: str, devargs: Optional[str], sock: Optional[str],
                       options: Optional[dict[str, object]]) -> dict[str, str]:
        """The Interface options of a port of ``kind`` (see :meth:`add_ovs_port`)."""
        opts: dict[str, str] = {k: str(v) for k, v in (options or {}).items()}
        if kind == "dpdk":
            if not devargs:
                raise OvsError("a dpdk port needs devargs=")
            opts.setdefault("dpdk-devargs", devargs)
            if self.spec is not None:
                opts.setdefault("n_rxq", str(self.spec.n_rxq))
                opts.setdefault("n_rxq_desc", str(self.spec.n_rxq_desc))
                opts.setdefault("n_txq_desc", str(self.spec.n_txq_desc))
        elif kind == "dpdkvhostuserclient":
            if not sock:
                raise OvsError("a dpdkvhostuserclient port needs sock=")
            opts.setdefault("vhost-server-path", str(sock))
        elif kind not in ("vxlan", "internal", "patch", "geneve", "gre"):
            raise OvsError(f"unknown port kind {kind!r}")
        return opts

    @staticmethod
    def _iface_args(name: str, kind: str, opts: dict[str, str], ofport: Optional[int],
                    mtu: Optional[int]) -> list[str]:
        """``-- set Interface <name> type=... options:...`` for an ovs-vsctl transaction."""
        args = ["--", "set", "Interface", name, f"type={kind}", *(f'options:{k}="{v}"' for k, v in opts.items())]
        if ofport is not None:
            args.append(f"ofport_request={int(ofport)}")
        if mtu is not None and kind in MTU_KINDS:
            args.append(f"mtu_request={int(mtu)}")
        return args

    def _ofport(self, name: str, timeout: float = 10.0) -> int:
        deadline = time.monotonic() + timeout
        while True:
            raw = self.vsctl("get", "Interface", name, "ofport", wait=False).strip()
            of = int(raw) if raw.lstrip("-").isdigit() else -1
            if of > 0:
                return of
            err = self.vsctl("get", "Interface", name, "error", wait=False).strip()
            if err and err != "[]" or time.monotonic() > deadline:
                raise OvsError(f"port {name} was not added: {err or 'no ofport'}; log: {self.log_tail()}")
            time.sleep(0.1)

    # ------------------------------------------------------------------ VXLAN (userspace tunnels)
    def tunnel_endpoint(self, bridge: str, local_ip: str, prefix: int, remote_ip: str,
                        remote_mac: str) -> None:
        """Make ``bridge`` (holding the physical port) a VTEP underlay: the tunnel IP on its internal
        port (a tap in OVS's namespace), a route to the remote VTEP and its ARP entry in OVS's
        userspace tables (``ovs/route/add``, ``tnl/arp/set``)."""
        add_address(bridge, f"{local_ip}/{prefix}", self.netns)
        set_link(bridge, self.netns, state="up")
        try:
            self.appctl("ovs/route/add", f"{remote_ip}/32", bridge)
        except OvsError as e:
            if "exist" not in str(e).lower():
                raise
        self.appctl("tnl/arp/set", bridge, remote_ip, remote_mac)


_BOND_MEMBER = re.compile(r"^(?:member|slave) (\S+): (enabled|disabled)")
_BOND_HASH = re.compile(r"^\s+hash (\d+): (\d+) kB load")


def parse_bond_show(text: str) -> dict[str, object]:
    """``ovs-appctl bond/show <bond>`` -> ``{"bond_mode", "lacp_status", "primary",
    "active_member", "members": {name: {"enabled": bool, "active": bool, "hashes": [int]}}, ...}``
    (the other ``key: value`` lines keyed as they read, spaces and dashes as underscores)."""
    out: dict[str, Any] = {"members": {}}
    cur: Optional[dict[str, Any]] = None
    for line in text.splitlines():
        if not line.strip() or line.startswith("----"):
            continue
        m = _BOND_MEMBER.match(line)
        if m:
            cur = {"enabled": m.group(2) == "enabled", "active": False, "hashes": []}
            out["members"][m.group(1)] = cur
            continue
        if cur is not None and line.startswith(" "):
            h = _BOND_HASH.match(line)
            if h:
                cur["hashes"].append(int(h.group(1)))
            elif line.strip() in ("active member", "active slave"):
                cur["active"] = True
                out["active_member"] = next(k for k, v in out["members"].items() if v is cur)
            continue
        k, sep, v = line.partition(":")
        if sep:
            key = re.sub(r"[^a-z0-9]+", "_", k.strip().lower()).strip("_")
            out[key] = v.strip()
    if "active_backup_primary" in out:
        out["primary"] = out["active_backup_primary"]
    return out

