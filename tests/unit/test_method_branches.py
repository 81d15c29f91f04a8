"""No code outside ``nfvperf.methods`` branches on a method's name (issue 18 item 3): what a
method's result holds and shows is its result class's (``MethodInfo.result``), what it can do is
its ``MethodInfo`` declaration.  A new method is then one module, and the report, the config and
the run loop need no edit to show it.

Counted, by the syntax tree: a comparison of something named ``method`` with a registered method
name (``t.method == "latency"``, ``method in ("tcp",)``, ``entry.get("method") != "throughput"``),
a table keyed by method names (a dict literal whose keys are all method names), and a lookup of
an upper-case table by a method name (``TITLES["latency"]``).  Where the code still does it,
:data:`PENDING` says where and why; those counts may only fall.
"""
from __future__ import annotations

import ast
from pathlib import Path

from nfvperf.methods import REGISTRY

PKG = Path(__file__).resolve().parents[2] / "src" / "nfvperf"
NAMES = frozenset(REGISTRY)

#: file (relative to src/nfvperf) -> by-name branches still there, each with its reason
PENDING: dict[str, tuple[int, str]] = {}


def _names(node: ast.AST) -> set[str]:
    """The string constants in ``node`` (a constant, a tuple/list/set of them, or a sum)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_names(e) for e in node.elts)) if node.elts else set()
    if isinstance(node, ast.BinOp):
        return _names(node.left) | _names(node.right)
    return set()


def _mentions_method(node: ast.AST) -> bool:
    """``method``, ``t.method``, ``entry.get("method")``, ``d["method"]``..."""
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and "method" in n.id.lower():
            return True
        if isinstance(n, ast.Attribute) and "method" in n.attr.lower():
            return True
        if isinstance(n, ast.Constant) and n.value == "method":
            return True
    return False


def by_name_branches(source: str, names: frozenset[str] = NAMES) -> list[int]:
    """Line of every by-name branch in ``source`` (see the module docstring)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(isinstance(o, (ast.Eq, ast.NotEq, ast.In, ast.NotIn))
                                                 for o in node.ops):
            sides = [node.left, *node.comparators]
            if any(_names(s) & names for s in sides) and any(_mentions_method(s) for s in sides
                                                                if not _names(s)):
                out.append(node.lineno)
        elif isinstance(node, ast.Dict) and node.keys and all(k is not None for k in node.keys):
            keys = [_names(k) for k in node.keys if k is not None]
            if all(len(k) == 1 and k <= names for k in keys):
                out.append(node.lineno)
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id.isupper():
            if _names(node.slice) & names:
                out.append(node.lineno)
    return out


def found() -> dict[str, list[int]]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG)
        if rel.parts[0] == "methods":
            continue
        lines = by_name_branches(path.read_text())
        if lines:
            out[rel.as_posix()] = lines
    return out


def test_the_counter_sees_each_form() -> None:
    src = '''
if t.method == "latency": pass
if method in ("tcp", "reset"): pass
if entry.get("method") != "throughput": pass
SPECIAL = {"tcp": 1, "reset": 2}
x = TITLES["latency"]
if t.key == "throughput": pass          # a table key, not a method
d = {"latency": True, "streams": 2}     # a record's keys
if method in known: pass                # a declared set
'''
    assert by_name_branches(src) == [2, 3, 4, 5, 6]


def test_no_branch_on_a_method_name_outside_methods() -> None:
    got = found()
    assert not {f: lines for f, lines in got.items() if f not in PENDING}, (
        "branch on a method's name outside nfvperf.methods: read the result class "
        "(nfvperf.methods.result_of / result_class) or MethodInfo instead")
    for f, (n, why) in PENDING.items():
        assert len(got.get(f, [])) <= n, f"{f}: {got.get(f)} (pending: {why}); the count may only fall"


def test_the_report_and_trend_have_none() -> None:
    got = found()
    assert [f for f in got if f.startswith(("report/", "trend/", "config.py"))] == []
