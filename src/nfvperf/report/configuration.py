"""What configuration a stored test ran in, so that reports put side by side only like with like.

A test's *configuration* is what it measured apart from its method and frame size:

- its topology: the stored ``tests.topology`` row (kind, ports and the ``overrides`` of the
  suite's topology) plus the DUT and port kind it resolved to;
- its traffic: flows per port, direction, VXLAN, VLAN, IP version, IMIX and nominal link speed
  (not the frame size, nor the timing fields learning/drain/settle);
- its study axis values (``tests.study.axes``).

Two tests of one run share a configuration (:func:`same_configuration`) when topology and
traffic are equal and every study axis both carry has the same value — so a plain latency test
belongs to the study unit whose topology overrides it repeats, and a latency study with the
same axes as a throughput study pairs unit by unit.  :func:`config_key` is the configuration
as one string, the key ``nfvperf compare`` matches runs on.
"""
from __future__ import annotations

import json
from typing import Any, Optional

#: the traffic fields that make a configuration (the frame size and timing fields do not)
TRAFFIC_KEYS = ("flows_per_port", "bidirectional", "vxlan", "vlan", "ip_version", "imix", "link_speed_bps")
#: stored topology row fields that are derived, not configured
_DERIVED_TOPOLOGY = ("directions", "switching_operations")


def stored_topology(test: Any) -> dict[str, Any]:
    """The test's stored ``tests.topology`` row (a :class:`~nfvperf.report.extract.TestView`
    keeps it as ``stored_topology``; its ``topology`` is the resolved full spec)."""
    row = getattr(test, "stored_topology", None)
    if row is None:
        row = getattr(test, "topology", None)
    return row if isinstance(row, dict) else {}


def fitted_axes(test: Any) -> dict[str, dict[str, Any]]:
    """The study axes ``--fit-host`` changed for this unit, as the runner stored them with it
    (``{"pmd_cores": {"from": 4, "to": 2}}``); {} for a unit that ran as written."""
    fa = stored_topology(test).get("fitted_axes")
    return {str(k): v for k, v in fa.items() if isinstance(v, dict) and "to" in v} if isinstance(fa, dict) else {}


def resolved_topology(test: Any) -> dict[str, Any]:
    tp = getattr(test, "topology", None)
    return tp if isinstance(tp, dict) else {}


def topology_signature(test: Any) -> dict[str, Any]:
    """Kind, DUT, port kind and the overrides of the suite's topology (the whole stored row when
    it predates ``overrides``)."""
    row = stored_topology(test)
    full = resolved_topology(test)
    sig: dict[str, Any] = {"kind": row.get("kind") or full.get("kind"),
                           "dut": full.get("dut") or row.get("dut"),
                           "port_kind": full.get("port_kind") or row.get("port_kind")}
    if "overrides" in row:
        sig["overrides"] = row.get("overrides") or {}
        sig["ports"] = row.get("ports")
    else:
        sig["spec"] = {k: v for k, v in row.items() if k not in _DERIVED_TOPOLOGY}
    return sig


def traffic_signature(test: Any) -> dict[str, Any]:
    tr = getattr(test, "traffic", None) or {}
    out = {k: tr.get(k) for k in TRAFFIC_KEYS if k in tr}
    imix = out.get("imix")
    if isinstance(imix, list):
        out["imix"] = [list(e) for e in imix]
    return out


def axes_of(test: Any) -> dict[str, Any]:
    st = getattr(test, "study", None)
    axes = st.get("axes") if isinstance(st, dict) else None
    return dict(axes) if isinstance(axes, dict) else {}


def study_of(test: Any) -> Optional[dict[str, Any]]:
    st = getattr(test, "study", None)
    return st if isinstance(st, dict) and st.get("name") else None


def canon(v: Any) -> str:
    """``v`` as canonical JSON (sorted keys, no spaces): equal values, equal text."""
    return json.dumps(v, sort_keys=True, default=str, separators=(",", ":"))


def axes_compatible(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Every axis both carry has the same value."""
    return all(canon(a[k]) == canon(b[k]) for k in set(a) & set(b))


def same_configuration(a: Any, b: Any) -> bool:
    """Same topology, same traffic (frame size aside), compatible study axes."""
    return (canon(topology_signature(a)) == canon(topology_signature(b))
            and canon(traffic_signature(a)) == canon(traffic_signature(b))
            and axes_compatible(axes_of(a), axes_of(b)))


def config_key(test: Any, axes: bool = True) -> str:
    """Method, frame size and configuration as one string (``nfvperf compare`` matches on it);
    ``axes`` False: without the study axes."""
    return canon({"method": getattr(test, "method", None), "size": getattr(test, "frame_size_b", None),
                  "topology": topology_signature(test), "traffic": traffic_signature(test),
                  **({"axes": axes_of(test)} if axes else {})})


def differences(a: Any, b: Any) -> list[str]:
    """What differs between two tests' configurations, e.g. ``traffic.flows_per_port 1 → 1000``."""
    out = []
    for part, fa, fb in (("topology", topology_signature(a), topology_signature(b)),
                         ("traffic", traffic_signature(a), traffic_signature(b)),
                         ("axes", axes_of(a), axes_of(b))):
        for k in dict.fromkeys(list(fa) + list(fb)):
            va, vb = fa.get(k), fb.get(k)
            if canon(va) != canon(vb):
                out.append(f"{part}.{k} {canon(va)} → {canon(vb)}")
    return out


def _mask_cores(mask: Any) -> Optional[int]:
    if not isinstance(mask, str) or not mask.strip():
        return None
    try:
        return bin(int(mask.strip(), 16)).count("1") or None
    except ValueError:
        return None


def pmd_cores(test: Any) -> Optional[int]:
    """The PMD core count a test ran with: the study axis ``pmd_cores`` (its fitted value under
    ``--fit-host``), else the topology's
    ``ovs.pmd_cores``, else the bits set in ``ovs.pmd_cpu_mask`` (resolved spec, then the
    stored overrides); None when unknown."""
    ax = (fitted_axes(test).get("pmd_cores") or {}).get("to", axes_of(test).get("pmd_cores"))  # what ran
    if isinstance(ax, int) and not isinstance(ax, bool) and ax > 0:
        return ax
    for tp in (resolved_topology(test), (stored_topology(test).get("overrides") or {})):
        ovs = tp.get("ovs") if isinstance(tp, dict) else None
        if not isinstance(ovs, dict):
            continue
        n = ovs.get("pmd_cores")
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            return n
        m = _mask_cores(ovs.get("pmd_cpu_mask"))
        if m:
            return m
    return None


def without_vxlan(test: Any) -> str:
    """The configuration key with VXLAN taken out: ``traffic.vxlan`` dropped, topology kind
    ``vxlan`` read as ``pvp`` (it is PHY-OVS-VNF-OVS-PHY with VTEPs), the MTU and the axes that
    only switch VXLAN on dropped — two tests equal under it are the same test with and without
    VXLAN."""
    topo = topology_signature(test)
    if topo.get("kind") == "vxlan":
        topo["kind"] = "pvp"
    ov = dict(topo.get("overrides") or {})
    for k in ("mtu", "kind"):
        ov.pop(k, None)
    if "overrides" in topo:
        topo["overrides"] = ov
    traffic = {k: v for k, v in traffic_signature(test).items() if k != "vxlan"}
    axes = {k: v for k, v in axes_of(test).items() if k not in ("vxlan", "kind", "mtu")}
    return canon({"method": getattr(test, "method", None), "size": getattr(test, "frame_size_b", None),
                  "topology": topo, "traffic": traffic, "axes": axes})


def is_vxlan(test: Any) -> bool:
    return bool((getattr(test, "traffic", None) or {}).get("vxlan"))
