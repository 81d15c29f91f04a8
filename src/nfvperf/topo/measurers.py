"""The measurer for a topology spec: the measurer factory of ``nfvperf run``.

* ``--tg sim``: :func:`sim_measurer`, the modelled DUT set from the suite's ``sim:`` and what the
  spec says to the model (:func:`sim_unit`: the topology kind's switching operations and VNFs,
  and the DUT adapter's own :class:`~nfvperf.tg.sim_model.SimTraits`, which its options model
  declares, so no DUT option is read by name here); the runner sets it again for each test unit
  (:func:`configure_unit`);
* ``--tg tgen`` / ``--tg iperf3``: :func:`topology_measurer` builds the topology
  (:func:`nfvperf.topo.build`) and yields its measurer: tgen through the DUT, or iperf3 on the
  topology's TCP ends (:func:`iperf3_measurer`) or inside its guests (a topology's own
  ``tcp_measurer``).

It sits in ``topo`` because the sim needs the topology kind's declarations and the real
measurers need a built topology; ``tg`` (the measurers themselves) stays below ``topo``."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator, Optional, Protocol

from pydantic import BaseModel

from nfvperf.dut.base import AdapterOptions
from nfvperf.tg.iperf3 import Iperf3Measurer
from nfvperf.tg.sim import SimMeasurer
from nfvperf.tg.sim_model import SimTraits, SimUnit
from nfvperf.trial import Measurer

import nfvperf.topo as topo   # looked up per call: tests replace topo.build

from .tcp_ends import TcpEnds
from .spec import TopologySpec

__all__ = ["SimSettings", "sim_traits", "sim_unit", "sim_measurer", "configure_unit", "topology_measurer",
           "iperf3_measurer", "tso_refusal"]


class SimSettings(Protocol):
    """The suite's (or a test's) ``sim:`` section as the factory reads it (``config.SimSpec``)."""

    @property
    def pace_s(self) -> float: ...

    def measurer_kwargs(self) -> dict[str, Any]: ...


def sim_traits(spec: TopologySpec) -> SimTraits:
    """What ``spec``'s DUT options say to the model, as the adapter's options model declares it
    (``AdapterOptions.sim_traits``); nothing without an options section."""
    opts = spec.dut_class().options(spec)     # the DUT's own topology section (ovs:, testpmd: ...)
    return opts.sim_traits() if isinstance(opts, AdapterOptions) else SimTraits()


def sim_unit(spec: TopologySpec, params: Optional[BaseModel] = None) -> SimUnit:
    """What the sim's model needs from a topology spec (and a test's method params): DUT, kind,
    switching operations, VNFs, ports, the DUT adapter's :class:`SimTraits` (polling cores and
    threads, rx queues, rules, SMC), and the TCP method's TSO/multi-queue."""
    t = sim_traits(spec)
    return SimUnit(dut=spec.dut, datapath=t.datapath, kind=spec.kind,
                   switching_ops=topo.switching_operations(spec),
                   n_vnfs=int(getattr(topo.topology_class(spec.kind), "n_vnfs", 0) or 0),
                   vnf=str(spec.vnf), ports=int(spec.ports),
                   pmd_cores=t.pmd_cores, ht=t.ht, pmd_threads=t.pmd_threads, n_rxq=t.n_rxq,
                   rules=t.rules, smc=t.smc,
                   tso=getattr(params, "tso", None), multiqueue=getattr(params, "multiqueue", None))


def sim_measurer(sim: SimSettings, spec: TopologySpec) -> SimMeasurer:
    """The simulated DUT for topology ``spec``, set from ``sim`` (the suite's ``sim:``); every
    trial takes ``sim.pace_s`` of wall time; the runner sets it again per unit."""
    return SimMeasurer(**sim.measurer_kwargs(), unit=sim_unit(spec), pace_s=sim.pace_s, per_unit=True)


def configure_unit(m: Measurer, sim: SimSettings, spec: TopologySpec, params: Optional[BaseModel]) -> None:
    """Set a simulated DUT made by :func:`sim_measurer` for one test unit: ``sim`` (the suite's
    ``sim:`` with the test's on top) and the unit's configuration (topology spec, method params).
    Any other measurer (a real DUT was built for the unit) is left as it is."""
    if isinstance(m, SimMeasurer) and m.per_unit:
        m.configure(**sim.measurer_kwargs(), unit=sim_unit(spec, params))


@contextlib.contextmanager
def topology_measurer(tg: str, spec: TopologySpec, *, sim: SimSettings, bidirectional: bool, tag: str,
                      run_dir: Path, info: dict[str, Any],
                      topo_kwargs: Optional[dict[str, Any]] = None) -> Iterator[Measurer]:
    """Yields the measurer of ``tg`` for topology ``spec``; fills ``info`` with the topology
    environment and its switching operations.  ``topo_kwargs``: more arguments of the topology
    (a testbed run: its hosts and cabled links).  The topology is released on every exit path."""
    if tg == "sim":
        info["switching_operations"] = topo.switching_operations(spec)
        info["switching_operations_source"] = f"declared by topology kind {spec.kind}"
        with sim_measurer(sim, spec) as sm:
            yield sm
        return
    if tg not in ("tgen", "iperf3"):
        raise ValueError(f"--tg {tg!r}: allowed sim, tgen, iperf3")
    build_kw: dict[str, Any] = {"start_tgen": False} if tg == "iperf3" else {}
    build_kw.update(topo_kwargs or {})
    with topo.build(spec, topo.RunContext(tag=tag, run_dir=run_dir), **build_kw) as topology:
        # a topology whose TCP ends are its own (iperf3 inside its guests: nfvperf.topo.tcp_vm)
        own_tcp = getattr(topology, "tcp_measurer", None) if tg == "iperf3" else None
        ends = topology.tcp_endpoints() if tg == "iperf3" and own_tcp is None else None
        try:
            info["environment"] = topology.environment()
        except Exception as e:  # noqa: BLE001 - environment is best effort
            info["environment"] = {"error": str(e)}
        try:
            info["switching_operations"] = int(topology.switching_operations(bidirectional))
            info["switching_operations_source"] = "topology"
        except Exception:  # noqa: BLE001
            info["switching_operations"] = topo.switching_operations(spec)
            info["switching_operations_source"] = f"declared by topology kind {spec.kind}"
        m: Measurer
        if own_tcp is not None:
            m = own_tcp(info)
        elif ends is not None:
            m = iperf3_measurer(topology, ends, info)
        else:
            m = topology.measurer()
        # in-place DUT changes between the units of an interleaved study (nfvperf.runner.rounds)
        m.reconfigure_topology = getattr(topology, "reconfigure", None)
        with m:
            yield m


def iperf3_measurer(topology: Any, ends: TcpEnds, info: dict[str, Any]) -> Iperf3Measurer:
    """``--tg iperf3``: an Iperf3Measurer on the topology's TCP endpoints (client on port 0's
    generator end, server on port 1's), so the ``tcp`` method's traffic crosses the DUT."""
    dut = topology.dut
    dut_name = getattr(dut, "name", None) or topology.spec.dut
    dut_version = None
    with contextlib.suppress(Exception):
        dut_version = (info.get("environment") or {}).get("dut", {}).get("version")
    path = dict(ends, topology=topology.kind, dut=dut_name, dut_version=dut_version,
                tag=topology.run.tag,
                note="iperf3 client/server on the generator ends of ports 0/1; the DUT forwards "
                     "between them")
    info["tcp_endpoints"] = path
    return Iperf3Measurer.in_namespaces(ends["client_ns"], ends["server_ns"], ends["server_ip"],
                                        path=path, dut_counters=topology.dut_counters,
                                        dut_alive=topology.dut_alive, workdir=topology.run.run_dir,
                                        tso_refusal=tso_refusal(topology.spec))


def tso_refusal(spec: TopologySpec) -> Optional[str]:
    """Why ``params.tso: true`` cannot work through ``spec``'s DUT (None: it can); a topology
    kind that knows its path says so itself (``tcp_tso_refusal``: TCP inside VMs)."""
    own = getattr(topo.topology_class(spec.kind), "tcp_tso_refusal", None)
    if own is not None:
        return own(spec)
    if spec.dut_class().polling_cpus <= 0:
        return None
    # measured: through OVS-DPDK's af_packet ports, TSO on (with the tx checksum offload it
    # needs) leaves iperf3 unable to even connect
    return (f"the {spec.dut} DUT reads the TCP ends' veth peers with DPDK {spec.port_kind} ports "
            "(one frame per mbuf, no TSO super-frames, no checksum offload: iperf3 cannot "
            "connect); use tso: false or unset, or a kernel DUT (linux-bridge, ovs-system)")
