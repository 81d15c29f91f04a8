"""No Python function in src/ is over 120 lines (issue 7: long functions are split by what they do)."""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "src" / "nfvperf"
MAX_LINES = 120


def long_functions(root: Path = PKG, limit: int = MAX_LINES) -> list[str]:
    out = []
    for f in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > limit:
                    out.append(f"{f.relative_to(root.parent)}:{node.lineno} {node.name}: {n} lines")
    return out


def test_no_function_over_120_lines():
    bad = long_functions()
    assert not bad, f"functions over {MAX_LINES} lines (split them by what they do):\n" + "\n".join(bad)


def test_the_check_counts_lines(tmp_path):
    (tmp_path / "m.py").write_text("def f():\n" + "    x = 1\n" * 130 + "def g():\n    pass\n")
    assert [b.split()[-3] for b in long_functions(tmp_path)] == ["f:"]
