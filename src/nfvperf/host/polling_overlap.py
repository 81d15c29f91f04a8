"""Whether a topology's DUT (or VNF) busy-polling threads ran on the generator's polling CPUs.

A pinning plan (:class:`nfvperf.host.cpu.PinningPlan`, stored as ``environment.pinning`` of each
topology a run built) gives every busy-polling role its CPUs: ``tgen`` the generator's, ``dut``
the switch's or forwarder's, ``vnf0``... each VM's.  On a small host the plan may put a DUT
role on the generator's CPU (seed 000's real run on 2 CPUs: ``topology.l3fwd.cores=2`` took CPU 0,
where tgen polls).  A throughput measured that way is the time-slicing of two busy-pollers on one
CPU, not the DUT's capacity: 58,129 fps against 4,708,426 with one core on CPU 1.

:func:`generator_overlap` reads that fact out of one topology's stored environment.  Sharing
housekeeping (the OS, control threads) is a different, milder fact (``cores_shared``); this one is
only about polling threads on the same CPU as the generator's polling threads.
"""
from __future__ import annotations

from typing import Optional

#: the generator's role in a pinning plan
GENERATOR_ROLE = "tgen"


def generator_overlap(environment: object) -> Optional[dict[str, list[int] | list[str]]]:
    """``{"cpus": [0], "roles": ["dut"]}``: the CPUs where a DUT/VNF role's polling threads ran on
    the generator's polling CPUs, and those roles; ``{}`` when none did; ``None`` when the
    environment does not say (no pinning stored, no generator role: ``--tg sim``, iperf3).

    ``environment``: one entry of ``runs.environment["topologies"][i]["environment"]`` (the
    topology's own environment: ``pinning`` and ``hosts``).  A generator on another host than the
    DUT shares no CPU with it, whatever the CPU numbers say."""
    env = environment if isinstance(environment, dict) else {}
    pinning = env.get("pinning")
    if not isinstance(pinning, dict):
        return None
    hosts = h if isinstance(h := env.get("hosts"), dict) else {}
    gen_on, dut_on = hosts.get("generator_on"), hosts.get("dut_on")
    if (gen_on and dut_on and gen_on != dut_on) or env.get("pinning_hosts"):
        return {}           # one plan per host (topo.base): ``pinning`` is the DUT host's alone
    roles = pinning.get("roles") or {}
    if not isinstance(roles, dict) or GENERATOR_ROLE not in roles:
        return None
    gen = {int(c) for c in roles.get(GENERATOR_ROLE) or []}
    overlap = {str(role): both for role, role_cpus in roles.items()
               if role != GENERATOR_ROLE and (both := gen & {int(c) for c in role_cpus or []})}
    if not overlap:
        return {}
    return {"cpus": sorted({c for both in overlap.values() for c in both}), "roles": list(overlap)}
