"""The harness ceiling of a run (``--tg tgen``): before each topology group, what the harness
itself carries on that group's path (tgen through testpmd io in place of the DUT), from the
cache or measured (:func:`nfvperf.topo.ceiling.harness_ceiling`), once per path and frame size;
stored in ``environment.harness_ceiling(s)``.  A failed ceiling never fails the run."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from nfvperf.config import ProfileSpec, Suite, TestConfig
from nfvperf.methods import rate_methods, result_class
from nfvperf.store.ceiling import CeilingCache
from nfvperf.topo import RunContext
from nfvperf.topo import ceiling as topo_ceiling   # looked up per call (tests replace its functions)
from nfvperf.topo.spec import TopologySpec
from nfvperf.trial import TrafficProfile

from .groups import Unit

from .progress import Progress

__all__ = ["CeilingOptions", "HarnessCeilings", "ceiling_path_key"]


@dataclass
class CeilingOptions:
    """How a run gets its harness ceiling: ``enabled`` (``--no-ceiling`` sets False; the suite's
    ``ceiling.enabled`` too), ``refresh`` (measure even if cached), the cache file, and the
    measuring function (tests inject one)."""

    enabled: bool = True
    refresh: bool = False
    cache_path: Optional[Path] = None
    measure_fn: Optional[Callable[..., dict[str, Any]]] = None

    def off_reason(self, tg: str, suite: Suite) -> Optional[str]:
        if tg != "tgen":
            return f"--tg {tg}: no harness ceiling"
        if not self.enabled or not suite.spec.ceiling.enabled:
            return "turned off (--no-ceiling or ceiling.enabled: false)"
        return None

    def measure(self, spec: TopologySpec, tag: str, run_dir: Path, profiles: dict[int, TrafficProfile],
                suite: Suite, log: Callable[[str], None]) -> dict[str, Any]:
        cfg = suite.spec.ceiling
        if self.measure_fn is not None:
            return self.measure_fn(spec, profiles, log=log)
        cache = CeilingCache(self.cache_path or topo_ceiling.default_cache_path(run_dir.parent.parent),
                             max_age_s=cfg.max_age_h * 3600.0, refresh=self.refresh)
        return topo_ceiling.harness_ceiling(spec, RunContext(tag=tag, run_dir=run_dir / "ceiling"), profiles,
                                            cache=cache, trial_s=cfg.trial_s, resolution=cfg.resolution,
                                            log=log)


def ceiling_path_key(topo_spec: TopologySpec, test: TestConfig) -> str:
    """What makes two topology groups share a harness ceiling: the path's port kind, PCI
    addresses, MTU, generator lcores, link speed and the topology/DUT (their CPU plans)."""
    return json.dumps([topo_spec.port_kind, list(topo_spec.pci), topo_spec.mtu,
                       topo_spec.tgen_lcores, topo_spec.kind, topo_spec.dut,
                       test.traffic.link_speed_bps], default=str)


class HarnessCeilings:
    """The harness ceilings of one run, by path key; ``env`` is the run's environment (written
    by ``save``, which the runner commits)."""

    def __init__(self, options: CeilingOptions, suite: Suite, tag: str, run_dir: Path,
                 env: dict[str, Any], progress: Progress, save: Callable[[], None]):
        self.options, self.suite, self.tag, self.run_dir = options, suite, tag, run_dir
        self.env, self.progress, self.save = env, progress, save
        self.ceilings: dict[str, dict[str, Any]] = {}

    def before_group(self, tg: str, topo_spec: TopologySpec, group: list[Unit]) -> None:
        """Before a topology group of a real run: the harness ceiling for its path (port kind,
        link speed, MTU, generator cores) at the sizes of its throughput/latency units, from the
        cache or measured; stored in ``environment.harness_ceiling(s)``.  Never fails the run."""
        why_off = self.options.off_reason(tg, self.suite)
        if why_off:
            self.env.setdefault("harness_ceiling_off", why_off)
            return
        wanted = [(t, s) for t, s in group if s and (t.method in rate_methods() or result_class(t.method).LATENCY)]
        if not wanted:
            return
        key = ceiling_path_key(topo_spec, wanted[0][0])
        have = self.ceilings.get(key)
        timing = ProfileSpec(name="quick")
        profiles: dict[int, TrafficProfile] = {}
        for t, s in wanted:
            if s is not None and s not in profiles and not (have and str(s) in have["per_size"]):
                profiles[s] = t.traffic.profile(s, timing)
        if not profiles:
            return
        self.progress.unit(f"harness ceiling ({topo_spec.port_kind})")
        self.progress.log(f"harness ceiling for {topo_spec.port_kind} at {', '.join(map(str, sorted(profiles)))} B "
                          "(tgen through testpmd io in place of the DUT)")
        try:
            res = self.options.measure(topo_spec, self.tag, self.run_dir, profiles, self.suite,
                                       self.progress.log)
        except Exception as e:  # noqa: BLE001 - a failed ceiling must not fail the run
            res = {"port_kind": topo_spec.port_kind, "per_size": {}, "cached": False,
                   "error": f"{type(e).__name__}: {e}"}
            self.progress.log(f"  harness ceiling: FAILED ({res['error']}); the run goes on without it")
        if have:
            have["per_size"].update(res.get("per_size") or {})
            have["cached"] = bool(have.get("cached")) and bool(res.get("cached"))
            if res.get("error"):
                have["error"] = res["error"]
        else:
            self.ceilings[key] = res
            self.env.setdefault("harness_ceilings", []).append(res)
            self.env.setdefault("harness_ceiling", res)
        self.save()
