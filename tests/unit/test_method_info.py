"""Methods declare their own metadata (MethodInfo); the registry, runner and report use it."""
import dataclasses

import pytest

from nfvperf.methods import REGISTRY, RATE, MethodInfo, is_sizeless, method_info, rate_methods, runs_on_iperf3
from nfvperf.methods.common import MethodParams
from nfvperf.methods.result import MethodResult, StoredResult


def test_registry_is_built_from_module_declarations() -> None:
    from nfvperf.methods import rfc2889, tcp, throughput
    declared = {i.name: i for mod in (rfc2889, tcp, throughput) for i in mod.METHODS}
    for name, info in declared.items():
        assert REGISTRY[name] is info
    # every entry is a MethodInfo, a plain dataclass (no longer a tuple imitation), that names
    # its module's run function and result class
    for name, info in REGISTRY.items():
        assert isinstance(info, MethodInfo) and info.name == name
        assert info.run.__module__ == info.result.__module__ == info.params.__module__ or \
            info.run.__module__ == info.result.__module__
        assert issubclass(info.result, MethodResult) and info.result is not StoredResult
        with pytest.raises(TypeError):
            iter(info)          # type: ignore[call-overload]


def test_declared_metadata() -> None:
    assert is_sizeless("tcp") and not is_sizeless("throughput") and not is_sizeless("latency")
    assert runs_on_iperf3("tcp") and not runs_on_iperf3("throughput")
    assert set(rate_methods()) == {"throughput", "rfc2889_forwarding"}
    assert method_info("throughput").headline == RATE
    assert method_info("reset").title == "reset (RFC 6201)"
    assert not is_sizeless("no-such-method") and not runs_on_iperf3("no-such-method")
    with pytest.raises(KeyError, match="throughput"):
        method_info("no-such-method")


def test_a_replaced_entry_keeps_its_declared_metadata(monkeypatch) -> None:
    real = REGISTRY["tcp"]
    monkeypatch.setitem(REGISTRY, "tcp", dataclasses.replace(real, run=lambda *a: None))
    assert method_info("tcp").sizeless and method_info("tcp").tcp


def test_runner_and_report_follow_the_declarations(monkeypatch) -> None:
    """A method declared sizeless gets one test unit; the report titles and groups come from the
    declarations (fails if runner/report went back to hard-coded names)."""
    from types import SimpleNamespace

    from nfvperf import runner
    from nfvperf.report import tables

    def fake_run(*a, **k):
        return None

    info = MethodInfo("fake_soak", MethodParams, fake_run, sizeless=True, title="soak (fake)")
    monkeypatch.setitem(REGISTRY, "fake_soak", info)
    t = SimpleNamespace(method="fake_soak", traffic={}, frame_sizes=[64, 128])
    u = SimpleNamespace(method="throughput", traffic={}, frame_sizes=[64, 128])
    units = runner.test_units(SimpleNamespace(tests=[t, u]))
    assert units == [(t, None), (u, 64), (u, 128)]
    assert tables.SUMMARY_TITLES["tcp"] == REGISTRY["tcp"].title
    tests = [SimpleNamespace(method="tcp", name=f"tcp-{i}", results=[], frame_size_b=None, status="failed")
             for i in range(2)]
    out = tables._other_tables(tests)
    assert len(out) == 1                      # every iperf3 test in one table (declared tcp=True)
