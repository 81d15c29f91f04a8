"""`make test` runs the integration tests in two passes: those marked ``no_polling`` on both CPUs
(pytest-xdist), then the others one at a time, because their DUTs and the generator busy-poll
pinned cores and two of them at once would fight for the 2 CPUs their counts assume.

Checked here, statically (no test is run): the two passes' ``-m`` expressions are complements, so
no integration test is left out; the mark is registered; and no test marked ``no_polling`` (its
module's ``pytestmark`` or its own decorator) names what starts a busy-polling process.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INTEGRATION = REPO / "tests" / "integration"
MARK = "no_polling"

#: what starts a busy-polling process in an integration test: the generator, a DPDK DUT or VNF,
#: a topology build (its DUT and tgen), a run with tgen (cli_runs.run_suite's default), a VM
POLLING = ("start_tgen", "TgenProcess", "TgenMeasurer", "Testpmd", "OvsDpdk", "L3fwd", "VmVnf",
           "build(", "topo.build(", "topo_pkg.build(", "need_tgen", '"--tg", "tgen"', "run_suite(", "ovs-dpdk", "dut: testpmd",
           "dut: l3fwd", "qemu")


def _names(word: str, text: str) -> bool:
    """``word`` in ``text`` as a name of its own (``run_suite(``, not ``_run_suite(``; ``build(``,
    not the image's ``I.build(``: a topology's build is listed with its module)."""
    return re.search(r"(?<![\w.])" + re.escape(word), text) is not None


def _marked(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == MARK for n in ast.walk(node))


def polling_in_marked(source: str) -> list[str]:
    """``name: word`` for each test marked ``no_polling`` whose source (the whole module when the
    module is marked) names a word of ``POLLING``."""
    tree = ast.parse(source)
    module_marked = any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
                        and _marked(n.value) for n in tree.body)
    found = []
    if module_marked:
        found += [f"<module>: {w}" for w in POLLING if _names(w, source)]
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef) and fn.name.startswith("test_") and \
                any(_marked(d) for d in fn.decorator_list):
            text = ast.get_source_segment(source, fn) or ""
            found += [f"{fn.name}: {w}" for w in POLLING if _names(w, text)]
    return found


def test_the_two_integration_passes_are_complements() -> None:
    recipe = (REPO / "Makefile").read_text().split("\ntest-py:", 1)[1].split("\n\n", 1)[0]
    passes = [ln for ln in recipe.splitlines() if "tests/integration" in ln]
    assert len(passes) == 2, passes
    marks = sorted(re.search(r'-m "([^"]+)"', ln).group(1) for ln in passes)  # type: ignore[union-attr]
    assert marks == [MARK, f"not {MARK}"], passes
    (parallel,) = [ln for ln in passes if f'-m "{MARK}"' in ln]
    assert "-n $(PYTEST_WORKERS)" in parallel and "--dist loadfile" in parallel
    (serial,) = [ln for ln in passes if f'-m "not {MARK}"' in ln]
    assert " -n " not in serial, "the busy-polling tests must run one at a time"


def test_the_mark_is_registered() -> None:
    assert re.search(rf'"{MARK}: ', (REPO / "pyproject.toml").read_text())


def test_no_test_marked_no_polling_starts_a_polling_process() -> None:
    marked, bad = 0, []
    for f in sorted(INTEGRATION.glob("test_*.py")):
        src = f.read_text()
        if MARK in src:
            marked += 1
            bad += [f"{f.name}: {x}" for x in polling_in_marked(src)]
    assert marked >= 5 and not bad, bad


def test_the_check_finds_a_polling_test() -> None:
    module = 'import pytest\npytestmark = [pytest.mark.root, pytest.mark.no_polling]\n' \
             'def test_x(run_ctx):\n    with build(spec, run_ctx):\n        pass\n'
    assert polling_in_marked(module) == ["<module>: build("]
    assert polling_in_marked(module.replace("build(", "topo.build(")) == ["<module>: topo.build("]
    assert polling_in_marked(module.replace("build(", "image.build(")) == []
    one = 'import pytest\n@pytest.mark.no_polling\ndef test_a():\n    start_tgen([])\n' \
          'def test_b():\n    start_tgen([])\n'
    assert polling_in_marked(one) == ["test_a: start_tgen"]
    helper = 'import pytest\n@pytest.mark.no_polling\ndef test_a():\n    _run_suite("p2p", "linux-bridge")\n'
    assert polling_in_marked(helper) == [] and polling_in_marked(helper.replace("_run", "run")) == \
        ["test_a: run_suite("]
