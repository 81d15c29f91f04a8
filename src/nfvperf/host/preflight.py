"""Preflight: is this host fit to run the benchmark, and what would make the numbers better?

Each check returns a :class:`Check` (name, status ok/warn/fail, detail, fix).  The list goes into
every result's environment, so a report shows under which conditions it was measured (seed 000 /
002 tuning: isolcpus, nohz_full, irqbalance stopped, performance governor, turbo off, hugepages,
KSM off, the NIC's NUMA node).  A *required* check that fails raises :class:`PreflightError`
whose message says what to do.

``nfvperf preflight`` prints the same list.
"""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from . import hugepages as hp

OVS_VSWITCHD_DPDK = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"
MIN_FREE_HUGEPAGES_MB = 512          # tgen + one DPDK DUT with modest pools
RECOMMENDED_FREE_HUGEPAGES_MB = 2048


class PreflightError(RuntimeError):
    """A required preflight check failed; the message lists each failure and its fix."""

    def __init__(self, failed: Sequence["Check"]):
        self.failed = list(failed)
        lines = ["preflight failed:"]
        for c in failed:
            lines.append(f"  - {c.name}: {c.detail}")
            if c.fix:
                lines.append(f"    fix: {c.fix}")
        super().__init__("\n".join(lines))


@dataclass
class Check:
    name: str
    status: str          # ok | warn | fail
    detail: str
    fix: str = ""
    required: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _read(p: str | Path, default: str = "") -> str:
    try:
        return Path(p).read_text().strip()
    except OSError:
        return default


def _proc_running(comm: str) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and _read(d / "comm") == comm:
            pids.append(int(d.name))
    return pids


# ------------------------------------------------------------------------------------ checks
def check_root() -> Check:
    if os.geteuid() == 0:
        return Check("root", "ok", "running as root")
    return Check("root", "fail", "not root: network namespaces, hugepages and DPDK need root",
                 "run as root (sudo -E nfvperf ...)")


def check_hugepages(min_mb: int = MIN_FREE_HUGEPAGES_MB) -> list[Check]:
    out = []
    mounts = hp.hugetlbfs_mounts()
    if mounts:
        out.append(Check("hugetlbfs", "ok", ", ".join(f"{m.path} ({m.pagesize_kb} kB pages)" for m in mounts)))
    else:
        out.append(Check("hugetlbfs", "warn", "no hugetlbfs mounted (DPDK --in-memory still works)",
                         "mount -t hugetlbfs nodev /dev/hugepages"))
    pools = hp.pools()
    free_mb = sum(p.free * p.size_kb // 1024 for p in pools)
    detail = "; ".join(f"{p.size_kb // 1024} MB pages: {p.free}/{p.total} free" for p in pools) or "none"
    if free_mb >= RECOMMENDED_FREE_HUGEPAGES_MB:
        out.append(Check("hugepages", "ok", f"{free_mb} MB free ({detail})"))
    elif free_mb >= min_mb:
        out.append(Check("hugepages", "warn", f"only {free_mb} MB free ({detail})",
                         "echo 1024 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages, or "
                         "boot with default_hugepagesz=1G hugepagesz=1G hugepages=4"))
    else:
        out.append(Check("hugepages", "fail", f"{free_mb} MB of hugepages free, need {min_mb} MB ({detail})",
                         "echo 1024 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages "
                         "(or `nfvperf cleanup` if a killed run holds them)"))
    return out


def check_irqbalance() -> Check:
    pids = _proc_running("irqbalance")
    if pids:
        return Check("irqbalance", "warn", f"irqbalance is running (pid {pids[0]}): it moves NIC "
                     "interrupts onto the data-plane cores",
                     "systemctl stop irqbalance && systemctl disable irqbalance")
    return Check("irqbalance", "ok", "irqbalance not running")


def check_governor() -> Check:
    govs = {}
    for g in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_governor"):
        govs[g.parent.parent.name] = _read(g)
    if not govs:
        return Check("cpu_governor", "ok", "no cpufreq interface (virtualised host or fixed "
                     "frequency); nothing to set")
    bad = sorted(c for c, g in govs.items() if g != "performance")
    if bad:
        return Check("cpu_governor", "warn", f"governor not 'performance' on {len(bad)} CPU(s) "
                     f"({', '.join(sorted(set(govs[c] for c in bad)))})",
                     "cpupower frequency-set -g performance (or write 'performance' to "
                     "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor)")
    return Check("cpu_governor", "ok", "performance governor on all CPUs")


def check_turbo() -> Check:
    no_turbo = _read("/sys/devices/system/cpu/intel_pstate/no_turbo")
    boost = _read("/sys/devices/system/cpu/cpufreq/boost")
    if no_turbo == "0" or boost == "1":
        return Check("turbo", "warn", "turbo boost is on: the clock (and so the throughput) "
                     "varies with load and temperature",
                     "echo 1 > /sys/devices/system/cpu/intel_pstate/no_turbo (or 0 > .../cpufreq/boost)")
    if no_turbo == "1" or boost == "0":
        return Check("turbo", "ok", "turbo boost off")
    return Check("turbo", "ok", "no turbo control exposed")


def check_cmdline() -> list[Check]:
    cmd = _read("/proc/cmdline")
    out = []
    for key, why in (("isolcpus", "keeps the scheduler's other tasks off the polling cores"),
                     ("nohz_full", "stops the timer tick on the polling cores")):
        m = re.search(rf"(?:^|\s){key}=(\S+)", cmd)
        if m:
            out.append(Check(key, "ok", f"{key}={m.group(1)}"))
        else:
            out.append(Check(key, "warn", f"no {key}= on the kernel command line ({why})",
                             f"add e.g. {key}=1-3 to GRUB_CMDLINE_LINUX, update-grub, reboot"))
    return out


def check_ksm() -> Check:
    if _read("/sys/kernel/mm/ksm/run") == "1":
        return Check("ksm", "warn", "KSM is merging pages (CPU time and latency spikes)",
                     "echo 0 > /sys/kernel/mm/ksm/run")
    return Check("ksm", "ok", "KSM off")


def find_binary(name: str) -> Optional[str]:
    if name == "ovs-vswitchd-dpdk":
        env = os.environ.get("NFVPERF_OVS_VSWITCHD")
        for cand in (env, OVS_VSWITCHD_DPDK, shutil.which(name)):
            if cand and os.access(cand, os.X_OK):
                return cand
        return None
    return shutil.which(name)


_PKG = {"dpdk-testpmd": "dpdk", "ovs-vswitchd-dpdk": "openvswitch-switch-dpdk",
        "ovsdb-server": "openvswitch-switch", "tshark": "tshark", "iperf3": "iperf3",
        "ip": "iproute2", "qemu-system-x86_64": "qemu-system-x86"}


def check_binary(name: str, required: bool = False) -> Check:
    path = find_binary(name)
    if path:
        return Check(f"binary:{name}", "ok", path, required=required)
    return Check(f"binary:{name}", "fail" if required else "warn", f"{name} not found",
                 f"apt-get install {_PKG.get(name, name)}", required=required)


def check_tgen(required: bool = False) -> Check:
    try:
        from nfvperf.tg.tgen import find_tgen_binary
        path = find_tgen_binary()
        return Check("tgen", "ok", str(path), required=required)
    except Exception as e:  # noqa: BLE001
        return Check("tgen", "fail" if required else "warn", f"tgen not built: {e}",
                     "make build (needs meson, ninja, libdpdk-dev)", required=required)


def check_pci(addr: str, cpus: Iterable[int] = ()) -> Check:
    full = addr if re.match(r"^[0-9a-fA-F]{4}:", addr) else f"0000:{addr}"
    dev = Path("/sys/bus/pci/devices") / full
    if not dev.exists():
        return Check(f"pci:{addr}", "fail", f"no PCI device {full}", "check the address with "
                     "`dpdk-devbind.py --status` or `lspci -D`", required=True)
    drv = Path(os.path.realpath(dev / "driver")).name if (dev / "driver").exists() else "(none)"
    node = _read(dev / "numa_node", "-1")
    detail = f"driver {drv}, NUMA node {node}"
    if drv not in ("vfio-pci", "uio_pci_generic", "igb_uio", "mlx5_core", "mlx4_core"):
        return Check(f"pci:{addr}", "fail", detail + " (not bound to a DPDK-usable driver)",
                     f"modprobe vfio-pci && dpdk-devbind.py --bind=vfio-pci {full}", required=True)
    if node not in ("-1", ""):
        from .cpu import CpuTopology
        try:
            topo = CpuTopology.read()
            off = [c for c in cpus if c in topo.cpus and topo.cpus[c].node != int(node)]
        except Exception:  # noqa: BLE001
            off = []
        if off:
            return Check(f"pci:{addr}", "warn", detail + f"; polling CPUs {off} on another node "
                         "(cross-socket: lower throughput, seed 002)",
                         f"pin the polling threads to CPUs of node {node}", required=True)
    return Check(f"pci:{addr}", "ok", detail, required=True)


def binaries_for(spec: Any) -> dict[str, bool]:
    """{binary: required} for a TopologySpec (None: everything optional)."""
    need = {"dpdk-testpmd": False, "ovs-vswitchd-dpdk": False, "ovsdb-server": False,
            "tshark": False, "iperf3": False, "ip": True}
    if spec is not None:
        dut = getattr(spec, "dut", "")
        if dut == "testpmd" or getattr(spec, "kind", "") in ("pvp", "pvvp", "vxlan"):
            need["dpdk-testpmd"] = dut == "testpmd" or getattr(spec, "vnf", "") == "container"
        if dut == "ovs-dpdk":
            need["ovs-vswitchd-dpdk"] = need["ovsdb-server"] = True
        if getattr(spec, "vnf", "") == "vm" and getattr(spec, "kind", "") in ("pvp", "pvvp", "vxlan"):
            need["qemu-system-x86_64"] = True
    return need


def run_checks(spec: Any = None, required: Sequence[str] = ("root",),
               cpus: Iterable[int] = ()) -> list[Check]:
    """All checks.  ``required`` names checks whose failure is fatal (``root``, ``hugepages``,
    ``tgen``, ...); binaries the spec's DUT needs and the spec's PCI devices are always required."""
    checks: list[Check] = [check_root()]
    checks += check_hugepages()
    checks += [check_irqbalance(), check_governor(), check_turbo()]
    checks += check_cmdline()
    checks.append(check_ksm())
    for name, req in binaries_for(spec).items():
        checks.append(check_binary(name, req))
    checks.append(check_tgen(required="tgen" in required))
    if spec is not None and getattr(spec, "port_kind", "") == "pci":
        for addr in getattr(spec, "pci", []) or []:
            checks.append(check_pci(addr, cpus))
    for c in checks:
        if c.name in required:
            c.required = True
    return checks


def raise_on_failure(checks: Sequence[Check]) -> None:
    failed = [c for c in checks if c.required and c.status == "fail"]
    if failed:
        raise PreflightError(failed)


def format_checks(checks: Sequence[Check]) -> str:
    width = max((len(c.name) for c in checks), default=10)
    lines = []
    for c in checks:
        mark = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}.get(c.status, c.status)
        lines.append(f"{mark} {c.name:<{width}} {c.detail}" + (" [required]" if c.required else ""))
        if c.status != "ok" and c.fix:
            lines.append(f"     {'':<{width}} fix: {c.fix}")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``nfvperf preflight [--suite FILE | --dut D --kind K --pci A ...] [--json]``."""
    import argparse
    import json
    p = argparse.ArgumentParser(prog="nfvperf preflight",
                                description="Check the host: root, hugepages, irqbalance, governor, "
                                            "turbo, isolcpus/nohz_full, KSM, binaries, tgen, NICs.")
    p.add_argument("--kind", default=None, help="topology kind (p2p, p-ovs-p, pvp, pvvp, vxlan)")
    p.add_argument("--dut", default=None, help="DUT (ovs-dpdk, linux-bridge, testpmd)")
    p.add_argument("--pci", action="append", default=[], help="PCI address of a port (repeatable)")
    p.add_argument("--json", action="store_true")
    argv = [a for a in (argv or []) if a != "--"]
    args = p.parse_args(argv)
    spec = None
    if args.kind or args.dut or args.pci:
        from nfvperf.topo.spec import TopologySpec
        kw: dict[str, Any] = {}
        if args.kind:
            kw["kind"] = args.kind
        if args.dut:
            kw["dut"] = args.dut
        if args.pci:
            kw["port_kind"] = "pci"
            kw["pci"] = args.pci
        spec = TopologySpec(**kw)
    checks = run_checks(spec, required=("root", "hugepages"))
    if args.json:
        print(json.dumps([c.to_dict() for c in checks], indent=2))
    else:
        print(format_checks(checks))
    failed = [c for c in checks if c.required and c.status == "fail"]
    return 1 if failed else 0
