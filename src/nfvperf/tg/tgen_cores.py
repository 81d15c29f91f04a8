"""How many generator cores a line-rate trial needs (issue 27, plan before building).

tgen's per-core rate is measured by a short self-test (:func:`measure_core_rate`: one worker,
64 B frames, TX only on ``net_null``, latency off, 0.5 s: frame build, pacing, mbuf get and the
PMD's free, without a NIC's or a vhost ring's costs, so an upper bound of what one core sends on a
real port) and cached like the harness ceiling (``<results>/tgen-core-rate.json``, 24 h, per host
and tgen build: :func:`nfvperf.plan.generator_core_rate`).  :func:`line_rate_need` turns it, the
link speed, the smallest frame and the transmitting ports into the generator cores a line-rate
trial needs, and says what the topology gives (``topology.tgen_cores``, one worker without it) and
above which rate results will be harness-bound; ``nfvperf validate`` and ``nfvperf run`` print
it before anything is built.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Optional

SELFTEST_S = 0.5


def binary_id(binary: Path) -> str:
    """A tgen build's identity for the cache: name, mtime and size."""
    st = binary.stat()
    return f"{binary.name}-{int(st.st_mtime)}-{st.st_size}"


def measure_core_rate(binary: Path, duration_s: float = SELFTEST_S) -> float:
    """Frames per second one tgen worker sends (64 B, ``net_null``, latency off)."""
    cpus = sorted(os.sched_getaffinity(0))
    lcores = f"0@{cpus[0]},1@{cpus[-1]}"
    with tempfile.TemporaryDirectory(prefix="tgcr") as d:
        argv = [str(binary), "--lcores", lcores, "--no-pci", "--no-huge", "-m", "256",
                "--file-prefix", Path(d).name, "--log-level", "lib.eal:error",
                "--vdev", "net_null0", "--vdev", "net_null1", "--",
                "--socket", str(Path(d) / "ctl.sock"),
                "--port", "0:speed=10000G,rx=0", "--port", "1:speed=10000G,rx=0", "--oneshot",
                "--stream", "port=0,rx_port=1,size=64,flows=1000,pps=5e8",
                "--duration", str(duration_s), "--drain", "0", "--learning", "0", "--no-latency"]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError(f"tgen self-test failed ({p.returncode}): {p.stderr[-800:]}")
    s = json.loads(p.stdout.strip().splitlines()[-1])["streams"][0]
    eff = float(s.get("effective_duration_s") or duration_s)
    return float(s["sent"]) / eff


def line_rate_need(link_speed_bps: float, frame_size_b: int, tx_ports: int, per_core_fps: float,
                   workers: int, split: bool = True, free_cpus: Optional[int] = None,
                   field: str = "topology.tgen_cores") -> dict[str, Any]:
    # (``field``: how the topology gives its workers, e.g. "topology.tgen_cores: 2" or "one
    # worker: topology.tgen_cores not set")
    """What a line-rate trial needs of the generator: ``{"line_fps_per_port", "cores_needed",
    "cores_per_port", "workers", "enough", "bound_fps_per_port", "text"}``.  ``split``: the port
    kind gives each worker a TX queue of every port (else a port is one queue, one core);
    ``free_cpus``: the host's CPUs that no DUT or VNF polls on."""
    line = float(link_speed_bps) / ((int(frame_size_b) + 20) * 8)
    ports = max(1, int(tx_ports))
    total = line * ports
    need = max(1, math.ceil(total / per_core_fps - 1e-9))
    per_port = max(1, math.ceil(line / per_core_fps - 1e-9))
    # one TX queue per port (a kind without multi-queue): a port never gets more than one core
    bound = per_core_fps * (workers if split else min(workers, ports)) / ports
    speed = f"{link_speed_bps / 1e9:g}G"
    text = (f"line rate {tx_ports} transmitting port(s) x {speed} at {frame_size_b} B = "
            f"{total / 1e6:.2f} Mfps; one tgen core sends ~{per_core_fps / 1e6:.1f} Mfps here "
            f"(self-test, no NIC costs): line rate needs {need} generator core(s) "
            f"({per_port} per port)" + (f"; this host has {free_cpus} CPU(s) no DUT polls on"
                                        if free_cpus is not None else ""))
    if workers >= need:
        text += f"; the topology gives {workers} ({field}): enough"
        if free_cpus is not None and workers > free_cpus:
            text += (f", but only {free_cpus} CPU(s) are free of the DUT's polling: generator and DUT "
                     "share CPUs (results marked †)")
    else:
        text += (f"; the topology gives {workers} ({field}): "
                 f"results above ~{bound / 1e6:.1f} Mfps per port will be harness-bound")
        if not split and per_port > 1:
            text += " (this port kind has one TX queue per port: one core per port at most)"
    return {"line_fps_per_port": line, "cores_needed": need, "cores_per_port": per_port,
            "workers": workers, "enough": workers >= need, "bound_fps_per_port": bound,
            "text": text}
