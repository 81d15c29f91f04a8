"""``nfvperf preflight``: the host checks for a topology kind and DUT, as they declare their needs.

:mod:`nfvperf.host.preflight` is the library of checks and knows no topology, DUT or generator;
this module collects what the topology class and the DUT/VNF adapters declare
(``Topology.preflight_needs(spec)``, ``DutAdapter.preflight_needs(spec)``) and runs the checks.
Without ``--kind``/``--dut`` every registered adapter's binaries are listed (optional).
"""
from __future__ import annotations

import argparse
import json
from typing import Any, Optional, Sequence

from pydantic import ValidationError

from nfvperf.dut.base import DUT_REGISTRY
from nfvperf.host import preflight as pf
from nfvperf.host.steadiness import check_steadiness
from nfvperf.tg.tgen import find_tgen_binary
from nfvperf.topo.spec import TopologySpec, allowed_duts, dut_names, kind_names
from nfvperf.validation import format_validation_error


def tgen_check(required: Sequence[str] = ()) -> pf.Check:
    """The generator binary (tgen/build/tgen or $NFVPERF_TGEN)."""
    return pf.check_tool("tgen", find_tgen_binary, "make build (needs meson, ninja, libdpdk-dev)",
                         required="tgen" in required)


def all_needs() -> pf.Needs:
    """Every registered DUT adapter's binaries (optional) and the generator."""
    needs = pf.Needs(checks=[tgen_check])
    for name in dut_names():
        needs.need(*DUT_REGISTRY[name].binaries, required=False)
    return needs


def needs_for(spec: Optional[TopologySpec]) -> pf.Needs:
    """What a TopologySpec needs (None: :func:`all_needs`), everything else listed optional."""
    needs = all_needs()
    if spec is not None:
        needs.checks = []
        needs.merge(spec.preflight_needs())
    return needs


def run_checks(spec: Optional[TopologySpec] = None, required: Sequence[str] = ("root",),
               cpus: Sequence[int] = ()) -> list[pf.Check]:
    """:func:`nfvperf.host.preflight.run_checks` with the needs of ``spec`` (a TopologySpec or
    None for everything)."""
    return pf.run_checks(needs_for(spec), required=required, cpus=cpus)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``nfvperf preflight [--dut D --kind K --pci A ...] [--json]``."""
    p = argparse.ArgumentParser(prog="nfvperf preflight",
                                description="Check the host: root, hugepages, irqbalance, governor, "
                                            "turbo, isolcpus/nohz_full, KSM, binaries, tgen, NICs, "
                                            "CPU steadiness.")
    p.add_argument("--kind", default=None, help=f"topology kind ({', '.join(kind_names())})")
    p.add_argument("--dut", default=None, help=f"DUT ({', '.join(dut_names())})")
    p.add_argument("--pci", action="append", default=[], help="PCI address of a port (repeatable)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-steadiness", action="store_true",
                   help="skip the 2 s CPU steadiness probe (a fixed-work loop on each CPU)")
    argv = [a for a in (argv or []) if a != "--"]
    args = p.parse_args(argv)
    spec = None
    if args.kind or args.dut or args.pci:
        kw: dict[str, Any] = {}
        if args.kind:
            kw["kind"] = args.kind
            if not args.dut and TopologySpec.model_fields["dut"].default not in allowed_duts(args.kind):
                kw["dut"] = allowed_duts(args.kind)[0]     # the kind's first DUT
        if args.dut:
            kw["dut"] = args.dut
        if args.pci:
            kw["port_kind"] = "pci"
            kw["pci"] = args.pci
        try:
            spec = TopologySpec(**kw)
        except ValidationError as e:
            p.error("; ".join(format_validation_error(e)))
    checks = run_checks(spec, required=("root", "hugepages"))
    if not args.no_steadiness:
        checks.append(check_steadiness())
    if args.json:
        print(json.dumps([c.to_dict() for c in checks], indent=2))
    else:
        print(pf.format_checks(checks))
    return 1 if any(c.required and c.status == "fail" for c in checks) else 0

