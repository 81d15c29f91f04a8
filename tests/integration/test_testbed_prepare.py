"""``nfvperf testbed prepare --check`` (issue 10 item 5) against the namespace hosts of
tests/integration/testbed_hosts.py: the real ansible-playbook (ansible-core from PyPI) over the
hosts' real sshd, host keys from the testbed file only.

The namespace hosts share this machine's kernel and file system, so these tests run the playbook
in check mode only: they must never rebind a NIC, allocate pages or write a file here."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))   # testbed_hosts, whatever the import mode
from testbed_hosts import make_testbed, rotate_host_key, testbed_hosts  # noqa: E402,F401  (fixtures)

pytestmark = [pytest.mark.root, pytest.mark.no_polling]
REPO = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           COLUMNS="200")
HP1G = Path("/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages")
SYSCTL = Path("/etc/sysctl.d/80-nfvperf-hugepages.conf")


@pytest.fixture(autouse=True)
def _ansible():
    pytest.importorskip("ansible", reason="ansible-core not installed (scripts/install-deps.sh)")


def prepare(tb_path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nfvperf", "testbed", "prepare", str(tb_path), *extra],
                          capture_output=True, text=True, env=ENV, cwd=REPO, timeout=600)


def test_testbed_prepare_check_over_ssh_changes_nothing(testbed_hosts):
    tb = testbed_hosts
    dut = tb.data["hosts"]["dut1"]
    dut["hugepages"] = {"2M": 64, "1G": 1}
    dut["cpu"] = {"isolated": "1", "housekeeping": "0"}
    tb.write()
    hp1g = HP1G.read_text() if HP1G.exists() else None
    had_sysctl = SYSCTL.exists()
    p = prepare(tb.path, "--check")
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-6000:]
    assert "prepare check (dry run: nothing changed)" in out
    for name in ("tester1", "dut1"):
        line = next(ln for ln in out.splitlines() if ln.startswith(f"  {name} ("))
        assert "failed=0" in line and "unreachable=0" in line, line
    # the role ran on the hosts, over SSH: it read their kernel and their interfaces
    assert "isolcpus=1" in out and "nohz_full=1" in out and "rcu_nocbs=1" in out
    assert "hugepagesz=1G" in out and "hugepages=1" in out
    assert "irqbalance" in out
    for name in ("tester1", "dut1"):
        log = (tb.tmp / name / "sshd.log").read_text()
        assert "Accepted publickey for root" in log, log[-2000:]
    # and changed nothing: no directory, no sysctl file, no 1 GB page
    for name in ("tester1", "dut1"):
        assert not Path(tb.data["hosts"][name]["work_dir"]).exists()
    assert SYSCTL.exists() == had_sysctl
    assert (HP1G.read_text() if HP1G.exists() else None) == hp1g
    assert str(tb.user_key) not in out


def test_testbed_prepare_refuses_a_changed_host_key(testbed_hosts):
    tb = testbed_hosts
    rotate_host_key(tb, "dut1")          # the testbed file keeps the old key
    p = prepare(tb.path, "--check")
    out = p.stdout + p.stderr
    assert p.returncode == 1, out[-4000:]
    assert "dut1: REFUSED" in out and "hosts.dut1.ssh.host_key" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("  tester1 ("))
    assert "failed=0" in line and "unreachable=0" in line
    log = (tb.tmp / "dut1" / "sshd.log").read_text()
    assert "Accepted publickey" not in log.split("Server listening")[-1]    # never logged in


def test_testbed_prepare_unknown_pci_fails_naming_the_nic(testbed_hosts):
    tb = testbed_hosts
    tb.data["hosts"]["dut1"]["nics"].append({"name": "p9", "pci": "0000:7f:1f.7", "speed": "10G"})
    tb.write()
    p = prepare(tb.path, "--check", "--limit", "dut1")
    out = p.stdout + p.stderr
    assert p.returncode == 1, out[-4000:]
    assert "hosts.dut1.nics.p9: no PCI device 0000:7f:1f.7 on dut1" in out
    assert "dut1 (dut): FAILED" in out


def test_testbed_prepare_check_reports_nic_binding(testbed_hosts):
    """A PCI device of this machine without a driver (the host bridge 0000:00:00.0, never a NIC in
    use) in check mode: the role reads its driver and says what it would bind; vfio-pci without an
    IOMMU is refused with the advice."""
    dev = Path("/sys/bus/pci/devices/0000:00:00.0")
    if not dev.exists() or (dev / "driver").exists():
        pytest.skip("no driverless PCI device 0000:00:00.0 here")
    tb = testbed_hosts
    tb.data["hosts"]["tester1"]["nics"].append({"name": "p8", "pci": "0000:00:00.0", "driver": "uio_pci_generic"})
    tb.data["hosts"]["dut1"]["nics"].append({"name": "p8", "pci": "0000:00:00.0"})
    tb.write()
    p = prepare(tb.path, "--check")
    out = p.stdout + p.stderr
    assert "would bind 0000:00:00.0 from no driver to uio_pci_generic" in out, out[-4000:]
    line = next(ln for ln in out.splitlines() if ln.startswith("  tester1 ("))
    assert "failed=0" in line, line
    assert not (dev / "driver").exists() and (dev / "driver_override").read_text().strip() in ("", "(null)")
    if any(Path("/sys/kernel/iommu_groups").iterdir()):
        assert "would bind 0000:00:00.0 from no driver to vfio-pci" in out
    else:
        assert p.returncode == 1 and "dut1 has no IOMMU groups" in out and "intel_iommu=on" in out
