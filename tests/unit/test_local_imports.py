"""Function-local imports in src/nfvperf only where a test shows they are needed (issue 18, item 5).

Two reasons count, each proved here:

- **start-up time**: every ``nfvperf`` command imports :mod:`nfvperf.cli` and builds its parser;
  :func:`test_cli_startup_leaves_the_heavy_packages_out` shows that this loads none of ``HEAVY``.
  A module loaded at start-up (the start-up path: ``nfvperf.cli``, ``nfvperf.trend.commands``, ...)
  may import inside a function a module that start-up does not load and whose import loads one of
  ``HEAVY`` (checked in a subprocess per module);
- **optional dependency**: a package listed only under ``[project.optional-dependencies]`` in
  pyproject.toml (MLRsearch, psycopg, ansible-core, ...).

Anything else belongs at the top of its module: :func:`test_every_local_import_has_a_reason` names
the file:line.  Imports under ``if TYPE_CHECKING:`` are not function-local and are not counted.
"""
from __future__ import annotations

import ast
import concurrent.futures
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import tomllib
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
PKG = SRC / "nfvperf"

#: third-party packages that cost start-up time (each ~0.1-1.1 s to import here, measured with
#: ``python3 -X importtime``; ``nfvperf.cli`` with its parser takes ~0.01 s without them)
HEAVY = ("pydantic", "sqlalchemy", "matplotlib", "numpy", "paramiko", "pyroute2", "jinja2", "jumpavg", "rich",
         "yaml")

STARTUP = "import nfvperf.cli; nfvperf.cli.build_parser()"


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or \
        (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(node: ast.Import | ast.ImportFrom, path: Path) -> list[str]:
    """The modules an import statement loads (``from pkg import sub``: ``pkg.sub`` when a module)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = _module_name(path).split(".")
        if path.name != "__init__.py":
            base.pop()
        base = base[:len(base) - (node.level - 1)]
        mod = ".".join(base + ([node.module] if node.module else []))
    else:
        mod = node.module or ""
    out = []
    for a in node.names:
        sub = f"{mod}.{a.name}"
        try:
            is_module = importlib.util.find_spec(sub) is not None
        except (ImportError, ValueError):
            is_module = False
        out.append(sub if is_module else mod)
    return out


def local_imports() -> list[tuple[Path, int, str]]:
    """(file, line, module) for every import inside a function of src/nfvperf."""
    found: list[tuple[Path, int, str]] = []

    def walk(node: ast.AST, in_function: bool, path: Path) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                continue
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                found.extend((path, child.lineno, m) for m in _resolve(child, path))
            walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)), path)

    for path in sorted(PKG.rglob("*.py")):
        walk(ast.parse(path.read_text(), str(path)), False, path)
    return found


def _run(code: str) -> list[str]:
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(SRC)))
    assert p.returncode == 0, p.stderr
    return list(json.loads(p.stdout.strip().splitlines()[-1]))


@lru_cache(maxsize=None)
def startup_modules() -> frozenset[str]:
    """Every module in sys.modules after ``nfvperf`` imports its CLI and builds the parser."""
    return frozenset(_run(f"import json, sys; {STARTUP}; print(json.dumps(sorted(sys.modules)))"))


def heavy_loaded_by(module: str) -> list[str]:
    """The HEAVY packages that importing ``module`` loads after start-up."""
    return _run(f"import json, sys; {STARTUP}; before = set(sys.modules); import {module}; "
                f"print(json.dumps(sorted({{m.split('.')[0] for m in set(sys.modules) - before}} & {set(HEAVY)!r})))")


def optional_dependencies() -> set[str]:
    """Import names of the packages that pyproject.toml lists only as optional (not ``dev``'s tools)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def dist(req: str) -> str:
        return re.split(r"[\s\[<>=!~;]", req, maxsplit=1)[0].lower().replace("_", "-")

    hard = {dist(r) for r in project["dependencies"]}
    optional = {dist(r) for extra, reqs in project["optional-dependencies"].items() if extra != "dev"
                for r in reqs} - hard
    names = {d.replace("-", "_") for d in optional} | {d.split("-")[0] for d in optional}
    for top, dists in importlib.metadata.packages_distributions().items():
        if any(d.lower().replace("_", "-") in optional for d in dists):
            names.add(top.lower())
    return names


def test_cli_startup_leaves_the_heavy_packages_out() -> None:
    loaded = {m.split(".")[0] for m in startup_modules()}
    assert "nfvperf" in loaded and "argparse" in loaded       # the probe ran the start-up
    assert not loaded & set(HEAVY), f"nfvperf's start-up imports {sorted(loaded & set(HEAVY))}"


def test_the_probe_sees_a_heavy_import() -> None:
    # the check below can fail: the store's module does load SQLAlchemy
    assert heavy_loaded_by("nfvperf.store.db") == ["sqlalchemy"]
    assert heavy_loaded_by("nfvperf.units") == []


def test_optional_dependencies_come_from_pyproject() -> None:
    names = optional_dependencies()
    assert {"mlrsearch", "psycopg", "ansible"} <= names
    assert not names & {"pydantic", "sqlalchemy", "matplotlib", "jumpavg", "yaml"}


def test_every_local_import_has_a_reason() -> None:
    startup = startup_modules()
    optional = optional_dependencies()
    problems: list[str] = []
    to_probe: dict[str, list[str]] = {}
    for path, line, module in local_imports():
        where = f"{path.relative_to(ROOT)}:{line}"
        if module.split(".")[0].lower() in optional:
            continue
        if _module_name(path) not in startup:
            problems.append(f"{where}: `{module}` is imported inside a function of a module that is not on "
                            f"the CLI's start-up path and is not an optional dependency: move the import to the "
                            f"top of the module (a circle it reveals is fixed in the structure, not hidden)")
        elif module in startup:
            problems.append(f"{where}: `{module}` is already loaded at start-up ({STARTUP!r}): importing it "
                            f"inside the function saves nothing; move it to the top of the module")
        else:
            to_probe.setdefault(module, []).append(where)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        for module, heavy in zip(to_probe, pool.map(heavy_loaded_by, to_probe)):
            if not heavy:
                problems += [f"{where}: `{module}` loads none of {HEAVY}: it costs no start-up time; "
                             f"move it to the top of the module" for where in to_probe[module]]
    assert not problems, "\n".join(problems)


def test_remote_preflight_bundle_is_self_contained(tmp_path: Path) -> None:
    # host/preflight.py imports .cpu at its top now: the zip SshHost uploads must carry it, as the
    # host's python3 imports nothing else of nfvperf (-I -S: no installed nfvperf, no site-packages)
    sys.path.insert(0, str(SRC))
    try:
        from nfvperf.host import remote_preflight as rp
    finally:
        sys.path.remove(str(SRC))
    zipped = tmp_path / "bundle.zip"
    zipped.write_bytes(rp.bundle())
    p = subprocess.run([sys.executable, "-I", "-S", "-c", rp.SCRIPT, str(zipped), json.dumps({"required": []})],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    checks = json.loads(p.stdout)
    assert {c["name"] for c in checks} >= {"root"}
