"""How steady the host's CPUs are: a fixed-work loop timed in short chunks on each CPU.

A throughput measured with busy-polling threads is a number of CPU cycles.  When the CPU's speed
moves by itself — a VM's vCPU sharing its host core with a neighbour, an SMT sibling busy in
another guest, frequency scaling — the DUT's throughput moves with it, and no search or repeat
count can make two runs agree more closely than the CPU does.  Measured on the 2-vCPU development
VM with nothing running: a C loop of fixed work ran between 1,020 and 1,833 M iterations/s in 11 ms
chunks over 6 s (the slowest chunk at 56 % of the fastest).

``probe_cpus()`` runs the loop on each CPU in turn, pinned (``sched_setaffinity`` of this
process, restored afterwards), and returns per CPU the chunk rates relative to the usual best
(p90 of all chunks).  ``spread_pct`` = 100 × (1 − the lowest per-CPU p10) is a floor under the
run-to-run spread of anything measured on this host.  The runner probes before the run builds
anything and again after it ends, and stores the worse probe (``combine``) in
``environment.cpu_steadiness``; the report prints it and adds a note above ``NOTE_ABOVE_PCT``.
"""
from __future__ import annotations

import os
import statistics
import time
from typing import Callable, Optional, Sequence

from nfvperf.host.preflight import Check

#: the report adds a note (and preflight warns) when ``spread_pct`` is above this
NOTE_ABOVE_PCT = 5.0
#: work per chunk: about 10-20 ms of Python on a current CPU
CHUNK_ITERATIONS = 100_000
#: the whole probe's time budget, split between the CPUs (at least MIN_PER_CPU_S each);
#: ``$NFVPERF_STEADINESS_S`` sets another (the integration tests, whose assertions need no 2 s
#: probe, set 0.5)
BUDGET_S = 2.0
BUDGET_ENV = "NFVPERF_STEADINESS_S"
MIN_PER_CPU_S = 0.25
#: more CPUs than this: the first ones of the affinity set are probed (the run's CPUs come first
#: in every plan: housekeeping CPU 0 and the polling CPUs after it)
MAX_CPUS = 8


def _chunk(n: int = CHUNK_ITERATIONS) -> float:
    """Seconds for ``n`` iterations of a fixed integer loop."""
    t0 = time.perf_counter()
    x = 0
    for i in range(n):
        x += i * i
    return time.perf_counter() - t0


def probe_cpu(cpu: int, seconds: float, chunk: Callable[[], float] = _chunk,
              setaffinity: Callable[[int, set[int]], None] = os.sched_setaffinity) -> list[float]:
    """Chunk rates (chunks per second) of the fixed-work loop on ``cpu`` for ``seconds``."""
    setaffinity(0, {cpu})
    chunk()                      # the first chunk after migrating pays cold caches: not counted
    rates: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end or len(rates) < 3:
        dt = chunk()
        if dt > 0:
            rates.append(1.0 / dt)
    return rates


def _pct(sorted_vals: list[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0..100) of an ascending list."""
    k = min(len(sorted_vals) - 1, max(0, int(round(q / 100.0 * (len(sorted_vals) - 1)))))
    return sorted_vals[k]


def summarize(per_cpu: dict[int, list[float]], seconds: float) -> dict[str, object]:
    """{"cpus": {cpu: {p10_rel, median_rel, p90_rel, chunks}}, "spread_pct", "slowest_rel", ...}.

    Rates are relative to the 90th percentile of all chunks of all CPUs (the CPUs' usual best).
    Percentiles, not min and max: one chunk hit by an interrupt is not a slow CPU; a CPU that
    ran slow for a tenth of the probe is.  ``spread_pct`` = 100 × (1 − the lowest p10)."""
    every = sorted(r for rates in per_cpu.values() for r in rates)
    if not every or every[-1] <= 0:
        return {"error": "no chunk was timed", "seconds": round(seconds, 2)}
    ref = _pct(every, 90)
    cpus: dict[str, dict[str, float]] = {}
    for cpu, rates in sorted(per_cpu.items()):
        rel = sorted(r / ref for r in rates)
        cpus[str(cpu)] = {"p10_rel": round(_pct(rel, 10), 4), "median_rel": round(statistics.median(rel), 4),
                          "p90_rel": round(_pct(rel, 90), 4), "chunks": len(rel)}
    slowest = min(c["p10_rel"] for c in cpus.values())
    return {"cpus": cpus, "slowest_rel": slowest, "spread_pct": round(max(0.0, 100.0 * (1.0 - slowest)), 1),
            "seconds": round(seconds, 2), "method": "fixed-work loop in short chunks, pinned, one CPU at a time"}


def budget_from_env() -> float:
    """The probe's budget: ``$NFVPERF_STEADINESS_S`` when set, else ``BUDGET_S``."""
    raw = os.environ.get(BUDGET_ENV, "").strip()
    if not raw:
        return BUDGET_S
    try:
        v = float(raw)
    except ValueError:
        v = -1.0
    if not v > 0:
        raise ValueError(f"{BUDGET_ENV}={raw!r}: the CPU steadiness probe's budget must be a number of "
                         f"seconds above 0 (default {BUDGET_S:g}); set e.g. {BUDGET_ENV}=0.5, or unset it")
    return v


def probe_cpus(cpus: Optional[Sequence[int]] = None, budget_s: Optional[float] = None,
               chunk: Callable[[], float] = _chunk) -> dict[str, object]:
    """Probe ``cpus`` (default: this process's affinity set, at most ``MAX_CPUS``) within
    ``budget_s`` (default :func:`budget_from_env`); this process's affinity is restored
    afterwards, also on error."""
    if budget_s is None:
        budget_s = budget_from_env()
    before = os.sched_getaffinity(0)
    todo = sorted(cpus if cpus is not None else before)[:MAX_CPUS]
    if not todo:
        return {"error": "no CPU to probe"}
    per_cpu_s = max(MIN_PER_CPU_S, budget_s / len(todo))
    t0 = time.monotonic()
    per_cpu: dict[int, list[float]] = {}
    try:
        for cpu in todo:
            per_cpu[cpu] = probe_cpu(cpu, per_cpu_s, chunk=chunk)
    except OSError as e:
        return {"error": f"cannot pin to a CPU of {todo}: {e}"}
    finally:
        os.sched_setaffinity(0, before)
    return summarize(per_cpu, time.monotonic() - t0)


def combine(probes: Sequence[dict[str, object]]) -> dict[str, object]:
    """Several probes of one run (before and after it) as one: the worst probe's numbers, with
    every probe kept under ``probes`` and ``when`` naming them."""
    good = [p for p in probes if p and not p.get("error")]
    if not good:
        return dict(probes[0]) if probes else {"error": "not probed"}
    worst = max(good, key=lambda p: spread_pct(p) or 0.0)
    return {**worst, "probes": list(probes)}


def spread_pct(st: Optional[dict[str, object]]) -> Optional[float]:
    """A probe's (or a run's) ``spread_pct``; None when it was not measured or failed."""
    v = st.get("spread_pct") if st and not st.get("error") else None
    return float(v) if isinstance(v, (int, float)) else None


def moved_pct(st: Optional[dict[str, object]]) -> Optional[float]:
    """``spread_pct`` when it is above ``NOTE_ABOVE_PCT`` (worth a note or a warning), else None."""
    v = spread_pct(st)
    return v if v is not None and v > NOTE_ABOVE_PCT else None


def steadiness_text(st: Optional[dict[str, object]]) -> str:
    """The report's header cell."""
    if not st:
        return "not measured"
    if st.get("error"):
        return f"not measured ({st['error']})"
    cpus, probes = st.get("cpus"), st.get("probes")
    parts = [f"CPU {c} {100 * v['p10_rel']:.0f}–{100 * v['p90_rel']:.0f} %"
             for c, v in (cpus.items() if isinstance(cpus, dict) else ())]
    when = " and ".join(str(p.get("when", "")) for p in (probes if isinstance(probes, list) and probes else [st])
                        if p.get("when"))
    return (f"speed moved {st['spread_pct']:.0f} % in {st['seconds']:.1f} s probe(s){' ' + when if when else ''} "
            f"({'; '.join(parts)} of the usual best, p10–p90 of {CHUNK_ITERATIONS:,}-iteration chunks)")


def steadiness_note(st: Optional[dict[str, object]]) -> Optional[str]:
    """A note when the CPUs' speed moved more than NOTE_ABOVE_PCT, else None."""
    moved = moved_pct(st)
    if moved is None:
        return None
    return (f"This host's CPU speed moved by {moved:.0f} % on its own, measured around the run "
            "(a fixed-work loop on each idle CPU, environment.cpu_steadiness): a VM's vCPU sharing its "
            "host core, or frequency scaling. Throughput on busy-polling cores moves with it, so runs "
            "on this host cannot repeat more closely than that; compare runs made on a steadier host, "
            "or use --repeat and a loss-tolerant goal and read the spread.")


def check_steadiness(probe: Callable[[], dict[str, object]] = probe_cpus) -> Check:
    """``nfvperf preflight``'s ``cpu_steadiness`` check: ok up to NOTE_ABOVE_PCT, else a warning."""
    st = probe()
    if st.get("error"):
        return Check("cpu_steadiness", "warn", f"not measured: {st['error']}")
    text = steadiness_text(st)
    if moved_pct(st) is None:
        return Check("cpu_steadiness", "ok", text)
    return Check("cpu_steadiness", "warn", text + ": runs here cannot repeat more closely than that",
                 "a bare-metal host, or a VM with dedicated (pinned, not overcommitted) host cores "
                 "and SMT siblings; compare runs with --repeat and read the spread")

