"""Which stored units had their DUT's (or VNFs') polling threads on the generator's polling CPUs.

The fact itself is :func:`nfvperf.host.polling_overlap.generator_overlap` of the topology's stored
environment.  Runs store it with each test row (``tests.topology["generator_cpu_overlap"]``); a
run stored before that is read through its environment: the test row's topology kind and
``overrides`` name the ``runs.environment["topologies"]`` entries built for it, and when every such
entry agrees the unit gets their fact (they disagree, or none matches: unknown, no mark).

:func:`mark_overlaps` puts the fact on each :class:`~nfvperf.report.extract.TestView` of a report
(its resolved ``topology``), so the study pivots and the per-test tables read one key;
:data:`MARK` and :func:`overlap_note` are what they show: a † at the figure and a note under the
table that says which CPU and why the figure does not measure the DUT.
"""
from __future__ import annotations

from typing import Any, Iterable, Optional

from nfvperf.host.cpu import format_cpulist
from nfvperf.host.polling_overlap import generator_overlap
from nfvperf.report.configuration import canon, stored_topology

#: the key of the fact in a test's topology (stored by the runner, or filled by :func:`mark_overlaps`)
KEY = "generator_cpu_overlap"
#: the marker at a figure measured with DUT polling threads on the generator's CPU
MARK = "†"


def overlap_from_environment(test: Any, env: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The fact for a test row stored without it, from the run environment's topology entries of
    the same kind and overrides (not a rounds study's builds); None when unknown or ambiguous."""
    row = stored_topology(test)
    if "overrides" not in row:
        return None
    kind, over = row.get("kind"), canon(row.get("overrides") or {})
    facts = [generator_overlap(info.get("environment")) for info in env.get("topologies") or []
             if not (info.get("skipped") or info.get("rounds_study") or info.get("kind") != kind
                     or canon(info.get("overrides") or {}) != over)]
    known = {canon(f) for f in facts if f is not None}
    if len(known) != 1 or any(f is None for f in facts):
        return None
    return next(f for f in facts if f is not None)


def overlap_of(test: Any) -> Optional[dict[str, Any]]:
    """The stored (or filled-in) fact of one test: ``{"cpus": [...], "roles": [...]}``, ``{}``
    (no overlap) or None (unknown)."""
    tp = getattr(test, "topology", None)
    v = tp.get(KEY) if isinstance(tp, dict) else None
    if v is None:
        v = stored_topology(test).get(KEY)
    return v if isinstance(v, dict) else None


def shares_generator_cpu(test: Any) -> bool:
    return bool((overlap_of(test) or {}).get("cpus"))


def mark_overlaps(tests: Iterable[Any], env: dict[str, Any]) -> None:
    """Fill the fact into each report test's resolved ``topology`` (a copy; the stored row is not
    touched) where the row does not carry it."""
    for t in tests:
        if overlap_of(t) is not None:
            continue
        fact = overlap_from_environment(t, env)
        # only a report's view (TestView: it keeps the row as ``stored_topology``), never an ORM row
        if fact is not None and hasattr(t, "stored_topology") and isinstance(getattr(t, "topology", None), dict):
            t.topology = dict(t.topology, **{KEY: fact})


def _roles_text(roles: list[str]) -> str:
    names = ["the DUT's" if r == "dut" else f"VNF {r}'s" if r.startswith("vnf") else f"{r}'s" for r in roles]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def overlap_text(fact: dict[str, Any]) -> str:
    """``the DUT's polling threads shared CPU 0 with the generator's``."""
    cpus = [int(c) for c in fact.get("cpus") or []]
    what = f"CPU {format_cpulist(cpus)}" if len(cpus) == 1 else f"CPUs {format_cpulist(cpus)}"
    return f"{_roles_text([str(r) for r in fact.get('roles') or []] or ['dut'])} polling threads shared " \
           f"{what} with the generator's"


def overlap_note(facts: dict[str, dict[str, Any]]) -> str:
    """The note under a table for the marked configurations (label -> fact): one sentence each
    distinct fact, naming the configurations."""
    by_text: dict[str, list[str]] = {}
    for label, fact in facts.items():
        by_text.setdefault(overlap_text(fact), []).append(label)
    return " ".join(f"{MARK} {text} ({'; '.join(labels)}): these figures measure {_pollers(facts[labels[0]])}, "
                    "not the DUT." for text, labels in by_text.items())


def _pollers(fact: dict[str, Any]) -> str:
    """``two busy-pollers time-sliced on one CPU`` (the generator and each sharing role)."""
    n = 1 + len(fact.get("roles") or []) or 2
    words = {2: "two", 3: "three", 4: "four", 5: "five"}
    where = "one CPU" if len(fact.get("cpus") or []) == 1 else "the same CPUs"
    return f"{words.get(max(n, 2), str(n))} busy-pollers time-sliced on {where}"


def run_note(tests: Iterable[Any]) -> str:
    """The run's note: how many measured units had DUT/VNF polling threads on the generator's CPUs
    (the † units), naming up to three tests; "" when none did or nothing is known."""
    measured = [t for t in tests if getattr(t, "results", None)]
    known = [t for t in measured if overlap_of(t) is not None]
    shared = [t for t in known if shares_generator_cpu(t)]
    if not shared:
        return ""
    names = list(dict.fromkeys(str(t.name) for t in shared))
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    unknown = len(measured) - len(known)
    return (f"{len(shared)} of {len(measured)} measured units had the DUT's or a VNF's polling threads on the "
            f"generator's CPU ({shown}): their figures are marked {MARK} and measure busy-pollers time-sliced "
            "on one CPU, not the DUT; the others shared at most housekeeping"
            + (f" ({unknown} unit(s) without a stored pinning: not known)" if unknown else "") + ".")
