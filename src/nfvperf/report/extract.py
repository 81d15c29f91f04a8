"""Read the numbers a report needs out of stored results.

Method results are stored as ``MethodResult.to_dict()``; their shapes differ per method.  These
helpers look for the well-known keys (units in the names: ``*_pps``, ``*_ns``, ``*_s``) wherever
they sit, so a report degrades to "not available" instead of failing when a method adds or moves
a field.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterable, Optional

from nfvperf import units
from nfvperf.methods import rate_methods
from nfvperf.trial import TrafficProfile

# in order of preference: what "the" result of a test is, in frames/s per interface
HEADLINE_KEYS = ("throughput_pps", "rlb_pps", "lower_bound_pps", "conditional_throughput_pps",
                 "ndr_pps", "load_pps", "forwarding_rate_pps", "max_forwarding_rate_pps", "rate_pps")


def walk(obj: Any, depth: int = 0) -> Iterable[dict[str, Any]]:
    """Every dict inside ``obj`` (breadth-first-ish: the outer dicts first)."""
    if depth > 8:
        return
    if isinstance(obj, dict):
        yield obj
        for v in obj.values():
            if isinstance(v, (dict, list)):
                yield from walk(v, depth + 1)
    elif isinstance(obj, list):
        for v in obj:
            if isinstance(v, (dict, list)):
                yield from walk(v, depth + 1)


def num(v: Any) -> Optional[float]:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)) and math.isfinite(v):
        return float(v)
    return None


def find_key(data: Any, keys: Iterable[str], skip: tuple[str, ...] = ("trials", "histogram")) -> Optional[float]:
    keys = tuple(keys)
    for key in keys:
        for d in _walk_skip(data, skip):
            v = num(d.get(key))
            if v is not None:
                return v
    return None


def _walk_skip(obj: Any, skip: tuple[str, ...], depth: int = 0) -> Iterable[dict[str, Any]]:
    if depth > 8:
        return
    if isinstance(obj, dict):
        yield obj
        for k, v in obj.items():
            if k in skip:
                continue
            if isinstance(v, (dict, list)):
                yield from _walk_skip(v, skip, depth + 1)
    elif isinstance(obj, list):
        for v in obj:
            yield from _walk_skip(v, skip, depth + 1)


def headline_pps(data: dict[str, Any]) -> Optional[float]:
    """The test's main rate per interface: the median over repetitions (``repeat``), else the
    first goal's RLB, else the first known key."""
    rep = repeat_of(data)
    if rep is not None:
        return num(rep.get("median_pps"))
    goals = goals_of(data)
    if goals:
        v = num(goals[0].get("lower_bound_pps")) or num(goals[0].get("rlb_pps"))
        if v is not None:
            return v
    return find_key(data, HEADLINE_KEYS)


def repeat_of(data: Any) -> Optional[dict[str, Any]]:
    """The ``repeat`` summary of a result whose search ran several times (n ≥ 2), else None."""
    rep = data.get("repeat") if isinstance(data, dict) else None
    if isinstance(rep, dict) and (num(rep.get("n")) or 0) >= 2:
        return rep
    return None


def spread_text(rep: dict[str, Any]) -> str:
    """``median of 3: min 1,000 – max 1,100 fps (range 9.52 %)``."""
    rr = num(rep.get("relative_range"))
    return (f"median of {int(rep['n'])}: min {fmt_num(num(rep.get('min_pps')), 0)} – max "
            f"{fmt_num(num(rep.get('max_pps')), 0)} fps"
            + (f" (range {100 * rr:.2f} %)" if rr is not None else ""))


def goals_of(data: dict[str, Any]) -> list[dict[str, Any]]:
    for d in _walk_skip(data, ("trials", "histogram")):
        g = d.get("goals")
        if isinstance(g, list) and g and isinstance(g[0], dict):
            return g
    return []


def latency_of(data: Any) -> Optional[dict[str, Any]]:
    """A LatencySummary dict (min_ns/avg_ns/max_ns, percentiles_ns, histogram) found in data."""
    best = None
    for d in _walk_skip(data, ("trials", "streams")):
        if "avg_ns" in d and "min_ns" in d and "max_ns" in d:
            if best is None or (d.get("count") or 0) > (best.get("count") or 0) or \
                    (d.get("percentiles_ns") and not best.get("percentiles_ns")):
                best = d
    return best


def latency_points(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Latency per load point: the latency method's ``points`` (fraction, load_pps, min/avg/max_ns,
    percentiles_ns, ...); else one point from any latency summary in the data."""
    pts = data.get("points")
    if isinstance(pts, list) and pts and isinstance(pts[0], dict) and "avg_ns" in pts[0]:
        return pts
    lat = latency_of(data)
    if lat:
        return [dict(lat, fraction=None, load_pps=find_key(data, ("load_pps",)))]
    return []


def latency_at_throughput(data: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The point at 100 % of Throughput (else the highest load) that has samples."""
    pts = [p for p in latency_points(data) if p.get("count") or p.get("avg_ns")]
    if not pts:
        return None
    for p in pts:
        if p.get("fraction") == 1.0:
            return p
    return max(pts, key=lambda p: p.get("load_pps") or 0)


def scalars(data: dict[str, Any], limit: int = 40) -> list[tuple[str, Any]]:
    """Top-level (and one level nested) scalar fields, for method summaries we do not special-case."""
    out: list[tuple[str, Any]] = []
    for k, v in data.items():
        if isinstance(v, (int, float, str, bool)) or v is None:
            if v is not None and v != "":
                out.append((k, v))
        elif isinstance(v, dict) and k not in ("params", "profile", "latency", "histogram", "throughput_result"):
            for k2, v2 in v.items():
                if isinstance(v2, (int, float, str, bool)) and v2 != "":
                    out.append((f"{k}.{k2}", v2))
        if len(out) >= limit:
            break
    return out


def fmt_num(v: Any, digits: int = 2) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if v != 0 and abs(v) < 0.01:
            return f"{v:.3g}"
        return f"{v:,.{digits}f}"
    return str(v)


def traffic_profile(d: dict[str, Any]) -> TrafficProfile:
    """The stored ``tests.traffic`` dict back as a TrafficProfile (wire size, max load)."""
    known = {f.name for f in dataclasses.fields(TrafficProfile)}
    return TrafficProfile(**{k: v for k, v in (d or {}).items() if k in known})


def test_topology(config_topology: Optional[dict[str, Any]], row: Optional[dict[str, Any]]) -> dict[str, Any]:
    """A stored ``tests.topology`` row as the full topology the test ran on: the run config's
    ``topology`` with the row's ``overrides``, plus the row's own fields (kind, ports,
    switching_operations, directions).  A row without ``overrides`` (stored before they were
    split out) already holds the full spec."""
    row = row or {}
    if "overrides" not in row:
        return row
    from nfvperf.validation import deep_merge
    full = deep_merge(config_topology or {}, row.get("overrides") or {})
    full.update((k, v) for k, v in row.items() if k != "overrides")
    return full


class TestView:
    """A stored test with ``topology`` resolved by :func:`test_topology`; everything else is the
    test's own."""

    __test__ = False          # not a pytest class

    def __init__(self, test: Any, topology: dict[str, Any]):
        self._test = test
        self.topology = topology
        self.stored_topology = test.topology or {}      # the row as stored (kind, overrides, ...)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._test, name)


def resolved_tests(run: Any) -> list[Any]:
    """The run's tests, each with its full topology (see :func:`test_topology`)."""
    cfg_topo = (run.config or {}).get("topology") or {}
    return [TestView(t, test_topology(cfg_topo, t.topology)) for t in run.tests]


def size_of(profile: dict[str, Any]) -> float:
    """Mean L2 size on the wire (outer size for VXLAN), from a stored TrafficProfile dict."""
    return traffic_profile(profile).wire_size_b


def rates(pps: float, profile: dict[str, Any]) -> dict[str, float]:
    """fps, L1/L2 Mbps and % line rate (L1) per interface for one rate (units.rate_summary)."""
    tp = traffic_profile(profile)
    return dict(units.rate_summary(pps, tp.wire_size_b, tp.link_speed_bps), max_fps=tp.max_load_pps)


# methods whose result *is* a rate in fps per interface (stored as Result.value_pps)
RATE_METHODS = rate_methods()      # what the methods declare (MethodInfo.headline == RATE)

# the main scalar of the other methods: (key, label, scale, unit) — used by the run log and compare
METHOD_METRICS: dict[str, tuple[str, str, float, str]] = {
    "back_to_back": ("mean_frames", "mean back-to-back burst", 1.0, "frames"),
    "system_recovery": ("recovery_time_s", "recovery time", 1e3, "ms"),
    "reset": ("reset_time_frame_loss_s", "reset time (frame-loss method)", 1e3, "ms"),
    "rfc2889_address_caching": ("address_capacity", "address caching capacity", 1.0, "addresses"),
    "rfc2889_address_learning": ("learning_rate_pps", "address learning rate", 1.0, "fps"),
    "tcp": ("mean_throughput_bps", "TCP goodput (iperf3, mean)", 1e-6, "Mbps"),
}


def method_metric(method: str, data: dict[str, Any]) -> Optional[tuple[str, float, str]]:
    """(label, value in its unit, unit) of a non-rate method's main result."""
    m = METHOD_METRICS.get(method)
    if not m:
        return None
    v = num(data.get(m[0]))
    if v is None:
        v = find_key(data, (m[0],), skip=("trials", "histogram", "throughput_result"))
    return None if v is None else (m[1], v * m[2], m[3])


def summarize_result(method: str, data: dict[str, Any], profile: dict[str, Any],
                     directions: int) -> dict[str, Any]:
    """One line for the run log and the headline value (per interface)."""
    pps = headline_pps(data) if method in RATE_METHODS else None
    if method == "rfc2889_forwarding":
        pps = num(data.get("max_forwarding_rate_pps")) or pps
    out: dict[str, Any] = {"value_pps": pps}
    mm = method_metric(method, data)
    if mm:
        out["text"] = f"{mm[0]} {fmt_num(mm[1], 3 if mm[2] == 'ms' else 0)} {mm[2]}"
        return out
    if method == "frame_loss_rate":
        pts = data.get("points") or []
        out["text"] = f"{len(pts)} load steps; stopped: {data.get('stopped', '?')}"
        return out
    if method in ("latency",):
        lat = latency_at_throughput(data)
        if lat:
            out["text"] = (f"latency min/avg/max {lat['min_ns'] / 1e3:,.1f}/{lat['avg_ns'] / 1e3:,.1f}/"
                           f"{lat['max_ns'] / 1e3:,.1f} µs")
            return out
    if pps is not None and pps <= 0:
        rub = find_key(data, ("upper_bound_pps",))
        out["text"] = "no loss-free load found" + (f" (lowest lossy load {rub:,.0f} fps per interface)" if rub else "")
        return out
    if pps is not None:
        r = rates(pps, profile)
        out["text"] = (f"{pps:,.0f} fps per interface ({r['l1_pct']:.2f} % line rate L1, "
                       f"L1 {r['l1_mbps']:,.1f} Mbps, L2 {r['l2_mbps']:,.1f} Mbps); "
                       f"aggregate {pps * directions:,.0f} fps over {directions} interface(s)")
        rep = repeat_of(data)
        if rep is not None:
            out["text"] += f"; {spread_text(rep)}"
    else:
        sc = [f"{k}={fmt_num(v)}" for k, v in scalars(data, 6)]
        out["text"] = ", ".join(sc) or "done"
    return out


def headline_of_run(run: Any) -> Optional[str]:
    """E.g. 'throughput 64 B: 7,992,699 fps/if (53.71 % L1)' from the first throughput-like result."""
    for t in run.tests:
        for r in t.results:
            if r.value_pps is None:
                continue
            prof = t.traffic or {}
            rr = rates(r.value_pps, prof)
            size = f"{t.frame_size_b} B" if t.frame_size_b else "IMIX"
            unit = ((run.config or {}).get("traffic") or {}).get("rate_unit", "pps")
            if unit == "l1_mbps":
                value = f"{rr['l1_mbps']:,.1f} L1 Mbps/if"
            elif unit == "l2_mbps":
                value = f"{rr['l2_mbps']:,.1f} L2 Mbps/if"
            elif unit == "percent":
                value = f"{rr['l1_pct']:.2f} % line rate (L1)"
            else:
                value = f"{r.value_pps:,.0f} fps/if"
            return f"{t.name} {size}: {value} ({rr['l1_pct']:.2f} % L1)" if unit != "percent" else \
                f"{t.name} {size}: {value}"
    return None
