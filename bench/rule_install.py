#!/usr/bin/env python3
"""Benchmark: installing N OpenFlow rules on OVS-DPDK, the old way (one plain ``ovs-ofctl
add-flows`` of the whole file) against the new one (``ovs-ofctl --bundle add-flows`` in chunks of
100k rules), in the same run on the same OVS.

The rules are seed 004's rule-complexity rules (``ovs.rules``: one (src IP, dst IP) rule per flow
and direction, as ``p-ovs-p`` installs them), on a bridge without ports.  For each count (default
64, 1k, 64k, 1M rules per direction: 2 × that many rules) both ways run on an empty bridge and
``dump-aggregate`` must count every rule.  Prints a table and, as its LAST line, one JSON object
(``per_count``: rules, seconds and rules/s of each way, ratio = old seconds / new seconds).
Needs root and openvswitch-switch-dpdk.  ~3 minutes with 1M (the old way takes most of it);
``--quick``: 64 and 1,000 rules per direction (seconds, for ``make test``).

    PYTHONPATH=src python3 bench/rule_install.py [--counts 64,1000,65536,1000000] [--quick]

JSON keys: per_count
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from nfvperf.dut.ovs_dpdk import OvsDpdk  # noqa: E402
from nfvperf.host.netns import create_netns  # noqa: E402
from nfvperf.host.run import ResourceTracker, RunContext  # noqa: E402
from nfvperf.topo.p_ovs_p import DST_IP, SRC_IP, flow_ips  # noqa: E402
from nfvperf.topo.spec import OvsSpec  # noqa: E402


def rules(n: int) -> list[str]:
    """Both directions' rules as p-ovs-p writes them with ``ovs.rules: n`` (ports 1 <-> 2)."""
    out = []
    for (a, b), (src, dst) in (((1, 2), (SRC_IP, DST_IP)), ((2, 1), (DST_IP, SRC_IP))):
        out += [f"priority=200,in_port={a},ip,nw_src={s},nw_dst={d},idle_timeout=0,actions=output:{b}"
                for s, d in flow_ips(n, src, dst)]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--counts", default="64,1000,65536,1000000", help="rules per direction")
    ap.add_argument("--quick", action="store_true", help="64 and 1,000 rules per direction: for make test")
    args = ap.parse_args()
    counts = [64, 1000] if args.quick else [int(c) for c in args.counts.split(",")]
    run = RunContext(label="bench-rule-install")
    run.run_dir.mkdir(parents=True, exist_ok=True)
    tracker = ResourceTracker(run)
    per: list[dict] = []
    try:
        # in its own namespace (as the topologies run it): the netdev datapath's tap device
        # (ovs-netdev) would collide with another OVS in the host's namespace
        ns = create_netns(run.netns("dut"), tracker)
        sw = OvsDpdk(run, tracker, spec=OvsSpec(socket_mem_mb=512), netns=ns)
        sw.start()
        for n in counts:
            lines = rules(n)
            row: dict = {"rules_per_direction": n, "rules": len(lines)}
            for method in ("add-flows", "bundle"):
                sw.program(lines, method=method)
                rec = sw.rule_installs[-1]
                row[method] = {"seconds": round(rec.seconds, 3), "rules_per_s": round(rec.rules_per_s or 0),
                               "installed": rec.installed}
                sw.program([])          # empty the bridge: both ways start from the same state
            row["ratio"] = round(row["add-flows"]["seconds"] / max(row["bundle"]["seconds"], 1e-6), 2)
            per.append(row)
            print(f"{len(lines):>10,} rules  add-flows {row['add-flows']['seconds']:8.2f} s "
                  f"({row['add-flows']['rules_per_s']:>8,}/s)  bundle {row['bundle']['seconds']:7.2f} s "
                  f"({row['bundle']['rules_per_s']:>8,}/s)  ratio {row['ratio']:.1f}x", flush=True)
    finally:
        tracker.release_all()
        shutil.rmtree(run.run_dir, ignore_errors=True)     # the rule files: ~180 MB per 2M rules
    print(json.dumps({"per_count": per}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
