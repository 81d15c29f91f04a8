"""AF_XDP on kernel interfaces (issue 8 item 5): which XDP mode a socket's program ended up in,
and what DPDK's net_af_xdp made of busy polling, read back so a run records the path it measured.

On veth the kernel gives AF_XDP its native (driver) XDP hook whenever it can: DPDK 22.11's
net_af_xdp attaches its program without a mode flag, and veth implements ``ndo_bpf``, so ``ip link``
shows ``xdp`` (native), not ``xdpgeneric``.  veth has no zero-copy: frames are copied in both
directions (``__xsk_generic_xmit`` on TX, the peer's NAPI ``veth_poll`` → XDP redirect → copy into
the UMEM on RX).  The PMD turns on preferred busy polling itself (``busy_budget`` 64 when the kernel
has ``SO_PREFER_BUSY_POLL``, 5.11+) and uses need_wakeup when the kernel has it.
"""
from __future__ import annotations

import re
from typing import Optional

from pyroute2.netlink import nla

from .netns import ipr

#: IFLA_XDP attributes naming the program of each attach mode
_MODE_ATTRS = (("IFLA_XDP_DRV_PROG_ID", "native"), ("IFLA_XDP_SKB_PROG_ID", "generic"),
               ("IFLA_XDP_HW_PROG_ID", "offload"))
#: IFLA_XDP_ATTACHED values (kernel XDP_ATTACHED_*; pyroute2 may give the names)
_ATTACHED = {1: "native", 2: "generic", 3: "offload", "xdp": "native", "xdpgeneric": "generic",
             "xdpoffload": "offload"}

#: net_af_xdp's log lines about busy polling (at INFO: the EAL option below makes them visible)
AF_XDP_LOG_LEVEL = "--log-level=pmd.net.af_xdp:info"
_BUSY_RE = re.compile(r"Busy polling budget set to: (\d+)")
_BUSY_FAIL_RE = re.compile(r"(Failed to set SO_\w*BUSY\w*|Failed configure busy polling[^\n]*)")


def xdp_modes(xdp_attr: Optional[nla]) -> list[str]:
    """The attach modes an IFLA_XDP attribute (a pyroute2 nla, or None) reports, e.g.
    ``["native"]``; ``[]`` when no program is attached."""
    if xdp_attr is None:
        return []
    modes = [mode for attr, mode in _MODE_ATTRS if xdp_attr.get_attr(attr)]
    if not modes and (attached := xdp_attr.get_attr("IFLA_XDP_ATTACHED")) in _ATTACHED:
        modes.append(_ATTACHED[attached])
    return modes


def xdp_mode(ifname: str, ns: Optional[str] = None) -> Optional[str]:
    """``native`` | ``generic`` | ``offload`` (``+``-joined when several), or None when no XDP
    program is attached to ``ifname`` in namespace ``ns``."""
    with ipr(ns) as h:
        idx = h.link_lookup(ifname=ifname)
        if not idx:
            raise LookupError(f"no link {ifname!r}" + (f" in netns {ns}" if ns else ""))
        link = h.get_links(idx[0])[0]
    modes = xdp_modes(link.get_attr("IFLA_XDP"))
    return "+".join(modes) if modes else None


def busy_poll_from_log(text: str) -> dict[str, object]:
    """What net_af_xdp logged about preferred busy polling (needs :data:`AF_XDP_LOG_LEVEL`):
    ``{"busy_poll_budget": 64}`` per socket set up, or ``{"busy_poll_error": "..."}``, or {}
    when the log says nothing (older PMD, log level not raised)."""
    out: dict[str, object] = {}
    budgets = sorted({int(b) for b in _BUSY_RE.findall(text)})
    if budgets:
        out["busy_poll_budget"] = budgets[0] if len(budgets) == 1 else budgets
    if fail := _BUSY_FAIL_RE.search(text):
        out["busy_poll_error"] = fail.group(1).strip()
    return out
