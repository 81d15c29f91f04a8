"""Reading the harness ceiling stored with a run (``environment.harness_ceiling``) for reports.

The ceiling is what the harness alone carries on the run's path (tgen through testpmd io in place
of the DUT, same port kind, link speed, MTU and generator cores), per frame size.  A throughput
above :data:`HARNESS_BOUND_FRACTION` of it is *harness-bound*: it says how fast the generator and
its ports are, not how fast the DUT is.  A ceiling whose first trial, at the nominal line rate,
passed is only that line rate (:func:`is_lower_bound`): the harness carries *at least* this, its
own limit is unknown, so it is shown as "≥ 812,744" and a result above 90 % of it is labelled
:data:`NEAR_LINE_RATE`, not harness-bound.  The generator's self-latency on that path
(min/p50/p99) is shown beside latency results, and latency can be reported net of it
(:func:`latency_net_wanted`, :func:`net_point`).
"""
from __future__ import annotations

from typing import Any, Optional

#: a throughput above this fraction of the ceiling is labelled harness-bound
HARNESS_BOUND_FRACTION = 0.9
HARNESS_BOUND, DUT_BOUND, NO_CEILING = "harness-bound", "DUT-bound", "—"
#: the label of a result above the fraction of a ceiling that is only the nominal line rate
NEAR_LINE_RATE = "near line rate"


def bound_label(value_pps: Optional[float], ceiling_fps: Optional[float],
                fraction: float = HARNESS_BOUND_FRACTION, lower_bound: bool = False) -> str:
    """``harness-bound`` when ``value_pps`` > ``fraction`` x the ceiling, else ``DUT-bound``;
    ``—`` without a ceiling (the sim, ``--no-ceiling``, a failed measurement) or a value.  When
    the ceiling is only a lower bound (the nominal line rate, :func:`is_lower_bound`) a value
    above the fraction is :data:`NEAR_LINE_RATE`: the link's nominal rate bounds it, and the
    harness was never shown to limit anything."""
    if ceiling_fps is None or value_pps is None or ceiling_fps <= 0:
        return NO_CEILING
    if value_pps > fraction * ceiling_fps:
        return NEAR_LINE_RATE if lower_bound else HARNESS_BOUND
    return DUT_BOUND


def is_lower_bound(point: Optional[dict[str, Any]]) -> bool:
    """Whether a stored ceiling entry is only the nominal line rate (``at_line_rate``: the first
    trial, at line rate, passed, so the harness carries at least that and its limit was not
    found).  Entries stored before the flag: ``zero_loss_fps`` >= ``line_rate_fps`` when both are
    there, else False."""
    if not isinstance(point, dict):
        return False
    flag = point.get("at_line_rate")
    if flag is not None:
        return bool(flag)
    zl, line = point.get("zero_loss_fps"), point.get("line_rate_fps")
    try:
        return zl is not None and line is not None and float(line) > 0 and float(zl) >= float(line)
    except (TypeError, ValueError):
        return False


def ceiling_text(fps: Optional[float], lower_bound: bool = False) -> str:
    """``812,744`` or, for a lower bound, ``≥ 812,744``; ``—`` without a ceiling."""
    return NO_CEILING if fps is None else ("≥ " if lower_bound else "") + f"{float(fps):,.0f}"


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


def ceiling_bound(env: dict[str, Any], size: Optional[int],
                  port_kind: Optional[str] = None) -> tuple[Optional[float], bool]:
    """(ceiling fps, whether it is only a lower bound) for a frame size on the port kind."""
    p = ceiling_point(env, size, port_kind)
    return (float(p["fps"]), is_lower_bound(p)) if p else (None, False)


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


def latency_net_wanted(config: Optional[dict[str, Any]], net_of_harness: Optional[bool] = None) -> bool:
    """Whether a report shows latency net of the harness: ``net_of_harness`` (the CLI's
    ``--latency-net-of-harness``) when given, else the suite's ``ceiling.latency_net_of_harness``."""
    return bool(net_of_harness if net_of_harness is not None
                else ((config or {}).get("ceiling") or {}).get("latency_net_of_harness"))


def has_self_latency(env: dict[str, Any]) -> bool:
    """Whether any stored ceiling of the run has a self-latency to net latency of."""
    return any(isinstance(p, dict) and isinstance(p.get("self_latency_ns"), dict)
               and p["self_latency_ns"].get("p50") is not None
               for c in ceilings_of(env) for p in (c.get("per_size") or {}).values())


def net_point(lat: Any, env: dict[str, Any], size: Optional[int],
              port_kind: Optional[str], net: bool) -> tuple[Any, bool]:
    """(the latency point as a report shows it, whether it is gross although ``net`` asked for
    net): net of the self-latency on its path when ``net`` and one was measured for its size and
    port kind, else as stored."""
    if not net or not lat:
        return lat, False
    sl = self_latency(env, size, port_kind)
    if sl is None:
        return lat, True
    return net_of_harness(lat, sl), False


def _unsteady_text(p: dict[str, Any]) -> str:
    """`` (unsteady host: search X, recheck Y)`` for an entry whose recheck carried far more than
    its search (topo.ceiling.recheck), else ``""``."""
    if not p.get("unsteady"):
        return ""
    return (f" (unsteady host: search {float(p.get('forwarding_fps_search') or 0):,.0f}, "
            f"recheck {float(p.get('recheck_fps') or 0):,.0f})")


def summary(env: dict[str, Any], tg: str) -> str:
    """One header line: the ceiling per size, or why there is none."""
    if tg == "sim":
        return "— (simulated DUT: no harness)"
    cs = ceilings_of(env)
    if not cs:
        off = env.get("harness_ceiling_off")
        return f"— ({off})" if off else "— (not measured)"
    parts: list[str] = []
    uses: list[int] = []                   # per part: how many topology groups stored its measurement
    index: dict[tuple[Any, ...], int] = {}  # one measurement, read again from the cache by later groups
    for c in cs:
        per = c.get("per_size") or {}
        sizes = ", ".join(f"{s} B {ceiling_text(p['fps'], is_lower_bound(p))} fps{_unsteady_text(p)}" for s, p in
                          sorted(per.items(), key=lambda kv: int(kv[0])) if isinstance(p, dict)
                          and p.get("fps") is not None)
        err = f"; error: {c['error']}" if c.get("error") else ""
        # read from an entry measured on the same path at a higher nominal link speed
        faster = sorted({float(p["derived_from"].get("link_speed_bps") or 0) for p in per.values()
                         if isinstance(p, dict) and isinstance(p.get("derived_from"), dict)})
        at = f", measured at {', '.join(f'{v / 1e9:g}G' for v in faster)} nominal" if faster else ""
        key = (c.get("port_kind"), str(c.get("tgen_lcores")), c.get("measured_at"), sizes, at, err)
        if c.get("measured_at") and key in index:
            uses[index[key]] += 1
            continue
        index[key] = len(parts)
        uses.append(1)
        how = "cached" if c.get("cached") else "measured"
        parts.append(f"{c.get('port_kind')}, tgen lcores {c.get('tgen_lcores')}: {sizes or 'none'} "
                     f"({how} {c.get('measured_at') or ''}{at}){err}".replace(" )", ")"))
    parts = [p + (f" (the same measurement for {n} topology groups)" if n > 1 else "")
             for p, n in zip(parts, uses)]
    if any(is_lower_bound(p) for c in cs for p in (c.get("per_size") or {}).values()):
        parts[-1] += f"; {LOWER_BOUND_NOTE}"
    return "; ".join(parts)


#: what "≥" before a ceiling means, wherever it is shown
LOWER_BOUND_NOTE = ("≥: the harness carried the nominal line rate with zero loss, so its own limit is "
                    "above that and was not found (a lower bound)")
