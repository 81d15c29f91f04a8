"""The harness ceiling: what tgen alone can carry on a run's path.

For a topology spec (its port kind, link speed, MTU and the generator's CPU plan) the ceiling is
measured on ``p2p`` with ``dut: testpmd`` (``forward_mode: io``) in place of the DUT: the same
ports and generator cores, the most trivial forwarder there is.  Per frame size:

* ``fps``: what the path carries per interface: the higher of ``zero_loss_fps``, the highest
  load with zero loss by a short search (a trial at line rate tells what the generator can offer;
  then bisection below it to a relative width of ``resolution``; trials of ``trial_s``), and
  ``forwarding_fps``, the most frames per second per interface that came back in any of those
  trials (RFC 2889's forwarding rate).  On shared cores a zero-loss search through the forwarder
  is as noisy as one through the DUT, and came out below what OVS forwarded on the same path at
  512 and 1518 B; what the harness delivered under overload is a bound the DUT cannot pass;
* ``at_line_rate``: True when the first trial, at the nominal line rate, passed: ``fps`` is then
  the line rate, a lower bound of what the harness carries (reports show "≥");
* ``self_latency_ns``: ``{min, p50, p99}`` of one trial at 10 % of that load: the generator's own
  latency on the path (ports, forwarder, timestamps);
* ``recheck_fps``: one more overload trial after those (:func:`recheck`); ``unsteady`` when it
  carried more than 1.25x the search's forwarding rate: the host was slow for the whole search;
  the higher one stands and the ceiling is not cached.

Results are cached (``nfvperf.store.ceiling.CeilingCache``) per host, port kind, link speed, MTU,
generator lcores and frame size.  A run whose nominal link speed has no entry reads one measured on
the same path at a higher speed (``at_lower_link_speed``): the nominal speed only sets the load of
the search's first trial, so ``nfvperf demo``'s second suite (10G) reuses the first one's (40G)
instead of measuring the same path again.  ``harness_ceiling()`` is what the runner and ``nfvperf
baseline`` call; it never raises for a failed measurement: the error is in the returned dict.
"""
from __future__ import annotations

import dataclasses
import platform
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Optional

from nfvperf.host.run import RunContext
from nfvperf.search.validity import check_valid, generator_shortfall
from nfvperf.store.ceiling import CACHE_FILE, CeilingCache, ceiling_key, utc_iso
from nfvperf.trial import Measurer, TrafficProfile

from .ports import port_kind_class
from .spec import TopologySpec, tgen_worker_count
from nfvperf.topo import build

#: how the ceiling is measured; cache entries of another method are measured again (2: the
#: forwarding-rate floor, and tgen's vhost ends with 4096-entry virtqueues; 3: tgen's memif ends
#: zero-copy clients, its virtio ends building large frames in the mbufs RX brought back)
CEILING_METHOD = 3
SELF_LATENCY_FRACTION = 0.1
SELF_LATENCY_MIN_PPS = 1000.0


def ceiling_spec(spec: TopologySpec, tgen_lcores: Optional[str] = None) -> TopologySpec:
    """``spec``'s path with testpmd io as the DUT: p2p, same port kind, PCI addresses, MTU and
    generator lcores, two ports."""
    d: dict[str, Any] = {"kind": "p2p", "dut": "testpmd", "ports": 2,
                         "port_kind": spec.port_kind, "mtu": int(spec.mtu or 1500),
                         "testpmd": {"forward_mode": "io"},
                         "preflight": bool(spec.preflight),
                         "pci": port_kind_class(spec.port_kind).pci_addresses(spec)[:4]}
    lc = tgen_lcores or spec.tgen_lcores
    if lc:
        d["tgen_lcores"] = lc
    workers = tgen_worker_count(None, False, lc)
    if workers > 1 and port_kind_class(spec.port_kind).tg_queue_pair_per_worker:
        # tgen splits each direction over its workers' queue pairs (tgen_cores): testpmd polls them all
        d["testpmd"]["queues"] = workers
    return TopologySpec.model_validate(d)


def planned_tgen_lcores(spec: TopologySpec, run: RunContext) -> Optional[str]:
    """The EAL lcores the generator gets in ``spec``'s own topology (its CPU plan, computed
    without building anything), so the ceiling is measured on the same generator cores."""
    if spec.tgen_lcores:
        return str(spec.tgen_lcores)
    topo = build(spec, run, preflight=False)
    return str(topo.plan_cpus().dpdk_lcores("tgen"))


def _pct(pc: dict[str, Any], p: str) -> Optional[float]:
    for k, v in (pc or {}).items():
        try:
            if abs(float(k) - float(p)) < 1e-9 and v is not None:
                return float(v)
        except ValueError:
            continue
    return None


def zero_loss_fps(m: Measurer, profile: TrafficProfile, trial_s: float = 0.5,
                  resolution: float = 0.03, max_trials: int = 6,
                  log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Highest load per interface the harness carries with zero loss: one trial at line rate,
    then bisection between 0 and what the generator offered, to ``resolution`` relative width.
    An invalid trial (the generator fell short, counters not settled) counts as not carried."""
    m.set_profile(profile)
    line = profile.max_load_pps
    trace: list[dict[str, Any]] = []

    carried = [0.0]          # the most frames per second per interface any trial got back

    def trial(load: float) -> tuple[bool, Any]:
        tr = m.measure(trial_s, load)
        if tr.expected:
            carried[0] = max(carried[0], tr.load_pps * tr.received / tr.expected)
        ok = not check_valid(tr) and tr.loss_ratio == 0.0 and tr.received > 0
        trace.append({"load_pps": load, "sent": tr.sent, "received": tr.received,
                      "loss_ratio": tr.loss_ratio, "valid": not check_valid(tr), "ok": ok})
        return ok, tr

    ok, tr = trial(line)
    if ok:      # the harness carries at least line rate: its own limit is not found
        log(f"    {profile.frame_size_b} B: >= {line:,.0f} fps per interface (line rate passed with zero "
            "loss: a lower bound)")
        return {"fps": line, "zero_loss_fps": line, "forwarding_fps": carried[0],
                "offered_max_fps": line, "line_rate_fps": line, "at_line_rate": True, "trials": trace}
    offered = generator_shortfall(tr) or line
    lo, hi = 0.0, offered
    load = offered * 0.98
    for _ in range(max_trials):
        ok, _tr = trial(load)
        lo, hi = (load, hi) if ok else (lo, load)
        if hi > 0 and (hi - lo) / hi <= resolution:
            break
        load = (lo + hi) / 2
    fwd = min(carried[0], offered)
    log(f"    {profile.frame_size_b} B: {max(lo, fwd):,.0f} fps per interface ({lo:,.0f} with zero "
        f"loss, up to {fwd:,.0f} forwarded; generator offered up to {offered:,.0f}; {len(trace)} trials)")
    return {"fps": max(lo, fwd), "zero_loss_fps": lo, "forwarding_fps": fwd, "offered_max_fps": offered,
            "line_rate_fps": line, "at_line_rate": False, "trials": trace}


def self_latency(m: Measurer, profile: TrafficProfile, fps: float, duration_s: float = 1.0) -> dict[str, Any]:
    """min/p50/p99 ns of the generator's frames through the trivial forwarder at a light load."""
    load = max(SELF_LATENCY_MIN_PPS, SELF_LATENCY_FRACTION * fps)
    m.set_profile(profile)
    tr = m.measure(duration_s, load)
    lat = tr.latency
    if lat is None or not lat.count:
        return {"load_pps": load, "error": "no latency samples"}
    return {"load_pps": load, "count": lat.count, "min": float(lat.min_ns),
            "p50": _pct(lat.percentiles_ns, "50") or float(lat.avg_ns),
            "p99": _pct(lat.percentiles_ns, "99") or float(lat.max_ns)}


#: a recheck's forwarding rate this far above the search's: the host was slow for the whole search
#: (this one's vCPUs run the 1518 B copies 2.5x slower for seconds at a time)
UNSTEADY_RATIO = 1.25


def recheck(m: Measurer, profile: TrafficProfile, res: dict[str, Any], trial_s: float = 0.5,
            log: Callable[[str], None] = lambda s: None) -> None:
    """One more overload trial (at what the generator offered at most), a second or more after
    the search's: a ceiling is what the path carries, and a slow stretch of the host that covered
    the search would make it a low one (and the cache would keep it).  The higher forwarding rate
    of the two stands (``forwarding_fps``, ``fps``); ``recheck_fps`` is the new trial's; when it
    is more than :data:`UNSTEADY_RATIO` times the search's, ``unsteady`` is True and the ceiling
    is not cached (:func:`harness_ceiling`): the next run measures it again."""
    load = float(res.get("offered_max_fps") or profile.max_load_pps)
    m.set_profile(profile)
    tr = m.measure(trial_s, load)
    got = load * tr.received / tr.expected if tr.expected else 0.0
    first = float(res.get("forwarding_fps") or 0.0)
    res["recheck_fps"] = got
    res["forwarding_fps_search"] = first
    # a lower recheck leaves the search's best trial standing (a ceiling is the most the path
    # carried); a recheck far above every trial of the search says they all ran slow
    res["unsteady"] = got > first * UNSTEADY_RATIO
    if got > first:
        res["forwarding_fps"] = got
        res["fps"] = max(float(res["zero_loss_fps"]), got)
    if res["unsteady"]:
        log(f"    {profile.frame_size_b} B: the host changed speed during the ceiling: the path forwarded "
            f"{first:,.0f} fps per interface in the search and {got:,.0f} in a recheck; the ceiling "
            f"is {res['fps']:,.0f} and is not cached")


def at_lower_link_speed(entry: dict[str, Any], line_fps: float) -> dict[str, Any]:
    """A ceiling measured at a higher nominal link speed, read at a lower one whose line rate at
    this frame size is ``line_fps``.  The path (port kind, MTU, generator cores, forwarder) is the
    same; the nominal speed only sets the load of the search's first trial.  So: where the
    harness carried ``line_fps`` or more with zero loss, the ceiling is the line rate, reported as
    a lower bound (``at_line_rate``), as a search starting at ``line_fps`` would have found; else
    it is what the path carried (never above ``line_fps``), and every figure keeps its measured
    value.  ``derived_from`` names the speed and line rate it was measured at."""
    zero_loss = float(entry.get("zero_loss_fps") or 0.0)
    out = dict(entry, line_rate_fps=line_fps,
               derived_from={"link_speed_bps": float((entry.get("key") or {}).get("link_speed_bps") or 0.0),
                             "line_rate_fps": entry.get("line_rate_fps"), "fps": entry.get("fps"),
                             "at_line_rate": bool(entry.get("at_line_rate"))})
    for k in ("forwarding_fps", "offered_max_fps"):
        if entry.get(k) is not None:
            out[k] = min(float(entry[k]), line_fps)
    if entry.get("at_line_rate") or zero_loss >= line_fps:
        out.update(fps=line_fps, zero_loss_fps=line_fps, at_line_rate=True)
    else:
        out.update(fps=min(float(entry["fps"]), line_fps), at_line_rate=False)
    return out


def measure_sizes(cspec: TopologySpec, run: RunContext, profiles: dict[int, TrafficProfile],
                  trial_s: float = 0.5, resolution: float = 0.03,
                  log: Callable[[str], None] = lambda s: None, **build_kw: Any) -> dict[int, dict[str, Any]]:
    """Bring up the ceiling topology once and measure every size."""
    out: dict[int, dict[str, Any]] = {}
    with build(cspec, run, **build_kw) as topo:
        m = topo.measurer()
        with m:
            for size, prof in sorted(profiles.items()):
                # a forwarder that learns nothing: no learning frames (tgen waits 2 s after
                # them), a short drain, no settle time -- a few seconds per size
                prof = dataclasses.replace(prof, learning=False, settle_s=0.0,
                                           drain_s=min(prof.drain_s, 0.2))
                t0 = time.monotonic()
                res = zero_loss_fps(m, prof, trial_s=trial_s, resolution=resolution, log=log)
                res["self_latency_ns"] = self_latency(m, prof, res["fps"])
                if not res["at_line_rate"]:
                    recheck(m, prof, res, trial_s=trial_s, log=log)
                res["wall_s"] = round(time.monotonic() - t0, 2)
                out[size] = res
    return out


def harness_ceiling(spec: TopologySpec, run: RunContext, profiles: dict[int, TrafficProfile], *,
                    cache: Optional[CeilingCache] = None, trial_s: float = 0.5,
                    resolution: float = 0.03, log: Callable[[str], None] = lambda s: None,
                    hostname: Optional[str] = None, **build_kw: Any) -> dict[str, Any]:
    """The ceiling for ``spec``'s path at the sizes of ``profiles`` (from ``cache`` where fresh,
    the rest measured and put in the cache), as stored in ``environment.harness_ceiling``::

        {"port_kind", "link_speed_bps", "mtu", "tgen_lcores", "per_size": {"64": {"fps",
         "at_line_rate", "self_latency_ns": {"min", "p50", "p99"}, "cached", "measured_at", ...}},
         "measured_at", "cached": bool (every size from the cache), "error"?: str}

    A failure (topology, testpmd, tgen) is recorded in ``error`` and never raised."""
    hostname = hostname or platform.node()
    out: dict[str, Any] = {"port_kind": spec.port_kind, "mtu": int(spec.mtu or 1500),
                           "per_size": {}, "cached": False, "forwarder": "testpmd io (p2p)"}
    link = next(iter(profiles.values())).link_speed_bps if profiles else None
    out["link_speed_bps"] = link
    try:
        lcores = planned_tgen_lcores(spec, run)
        out["tgen_lcores"] = lcores
        keys = {s: ceiling_key(hostname, spec.port_kind, p.link_speed_bps, out["mtu"], str(lcores), s)
                for s, p in profiles.items()}
        todo: dict[int, TrafficProfile] = {}
        read_at: dict[int, float] = {}
        for s, p in profiles.items():
            hit = cache.get(keys[s]) if cache is not None else None
            if hit is not None and hit.get("method") == CEILING_METHOD:   # else measured differently
                out["per_size"][str(s)] = dict(hit, cached=True)
                continue
            faster = cache.get_faster(keys[s], method=CEILING_METHOD) if cache is not None else None
            if faster is not None:
                out["per_size"][str(s)] = dict(at_lower_link_speed(faster[1], p.max_load_pps), cached=True)
                read_at[s] = float(faster[1]["key"]["link_speed_bps"])
            else:
                todo[s] = p
        if read_at:
            speeds = ", ".join(f"{v / 1e9:g}G" for v in sorted(set(read_at.values())))
            log(f"  harness ceiling: {', '.join(map(str, sorted(read_at)))} B from the cache, measured on "
                f"the same path at a higher nominal link speed ({speeds}) and read at "
                f"{float(link or 0) / 1e9:g}G")
        if todo:
            log(f"  harness ceiling: measuring tgen through testpmd io on {spec.port_kind}, "
                f"tgen lcores {lcores}, sizes {', '.join(map(str, sorted(todo)))} B")
            cspec = ceiling_spec(spec, lcores)
            measured = measure_sizes(cspec, run, todo, trial_s=trial_s, resolution=resolution,
                                     log=log, **build_kw)
            for s, res in measured.items():
                entry = dict(res, method=CEILING_METHOD, measured_at=utc_iso(), measured_at_epoch=time.time())
                if cache is not None and not res.get("unsteady"):
                    entry = cache.put(keys[s], entry)
                out["per_size"][str(s)] = dict(entry, cached=False)
        else:
            log(f"  harness ceiling: {spec.port_kind}, tgen lcores {lcores}: from the cache "
                f"({cache.path if cache else ''})")
        out["cached"] = not todo
        stamps = [p.get("measured_at") for p in out["per_size"].values() if p.get("measured_at")]
        out["measured_at"] = max(stamps) if stamps else utc_iso()
    except Exception as e:  # noqa: BLE001 - a failed ceiling must not fail the run
        out["error"] = f"{type(e).__name__}: {e}"
        out["traceback"] = traceback.format_exc(limit=6)
        out.setdefault("measured_at", utc_iso())
        log(f"  harness ceiling: FAILED ({out['error']}); the run goes on without it")
    return out


def default_cache_path(out_dir: Path) -> Path:
    return Path(out_dir) / CACHE_FILE
