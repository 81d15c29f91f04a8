"""Hosts of a multi-host testbed on one machine (issue 10): network namespaces with their own sshd.

``make_testbed(...)`` (a pytest fixture returning a factory) or ``testbed_hosts`` (two hosts,
``tester1`` and ``dut1``, two cables) build, for one test:

* one network namespace per host (``tb<6 hex>-<host>``, unique per test), each with a management
  veth to the root namespace: host ``i`` gets ``10.77.<N>.<4i+2>/30`` inside, the root side
  ``10.77.<N>.<4i+1>/30`` (``N`` picked among the /24s of 10.77.0.0/16 no address of this machine
  uses), so the controller reaches each host over a real TCP connection and nothing else;
* an ``sshd`` (Debian's openssh-server) per namespace, started by the fixture with a generated
  ed25519 host key and config in a temp dir, listening only on the namespace's address, public-key
  authentication only (a generated user key), no passwords;
* "cabling": veth pairs between the tester namespace and the DUT namespace (``links``);
* a testbed YAML (``tb.path``) with every host's real host key, the user key, the NICs (the cabling
  veth ends as ``iface:``) and the links; ``tb.spec`` is it loaded with
  :func:`nfvperf.testbed.spec.load_testbed`.

Teardown kills only the processes inside its own namespaces (its sshds, their sessions and
whatever a test started through them), then deletes the namespaces (their veths go with them).

Usage in a test module::

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from testbed_hosts import make_testbed, testbed_hosts  # noqa: F401  (fixtures)
"""
from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

import pytest
import yaml

SSHD = "/usr/sbin/sshd"          # sshd re-executes itself: it needs its absolute path
MGMT_NET = ipaddress.ip_network("10.77.0.0/16")


@dataclass
class TestbedHost:
    __test__ = False

    name: str
    role: str
    netns: str
    address: str                 # management address inside the namespace (sshd listens here)
    root_if: str                 # management veth end in the root namespace
    host_key: str                # "ssh-ed25519 AAAA..." (public)
    host_key_file: Path          # the private host key (to rotate it in a test)
    sshd: Optional[subprocess.Popen] = None
    sshd_config: Optional[Path] = None
    nics: dict[str, str] = field(default_factory=dict)   # nic name -> interface in the namespace

    def exec(self, argv: Sequence[str], check: bool = True, timeout: float = 30
             ) -> subprocess.CompletedProcess:
        """Run ``argv`` inside this host's namespace directly (not over SSH): test set-up and
        checks only."""
        return subprocess.run(["ip", "netns", "exec", self.netns, *argv], capture_output=True,
                              text=True, check=check, timeout=timeout)

    def sshd_pids(self) -> list[int]:
        """Every sshd process in this host's namespace (the listener and its sessions)."""
        out = []
        for pid in _netns_pids(self.netns):
            with contextlib.suppress(OSError):
                if Path(f"/proc/{pid}/comm").read_text().strip() == "sshd":
                    out.append(pid)
        return out

    def kill_sshd(self) -> None:
        """SIGKILL every sshd of this host: the host is lost to the controller."""
        for pid in self.sshd_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@dataclass
class Testbed:
    __test__ = False

    name: str
    hosts: dict[str, TestbedHost]
    links: list[tuple[str, str]]           # ("tester1.p0", "dut1.p0")
    path: Path                             # the testbed YAML
    user_key: Path                         # private key the controller logs in with
    tmp: Path
    data: dict = field(default_factory=dict)

    @property
    def spec(self):
        from nfvperf.testbed.spec import load_testbed
        return load_testbed(self.path)

    def write(self, data: Optional[dict] = None, path: Optional[Path] = None) -> Path:
        """Write ``data`` (default: this testbed's) as YAML; return the path."""
        p = path or self.path
        p.write_text(yaml.safe_dump(data if data is not None else self.data, sort_keys=False))
        return p

    def processes(self, host: str) -> list[tuple[int, str]]:
        """(pid, command line) of the processes in ``host``'s namespace other than sshd."""
        out = []
        for pid in _netns_pids(self.hosts[host].netns):
            with contextlib.suppress(OSError):
                if Path(f"/proc/{pid}/comm").read_text().strip() == "sshd":
                    continue
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                out.append((pid, cmd.strip()))
        return out


# ------------------------------------------------------------------------------------ helpers
def _netns_pids(ns: str) -> list[int]:
    cp = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
    return [int(p) for p in cp.stdout.split() if p.isdigit()]


def _ip(*args: str, ns: Optional[str] = None) -> None:
    cmd = ["ip", "netns", "exec", ns, "ip", *args] if ns else ["ip", *args]
    subprocess.run(cmd, check=True, capture_output=True, text=True)


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 of 10.77.0.0/16 that no interface of this machine (root namespace) uses."""
    cp = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True)
    cp2 = subprocess.run(["ip", "-o", "-4", "route", "show"], capture_output=True, text=True)
    used = cp.stdout + cp2.stdout
    for _ in range(200):
        net = ipaddress.ip_network(f"10.77.{secrets.randbelow(254) + 1}.0/24")
        if f"10.77.{str(net.network_address).split('.')[2]}." not in used:
            return net
    raise RuntimeError("no free /24 in 10.77.0.0/16 for the testbed's management network")


def _keygen(path: Path, comment: str) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                   check=True, capture_output=True)
    pub = path.with_name(path.name + ".pub").read_text().split()
    return f"{pub[0]} {pub[1]}"


def _sshd_config(d: Path, address: str, host_key: Path, authorized: Path) -> Path:
    cfg = d / "sshd_config"
    cfg.write_text("\n".join([
        f"ListenAddress {address}",
        "Port 22",
        f"HostKey {host_key}",
        f"PidFile {d / 'sshd.pid'}",
        f"AuthorizedKeysFile {authorized}",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin prohibit-password",
        "UsePAM no",
        "StrictModes no",
        "AllowTcpForwarding yes",
        "X11Forwarding no",
        "PrintMotd no",
        "MaxSessions 64",
        # the host side of the keepalive: a controller gone silent ends its sessions (and the
        # guarded processes with them) within ~3 s, as recommended for testbed hosts
        "ClientAliveInterval 1",
        "ClientAliveCountMax 3",
        "MaxStartups 64:30:128",
        "LogLevel VERBOSE",
        "Subsystem sftp internal-sftp",
        "",
    ]))
    return cfg


def _wait_port(address: str, port: int, sshd: subprocess.Popen, log: Path, timeout: float = 10
               ) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sshd.poll() is not None:
            raise RuntimeError(f"sshd exited ({sshd.returncode}): {log.read_text()[-2000:]}")
        with contextlib.suppress(OSError):
            with socket.create_connection((address, port), timeout=0.5) as s:
                if s.recv(64).startswith(b"SSH-"):
                    return
        time.sleep(0.1)
    raise RuntimeError(f"sshd on {address}:{port} did not answer within {timeout:g} s")


def start_sshd(h: TestbedHost, d: Path, authorized: Path) -> None:
    """(Re)start ``h``'s sshd with its current host key (a test may rotate the key)."""
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)     # privilege separation directory
    cfg = _sshd_config(d, h.address, h.host_key_file, authorized)
    log = d / "sshd.log"
    h.sshd = subprocess.Popen(["ip", "netns", "exec", h.netns, SSHD, "-D", "-e", "-f", str(cfg)],
                              stdin=subprocess.DEVNULL, stdout=open(log, "ab"),
                              stderr=subprocess.STDOUT, start_new_session=True)
    h.sshd_config = cfg
    _wait_port(h.address, 22, h.sshd, log)


def restart_sshd(tb: Testbed, host: str) -> None:
    """Start ``host``'s sshd again (after :meth:`TestbedHost.kill_sshd`): the host is back."""
    h = tb.hosts[host]
    if h.sshd is not None:
        h.sshd.wait(5)
    start_sshd(h, h.host_key_file.parent, tb.tmp / "authorized_keys")


def rotate_host_key(tb: Testbed, host: str) -> str:
    """Give ``host`` a new host key and restart its sshd (the testbed file keeps the old key):
    what a reinstalled or impostor host looks like.  Returns the new public key."""
    h = tb.hosts[host]
    h.kill_sshd()
    if h.sshd is not None:
        h.sshd.wait(5)
    for p in (h.host_key_file, h.host_key_file.with_name(h.host_key_file.name + ".pub")):
        p.unlink()
    h.host_key = _keygen(h.host_key_file, f"{host}-rotated")
    start_sshd(h, h.host_key_file.parent, tb.tmp / "authorized_keys")
    return h.host_key


def _teardown(hosts: list[TestbedHost]) -> None:
    for h in hosts:
        for _ in range(3):
            pids = _netns_pids(h.netns)
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        if h.sshd is not None:
            with contextlib.suppress(Exception):
                h.sshd.wait(5)
    for h in hosts:
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("link", "del", h.root_if)
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("netns", "del", h.netns)


def build_testbed(tmp: Path, hosts: Sequence[tuple[str, str]] = (("tester1", "tester"),
                                                                  ("dut1", "dut")),
                  links: int = 2, created: Optional[list[TestbedHost]] = None) -> Testbed:
    """Build the hosts (see the module doc); ``created`` collects them for the teardown."""
    created = created if created is not None else []
    uid = secrets.token_hex(3)
    tb_name = f"tb{uid}"
    net = _free_subnet()
    base = int(net.network_address)
    tmp.mkdir(parents=True, exist_ok=True)
    user_key = tmp / "id_ed25519"
    user_pub = _keygen(user_key, "nfvperf-controller")
    authorized = tmp / "authorized_keys"
    authorized.write_text(user_pub + "\n")
    for i, (name, role) in enumerate(hosts):
        d = tmp / name
        d.mkdir()
        h = TestbedHost(name=name, role=role, netns=f"{tb_name}-{name}",
                        address=str(ipaddress.ip_address(base + 4 * i + 2)),
                        root_if=f"{tb_name}m{i}", host_key="", host_key_file=d / "ssh_host_ed25519_key")
        _ip("netns", "add", h.netns)
        created.append(h)
        _ip("link", "set", "lo", "up", ns=h.netns)
        peer = f"{tb_name}n{i}"
        _ip("link", "add", h.root_if, "type", "veth", "peer", "name", peer)
        _ip("link", "set", peer, "netns", h.netns)
        _ip("addr", "add", f"{ipaddress.ip_address(base + 4 * i + 1)}/30", "dev", h.root_if)
        _ip("link", "set", h.root_if, "up")
        _ip("addr", "add", f"{h.address}/30", "dev", peer, ns=h.netns)
        _ip("link", "set", peer, "up", ns=h.netns)
        h.host_key = _keygen(h.host_key_file, f"{name}-host")
        start_sshd(h, d, authorized)
    by_role = {h.role: h for h in created}
    tester, dut = by_role["tester"], by_role["dut"]
    link_refs = []
    for j in range(links):
        t_if, d_if = f"{tb_name}t{j}", f"{tb_name}d{j}"
        _ip("link", "add", t_if, "type", "veth", "peer", "name", d_if)
        for ifname, h in ((t_if, tester), (d_if, dut)):
            _ip("link", "set", ifname, "netns", h.netns)
            subprocess.run(["ip", "netns", "exec", h.netns, "sysctl", "-qw",
                            f"net.ipv6.conf.{ifname}.disable_ipv6=1"], capture_output=True)
            _ip("link", "set", ifname, "up", ns=h.netns)
            h.nics[f"p{j}"] = ifname
        link_refs.append((f"{tester.name}.p{j}", f"{dut.name}.p{j}"))
    data = {
        "name": tb_name,
        "description": "namespaces with their own sshd (tests/integration/testbed_hosts.py)",
        "hosts": {h.name: {
            "role": h.role,
            "ssh": {"address": h.address, "port": 22, "user": "root", "key": str(user_key),
                    "host_key": h.host_key, "connect_timeout_s": 5, "keepalive_s": 1},
            "nics": [{"name": n, "iface": i, "speed": "10G"} for n, i in h.nics.items()],
            "work_dir": str(tmp / h.name / "work"),
        } for h in created},
        "links": [{"tester": t, "dut": d} for t, d in link_refs],
    }
    tb = Testbed(name=tb_name, hosts={h.name: h for h in created}, links=link_refs,
                 path=tmp / "testbed.yaml", user_key=user_key, tmp=tmp, data=data)
    tb.write()
    return tb


@pytest.fixture
def make_testbed(tmp_path) -> Callable[..., Testbed]:
    """A factory: ``make_testbed(hosts=[("tester1", "tester"), ("dut1", "dut")], links=2)``."""
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces, sshd)")
    if not Path(SSHD).exists():
        pytest.skip("sshd not installed (Debian: openssh-server; scripts/install-deps.sh)")
    created: list[TestbedHost] = []
    count = iter(range(100))

    def make(hosts: Sequence[tuple[str, str]] = (("tester1", "tester"), ("dut1", "dut")),
             links: int = 2) -> Testbed:
        return build_testbed(tmp_path / f"testbed{next(count)}", hosts, links, created)

    try:
        yield make
    finally:
        _teardown(created)


@pytest.fixture
def testbed_hosts(make_testbed) -> Testbed:
    """Two hosts (``tester1``, ``dut1``) cabled by two veth pairs (``p0``, ``p1``)."""
    return make_testbed()
