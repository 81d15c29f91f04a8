"""Host noise for the simulated DUT: vCPUs that slow down by half for seconds at a time (issue 16).

On the shared 2-vCPU development host a fixed-work loop pinned to one CPU runs at up to 1.79×
its slowest speed within a minute, in stretches that last seconds, on one vCPU at a time, with
zero steal time (README "Host CPU steadiness", docs/methods.md "The host's own noise",
``/work/shared/data/cpu1-speed-trace-0.25s.txt``).  A DUT on busy-polling cores forwards in
proportion to its CPU's speed, so two configurations measured minutes apart meet different hosts.
:class:`HostNoise` models that host so the sim can show it, and show what interleaved, paired
rounds (:mod:`nfvperf.stats`) do about it.

The model (:class:`HostNoiseParams`, every default documented there):

* ``cpus`` CPUs.  At any virtual time either every CPU is *steady* (speed 1.0) or exactly one
  is *slow* (speed ``slow_factor``): at most one CPU is slow at a time.
* While all are steady, each CPU runs its own exponential clock with mean ``mean_steady_s``;
  the first to fire turns slow (so the all-steady gap is exponential with mean
  ``mean_steady_s / cpus`` and the slow CPU is uniform among them).  A slow stretch lasts an
  exponential time with mean ``mean_slow_s``; then all are steady again.  The clocks are
  memoryless, so this is each CPU alternating steady (mean ``mean_steady_s`` of all-steady time)
  and slow (mean ``mean_slow_s``) stretches, with the others' clocks held while one is slow.
  The process starts in its stationary state (slow at t = 0 with the long-run probability).
* The DUT runs on ``dut_cpu``.  A trial over the virtual window [t, t + d] sees the mean speed of
  that CPU over the window, times a per-trial jitter factor ~ N(1, ``jitter``) (clipped at ±3σ).

Everything is a pure function of the virtual time and ``seed``: the schedule of stretches is
drawn from ``random.Random(seed)`` and extended lazily, and a trial's jitter from a generator
seeded by the seed and the window's start.  Two :class:`HostNoise` with the same parameters see
the same host; a :class:`~nfvperf.tg.sim.SimMeasurer` that is reconfigured between units keeps
its virtual clock (``wall_s``), so its units share one host.
"""
from __future__ import annotations

import bisect
import dataclasses
import math
import random
from dataclasses import dataclass
from typing import Any, Optional, Union

@dataclass(frozen=True)
class HostNoiseParams:
    """Parameters of :class:`HostNoise`.  Defaults: what was measured on the 2-vCPU development
    host (docs/sim.md, "Host noise")."""

    cpus: int = 2                 #: the host's CPUs (the development VM has 2)
    dut_cpu: int = 1              #: the CPU the DUT's forwarding runs on (0-based; CPU 0 keeps the generator)
    slow_factor: float = 0.55     #: a slow CPU's speed relative to steady: 1 / 1.79 measured, rounded down
    mean_steady_s: float = 8.0    #: mean of a CPU's steady stretch (its clock runs while no CPU is slow)
    mean_slow_s: float = 3.0      #: mean of a slow stretch (measured: 0.5 s to several seconds)
    jitter: float = 0.01          #: per-trial relative noise (standard deviation), beside the stretches
    seed: Optional[int] = None    #: the host's seed; None: the measurer's ``seed``

    def problems(self, where: str = "sim.host_noise") -> list[str]:
        """What is wrong with these values, each naming the field (under ``where``; "" for the bare
        field name) and the fix."""
        at = f"{where}." if where else ""
        out = []
        if not isinstance(self.cpus, int) or isinstance(self.cpus, bool) or self.cpus < 1:
            out.append(f"{at}cpus: must be a whole number of CPUs >= 1 (e.g. 2); got {self.cpus!r}")
        elif (not isinstance(self.dut_cpu, int) or isinstance(self.dut_cpu, bool)
              or not 0 <= self.dut_cpu < self.cpus):
            out.append(f"{at}dut_cpu: must be a CPU index in 0..{self.cpus - 1} (cpus is {self.cpus}); "
                       f"got {self.dut_cpu!r}")
        if not _number(self.slow_factor) or not 0 < self.slow_factor <= 1:
            out.append(f"{at}slow_factor: must be in (0, 1], a slow CPU's speed relative to a steady "
                       f"one (e.g. 0.55 for half speed); got {self.slow_factor!r}")
        for name in ("mean_steady_s", "mean_slow_s"):
            v = getattr(self, name)
            if not _number(v) or not v > 0:
                out.append(f"{at}{name}: must be a number of seconds > 0 "
                           f"(e.g. {getattr(HostNoiseParams, name)}); got {v!r}")
        if not _number(self.jitter) or not 0 <= self.jitter < 0.3:
            out.append(f"{at}jitter: must be in [0, 0.3), a relative standard deviation per trial "
                       f"(e.g. 0.01 for 1 %); got {self.jitter!r}")
        if self.seed is not None and (not isinstance(self.seed, int) or isinstance(self.seed, bool)
                                      or self.seed < 0):
            out.append(f"{at}seed: must be a whole number >= 0, or leave it out to use sim.seed; "
                       f"got {self.seed!r}")
        return out

    @classmethod
    def from_setting(cls, setting: "HostNoiseSetting",
                     where: str = "sim.host_noise") -> Optional["HostNoiseParams"]:
        """``sim.host_noise`` as parameters: None or False -> None (off); True -> the defaults;
        a mapping -> those keys over the defaults.  Raises ValueError naming the bad field."""
        if setting is None or setting is False:
            return None
        if setting is True:
            return cls()
        if isinstance(setting, cls):
            params = setting
        elif isinstance(setting, dict):
            at = f"{where}." if where else ""
            allowed = [f.name for f in dataclasses.fields(cls)]
            unknown = sorted(str(k) for k in setting if k not in allowed)
            if unknown:
                raise ValueError("; ".join(f"{at}{k}: unknown host noise parameter; allowed: "
                                           f"{', '.join(allowed)}" for k in unknown))
            params = cls(**setting)
        else:
            raise ValueError(f"{where or 'host_noise'}: give true (the defaults), false, or a mapping such as "
                             f"{{slow_factor: 0.55, mean_slow_s: 3}}; got {setting!r}")
        problems = params.problems(where)
        if problems:
            raise ValueError("; ".join(problems))
        return params

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


#: how ``sim.host_noise`` may be given: off (None/False), the defaults (True), or a mapping
HostNoiseSetting = Union[None, bool, dict, HostNoiseParams]


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


class HostNoise:
    """The host's CPU speeds as a function of virtual time (see the module docstring)."""

    def __init__(self, params: Optional[HostNoiseParams] = None, seed: int = 1) -> None:
        self.params = params or HostNoiseParams()
        problems = self.params.problems()
        if problems:
            raise ValueError("; ".join(problems))
        self.seed = self.params.seed if self.params.seed is not None else seed
        self._rng = random.Random(f"nfvperf host noise {self.seed}")
        p = self.params
        # stretches: [_starts[i], _starts[i + 1]) with _slow[i] the slow CPU or -1 (all steady)
        gap = p.mean_steady_s / p.cpus
        first_slow = self._rng.random() < p.mean_slow_s / (p.mean_slow_s + gap)
        self._starts: list[float] = [0.0]
        self._slow: list[int] = [self._rng.randrange(p.cpus) if first_slow else -1]
        self._end = self._draw_length(self._slow[0])

    def _draw_length(self, slow_cpu: int) -> float:
        p = self.params
        mean = p.mean_slow_s if slow_cpu >= 0 else p.mean_steady_s / p.cpus
        return self._rng.expovariate(1.0 / mean)

    def _extend(self, t: float) -> None:
        """Draw stretches until the schedule reaches past ``t``."""
        while self._end <= t:
            slow = self._rng.randrange(self.params.cpus) if self._slow[-1] < 0 else -1
            self._starts.append(self._end)
            self._slow.append(slow)
            self._end += self._draw_length(slow)

    def stretches(self, t0: float, t1: float) -> list[tuple[float, float, int]]:
        """The stretches overlapping [t0, t1]: (start, end, slow CPU or -1), clipped to the window."""
        if t1 < t0:
            raise ValueError("the window ends before it starts")
        self._extend(t1)
        i = max(0, bisect.bisect_right(self._starts, t0) - 1)
        out = []
        while i < len(self._starts) and self._starts[i] <= t1:
            end = self._starts[i + 1] if i + 1 < len(self._starts) else self._end
            out.append((max(t0, self._starts[i]), min(t1, end), self._slow[i]))
            i += 1
        return out

    def slow_cpus(self, t: float) -> list[int]:
        """The CPUs slow at virtual time ``t`` (none or one): the stretch that holds ``t``."""
        self._extend(t)
        slow = self._slow[bisect.bisect_right(self._starts, t) - 1]
        return [slow] if slow >= 0 else []

    def speed(self, cpu: int, t: float) -> float:
        """CPU ``cpu``'s speed at virtual time ``t`` (1.0 steady, ``slow_factor`` slow)."""
        return self.params.slow_factor if cpu in self.slow_cpus(t) else 1.0

    def mean_speed(self, cpu: int, t0: float, t1: float) -> float:
        """CPU ``cpu``'s mean speed over [t0, t1] (its speed at t0 for an empty window)."""
        if t1 <= t0:
            return self.speed(cpu, t0)
        slow_s = sum(b - a for a, b, s in self.stretches(t0, t1) if s == cpu)
        return 1.0 - (1.0 - self.params.slow_factor) * slow_s / (t1 - t0)

    def jitter_factor(self, t0: float) -> float:
        """The per-trial factor ~ N(1, jitter), clipped at ±3σ, for a trial starting at ``t0``."""
        j = self.params.jitter
        if j == 0:
            return 1.0
        x = random.Random(f"nfvperf host noise {self.seed} trial at {t0:.9f}").gauss(0.0, 1.0)
        return 1.0 + j * max(-3.0, min(3.0, x))

    def trial_speed(self, t0: float, duration_s: float) -> float:
        """The DUT CPU's speed as a trial over [t0, t0 + duration_s] sees it: mean speed × jitter."""
        return self.mean_speed(self.params.dut_cpu, t0, t0 + duration_s) * self.jitter_factor(t0)

    def slow_share(self) -> float:
        """The long-run share of time the DUT's CPU is slow: mean_slow / (mean_steady + cpus × mean_slow)."""
        p = self.params
        return p.mean_slow_s / (p.mean_steady_s + p.cpus * p.mean_slow_s)

    def describe(self) -> dict[str, Any]:
        """The parameters (the seed resolved) and what they imply, for the run's environment."""
        return {**self.params.to_dict(), "seed": self.seed,
                "dut_cpu_slow_share": round(self.slow_share(), 4),
                "model": "one CPU at a time runs at slow_factor for exponential stretches "
                         "(mean mean_slow_s); a trial sees its CPU's mean speed over its virtual "
                         "window × N(1, jitter) (nfvperf.tg.sim_noise, docs/sim.md)"}


__all__ = ["HostNoise", "HostNoiseParams", "HostNoiseSetting"]
