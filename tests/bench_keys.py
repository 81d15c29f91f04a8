"""The convention every bench under bench/ follows (docs/testing.md, "Benches"): ``--quick`` runs it
in seconds, and its last stdout line is one JSON object holding at least the keys its module
docstring names on a line ``JSON keys: key1, key2, ...`` (wrapped after a comma, it goes on)."""
from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def benches() -> list[Path]:
    """Every bench, found by glob: a new one is covered without being listed."""
    return sorted((REPO / "bench").glob("*.py"))


def promised_keys(bench: Path) -> list[str]:
    """The keys the bench's docstring promises (``JSON keys: a, b, ...``); ValueError without."""
    doc = ast.get_docstring(ast.parse(bench.read_text())) or ""
    lines = [ln.strip() for ln in doc.splitlines()]
    starts = [i for i, ln in enumerate(lines) if ln.startswith("JSON keys:")]
    if len(starts) != 1:
        raise ValueError(f"{bench.name}: its docstring needs one line 'JSON keys: key1, key2, ...' "
                         f"(found {len(starts)})")
    text, i = lines[starts[0]], starts[0]
    while text.endswith(",") and i + 1 < len(lines):     # a list wrapped after a comma goes on
        i += 1
        text += " " + lines[i]
    keys = [k.strip() for k in text[len("JSON keys:"):].split(",")]
    if not all(keys):
        raise ValueError(f"{bench.name}: an empty key in {text!r}")
    return keys


def last_json(stdout: str) -> dict[str, Any]:
    """The bench's last stdout line as a JSON object; ValueError naming what it was instead."""
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    if not lines:
        raise ValueError("printed nothing on stdout")
    try:
        doc = json.loads(lines[-1])
    except json.JSONDecodeError as e:
        raise ValueError(f"last line is not JSON ({e}): {lines[-1][:300]!r}") from e
    if not isinstance(doc, dict):
        raise ValueError(f"last line is JSON but not an object: {lines[-1][:300]!r}")
    return doc
