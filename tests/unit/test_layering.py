"""Imports run downward between the packages of nfvperf (issue 7): a lower layer never imports a
higher one, not even lazily inside a function.  The layers, lowest first:

    units, trial, validation,   the vocabulary: arithmetic, TrafficProfile/TrialResult/Measurer,
    stats, plugins              validation errors that name their path, paired-ratio intervals; the
                                one plugin loader of the registries (DUTs, topologies, port kinds, methods)
    host                        the machine (processes, netns, hugepages, preflight checks, cleanup)
    store, search, tg           the database (run liveness uses host); searches over measure();
                                the measurers (sim, tgen, iperf3)
    dut, methods                DUT adapters; test methods
    report, vm                  tables/plots from stored runs (titles from methods and adapters);
                                the QEMU VNF (a DUT-shaped adapter)
    topo, study, trend          topologies built from host ports, DUTs, VNFs and the generator; a test
                                entry's study: expanded into plain entries (raw YAML; config validates them);
                                trends of stored results by configuration and the CI gate (store, report)
    config, testbed, fit        the suite schema (uses topo's spec and methods' registry); the testbed
                                file (hosts, SSH, NICs, cabling) and what is built on it; a topology
                                fitted to this host (--fit-host: cores, HT, NUMA, hugepages)
    suite_load                  reading a suite file: every entry checked against the schema (config)
    plan                        the run plan: which units run here and why the others are skipped
                                (validate and run call it)
    runner                      runs a suite (its one loop; interleaved rounds are a schedule of it)
    site                        the static results site (uses report, store and trend)
    cli_base                    what every command shares (exit codes, CliError, the store)
    cli_calc, cli_results,      commands by group: calc; those on the store; testbed files
    cli_testbed
    cli, __main__               the command line
"""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "src" / "nfvperf"

LAYER = {
    "units": 0, "trial": 0, "validation": 0, "stats": 0, "plugins": 0, "__init__": 0,
    "host": 1,
    "store": 2, "search": 2, "tg": 2,
    "dut": 3, "methods": 3,
    "report": 4, "vm": 4,
    "topo": 5, "study": 5, "trend": 5,
    "config": 6, "testbed": 6, "fit": 6,
    "suite_load": 6.5,           # split from config: the layers above keep their numbers
    "plan": 7,
    "runner": 8,
    "site": 9,
    "cli_base": 9.3, "cli_calc": 9.6, "cli_results": 9.6, "cli_testbed": 9.6,   # split from cli
    "cli": 10, "__main__": 11,
}


def _top(path: Path) -> str:
    rel = path.relative_to(PKG)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(path: Path) -> list[tuple[str, int]]:
    """(top-level nfvperf component, line) of every import in the file, nested ones included."""
    tree = ast.parse(path.read_text(), str(path))
    rel = path.relative_to(PKG)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:   # relative: resolve against the file's package
                base = list(rel.parts[:-1])[: len(rel.parts) - node.level]
                mod = ".".join(["nfvperf", *base] + ([node.module] if node.module else []))
                names = [mod] if node.module or base else [f"nfvperf.{a.name}" for a in node.names]
            else:
                names = [node.module or ""]
        else:
            continue
        for n in names:
            parts = n.split(".")
            if parts[0] == "nfvperf" and len(parts) > 1:
                out.append((parts[1], node.lineno))
            elif parts[0] == "nfvperf" and isinstance(node, ast.ImportFrom):
                out += [(a.name, node.lineno) for a in node.names]
    return out


def upward_imports() -> list[str]:
    bad = []
    for f in sorted(PKG.rglob("*.py")):
        me = _top(f)
        for comp, line in _imports(f):
            if comp == me or comp not in LAYER:
                continue
            if LAYER[comp] > LAYER[me] or (LAYER[comp] == LAYER[me] and comp != me and LAYER[me] > 0):
                bad.append(f"{f.relative_to(PKG.parent)}:{line}: {me} (layer {LAYER[me]}) imports "
                           f"{comp} (layer {LAYER[comp]})")
    return bad


def test_every_component_has_a_layer():
    comps = {_top(f) for f in PKG.rglob("*.py")}
    assert comps <= set(LAYER), f"give these a layer in tests/unit/test_layering.py: {sorted(comps - set(LAYER))}"


def test_no_import_runs_upward_or_sideways():
    bad = upward_imports()
    assert not bad, "imports that run upward (or between peers of one layer):\n" + "\n".join(bad)


def test_the_check_sees_a_lazy_upward_import(tmp_path, monkeypatch):
    fake = tmp_path / "nfvperf"
    (fake / "report").mkdir(parents=True)
    (fake / "report" / "x.py").write_text("def f():\n    from nfvperf.runner import execute\n")
    (fake / "report" / "y.py").write_text("from ..units import max_fps\n")
    monkeypatch.setattr(f"{__name__}.PKG", fake)
    bad = upward_imports()
    assert len(bad) == 1 and "report (layer 4) imports runner (layer 8)" in bad[0]


def layer_statement() -> str:
    """The one statement of the layers, from ``LAYER``: peers joined by commas, layers by arrows,
    lowest first (docs/ARCHITECTURE.md shows exactly this line)."""
    by: dict[float, list[str]] = {}
    for comp, n in LAYER.items():
        if comp != "__init__":
            by.setdefault(n, []).append(f"`{comp}`")
    return " → ".join(", ".join(by[n]) for n in sorted(by))


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_architecture_states_the_layers_this_test_holds():
    want = layer_statement()
    root = PKG.parents[1]
    for doc in ("docs/ARCHITECTURE.md",):
        assert want in _flat((root / doc).read_text()), \
            f"{doc} must state the layers as tests/unit/test_layering.py holds them:\n{want}"
