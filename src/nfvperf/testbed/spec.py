"""The testbed file (issue 10): the hosts of a lab, how to reach them, their NICs and the cabling.

A suite runs on a testbed with ``nfvperf run suite.yaml --testbed lab1.yaml``; without one it runs
on the local host.  The file is validated like a suite: every problem is reported with its path
(``hosts.dut1.ssh.host_key: ...``) and the fix.

    name: lab1
    hosts:
      tester1:
        role: tester
        ssh: {address: 192.0.2.10, user: root, key: ~/.ssh/nfvperf_ed25519,
              host_key: "ssh-ed25519 AAAAC3Nza..."}
        nics:
          - {name: p0, pci: "0000:05:00.0", numa: 0, speed: 10G}
      dut1:
        role: dut
        ssh: {address: 192.0.2.11, user: root, key: ~/.ssh/nfvperf_ed25519,
              known_hosts: ~/.ssh/known_hosts}
        nics:
          - {name: p0, pci: "0000:05:00.0", numa: 0, speed: 10G}
        cpu: {isolated: "2-15", numa_nodes: 2}
    links:
      - {tester: tester1.p0, dut: dut1.p0}

A host without ``ssh:`` (or with ``local: true``) is the controller's own machine.  Host keys are
never learnt: every SSH host names its key (``host_key``) or a known_hosts file that holds it.

A host with ``guest:`` instead of ``ssh:`` is a QEMU guest with emulated PCI NICs that nfvperf
boots for the run and stops after it (issue 19 item 4, :mod:`nfvperf.testbed.guests`): its NICs
sit at fixed addresses (``0000:00:04.0``, ``0000:00:05.0``, ...), bound to ``uio_pci_generic`` at
boot; without ``nics:`` they are listed as ``p0``, ``p1``, ...  A guest's NICs are cabled to
another guest's (QEMU connects them), the tester's listening::

    hosts:
      tester: {role: tester, guest: {nics: 2}}
      dut:    {role: dut, guest: {nics: 2}}
    links:
      - {tester: tester.p0, dut: dut.p0}
      - {tester: tester.p1, dut: dut.p1}

Or to this machine: a NIC ``{name: v0, vhost: true}`` of the local host is a vhost-user socket
QEMU serves for the guest's NIC and a DPDK port here connects to: the DUT here with tgen in the
guest on ``port_kind: pci``, or tgen here with the DUT in the guest.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, Optional, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from nfvperf.validation import format_validation_error
from nfvperf.vm.pci_slots import MAX_NICS, pci_address

_NAME = r"^[A-Za-z][A-Za-z0-9_-]{0,39}$"
_PCI = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_KEY_TYPES = ("ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384",
              "ecdsa-sha2-nistp521")


class TestbedError(ValueError):
    """A testbed file that cannot be used; ``problems`` holds one message per problem."""

    __test__ = False

    def __init__(self, problems: list[str], source: Optional[str] = None):
        self.problems = problems
        self.source = source
        head = f"{source}: " if source else ""
        super().__init__(head + f"{len(problems)} problem(s) in the testbed:\n  " + "\n  ".join(problems))


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SshSpec(_Strict):
    address: str = Field(..., min_length=1, description="IP address or DNS name the controller connects to")
    port: int = Field(22, ge=1, le=65535)
    user: str = Field("root", min_length=1)
    key: Optional[str] = Field(None, description="private key file (never stored in results)")
    host_key: Optional[str] = Field(None, description="the host's public key, 'ssh-ed25519 AAAA...'")
    known_hosts: Optional[str] = Field(None, description="a known_hosts file that holds the host's key")
    connect_timeout_s: float = Field(10.0, gt=0, le=300)
    keepalive_s: float = Field(2.0, gt=0, le=60, description="keepalive interval; a host silent for "
                               "3 intervals is lost and the run ends")

    @model_validator(mode="after")
    def _key_known(self) -> "SshSpec":
        if not self.host_key and not self.known_hosts:
            raise ValueError("name the host's key: host_key: 'ssh-ed25519 AAAA...' (ssh-keyscan -t "
                             "ed25519 <address>, checked out of band) or known_hosts: <file>; "
                             "unknown host keys are never accepted")
        if self.host_key and self.host_key.split()[0] not in _KEY_TYPES:
            raise ValueError(f"host_key: must start with one of {', '.join(_KEY_TYPES)}, "
                             f"got {self.host_key.split()[0]!r}")
        return self

    def key_path(self) -> Optional[Path]:
        return Path(self.key).expanduser() if self.key else None

    def known_hosts_path(self) -> Optional[Path]:
        return Path(self.known_hosts).expanduser() if self.known_hosts else None


class NicSpec(_Strict):
    name: str = Field(..., pattern=_NAME, description="the port's name in links: (host.name)")
    pci: Optional[str] = Field(None, description="PCI address 0000:05:00.0 (real NICs)")
    iface: Optional[str] = Field(None, description="kernel interface (veth, or a NIC before binding)")
    numa: Optional[int] = Field(None, ge=0, le=63)
    speed: Union[str, float] = Field("10G", description="link speed, e.g. 10G, 25G, 100G")
    driver: Optional[str] = Field(None, description="driver to bind for DPDK, e.g. vfio-pci")
    vhost: bool = Field(False, description="a vhost-user port on this machine (the local host), "
                        "cabled to a guest's NIC: QEMU's NIC there, a DPDK vhost port here")

    @model_validator(mode="after")
    def _where(self) -> "NicSpec":
        if self.vhost and (self.pci or self.iface):
            raise ValueError("vhost: true is a vhost-user socket nfvperf makes for the run: drop "
                             "pci: / iface: from this NIC")
        if not self.pci and not self.iface and not self.vhost:
            raise ValueError("give pci: (a DPDK port), iface: (a kernel interface) or vhost: true "
                             "(this machine's end of a cable to a guest's NIC)")
        if self.pci and not _PCI.match(self.pci):
            raise ValueError(f"pci: {self.pci!r} is not a PCI address like 0000:05:00.0")
        return self


#: the driver a guest's NICs are bound to (its kernel has no IOMMU and no VFIO no-IOMMU mode)
GUEST_DRIVER = "uio_pci_generic"


class GuestSpec(_Strict):
    """``hosts.<name>.guest``: a QEMU guest with emulated PCI NICs, booted by nfvperf for the run."""

    nics: int = Field(..., ge=1, le=MAX_NICS, description="emulated PCI NICs (virtio-net-pci), "
                      "at 0000:00:04.0, 0000:00:05.0, ...")
    vcpus: int = Field(2, ge=1, le=16)
    memory_mb: int = Field(1024, ge=512, le=16384, description="guest memory (hugepage-backed)")
    hugepages_mb: int = Field(512, ge=64, description="hugepages inside the guest (DPDK's mbufs); "
                              "leaves 256 MB of memory_mb to its kernel")
    image: Optional[str] = Field(None, description="a guest image directory (nfvperf image build "
                                 "--cache-dir DIR); default: the newest one nfvperf built")
    accel: Literal["auto", "kvm", "tcg"] = "auto"
    queues: int = Field(1, ge=1, le=8, description="queue pairs of each emulated NIC "
                        "(virtio-net-pci mq=on; > 1: its cables to other guests are multi-queue "
                        "taps joined in the run's network namespace)")
    ssh: bool = Field(False, description="reach the guest over SSH, as a server is: a management "
                      "NIC (the kernel's virtio-net) on a tap in the run's network namespace, "
                      "sshd with a host key and a login key nfvperf makes for the run")

    @model_validator(mode="after")
    def _memory(self) -> "GuestSpec":
        if self.hugepages_mb + 256 > self.memory_mb:
            raise ValueError(f"hugepages_mb ({self.hugepages_mb}) must leave 256 MB of memory_mb "
                             f"({self.memory_mb}) to the guest's kernel: raise memory_mb to at "
                             f"least {self.hugepages_mb + 256} or lower hugepages_mb")
        return self

    def pci_addresses(self) -> list[str]:
        return [pci_address(i) for i in range(self.nics)]


class CpuHints(_Strict):
    isolated: Optional[str] = Field(None, description="isolcpus list the host boots with, e.g. 2-15")
    numa_nodes: Optional[int] = Field(None, ge=1, le=64)
    housekeeping: Optional[str] = Field(None, description="cores left to the OS, e.g. 0-1")


class HostSpec(_Strict):
    role: Literal["tester", "dut", "vnf"]
    local: bool = Field(False, description="the controller's own machine (no SSH)")
    ssh: Optional[SshSpec] = None
    guest: Optional[GuestSpec] = Field(None, description="a QEMU guest with emulated PCI NICs, "
                                       "booted by nfvperf for the run (instead of ssh:)")
    nics: list[NicSpec] = Field(default_factory=list)
    cpu: CpuHints = Field(default_factory=CpuHints)
    hugepages: dict[str, int] = Field(default_factory=dict, description="pages per size to prepare, "
                                      "e.g. {'1G': 8, '2M': 1024}")
    work_dir: str = Field("/var/lib/nfvperf", description="where nfvperf keeps files on the host")
    tgen: Optional[str] = Field(None, description="path of the tgen binary on this host (tester); "
                                "default: the controller's own tgen path")

    @model_validator(mode="after")
    def _reach(self) -> "HostSpec":
        if self.local and self.ssh:
            raise ValueError("local: true and ssh: exclude each other")
        if self.guest is not None:
            self._guest_nics(self.guest)
        elif not self.local and not self.ssh:
            self.local = True
        for i, n in enumerate(self.nics):
            if n.vhost and not self.local:
                raise ValueError(f"nics.{i}.vhost: a vhost-user NIC is this machine's end of a "
                                 f"cable to a guest's NIC; this host is "
                                 f"{'a guest' if self.guest else 'reached over SSH'}: give "
                                 "vhost: true on the testbed's local host (local: true, no ssh:)")
        names = [n.name for n in self.nics]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"nics: duplicate name(s) {', '.join(dup)}")
        return self

    def _guest_nics(self, g: GuestSpec) -> None:
        """A guest host: reached through its console (no ssh:, not local), its NICs the guest's
        own addresses bound to uio_pci_generic (listed as p0, p1, ... when nics: is not given)."""
        if self.ssh is not None or self.local:
            raise ValueError("guest: is a VM nfvperf boots; drop ssh: / local: true from this host")
        if self.role == "vnf":
            raise ValueError("guest: hosts are testers or DUTs (role: tester or role: dut)")
        have = g.pci_addresses()
        if not self.nics:
            self.nics = [NicSpec(name=f"p{i}", pci=a, driver=GUEST_DRIVER) for i, a in enumerate(have)]
            return
        for i, n in enumerate(self.nics):
            if not n.pci:
                raise ValueError(f"nics.{i}.pci: a guest's NIC is a PCI device: give pci: one of "
                                 f"{', '.join(have)} (or leave nics: out)")
            if n.pci.lower() not in have:
                raise ValueError(f"nics.{i}.pci: {n.pci} is not a NIC of the guest (guest.nics: "
                                 f"{g.nics} gives {', '.join(have)}): use one of those, or raise "
                                 f"guest.nics")
            if n.driver not in (None, GUEST_DRIVER):
                raise ValueError(f"nics.{i}.driver: a guest's NICs are bound to {GUEST_DRIVER} "
                                 f"(no IOMMU, no VFIO no-IOMMU mode in its kernel), not "
                                 f"{n.driver}: drop driver: or give {GUEST_DRIVER}")
            n.pci, n.driver = n.pci.lower(), GUEST_DRIVER


class LinkSpec(_Strict):
    tester: str = Field(..., description="host.nic on the tester side, e.g. tester1.p0")
    dut: str = Field(..., description="host.nic on the DUT side, e.g. dut1.p0")


class TestbedSpec(_Strict):
    __test__ = False

    name: str = Field(..., pattern=_NAME)
    description: str = ""
    hosts: dict[str, HostSpec] = Field(..., min_length=1)
    links: list[LinkSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> "TestbedSpec":
        problems = []
        for h in self.hosts:
            if not re.match(_NAME, h):
                problems.append(f"hosts.{h}: a host name is a letter then letters, digits, - or _")
        for i, link in enumerate(self.links):
            for side in ("tester", "dut"):
                ref = getattr(link, side)
                host, _, nic = ref.partition(".")
                where = f"links.{i}.{side}"
                if host not in self.hosts:
                    problems.append(f"{where}: unknown host {host!r} (hosts: {', '.join(self.hosts)})")
                elif nic not in [n.name for n in self.hosts[host].nics]:
                    problems.append(f"{where}: host {host} has no nic {nic!r} (give it under "
                                    f"hosts.{host}.nics)")
                elif side == "tester" and self.hosts[host].role != "tester":
                    problems.append(f"{where}: {host} has role {self.hosts[host].role}, not tester")
        problems += self._guest_cabling()
        if not any(h.role == "tester" for h in self.hosts.values()):
            problems.append("hosts: no host has role: tester (the generator runs there)")
        if not any(h.role == "dut" for h in self.hosts.values()):
            problems.append("hosts: no host has role: dut (the switch under test runs there)")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def nic(self, ref: str) -> Optional[NicSpec]:
        """The NIC ``host.nic`` (None when there is none)."""
        host, _, name = ref.partition(".")
        h = self.hosts.get(host)
        return next((n for n in h.nics if n.name == name), None) if h else None

    def host_cable(self, i: int) -> bool:
        """Link ``i`` cables a guest's NIC to a vhost-user NIC of this machine."""
        lk = self.links[i]
        return any((n := self.nic(r)) is not None and n.vhost for r in (lk.tester, lk.dut))

    def _guest_cabling(self) -> list[str]:
        """A guest's NICs are cabled (QEMU stream sockets) to another guest's, or (vhost-user) to
        a vhost NIC of this machine's host entry; every NIC once."""
        problems = []
        used: dict[str, list[int]] = {}
        for i, link in enumerate(self.links):
            ends = [(side, getattr(link, side)) for side in ("tester", "dut")]
            known = [(side, r) for side, r in ends if self.nic(r) is not None]
            guests = [self.hosts[r.partition(".")[0]].guest is not None for _, r in known]
            vhost = [self.nic(r).vhost for _, r in known]  # type: ignore[union-attr]
            if len(known) == 2 and any(vhost):
                _, r = next(e for e, v in zip(known, vhost) if v)
                other = next(e for e, v in zip(known, vhost) if not v) if not all(vhost) else None
                if other is None or not guests[known.index(other)]:
                    problems.append(f"links.{i}: {r} is a vhost-user NIC of this machine, the end "
                                    f"of a cable to a guest's NIC: cable it to a NIC of a guest: "
                                    f"host")
            elif len(guests) == 2 and guests[0] != guests[1]:
                g = next(r for (_, r), isg in zip(known, guests) if isg)
                problems.append(f"links.{i}: {g} is a guest's NIC, cabled by QEMU to another "
                                f"guest's or to a vhost NIC of this machine (nics: - {{name: v0, "
                                f"vhost: true}} on the local host) only: make both ends guest: "
                                f"hosts, or cable a NIC of a host with ssh:")
            for _, r in ends:
                used.setdefault(r, []).append(i)
        for name, h in self.hosts.items():
            for n in h.nics:
                if n.vhost and not used.get(f"{name}.{n.name}"):
                    problems.append(f"hosts.{name}.nics.{n.name}: a vhost NIC is in no link: "
                                    f"cable it to a guest's NIC or drop it")
            if h.guest is None:
                continue
            kinds = {self.host_cable(i) for n in h.nics for i in used.get(f"{name}.{n.name}", [])}
            if len(kinds) > 1:
                problems.append(f"hosts.{name}.guest: some NICs are cabled to guests, some to "
                                f"this machine's vhost NICs; a guest's NICs are cabled one way: "
                                f"all to guests or all to this machine")
            elif kinds == {True} and h.guest.queues > 1:
                problems.append(f"hosts.{name}.guest.queues: {h.guest.queues}, but its NICs are "
                                f"cabled to this machine's vhost NICs (one queue pair each); "
                                f"multi-queue NICs are cabled guest to guest: leave queues: 1")
            for n in h.nics:
                idx = used.get(f"{name}.{n.name}", [])
                if not idx:
                    problems.append(f"hosts.{name}.guest: NIC {n.name} ({n.pci}) is in no link; "
                                    f"every NIC of a guest is cabled: add a link for {name}.{n.name} "
                                    f"or lower guest.nics")
                elif len(idx) > 1:
                    problems.append(f"links.{idx[1]}: {name}.{n.name} is cabled already "
                                    f"(links.{idx[0]}); a NIC has one cable")
            if len(h.nics) < h.guest.nics:
                problems.append(f"hosts.{name}.nics: the guest has {h.guest.nics} NICs and "
                                f"nics: lists {len(h.nics)}; list every one or lower guest.nics")
        return problems

    def guests(self) -> list[tuple[str, HostSpec]]:
        """The hosts nfvperf boots as QEMU guests (``guest:``), testers first."""
        found = [(n, h) for n, h in self.hosts.items() if h.guest is not None]
        return sorted(found, key=lambda nh: nh[1].role != "tester")

    def by_role(self, role: str) -> list[tuple[str, HostSpec]]:
        return [(n, h) for n, h in self.hosts.items() if h.role == role]

    def role_host(self, role: str) -> tuple[str, HostSpec]:
        """The one host of ``role`` (tester or dut)."""
        found = self.by_role(role)
        if len(found) != 1:
            raise TestbedError([f"hosts: need exactly one host with role: {role}, found {len(found)}"])
        return found[0]

    def public(self) -> dict[str, Any]:
        """The testbed as stored with a run: no key file paths, no host keys (issue 10: secrets
        never appear in results)."""
        d = self.model_dump(mode="json")
        for h in d["hosts"].values():
            if h.get("ssh"):
                h["ssh"] = {k: h["ssh"][k] for k in ("address", "port", "user")}
        return d


def validate_testbed(data: Any, source: Optional[str] = None) -> TestbedSpec:
    if not isinstance(data, dict):
        raise TestbedError([f"(testbed): the file must hold a mapping (name:, hosts:, links:), "
                            f"got {type(data).__name__}"], source)
    try:
        return TestbedSpec.model_validate(data)
    except ValidationError as e:
        raise TestbedError(format_validation_error(e, model=TestbedSpec), source) from None


def load_testbed(path: Union[str, Path]) -> TestbedSpec:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise TestbedError([f"cannot read {p}: {e.strerror}"], str(p)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise TestbedError([f"(yaml) {e}; fix the YAML syntax"], str(p)) from None
    return validate_testbed(data, str(p))
