"""Reading a suite: the YAML file, every test entry and study checked against the schema
(:mod:`nfvperf.config`) and its method's params model, the timing profile applied, and the shipped
suites found by name.  :func:`load_suite` collects *every* problem into one :class:`SuiteError`."""
from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any, Optional, Union

import yaml
from pydantic import BaseModel, ValidationError

from nfvperf.config import (MAX_REPEAT, PROFILE_PRESETS, ProfileSpec, SimSpec, Suite, SuiteError, SuiteSpec,
                            TestConfig, TrafficOverride, TrafficSpec, _in_rounds, _repeatable)
from nfvperf.methods import REGISTRY, is_sizeless, runs_on_iperf3
from nfvperf.study import round_settings
from nfvperf.study import expand as expand_study
from nfvperf.topo.ports import port_kind_class
from nfvperf.topo.spec import TopologySpec, merge_override
from nfvperf.validation import _model_in, deep_merge, format_validation_error


ENGINE_TEST_KEYS = ("method", "name", "frame_sizes", "traffic", "topology", "per_size", "repeat", "sim", "study")


def _test_repeat(where: str, entry: dict[str, Any], method: str, spec: Optional[SuiteSpec],
                 problems: list[str]) -> int:
    """A test's ``repeat:`` (default: the suite's, for rate methods; 1 for the others)."""
    if "repeat" not in entry:
        return spec.repeat if spec is not None and _repeatable(method) else 1
    n = entry["repeat"]
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_REPEAT:
        problems.append(f"{where}.repeat: must be a whole number 1..{MAX_REPEAT}, got {n!r}")
        return 1
    if n > 1 and not _repeatable(method):
        problems.append(f"{where}.repeat: method {method} is not a searched rate; repeat applies to "
                        "throughput and rfc2889_forwarding (use the method's own repetitions, if any)")
        return 1
    return n


def read_yaml(path: Union[str, Path]) -> dict[str, Any]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SuiteError([f"file not found: {p}"], str(p)) from None
    except OSError as e:
        raise SuiteError([f"cannot read {p}: {e.strerror}"], str(p)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise SuiteError([f"(yaml) {where}{problem}; fix the YAML syntax"], str(p)) from None
    if not isinstance(data, dict):
        raise SuiteError([f"(suite): the file must hold a mapping (name:, topology:, tests:, ...), "
                          f"got {type(data).__name__}"], str(p))
    return data


def validate_suite(data: dict[str, Any], source: Optional[str] = None,
                   quick: bool = False) -> Suite:
    problems: list[str] = []
    spec: Optional[SuiteSpec] = None
    try:
        spec = SuiteSpec.model_validate(data)
    except ValidationError as e:
        problems += format_validation_error(e, model=SuiteSpec)
    if quick and spec is not None:
        t = spec.timing
        spec.profile = ProfileSpec(name="quick") if t.name != "custom" else t.model_copy(
            update=PROFILE_PRESETS["quick"])
    registry = dict(REGISTRY)
    tests: list[TestConfig] = []
    listed = data.get("tests")
    raw_tests: list[Any] = listed if isinstance(listed, list) else []
    names: dict[str, int] = {}
    for i, entry in enumerate(raw_tests):
        if isinstance(entry, dict) and "study" in entry:
            tests += _validate_study(i, entry, spec, registry, names, quick, problems)
            continue
        test = _validate_test(i, entry, spec, registry, names, quick, problems)
        if test is not None:
            tests.append(test)
    if problems or spec is None:
        raise SuiteError(problems or ["(suite): invalid"], source)
    return Suite(spec=spec, tests=tests, source=Path(source) if source else None, raw=data)


def _validate_test(i: int, entry: Any, spec: Optional[SuiteSpec], registry: dict[str, Any],
                   names: dict[str, int], quick: bool, problems: list[str]) -> Optional[TestConfig]:
    """One ``tests[i]`` entry; appends its problems (and returns None when it cannot go on)."""
    where = f"tests[{i}]"
    if not isinstance(entry, dict):
        problems.append(f"{where}: each test must be a mapping like {{method: throughput, ...}}")
        return None
    method = entry.get("method")
    if not method:
        problems.append(f"{where}.method: required; one of: {', '.join(sorted(registry)) or '(methods)'}")
        return None
    if registry and method not in registry:
        problems.append(f"{where}.method: unknown method {method!r}; allowed: {', '.join(sorted(registry))}")
        return None
    name = entry.get("name") or method
    if not isinstance(name, str):
        problems.append(f"{where}.name: must be a string")
        return None
    if name in names:
        problems.append(f"{where}.name: {name!r} is already used by tests[{names[name]}]; "
                        "give each test a distinct name")
    names[name] = i
    sizes = _test_sizes(where, entry, spec, problems)
    traffic = _test_traffic(where, entry, spec, problems)
    topology = _test_topology(where, entry, spec, problems)
    params_raw = {k: v for k, v in entry.items() if k not in ENGINE_TEST_KEYS}
    params: Any = params_raw
    model = registry[method].params if registry else None
    if model is not None and "name" in getattr(model, "model_fields", {}) and "name" in entry:
        params_raw["name"] = name
    if model is not None and spec is not None:
        apply_timing(params_raw, model, spec.timing, force=quick)
    if model is not None:
        try:
            params = model.model_validate(params_raw)
        except ValidationError as e:
            problems += format_validation_error(e, prefix=where, model=model, extra_allowed=ENGINE_TEST_KEYS)
            return None
    by_size = _per_size_params(where, entry, sizes, params_raw, model, problems)
    if by_size is None:
        return None
    traffic = traffic.model_copy(update={"frame_sizes": list(sizes)}) if sizes else traffic
    if topology is not None:
        _check_frames_fit(where, entry, method, sizes, traffic, topology, problems)
        _check_vlan_translation(where, method, traffic, topology, problems)
        _check_topology_accepts(where, method, params, topology, problems)
        topology = _fit_dut_to_traffic(where, method, traffic, topology, problems)
    repeat = _test_repeat(where, entry, method, spec, problems)
    return TestConfig(index=i, method=method, name=name, params=params, frame_sizes=list(sizes),
                      traffic=traffic, topology=topology, raw=dict(entry), params_by_size=by_size,
                      repeat=repeat, sim=_test_sim(where, entry, spec, problems))


def _test_sim(where: str, entry: dict[str, Any], spec: Optional[SuiteSpec],
              problems: list[str]) -> Optional[SimSpec]:
    """A test's ``sim:`` over the suite's (None when the entry has none)."""
    if "sim" not in entry or spec is None:
        return None
    over = entry["sim"]
    if not isinstance(over, dict):
        problems.append(f"{where}.sim: must be a mapping of sim settings, e.g. {{model: {{base_ns: 100}}}}")
        return None
    if "pace_s" in over:
        problems.append(f"{where}.sim.pace_s: set per suite only (sim.pace_s at the top level)")
        return None
    try:
        return spec.sim.with_test(over)
    except ValidationError as e:
        problems += format_validation_error(e, prefix=f"{where}.sim", model=SimSpec)
        return None


def _validate_study(i: int, entry: dict[str, Any], spec: Optional[SuiteSpec], registry: dict[str, Any],
                    names: dict[str, int], quick: bool, problems: list[str]) -> list[TestConfig]:
    """A ``tests[i]`` entry with ``study:``: its units (nfvperf.study.expand), each validated as a
    hand-written entry.  A problem every unit has is reported once; one that only some units
    have names the unit."""
    where = f"tests[{i}]"
    name = entry.get("name") or entry.get("method")
    if isinstance(name, str):
        if name in names:
            problems.append(f"{where}.name: {name!r} is already used by tests[{names[name]}]; "
                            "give each test a distinct name")
        names[name] = i
    units, errs = expand_study(entry, where, merge_topology=merge_override)
    if errs:
        problems += errs
        return []
    out: list[TestConfig] = []
    per_unit: list[list[str]] = []
    for u in units:
        unit_problems: list[str] = []
        test = _validate_test(i, u.entry, spec, registry, names, quick, unit_problems)
        per_unit.append(unit_problems)
        if test is not None:
            test.study = u.study
            out.append(test)
    _study_rounds(where, entry, spec, out, problems)
    per_unit = [[m.replace(u.name, str(name)) for m in p] for u, p in zip(units, per_unit)]
    common = [m for m in per_unit[0] if all(m in p for p in per_unit)] if len(units) > 1 else []
    problems += common
    some: dict[str, list[str]] = {}
    for u, unit_problems in zip(units, per_unit):
        for m in unit_problems:
            if m not in common:
                some.setdefault(m, []).append(u.name)
    problems += [f"{m} (study unit{'s' if len(us) > 1 else ''} {', '.join(us)})" for m, us in some.items()]
    return out


def _study_rounds(where: str, entry: dict[str, Any], spec: Optional[SuiteSpec], tests: list[TestConfig],
                  problems: list[str]) -> None:
    """The suite's ``rounds:`` for a study without its own; rounds need a throughput study."""
    if not tests:
        return
    own = tests[0].study.get("rounds") if tests[0].study else None
    if own is None and spec is not None and spec.rounds:
        shared = round_settings(spec.rounds)
        for t in tests:
            t.study = dict(t.study or {}, rounds=shared)
        own = shared
    if own and not _in_rounds(str(entry.get("method"))):
        problems.append(f"{where}.study.rounds: method {entry.get('method')} cannot run in rounds; rounds "
                        "measure capacity figures (mrr, pdr, ndr) per unit, of a throughput study "
                        "(method: throughput)")


#: L2 header + FCS: a frame of ``mtu + ETH_OVERHEAD_B`` bytes carries an MTU-sized packet
ETH_OVERHEAD_B = 18


#: what VXLAN encapsulation adds on the wire (outer Ethernet, IPv4, UDP, VXLAN)
VXLAN_OVERHEAD_B = 50


def frames_over_mtu(sizes: list[int], mtu: int, traffic: TrafficSpec) -> tuple[list[int], int]:
    """(the sizes whose frames, with the VXLAN/VLAN overhead on the wire, do not fit ``mtu`` +
    :data:`ETH_OVERHEAD_B`, that overhead in bytes)."""
    extra = (VXLAN_OVERHEAD_B if traffic.vxlan else 0) + (4 if traffic.vlan else 0)
    return sorted({sz for sz in sizes if sz + extra > mtu + ETH_OVERHEAD_B}), extra


def _check_frames_fit(where: str, entry: dict[str, Any], method: str, sizes: list[int],
                      traffic: TrafficSpec, topology: TopologySpec, problems: list[str]) -> None:
    """The test's frames fit the topology's MTU, and the generator can drive that MTU on the
    port kind (TCP tests run iperf3 on the kernel ports instead, so only the path limit holds)."""
    tcp = runs_on_iperf3(method)
    mtu = int(topology.mtu)
    topo_where = f"{where}.topology" if "topology" in entry else "topology"
    pk = port_kind_class(topology.port_kind)
    if tcp and not pk.tcp:
        whose = "" if "topology" in entry else f" ({where}: test {entry.get('name') or method})"
        problems.append(f"{topo_where}.port_kind: a {method} test runs iperf3 on kernel "
                        f"interfaces at the generator ends; port_kind {pk.name} has none (use "
                        f"af_packet or af_xdp){whose}")
    if not tcp:
        why = pk.check_mtu(mtu, generator=True)
        if why:
            problems.append(f"{topo_where}.mtu: {why} (tgen drives the ports of a {method} test); "
                            "lower topology.mtu or change topology.port_kind")
    if tcp or is_sizeless(method):
        return
    all_sizes = list(sizes) + [e.size_b for e in (traffic.imix or [])]
    big, extra = frames_over_mtu(all_sizes, mtu, traffic)
    what = " + ".join(x for x in ("VXLAN 50 B" if traffic.vxlan else "",
                                   "VLAN tag 4 B" if traffic.vlan else "") if x)
    sizes_where = f"{where}.frame_sizes" if "frame_sizes" in entry else "traffic.frame_sizes"
    if big:
        on_wire = f" (+ {what} on the wire)" if extra else ""
        problems.append(f"{sizes_where}: frames of {', '.join(map(str, big))} B{on_wire} do not fit "
                        f"{topo_where}.mtu {mtu} (the largest frame is mtu + 18 = "
                        f"{mtu + ETH_OVERHEAD_B - extra} B{' inner' if extra else ''}); raise "
                        f"topology.mtu to at least {max(big) + extra - ETH_OVERHEAD_B} or drop "
                        "those sizes")


def _check_vlan_translation(where: str, method: str, traffic: TrafficSpec, topology: TopologySpec,
                            problems: list[str]) -> None:
    """``ovs.vlan_translate`` forwards only frames with a translated tag: the generator must
    send one of them (``traffic.vlan``), else every frame is dropped."""
    vt = getattr(getattr(topology, "ovs", None), "vlan_translate", None)
    if not vt or runs_on_iperf3(method) or traffic.vlan in vt:
        return
    problems.append(f"{where}: topology.ovs.vlan_translate {dict(vt)} forwards only frames tagged "
                    f"{' or '.join(map(str, vt))}, but traffic.vlan is {traffic.vlan}; set "
                    f"traffic.vlan: {next(iter(vt))}")


def _check_topology_accepts(where: str, method: str, params: Any, topology: TopologySpec,
                            problems: list[str]) -> None:
    """What the topology kind refuses in this test's params (``Topology.test_refusals``: the
    TCP guests of seed 001's kinds, e.g. more pinned iperf3 processes than vCPUs), each naming
    the field and the fix."""
    cls = topology.topology_class()
    fn = getattr(cls, "test_refusals", None)
    if fn is not None:
        problems += [f"{where}.{m}" for m in fn(topology, method, params)]


def _fit_dut_to_traffic(where: str, method: str, traffic: TrafficSpec, topology: TopologySpec,
                        problems: list[str]) -> TopologySpec:
    """The topology the test runs on as its DUT adapter sizes it for the test's traffic
    (``DutAdapter.fit_traffic``: l3fwd's routes for the test's flows), or a problem naming the
    field.  TCP tests (iperf3, no generator streams) keep the topology as it is."""
    if runs_on_iperf3(method):
        return topology
    try:
        return topology.dut_class().fit_traffic(topology, traffic)
    except ValueError as e:
        problems.append(f"{where}: {e}")
        return topology


def _test_sizes(where: str, entry: dict[str, Any], spec: Optional[SuiteSpec], problems: list[str]) -> list[int]:
    sizes = spec.traffic.frame_sizes if spec else []
    if "frame_sizes" in entry:
        try:
            sizes = TrafficSpec(frame_sizes=entry["frame_sizes"]).frame_sizes
        except ValidationError as e:
            problems += format_validation_error(e, prefix=where)
    return sizes


def _test_traffic(where: str, entry: dict[str, Any], spec: Optional[SuiteSpec],
                  problems: list[str]) -> TrafficSpec:
    traffic = spec.traffic if spec else TrafficSpec()
    if "traffic" in entry:
        try:
            traffic = traffic.with_overrides(TrafficOverride.model_validate(entry["traffic"]))
        except ValidationError as e:
            problems += format_validation_error(e, prefix=f"{where}.traffic", model=TrafficOverride)
    return traffic


def _test_topology(where: str, entry: dict[str, Any], spec: Optional[SuiteSpec],
                   problems: list[str]) -> Optional[TopologySpec]:
    topology = spec.topology if spec else None
    if "topology" not in entry:
        return topology
    if not isinstance(entry["topology"], dict):
        problems.append(f"{where}.topology: must be a mapping of topology fields to change, e.g. {{kind: pvp}}")
    elif spec is not None:
        merged = merge_override(spec.topology.model_dump(), entry["topology"])
        try:
            topology = TopologySpec.model_validate(merged)
        except ValidationError as e:
            problems += format_validation_error(e, prefix=f"{where}.topology", model=TopologySpec)
    return topology


def _per_size_params(where: str, entry: dict[str, Any], sizes: list[int], params_raw: dict[str, Any],
                     model: Optional[type[BaseModel]], problems: list[str]) -> Optional[dict[int, Any]]:
    """``per_size:`` params, validated; None when the block is malformed."""
    by_size: dict[int, Any] = {}
    per_size = entry.get("per_size")
    if per_size is None:
        return by_size
    if not isinstance(per_size, dict) or not all(isinstance(v, dict) for v in per_size.values()):
        problems.append(f"{where}.per_size: must map a frame size to params, e.g. {{64: {{max_load_pct: 10}}}}")
        return None
    for size_key, over in per_size.items():
        if size_key not in sizes:
            problems.append(f"{where}.per_size.{size_key}: not one of this test's frame sizes {sizes}")
            continue
        merged = deep_merge(params_raw, over)
        try:
            by_size[size_key] = model.model_validate(merged) if model is not None else merged
        except ValidationError as e:
            problems += format_validation_error(e, prefix=f"{where}.per_size.{size_key}", model=model)
    return by_size


DURATION_FIELD = "trial_duration_s"


QUICK_MAX_REPETITIONS = 3


QUICK_MIN_WHOLE_TEST_S = 5.0


def apply_timing(raw: dict[str, Any], model: type[BaseModel], timing: ProfileSpec, force: bool) -> None:
    """Put the profile's trial duration into a method's params (in place, before validation).

    ``rfc2544`` leaves the methods' own RFC defaults (60 s throughput, 120 s latency) alone; the
    ``quick`` and ``custom`` profiles set ``trial_duration_s`` wherever the entry did not; ``--quick``
    (``force``) also overrides explicit values, drops full-length verification trials and caps
    repetitions at 3.  Nested params (e.g. latency's ``throughput:`` prerequisite) get the same.
    """
    if timing.name == "rfc2544" and not force:
        return
    fields = getattr(model, "model_fields", {})
    if DURATION_FIELD in fields and (force or DURATION_FIELD not in raw):
        raw[DURATION_FIELD] = timing.trial_s
        for f in fields:      # instants inside the trial (reset_at_s) move to its middle
            if f.endswith("_at_s") and (force or f not in raw):
                assert timing.trial_s is not None  # ProfileSpec fills it from its preset
                raw[f] = timing.trial_s / 2
    # iperf3-style whole-test durations (tcp: duration_s with omit_s warm-up): short, not below 5 s
    if "duration_s" in fields and DURATION_FIELD not in fields and (force or "duration_s" not in raw):
        raw["duration_s"] = max(QUICK_MIN_WHOLE_TEST_S, timing.trial_s or 0)
    if force:
        if raw.get("final_trial_duration_s") is not None:
            raw["final_trial_duration_s"] = None
        if "repetitions" in fields:
            reps = raw.get("repetitions", fields["repetitions"].default)
            if isinstance(reps, int) and reps > QUICK_MAX_REPETITIONS:
                raw["repetitions"] = QUICK_MAX_REPETITIONS
    for fname, finfo in fields.items():
        sub = _model_in(finfo.annotation)
        if sub is None or fname in ("goals",):
            continue
        val = raw.get(fname)
        if val is None and DURATION_FIELD in getattr(sub, "model_fields", {}):
            val = {}
        if isinstance(val, dict):
            apply_timing(val, sub, timing, force)
            raw[fname] = val


def load_suite(path: Union[str, Path], quick: bool = False, port_kind: Optional[str] = None) -> Suite:
    """The suite at ``path``; ``port_kind``: ``--port-kind`` (see :func:`override_port_kind`)."""
    data = read_yaml(path)
    if port_kind is None:
        return validate_suite(data, source=str(path), quick=quick)
    try:
        return validate_suite(override_port_kind(data, port_kind), source=str(path), quick=quick)
    except SuiteError as e:
        e.problems.append(f"(--port-kind {port_kind}: the suite's and every test's port_kind were "
                          "replaced and their pci: lists dropped; the problems above are on that kind)")
        raise SuiteError(e.problems, e.source) from None


_PORT_KIND_AXES = ("port_kind", "topology.port_kind")


def _topology_port_kind(topo: Any, kind: str) -> None:
    """In place: a ``topology:`` mapping (suite, test or variant) on port kind ``kind``."""
    if not isinstance(topo, dict):
        return
    if "port_kind" in topo:
        topo["port_kind"] = kind
    if kind != "pci":
        topo.pop("pci", None)


def override_port_kind(data: dict[str, Any], kind: str) -> dict[str, Any]:
    """``--port-kind KIND`` (issue 9 item 6: a seed suite written for NICs runs here on emulated
    ports): a copy of the suite data with ``port_kind`` replaced in the suite topology, in every
    test's ``topology:`` and in every study (a port-kind axis collapses to the one kind), and the
    ``pci:`` lists dropped (unless KIND is pci).  The result is validated as usual."""
    out = copy.deepcopy(data)
    if not isinstance(out.get("topology"), dict):
        out["topology"] = {}
    out["topology"]["port_kind"] = kind
    _topology_port_kind(out["topology"], kind)
    for entry in out.get("tests") or []:
        if not isinstance(entry, dict):
            continue
        _topology_port_kind(entry.get("topology"), kind)
        study = entry.get("study")
        if isinstance(study, dict):
            _study_port_kind(study, kind)
    return out


def _study_port_kind(study: dict[str, Any], kind: str) -> None:
    axes = study.get("axes")
    if not isinstance(axes, dict):
        return
    for name, spec in list(axes.items()):
        if name in _PORT_KIND_AXES and isinstance(spec, list):
            axes[name] = [kind]
        elif name == "topology.pci" and kind != "pci":
            del axes[name]
        elif isinstance(spec, dict):
            for over in spec.values():
                if isinstance(over, dict):
                    _topology_port_kind(over.get("topology"), kind)
                    for k in _PORT_KIND_AXES:
                        if k in over:
                            over[k] = kind
                    if kind != "pci":
                        over.pop("topology.pci", None)
    for sel in [study.get("baseline")] + list(study.get("only") or []):
        if isinstance(sel, dict):
            for k in _PORT_KIND_AXES:
                if k in sel:
                    sel[k] = kind
            if kind != "pci":
                sel.pop("topology.pci", None)
    only = study.get("only")
    if isinstance(only, list):       # units that differed only in port kind are one now
        study["only"] = [sel for i, sel in enumerate(only) if sel not in only[:i]]


def find_suite(name: str) -> Path:
    """A path, or the name of a shipped suite (``quick``, ``sim-tour``, ``suites/quick.yaml``)."""
    p = Path(name)
    if p.exists():
        return p
    stem = p.name if p.suffix in (".yaml", ".yml") else p.name + ".yaml"
    for d in shipped_suite_dirs():
        if (d / stem).exists():
            return d / stem
    return p


def shipped_suite_dirs() -> list[Path]:
    here = Path(__file__).resolve().parent
    dirs = [here.parent.parent / "suites", here / "suites"]      # a checkout's suites/, else the installed package's
    env = os.environ.get("NFVPERF_SUITES")
    if env:
        dirs.insert(0, Path(env))
    return [d for d in dirs if d.is_dir()]
