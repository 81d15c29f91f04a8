"""PMD threads of OVS-DPDK: their statistics and rx queues, and the in-place changes of a running
OVS (PMD mask, rx queues, EMC/SMC, pmd-maxsleep, the rule set)."""
from __future__ import annotations

import logging
import re
import time
from typing import Any, Callable, ClassVar, Optional, TypedDict, Union

from nfvperf.dut.ovs_ctl import OvsError
from nfvperf.host.hugepages import no_pci_option
from nfvperf.dut.vswitch import ForwardingSource
from nfvperf.dut.ovs_flows import OvsFlows
from nfvperf.dut.ovs_spec import OvsSpec, pmd_mask_check
from nfvperf.host.cpu import cpu_mask, format_cpulist
from nfvperf.host.run import PROGRESS_LOGGER
from nfvperf.units import cores_from_mask

log = logging.getLogger(__name__)
_progress_log = logging.getLogger(PROGRESS_LOGGER)


class OvsPmds(OvsFlows):
    """PMD threads, their statistics and the in-place changes."""

    #: what a running OVS changes (:meth:`reconfigure`, see :meth:`apply_in_place`): the rule set
    #: (del-flows + the bundle installer of ovs_rules, counted with dump-aggregate), the rx queues
    #: of its dpdk ports (Interface options:n_rxq; on veth also the af_packet/af_xdp vdev's queue
    #: pairs, for which OVS re-creates the port), the PMD CPUs given as a mask, the EMC insertion
    #: probability, SMC and pmd-maxsleep (Open_vSwitch other_config, read by a running OVS).
    #: Not ``ovs.pmd_cores`` / ``ovs.ht``: a core count is resolved by the topology's CPU plan
    #: together with the generator's and the VNFs' CPUs (resolve_cores excludes what the DUT took,
    #: plan_pinning places the rest), so another count can move tgen or a VNF, which already run
    #: pinned, to other CPUs: that needs a new plan, i.e. a restart.  ``ovs.pmd_cpu_mask`` does not
    #: enter the plan (the plan's ``dut`` CPUs are only the default when no mask is given), so the
    #: mask a restart would give is computed here the same way (:meth:`other_config`).
    in_place: ClassVar[frozenset[str]] = frozenset({
        "ovs.rules", "ovs.n_rxq", "ovs.pmd_cpu_mask", "ovs.emc_insert_inv_prob", "ovs.smc_enable",
        "ovs.pmd_maxsleep_us"})
    #: the in-place fields that are Open_vSwitch other_config (global to the OVS)
    GLOBAL_IN_PLACE: ClassVar[frozenset[str]] = frozenset({
        "ovs.pmd_cpu_mask", "ovs.emc_insert_inv_prob", "ovs.smc_enable", "ovs.pmd_maxsleep_us"})
    #: the other_config keys those fields set (:meth:`other_config`)
    IN_PLACE_CONFIG: ClassVar[tuple[str, ...]] = ("pmd-cpu-mask", "emc-insert-inv-prob",
                                                  "smc-enable", "pmd-maxsleep")

    def other_config(self) -> dict[str, str]:
        """The Open_vSwitch other_config set before ovs-vswitchd starts: DPDK memory per NUMA
        socket, EAL options, the PMD and non-PMD CPU masks, EMC/SMC tuning."""
        # the PHY ports' ends (the topology's, and those added before start) decide --no-pci
        ends = [*self.phy_ends, *(type(p.end) for p in self.ports)]
        eal = " ".join([f"--file-prefix={self.file_prefix}", *no_pci_option(e.pci_device for e in ends),
                        "--single-file-segments"])
        cfg = {
            "dpdk-init": "true",
            "dpdk-socket-mem": self.socket_mem,
            "dpdk-socket-limit": self.socket_mem,
            "dpdk-extra": eal,
            "dpdk-lcore-mask": cpu_mask([self.lcore_cpu]),
            "pmd-cpu-mask": self._pmd_mask(),
            "vhost-sock-dir": str(self.dir),
        }
        sleep = self.pmd_maxsleep_us()
        if sleep:
            cfg["pmd-maxsleep"] = str(sleep)
        if self.userspace_tso:
            cfg["userspace-tso-enable"] = "true"
        if self.spec is not None:
            if self.spec.emc_insert_inv_prob is not None:
                cfg["emc-insert-inv-prob"] = str(self.spec.emc_insert_inv_prob)
            if self.spec.smc_enable:
                cfg["smc-enable"] = "true"
        return cfg

    # ------------------------------------------------------------------ in-place changes
    def apply_in_place(self, changes: dict[str, object]) -> dict[str, object]:
        """Change ``ovs.*`` fields of :attr:`in_place` on the running OVS, in the order a start
        applies them: other_config (the PMD threads first: the rx queues go to them), rx queues,
        rules.  Each step waits until OVS shows it: ovs-vsctl waits until ovs-vswitchd applied the
        database change, ``pmd-rxq-show`` lists PMD threads on the mask's CPUs and every queue of
        every dpdk port, ``dump-aggregate`` counts the rules.  Returns ``{field: {"from", "to",
        ...}}`` and what was set (``other_config``); kept in :attr:`reconfigurations`.  A failure
        part-way leaves OVS partly changed: restart it."""
        self._check_in_place(changes)
        keys = {k.split(".", 1)[1]: v for k, v in changes.items()}
        old = self.spec if self.spec is not None else OvsSpec()
        t0 = time.monotonic()
        before = self.other_config()
        self.spec = old.model_copy(update=keys)
        # as __init__ computes it: the spec's mask, else the CPU plan's dut CPUs
        self.pmd_cpu_mask = self.spec.pmd_cpu_mask or (cpu_mask(self.cpus) if self.cpus else None)
        was, now = dict(old), dict(self.spec)          # the models' fields by name
        done: dict[str, Any] = {f"ovs.{k}": {"from": was[k], "to": now[k]} for k in keys}
        done.update(self._apply_other_config(before, self.other_config()))
        if "n_rxq" in keys:
            done["ovs.n_rxq"].update(self._apply_n_rxq(int(self.spec.n_rxq)))
        if "rules" in keys:
            done["ovs.rules"].update(self._apply_rules())
        done["seconds"] = round(time.monotonic() - t0, 3)
        self.reconfigurations.append({"changes": dict(changes), **done})
        _progress_log.info("OVS reconfigured in place in %.1f s: %s", done["seconds"],
                           ", ".join(f"{k} = {v}" for k, v in changes.items()))
        return done

    def _check_in_place(self, changes: dict[str, object]) -> None:
        """What this instance cannot change although the class declares it (ValueError, before
        anything is applied)."""
        if any(e.fixed_rings for e in self.phy_ends) and "ovs.pmd_cpu_mask" in changes:
            raise ValueError("ovs.pmd_cpu_mask cannot change in place on port_kind memif: the "
                             "generator polls one ring per OVS TX queue (PMD threads + 1), fixed "
                             "when it started; restart")
        glob = sorted(set(changes) & self.GLOBAL_IN_PLACE)
        if self._attached and glob:
            raise ValueError(f"{', '.join(glob)}: global settings of an OVS nfvperf only attached "
                             f"to (ovs.existing_db); not changed by nfvperf")
        mask = changes.get("ovs.pmd_cpu_mask")
        if mask and not self.remote:
            check = pmd_mask_check(str(mask))
            if check.status != "ok":
                raise ValueError(check.detail)

    def _apply_other_config(self, before: dict[str, str], after: dict[str, str]) -> dict[str, object]:
        """Set the in-place other_config keys that :meth:`other_config` gives differently now,
        remove those it no longer gives (OVS's default, as at a start); wait for the PMDs."""
        put = {k: after[k] for k in self.IN_PLACE_CONFIG if k in after and before.get(k) != after[k]}
        gone = [k for k in self.IN_PLACE_CONFIG if k in before and k not in after]
        if not put and not gone:
            return {}
        cmds = [["set", "Open_vSwitch", ".", *[f'other_config:{k}="{v}"' for k, v in put.items()]]] if put else []
        cmds += [["remove", "Open_vSwitch", ".", "other_config", k] for k in gone]
        args: list[str] = []
        for c in cmds:
            args += (["--"] if args else []) + c
        self.vsctl(*args)
        out: dict[str, Any] = {"other_config": {"set": put, "removed": gone}}
        if "pmd-cpu-mask" in put:
            out["pmd_threads"] = self._wait_pmds(put["pmd-cpu-mask"])
        return out

    def _wait_pmds(self, mask: str, timeout_s: float = 20.0) -> list[int]:
        """Wait until ``pmd-rxq-show`` lists PMD threads on exactly the CPUs of ``mask``."""
        want = set(cores_from_mask(mask))
        text = self._wait_rxq_show(lambda r: set(r["pmds"]) == want, timeout_s,
                                   f"PMD threads on CPU(s) {format_cpulist(sorted(want))}")
        return sorted(parse_pmd_rxq(text)["pmds"])

    def _apply_n_rxq(self, n: int) -> dict[str, object]:
        """``options:n_rxq`` of every dpdk port (as :meth:`add_ovs_port` sets it), with the
        queue pairs of an af_packet / af_xdp vdev in its devargs (a new ``dpdk-devargs`` makes OVS
        re-create the port, same ofport); waits until every queue is on a PMD.  vhost-user ports
        take the virtio side's queues (a start sets no n_rxq on them either)."""
        ports = [p for p in self.ovs_ports.values() if p.kind == "dpdk"]
        args: list[str] = []
        for p in ports:
            opts = {"n_rxq": str(n)}
            dev = p.options.get("dpdk-devargs", "")
            new_dev = requeue_devargs(dev, n)
            if new_dev != dev:
                opts["dpdk-devargs"] = new_dev
            p.options.update(opts)
            args += (["--"] if args else []) + ["set", "Interface", p.name,
                                                *[f'options:{k}="{v}"' for k, v in opts.items()]]
        if not args:
            return {"ports": {}, "note": "no dpdk ports (vhost-user ports take the virtio side's "
                                         "queues; the kernel datapath has no rx queues to set)"}
        self.vsctl(*args)
        names = [p.name for p in ports]

        def settled(r: PmdRxq) -> bool:
            for name in names:
                err = self.vsctl("get", "Interface", name, "error", wait=False).strip()
                if err and err != "[]":
                    raise OvsError(f"port {name} with n_rxq {n}: {err}; log: {self.log_tail()}")
            return all(r["ports"].get(name) == list(range(n)) for name in names)

        text = self._wait_rxq_show(settled, 20.0, f"{n} rx queue(s) on each of {', '.join(names)}")
        rxq = parse_pmd_rxq(text)
        return {"ports": {name: {"queues": rxq["ports"].get(name, []),
                                 "ofport": self._ofport(name)} for name in names},
                "pmds": {str(c): q for c, q in rxq["pmds"].items()}}

    def _wait_rxq_show(self, ok: Callable[[PmdRxq], bool], timeout_s: float, what: str) -> str:
        def probe() -> tuple[bool, str]:
            text = self.pmd_rxq()
            return ok(parse_pmd_rxq(text)), text
        return self._settle(probe, timeout_s, lambda text: f"OVS did not settle in {timeout_s:.0f} s: wanted "
                            f"{what}; pmd-rxq-show: {' | '.join(text.strip().splitlines()[:12])}")

    def set_forwarding(self, source: ForwardingSource) -> None:
        self.forwarding = source

    def _apply_rules(self) -> dict[str, object]:
        """Install the topology's rule set for the new ``ovs.rules`` (del-flows, bundles,
        dump-aggregate count: :meth:`program`)."""
        if self.forwarding is None:
            raise OvsError("ovs.rules in place: no forwarding source (the OVS topologies set "
                           "OvsDpdk.forwarding); program() the rules instead")
        flows = self.forwarding()
        if flows is None:
            return {"note": "ovs.rules does not shape this topology's forwarding; rules unchanged"}
        self.program(flows)
        return {"rule_install": self.rule_installs[-1].to_dict()}

    # ------------------------------------------------------------------ counters
    def pmd_stats(self) -> dict[str, object]:
        return parse_pmd_stats(self.appctl("dpif-netdev/pmd-stats-show"))

    def pmd_rxq(self) -> str:
        return self.appctl("dpif-netdev/pmd-rxq-show")


def requeue_devargs(devargs: str, queues: int) -> str:
    """``devargs`` of an af_packet / af_xdp vdev with ``queues`` queue pairs (other devargs, a
    PCI address or a memif vdev, unchanged)."""
    return re.sub(r"\b(qpairs|queue_count)=\d+", rf"\g<1>={int(queues)}", devargs)


_RXQ_PMD = re.compile(r"^pmd thread numa_id (\d+) core_id (\d+):")
_RXQ_PORT = re.compile(r"^\s*port:\s+(\S+)\s+queue-id:\s+(\d+)")


class PmdRxq(TypedDict):
    """``pmd-rxq-show`` parsed: per PMD core its [port, queue] pairs; per port its queues."""

    pmds: dict[int, list[list[Union[str, int]]]]
    ports: dict[str, list[int]]


def parse_pmd_rxq(text: str) -> PmdRxq:
    """``dpif-netdev/pmd-rxq-show`` -> ``{"pmds": {core_id: [[port, queue], ...]}, "ports": {port:
    [queue ids, sorted]}}`` (queues listed under a PMD thread)."""
    pmds: dict[int, list[list[Union[str, int]]]] = {}
    ports: dict[str, list[int]] = {}
    cur: Optional[int] = None
    for line in text.splitlines():
        m = _RXQ_PMD.match(line)
        if m:
            cur = int(m.group(2))
            pmds.setdefault(cur, [])
            continue
        m = _RXQ_PORT.match(line)
        if m and cur is not None:
            pmds[cur].append([m.group(1), int(m.group(2))])
            ports.setdefault(m.group(1), []).append(int(m.group(2)))
    return {"pmds": pmds, "ports": {k: sorted(v) for k, v in ports.items()}}


def parse_pmd_stats(text: str) -> dict[str, object]:
    """``dpif-netdev/pmd-stats-show`` → {"threads": {"pmd core 1": {...}}, "total": {...}}.

    Keys are snake_case (``packets_received``, ``emc_hits``, ``smc_hits``, ``megaflow_hits``,
    ``idle_cycles``, ``processing_cycles``, ``avg_cycles_per_packet``, ...); the total sums the
    counts over PMD threads and recomputes cycles per packet and the hit ratios.
    """
    threads: dict[str, dict[str, float]] = {}
    cur: Optional[dict[str, float]] = None
    for line in text.splitlines():
        if not line.startswith(" ") and line.rstrip().endswith(":"):
            head = line.rstrip()[:-1]
            m = re.search(r"core_id (\d+)", head)
            name = f"pmd core {m.group(1)}" if m else head.strip()
            cur = threads.setdefault(name, {})
            continue
        if cur is None or ":" not in line:
            continue
        k, _, v = line.strip().partition(":")
        key = re.sub(r"[^a-z0-9]+", "_", k.strip().lower()).strip("_")
        m = re.match(r"\s*([0-9.]+)", v)
        if m:
            cur[key] = float(m.group(1)) if "." in m.group(1) else int(m.group(1))
    total: dict[str, float] = {}
    for name, st in threads.items():
        if not name.startswith("pmd"):
            continue
        for k, count in st.items():
            if k.startswith("avg"):
                continue
            total[k] = total.get(k, 0) + count
    pk = total.get("packets_received", 0)
    if pk:
        total["avg_processing_cycles_per_packet"] = total.get("processing_cycles", 0) / pk
        for hit in ("emc_hits", "smc_hits", "megaflow_hits"):
            if hit in total:
                total[hit.replace("_hits", "_hit_ratio")] = total[hit] / pk
    return {"threads": threads, "total": total}
