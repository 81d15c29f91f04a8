"""Series: stored results grouped by what was measured (issue 17).

A *series* is every stored value of one configuration over the runs.  Its identity is the
configuration rule ``nfvperf compare`` matches runs on (:mod:`nfvperf.report.configuration`:
method, frame size, topology kind / DUT / port kind / overrides, traffic, study axes) plus what
a run adds to it:

- ``host``: the testbed the run ran on, else the host's name (``environment.hostname``);
- ``build``: the DUT build the suite names (``topology.ovs.vswitchd``, ``topology.testpmd.binary``,
  ``topology.l3fwd.binary``),
  None when it runs the installed one;
- ``metric``: which figure of the test (``throughput`` for a plain zero-loss search, ``mrr`` /
  ``pdr`` / ``ndr`` for the units of an interleaved study, one series each);
- ``cores`` and ``rules``: the PMD core count and OpenFlow rule count the test ran with (also
  when the suite, not an override, set them).

Not in the identity: the suite and test names, the run's time and status, the simulated DUT's
model (``sim:``) and the DUT's *detected* version.  A version is what a trend is for: an upgrade
that costs 10 % must show as a change inside one series, not start a new one; every point
carries the version it measured (``dut_version``).

The identity's hash (first 12 hex digits of SHA-1 over its canonical JSON) is the series id.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Optional

from nfvperf.report.configuration import axes_of, canon, pmd_cores, topology_signature, traffic_signature
from nfvperf.validation import deep_merge


def series_id(identity: dict[str, Any]) -> str:
    return hashlib.sha1(canon(identity).encode()).hexdigest()[:12]


@dataclass
class RunInfo:
    """The run-level columns a series needs (read with SQL, never the whole run)."""

    id: int
    uid: str
    tag: str
    status: str
    started_at: Any
    suite: str = ""
    dut: str = ""
    testbed: Optional[str] = None
    hostname: Optional[str] = None
    config_topology: dict[str, Any] = field(default_factory=dict)
    cpu_steadiness: Optional[dict[str, Any]] = None
    dut_version: Optional[str] = None
    pid: Optional[int] = None
    pid_starttime: Optional[int] = None

    @property
    def environment(self) -> dict[str, Any]:
        """The part of ``runs.environment`` that was read (for report.compare.host_noise and
        store.db.run_liveness)."""
        return {"cpu_steadiness": self.cpu_steadiness, "hostname": self.hostname, "pid": self.pid,
                "pid_starttime": self.pid_starttime}


class StoredTest:
    """A stored test row shaped for :mod:`nfvperf.report.configuration`: ``topology`` is the
    run's topology with the row's overrides (the full spec it ran on), ``stored_topology`` the
    row itself."""

    __test__ = False

    def __init__(self, id: int, name: str, method: str, frame_size_b: Optional[int], status: str,
                 topology: Optional[dict[str, Any]], traffic: Optional[dict[str, Any]],
                 study: Optional[dict[str, Any]], config_topology: Optional[dict[str, Any]] = None):
        self.id, self.name, self.method, self.frame_size_b, self.status = id, name, method, frame_size_b, status
        self.stored_topology = topology or {}
        self.traffic = traffic or {}
        self.study = study
        full = deep_merge(config_topology or {}, self.stored_topology.get("overrides") or {})
        full.update((k, v) for k, v in self.stored_topology.items() if k != "overrides")
        self.topology = full

    def _rounds(self) -> Optional[dict[str, Any]]:
        rounds = self.study.get("rounds") if isinstance(self.study, dict) else None
        return rounds if isinstance(rounds, dict) and rounds.get("metrics") else None

    @property
    def is_rounds(self) -> bool:
        """A unit of an interleaved study (its figures are per metric, over rounds)."""
        return self._rounds() is not None

    def metrics(self) -> list[str]:
        """The series this test feeds: one per metric of an interleaved unit, else its method."""
        rounds = self._rounds()
        return [str(m) for m in rounds["metrics"]] if rounds else [self.method]


def build_of(topology: dict[str, Any]) -> Optional[str]:
    """The DUT build a resolved topology names (a binary path), None for the installed one."""
    for section, key in (("ovs", "vswitchd"), ("testpmd", "binary"), ("l3fwd", "binary")):
        sec = topology.get(section)
        if isinstance(sec, dict) and sec.get(key):
            return str(sec[key])
    return None


def identity(test: StoredTest, run: RunInfo, metric: str) -> dict[str, Any]:
    """The series identity of ``metric`` of ``test`` in ``run`` (see the module docstring)."""
    topo = topology_signature(test)
    topo["dut"] = topo.get("dut") or run.dut or None
    topo["port_kind"] = topo.get("port_kind") or run.config_topology.get("port_kind")
    traffic = traffic_signature(test)
    ovs = test.topology.get("ovs") if isinstance(test.topology.get("ovs"), dict) else {}
    return {"method": test.method, "metric": metric, "frame_size_b": test.frame_size_b,
            "dut": topo["dut"], "build": build_of(test.topology), "topology": topo.get("kind"),
            "port_kind": topo["port_kind"], "host": run.testbed or run.hostname,
            "flows": traffic.get("flows_per_port"), "rules": ovs.get("rules") if ovs else None,
            "cores": pmd_cores(test), "axes": axes_of(test),
            "configuration": {"topology": topo, "traffic": traffic}}


def label(ident: dict[str, Any], names: Optional[list[str]] = None) -> str:
    """One line for a series: ``flows 64 B mrr · ovs-dpdk p-ovs-p/vhost · flows=1 · host vm``."""
    name = (names or ["?"])[0].split("[", 1)[0]
    metric = str(ident.get("metric"))
    parts = [f"{name} {ident.get('frame_size_b') or 'IMIX'} B" + ("" if metric == name else f" {metric}"),
             f"{ident.get('dut')} {ident.get('topology')}/{ident.get('port_kind')}"]
    if ident.get("build"):
        parts.append(f"build {ident['build']}")
    axes = ident.get("axes") or {}
    if axes:
        parts.append(",".join(f"{k}={v}" for k, v in axes.items()))
    parts.append(f"host {ident.get('host')}")
    return " · ".join(parts)
