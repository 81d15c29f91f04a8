"""The hosts of a testbed as host objects (issue 10): :class:`~nfvperf.host.proc.LocalHost` for a
host with ``local: true`` (or no ``ssh:``), :class:`~nfvperf.host.ssh.SshHost` otherwise, and what
is done on all of them: the preflight table of ``nfvperf testbed check`` and the cleanup of
``nfvperf cleanup --testbed``.
"""
from __future__ import annotations

import argparse
import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, NotRequired, Optional, Protocol, Sequence, TypedDict, runtime_checkable

from nfvperf.dut.base import dut_class
from nfvperf.host.base import Host
from nfvperf.host.preflight import Binary, Check, checks_for, pci_device
from nfvperf.host.proc import LOCAL
from nfvperf.host.remote_preflight import PreflightNeeds, needs_dict
from nfvperf.host.run import RunContext, normalize_tag
from nfvperf.host.ssh import SshError, SshHost
from nfvperf.store.cleanup import main as local_cleanup
from nfvperf.tg.tgen import find_tgen_binary
from nfvperf.topo import topology_class
from nfvperf.topo.errors import TopologyError
from nfvperf.topo.ports import CabledLink
from nfvperf.topo.spec import TopologySpec
from nfvperf.vm.pci_guest import GuestPciHost

from .guests import GUEST_TGEN, TestbedGuests, guest_checks, guest_image, guest_problems
from .spec import HostSpec, TestbedError, TestbedSpec, load_testbed


def make_host(name: str, spec: HostSpec) -> Host:
    """The host object of one testbed host (not connected yet); a ``guest:`` host has none until
    nfvperf boots it (:meth:`TestbedHosts.boot_guests`)."""
    if spec.guest is not None:
        raise ValueError(f"hosts.{name} is a guest: nfvperf boots it for a run "
                         "(TestbedHosts.boot_guests)")
    if spec.local or spec.ssh is None:
        return LOCAL
    return SshHost(name, spec.ssh, role=spec.role, work_dir=spec.work_dir)


class TestbedHosts:
    """Every host of a testbed, connected on :meth:`open`; ``hosts[name]``, :meth:`role`."""

    __test__ = False

    def __init__(self, spec: TestbedSpec):
        self.spec = spec
        self.hosts: dict[str, Host] = {n: make_host(n, h) for n, h in spec.hosts.items()
                                      if h.guest is None}
        self.guests: Optional[TestbedGuests] = None

    def boot_guests(self, run: RunContext, say: Optional[Callable[[str], object]] = None) -> "TestbedHosts":
        """Boot the testbed's ``guest:`` hosts for the run ``run`` (stopped by :meth:`close`)."""
        if self.spec.guests() and self.guests is None:
            self.guests = TestbedGuests(self.spec, run)
            try:
                self.hosts.update(self.guests.boot(say))
            except BaseException:
                self.guests = None
                raise
        return self

    def open(self) -> "TestbedHosts":
        missing = [n for n in self.spec.hosts if n not in self.hosts]
        if missing:
            raise ValueError(f"testbed {self.spec.name}: guest host(s) {', '.join(missing)} not "
                             "booted: boot_guests(run) first")
        try:
            for h in self.hosts.values():
                if isinstance(h, SshHost):
                    h.connect()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        for h in self.hosts.values():
            with contextlib.suppress(Exception):
                h.close()
        if self.guests is not None:
            for n in self.guests.guests:
                self.hosts.pop(n, None)
            self.guests.stop()
            self.guests = None

    def role(self, role: str) -> tuple[str, Host]:
        """(name, host object) of the one host with ``role``."""
        name, _ = self.spec.role_host(role)
        return name, self.hosts[name]

    def public(self) -> dict[str, dict[str, object]]:
        """Which host is which, without secrets (for a run's environment)."""
        out: dict[str, dict[str, object]] = {}
        for n, h in self.hosts.items():
            d: dict[str, object] = h.public() if isinstance(h, (SshHost, GuestPciHost)) else {"via": "local"}
            d["role"] = self.spec.hosts[n].role
            out[n] = d
        return out

    def __enter__(self) -> "TestbedHosts":
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[tuple[str, Host]]:
        return iter(self.hosts.items())


# ----------------------------------------------------------------------------------- check
@runtime_checkable
class Reachable(Protocol):
    """A testbed host on another machine (:class:`SshHost`): connected, and its preflight run there."""

    def connect(self) -> None: ...

    def preflight(self, needs: PreflightNeeds) -> list[dict[str, object]]: ...


def role_needs(name: str, spec: HostSpec, dut: str = "ovs-dpdk",
               vnf_binaries: Sequence[Binary] = ()) -> PreflightNeeds:
    """What preflight checks on a host of this role: the tester's tgen, the DUT adapter's
    binaries and those of the topology's VNFs (``vnf_binaries``: Binary objects, e.g. pvp's
    dpdk-testpmd), the NICs' PCI devices; root and hugepages required."""
    return needs_dict(_role_binaries(spec, dut, vnf_binaries), [], required=("root", "hugepages"))


def _role_binaries(spec: HostSpec, dut: str, vnf_binaries: Sequence[Binary]) -> list[tuple[Binary, bool]]:
    binaries: list[tuple[Binary, bool]] = []
    if spec.role == "tester":
        path = spec.tgen
        if path is None:
            with contextlib.suppress(Exception):
                path = str(find_tgen_binary())
        binaries.append((Binary("tgen", "nfvperf's tgen (make build)",
                                (path,) if path else ()), True))
    if spec.role in ("dut", "vnf"):
        binaries += [(b, True) for b in dut_class(dut).binaries]
        binaries += [(b, True) for b in vnf_binaries if b not in dut_class(dut).binaries]
    # the NICs' PCI devices are checked by nic_pci_checks (with the testbed's field names)
    return binaries


def nic_pci_checks(name: str, spec: HostSpec, host: Host, port_kind: Optional[str] = None,
                   linked: Sequence[str] = ()) -> list[Check]:
    """One row per NIC of the host with a ``pci:`` address: the device exists on that host and is
    bound to its DPDK driver (``driver:``, default vfio-pci), read from the host's
    ``/sys/bus/pci/devices/<pci>/uevent``.  Required (else a warning) for the cabled NICs
    (``linked``: 'host.nic') of a run that drives PCI NICs (``port_kind: pci``) or, for
    ``nfvperf testbed check`` (no ``port_kind``), for a NIC without a kernel interface."""
    rows = []
    for nic in spec.nics:
        if not nic.pci:
            continue
        field = f"hosts.{name}.nics.{nic.name}.pci"
        want = nic.driver or "vfio-pci"
        required = (port_kind == "pci" and f"{name}.{nic.name}" in linked) or \
            (port_kind is None and not nic.iface)
        bad = "fail" if required else "warn"
        found = pci_device(nic.pci, host)
        if found is None:
            rows.append(Check(f"pci:{nic.name}", bad, f"{field}: no PCI device {nic.pci} on host {name}",
                              f"check the address on the host (lspci -D, dpdk-devbind.py "
                              f"--status) and correct {field}", required, name, spec.role))
            continue
        pci_class, drv, _ = found
        if pci_class and not pci_class.startswith("0x02"):
            rows.append(Check(f"pci:{nic.name}", bad,
                              f"{field}: {nic.pci} on host {name} is not a network device "
                              f"(PCI class {pci_class}; a NIC is 0x02xxxx)",
                              f"give the NIC's address (lspci -D -d ::0200, dpdk-devbind.py "
                              f"--status) in {field}", required, name, spec.role))
            continue
        ok = drv == want
        rows.append(Check(f"pci:{nic.name}", "ok" if ok else bad, f"{nic.pci} bound to {drv}" if ok else
                          f"{field}: {nic.pci} on host {name} is bound to {drv or 'no driver'}, not {want}",
                          "" if ok else f"nfvperf testbed prepare <testbed file> --limit {name} (binds the "
                          f"listed NICs to {want})", required, name, spec.role))
    return rows


def guest_rows(name: str, hspec: HostSpec, host: Optional[Host], dut: str, vnf_binaries: Sequence[Binary],
               port_kind: Optional[str], linked: Sequence[str]) -> list[Check]:
    """A ``guest:`` host's rows: before it is booted (``host`` None: ``nfvperf testbed check``)
    what stops it from booting here, else its preflight in the guest and its NICs' PCI rows."""
    role = hspec.role
    if host is None:
        probs = [p for p in guest_problems(TestbedSpec.model_construct(
            name="x", hosts={name: hspec}, links=[])) if p]
        if probs:
            return [Check("guest", "fail", p, required=True, host=name, role=role) for p in probs]
        g = hspec.guest
        assert g is not None
        return [Check("guest", "ok", f"QEMU guest, {g.nics} emulated PCI NIC(s) "
                      f"({', '.join(g.pci_addresses())}), booted by nfvperf for a run", required=True,
                      host=name, role=role)]
    binaries = [b for b, _ in _role_binaries(hspec, dut, vnf_binaries)]
    return guest_checks(name, hspec, host, binaries) + nic_pci_checks(name, hspec, host, port_kind, linked)


def check_testbed(spec: TestbedSpec, dut: str = "ovs-dpdk",
                  vnf_binaries: Sequence[Binary] = (), port_kind: Optional[str] = None,
                  make: Optional[Callable[[str, HostSpec], Host]] = None) -> list[Check]:
    """The preflight of every host, one row per (host, check); a host that cannot be reached
    (or presents a wrong key) is one failed ``ssh`` row with the reason.  ``vnf_binaries``: the
    programs of the topology's VNFs, checked on the DUT host (see :func:`role_needs`);
    ``port_kind``: the run's, for the NICs' PCI rows (:func:`nic_pci_checks`); ``make``: the
    host factory (default :func:`make_host`; for a ``guest:`` host it gives the booted guest's
    host object, or None: :func:`guest_rows`)."""
    rows: list[Check] = []
    linked = [r for lk in spec.links for r in (lk.tester, lk.dut)]
    for name, hspec in spec.hosts.items():
        if hspec.guest is not None:
            rows += guest_rows(name, hspec, make(name, hspec) if make else None, dut,
                               vnf_binaries, port_kind, linked)
            continue
        host = (make or make_host)(name, hspec)
        needs = role_needs(name, hspec, dut, vnf_binaries)
        try:
            if host.remote:
                assert isinstance(host, Reachable), host     # an SshHost (guests: guest_rows)
                host.connect()
                rows.append(Check("ssh", "ok", f"{hspec.ssh.user}@{hspec.ssh.address}:{hspec.ssh.port}, "  # type: ignore[union-attr]
                                  f"host key matches", required=True, host=name, role=hspec.role))
                checks = host.preflight(needs)
            else:
                checks = checks_for(needs)
            pci_rows = nic_pci_checks(name, hspec, host, port_kind, linked)
        except (SshError, OSError) as e:
            rows.append(Check("ssh", "fail", str(e), required=True, host=name, role=hspec.role))
            continue
        finally:
            host.close() if host.remote else None
        rows += [Check(str(c["name"]), str(c["status"]), str(c["detail"]), str(c.get("fix") or ""),
                       bool(c.get("required")), name, hspec.role) for c in checks] + pci_rows
    return rows


def format_check_table(rows: Sequence[Check]) -> str:
    head = ("host", "role", "check", "ok", "detail")
    table = [head] + [(r.host, r.role, r.check, {"ok": "ok", "warn": "WARN"}.get(r.status, "FAIL")
                       + ("*" if r.required else ""), r.detail + (f" (fix: {r.fix})"
                                                                   if r.status != "ok" and r.fix
                                                                   else ""))
                      for r in rows]
    widths = [max(len(str(t[i])) for t in table) for i in range(4)]
    lines = ["  ".join(str(t[i]).ljust(widths[i]) for i in range(4)) + "  " + str(t[4])
             for t in table]
    lines.append("* required: a run on this testbed refuses to start while it fails")
    return "\n".join(lines)


# --------------------------------------------------------------------------------- cleanup
def cleanup_testbed(spec: TestbedSpec, tag: Optional[str] = None, dry_run: bool = False,
                    force: bool = False) -> dict[str, dict[str, object]]:
    """Remove run leftovers on every SSH host of the testbed: ``tag``'s, or (no tag) every tag
    found there that no live run of this controller holds (``force``: every tag found).
    Returns {host: {tag: report} | {"error": ...}}; the controller itself is cleaned by the
    local ``nfvperf cleanup``."""
    live = set() if force else RunContext.live_tags()
    out: dict[str, dict[str, object]] = {}
    for name, hspec in spec.hosts.items():
        if hspec.guest is not None:     # stopped with its run; its QEMU is this machine's
            continue
        host = make_host(name, hspec)
        if not isinstance(host, SshHost):
            continue
        try:
            host.connect()
            tags = [tag] if tag else [t for t in host.tags() if t not in live]
            out[name] = {t: host.cleanup_tag(t, dry_run=dry_run) for t in tags}
        except (SshError, OSError, RuntimeError) as e:
            out[name] = {"error": str(e)}
        finally:
            host.close()
    return out


def cleanup_main(argv: Sequence[str]) -> int:
    """``nfvperf cleanup --testbed FILE [--tag T] [--dry-run] [--force] [--json]``: every SSH host
    of the testbed by tag, then this machine (``nfvperf cleanup`` with the other options)."""
    p = argparse.ArgumentParser(prog="nfvperf cleanup --testbed")
    p.add_argument("--testbed", required=True, metavar="FILE")
    p.add_argument("--tag")
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--force", action="store_true")
    p.add_argument("--json", action="store_true")
    args, rest = p.parse_known_args([a for a in argv if a != "--"])
    try:
        spec = load_testbed(args.testbed)
    except TestbedError as e:
        print(f"nfvperf cleanup: {e}", file=__import__("sys").stderr)
        return 2
    if args.tag:
        args.tag = normalize_tag(args.tag)
    remote = cleanup_testbed(spec, args.tag, dry_run=args.dry_run, force=args.force)
    failed = False
    if args.json:
        print(json.dumps({"testbed": spec.name, "hosts": remote}, indent=2))
    else:
        verb = "would remove" if args.dry_run else "removed"
        for host, per_tag in remote.items():
            if "error" in per_tag:
                failed = True
                print(f"{host}: cannot clean: {per_tag['error']}")
                continue
            if not per_tag:
                print(f"{host}: nothing to clean")
            for t, rep in per_tag.items():
                items = [f"{k} {v}" for k, vs in (rep.items() if isinstance(rep, dict) else ()) for v in vs]
                print(f"{host}: {t}: {verb} {len(items)} item(s)"
                      + "".join(f"\n  {i}" for i in items))
    rc = local_cleanup(list(rest) + [f"--{f.replace('_', '-')}" for f in ("dry_run", "force", "json")
                                      if getattr(args, f)] + (["--tag", args.tag] if args.tag else []))
    return 1 if failed else int(rc or 0)


# ------------------------------------------------------------------------------- a run on it
class TopologyKwargs(TypedDict):
    """:func:`topology_kwargs`: the arguments a topology class gets for a run on a testbed."""

    tg_host: Host
    dut_host: Host
    testbed_links: list[CabledLink]
    cpu_hints: dict[str, dict[str, object]]
    preflight: bool
    tgen_binary: NotRequired[Path]


def topology_kwargs(spec: TestbedSpec, hosts: TestbedHosts) -> TopologyKwargs:
    """What :func:`nfvperf.topo.build` gets for a run on the testbed: the tester and DUT host
    objects, the cabled links between them (kernel interfaces and/or PCI addresses, in link
    order; the topology's port kind picks which and says what is missing), the hosts' cpu:
    hints (one CPU plan per host), tgen's path on the tester, no local preflight
    (:func:`check_testbed` checks every host)."""
    tname, tester = hosts.role("tester")
    dname, dut = hosts.role("dut")
    links = cabled_links(spec, tname, dname)
    hints: dict[str, dict[str, object]] = {}
    for role, name, numas in (("tester", tname, [lk["tester_numa"] for lk in links]),
                              ("dut", dname, [lk["dut_numa"] for lk in links])):
        cpu = spec.hosts[name].cpu
        hints[role] = {"host": name, "isolated": cpu.isolated, "housekeeping": cpu.housekeeping,
                       "numa": next((n for n in numas if n is not None), None)}
    if hosts.guests is not None:
        for lk in links:
            # a vhost end's cable socket: QEMU serves it, the DPDK port here connects (client)
            sock = str(hosts.guests.cable(lk["link"]))
            lk["tester_vhost"], lk["dut_vhost"] = lk["tester_vhost"] and sock, lk["dut_vhost"] and sock
    kw: TopologyKwargs = {"tg_host": tester, "dut_host": dut, "testbed_links": links,
                          "cpu_hints": hints, "preflight": False}
    tgen = spec.hosts[tname].tgen or (GUEST_TGEN if spec.hosts[tname].guest else None)
    if tgen:
        kw["tgen_binary"] = Path(tgen)
    return kw


def cabled_links(spec: TestbedSpec, tname: str, dname: str) -> list[CabledLink]:
    """The links between the tester ``tname`` and the DUT host ``dname``, in link order: each
    end's kernel interface, PCI address, NUMA node and vhost-user cable, the tester NIC's speed."""
    links: list[CabledLink] = []
    for i, lk in enumerate(spec.links):
        th, _, tn = lk.tester.partition(".")
        dh, _, dn = lk.dut.partition(".")
        if th != tname or dh != dname:
            continue
        tnic = next(n for n in spec.hosts[th].nics if n.name == tn)
        dnic = next(n for n in spec.hosts[dh].nics if n.name == dn)
        links.append({"link": i, "tester": lk.tester, "dut": lk.dut, "tester_iface": tnic.iface,
                      "dut_iface": dnic.iface, "tester_pci": tnic.pci, "dut_pci": dnic.pci,
                      "tester_numa": tnic.numa, "dut_numa": dnic.numa, "speed": str(tnic.speed),
                      "tester_vhost": tnic.vhost, "dut_vhost": dnic.vhost})
    return links


@dataclass
class _Unopened:
    """A testbed host before it is reached (``nfvperf validate --testbed``)."""

    name: str
    remote: bool        # another machine than this one (SSH or a guest)


def suite_problems(spec: TestbedSpec, topology: TopologySpec) -> list[str]:
    """Why the suite's topology (a TopologySpec) cannot run on the testbed, found without
    reaching a host: the topology's own testbed checks (kind, DUT adapter over a remote host,
    port kind, enough cabled links with the addresses it drives) and what stops the testbed's
    guests from booting here (:func:`nfvperf.testbed.guests.guest_problems`)."""
    problems: list[str] = []
    try:
        tname, _ = spec.role_host("tester")
        dname, _ = spec.role_host("dut")
    except TestbedError as e:
        return list(e.problems)
    kind = topology_class(topology.kind)
    hosts = {n: _Unopened(n, spec.hosts[n].guest is not None or spec.hosts[n].ssh is not None)
             for n in (tname, dname)}
    topo = kind(topology, RunContext(), tg_host=hosts[tname], dut_host=hosts[dname],
                testbed_links=cabled_links(spec, tname, dname))
    try:
        topo.check_spec()
    except TopologyError as e:
        problems.append(str(e))
    dhost = spec.hosts[dname]
    if dhost.guest is not None:
        with contextlib.suppress(ValueError):       # no image: guest_problems says so
            roots = {Path(r).name for r in guest_image(dname, dhost).roots}
            missing = [b.name for b in dut_class(topology.dut).binaries if b.name not in roots]
            if missing:
                problems.append(f"topology.dut {topology.dut}: the DUT host {dname} is a guest "
                                f"whose image has no {', '.join(missing)} (it holds "
                                f"{', '.join(sorted(roots))}): rebuild the image (nfvperf image "
                                f"build; hosts.{dname}.guest.image: leave it out for the newest) "
                                f"or use a DUT it holds")

    return problems + guest_problems(spec)


def preflight_failures(rows: Sequence[Check]) -> list[str]:
    """The required checks that failed, as ``host: check: detail (fix)``."""
    return [f"{r.host}: {r.check}: {r.detail}" + (f" (fix: {r.fix})" if r.fix else "")
            for r in rows if r.required and r.status == "fail"]
