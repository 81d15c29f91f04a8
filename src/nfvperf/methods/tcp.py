"""TCP throughput with iperf3 (streams, processes, duration).  Calls ``measurer.measure_tcp``;
a measurer without it raises Unsupported (the iperf3 measurer provides it)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Union

from pydantic import Field, StrictBool, field_validator

from nfvperf.trial import Measurer, TrafficProfile, TrialResult, Unsupported

from .common import MethodInfo, MethodParams, MethodResult, Recorder, setup
from .result import MethodMetric, ResultTable, fmt_num, num


class TcpParams(MethodParams):
    streams: int = Field(1, ge=1, le=128, description="iperf3 -P")
    processes: int = Field(1, ge=1, le=64, description="parallel iperf3 client processes")
    duration_s: float = Field(60.0, ge=1.0, description="iperf3 -t (whole seconds)")
    omit_s: int = Field(2, ge=0, le=60, description="iperf3 -O: seconds of slow start not counted")
    reverse: bool = Field(False, description="iperf3 -R")
    bidirectional: bool = Field(False, description="iperf3 --bidir")
    pin_cores: Optional[list[int]] = Field(None, description="CPU cores to pin the iperf3 processes "
                                           "to (taskset); with iperf3 inside VMs (kinds host-vm, "
                                           "vm-link-vm, vm-vm) process i runs on vCPU pin_cores[i] of "
                                           "its guest (iperf3 -A, seed 001 Table 5)")
    mss: Optional[int] = Field(None, ge=88, le=9216, description="iperf3 -M")
    repetitions: int = Field(1, ge=1, le=100)
    tso: Optional[bool] = Field(None, description="TCP segmentation offload on the path's kernel "
                                "interfaces (ethtool -K tso on|off); None leaves them as they are")
    multiqueue: Optional[Union[StrictBool, int]] = Field(
        None, description="queues of the path's kernel interfaces (ethtool -L): N, true = as many "
        "as the interface allows, false = 1; None leaves them as they are")

    @field_validator("multiqueue")
    @classmethod
    def _queues(cls, v: Optional[Union[bool, int]]) -> Optional[Union[bool, int]]:
        if v is not None and not isinstance(v, bool) and not 1 <= v <= 4096:
            raise ValueError(f"multiqueue: {v} queues; give 1..4096, true (as many as the "
                             "interface allows), false (1) or leave it unset")
        return v


@dataclass(frozen=True)
class TcpResult(MethodResult):
    METRIC = MethodMetric("mean_throughput_bps", "TCP goodput (iperf3, mean)", 1e-6, "Mbps",
                          study_key="tcp", study_title="TCP goodput, Gbit/s (iperf3, mean over repetitions)",
                          study_unit="Gbit/s", study_divisor=1e3)
    STUDY_ROW_AXIS = "streams"
    TABLE = ResultTable(
        "TCP throughput (iperf3)",
        "Goodput = TCP payload bit rate reported by iperf3 (L4, not L1/L2), summed over streams and "
        "processes; mean over repetitions. Scenario = the topology kind (seed 001: host-vm external "
        "clients -> a server VM, vm-link-vm VMs on two bridges joined by a link, vm-vm VMs on one "
        "bridge). TSO / MQ as the TCP ends' interfaces read back (ethtool; in the guests for the VM "
        "scenarios). Guest accel: the VMs' accelerator (TCG = emulated CPU: far below KVM).",
        ("Test", "Scenario", "Streams", "Processes", "Duration s", "TSO", "MQ", "Goodput Gbps (mean)",
         "Per repetition Gbps", "Retransmits", "Guest accel"), first="Test")

    method: str
    throughput_bps: tuple[float, ...] = ()
    mean_throughput_bps: Optional[float] = None
    streams: int = 1
    processes: int = 1
    duration_s: float = 0.0
    retransmits: tuple[Optional[int], ...] = ()
    tso: Optional[bool] = None
    multiqueue: Union[bool, int, None] = None
    # what the path's interfaces read back after params.tso/multiqueue were applied ("<ns>/<if>";
    # in a TCP guest "vm:<name>/<if>")
    interface_settings: Mapping[str, object] = field(default_factory=dict)
    # where it ran: the topology kind (seed 001's scenarios: host-vm, vm-link-vm, vm-vm) and, with
    # iperf3 inside VMs, the guests' accelerator (kvm | tcg)
    scenario: Optional[str] = None
    guest_accel: Optional[str] = None

    def table_row(self, first: str) -> list[str]:
        reps = [x for x in (self.throughput_bps or []) if isinstance(x, (int, float))]
        rtx = [x for x in (self.retransmits or []) if isinstance(x, (int, float))]
        mean = num(self.mean_throughput_bps)
        return [first, str(self.scenario or "—"), fmt_num(self.streams), fmt_num(self.processes),
                fmt_num(num(self.duration_s), 0), self._setting("tso"), self._setting("multiqueue"),
                "—" if mean is None else f"{mean / 1e9:,.3f}", ", ".join(f"{x / 1e9:.3f}" for x in reps[:12]),
                fmt_num(int(sum(rtx))) if rtx else "—", str(self.guest_accel or "—").upper()]

    def _setting(self, key: str) -> str:
        """TSO / multi-queue as asked (params) and as the interfaces read back, e.g. ``on`` or
        ``true (2 queues)``; "—" when the test left it as it was."""
        asked = self.tso if key == "tso" else self.multiqueue
        got = self.interface_settings or {}
        if key == "tso":
            vals = sorted({str(v.get("tso")) for v in got.values() if isinstance(v, dict) and v.get("tso")})
            return ", ".join(vals) if vals else ("—" if asked is None else ("on" if asked else "off"))
        qs = sorted({int(v["queues"]) for v in got.values() if isinstance(v, dict)
                     and isinstance(v.get("queues"), int)})
        if qs:
            return f"{str(asked).lower()} ({'/'.join(map(str, qs))} q)"
        return "—" if asked is None else str(asked).lower()


def run(measurer: Measurer, profile: TrafficProfile, params: TcpParams,
        recorder: Optional[Recorder] = None) -> TcpResult:
    fn = getattr(measurer, "measure_tcp", None)
    if not callable(fn):
        raise Unsupported(f"{measurer.name} cannot run TCP tests (needs the iperf3 measurer)")
    rec, runner = setup(measurer, profile, params, recorder, "tcp")
    settings: Mapping[str, object] = {}
    if params.reverse and params.bidirectional:
        raise ValueError("reverse and bidirectional are exclusive (iperf3)")
    kw: dict[str, Any] = dict(duration_s=params.duration_s, streams=params.streams,
                              processes=params.processes, reverse=params.reverse,
                              bidir=params.bidirectional, mss=params.mss, omit_s=params.omit_s)
    if params.pin_cores:
        kw["pin_cores"] = params.pin_cores
    apply = getattr(measurer, "apply_tcp_settings", None)
    if callable(apply):     # real interfaces: ethtool, read back
        settings = apply(tso=params.tso, multiqueue=params.multiqueue)
    elif params.tso is not None or params.multiqueue is not None:
        kw.update(tso=params.tso, multiqueue=params.multiqueue)   # the sim models them

    def trial() -> TrialResult:
        r = fn(**kw)
        return r.to_trial_result() if hasattr(r, "to_trial_result") else r

    bps: list[float] = []
    retransmits: list[Optional[int]] = []
    scenario = accel = None
    for i in range(params.repetitions):
        tr = runner.call(trial, params.duration_s, 0.0, phase="tcp", repetition=i + 1)
        bps.append(float(tr.extra.get("throughput_bps", 0.0)))
        path = (tr.extra.get("tcp") or {}).get("path") or {}
        scenario = path.get("scenario") or path.get("topology") or tr.extra.get("topology")
        accel = path.get("guest_accel")
        retransmits.append(tr.extra.get("retransmits"))
        rec.progress((i + 1) / params.repetitions, f"tcp {bps[-1] / 1e9:.2f} Gbps")
    return TcpResult(method="tcp", throughput_bps=tuple(bps), mean_throughput_bps=sum(bps) / len(bps),
                     streams=params.streams, processes=params.processes, duration_s=params.duration_s,
                     retransmits=tuple(retransmits), tso=params.tso, multiqueue=params.multiqueue,
                     interface_settings=settings, scenario=scenario, guest_accel=accel)


# what this module contributes to nfvperf.methods.REGISTRY
METHODS = [MethodInfo("tcp", TcpParams, run, result=TcpResult, sizeless=True, title="TCP throughput",
                      headline="mean_throughput_bps", tcp=True, measurer_call="measure_tcp")]
