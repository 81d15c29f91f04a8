"""Naming series on the command line: ``--test p-ovs-p-flows --size 64 --dut ovs-dpdk --metric mrr``.

A :class:`Selector` narrows the stored tests in SQL first (test or study name, frame size,
method, suite, testbed: indexed columns), then the series built from what is left by their
identity (DUT, metric, topology, port kind, host, flows, axes, series id).  A selector that
matches nothing raises :class:`SelectorError` naming the field and the stored values closest to
what was asked (``difflib``).
"""
from __future__ import annotations

import argparse
import difflib
import shlex
from dataclasses import dataclass, field, fields
from typing import Any, Iterable, Optional, Union

#: the selector's options, their help, in the order they are printed
OPTIONS: dict[str, str] = {
    "test": "test or study name (a study's units: its name without [axis=value])",
    "size": "frame size in bytes, or imix",
    "metric": "throughput (zero-loss search), mrr, pdr, ndr (interleaved units), or a method name",
    "dut": "DUT kind, e.g. ovs-dpdk, testpmd",
    "method": "test method, e.g. throughput",
    "suite": "suite name",
    "testbed": "testbed name (runs on the local host: --host NAME)",
    "host": "host name of runs on the local host, or testbed name",
    "topology": "topology kind, e.g. p-ovs-p",
    "port_kind": "port kind, e.g. vhost, af_xdp",
    "flows": "flows per port",
    "series": "series id (or its first characters), as trend prints it",
    "axis": "study axis value AXIS=VALUE (repeatable)",
}


class SelectorError(ValueError):
    """A selector that matches no series; the message names the field and the near matches."""


@dataclass
class Selector:
    test: Optional[str] = None
    size: Optional[str] = None
    metric: Optional[str] = None
    dut: Optional[str] = None
    method: Optional[str] = None
    suite: Optional[str] = None
    testbed: Optional[str] = None
    host: Optional[str] = None
    topology: Optional[str] = None
    port_kind: Optional[str] = None
    flows: Optional[int] = None
    series: Optional[str] = None
    axis: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, value: Union[None, "Selector", dict[str, Any], str, Any]) -> "Selector":
        """A Selector from None (everything), a Selector, a dict of its fields, a string of CLI
        options (``"--test flows --size 64"``) or an argparse namespace carrying the options."""
        if value is None:
            return cls()
        if isinstance(value, Selector):
            return value
        if isinstance(value, str):
            return cls.from_argv(shlex.split(value))
        if not isinstance(value, dict):
            value = {f.name: getattr(value, f.name, None) for f in fields(cls)}
        unknown = sorted(set(value) - {f.name for f in fields(cls)})
        if unknown:
            raise SelectorError(f"unknown selector field(s) {', '.join(unknown)}; known: {', '.join(OPTIONS)}")
        kw = {k: v for k, v in value.items() if v is not None}
        if isinstance(kw.get("axis"), str):
            kw["axis"] = [kw["axis"]]
        sel = cls(**kw)
        sel.check()
        return sel

    @classmethod
    def from_argv(cls, argv: list[str]) -> "Selector":
        p = argparse.ArgumentParser(prog="selector", add_help=False, exit_on_error=False)
        add_options(p)
        try:
            ns, rest = p.parse_known_args(argv)
        except argparse.ArgumentError as e:
            raise SelectorError(str(e)) from None
        if rest:
            raise SelectorError(f"not a selector option: {' '.join(rest)}; options: "
                                + ", ".join("--" + k.replace("_", "-") for k in OPTIONS))
        return cls.parse(ns)

    def check(self) -> None:
        if self.size is not None:
            s = str(self.size).strip().lower()
            if s != "imix" and not s.isdigit():
                raise SelectorError(f"--size {self.size!r}: give a frame size in bytes (e.g. 64) or imix")
            self.size = s
        bad = [a for a in self.axis if "=" not in a]
        if bad:
            raise SelectorError(f"--axis {bad[0]!r}: write AXIS=VALUE, e.g. --axis flows=1000")

    def is_empty(self) -> bool:
        return all(getattr(self, f.name) in (None, []) for f in fields(self))

    def text(self) -> str:
        out = []
        for f in fields(self):
            v = getattr(self, f.name)
            for x in (v if isinstance(v, list) else [v]):
                if x is not None:
                    out.append(f"--{f.name.replace('_', '-')} {x}")
        return " ".join(out) or "(all series)"

    # ------------------------------------------------------------------ SQL side
    def where(self, Test: Any, Run: Any) -> list[Any]:
        """SQLAlchemy conditions on the tests and runs tables."""
        from sqlalchemy import or_
        cond: list[Any] = []
        if self.test:
            cond.append(or_(Test.name == self.test, Test.name.startswith(self.test + "[", autoescape=True)))
        if self.size is not None:
            cond.append(Test.frame_size_b.is_(None) if self.size == "imix" else Test.frame_size_b == int(self.size))
        for col, want in ((Test.method, self.method), (Run.suite, self.suite), (Run.testbed, self.testbed)):
            if want:
                cond.append(col == want)
        return cond

    # ------------------------------------------------------------------ identity side
    def matches(self, sid: str, ident: dict[str, Any]) -> bool:
        if self.series and not sid.startswith(self.series):
            return False
        for key, want in (("metric", self.metric), ("dut", self.dut), ("host", self.host),
                          ("topology", self.topology), ("port_kind", self.port_kind)):
            if want is not None and str(ident.get(key)) != str(want):
                return False
        if self.flows is not None and ident.get("flows") != int(self.flows):
            return False
        axes = ident.get("axes") or {}
        for a in self.axis:
            k, v = a.split("=", 1)
            if k not in axes or str(axes[k]).lower() != v.strip().lower():
                return False
        return True


def add_options(p: Any) -> None:
    """The selector's options on an argparse parser (``nfvperf trend`` and ``nfvperf gate``)."""
    for name, help_ in OPTIONS.items():
        opt = "--" + name.replace("_", "-")
        if name == "axis":
            p.add_argument(opt, action="append", default=[], metavar="AXIS=VALUE", help=help_)
        elif name == "flows":
            p.add_argument(opt, type=int, default=None, help=help_)
        else:
            p.add_argument(opt, dest=name, default=None, help=help_)


def near(word: str, candidates: Iterable[Any], n: int = 5) -> list[str]:
    cands = sorted({str(c) for c in candidates if c is not None})
    close = difflib.get_close_matches(str(word), cands, n=n, cutoff=0.5)
    if not close:   # a prefix or a substring is near too (e.g. a study's units)
        close = [c for c in cands if str(word).lower() in c.lower()][:n]
    return close


def no_match_error(sel: Selector, stored: dict[str, Iterable[Any]]) -> SelectorError:
    """The error for a selector that matched nothing: the first field whose value is not among
    the stored ones, with the near matches (else the whole selector)."""
    for key, values in stored.items():
        want = getattr(sel, key, None)
        if want in (None, []):
            continue
        vals = {str(v) for v in values if v is not None}
        wants = want if isinstance(want, list) else [want]
        for w in wants:
            if key == "series":
                if any(v.startswith(str(w)) for v in vals):
                    continue
            elif str(w) in vals:
                continue
            close = near(str(w), vals)
            opt = "--" + key.replace("_", "-")
            hint = f"; near: {', '.join(close)}" if close else (
                f"; stored: {', '.join(sorted(vals)[:12])}" if vals else "; the store has none")
            return SelectorError(f"{opt} {w}: no series has it{hint}")
    return SelectorError(f"no series matches {sel.text()} (each option matches some series, but not "
                         "together); see `nfvperf trend` for the series and their ids")
