"""``nfvperf testbed prepare``'s generated files (nfvperf.testbed.prepare) and the role's package list."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nfvperf.testbed.prepare import ansible_dir, parse_output, playbook_argv, summary_lines, write_files
from nfvperf.testbed.prepare import PrepareResult
from nfvperf.testbed.spec import validate_testbed

ROOT = Path(__file__).resolve().parents[2]
KEY_A = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFh"
KEY_B = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJi"


def _spec(tmp_path: Path):
    kh = tmp_path / "kh"
    kh.write_text("# a comment\n[192.0.2.12]:2222 " + KEY_B + "\n")
    return validate_testbed({"name": "lab1", "hosts": {
        "tester1": {"role": "tester", "ssh": {"address": "192.0.2.10", "key": "~/.ssh/lab", "host_key": KEY_A},
                    "nics": [{"name": "p0", "pci": "0000:3b:00.0"}]},
        "dut1": {"role": "dut", "ssh": {"address": "192.0.2.12", "port": 2222, "user": "bench",
                                        "known_hosts": str(kh)},
                 "nics": [{"name": "p0", "pci": "0000:05:00.0", "driver": "uio_pci_generic"}],
                 "cpu": {"isolated": "2-15"}, "hugepages": {"1G": 8}},
        "ctl": {"role": "vnf", "local": True}},
        "links": [{"tester": "tester1.p0", "dut": "dut1.p0"}]})


def test_testbed_prepare_files(tmp_path) -> None:
    spec = _spec(tmp_path)
    files = write_files(spec, tmp_path / "gen", ansible_dir() / "roles")
    assert (tmp_path / "gen").stat().st_mode & 0o077 == 0
    assert files.known_hosts.read_text().splitlines() == [f"192.0.2.10 {KEY_A}", f"[192.0.2.12]:2222 {KEY_B}"]
    inv = yaml.safe_load(files.inventory.read_text())["all"]
    assert inv["vars"]["ansible_python_interpreter"] == "/usr/bin/python3"
    t = inv["children"]["nfvperf_tester"]["hosts"]["tester1"]
    d = inv["children"]["nfvperf_dut"]["hosts"]["dut1"]
    c = inv["children"]["nfvperf_vnf"]["hosts"]["ctl"]
    assert t["ansible_host"] == "192.0.2.10" and t["ansible_port"] == 22 and t["ansible_user"] == "root"
    assert t["ansible_ssh_private_key_file"] == str(Path("~/.ssh/lab").expanduser())
    assert "ansible_become" not in t and d["ansible_become"] is True       # bench is not root
    for h in (t, d):
        args = h["ansible_ssh_common_args"]
        assert "-o StrictHostKeyChecking=yes" in args and f"UserKnownHostsFile={files.known_hosts}" in args
        assert "GlobalKnownHostsFile=/dev/null" in args
    assert d["nfvperf_nics"] == [{"name": "p0", "pci": "0000:05:00.0", "iface": None, "driver": "uio_pci_generic"}]
    assert d["nfvperf_cpu"] == {"isolated": "2-15"} and d["nfvperf_hugepages"] == {"1G": 8}
    assert c["ansible_connection"] == "local" and "ansible_host" not in c
    cfg = files.config.read_text()
    assert "host_key_checking = True" in cfg and str(ansible_dir() / "roles") in cfg


def test_testbed_prepare_argv_and_recap(tmp_path) -> None:
    spec = _spec(tmp_path)
    files = write_files(spec, tmp_path / "gen", ansible_dir() / "roles")
    argv = playbook_argv(files, ansible_dir() / "prepare.yml", check=True, limit="dut1")
    assert argv[:3] == [sys.executable, "-m", "ansible.cli.playbook"] and "--check" in argv
    assert argv[argv.index("--limit") + 1] == "dut1"
    out = ("fatal: [dut1]: UNREACHABLE! => {\"changed\": false, \"msg\": \"Failed to connect to the host via ssh: "
           "Host key verification failed.\", \"unreachable\": true}\n"
           "PLAY RECAP ****\n"
           "dut1                       : ok=0    changed=0    unreachable=1    failed=0    skipped=0    rescued=0\n"
           "tester1                    : ok=20   changed=2    unreachable=0    failed=0    skipped=7    rescued=0\n")
    recap, refused = parse_output(out, spec)
    assert refused == ["dut1"]
    assert recap["tester1"].ok == 20 and recap["tester1"].changed == 2 and recap["dut1"].unreachable == 1
    res = PrepareResult(rc=4, check=True, recap=recap, key_refused=refused)
    assert not res.ok
    text = "\n".join(summary_lines(spec, res))
    assert "dut1: REFUSED" in text and "tester1 (tester): would change" in text and "ctl (vnf): not reached" in text


def test_testbed_prepare_role_installs_the_install_deps_packages() -> None:
    m = re.search(r"APT_PKGS=\(([^)]*)\)", (ROOT / "scripts" / "install-deps.sh").read_text())
    assert m
    role = yaml.safe_load((ansible_dir() / "roles" / "nfvperf_host" / "defaults" / "main.yml").read_text())
    assert sorted(role["nfvperf_packages"]) == sorted(m.group(1).split()), \
        "ansible/roles/nfvperf_host/defaults/main.yml: nfvperf_packages must equal APT_PKGS of install-deps.sh"


def test_testbed_prepare_playbook_syntax(tmp_path) -> None:
    pytest.importorskip("ansible", reason="ansible-core not installed (scripts/install-deps.sh)")
    files = write_files(_spec(tmp_path), tmp_path / "gen", ansible_dir() / "roles")
    p = subprocess.run([sys.executable, "-m", "ansible.cli.playbook", "-i", str(files.inventory),
                        str(ansible_dir() / "prepare.yml"), "--syntax-check"], capture_output=True, text=True,
                       env=dict(os.environ, ANSIBLE_CONFIG=str(files.config)), timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr


def test_testbed_readme_example_is_valid() -> None:
    """The two-server lab of docs/testbeds.md (the multi-host reference) is a valid testbed, and
    what a run stores of it has no key path and no host key."""
    text = (ROOT / "docs" / "testbeds.md").read_text()
    m = re.search(r"```yaml\n(# lab1\.yaml\n.*?)```", text, re.S)
    assert m, "docs/testbeds.md: no ```yaml block starting with '# lab1.yaml'"
    spec = validate_testbed(yaml.safe_load(m.group(1)), "docs/testbeds.md")
    assert [(lk.tester, lk.dut) for lk in spec.links] == [("tester1.p0", "dut1.p0"), ("tester1.p1", "dut1.p1")]
    assert spec.role_host("tester")[0] == "tester1" and spec.role_host("dut")[0] == "dut1"
    assert all(len(h.nics) == 2 and all(n.pci for n in h.nics) for h in spec.hosts.values())
    public = str(spec.public())
    assert "nfvperf_lab1" not in public and "AAAAC3Nza" not in public and "known_hosts" not in public
