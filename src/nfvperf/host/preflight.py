"""Preflight: is this host fit to run the benchmark, and what would make the numbers better?

Each check returns a :class:`Check` (name, status ok/warn/fail, detail, fix).  The list goes into
every result's environment, so a report shows under which conditions it was measured (seed 000 /
002 tuning: isolcpus, nohz_full, irqbalance stopped, performance governor, turbo off, hugepages,
KSM off, the NIC's NUMA node).  A *required* check that fails raises :class:`PreflightError`
whose message says what to do.

This module is a library of checks and knows no topology, DUT or generator: the topologies and
adapters declare what they need (:class:`Needs`: binaries, PCI devices, extra checks such as the
generator's) and :func:`run_checks` checks that.  ``nfvperf preflight`` (``nfvperf.topo.preflight``)
collects the needs of a topology kind and DUT and prints the same list.
"""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Optional, Protocol, Sequence, TypedDict, Union

from . import hugepages as hp
from .cpu import CpuTopology, read_stripped as _read

if TYPE_CHECKING:
    from .base import Host

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
    """One check; on a testbed also the ``host`` it ran on and its ``role`` (its dict then says ``check``, ``ok``)."""

    name: str
    status: str          # ok | warn | fail
    detail: str
    fix: str = ""
    required: bool = False
    host: str = ""
    role: str = ""

    @property
    def check(self) -> str:
        return self.name

    @property
    def ok(self) -> bool:
        return self.status != "fail"

    def to_dict(self) -> dict[str, object]:
        d = {k: v for k, v in asdict(self).items() if k not in ("host", "role")}
        return {"host": self.host, "role": self.role, "check": d.pop("name"), "ok": self.ok, **d} if self.host else d


def _proc_running(comm: str) -> list[int]:
    return [int(d.name) for d in Path("/proc").iterdir() if d.name.isdigit() and _read(d / "comm") == comm]


# ------------------------------------------------------------------------------------ checks
def check_root() -> Check:
    if os.geteuid() == 0:
        return Check("root", "ok", "running as root")
    return Check("root", "fail", "not root: network namespaces, hugepages and DPDK need root",
                 "run as root (sudo -E nfvperf ...)")


def check_hugepages(min_mb: int = MIN_FREE_HUGEPAGES_MB) -> list[Check]:
    mounts = hp.hugetlbfs_mounts()
    out = [Check("hugetlbfs", "ok", ", ".join(f"{m.path} ({m.pagesize_kb} kB pages)" for m in mounts)) if mounts
           else Check("hugetlbfs", "warn", "no hugetlbfs mounted (DPDK --in-memory still works)",
                      "mount -t hugetlbfs nodev /dev/hugepages")]
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
    govs = {g.parent.parent.name: _read(g)
            for g in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_governor")}
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
        out.append(Check(key, "ok", f"{key}={m.group(1)}") if m else
                   Check(key, "warn", f"no {key}= on the kernel command line ({why})",
                         f"add e.g. {key}=1-3 to GRUB_CMDLINE_LINUX, update-grub, reboot"))
    return out


def check_ksm() -> Check:
    if _read("/sys/kernel/mm/ksm/run") == "1":
        return Check("ksm", "warn", "KSM is merging pages (CPU time and latency spikes)",
                     "echo 0 > /sys/kernel/mm/ksm/run")
    return Check("ksm", "ok", "KSM off")


@dataclass(frozen=True)
class Binary:
    """A program a topology or adapter runs: where to look and which package provides it."""

    name: str
    package: str = ""                      # Debian package (the fix); default: the name
    candidates: tuple[str, ...] = ()       # paths tried before $PATH
    env: str = ""                          # an environment variable naming the path (tried first)

    def find(self) -> Optional[str]:
        for cand in (os.environ.get(self.env) if self.env else None, *self.candidates):
            if cand and os.access(cand, os.X_OK):
                return cand
        return shutil.which(self.name)


def check_binary(name: "str | Binary", required: bool = False) -> Check:
    b = name if isinstance(name, Binary) else Binary(name)
    path = b.find()
    if path:
        return Check(f"binary:{b.name}", "ok", path, required=required)
    return Check(f"binary:{b.name}", "fail" if required else "warn", f"{b.name} not found",
                 f"apt-get install {b.package or b.name}"
                 + (f" (or set {b.env})" if b.env else ""), required=required)


def check_tool(name: str, find: Callable[[], object], fix: str, required: bool = False) -> Check:
    """A check named ``name`` that passes when ``find()`` returns a path (and does not raise)."""
    try:
        path = find()
        if not path:
            raise FileNotFoundError(f"{name} not found")
        return Check(name, "ok", str(path), required=required)
    except Exception as e:  # noqa: BLE001
        return Check(name, "fail" if required else "warn", f"{name} not found: {e}", fix,
                     required=required)


#: what every run uses, whatever the topology: optional helpers and iproute2
BASE_BINARIES: dict[str, tuple[Binary, bool]] = {
    "tshark": (Binary("tshark"), False), "iperf3": (Binary("iperf3"), False),
    "ip": (Binary("ip", "iproute2"), True)}


@dataclass
class Needs:
    """What a topology and its DUT/VNFs need from the host (they declare it; preflight checks).

    ``binaries``: name -> (Binary, required); ``pci``: PCI addresses of the ports;
    ``checks``: further checks such as the generator's, callables ``(required names) -> Check or
    [Check]``; ``hugepages_mb``: the hugepage memory they will use."""

    binaries: dict[str, tuple[Binary, bool]] = field(default_factory=dict)
    pci: list[str] = field(default_factory=list)
    checks: list[Callable[[Sequence[str]], Union[Check, list[Check]]]] = field(default_factory=list)
    hugepages_mb: int = 0

    def need(self, *binaries: Binary, required: bool = True) -> "Needs":
        for b in binaries:
            old = self.binaries.get(b.name)
            self.binaries[b.name] = (b, required or bool(old and old[1]))
        return self

    def merge(self, other: Optional["Needs"]) -> "Needs":
        if other is not None:
            for b, req in other.binaries.values():
                self.need(b, required=req)
            self.pci += [a for a in other.pci if a not in self.pci]
            self.checks += other.checks
            self.hugepages_mb += other.hugepages_mb
        return self


def pci_device(addr: str, host: Optional["Host"] = None) -> Optional[tuple[str, str, str]]:
    """(PCI class, driver, NUMA node) of the device ``addr``, read from ``/sys/bus/pci`` of
    ``host`` (default this machine; "" for what cannot be read); None when there is none."""
    dev = Path("/sys/bus/pci/devices") / (addr if re.match(r"^[0-9a-fA-F]{4}:", addr) else f"0000:{addr}")

    def read(name: str) -> str:
        try:
            return (host.read_text(str(dev / name)) if host is not None else (dev / name).read_text()).strip()
        except OSError:
            return ""
    if not (host.exists(str(dev)) if host is not None else dev.exists()):
        return None
    drv = next((ln.split("=", 1)[1].strip() for ln in read("uevent").splitlines()
                if ln.startswith("DRIVER=")), "")
    if not drv and host is None and (dev / "driver").exists():
        drv = Path(os.path.realpath(dev / "driver")).name
    return read("class"), drv, read("numa_node")


def check_pci(addr: str, cpus: Iterable[int] = (), host: Optional["Host"] = None) -> Check:
    """The PCI device ``addr`` exists, is a network device and is bound to a DPDK-usable
    driver (:func:`pci_device`)."""
    full = addr if re.match(r"^[0-9a-fA-F]{4}:", addr) else f"0000:{addr}"
    found = pci_device(addr, host)
    if found is None:
        return Check(f"pci:{addr}", "fail", f"no PCI device {full}", "check the address with "
                     "`dpdk-devbind.py --status` or `lspci -D`", required=True)
    pci_class, drv, node = found
    if pci_class and not pci_class.startswith("0x02"):
        return Check(f"pci:{addr}", "fail", f"{full} is not a network device (PCI class "
                     f"{pci_class}; a NIC is 0x02xxxx)", "give a NIC's address in topology.pci "
                     "(`lspci -D -d ::0200`, `dpdk-devbind.py --status`)", required=True)
    drv, node = drv or "(none)", node or "-1"
    detail = f"driver {drv}, NUMA node {node}"
    if drv not in ("vfio-pci", "uio_pci_generic", "igb_uio", "mlx5_core", "mlx4_core"):
        return Check(f"pci:{addr}", "fail", detail + " (not bound to a DPDK-usable driver)",
                     f"modprobe vfio-pci && dpdk-devbind.py --bind=vfio-pci {full}", required=True)
    if node not in ("-1", "") and host is None:      # this machine's CPUs only
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


class DeclaresNeeds(Protocol):
    """What declares its :class:`Needs` itself (a TopologySpec)."""

    def preflight_needs(self) -> "Needs": ...


def run_checks(needs: Union[Needs, DeclaresNeeds, None] = None, required: Sequence[str] = ("root",),
               cpus: Iterable[int] = ()) -> list[Check]:
    """All checks.  ``needs`` is a :class:`Needs` (or anything with ``preflight_needs()``
    returning one, e.g. a TopologySpec; None: only the host checks and :data:`BASE_BINARIES`).
    ``required`` names checks whose failure is fatal (``root``, ``hugepages``, ``tgen``, ...);
    binaries the needs mark required and the PCI devices are always required."""
    given = needs if needs is None or isinstance(needs, Needs) else needs.preflight_needs()
    needs = Needs(binaries=dict(BASE_BINARIES)).merge(given)
    checks = [check_root(), *check_hugepages(), check_irqbalance(), check_governor(), check_turbo(),
              *check_cmdline(), check_ksm(), *(check_binary(b, req) for b, req in needs.binaries.values())]
    for extra in needs.checks:
        got = extra(required)
        checks += got if isinstance(got, list) else [got]
    checks += [check_pci(addr, cpus) for addr in needs.pci]
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


class BinaryNeed(TypedDict):
    """A :class:`Binary` as JSON, and whether it is required."""

    name: str
    package: str
    candidates: list[str]
    env: str
    required: bool


class PreflightNeeds(TypedDict, total=False):
    """What :func:`checks_for` checks on a testbed host (``SshHost.preflight`` runs it there)."""

    binaries: list[BinaryNeed]
    pci: list[str]
    required: list[str]


def checks_for(needs: PreflightNeeds) -> list[dict[str, object]]:
    """:func:`run_checks` of ``needs`` as JSON gives them (``nfvperf.host.remote_preflight``: a
    testbed host runs this, over SSH or here), the checks as dicts."""
    n = Needs(pci=list(needs.get("pci", [])))
    for b in needs.get("binaries", []):
        n.need(Binary(b["name"], b["package"], tuple(b["candidates"]), b["env"]), required=b["required"])
    return [c.to_dict() for c in run_checks(n, required=needs.get("required", ["root"]))]
