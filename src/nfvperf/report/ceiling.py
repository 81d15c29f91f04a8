"""Reading the harness ceiling stored with a run (``environment.harness_ceiling``) for reports.

The ceiling is what the harness alone carries on the run's path (tgen through testpmd io in place
of the DUT, same port kind, link speed, MTU and generator cores), per frame size.  A throughput
above :data:`HARNESS_BOUND_FRACTION` of it is *harness-bound*: it says how fast the generator and
its ports are, not how fast the DUT is.  The generator's self-latency on that path (min/p50/p99)
is shown beside latency results, and latency can be reported net of it.
"""
from __future__ import annotations

from typing import Any, Optional

#: a throughput above this fraction of the ceiling is labelled harness-bound
HARNESS_BOUND_FRACTION = 0.9
HARNESS_BOUND, DUT_BOUND, NO_CEILING = "harness-bound", "DUT-bound", "—"


def bound_label(value_pps: Optional[float], ceiling_fps: Optional[float],
                fraction: float = HARNESS_BOUND_FRACTION) -> str:
    """``harness-bound`` when ``value_pps`` > ``fraction`` x the ceiling, else ``DUT-bound``;
    ``—`` without a ceiling (the sim, ``--no-ceiling``, a failed measurement) or a value."""
    if ceiling_fps is None or value_pps is None or ceiling_fps <= 0:
        return NO_CEILING
    return HARNESS_BOUND if value_pps > fraction * ceiling_fps else DUT_BOUND


def ceilings_of(env: dict[str, Any]) -> list[dict[str, Any]]:
    """Every ceiling stored with the run: ``harness_ceilings`` (one per distinct port kind and
    core plan), else the single ``harness_ceiling``."""
    many = env.get("harness_ceilings")
    if isinstance(many, list) and many:
        return [c for c in many if isinstance(c, dict)]
    one = env.get("harness_ceiling")
    return [one] if isinstance(one, dict) else []


def ceiling_point(env: dict[str, Any], size: Optional[int],
                  port_kind: Optional[str] = None) -> Optional[dict[str, Any]]:
    """The stored ceiling entry (``fps``, ``self_latency_ns``) for a frame size on the port kind
    (any port kind when None), or None."""
    if size is None:
        return None
    for c in ceilings_of(env):
        if port_kind and c.get("port_kind") and c.get("port_kind") != port_kind:
            continue
        per = c.get("per_size") or {}
        p = per.get(str(size), per.get(size)) if isinstance(per, dict) else None
        if isinstance(p, dict) and p.get("fps") is not None:
            return p
    return None


def ceiling_fps(env: dict[str, Any], size: Optional[int], port_kind: Optional[str] = None) -> Optional[float]:
    p = ceiling_point(env, size, port_kind)
    return float(p["fps"]) if p else None


def self_latency(env: dict[str, Any], size: Optional[int],
                 port_kind: Optional[str] = None) -> Optional[dict[str, float]]:
    """``{"min", "p50", "p99"}`` ns of the generator on the harness path, or None."""
    p = ceiling_point(env, size, port_kind)
    sl = (p or {}).get("self_latency_ns")
    if isinstance(sl, dict) and sl.get("p50") is not None:
        return {k: float(sl[k]) for k in ("min", "p50", "p99") if sl.get(k) is not None}
    return None


def net_of_harness(lat: dict[str, Any], self_lat: Optional[dict[str, float]]) -> dict[str, Any]:
    """A latency point (min_ns/avg_ns/max_ns/percentiles_ns) net of the harness self-latency:
    the harness's own minimum is taken from ``min_ns``, its median from every other figure
    (avg, max, percentiles); floored at 0.  Without a self-latency the point is returned as is."""
    if not self_lat:
        return lat
    base_min = self_lat.get("min", self_lat.get("p50", 0.0))
    base = self_lat.get("p50", base_min)
    out = dict(lat)

    def sub(v: Any, b: float) -> Any:
        return max(0.0, float(v) - b) if isinstance(v, (int, float)) and not isinstance(v, bool) else v

    out["min_ns"] = sub(lat.get("min_ns"), base_min)
    for k in ("avg_ns", "max_ns"):
        out[k] = sub(lat.get(k), base)
    pc = lat.get("percentiles_ns")
    if isinstance(pc, dict):
        out["percentiles_ns"] = {k: sub(v, base) for k, v in pc.items()}
    out["net_of_harness_ns"] = {"min": base_min, "other": base}
    return out


def summary(env: dict[str, Any], tg: str) -> str:
    """One header line: the ceiling per size, or why there is none."""
    if tg == "sim":
        return "— (simulated DUT: no harness)"
    cs = ceilings_of(env)
    if not cs:
        off = env.get("harness_ceiling_off")
        return f"— ({off})" if off else "— (not measured)"
    parts = []
    for c in cs:
        per = c.get("per_size") or {}
        sizes = ", ".join(f"{s} B {float(p['fps']):,.0f} fps" for s, p in
                          sorted(per.items(), key=lambda kv: int(kv[0])) if isinstance(p, dict)
                          and p.get("fps") is not None)
        how = "cached" if c.get("cached") else "measured"
        err = f"; error: {c['error']}" if c.get("error") else ""
        parts.append(f"{c.get('port_kind')}, tgen lcores {c.get('tgen_lcores')}: {sizes or 'none'} "
                     f"({how} {c.get('measured_at') or ''}){err}".replace(" )", ")"))
    return "; ".join(parts)
