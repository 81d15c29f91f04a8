"""``nfvperf testbed prepare lab1.yaml [--check]``: prepare the testbed's hosts with Ansible (issue 10
item 5).

The playbook and its role live in the repository (``ansible/prepare.yml``,
``ansible/roles/nfvperf_host``): packages (the list of scripts/install-deps.sh), hugepages including
1 GB pages, kernel command line advice (isolcpus/nohz_full/rcu_nocbs from the testbed's cpu hints,
the IOMMU for vfio-pci, 1 GB pages at boot), the listed NICs bound to vfio-pci, irqbalance off.

From the testbed file this module writes, in a private directory (0700, removed afterwards unless
``--inventory-dir`` is given):

* ``inventory.yml``: groups ``nfvperf_tester``/``nfvperf_dut``/``nfvperf_vnf``; per host its SSH
  address, port, user and key file (or ``ansible_connection: local`` for a ``local: true`` host)
  and the ``nfvperf_*`` variables the role reads (NICs, hugepages, cpu hints, work_dir);
* ``known_hosts``: the host keys the testbed file names (``host_key:``, and the lines of each
  ``known_hosts:`` file it names).  SSH runs with ``StrictHostKeyChecking=yes`` against this file
  only, so an unknown or changed host key is refused, never learnt;
* ``ansible.cfg``: host key checking on, the role path, no retry files, a private control path.

ansible-playbook (ansible-core from PyPI, ``pip install 'nfvperf[ansible]'``; scripts/install-deps.sh
installs it) runs as ``python3 -m ansible.cli.playbook`` with the same interpreter as nfvperf; its
output streams to the terminal and its recap is parsed (:class:`PrepareResult`).  ``--check`` is
Ansible's check mode: nothing on any host changes.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

from nfvperf.testbed.spec import HostSpec, TestbedError, TestbedSpec
import importlib.util

ANSIBLE_HINT = ("ansible-core is not installed for this Python: pip install 'nfvperf[ansible]' "
                "(scripts/install-deps.sh installs it)")
_RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)"
                    r"(?:\s+skipped=(\d+))?(?:\s+rescued=(\d+))?(?:\s+ignored=(\d+))?")
_KEY_REFUSED = ("Host key verification failed", "REMOTE HOST IDENTIFICATION HAS CHANGED",
                "No ED25519 host key is known", "host key is known for", "Host key for")


def ansible_dir() -> Path:
    """The repository's ``ansible/`` directory (``$NFVPERF_ANSIBLE_DIR`` overrides)."""
    env = os.environ.get("NFVPERF_ANSIBLE_DIR")
    d = Path(env) if env else Path(__file__).resolve().parents[3] / "ansible"
    if not (d / "prepare.yml").exists():
        raise TestbedError([f"no playbook at {d / 'prepare.yml'}: run from a checkout of nfvperf "
                            f"(pip install -e) or set NFVPERF_ANSIBLE_DIR to its ansible/ directory"])
    return d


def known_hosts_lines(spec: TestbedSpec) -> list[str]:
    """known_hosts lines for every SSH host: its ``host_key`` as ``[address]:port type key`` (plain
    ``address`` on port 22), then the lines of the ``known_hosts`` files the testbed names."""
    lines: list[str] = []
    for name, h in spec.hosts.items():
        if h.ssh is None:
            continue
        who = h.ssh.address if h.ssh.port == 22 else f"[{h.ssh.address}]:{h.ssh.port}"
        if h.ssh.host_key:
            ktype, kdata = h.ssh.host_key.split()[:2]
            lines.append(f"{who} {ktype} {kdata}")
        kh = h.ssh.known_hosts_path()
        if kh is not None:
            try:
                text = kh.read_text()
            except OSError as e:
                raise TestbedError([f"hosts.{name}.ssh.known_hosts: cannot read {kh}: {e.strerror}"]) from None
            lines += [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return lines


def host_vars(name: str, h: HostSpec, known_hosts: Path) -> dict[str, Any]:
    """The inventory entry of one host: how to reach it and what the role prepares there."""
    v: dict[str, Any] = {
        "nfvperf_role": h.role,
        "nfvperf_nics": [{"name": n.name, "pci": n.pci, "iface": n.iface, "driver": n.driver} for n in h.nics],
        "nfvperf_hugepages": dict(h.hugepages),
        "nfvperf_cpu": h.cpu.model_dump(exclude_none=True),
        "nfvperf_work_dir": h.work_dir,
    }
    if h.ssh is None:
        v["ansible_connection"] = "local"
        if os.geteuid() != 0:
            v["ansible_become"] = True
        return v
    v.update(ansible_host=h.ssh.address, ansible_port=h.ssh.port, ansible_user=h.ssh.user,
             ansible_ssh_common_args=" ".join([
                 "-o StrictHostKeyChecking=yes", f"-o UserKnownHostsFile={known_hosts}",
                 "-o GlobalKnownHostsFile=/dev/null", "-o IdentitiesOnly=yes", "-o BatchMode=yes",
                 f"-o ConnectTimeout={int(h.ssh.connect_timeout_s)}",
                 f"-o ServerAliveInterval={max(1, int(h.ssh.keepalive_s))}", "-o ServerAliveCountMax=3"]))
    key = h.ssh.key_path()
    if key is not None:
        v["ansible_ssh_private_key_file"] = str(key)
    if h.ssh.user != "root":
        v["ansible_become"] = True
    return v


@dataclass
class PrepareFiles:
    dir: Path
    inventory: Path
    known_hosts: Path
    config: Path


def write_files(spec: TestbedSpec, out: Path, roles: Path) -> PrepareFiles:
    """inventory.yml, known_hosts and ansible.cfg for ``spec`` in ``out`` (created 0700)."""
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o700)
    kh = out / "known_hosts"
    kh.write_text("".join(ln + "\n" for ln in known_hosts_lines(spec)))
    groups: dict[str, Any] = {}
    for name, h in spec.hosts.items():
        groups.setdefault(f"nfvperf_{h.role}", {"hosts": {}})["hosts"][name] = host_vars(name, h, kh)
    inv = out / "inventory.yml"
    # the hosts are Debian/Ubuntu (the role uses apt): their system Python, which has python3-apt,
    # never a user's pyenv/venv that interpreter discovery might find on the login PATH
    inv.write_text(yaml.safe_dump({"all": {"vars": {"nfvperf_testbed": spec.name,
                                                    "ansible_python_interpreter": "/usr/bin/python3"},
                                           "children": groups}},
                                  sort_keys=False))
    inv.chmod(0o600)
    cfg = out / "ansible.cfg"
    cfg.write_text("\n".join([
        "[defaults]", "host_key_checking = True", f"roles_path = {roles}", "retry_files_enabled = False",
        "interpreter_python = auto_silent", f"local_tmp = {out / 'tmp'}", "forks = 10", "",
        "[ssh_connection]", "pipelining = True", f"control_path_dir = {out / 'cp'}",
        "ssh_args = -o ControlMaster=auto -o ControlPersist=10s", ""]))
    return PrepareFiles(dir=out, inventory=inv, known_hosts=kh, config=cfg)


@dataclass
class HostRecap:
    ok: int
    changed: int
    unreachable: int
    failed: int
    skipped: int = 0


@dataclass
class PrepareResult:
    rc: int
    check: bool
    recap: dict[str, HostRecap] = field(default_factory=dict)
    key_refused: list[str] = field(default_factory=list)     # hosts whose host key was refused
    output: str = ""

    @property
    def ok(self) -> bool:
        return self.rc == 0 and all(r.failed == 0 and r.unreachable == 0 for r in self.recap.values())


def parse_output(text: str, spec: TestbedSpec) -> tuple[dict[str, HostRecap], list[str]]:
    """The PLAY RECAP per host, and the hosts whose SSH host key was refused."""
    recap: dict[str, HostRecap] = {}
    for line in text.splitlines():
        m = _RECAP.match(line.strip())
        if m and m.group(1) in spec.hosts:
            recap[m.group(1)] = HostRecap(ok=int(m.group(2)), changed=int(m.group(3)),
                                          unreachable=int(m.group(4)), failed=int(m.group(5)),
                                          skipped=int(m.group(6) or 0))
    refused = []
    for line in text.splitlines():
        m = re.search(r"\[(\S+?)\]: UNREACHABLE!|^fatal: \[(\S+?)\]: UNREACHABLE", line)
        host = (m.group(1) or m.group(2)) if m else None
        if host and host in spec.hosts and any(k in line for k in _KEY_REFUSED) and host not in refused:
            refused.append(host)
    return recap, refused


def playbook_argv(files: PrepareFiles, playbook: Path, check: bool, limit: Optional[str] = None,
                  verbose: int = 0) -> list[str]:
    argv = [sys.executable, "-m", "ansible.cli.playbook", "-i", str(files.inventory), str(playbook)]
    if check:
        argv += ["--check", "--diff"]
    if limit:
        argv += ["--limit", limit]
    if verbose:
        argv.append("-" + "v" * min(verbose, 4))
    return argv


def run_prepare(spec: TestbedSpec, *, check: bool, limit: Optional[str] = None, verbose: int = 0,
                inventory_dir: Optional[Path] = None, echo: Callable[[str], None] = print,
                timeout_s: float = 3600) -> PrepareResult:
    """Write the files, run ansible-playbook, stream its output through ``echo``, parse the recap."""
    guests = [n for n, _ in spec.guests() if limit in (None, n)]
    if guests:
        # a guest is booted and its NICs bound by nfvperf for each run; as an inventory host it
        # would be this machine (bind its addresses here)
        others = [n for n in spec.hosts if spec.hosts[n].guest is None]
        raise TestbedError([f"hosts.{n}: a guest: host is booted and prepared by nfvperf for each "
                            f"run (its NICs bound to uio_pci_generic at boot); nothing to prepare"
                            + (f": give --limit with one of {', '.join(others)}" if others else "")
                            for n in guests])
    if importlib.util.find_spec("ansible") is None:
        raise TestbedError([ANSIBLE_HINT])
    adir = ansible_dir()
    if limit and limit not in spec.hosts:
        raise TestbedError([f"--limit {limit}: no such host in testbed {spec.name} "
                            f"(hosts: {', '.join(spec.hosts)})"])
    tmp = None if inventory_dir else Path(tempfile.mkdtemp(prefix=f"nfvperf-prepare-{spec.name}-"))
    try:
        files = write_files(spec, inventory_dir or tmp or Path("."), adir / "roles")
        env = dict(os.environ, ANSIBLE_CONFIG=str(files.config), ANSIBLE_HOST_KEY_CHECKING="True",
                   ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", PYTHONUNBUFFERED="1")
        argv = playbook_argv(files, adir / "prepare.yml", check, limit, verbose)
        lines: list[str] = []
        with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                              cwd=str(files.dir), stdin=subprocess.DEVNULL) as p:
            assert p.stdout is not None
            for line in p.stdout:
                lines.append(line)
                echo(line.rstrip("\n"))
            rc = p.wait(timeout=timeout_s)
        text = "".join(lines)
        recap, refused = parse_output(text, spec)
        return PrepareResult(rc=rc, check=check, recap=recap, key_refused=refused, output=text)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def summary_lines(spec: TestbedSpec, res: PrepareResult) -> list[str]:
    """What the CLI prints after the playbook: one line per host, then the verdict."""
    mode = "check (dry run: nothing changed)" if res.check else "applied"
    out = [f"testbed {spec.name}: prepare {mode}"]
    for name, h in spec.hosts.items():
        r = res.recap.get(name)
        if name in res.key_refused:
            out.append(f"  {name}: REFUSED — its SSH host key is not the one the testbed file names "
                       f"(hosts.{name}.ssh.host_key / known_hosts); check the key out of band, never "
                       f"accept it blindly")
        elif r is None:
            out.append(f"  {name} ({h.role}): not reached (see the output above)")
        else:
            verdict = ("FAILED" if r.failed else "UNREACHABLE" if r.unreachable else
                       ("would change" if res.check else "changed") if r.changed else "ok")
            out.append(f"  {name} ({h.role}): {verdict} — ok={r.ok} changed={r.changed} failed={r.failed} "
                       f"unreachable={r.unreachable} skipped={r.skipped}")
    return out
