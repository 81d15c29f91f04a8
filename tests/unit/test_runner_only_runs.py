"""Issue 18 item 4: a runner that only runs.  ``nfvperf.runner`` stays under 400 lines (its
collaborators are modules of their own), the measurer factory is typed by what it returns, and no
measurer is patched at run time (no ``setattr`` on a measurer, no trial call replaced)."""
from __future__ import annotations

import ast
import inspect
import typing
from pathlib import Path

import nfvperf.tg.sim as simmod
from nfvperf.suite_load import validate_suite
from nfvperf.tg.sim import SimMeasurer
from nfvperf.topo import measurers

PKG = Path(__file__).resolve().parents[2] / "src" / "nfvperf"
MAX_LINES = 400
#: names a measurer goes by in src/
MEASURER_NAMES = {"m", "measurer", "meas"}
#: the hooks trial.Measurer declares for its owner to set (everything else is a constructor option)
DECLARED_HOOKS = {"reset_hook", "reconfigure_topology"}


def _is_measurer(node: ast.expr) -> bool:
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name in MEASURER_NAMES or name.endswith("measurer")


def measurer_patches(path: Path) -> list[str]:
    """``file:line`` of every ``setattr(<a measurer>, ...)`` and every assignment that replaces a
    trial call (``x.measure = ...``, ``x.measure_burst = ...``) in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                and node.args and _is_measurer(node.args[0]):
            out.append((node.lineno, "setattr on a measurer"))
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
        for t in targets:
            if isinstance(t, ast.Attribute) and (t.attr == "measure" or t.attr.startswith("measure_")):
                out.append((node.lineno, f"replaces {t.attr}"))
            elif isinstance(t, ast.Attribute) and _is_measurer(t.value) and t.attr not in DECLARED_HOOKS:
                out.append((node.lineno, f"sets {t.attr} on a measurer"))
    return [f"{path.name}:{line} {what}" for line, what in sorted(out)]


def test_the_runner_module_stays_under_400_lines() -> None:
    runner = PKG / "runner" / "__init__.py"
    n = len(runner.read_text().splitlines())
    assert n < MAX_LINES, (f"nfvperf.runner is {n} lines (limit {MAX_LINES}): move what is not the run "
                           "itself into a collaborator module (runner/books.py, results.py, ceilings.py ...)")
    for mod in sorted((PKG / "runner").glob("*.py")):
        assert len(mod.read_text().splitlines()) < MAX_LINES, f"{mod.name} has grown past {MAX_LINES} lines"


def test_no_module_patches_a_measurer() -> None:
    found = [p for f in sorted(PKG.rglob("*.py")) for p in measurer_patches(f)]
    assert not found, "measurers patched at run time (give the measurer an option or wrap it):\n" + "\n".join(found)


def test_the_check_sees_the_old_pacing_patch(tmp_path) -> None:
    f = tmp_path / "old.py"
    f.write_text("import time\n"
                 "def pace(m, seconds):\n"
                 "    for name in ('measure', 'measure_burst'):\n"
                 "        fn = getattr(m, name)\n"
                 "        def slow(*a, _fn=fn, **kw):\n"
                 "            time.sleep(seconds)\n"
                 "            return _fn(*a, **kw)\n"
                 "        setattr(m, name, slow)\n"
                 "def wrap(measurer):\n"
                 "    measurer.measure = lambda d, l: None\n"
                 "    measurer.environment = lambda: {}\n"
                 "    measurer.reset_hook = print\n")
    assert measurer_patches(f) == ["old.py:8 setattr on a measurer", "old.py:10 replaces measure",
                                   "old.py:11 sets environment on a measurer"]


def test_the_factory_is_typed_by_what_it_returns() -> None:
    hints = {f.__name__: typing.get_type_hints(f)["return"]
             for f in (measurers.sim_measurer, measurers.sim_unit, measurers.iperf3_measurer)}
    assert hints["sim_measurer"] is SimMeasurer and hints["sim_unit"].__name__ == "SimUnit"
    assert hints["iperf3_measurer"].__name__ == "Iperf3Measurer"
    sig = inspect.signature(measurers.topology_measurer.__wrapped__)
    assert "Iterator[Measurer]" in str(sig.return_annotation)


def test_sim_pacing_is_a_measurer_option_that_takes_wall_time(monkeypatch) -> None:
    """``sim.pace_s`` makes every trial take that much wall time, through the measurer's own
    option (it used to replace the trial calls of the measurer object)."""
    suite = validate_suite({"name": "p", "sim": {"capacity_pps": 1e6, "pace_s": 0.05},
                            "tests": [{"method": "throughput"}]})
    m = measurers.sim_measurer(suite.spec.sim, suite.spec.topology)
    assert (m.pace_s, m.per_unit) == (0.05, True)
    slept: list[float] = []
    monkeypatch.setattr(simmod.time, "sleep", slept.append)
    m.measure(1.0, 1000.0)
    m.measure_burst(100, 1e5)
    assert slept == [0.05, 0.05]
    assert "measure" not in vars(m) and "measure_burst" not in vars(m)


def test_rounds_reconfigure_in_place_tracking_the_spec_outside_the_measurer(tmp_path) -> None:
    """An interleaved study on a measurer whose topology changes in place: ``reconfigure_topology``
    is called exactly when the next unit's spec differs from the one the topology is in (the
    rounds keep that spec themselves; nothing is written on the measurer)."""
    import contextlib

    from nfvperf.runner import execute
    from nfvperf.store import Store

    calls: list[int] = []

    @contextlib.contextmanager
    def factory(suite, tg, tag, run_dir, info, spec=None):
        m = measurers.sim_measurer(suite.spec.sim, spec or suite.spec.topology)
        m.reconfigure_topology = lambda new: calls.append(new.ovs.rules) or {"ovs.rules": new.ovs.rules}
        before = dict(vars(m))
        with m:
            yield m
        assert set(vars(m)) == set(before), "the run wrote attributes on the measurer"

    d = {"name": "inplace", "profile": "quick", "sim": {"capacity_pps": 1e6},
         "topology": {"kind": "p-ovs-p", "dut": "ovs-dpdk", "port_kind": "vhost"},
         "traffic": {"frame_sizes": [64]},
         "tests": [{"method": "throughput", "name": "r", "search": "binary",
                    "study": {"axes": {"rules": [0, 1000]}, "rounds": 3, "seed": 1, "metrics": ["mrr"]}}]}
    store = Store(f"sqlite:///{tmp_path}/r.db")
    out = execute(validate_suite(d), store=store, tg="sim", out_dir=tmp_path, show_progress=False,
                  log=lambda _m: None, measurer_factory=factory)
    assert out.status == "completed", out.reason
    env = store.load_run(out.run_id).environment
    store.close()
    rules_of = {"r[rules=0] 64 B": 0, "r[rules=1000] 64 B": 1000}
    order = [rules_of[label] for rnd in env["rounds"][0]["orders"] for label in rnd]
    live, want = 0, []                  # the build's spec is the first unit's (rules 0)
    for r in order:
        if r != live:
            want.append(r)
            live = r
    assert calls == want and len(calls) >= 1
