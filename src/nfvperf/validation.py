"""Pydantic validation errors as a person reads them, and the dict merging the suite schema uses.

Every error names its path (``tests[2].traffic.frame_sizes[0]``), what was given and what is
allowed, with a "did you mean" for a misspelt field.  Used by the suite schema (``config``) and by
any command that validates a model of its own (``nfvperf preflight``); the report uses
:func:`deep_merge` to rebuild a test's topology from the run config and the test's overrides.
"""
from __future__ import annotations

import difflib
from typing import Any, Mapping, Optional

from pydantic import BaseModel, ValidationError

# how pydantic names the branch of a union in an error location (not part of the field path)
_UNION_TAGS = ("str", "float", "int", "bool", "dict", "list")
_UNION_TAG_PREFIXES = ("literal[", "function-", "dict[", "list[", "constrained-")


def _loc(prefix: str, loc: tuple) -> str:
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        # pydantic names union branches (e.g. 'literal[...]', 'ProfileSpec'); they are not paths
        elif not (part in _UNION_TAGS or part.startswith(_UNION_TAG_PREFIXES) or part[:1].isupper()):
            out += ("." if out else "") + part
    return out or "(suite)"


def _describe(err: Mapping[str, Any], model: Optional[type[BaseModel]] = None,
              extra_allowed: tuple[str, ...] = ()) -> str:
    typ = err.get("type", "")
    msg = err.get("msg", "invalid")
    ctx = err.get("ctx") or {}
    if typ == "extra_forbidden":
        loc = err.get("loc", ())
        allowed = _allowed_fields(model, loc)
        if allowed and len(loc) == 1:
            allowed = sorted(set(allowed) | set(extra_allowed))
        near = difflib.get_close_matches(str(loc[-1]) if loc else "", allowed, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        hint += f" Allowed fields: {', '.join(allowed)}" if allowed else ""
        return f"unknown field{hint}"
    if typ == "missing":
        return "required field is missing"
    if typ == "literal_error":
        return f"got {err.get('input')!r}; allowed values: {ctx.get('expected', '?')}"
    if typ in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return f"got {err.get('input')!r}; {msg.lower()}"
    if typ == "value_error":
        return msg.removeprefix("Value error, ")
    return f"{msg} (got {err.get('input')!r})" if "input" in err and not isinstance(err.get("input"), dict) else msg


def _allowed_fields(model: Optional[type[BaseModel]], loc: tuple) -> list[str]:
    """Walk ``loc`` (minus the last element) through ``model``'s fields to list the allowed keys."""
    if model is None:
        return []
    cur: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        fields = getattr(cur, "model_fields", None)
        if not fields or part not in fields:
            return []
        cur = _model_in(fields[part].annotation)
        if cur is None:
            return []
    return sorted(getattr(cur, "model_fields", {}).keys())


def _model_in(ann: Any) -> Optional[type[BaseModel]]:
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann
    for a in getattr(ann, "__args__", ()) or ():
        m = _model_in(a)
        if m is not None:
            return m
    return None


def format_validation_error(exc: ValidationError, prefix: str = "",
                            model: Optional[type[BaseModel]] = None,
                            extra_allowed: tuple[str, ...] = ()) -> list[str]:
    out = []
    seen = set()
    for err in exc.errors():
        loc = tuple(err.get("loc", ()))
        # a union (profile: "quick" | {...}) reports every branch; keep one line per path
        path = _loc(prefix, loc)
        line = f"{path}: {_describe(err, model, extra_allowed)}"
        if path in seen and err.get("type") in ("literal_error", "model_type", "dict_type"):
            continue
        seen.add(path)
        out.append(line)
    return out

_MISSING = object()


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def dict_diff(d: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """What ``d`` changes in ``base`` (nested), so that ``deep_merge(base, dict_diff(d, base)) == d``
    for dicts with the same keys (validated models)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        b = base.get(k, _MISSING)
        if isinstance(v, dict) and isinstance(b, dict):
            sub = dict_diff(v, b)
            if sub:
                out[k] = sub
        elif b is _MISSING or v != b:
            out[k] = v
    return out
