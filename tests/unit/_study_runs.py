"""Runs with studies written straight into a store (the rows the runner writes: tests.study,
tests.topology with overrides, tests.traffic as a TrafficProfile dict, results), with known
numbers, for the study report and compare tests."""
from __future__ import annotations

from typing import Any, Optional

from nfvperf.store import Store
from nfvperf.trial import TrafficProfile

SUITE_TOPOLOGY = {"kind": "p-ovs-p", "dut": "ovs-dpdk", "ports": 2, "port_kind": "af_packet",
                  "ovs": {"pmd_cpu_mask": "0x4", "n_rxq": 1}}


def topo_row(kind: str = "p-ovs-p", overrides: Optional[dict] = None, sw: int = 1) -> dict[str, Any]:
    return {"kind": kind, "ports": 2, "switching_operations": sw, "overrides": overrides or {}, "directions": 2}


def latency_data(avg_ns: float) -> dict[str, Any]:
    return {"points": [{"fraction": 1.0, "load_pps": 1e6, "count": 1000, "min_ns": avg_ns / 2,
                        "avg_ns": avg_ns, "max_ns": avg_ns * 3, "repetitions": 1, "lost": 0}]}


def add_test(store: Store, run_id: int, name: str, method: str, size: Optional[int], value: Optional[float],
             *, topology: Optional[dict] = None, traffic: Optional[dict] = None, study: Optional[dict] = None,
             data: Optional[dict] = None) -> None:
    prof = TrafficProfile(frame_size_b=size or 64, **(traffic or {})).to_dict()
    t = store.start_test(run_id, name=name, method=method, frame_size_b=size, params={}, traffic=prof,
                         topology=topology or topo_row(), study=study)
    if data is None:
        data = {"throughput_pps": value} if method != "tcp" else {"mean_throughput_bps": value}
    store.add_result(t.id, method, data, value_pps=value if method == "throughput" else None)
    store.finish_test(t.id, "passed")


def new_run(store: Store, suite: str = "study-test", tg: str = "tgen", env: Optional[dict] = None,
            topology: Optional[dict] = None) -> int:
    run = store.create_run(suite=suite, suite_path=None, topology="p-ovs-p", dut="ovs-dpdk", tg=tg,
                           profile="quick", config={"topology": topology or SUITE_TOPOLOGY,
                                                    "traffic": {"flows_per_port": 1, "link_speed": "10G"}},
                           environment=env or {})
    store.finish_run(run.id, "completed")
    return run.id


def cores_flows_study(store: Store, run_id: int, scale: float = 1.0,
                      fps: Optional[dict[tuple[int, int], float]] = None) -> dict[tuple[int, int], float]:
    """pmd_cores 1/2/4 × flows 1/1000 at 64 B (seed 000 Table 7-7's grid); baseline (1, 1)."""
    fps = fps or {(1, 1): 2.0e6, (2, 1): 3.8e6, (4, 1): 7.0e6, (1, 1000): 1.5e6, (2, 1000): 2.9e6,
                  (4, 1000): 5.6e6}
    masks = {1: "0x4", 2: "0xc", 4: "0x3c"}
    for (cores, flows), v in fps.items():
        ov = {"ovs": {"pmd_cpu_mask": masks[cores], "pmd_cores": cores}}
        add_test(store, run_id, f"grid[pmd_cores={cores},flows={flows}]", "throughput", 64, v * scale,
                 topology=topo_row(overrides=ov), traffic={"flows_per_port": flows},
                 study={"name": "grid", "axes": {"pmd_cores": cores, "flows": flows},
                        "baseline": (cores, flows) == (1, 1)})
    return fps
