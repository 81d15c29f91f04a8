"""The report's "OpenFlow rule installation" table: how long OVS took to install the rules of
each topology (rules, seconds, rules/s), from ``rule_installs`` in the DUT environment the run
stored per topology (``environment.topologies[i].environment.dut``; see
:mod:`nfvperf.dut.ovs_rules`)."""
from __future__ import annotations

import json
from typing import Any

from nfvperf.report.extract import fmt_num
from nfvperf.report.table import Table

#: installs smaller than this (a cross-connect's 2 rules) are not worth a row
MIN_RULES = 1_000

COLUMNS = ["Topology", "Bridge", "Rules", "Method", "Bundles", "Install s", "Rules/s", "OVS counts"]


def installs(env: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(topology label, install record) of every stored rule install, in run order."""
    out = []
    for topo in env.get("topologies") or []:
        topo_env = topo.get("environment") if isinstance(topo, dict) else None
        dut = topo_env.get("dut") if isinstance(topo_env, dict) else None
        if not isinstance(dut, dict):          # a sim run, an error, another kind of DUT
            continue
        over = topo.get("overrides") or {}
        label = str(topo.get("kind") or "?") + (f" {json.dumps(over, separators=(',', ':'))}" if over else "")
        out += [(label, rec) for rec in dut.get("rule_installs") or [] if isinstance(rec, dict)]
    return out


def rule_install_tables(env: dict[str, Any]) -> list[Table]:
    """One table with a row per install of at least :data:`MIN_RULES` rules (none: no table)."""
    rows = []
    for label, r in installs(env):
        if int(r.get("rules") or 0) < MIN_RULES:
            continue
        rate = r.get("rules_per_s")
        rows.append([label, str(r.get("bridge", "")), fmt_num(r.get("rules")), str(r.get("method", "")),
                     fmt_num(r.get("chunks")), fmt_num(r.get("seconds")),
                     fmt_num(round(rate)) if rate is not None else "—", fmt_num(r.get("installed"))])
    if not rows:
        return []
    return [Table("OpenFlow rule installation",
                  f"Time of the ovs-ofctl add-flows calls (OpenFlow bundles of up to 100,000 rules), "
                  f"installs of {MIN_RULES:,} rules or more; 'OVS counts' is dump-aggregate's "
                  f"flow_count afterwards (it must equal Rules).", COLUMNS, rows, key="rule_install")]
