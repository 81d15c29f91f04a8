"""The suite schema: what a suite YAML may say, validated before anything runs.

A suite names a topology, the offered traffic, a timing profile and a list of tests.  Each test
entry is ``{method: <name in nfvperf.methods.REGISTRY>, name?: str, frame_sizes?: [...],
traffic?: {...}, topology?: {...}, per_size?: {size: {...}}, ...method params}`` (``traffic``/
``topology`` change the suite's values for that test only, e.g. ``topology: {kind: pvp}``;
``per_size`` changes method params at one frame size, e.g. ``{64: {max_load_pct: 10}}``); the method params are
validated by that method's own pydantic model.  :func:`load_suite` collects *every* problem and raises one
:class:`SuiteError` whose messages each name the full field path (``tests[1].search.loss_ratio``) and what is allowed.
"""
from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from nfvperf.study import expand as expand_study
from nfvperf.topo.spec import TopologySpec
from nfvperf.validation import _model_in, deep_merge, dict_diff, format_validation_error
from nfvperf.trial import TrafficProfile
from nfvperf.units import RFC2544_FRAME_SIZES_B
from nfvperf.tg.sim_noise import HostNoiseParams
from nfvperf.tg.sim_model import check_overrides
from nfvperf.study import DEFAULT_ROUND_TRIAL_S, MAX_ROUNDS, round_settings
from nfvperf.methods import REGISTRY
from nfvperf.topo.spec import merge_override
from nfvperf.methods import is_sizeless, runs_on_iperf3
from nfvperf.topo.ports import port_kind_class
import copy


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --------------------------------------------------------------------------- link speed

_SPEED_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(?:b(?:ps|it/s)?|bit)?\s*$", re.I)
_SPEED_MULT = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}


def parse_link_speed(value: Union[str, int, float]) -> float:
    """``"10G"``, ``"25Gbps"``, ``"100M"``, ``10e9`` -> bits per second (L1 line rate per port)."""
    if isinstance(value, bool):
        raise ValueError("link speed must be like '10G', '25G', '100G' or a number of bits/s")
    if isinstance(value, (int, float)):
        bps = float(value)
    else:
        m = _SPEED_RE.match(str(value))
        if not m:
            raise ValueError(f"cannot read link speed {value!r}; use e.g. '1G', '10G', '25G', '100G' "
                             "or a number of bits/s")
        bps = float(m.group(1)) * _SPEED_MULT[m.group(2).lower()]
    if not (1e6 <= bps <= 1.6e12):
        raise ValueError(f"link speed {bps:g} bit/s is outside 1 Mbit/s .. 1.6 Tbit/s")
    return bps


def format_link_speed(bps: float) -> str:
    for unit, mult in (("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if bps >= mult:
            v = bps / mult
            return f"{v:g}{unit}"
    return f"{bps:g}"


# --------------------------------------------------------------------------- traffic

class ImixEntry(_Strict):
    size_b: int = Field(..., ge=60, le=16128, description="L2 frame size incl. FCS")
    weight: int = Field(..., ge=1, le=1_000_000)


#: The traffic defaults live in one place, the measurer boundary's TrafficProfile; the suite's
#: ``traffic:`` fields take theirs from it.
_DEFAULT = TrafficProfile()


class TrafficSpec(_Strict):
    """The suite's ``traffic:`` (and, with a test's ``traffic:`` overrides applied, one test's:
    ``TestConfig.traffic``).  :meth:`profile` turns it into the per-unit TrafficProfile."""

    frame_sizes: list[int] = Field(default_factory=lambda: list(RFC2544_FRAME_SIZES_B),
                                   description="L2 frame sizes incl. FCS (inner size for VXLAN)")
    imix: Optional[list[ImixEntry]] = Field(None, description="run one IMIX profile instead of the sizes")
    flows_per_port: int = Field(_DEFAULT.flows_per_port, ge=1, le=16_777_216)
    bidirectional: bool = _DEFAULT.bidirectional
    link_speed: Union[str, float] = Field(format_link_speed(_DEFAULT.link_speed_bps),
                                          description="per-port line rate: '10G', '25G', or bit/s")
    vxlan: bool = _DEFAULT.vxlan
    vlan: Optional[int] = Field(_DEFAULT.vlan, ge=1, le=4094)
    ip_version: Literal[4, 6] = _DEFAULT.ip_version
    rate_unit: Literal["pps", "l1_mbps", "l2_mbps", "percent"] = Field(
        "pps", description="unit of rates in the run's headline (history), in compare and in a study's first "
        "pivot (the one with the ratios, and its plot): pps | l1_mbps | l2_mbps | percent (% line rate, L1)")
    latency: bool = _DEFAULT.latency

    @field_validator("frame_sizes")
    @classmethod
    def _sizes(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("give at least one frame size (RFC 2544 §9 suggests 64..1518)")
        bad = [s for s in v if not 60 <= s <= 16128]
        if bad:
            raise ValueError(f"frame sizes {bad} out of range; allowed 60..16128 B (L2 incl. FCS)")
        if len(set(v)) != len(v):
            raise ValueError("frame sizes repeat; list each size once")
        return v

    @field_validator("link_speed")
    @classmethod
    def _speed(cls, v: Union[str, float]) -> Union[str, float]:
        parse_link_speed(v)
        return v

    @property
    def link_speed_bps(self) -> float:
        return parse_link_speed(self.link_speed)

    def with_overrides(self, over: "TrafficOverride") -> "TrafficSpec":
        """This traffic with the fields ``over`` sets replaced (a test's ``traffic:``)."""
        return self.model_copy(update={k: getattr(over, k) for k in over.model_fields_set})

    def profile(self, size: Optional[int], timing: "ProfileSpec") -> TrafficProfile:
        """The TrafficProfile of one test unit: ``size`` B frames (None: IMIX / size-less, the
        profile's default size), learning/drain/settle from the timing profile."""
        kw: dict[str, Any] = {} if size is None else {"frame_size_b": int(size)}
        return TrafficProfile(
            imix=[(e.size_b, e.weight) for e in self.imix] if self.imix else None,
            flows_per_port=self.flows_per_port, bidirectional=self.bidirectional,
            link_speed_bps=self.link_speed_bps, vxlan=self.vxlan, vlan=self.vlan,
            ip_version=self.ip_version, latency=self.latency,
            learning=(timing.learning_s or 0) > 0, learning_s=float(timing.learning_s or 0.0),
            drain_s=float(timing.drain_s or 0.0), settle_s=float(timing.settle_s or 0.0), **kw)

    # read access by key, as the per-test traffic dict this model replaced (``t.traffic["vxlan"]``,
    # ``units.directions(t.traffic, ports)``)
    def __getitem__(self, key: str) -> Any:
        if key not in type(self).model_fields:
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in type(self).model_fields else default


class TrafficOverride(_Strict):
    """Per-test changes to the suite's traffic (e.g. 1 vs 1k flows per port)."""

    flows_per_port: Optional[int] = Field(None, ge=1, le=16_777_216)
    bidirectional: Optional[bool] = None
    vxlan: Optional[bool] = None
    vlan: Optional[int] = Field(None, ge=1, le=4094)
    ip_version: Optional[Literal[4, 6]] = None
    imix: Optional[list[ImixEntry]] = None
    latency: Optional[bool] = None
    link_speed: Optional[Union[str, float]] = Field(None, description="per-port line rate of this test: "
                                                    "'10G', '40G', or bit/s")

    @field_validator("link_speed")
    @classmethod
    def _speed(cls, v: Optional[Union[str, float]]) -> Optional[Union[str, float]]:
        if v is not None:
            parse_link_speed(v)
        return v


# --------------------------------------------------------------------------- timing profile

PROFILE_PRESETS: dict[str, dict[str, float]] = {
    # RFC 2544 §23/§24: >=60 s trials, 2 s drain, >=5 s to restabilise, 2 s after learning frames
    "rfc2544": {"trial_s": 60.0, "drain_s": 2.0, "settle_s": 5.0, "learning_s": 2.0},
    # short trials for a first look and for the demo; NOT RFC 2544 conformant (reported as such)
    "quick": {"trial_s": 1.0, "drain_s": 0.2, "settle_s": 0.0, "learning_s": 0.1},
}


class ProfileSpec(_Strict):
    name: Literal["rfc2544", "quick", "custom"] = "rfc2544"
    trial_s: Optional[float] = Field(None, gt=0, le=86400)
    drain_s: Optional[float] = Field(None, ge=0, le=600)
    settle_s: Optional[float] = Field(None, ge=0, le=600)
    learning_s: Optional[float] = Field(None, ge=0, le=600)

    @model_validator(mode="after")
    def _fill(self) -> "ProfileSpec":
        base = PROFILE_PRESETS.get(self.name, PROFILE_PRESETS["rfc2544"])
        for k, v in base.items():
            if getattr(self, k) is None:
                object.__setattr__(self, k, v)
        return self

    @property
    def rfc2544_conformant(self) -> bool:
        return (self.trial_s or 0) >= 60 and (self.drain_s or 0) >= 2 and (self.settle_s or 0) >= 5

    def deviations(self) -> list[str]:
        out = []
        if (self.trial_s or 0) < 60:
            out.append(f"trial duration {self.trial_s:g} s < 60 s (RFC 2544 §24)")
        if (self.drain_s or 0) < 2:
            out.append(f"drain {self.drain_s:g} s < 2 s (RFC 2544 §23)")
        if (self.settle_s or 0) < 5:
            out.append(f"settle {self.settle_s:g} s < 5 s (RFC 2544 §23)")
        return out


# --------------------------------------------------------------------------- sim

class SimSpec(_Strict):
    """The modelled DUT behind ``--tg sim`` (nfvperf.tg.sim.SimMeasurer); unset keys keep its defaults."""

    capacity_pps: Optional[Union[float, dict[int, float]]] = Field(
        None, description="zero-loss capacity per interface in fps, or {frame size B: fps} (interpolated)")
    loss_model: Optional[Literal["threshold", "poisson", "spikes"]] = None
    seed: Optional[int] = Field(None, ge=0)
    noise_pps: Optional[float] = Field(None, ge=0)
    buffer_frames: Optional[int] = Field(None, ge=0)
    outage_s: Optional[float] = Field(None, ge=0)
    recovery_s: Optional[float] = Field(None, ge=0)
    base_latency_ns: Optional[float] = Field(None, ge=0)
    jitter_ns: Optional[float] = Field(None, ge=0)
    queue_scale_ns: Optional[float] = Field(None, ge=0)
    latency_samples: Optional[int] = Field(None, ge=1, le=1_000_000)
    mac_table_size: Optional[int] = Field(None, ge=1)
    learning_rate_pps: Optional[float] = Field(None, gt=0)
    tcp_capacity_bps: Optional[float] = Field(None, gt=0, description="fix the TCP goodput cap "
                                              "(default: the model's streams/TSO/multi-queue/link bounds)")
    model: dict[str, Any] = Field(default_factory=dict, description="parameters of the configuration "
                                  "model (nfvperf.tg.sim_model.SimModelParams, docs/sim.md), e.g. "
                                  "{base_ns: 100, ht_gain: 1.2}; {<dut or kind>: {...}} for one only")
    invalid_rate: Optional[float] = Field(None, ge=0, lt=1)
    host_noise: Optional[Union[bool, dict[str, Any]]] = Field(
        None, description="a shared host whose vCPUs slow to about half speed for seconds, one at a time: "
        "true for the defaults, or {slow_factor, mean_slow_s, mean_steady_s, cpus, dut_cpu, jitter, seed} "
        "(nfvperf.tg.sim_noise.HostNoiseParams, docs/sim.md)")

    @field_validator("host_noise")
    @classmethod
    def _host_noise(cls, v: Any) -> Any:
        HostNoiseParams.from_setting(v, "")     # raises naming the field and the fix
        return v
    pace_s: float = Field(0.0, ge=0, le=60, description="wall seconds to wait per trial (the model itself "
                          "never sleeps); use it to watch the progress bar or to test Ctrl-C")
    options: dict[str, Any] = Field(default_factory=dict, description="more SimMeasurer keywords, passed as is")

    @field_validator("capacity_pps")
    @classmethod
    def _cap(cls, v: Any) -> Any:
        if isinstance(v, dict):
            if not v:
                raise ValueError("give at least one {frame size: fps} pair")
            bad = [k for k, x in v.items() if x <= 0 or not 60 <= k <= 16128]
            if bad:
                raise ValueError(f"sizes {bad}: need 60..16128 B and fps > 0")
        elif v is not None and v <= 0:
            raise ValueError("capacity must be > 0 fps")
        return v

    @field_validator("model")
    @classmethod
    def _model(cls, v: dict[str, Any]) -> dict[str, Any]:
        problems = check_overrides(v, "model")
        if problems:
            raise ValueError("; ".join(problems))
        return v

    def with_test(self, over: dict[str, Any]) -> "SimSpec":
        """This block with a test's ``sim:`` on top (``model:`` and ``options:`` merged key by key)."""
        return SimSpec.model_validate(deep_merge(self.model_dump(exclude_unset=True), over))

    def measurer_kwargs(self) -> dict[str, Any]:
        kw = {k: v for k, v in self.model_dump(exclude={"pace_s", "options"}).items()
              if v is not None and v != {}}
        kw.update(self.options)
        return kw


# --------------------------------------------------------------------------- harness ceiling

class CeilingSpec(_Strict):
    """The harness ceiling (``--tg tgen`` runs): tgen through testpmd io on the run's path,
    measured before the first topology group (or taken from the cache), stored with the run."""

    enabled: bool = Field(True, description="measure (or reuse) the harness ceiling; --no-ceiling turns it off")
    trial_s: float = Field(0.5, gt=0, le=10, description="trial duration of the ceiling search")
    resolution: float = Field(0.03, gt=0, lt=0.5, description="relative width at which the search stops")
    max_age_h: float = Field(24.0, ge=0, description="reuse a cached ceiling up to this age (hours)")
    latency_net_of_harness: bool = Field(False, description="report latency net of the generator's "
                                         "self-latency on the harness path")


# --------------------------------------------------------------------------- suite

#: the largest ``repeat`` a suite, a test or ``--repeat`` may ask for
MAX_REPEAT = 100


class SuiteSpec(_Strict):
    name: str = Field(..., min_length=1, max_length=120)
    description: str = ""
    topology: TopologySpec = Field(default_factory=TopologySpec)
    traffic: TrafficSpec = Field(default_factory=TrafficSpec)
    profile: Union[Literal["rfc2544", "quick"], ProfileSpec] = "rfc2544"
    sim: SimSpec = Field(default_factory=SimSpec)
    ceiling: CeilingSpec = Field(default_factory=CeilingSpec)
    tests: list[dict[str, Any]] = Field(..., min_length=1)
    store: Optional[str] = Field(None, description="SQLAlchemy URL of the results store")
    output: Optional[str] = Field(None, description="directory for run directories and reports")
    repeat: int = Field(1, ge=1, le=MAX_REPEAT, description="run each search (rate method: throughput, "
                        "rfc2889_forwarding) this many times; the result is the median, with the spread")
    rounds: Optional[int] = Field(None, ge=2, le=100, description="every study without its own rounds: "
                                  "runs its units in this many interleaved rounds (issue 16)")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("suite name must not be blank")
        return v

    @property
    def timing(self) -> ProfileSpec:
        if isinstance(self.profile, str):
            return ProfileSpec(name=self.profile)
        return self.profile


@dataclass
class TestConfig:
    """One validated test entry."""

    index: int
    method: str
    name: str
    params: Any                       # the method's params model instance (or dict if no REGISTRY)
    frame_sizes: list[int]
    traffic: TrafficSpec              # the suite traffic with the entry's overrides and sizes applied
    topology: Optional[TopologySpec] = None   # the suite topology with the entry's overrides applied
    raw: dict[str, Any] = field(default_factory=dict)
    params_by_size: dict[int, Any] = field(default_factory=dict)   # ``per_size:`` overrides, validated
    repeat: int = 1                   # repetitions of the search (rate methods); result = median
    # a unit of a study (issue 9): {"name": study, "axes": {axis: value}, "baseline": bool}
    study: Optional[dict[str, Any]] = None
    sim: Optional["SimSpec"] = None   # the suite's sim: with the entry's sim: on top (--tg sim)

    def params_for(self, size: Optional[int]) -> Any:
        return self.params_by_size.get(size, self.params) if size is not None else self.params

    def params_dict(self, size: Optional[int] = None) -> dict[str, Any]:
        p = self.params_for(size)
        if hasattr(p, "model_dump"):
            return p.model_dump(mode="json")
        return dict(p or {})


@dataclass
class Suite:
    spec: SuiteSpec
    tests: list[TestConfig]
    source: Optional[Path] = None
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def timing(self) -> ProfileSpec:
        return self.spec.timing

    def to_dict(self) -> dict[str, Any]:
        d = self.spec.model_dump(mode="json")
        d["profile"] = self.timing.model_dump(mode="json")
        return d

    def set_repeat(self, n: int) -> None:
        """``nfvperf run --repeat N``: every rate test runs its search ``n`` times (overrides the
        suite's and the tests' ``repeat:``)."""
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_REPEAT:
            raise SuiteError([f"--repeat: must be a whole number 1..{MAX_REPEAT}, got {n!r}"])
        self.spec.repeat = n
        for t in self.tests:
            if _repeatable(t.method):
                t.repeat = n

    def set_rounds(self, n: int) -> None:
        """``nfvperf run --rounds N``: every study runs its units in ``n`` interleaved rounds
        (overrides the suite's and the studies' ``rounds:``; their other round settings stay)."""
        if isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= MAX_ROUNDS:
            raise SuiteError([f"--rounds: must be a whole number 2..{MAX_ROUNDS} (one round is the "
                              f"sequential run; 6 or more give a 95 % interval), got {n!r}"])
        studies = [t for t in self.tests if t.study]
        if not studies:
            raise SuiteError(["--rounds: the suite has no study (rounds interleave a study's units; "
                              "add study: {axes: ...} to a test)"])
        bad = sorted({(t.study or {})["name"] for t in studies if not _in_rounds(t.method)})
        if bad:
            raise SuiteError([f"--rounds: study {', '.join(bad)} measures a method other than throughput; "
                              "rounds measure capacity figures (mrr, pdr, ndr) of a throughput study"])
        self.spec.rounds = n
        settings: dict[str, dict[str, Any]] = {}
        for t in studies:
            st: dict[str, Any] = t.study or {}
            old = st.get("rounds") or {}
            new = settings.setdefault(st["name"], round_settings(
                n, old.get("metrics"), old.get("seed"), old.get("round_trial_s", DEFAULT_ROUND_TRIAL_S),
                old.get("overload_pct", 100.0)))
            t.study = dict(st, rounds=new)

    def select_tests(self, patterns: list[str]) -> None:
        """``nfvperf run/validate --test NAME`` (repeatable, shell-style globs): keep only the tests
        whose name, or whose study's name (every unit of that study), matches a pattern; a pattern
        that matches nothing is refused, naming the tests there are."""
        def hit(t: TestConfig, pat: str) -> bool:
            names = [t.name] + ([t.study["name"]] if t.study else [])
            return any(n == pat or fnmatch.fnmatchcase(n, pat) for n in names)

        missing = [p for p in patterns if not any(hit(t, p) for t in self.tests)]
        if missing:
            entries = list(dict.fromkeys((t.study or {}).get("name", t.name) for t in self.tests))
            raise SuiteError([f"--test {p}: no test of suite {self.name!r} is named so; its tests: "
                              + ", ".join(entries) for p in missing])
        self.tests = [t for t in self.tests if any(hit(t, p) for p in patterns)]

    def traffic_profile(self, test: TestConfig, size: Optional[int]) -> TrafficProfile:
        """The TrafficProfile of one (test, frame size) unit."""
        return test.traffic.profile(size, self.timing)


class SuiteError(ValueError):
    """A suite that cannot run; ``problems`` holds one message per problem."""

    def __init__(self, problems: list[str], source: Optional[str] = None):
        self.problems = problems
        self.source = source
        head = f"{source}: " if source else ""
        super().__init__(head + f"{len(problems)} problem(s) in the suite:\n  " + "\n  ".join(problems))


# --------------------------------------------------------------------------- error formatting

# --------------------------------------------------------------------------- loading

ENGINE_TEST_KEYS = ("method", "name", "frame_sizes", "traffic", "topology", "per_size", "repeat", "sim", "study")


def _repeatable(method: str) -> bool:
    """Methods whose result is a searched rate (``headline=RATE``) can be repeated (an unknown
    method: no; the registry check names it)."""
    info = REGISTRY.get(method)
    return info is not None and info.is_rate


def _in_rounds(method: str) -> bool:
    """A study of ``method`` can run in interleaved rounds (the method declares ``rounds``)."""
    info = REGISTRY.get(method)
    return info is not None and info.rounds


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


def method_registry() -> dict[str, Any]:
    """A copy of ``nfvperf.methods.REGISTRY``."""
    return dict(REGISTRY)


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
    registry = method_registry()
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



def topology_overrides(spec: TopologySpec, base: TopologySpec) -> dict[str, Any]:
    """The fields of a test's topology that differ from the suite's (JSON), e.g. ``{"kind": "pvp"}``."""
    return dict_diff(spec.model_dump(mode="json"), base.model_dump(mode="json"))


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
        dedup: list[Any] = []
        for sel in only:
            if sel not in dedup:
                dedup.append(sel)
        study["only"] = dedup


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
