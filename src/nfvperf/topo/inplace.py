"""Which differences between two topology specs a running topology can take without a restart.

A study's units share one topology build when they differ only in traffic; when they differ in a
DUT setting that the DUT adapter changes while running (``DutAdapter.in_place``, narrowed for a
spec by ``DutAdapter.in_place_for``: OVS's rule set, rx queues, PMD mask, EMC/SMC), the runner
switches between them with ``Topology.reconfigure``; anything else (another DUT, port kind, VNF
kind, an option the adapter cannot change running) needs a restart.  Pure functions: no root, no
processes, only the specs and the adapters' class declarations.

Fields are dotted paths relative to the TopologySpec: the common fields (``dut``, ``port_kind``,
``mtu`` ...) by name, the adapters' option sections by section and field (``ovs.n_rxq``,
``testpmd.queues``).
"""
from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel

from .spec import TopologySpec


def _flat(spec: TopologySpec) -> dict[str, Any]:
    """``{path: value}``: the spec's fields, an options section's fields as ``section.field``
    (a dict-valued option such as ``ovs.vlan_translate`` stays one value).  Every field by name,
    whatever sections the registered adapters added (``dict(spec)``: the model's own fields in
    declaration order, as ``model_dump`` would give them but keeping the sections' models)."""
    out: dict[str, Any] = {}
    for name, value in dict(spec).items():
        if isinstance(value, BaseModel):
            out.update({f"{name}.{sub}": v for sub, v in value.model_dump().items()})
        else:
            out[name] = value
    return out


def differences(a: TopologySpec, b: TopologySpec) -> dict[str, Any]:
    """``{path: b's value}`` of every field in which ``b`` differs from ``a``, in field order."""
    fa, fb = _flat(a), _flat(b)
    return {k: fb.get(k) for k in list(fa) + [k for k in fb if k not in fa]
            if fa.get(k) != fb.get(k) or (k in fa) != (k in fb)}


def _in_place(a: TopologySpec) -> frozenset[str]:
    """The fields a running topology built from ``a`` can change: its DUT adapter's."""
    return frozenset(a.dut_class().in_place_for(a))


def restart_fields(a: TopologySpec, b: TopologySpec) -> list[str]:
    """The fields in which ``b`` differs from ``a`` that the DUT of ``a`` cannot change while
    running (a topology built from ``a`` must restart to become ``b``); [] if none."""
    ok = _in_place(a)
    return [k for k in differences(a, b) if k not in ok]


def in_place_difference(a: TopologySpec, b: TopologySpec) -> Optional[dict[str, Any]]:
    """``{path: b's value}`` of the differences when a running topology built from ``a`` can
    become ``b`` in place (``{}`` when they are equal); None when a differing field needs a
    restart (:func:`restart_fields` names them)."""
    diff = differences(a, b)
    return None if set(diff) - _in_place(a) else diff


def restart_reason(a: TopologySpec, b: TopologySpec) -> Optional[str]:
    """A sentence for the report: why ``b`` needs a restart of ``a``'s topology (None if not),
    e.g. "dut differs (ovs-dpdk -> testpmd)" or "ovs.pmd_cores differs (1 -> 2; ovs-dpdk
    changes in place only ovs.n_rxq, ...)"."""
    fields = restart_fields(a, b)
    if not fields:
        return None
    fa, fb = _flat(a), _flat(b)
    what = ", ".join(f"{k} ({fa.get(k)!r} -> {fb.get(k)!r})" for k in fields)
    ok = sorted(_in_place(a))
    can = f"; {a.dut} changes in place only {', '.join(ok)}" if ok else \
        f"; {a.dut} changes nothing in place"
    return f"{what} differ{'s' if len(fields) == 1 else ''}{can}"
