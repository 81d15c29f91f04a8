"""OVS telemetry (issue 28): ``dpif-netdev/pmd-stats-show`` per PMD, the datapath's flow count
(``dpctl/show``) and the ports' counters (``ovs-ofctl dump-ports``, read live), as a reading of
:mod:`nfvperf.tg.telemetry`.

Not read: the Interface table's ``statistics`` (``tx_retries``, ``ovs_tx_failure_drops``, ...):
ovs-vswitchd refreshes that column every ``stats-update-interval`` (at least 5 s), so a reading
around a trial of a few seconds would be stale; ``tx_retries`` is therefore "not available", and
a vhost port's full-ring drops are counted in its ``tx_dropped`` (dump-ports, live).
"""
from __future__ import annotations

import contextlib
import re
import json
from typing import Any, Mapping

from nfvperf.dut.ovs_ctl import OvsError
from nfvperf.dut.ovs_pmd import OvsPmds

from nfvperf.tg.telemetry import NA, PMD_FIELDS, dut_reading

#: pmd-stats-show keys (snake_case, as ``parse_pmd_stats`` gives them) -> telemetry names
PMD_KEYS = {"packets_received": "packets", "packet_recirculations": "recirculations",
            "phwol_hits": "phwol_hits", "simple_match_hits": "simple_match_hits", "emc_hits": "emc_hits",
            "smc_hits": "smc_hits", "megaflow_hits": "megaflow_hits",
            "miss_with_success_upcall": "upcalls", "miss_with_failed_upcall": "failed_upcalls",
            "processing_cycles": "busy_cycles", "idle_cycles": "idle_cycles"}
#: the port counters dump-ports has (live)
OVS_PORT_OFFERS = ("rx_packets", "tx_packets", "rx_dropped", "tx_dropped", "rx_errors", "tx_errors")
OVS_OFFERS = frozenset({"pmds", "datapath_flows", "drops", *OVS_PORT_OFFERS})


def pmd_reading(pmd_stats: Mapping[str, object]) -> object:
    """Per PMD thread (``pmd core N``) its counters in telemetry names; a counter this OVS does
    not print (``simple match hits`` before 2.16, ``phwol hits`` before 2.17) is NA.  NA when
    there are no PMD threads (the kernel datapath)."""
    threads = pmd_stats.get("threads")
    out = {}
    for name, st in threads.items() if isinstance(threads, Mapping) else ():
        if not str(name).startswith("pmd"):
            continue
        got = {PMD_KEYS[k]: int(v) for k, v in st.items() if k in PMD_KEYS}
        out[name] = {f: got.get(f, NA) for f in PMD_FIELDS}
    return out or NA


def datapath_flows(dpctl_show: str) -> object:
    """The datapath's flows (megaflows) from ``ovs-appctl dpctl/show`` (``flows: N``, summed over
    datapaths); NA when the output has none."""
    found = [int(m.group(1)) for m in re.finditer(r"^\s*flows:\s*(\d+)", dpctl_show or "", re.M)]
    return sum(found) if found else NA


def drop_counters(coverage_show: str) -> object:
    """OVS's drop counters (``datapath_drop_*``, ``drop_action_*``: OVS ≥ 2.13) from
    ``ovs-appctl coverage/show``, by name with their totals; coverage/show lists only counters
    that were hit, so a missing one is 0.  NA when the output is not coverage/show's.

    The PMD threads add to these counters in batches, so a drop in the last moments before the
    reading after a trial may count in the next trial (the drain between them is the margin)."""
    if "total:" not in (coverage_show or "") and "never hit" not in (coverage_show or ""):
        return NA
    return {m.group(1): int(m.group(2)) for m in
            re.finditer(r"^((?:datapath_drop|drop_action)_\w+)\s+.*?total:\s*(\d+)", coverage_show, re.M)}


def ovs_reading(adapter: str, counters: Mapping[str, object], dpctl_show: str,
                coverage_show: str = "") -> dict[str, object]:
    """The reading of an OVS adapter from its ``counters()`` (ports, pmd), ``dpctl/show`` and
    ``coverage/show``."""
    ports, pmd = counters.get("ports"), counters.get("pmd")
    return dut_reading(adapter, ports if isinstance(ports, Mapping) else {},
                       pmds=pmd_reading(pmd if isinstance(pmd, Mapping) else {}),
                       datapath_flows=datapath_flows(dpctl_show), drops=drop_counters(coverage_show),
                       port_offers=OVS_PORT_OFFERS)


class OvsStats(OvsPmds):
    """Counters, telemetry, versions and the environment of an OVS adapter."""

    def counters(self) -> dict[str, object]:
        """Port counters of every bridge and the PMD statistics, for the record beside a result."""
        ports = {(name if name != "LOCAL" else br): st
                 for br in self.bridges for name, st in self.dump_ports(br).items()}
        return {"ports": ports, "pmd": self.pmd_stats(), "dut": self.name}

    def telemetry(self) -> dict[str, object]:
        """PMD counters, datapath flows and port counters (:mod:`nfvperf.dut.ovs_telemetry`)."""
        return ovs_reading(self.name, self.counters(), self.appctl("dpctl/show"),
                           self.appctl("coverage/show"))

    def versions(self) -> dict[str, str]:
        v = {"ovs": "", "dpdk": ""}
        with contextlib.suppress(OvsError):
            out = self._run(["ovs-appctl", "-t", str(self.ctl), "--timeout=5", "version"], timeout=8)
            m = re.search(r"(\d+\.\d+[\w.\-]*)", out)
            v["ovs"] = m.group(1) if m else out.strip()
            v["dpdk"] = self.vsctl("get", "Open_vSwitch", ".", "dpdk_version",
                                   wait=False).strip().strip('"').replace("DPDK ", "")
        return v

    def version(self) -> str:
        """E.g. ``3.1.0 (DPDK 22.11.11)``."""
        v = self.versions()
        return f"{v['ovs']} (DPDK {v['dpdk']})" if v["ovs"] else ""

    def environment(self) -> dict[str, object]:
        cfg = {}
        with contextlib.suppress(OvsError, ValueError, KeyError, IndexError):
            cfg = dict(json.loads(self.vsctl("--format=json", "--columns=other_config", "list", "Open_vSwitch",
                                             wait=False))["data"][0][0][1])
        return {"dut": self.name, "version": self.version(), "versions": self.versions(),
                "cpus": self.cpus, "pmd_cpu_mask": cfg.get("pmd-cpu-mask"), "other_config": cfg,
                "bridges": list(self.bridges), "netns": self.netns,
                "rule_installs": [r.to_dict() for r in self.rule_installs],
                "bonds": self._bonds_environment(),
                "reconfigurations": list(self.reconfigurations),
                "ports": {p.name: {"kind": p.kind, "ofport": p.ofport, "bridge": p.bridge,
                                    "mtu_request": p.mtu, **p.options}
                          for p in self.ovs_ports.values()}}

    def _bonds_environment(self) -> dict[str, object]:
        """The bonds as configured and as OVS shows them now (mode, LACP status, active
        member, each member's state and hash buckets)."""
        out: dict[str, Any] = {}
        for name, cfg in self.bonds.items():
            try:
                shown: Any = self.bond_show(name)
            except OvsError as e:
                shown = {"error": str(e)}
            out[name] = {**cfg, "show": shown}
        return out
