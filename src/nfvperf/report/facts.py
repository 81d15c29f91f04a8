"""What ran (issue 9 item 8): the facts a reader needs to trust a run's numbers, for the report
header — generator, port kind, whether generator and DUT shared cores, the host CPU, DPDK and OVS
versions, the VM accelerator (KVM or TCG), and whether the numbers come from a model.

All of it is read from what the run stored (``runs.environment``, ``runs.config``, the tests'
topologies); a fact the run did not record reads "not recorded".
"""
from __future__ import annotations

from typing import Any, Optional

from nfvperf.host.steadiness import steadiness_text
from nfvperf.report.extract import num, walk

NOT_RECORDED = "not recorded"


def vm_accelerators(env: dict[str, Any]) -> list[dict[str, Any]]:
    """Every VM VNF the run's topologies recorded (``kind: vm`` with ``accel``), once per VNF
    name and accelerator."""
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for d in walk(env.get("topologies") or []):
        if d.get("kind") == "vm" and d.get("accel") is not None:
            seen.setdefault((str(d.get("vnf") or ""), str(d.get("accel"))), d)
    return list(seen.values())


def accelerator_text(env: dict[str, Any], vm_in_config: bool) -> str:
    """``KVM (/dev/kvm)``; ``TCG (why) — emulated guest CPU: VNF numbers far below KVM's``; or
    why there is none."""
    vms = vm_accelerators(env)
    if not vms:
        return ("VM topology configured, accelerator " + NOT_RECORDED) if vm_in_config else "no VM in this run"
    parts = []
    for acc in dict.fromkeys(str(v.get("accel")) for v in vms):
        why = "; ".join(dict.fromkeys(str(v.get("accel_reason")) for v in vms
                                      if str(v.get("accel")) == acc and v.get("accel_reason")))
        txt = acc.upper() + (f" ({why})" if why else "")
        if acc == "tcg":
            txt += " — emulated guest CPU: VM numbers (VNF forwarding, TCP inside guests) are far below what KVM gives"
        parts.append(txt)
    return "; ".join(parts)


def _first(env: Any, key: str) -> Optional[Any]:
    for d in walk(env):
        if d.get(key) not in (None, ""):
            return d[key]
    return None


def generator_text(run: Any, env: dict[str, Any]) -> str:
    if run.tg == "sim":
        return "sim (simulated DUT: no traffic was sent)"
    m = env.get("measurer") or {}
    bits = [str(run.tg)]
    if m.get("tgen_version"):
        bits.append(f"version {m['tgen_version']}")
    if m.get("lcores"):
        bits.append(f"lcores {m['lcores']}")
    # a direction over several cores (tgen_cores): each port's TX queues on their worker lcores
    tx = [p.get("tx_lcores") or [] for p in m.get("ports") or [] if isinstance(p, dict)]
    if any(len(x) > 1 for x in tx):
        lcs = sorted({int(c) for x in tx for c in x})
        bits.append(f"each direction over {max(len(x) for x in tx)} cores (TX queues on lcores "
                    f"{','.join(map(str, lcs))})")
    return ", ".join(bits)


def port_kinds(run: Any) -> list[str]:
    cfg_topo = (run.config or {}).get("topology") or {}
    kinds = [str(cfg_topo.get("port_kind"))] if cfg_topo.get("port_kind") else []
    for t in run.tests:
        ov = ((t.topology or {}).get("overrides") or {}) if isinstance(t.topology, dict) else {}
        pk = ov.get("port_kind") or (t.topology or {}).get("port_kind")
        if pk:
            kinds.append(str(pk))
    return list(dict.fromkeys(kinds))


def af_xdp_text(env: dict[str, Any]) -> str:
    """What the AF_XDP ports' path was (issue 8 item 5), from the ports' ``path`` facts:
    ``AF_XDP: native XDP, copy mode, 1 queue, busy-poll budget 64``; '' without AF_XDP ports."""
    paths = [d for d in walk(env.get("topologies") or []) if "zero_copy" in d and "queues" in d]
    if not paths:
        return ""
    modes = list(dict.fromkeys(str(p.get("tg_xdp_mode") or "no") for p in paths
                               if "tg_xdp_mode" in p)) or [NOT_RECORDED]
    bits = [f"AF_XDP: {'/'.join(modes)} XDP",
            "zero-copy" if all(p.get("zero_copy") for p in paths) else "copy mode",
            f"{max(int(num(p.get('queues')) or 1) for p in paths)} queue(s)"]
    budgets = list(dict.fromkeys(str(p["busy_poll_budget"]) for p in paths if "busy_poll_budget" in p))
    errors = list(dict.fromkeys(str(p["busy_poll_error"]) for p in paths if "busy_poll_error" in p))
    if budgets:
        bits.append(f"busy-poll budget {'/'.join(budgets)}")
    if errors:
        bits.append(f"busy polling unavailable ({'; '.join(errors)})")
    return ", ".join(bits)


def versions_text(env: dict[str, Any]) -> str:
    host = env.get("host") or {}
    bits = []
    dpdk = host.get("dpdk_version") or _first(env.get("topologies") or [], "dpdk")
    if dpdk:
        bits.append(f"DPDK {dpdk}")
    ovs = host.get("ovs_vswitchd_version")
    if ovs:
        bits.append(str(ovs))
    parts = [(f"VNF {d['vnf']}" if d.get("vnf") else f"DUT {d['dut']}") + f" {d['version']}"
             for d in walk(env.get("topologies") or [])
             if isinstance(d.get("dut"), str) and isinstance(d.get("version"), str) and d.get("version")]
    bits += list(dict.fromkeys(parts))
    return "; ".join(bits) or NOT_RECORDED


def cores_shared_text(env: dict[str, Any]) -> str:
    v = env.get("cores_shared")
    if v is None:
        return NOT_RECORDED
    return ("yes — generator and DUT shared CPUs: results are a lower bound" if v
            else "no — generator and DUT on separate CPUs")


def host_cpu_text(env: dict[str, Any]) -> str:
    host = env.get("host") or {}
    model = host.get("cpu_model")
    if not model:
        return NOT_RECORDED
    n = host.get("cpus_online")
    return f"{model}" + (f", {n} CPUs online" if n else "") + (f", kernel {host['kernel']}" if host.get("kernel")
                                                              else "")


def numbers_from(run: Any) -> str:
    if run.tg == "sim":
        return "a model (--tg sim): no device was measured; comparisons show the model's shape only"
    return f"measurements on this host ({run.tg})"


def _vm_configured(run: Any) -> bool:
    def has_vm(tp: Any) -> bool:
        # a VM VNF, or a kind whose TCP ends are guests (seed 001: host-vm, vm-link-vm, vm-vm)
        return isinstance(tp, dict) and (tp.get("vnf") == "vm" or "vm" in str(tp.get("kind") or "").split("-"))

    return has_vm((run.config or {}).get("topology") or {}) or any(
        isinstance(t.topology, dict) and has_vm(t.topology.get("overrides") or {}) for t in run.tests)


def run_facts(run: Any) -> list[tuple[str, str]]:
    """The header rows: numbers from, generator, port kind, cores shared, host CPU, versions,
    VM accelerator."""
    env = run.environment or {}
    return [
        ("Numbers from", numbers_from(run)),
        ("Generator", generator_text(run, env)),
        ("Port kind", " — ".join(t for t in (", ".join(port_kinds(run)), af_xdp_text(env)) if t)
         or NOT_RECORDED),
        ("Cores shared (generator / DUT)", cores_shared_text(env)),
        ("Host CPU", host_cpu_text(env)),
        ("Host CPU steadiness", steadiness_text(env.get("cpu_steadiness"))),
        ("DPDK / OVS versions", versions_text(env)),
        ("VM accelerator", accelerator_text(env, _vm_configured(run))),
    ]
