"""What a run records about the machine it ran on: CPU model, kernel, OS, Python, nfvperf and the
DPDK/OVS/QEMU package versions (``environment.host`` of every run; argument-list subprocesses
only, each fact best effort: a missing tool leaves its key out), and how steady its CPUs were
(``environment.cpu_steadiness``, :mod:`nfvperf.host.steadiness`)."""
from __future__ import annotations

import contextlib
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Optional

from nfvperf.host import steadiness
from nfvperf import __version__

__all__ = ["host_environment", "record_cpu_steadiness"]


def _run(args: list[str], timeout: float = 5.0) -> Optional[str]:
    if not shutil.which(args[0]):
        return None
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    out = (p.stdout or "").strip()
    return out if p.returncode == 0 and out else None


def _cpu_model() -> Optional[str]:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or None


def host_environment() -> dict[str, object]:
    """CPU, kernel, python, DPDK/OVS package versions (argument-list subprocesses only)."""
    env: dict[str, object] = {
        "hostname": platform.node(),
        "cpu_model": _cpu_model(),
        "cpus_online": os.cpu_count(),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "os": _os_release(),
        "python": platform.python_version(),
        "nfvperf": __version__,
    }
    with contextlib.suppress(OSError):
        env["cmdline"] = Path("/proc/cmdline").read_text().strip()
    versions = {pkg: _run(["dpkg-query", "-W", "-f=${Version}", pkg]) for pkg in
                ("dpdk", "libdpdk-dev", "openvswitch-switch", "openvswitch-switch-dpdk", "qemu-system-x86")}
    env["packages"] = {pkg: v for pkg, v in versions.items() if v}
    ovs = _run(["ovs-vswitchd", "--version"])
    if ovs:
        env["ovs_vswitchd_version"] = ovs.splitlines()[0]
        dpdk_line = [ln for ln in ovs.splitlines() if "DPDK" in ln]
        if dpdk_line:
            env["ovs_dpdk"] = dpdk_line[0]
    dpdk = _run(["pkg-config", "--modversion", "libdpdk"])
    if dpdk:
        env["dpdk_version"] = dpdk
    return env


def _os_release() -> Optional[str]:
    with contextlib.suppress(OSError):
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    return None


def record_cpu_steadiness(env: dict[str, object], when: str) -> str:
    """Probe how much the CPUs' speed moves on their own now (``when``: "before the run") and
    keep the worse of this and earlier probes in ``env["cpu_steadiness"]`` (all of them under
    ``probes``); returns the probe as text.  A failed probe is recorded, never raised."""
    try:
        st = steadiness.probe_cpus()
    except Exception as e:  # noqa: BLE001 - a failed probe must not fail the run
        st = {"error": f"{type(e).__name__}: {e}"}
    st["when"] = when
    before = (prev.get("probes") if isinstance(prev := env.get("cpu_steadiness"), dict) else None) or []
    env["cpu_steadiness"] = steadiness.combine([*before, st])
    return steadiness.steadiness_text(st)
