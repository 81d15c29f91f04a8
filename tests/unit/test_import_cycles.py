"""No import circles inside a package (issue 18 item 5): within each package of nfvperf (its
subpackages included), the
modules' imports of each other (module-level and function-local alike) form no cycle.  A circle
hidden by a function-local import is still a circle: it means two modules are one idea, or a
shared piece belongs in a module below both.  A package's ``__init__`` is left out (every module
of a package imports it implicitly; plugin packages import their modules from it), and so are
imports under ``if TYPE_CHECKING:``, which never run (a type named in a signature)."""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "src" / "nfvperf"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    return ".".join(rel.parts)


def _imports(path: Path) -> set[str]:
    """Dotted names of every nfvperf module or name ``path`` imports, nested imports included."""
    me = _module_name(path)
    package = me.rsplit(".", 1)[0] if path.name != "__init__.py" else me
    out: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)   # `from pkg import module`
    return {n for n in out if n.startswith("nfvperf.")}


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree`` except those under ``if TYPE_CHECKING:``."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and isinstance(child.test, ast.Name) and child.test.id == "TYPE_CHECKING":
                todo.extend(child.orelse)
                continue
            todo.append(child)
    return out


def graph() -> dict[str, set[str]]:
    """module -> the modules of its own component it imports (``nfvperf.topo.base`` and
    ``nfvperf.topo.ports.pci`` are one component: ``topo``)."""
    modules = {_module_name(p): p for p in PKG.rglob("*.py") if p.name != "__init__.py"}
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        top = name.split(".")[1]
        edges[name] = {m for m in _imports(path) if m in modules and m != name and m.split(".")[1] == top}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_within_a_package() -> None:
    found = cycles(graph())
    assert not found, f"import circles inside a package (move the shared piece below both): {found}"
