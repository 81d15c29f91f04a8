"""The QEMU guests of a testbed (``hosts.<name>.guest``, issue 19 item 4): booted by nfvperf for a
run, their emulated PCI NICs bound to ``uio_pci_generic`` as ``nfvperf testbed prepare`` binds a
server's, and stopped after it.

Each guest is a :class:`nfvperf.vm.pci_guest.PciGuest`.  A guest with ``guest.ssh: true`` is
reached as a server is, over SSH (:class:`nfvperf.host.ssh.SshHost`, the code a real lab's hosts
run through): a management NIC (the guest kernel's virtio-net, never DPDK's) on a tap in the
run's network namespace, the guest address and the tap's one /30 of that namespace only, sshd
started by the guest's init with a host key and an authorized key made for the run
(:func:`ssh_target`), the controller's connection opened inside the namespace.  Other guests are
reached through their :class:`~nfvperf.vm.pci_guest.GuestPciHost` (processes, files, tgen's
control socket over the guest's serial ports).  Either way the topology runs tgen and the DUT
adapter there as on hosts reached over SSH; the serial shell stays for the boot, the NIC
binding and the leftover check before power-off.

The testbed's links are the cables: one Unix socket per link in the run directory, on which QEMU
connects the two guests' NICs (``-netdev stream``): the tester's guest listens, the DUT's
connects, so testers boot first.

:func:`guest_problems` is what can be said before anything boots (QEMU, socat, the guest image,
tgen for a tester), each naming the field or package and the fix; ``nfvperf validate --testbed``
and a run both ask it.  :func:`guest_checks` is a booted guest's preflight rows (the programs its
role runs, hugepages); the NICs' rows are :func:`nfvperf.testbed.hosts.nic_pci_checks`' against
the guest's own ``/sys/bus/pci``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any, Optional, Sequence

from cryptography.hazmat.primitives import serialization as ser
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from nfvperf.dut.base import DutFailure
from nfvperf.host.base import Host
from nfvperf.host.netns import (add_address, create_netns, link_exists, link_stats, run_in_netns,
                                set_link)
from nfvperf.host.preflight import Binary, Check
from nfvperf.host.run import ResourceTracker, RunContext
from nfvperf.host.ssh import SshError, SshHost
from nfvperf.tg.tgen import find_tgen_binary
from nfvperf.vm import image as vm_image
from nfvperf.vm.pci_guest import GUEST_TGEN, GuestPciHost, GuestSsh, PciGuest
from nfvperf.vm.pci_overlay import GUEST_SSHD_LOG, GUEST_WORK
from nfvperf.vm.qemu import QEMU

from .spec import GUEST_DRIVER, HostSpec, TestbedSpec
from .standin import TESTPMD, VhostStandIn

log = logging.getLogger(__name__)

__all__ = ["TestbedGuests", "guest_image", "guest_problems", "guest_checks", "ssh_target",
           "GUEST_TGEN"]


def _ed25519() -> tuple[bytes, str]:
    """A new ed25519 key: (private key in OpenSSH format, public line ``ssh-ed25519 AAAA...``)."""
    k = Ed25519PrivateKey.generate()
    private = k.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.OpenSSH, ser.NoEncryption())
    public = k.public_key().public_bytes(ser.Encoding.OpenSSH, ser.PublicFormat.OpenSSH).decode()
    return private, public


def ssh_target(run: RunContext, tracker: ResourceTracker, name: str, index: int, netns: str
               ) -> GuestSsh:
    """The SSH side of guest ``name`` (the ``index``-th guest) for the run: its management tap,
    its /30 (10.254.<index>.0/30 in ``netns``: the tap .1, the guest .2), a new host key and a
    new login key, whose private half is written (0600) to the run directory and removed with
    ``tracker``."""
    host_priv, host_pub = _ed25519()
    user_priv, user_pub = _ed25519()
    key = run.run_dir / f"vm-{name}-ssh.key"
    key.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(user_priv)
    tracker.add("file", str(key), lambda: key.unlink(missing_ok=True))
    return GuestSsh(tap=run.ifname(f"m{index}"), netns=netns, address=f"10.254.{index}.2",
                    gateway=f"10.254.{index}.1", host_key_private=host_priv, host_key=host_pub,
                    authorized_key=f"{user_pub} nfvperf-{run.tag}", key_file=key)


def guest_image(name: str, hspec: HostSpec) -> vm_image.ImageInfo:
    """The image the guest ``name`` boots: ``guest.image``, or the newest nfvperf built.  Raises
    ValueError naming the field and the fix when there is none."""
    g = hspec.guest
    assert g is not None
    field = f"hosts.{name}.guest.image"
    if g.image:
        d = Path(g.image).expanduser()
        if not (d / "manifest.json").is_file():
            raise ValueError(f"{field}: {d} is not a built guest image (no manifest.json): build "
                             f"one with `nfvperf image build --cache-dir DIR` and give its "
                             f"<DIR>/<key> directory, or drop image:")
        try:
            info = vm_image._load_info(d)
        except (OSError, ValueError, KeyError) as e:
            raise ValueError(f"{field}: {d}/manifest.json cannot be read ({e}): rebuild it with "
                             "`nfvperf image build --force`") from None
    else:
        found = vm_image.newest_cached()
        if found is None:
            raise ValueError(f"{field}: no guest image is built (looked in "
                             f"{vm_image.DEFAULT_CACHE_DIR}): run `nfvperf image build` first "
                             "(or give image: DIR)")
        info = found
    missing = [str(f) for f in (info.kernel, info.initrd) if not f.is_file()]
    if missing:
        raise ValueError(f"{field}: the image in {info.directory} lacks {', '.join(missing)}: "
                         "rebuild it with `nfvperf image build --force`")
    return info


def guest_problems(spec: TestbedSpec) -> list[str]:
    """What stops the testbed's guests from booting here, before anything starts (one message
    per problem, naming the field or package and the fix); [] when it has no guests."""
    guests = spec.guests()
    if not guests:
        return []
    problems = []
    if shutil.which(QEMU) is None:
        problems.append(f"hosts.{guests[0][0]}.guest: {QEMU} is not installed: apt-get install "
                        "qemu-system-x86 (scripts/install-deps.sh)")
    if shutil.which("socat") is None:
        problems.append(f"hosts.{guests[0][0]}.guest: socat is not installed (a guest relays "
                        "tgen's control socket and the DUT's console with it): apt-get install socat")
    try:
        find_tgen_binary()
    except FileNotFoundError as e:
        problems.append(f"hosts.{guests[0][0]}.guest: the guest runs this host's tgen, which is "
                        f"not built ({e}): make build")
    cabled_here = [f"links.{i}" for i in range(len(spec.links)) if spec.host_cable(i)]
    if cabled_here and shutil.which(TESTPMD) is None:
        problems.append(f"{cabled_here[0]}: a guest's NIC cabled to this machine boots with "
                        f"{TESTPMD} holding the vhost-user cable (QEMU waits for a backend): "
                        "apt-get install dpdk")
    for name, h in guests:
        try:
            guest_image(name, h)
        except ValueError as e:
            problems.append(str(e))
        if h.tgen not in (None, GUEST_TGEN):
            problems.append(f"hosts.{name}.tgen: a guest runs tgen at {GUEST_TGEN} (this host's, "
                            f"put there at boot), not {h.tgen}: drop tgen:")
    return problems


def guest_checks(name: str, hspec: HostSpec, host: Host, binaries: Sequence[Binary]) -> list[Check]:
    """A booted guest's preflight rows: each program of its role found in the guest
    (``binaries``; a tester's tgen is :data:`GUEST_TGEN`), hugepages reserved in the guest."""
    rows = []
    for b in binaries:
        cands = [GUEST_TGEN] if b.name == "tgen" else \
            list(b.candidates) or [f"/usr/bin/{b.name}", f"/usr/sbin/{b.name}"]
        found = next((c for c in cands if host.exists(c)), None)
        rows.append(Check(f"binary:{b.name}", "ok", found, required=True) if found else Check(
            f"binary:{b.name}", "fail", f"hosts.{name}: the guest image has no {b.name} (looked for "
            f"{', '.join(cands)})", "the guest image holds dpdk-testpmd, OVS-DPDK, this host's tgen "
            "and l3fwd build: rebuild it (nfvperf image build) or use one of those DUTs", True))
    try:
        pages = int(host.read_text("/proc/sys/vm/nr_hugepages").strip() or 0)
    except (OSError, ValueError):
        pages = 0
    g = hspec.guest
    rows.append(Check("hugepages", "ok" if pages > 0 else "fail", f"{pages} x 2 MB pages in the guest",
                      f"raise hosts.{name}.guest.hugepages_mb (now {g.hugepages_mb if g else '?'})", True))
    rows.append(Check("root", "ok", "the guest's shell runs as root", required=True))
    return [dataclasses.replace(c, host=name, role=hspec.role) for c in rows]


class TapCables:
    """Multi-queue cables between guests (a ``guest.queues`` > 1): each guest NIC is a
    multi-queue tap that its QEMU creates in one network namespace of the run (``<tag>-lab``, no
    IPv6, nothing else in it), and the two taps of a link are joined by ``tc`` ``mirred``
    redirects both ways: a wire, no bridge, no learning, no frame of this machine's own.  The tap
    spreads what it carries over its queues by flow hash, as a NIC's RSS does.  A tap drops
    what its guest has not read once its queue is full: the taps queue :data:`QUEUE_LEN` frames
    (more than a trial of the emulated lab sends), and :meth:`stats` says what each dropped."""

    #: frames a tap holds for its guest (the kernel's default is 1000)
    QUEUE_LEN = 20000

    def __init__(self, run: RunContext, tracker: ResourceTracker):
        self.run, self.tracker = run, tracker
        self.ns = run.netns("lab")
        self.joined: list[str] = []

    def tap(self, link: int, side: str) -> str:
        return self.run.ifname(f"c{link}{side[0]}")

    def stats(self) -> dict[str, dict[str, int]]:
        """Each joined tap's kernel counters (``tx_dropped``: frames its guest did not take)."""
        out = {}
        for t in self.joined:
            with contextlib.suppress(Exception):
                out[t] = link_stats(t, self.ns)
        return out

    def create(self) -> str:
        create_netns(self.ns, self.tracker)
        for conf in ("all", "default"):     # the taps come up without IPv6 (no RS, no MLD)
            run_in_netns(self.ns, ["sysctl", "-q", "-w", f"net.ipv6.conf.{conf}.disable_ipv6=1"],
                         check=False)
        return self.ns

    def _wait(self, taps: Sequence[str], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not all(link_exists(t, self.ns) for t in taps):
            if time.monotonic() > deadline:
                raise DutFailure(f"tap {' or '.join(taps)} did not appear in netns {self.ns} "
                                 f"within {timeout_s:.0f} s (QEMU's log in {self.run.run_dir})")
            time.sleep(0.1)

    def management(self, ssh: GuestSsh, timeout_s: float = 30.0) -> None:
        """Once QEMU has made a guest's management tap: its /30 gateway address on it, up."""
        self._wait([ssh.tap], timeout_s)
        add_address(ssh.tap, f"{ssh.gateway}/30", self.ns)
        set_link(ssh.tap, self.ns, state="up")

    def join(self, a: str, b: str, timeout_s: float = 30.0) -> None:
        """Once QEMU has made taps ``a`` and ``b``: up, and each one's ingress redirected to the
        other's egress."""
        self._wait([a, b], timeout_s)
        self.joined += [a, b]
        for x, y in ((a, b), (b, a)):
            set_link(x, self.ns, state="up", txqlen=self.QUEUE_LEN)
            # a plain FIFO: the default qdisc (fq_codel) drops what waits more than 5 ms, as a
            # frame for a guest that QEMU under TCG has not scheduled yet does
            run_in_netns(self.ns, ["tc", "qdisc", "replace", "dev", x, "root", "pfifo", "limit",
                                   str(self.QUEUE_LEN)])
            run_in_netns(self.ns, ["tc", "qdisc", "add", "dev", x, "ingress"])
            run_in_netns(self.ns, ["tc", "filter", "add", "dev", x, "parent", "ffff:", "protocol",
                                   "all", "u32", "match", "u32", "0", "0", "action", "mirred",
                                   "egress", "redirect", "dev", y])


class TestbedGuests:
    """The guests of one testbed for one run: :meth:`boot` (tester guests first, then the DUT's,
    then each waited for and its NICs bound), ``hosts`` (name -> GuestPciHost), :meth:`stop`.
    Everything they create (QEMU, sockets, the initramfs copies) is on ``tracker``."""

    __test__ = False

    def __init__(self, spec: TestbedSpec, run: RunContext, tracker: Optional[ResourceTracker] = None):
        self.spec = spec
        self.run = run
        self.tracker = tracker or ResourceTracker(run)
        self.guests: dict[str, PciGuest] = {}
        #: the run's network namespace for multi-queue cables and management taps (None: QEMU
        #: stream sockets, one queue pair per NIC, and no guest reached over SSH)
        self.taps: Optional[TapCables] = None
        #: the guests reached over SSH (``guest.ssh: true``): name -> connected SshHost
        self.ssh: dict[str, SshHost] = {}

    def cable(self, link: int) -> Path:
        """The socket QEMU cables link ``link`` on (the tester's guest listens)."""
        return self.run.run_dir / f"cable{link}.sock"

    def _sockets(self, name: str, hspec: HostSpec) -> list[Path]:
        """One cable per NIC of ``name``, in its NICs' order (spec: every guest NIC is linked)."""
        return [self.cable(i) for i in self._links(name, hspec)]

    def _links(self, name: str, hspec: HostSpec) -> list[int]:
        return [next(k for k, lk in enumerate(self.spec.links) if f"{name}.{nic.name}" in (lk.tester, lk.dut))
                for nic in hspec.nics]

    def cabled_here(self, name: str, hspec: HostSpec) -> bool:
        """The guest's NICs are cabled to vhost NICs of this machine (vhost-user, QEMU the
        server; the spec allows one way per guest), not to another guest's."""
        return any(self.spec.host_cable(i) for i in self._links(name, hspec))

    def boot(self, say: Any = None) -> dict[str, GuestPciHost]:
        """Boot every guest, bind its NICs; returns the hosts.  Stops what it started on failure."""
        problems = guest_problems(self.spec)
        if problems:
            raise ValueError(f"testbed {self.spec.name}: " + "; ".join(problems))
        self.run.run_dir.mkdir(parents=True, exist_ok=True)
        here: list[Path] = []                   # cables to this machine: vhost-user sockets
        standin: Optional[VhostStandIn] = None
        try:
            guests = [(n, h, h.guest) for n, h in self.spec.guests() if h.guest is not None]
            mq = any(g.queues > 1 for _, _, g in guests)
            if mq or any(g.ssh for _, _, g in guests):
                self.taps = TapCables(self.run, self.tracker)
                self.taps.create()
            for k, (name, h, g) in enumerate(guests):
                cls = PciGuest.with_nics(g.nics)
                local = self.cabled_here(name, h)
                taps = None
                ssh = ssh_target(self.run, self.tracker, name, k, self.taps.ns) \
                    if g.ssh and self.taps is not None else None
                if mq and self.taps is not None and not local:
                    taps = [self.taps.tap(i, "tester" if self.spec.links[i].tester.startswith(
                        f"{name}.") else "dut") for i in self._links(name, h)]
                guest = cls(self.run, self.tracker, sockets=self._sockets(name, h), name=name,
                            vcpus=g.vcpus, memory_mb=g.memory_mb, guest_hugepages_mb=g.hugepages_mb,
                            image=guest_image(name, h), accel=g.accel,
                            # (with taps no QEMU connects to another's socket)
                            stream_server=None if local else (taps is not None or
                                                              h.role == "tester"),
                            taps=taps, queues=g.queues,
                            netns=self.taps.ns if taps is not None and self.taps else None,
                            ssh=ssh)
                self.guests[name] = guest
                guest.start(wait=False)         # testers listen on the cables, DUTs plug in
                if local:
                    here += self._sockets(name, h)
                if ssh is not None and self.taps is not None:
                    self.taps.management(ssh)
            if mq and self.taps is not None:
                for i in range(len(self.spec.links)):
                    if not self.spec.host_cable(i):
                        self.taps.join(self.taps.tap(i, "tester"), self.taps.tap(i, "dut"))
            if here:
                # QEMU boots once each vhost-user NIC has a backend: a stand-in holds them until
                # the guests are up, the run's DUT connects later (nfvperf.testbed.standin)
                standin = VhostStandIn(self.run, self.tracker, here).start()
                standin.wait_connected()
            for name, guest in self.guests.items():
                try:
                    guest.wait_ready()
                except Exception as e:
                    if standin is not None:
                        standin.check()     # a guest waiting for a stand-in that died: say so
                    raise e
                addrs = [n.pci for n in self.spec.hosts[name].nics if n.pci]
                guest.bind(addrs, GUEST_DRIVER)  # what `nfvperf testbed prepare` does on a server
                if guest.ssh is not None:
                    self.ssh[name] = self._login(name, guest)
                if say:
                    say(f"testbed {self.spec.name}: guest {name} up (accel {guest.accel}), NICs "
                        f"{', '.join(addrs)} bound to {GUEST_DRIVER}")
        except BaseException:
            self.stop()
            raise
        finally:
            if standin is not None:
                standin.stop()
        return self.hosts

    def _login(self, name: str, guest: PciGuest, timeout_s: float = 30.0) -> SshHost:
        """The guest as an SshHost, connected (sshd was started by the guest's init before its
        shell answered; a few retries for a TCG guest that is slow to accept)."""
        assert guest.ssh is not None
        deadline = time.monotonic() + timeout_s
        while True:
            host = SshHost(f"vm:{name}", guest.ssh, role=self.spec.hosts[name].role,
                           work_dir=GUEST_WORK)
            try:
                return host.connect()
            except SshError as e:
                host.close()
                if time.monotonic() > deadline:
                    _, log_text = guest.shell_line(f"tail -5 {GUEST_SSHD_LOG} 2>&1")
                    raise DutFailure(f"guest {name}: no SSH login at {guest.ssh.address} within "
                                     f"{timeout_s:.0f} s ({e}); sshd's log: {log_text.strip()}") from None
                time.sleep(0.5)

    def ssh_logins(self) -> dict[str, int]:
        """Per guest reached over SSH: the logins its sshd accepted (its log, over the serial
        shell)."""
        out = {}
        for name in self.ssh:
            with contextlib.suppress(Exception):
                _, text = self.guests[name].shell_line(
                    f"grep -c 'Accepted publickey' {GUEST_SSHD_LOG}")
                out[name] = int(text.strip() or 0)
        return out

    @property
    def hosts(self) -> dict[str, Any]:
        """name -> the guest's host object: its SshHost (``guest.ssh``), else its GuestPciHost."""
        return {n: self.ssh.get(n) or g.host for n, g in self.guests.items()}

    def stop(self) -> None:
        """Stop the guests (DUTs first) and release what they left (sockets, initramfs copies).
        Before each guest powers off, what the run left in it (:meth:`GuestPciHost.leftovers`:
        its processes, files, hugepages in use) is written to ``guests-left.json`` in the run
        directory and logged when not nothing."""
        left: dict[str, Any] = {}
        if self.taps is not None and self.taps.joined:  # the cables' counters, QEMUs still up
            with contextlib.suppress(OSError):
                (self.run.run_dir / "cables.json").write_text(
                    json.dumps(self.taps.stats(), indent=1) + "\n")
        for h in self.ssh.values():     # the run's processes in the guests die with the channels
            with contextlib.suppress(Exception):
                h.close()
        if self.ssh:
            logins = self.ssh_logins()
            with contextlib.suppress(OSError):
                (self.run.run_dir / "guests-ssh.json").write_text(json.dumps(
                    {n: {"address": h.ssh.address, "logins": logins.get(n)}
                     for n, h in self.ssh.items()}, indent=1) + "\n")
        self.ssh = {}
        for name, g in reversed(list(self.guests.items())):
            with contextlib.suppress(Exception):
                g.host.close()
                if g.ready:
                    left[name] = g.host.leftovers(self.run.tag)
                    if any(left[name].values()):
                        log.warning("guest %s: the run %s left %s", name, self.run.tag, left[name])
            with contextlib.suppress(Exception):
                g.stop()
        self.guests = {}
        self.tracker.release_all()
        if left:
            with contextlib.suppress(OSError):
                (self.run.run_dir / "guests-left.json").write_text(json.dumps(left, indent=1) + "\n")
