"""What a :class:`~nfvperf.tg.tgen.TgenMeasurer` asks tgen to send: the directions of a profile,
one ``stream.add`` object per direction (PROTOCOL.md §4) and the record of how each direction was
split over generator cores (``extra["tgen_cores"]``)."""
from __future__ import annotations

import re
from typing import Any, Optional, Sequence

from nfvperf.tg.tgen_proc import TgenProcess, _lcore_cpus
from nfvperf.trial import MeasurerError, TrafficProfile


def check_rx_groups(rx_groups: Optional[Sequence[Sequence[int]]]) -> list[list[int]]:
    """``rx_groups`` as lists of ints; a ValueError when a group repeats a port or two overlap."""
    groups = [[int(p) for p in g] for g in (rx_groups or [])]
    seen: dict[int, int] = {}
    for i, g in enumerate(groups):
        if len(set(g)) != len(g) or not g:
            raise ValueError(f"rx_groups[{i}]: {g} must list distinct ports")
        for p in g:
            if p in seen:
                raise ValueError(f"rx_groups: port {p} is in groups {seen[p]} and {i}; a port "
                                 f"belongs to one receive group")
            seen[p] = i
    return groups


def directions_for(pairs: list[tuple[int, int]], profile: TrafficProfile) -> list[tuple[int, int]]:
    return list(pairs) + ([(b, a) for a, b in pairs] if profile.bidirectional else [])


def rx_group(rx_groups: list[list[int]], rx: int) -> Optional[list[int]]:
    """The receive group port ``rx`` is in (its first member first: ``rx`` itself), or None."""
    for g in rx_groups:
        if rx in g and len(g) > 1:
            return [rx] + [p for p in g if p != rx]
    return None


def stream_object(profile: TrafficProfile, tx: int, rx: int, *, reverse: bool,
                  group: Optional[list[int]], extra: Optional[dict]) -> dict:
    """The ``stream.add`` object of direction ``tx`` -> ``rx`` (``reverse``: a bidirectional
    profile's way back), received on ``group`` when given, with the topology's ``extra`` merged."""
    s: dict[str, Any] = {"port": tx, "rx_port": rx, "name": f"p{tx}->p{rx}",
                         "flows": int(profile.flows_per_port), "rate": {"pps": 1}}
    if group is not None:
        s["rx_ports"] = group
        s["name"] = f"p{tx}->p{'+'.join(str(p) for p in group)}"
    if profile.imix:
        s["imix"] = [[int(sz), int(w)] for sz, w in profile.imix]
    else:
        s["size_b"] = int(profile.frame_size_b)
    if profile.vlan is not None:
        s["vlan"] = int(profile.vlan)
    if profile.ip_version == 6:
        s["ipv6"] = True
    elif profile.ip_version != 4:
        raise ValueError(f"ip_version must be 4 or 6, not {profile.ip_version}")
    if profile.vxlan:
        s["vxlan"] = {}
    if reverse:
        # a reverse direction: swap tgen's default addresses so replies look like replies
        # (RFC 2544 198.18.0.0/15; VXLAN outer 10.0.0.1/2)
        if profile.ip_version == 6:
            s.update(src_ip="2001:2:0:1::1", dst_ip="2001:2::1")
        else:
            s.update(src_ip="198.19.0.1", dst_ip="198.18.0.1")
        if profile.vxlan:
            s["vxlan"].update(outer_src_ip="10.0.0.2", outer_dst_ip="10.0.0.1")
    for k, v in (extra or {}).items():
        if k == "vxlan" and isinstance(v, dict):
            if profile.vxlan:
                s["vxlan"] = {**s.get("vxlan", {}), **v}
        else:
            s[k] = v
    return s


def split_base_name(name: str) -> str:
    """A direction's name from a sub-stream's (``p0->p1#1`` -> ``p0->p1``)."""
    return re.sub(r"#\d+$", "", name)


def split_record(proc: TgenProcess, objs: list[dict], flows: int, cores: int, split_n: int,
                 groups: list[list[int]], directions: list[tuple[int, int]],
                 stream_ids: list[int]) -> dict[str, Any]:
    """Which lcores each direction uses (tgen's stream.list txq and ports.list tx_lcores /
    rx_lcores) and what the split could not do, for the result (``extra["tgen_cores"]``)."""
    notes: list[str] = []
    if cores > 1 and split_n < cores:
        notes.append(f"{flows} flow(s) per direction cannot be split over {cores} "
                     f"generator cores: each direction uses {split_n} core(s) "
                     "(give more flows to use them all)")
    try:
        txq = {int(s["id"]): int(s.get("txq", 0)) for s in proc.rpc("stream.list")}
        ports = {int(p["id"]): p for p in proc.rpc("ports.list")}
    except (MeasurerError, KeyError, TypeError, ValueError):
        return {"cores": cores, "sub_streams": split_n, "notes": notes}
    lc = _lcore_cpus(getattr(proc, "lcores", "") or "")
    dirs: dict[str, Any] = {}
    for o, group, (tx, rx) in zip(objs, groups, directions):
        tx_l = ports.get(tx, {}).get("tx_lcores") or []
        queues = [txq.get(stream_ids[j], 0) for j in group]
        lcores = [int(tx_l[q]) for q in queues if q < len(tx_l)]
        if len(set(queues)) < len(queues):
            notes.append(f"{o.get('name')}: port {tx} has {ports.get(tx, {}).get('txq')} TX "
                         f"queue(s) for {len(queues)} sub-streams: some share a queue and core")
        rx_l = sorted({int(x) for x in ports.get(rx, {}).get("rx_lcores") or []})
        dirs[str(o.get("name"))] = {
            "sub_streams": len(group), "tx_queues": queues, "tx_lcores": lcores,
            "tx_cpus": sorted({c for x in lcores for c in lc.get(x, ())}),
            "rx_lcores": rx_l, "rx_cpus": sorted({c for x in rx_l for c in lc.get(x, ())})}
    return {"cores": cores, "sub_streams": split_n, "directions": dirs, "notes": notes}
