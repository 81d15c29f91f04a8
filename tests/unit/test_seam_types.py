"""The seams are typed (issue 18 item 7), and stay so.

Counts ``Any`` in the parameter and return annotations of the modules the issue names (the
measurer vocabulary, the searches, the DUT, topology and host bases, the methods' common code),
and ``getattr`` on a spec anywhere in ``src/`` (``spec``, ``self.spec``, ``topo_spec``,
``cspec``, ``kw.get("spec")`` ...: a TopologySpec is declared, and the DUT layer reads it
through ``dut.base.TopologyView``, so a field is read by its name in the code, never by a
string).  Both are 0: a new seam is written typed.  An adapter's options section, which a plugin
adds at run time, is looked up by ``TopologyView.option_section(key)``, a typed lookup among the
model's fields, not a ``getattr``."""
from __future__ import annotations

import ast
import re
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "src" / "nfvperf"
#: one path (a glob under src/nfvperf) per line, so that branches adding paths merge cleanly
SEAMS = [
    "trial.py",
    "search/*.py",
    "dut/base.py",
    "topo/base.py",
    "methods/common.py",
    "topo/ports/*.py",     # issue 30: the port kinds (topo: PortsTopology)
    "host/*.py",           # issue 30: every host module
    "methods/*.py",        # issue 30: every method (recorder, runner typed)
    "search/mlr/*.py",     # issue 30: all of search
    "dut/vswitch.py",      # issue 30: the vSwitch protocol and its implementations
    "dut/ovs_*.py",
    "dut/linux_bridge.py",
    "testbed/hosts.py",    # typed neighbours: the testbed's hosts (CabledLink, TopologyKwargs)
]
#: the counts (issue 18, 2026-11-26); they reached 0 and must stay there
ANY_CEILING = 0           # 109 -> 102 (methods/common.py) -> 27 (search, host, trial, topo/base)
#                           -> 1 (DutAdapter.options) -> 0 (options_as: each adapter's own model)
#: ``Any`` in the seams' class attributes (issue 31: not counted before), 2026-11-28: the JSON-shaped
#: records a trial carries as they came (TrialResult.tg_counters, dut_counters, extra) and
#: dut.base.Flow.match; they may shrink, not grow
ANY_ATTR_CEILING = 4
SPEC_GETATTR_CEILING = 0  # 46 -> 36 (topo/base, port kinds) -> 28 (the declared TopologySpec: OVS
#                           topologies, p2p) -> 0 (TopologyView and the adapters' typed sections)
#: ``getattr(`` on a name ending in ``spec`` (``spec``, ``self.spec``, ``topo_spec``, ``cspec``),
#: or on ``<mapping>.get("spec")``
SPEC_GETATTR = re.compile(r"""getattr\((?:\w+\.)*\w*spec\b|getattr\([\w.]*get\(["']spec["']\)""")
#: a branch on a port kind's name (issue 30): ``kind == "vhost"``, ``port_kind in ("veth", ...)``,
#: ``self.spec.port_kind != 'pci'``, ``family not in ("veth", "pci")``, ``pk == "af_xdp"``,
#: ``driver == "af_packet"``; what differs by kind is declared by its class (topo/ports/*.py)
_KINDS = r"""["'](?:af_packet|af_xdp|vhost|memif|pci|veth)["']"""
KIND_BRANCH = re.compile(r"\b(?:\w*kind|family|pk|driver)\s*(?:==|!=|not\s+in|in)\s*[(\[{]?\s*" + _KINDS
                         + r"|" + _KINDS + r"\s*(?:==|!=|in)\s*[\w.]*(?:kind|family|pk|driver)\b")
KIND_BRANCH_PATHS = ["dut", "topo"]


def _mentions_any(node: ast.AST | None) -> bool:
    if node is None:
        return False
    return any((isinstance(n, ast.Name) and n.id == "Any")
               or (isinstance(n, ast.Attribute) and n.attr == "Any")          # typing.Any, t.Any
               or (isinstance(n, ast.Constant) and isinstance(n.value, str) and re.search(r"\bAny\b", n.value))
               for n in ast.walk(node))


def any_in_class_attributes(path: Path) -> list[str]:
    """``file:line class attribute`` for every class attribute (a dataclass field, a model field,
    a declared attribute) annotated with ``Any``: a seam's data is part of its signature."""
    return [f"{path.relative_to(PKG)}:{st.lineno} {node.name} {st.target.id}"
            for node in ast.walk(ast.parse(path.read_text(), str(path))) if isinstance(node, ast.ClassDef)
            for st in node.body if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)
            and _mentions_any(st.annotation)]


def any_in_signatures(path: Path) -> list[str]:
    """``file:line function param`` for every parameter or return annotated with ``Any``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        a = node.args
        params = a.posonlyargs + a.args + a.kwonlyargs + [p for p in (a.vararg, a.kwarg) if p]
        names = [p.arg for p in params if _mentions_any(p.annotation)]
        names += ["return"] if _mentions_any(node.returns) else []
        out += [f"{path.relative_to(PKG)}:{node.lineno} {node.name} {n}" for n in names]
    return out


def seam_files() -> list[Path]:
    return sorted({p for pattern in SEAMS for p in PKG.glob(pattern)})


def test_the_counter_sees_any_in_a_signature(tmp_path) -> None:
    f = tmp_path / "m.py"
    f.write_text("import typing\nfrom typing import Any\n"
                 "def f(a: int, b: Any, *kw: 'dict[str, Any]') -> Any: ...\n"
                 "def g(a: int) -> int: ...\n"
                 "def h(c: typing.Any, d: 'typing.Optional[int]') -> 'typing.Any': ...\n"
                 "class C:\n    x: int\n    y: typing.Any = None\n    z: 'dict[str, Any]'\n"
                 "    def m(self, e: Any) -> None: ...\n")
    PKG_saved = globals()["PKG"]
    globals()["PKG"] = tmp_path
    try:
        assert sorted(s.split()[-1] for s in any_in_signatures(f)) == ["b", "c", "e", "kw", "return", "return"]
        assert [s.split()[-2:] for s in any_in_class_attributes(f)] == [["C", "y"], ["C", "z"]]
    finally:
        globals()["PKG"] = PKG_saved


def test_any_in_seam_signatures_does_not_grow() -> None:
    found = [s for f in seam_files() for s in any_in_signatures(f)]
    assert len(found) <= ANY_CEILING, (f"{len(found)} Any in seam signatures (ceiling {ANY_CEILING}): type "
                                       "the new ones:\n" + "\n".join(found))


def test_any_in_seam_class_attributes_does_not_grow() -> None:
    found = [s for f in seam_files() for s in any_in_class_attributes(f)]
    assert len(found) <= ANY_ATTR_CEILING, (f"{len(found)} Any in seam class attributes (ceiling "
                                            f"{ANY_ATTR_CEILING}): type the new ones:\n" + "\n".join(found))


def test_the_counter_sees_getattr_on_a_spec() -> None:
    seen = ['getattr(spec, "mtu", 1500)', "getattr(self.spec, 'n_rxq', 1)", "getattr(topo.spec, k)",
            'getattr(topo_spec, "mtu", 1500)', "getattr(cspec, name)", 'getattr(kw.get("spec"), "testpmd")',
            'getattr(options.get("spec"), "mtu", 1500)']
    not_seen = ['getattr(topo.topology_class(spec.kind), "n_vnfs", 0)', 'getattr(self.host, "remote")',
                'getattr(inspection, "x")']
    assert [s for s in seen if not SPEC_GETATTR.search(s)] == []
    assert [s for s in not_seen if SPEC_GETATTR.search(s)] == []


def test_getattr_on_specs_does_not_grow() -> None:
    found = [f"{p.relative_to(PKG)}:{i}" for p in sorted(PKG.rglob("*.py"))
             for i, line in enumerate(p.read_text().splitlines(), 1) if SPEC_GETATTR.search(line)]
    assert len(found) <= SPEC_GETATTR_CEILING, (f"{len(found)} getattr on a spec (ceiling "
                                                f"{SPEC_GETATTR_CEILING}): read the typed field:\n"
                                                + "\n".join(found))


def test_the_pattern_sees_a_branch_on_a_port_kind() -> None:
    seen = ['if spec.port_kind == "memif":', "pci = self.port_kind == 'pci'", 'if family not in ("veth", "pci"):',
            'x = 1 if family == "pci" else 2', 'if workers <= 1 or self.port_kind != "vhost" or x:',
            'return max(a, b) if port_kind == "af_packet" else a', 'if pk == "af_xdp" and w > 1:',
            'if kind in ["vhost", "memif"]:', 'if "vhost" == spec.port_kind:', 'if self.driver == "af_xdp":']
    not_seen = ['port_kinds = ("af_packet", "af_xdp", "pci")', 'kind: str = "abstract"',
                'HostPort(i, "veth", tg_ifname=a)', 'name = {"veth": self.driver}.get(self.kind, self.kind)',
                'port_kind_notes = {"vhost": "no vhost-user ports"}', 'if p.kind == "dpdk":',
                'if cls.kind != "p-ovs-p":']
    assert [s for s in seen if not KIND_BRANCH.search(s)] == []
    assert [s for s in not_seen if KIND_BRANCH.search(s)] == []


def kind_branches() -> dict[str, list[str]]:
    """file -> ``file:line text`` of each line under dut/ and topo/ that branches on a port kind's
    name (comment lines left out)."""
    out: dict[str, list[str]] = {}
    for p in sorted(f for d in KIND_BRANCH_PATHS for f in (PKG / d).rglob("*.py")):
        rel = str(p.relative_to(PKG))
        for i, line in enumerate(p.read_text().splitlines(), 1):
            if KIND_BRANCH.search(line) and not line.lstrip().startswith("#"):
                out.setdefault(rel, []).append(f"{rel}:{i} {line.strip()}")
    return out


def test_no_string_branch_on_a_port_kind() -> None:
    over = [line for lines in kind_branches().values() for line in lines]
    assert over == [], ("branch on a port kind's name: declare what differs on the kind's class "
                        "(nfvperf.topo.ports, one module per kind) and ask it:\n" + "\n".join(over))
