"""OpenFlow rules of the OVS adapters: :class:`Flow` lists to ovs-ofctl syntax, installed by
:mod:`nfvperf.dut.ovs_rules`; dump-flows and dump-ports read back."""
from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from nfvperf.dut.base import Flow, cross_connect
from nfvperf.dut.ovs_rules import RuleInstallError, install_rules, install_timeout_s
from nfvperf.dut.ovs_ctl import OvsError
from nfvperf.dut.ovs_ports import OvsPorts
from nfvperf.host.run import PROGRESS_LOGGER

log = logging.getLogger(__name__)
_progress_log = logging.getLogger(PROGRESS_LOGGER)


class OvsFlows(OvsPorts):
    def program(self, flows: Optional[Sequence[Union[Flow, str]]] = None, bridge: Optional[str] = None,
                replace: bool = True, method: str = "bundle") -> Path:
        """Install OpenFlow rules from files in the run dir (``ovs-ofctl --bundle add-flows``, in
        chunks: :mod:`nfvperf.dut.ovs_rules`); returns the first file.

        ``flows``: None = cross-connect 0<->1, 2<->3 (the seed reports' ``in_port=1,dl_type=0x800,
        idle_timeout=0,action=output:2``); :class:`Flow` entries (port *indices*; ``match`` keys
        ``src_ip``/``dst_ip``/``src_mac``/``dst_mac``/``vlan`` or raw ovs-ofctl fields); or strings
        in ovs-ofctl flow syntax.  ``replace`` deletes the bridge's flows first (``del-flows``) and
        then requires OVS to count exactly these rules.  Each install is kept in
        :attr:`rule_installs` (rules, seconds, rules/s; in :meth:`environment`)."""
        bridge = bridge or self.bridges[0]
        if flows is None:
            flows = cross_connect(len(self.ports))
        lines = [f if isinstance(f, str) else self.flow_rule(f) for f in flows]
        if bridge == self.bridges[0]:
            self._last_flows = list(flows)
        self._flow_files += 1

        def ofctl(args: list[str], timeout: float) -> str:
            args = [self.mgmt(bridge) if a == "{br}" else a for a in args]
            return self._run(["ovs-ofctl", f"--timeout={int(timeout) + 1}", *args], timeout=timeout + 5)

        def publish(path: Path) -> str:
            """Rule files are written in the controller's run directory; a remote OVS reads a copy."""
            target = self.dir / path.name
            self.host.write_text(target, path.read_text())
            return str(target)

        directory = self.run.run_dir if self.remote else self.dir
        try:
            rec = install_rules(lines, bridge=bridge, directory=directory,
                                stem=f"flows-{bridge}-{self._flow_files}", ofctl=ofctl,
                                replace=replace, method=method, say=_progress_log.info,
                                publish=publish if self.remote else None)
        except RuleInstallError as e:
            raise OvsError(f"{e}; log: {self.log_tail()}") from e
        self.rule_installs.append(rec)
        return Path(rec.files[0])

    _MATCH_KEYS = {"src_ip": "nw_src", "dst_ip": "nw_dst", "src_mac": "dl_src", "dst_mac": "dl_dst",
                   "vlan": "dl_vlan"}

    def flow_rule(self, f: Flow, priority: int = 100) -> str:
        """One :class:`Flow` in ovs-ofctl syntax (port indices turned into OpenFlow port numbers)."""
        parts = [f"priority={priority + (100 if f.match else 0)}", f"in_port={self.ofport(f.in_port)}"]
        match = dict(f.match)
        if any(k in match for k in ("src_ip", "dst_ip", "nw_src", "nw_dst")):
            parts.append("ip")
        elif not match:
            parts.append("dl_type=0x800")
        parts += [f"{self._MATCH_KEYS.get(k, k)}={v}" for k, v in match.items()]
        parts.append(f"idle_timeout=0,actions=output:{self.ofport(f.out_port)}")
        return ",".join(parts)

    def dump_flows(self, bridge: Optional[str] = None) -> list[dict[str, object]]:
        """``ovs-ofctl dump-flows`` parsed: [{"match": ..., "actions": ..., "n_packets": .., ...}]."""
        bridge = bridge or self.bridges[0]
        n = next((r.rules for r in reversed(self.rule_installs) if r.bridge == bridge), 0)
        out = self.ofctl("dump-flows", bridge, "--no-names", timeout=install_timeout_s(n))
        return parse_dump_flows(out)

    def dump_ports(self, bridge: Optional[str] = None) -> dict[str, dict[str, int]]:
        """Live port counters (``ovs-ofctl dump-ports``), keyed by port name ("LOCAL" for the bridge)."""
        bridge = bridge or self.bridges[0]
        # port numbers, not names: ovs-ofctl prints names when its output is a terminal (a
        # testbed guest's shell runs on a serial port)
        out = self.ofctl("dump-ports", bridge, "--no-names")
        by_of = {p.ofport: p.name for p in self.ovs_ports.values() if p.bridge == bridge}
        return {"LOCAL" if of == "LOCAL" else by_of.get(int(of), f"ofport{of}"): stats
                for of, stats in parse_dump_ports(out).items()}


_KV = re.compile(r"(\w+)=([^,\s]+)")


def parse_dump_flows(text: str) -> list[dict[str, object]]:
    flows = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("NXST_FLOW", "OFPST_FLOW")) or "actions=" not in line:
            continue
        head, actions = line.split("actions=", 1)
        d: dict[str, Any] = {"actions": actions.strip()}
        match_parts = []
        for part in [p.strip() for p in head.split(",") if p.strip()]:
            k, _, v = part.partition("=")
            if k in ("cookie", "duration", "table", "n_packets", "n_bytes", "idle_age", "hard_age",
                     "idle_timeout", "hard_timeout", "priority", "reset_counts"):
                d[k] = int(v) if k in ("n_packets", "n_bytes", "table", "priority", "idle_timeout") else v
            else:
                match_parts.append(part)
        d["match"] = ",".join(match_parts)
        flows.append(d)
    return flows


def _num(v: str) -> int:
    return int(v) if v.isdigit() else 0


#: ovs-ofctl dump-ports names -> the adapter counter names (dut/base.py)
_PORT_KEYS = {"pkts": "packets", "drop": "dropped", "errs": "errors"}


def parse_dump_ports(text: str) -> dict[Union[int, str], dict[str, int]]:
    """``ovs-ofctl dump-ports`` → {ofport or "LOCAL": {rx_packets, rx_bytes, rx_dropped, rx_errors,
    rx_frame, rx_over, rx_crc, tx_packets, tx_bytes, tx_dropped, tx_errors, tx_coll}}."""
    res: dict[Union[int, str], dict[str, int]] = {}
    cur = None
    for line in text.splitlines():
        m = re.match(r"\s*port\s+\"?([^:\"]+)\"?:\s*rx\s+(.*)", line)
        if m:
            key = m.group(1).strip()
            cur = int(key) if key.isdigit() else key
            res[cur] = {f"rx_{_PORT_KEYS.get(k, k)}": _num(v) for k, v in _KV.findall(m.group(2))}
            continue
        m = re.match(r"\s*tx\s+(.*)", line)
        if m and cur is not None:
            res[cur].update({f"tx_{_PORT_KEYS.get(k, k)}": _num(v) for k, v in _KV.findall(m.group(1))})
    return res


