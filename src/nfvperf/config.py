"""The suite schema: what a suite YAML may say, validated before anything runs.

A suite names a topology, the offered traffic, a timing profile and a list of tests.  Each test
entry is ``{method: <name in nfvperf.methods.REGISTRY>, name?: str, frame_sizes?: [...],
traffic?: {...}, topology?: {...}, per_size?: {size: {...}}, ...method params}`` (``traffic``/
``topology`` change the suite's values for that test only, e.g. ``topology: {kind: pvp}``;
``per_size`` changes method params at one frame size, e.g. ``{64: {max_load_pct: 10}}``); the method params are
validated by that method's own pydantic model.  ``suite_load.load_suite`` collects *every* problem and raises one
:class:`SuiteError` whose messages each name the full field path (``tests[1].search.loss_ratio``) and what is allowed.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from nfvperf.methods import REGISTRY
from nfvperf.study import DEFAULT_ROUND_TRIAL_S, MAX_ROUNDS, round_settings
from nfvperf.tg.sim_model import check_overrides
from nfvperf.tg.sim_noise import HostNoiseParams
from nfvperf.topo.spec import TopologySpec
from nfvperf.trial import TrafficProfile
from nfvperf.units import RFC2544_FRAME_SIZES_B
from nfvperf.validation import deep_merge, dict_diff

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
            return f"{bps / mult:g}{unit}"
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
        return ProfileSpec(name=self.profile) if isinstance(self.profile, str) else self.profile


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
        return p.model_dump(mode="json") if hasattr(p, "model_dump") else dict(p or {})


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


def _repeatable(method: str) -> bool:
    """Methods whose result is a searched rate (``headline=RATE``) can be repeated (an unknown
    method: no; the registry check names it)."""
    info = REGISTRY.get(method)
    return info is not None and info.is_rate


def _in_rounds(method: str) -> bool:
    """A study of ``method`` can run in interleaved rounds (the method declares ``rounds``)."""
    info = REGISTRY.get(method)
    return info is not None and info.rounds


def topology_overrides(spec: TopologySpec, base: TopologySpec) -> dict[str, Any]:
    """The fields of a test's topology that differ from the suite's (JSON), e.g. ``{"kind": "pvp"}``."""
    return dict_diff(spec.model_dump(mode="json"), base.model_dump(mode="json"))


