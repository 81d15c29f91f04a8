"""The tcp method's tso / multiqueue params: validation, and the sim measurer models them when
the measurer has no real interfaces to set."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from nfvperf.methods import tcp
from nfvperf.tg.sim import SimMeasurer
from nfvperf.tg.sim_model import SimUnit
from nfvperf.trial import TrafficProfile


def test_params_accept_counts_and_booleans_only() -> None:
    assert tcp.TcpParams(multiqueue=2).multiqueue == 2 and tcp.TcpParams(multiqueue=True).multiqueue is True
    assert tcp.TcpParams().tso is None and tcp.TcpParams().multiqueue is None
    for bad in (0, 5000, "many", 1.5):
        with pytest.raises(ValidationError, match="multiqueue"):
            tcp.TcpParams(multiqueue=bad)


def test_sim_measurer_gets_the_params() -> None:
    m = SimMeasurer(unit=SimUnit())
    prof = TrafficProfile(link_speed_bps=100e9)
    m.set_profile(prof)

    def gbps(**kw: object) -> float:
        r = tcp.run(m, prof, tcp.TcpParams(duration_s=5, streams=4, **kw))  # type: ignore[arg-type]
        assert r.interface_settings == {}     # nothing real was set
        return (r.mean_throughput_bps or 0) / 1e9
    assert gbps(tso=True) > 2 * gbps(tso=False)
    assert gbps(tso=False, multiqueue=4) > 1.5 * gbps(tso=False, multiqueue=1)
