"""What a method's result is to the rest of nfvperf (INTERFACES §4): :class:`MethodResult`.

Each method module declares its result as a frozen dataclass over :class:`MethodResult` and names it in
``MethodInfo(result=...)``.  The run stores ``to_dict()``; the report, compare and the run log read
a stored dict back with ``from_dict()`` and ask the result for what they show: the rate per
interface (:meth:`MethodResult.rate_pps`), the main scalar (:meth:`MethodResult.metric`, declared
as :data:`MethodResult.METRIC`), the run-log line (:meth:`MethodResult.summary`), latency per load
point, and the method's own table (:data:`MethodResult.TABLE`, :meth:`MethodResult.table_row`).
Nothing outside ``nfvperf.methods`` branches on a method's name to read its dict.

The stored JSON is the contract: ``from_dict(d).to_dict() == d`` for every stored ``d`` — keys the
class does not declare (the runner's ``repeat``, fields of older versions) are kept aside and
written back; declared fields a stored dict lacks (results stored before the field existed) are
left out again.  The small readers here (``num``, ``find_key``, ``fmt_num``...) are the tolerant
ones the report has always used: a result missing a field reads as "not available".
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar, Iterable, Iterator, Mapping, Optional, TypeVar

from nfvperf import units
from nfvperf.trial import TrafficProfile

#: a stored result: JSON (str keys; values str, number, bool, None, lists and dicts of those)
Stored = dict[str, object]
R = TypeVar("R", bound="MethodResult")

# in order of preference: what "the" result of a rate test is, in frames/s per interface
HEADLINE_KEYS = ("throughput_pps", "rlb_pps", "lower_bound_pps", "conditional_throughput_pps",
                 "ndr_pps", "load_pps", "forwarding_rate_pps", "max_forwarding_rate_pps", "rate_pps")


# --------------------------------------------------------------------------- tolerant readers

def num(v: object) -> Optional[float]:
    """A finite number as float, else None (bools are not numbers here)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    return None


def walk(obj: object, depth: int = 0) -> Iterator[Stored]:
    """Every dict inside ``obj`` (the outer dicts first)."""
    return walk_skip(obj, (), depth)


def walk_skip(obj: object, skip: tuple[str, ...], depth: int = 0) -> Iterator[Stored]:
    """Every dict inside ``obj``, not descending into the keys ``skip``."""
    if depth > 8:
        return
    if isinstance(obj, dict):
        yield obj
        for k, v in obj.items():
            if k not in skip and isinstance(v, (dict, list)):
                yield from walk_skip(v, skip, depth + 1)
    elif isinstance(obj, list):
        for v in obj:
            if isinstance(v, (dict, list)):
                yield from walk_skip(v, skip, depth + 1)


def find_key(data: object, keys: Iterable[str], skip: tuple[str, ...] = ("trials", "histogram")) -> Optional[float]:
    """The first finite number stored under one of ``keys`` (in their order) anywhere in ``data``."""
    for key in tuple(keys):
        for d in walk_skip(data, skip):
            v = num(d.get(key))
            if v is not None:
                return v
    return None


def dicts(v: object) -> list[Stored]:
    """``v`` as a list of dicts (other items and non-lists dropped)."""
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []


def fmt_num(v: object, digits: int = 2) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if v != 0 and abs(v) < 0.01:
            return f"{v:.3g}"
        return f"{v:,.{digits}f}"
    return str(v)


def fmt_ms(seconds: object) -> str:
    v = num(seconds)
    return "—" if v is None else f"{v * 1e3:,.3f}"


def repeat_of(data: object) -> Optional[Stored]:
    """The ``repeat`` summary of a result whose search ran several times (n ≥ 2), else None."""
    rep = data.get("repeat") if isinstance(data, dict) else None
    return rep if isinstance(rep, dict) and (num(rep.get("n")) or 0) >= 2 else None


def goals_of(data: object) -> list[Stored]:
    """The per-goal results (MLRsearch) of a throughput result, wherever they sit."""
    for d in walk_skip(data, ("trials", "histogram")):
        g = d.get("goals")
        if isinstance(g, list) and g and isinstance(g[0], dict):
            return dicts(g)
    return []


def headline_pps(data: object) -> Optional[float]:
    """A rate result's main rate per interface: the median over repetitions (``repeat``), else
    the first goal's RLB, else the first of :data:`HEADLINE_KEYS` found."""
    rep = repeat_of(data)
    if rep is not None:
        return num(rep.get("median_pps"))
    goals = goals_of(data)
    if goals:
        v = num(goals[0].get("lower_bound_pps")) or num(goals[0].get("rlb_pps"))
        if v is not None:
            return v
    return find_key(data, HEADLINE_KEYS)


def latency_of(data: object) -> Optional[Stored]:
    """A LatencySummary dict (min_ns/avg_ns/max_ns, percentiles_ns, histogram) found in data."""
    best: Optional[Stored] = None
    for d in walk_skip(data, ("trials", "streams")):
        if "avg_ns" in d and "min_ns" in d and "max_ns" in d:
            if best is None or _count(d) > _count(best) or (d.get("percentiles_ns") and not best.get("percentiles_ns")):
                best = d
    return best


def _count(d: Stored) -> float:
    return num(d.get("count")) or 0.0


def scalars(data: Mapping[str, object], limit: int = 40) -> list[tuple[str, object]]:
    """Top-level (and one level nested) scalar fields, for results without a summary of their own."""
    out: list[tuple[str, object]] = []
    for k, v in data.items():
        if isinstance(v, (int, float, str, bool)) or v is None:
            if v is not None and v != "":
                out.append((k, v))
        elif isinstance(v, dict) and k not in ("params", "profile", "latency", "histogram", "throughput_result"):
            for k2, v2 in v.items():
                if isinstance(v2, (int, float, str, bool)) and v2 != "":
                    out.append((f"{k}.{k2}", v2))
        if len(out) >= limit:
            break
    return out


def spread_text(rep: Mapping[str, object]) -> str:
    """``median of 3: min 1,000 – max 1,100 fps (range 9.52 %)``."""
    rr = num(rep.get("relative_range"))
    return (f"median of {int(num(rep.get('n')) or 0)}: min {fmt_num(num(rep.get('min_pps')), 0)} – max "
            f"{fmt_num(num(rep.get('max_pps')), 0)} fps"
            + (f" (range {100 * rr:.2f} %)" if rr is not None else ""))


# --------------------------------------------------------------------------- declarations

@dataclass(frozen=True)
class MethodMetric:
    """The main scalar of a result that is not a rate: stored under ``key``, shown as
    ``label`` in ``unit`` (stored value × ``scale``).  A study pivots it as ``study_key`` titled
    ``study_title`` (default: ``value``, "label (unit)") in ``study_unit`` (the value in ``unit``
    ÷ ``study_divisor``) with ``digits`` decimals."""

    key: str
    label: str
    scale: float
    unit: str
    study_key: str = "value"
    study_title: str = ""
    study_unit: str = ""
    study_divisor: float = 1.0
    digits: int = 3

    @property
    def title(self) -> str:
        return self.study_title or (f"{self.label} ({self.unit})" if self.unit else self.label)

    @property
    def shown_unit(self) -> str:
        return self.study_unit or self.unit


@dataclass(frozen=True)
class ResultTable:
    """A method's own report table: one row per test (``table_row``); ``first`` names the first
    column ("Frame B" or "Test"), the cell a test without a result still shows."""

    title: str
    note: str
    columns: tuple[str, ...]
    first: str = "Frame B"


@dataclass(frozen=True)
class Summary:
    """The run log's line for a result and its headline rate per interface (None: not a rate)."""

    value_pps: Optional[float]
    text: str

    def to_dict(self) -> dict[str, object]:
        return {"value_pps": self.value_pps, "text": self.text}


# --------------------------------------------------------------------------- the base

class MethodResult:
    """Base of every method's result dataclass (see the module docstring)."""

    #: the main scalar of a result that is not a rate (None: a rate, or no single scalar)
    METRIC: ClassVar[Optional[MethodMetric]] = None
    #: the method's own report table (None: the generic tables: throughput, latency, loss, scalars)
    TABLE: ClassVar[Optional[ResultTable]] = None
    #: the result is latency per load point (latency tables, plots, "latency at Throughput")
    LATENCY: ClassVar[bool] = False
    #: the result is frame loss per load step (the frame-loss-rate table; loss-vs-load plot)
    LOSS_STEPS: ClassVar[bool] = False
    #: the study's row axis when the study varies it (e.g. TCP: ``streams``)
    STUDY_ROW_AXIS: ClassVar[Optional[str]] = None

    # what from_dict read: the stored dict, and the declared fields it lacked
    _stored: Optional[Stored] = None
    _absent: frozenset[str] = frozenset()

    # ---- the stored form

    @classmethod
    def from_dict(cls: type[R], data: Mapping[str, object]) -> R:
        """The result a stored dict holds (any dict: unknown keys kept, missing fields None)."""
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"{cls.__name__} is not a dataclass: a method result must be one")
        data = dict(data) if isinstance(data, Mapping) else {}
        names = [f.name for f in dataclasses.fields(cls) if f.init]
        absent = frozenset(n for n in names if n not in data)
        obj = cls(**{n: data.get(n) for n in names})
        object.__setattr__(obj, "_stored", data)      # what it was read from (the classes are frozen)
        object.__setattr__(obj, "_absent", absent)
        return obj

    def to_dict(self) -> Stored:
        """The stored form (JSON: inf/nan as None); read back by :meth:`from_dict`."""
        if not dataclasses.is_dataclass(self):
            raise TypeError(f"{type(self).__name__} is not a dataclass: a method result must be one")
        d = _clean({f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                    if f.name not in self._absent})
        out: Stored = d if isinstance(d, dict) else {}
        if self._stored is not None:       # the stored key order, and keys this class does not declare
            ordered = {k: out.pop(k) if k in out else _clean(v) for k, v in self._stored.items()}
            ordered.update(out)
            return ordered
        return out

    def stored(self) -> Stored:
        """The stored dict (as read), or :meth:`to_dict` of a result made by a run."""
        return self._stored if self._stored is not None else self.to_dict()

    # ---- what the report reads

    def rate_pps(self) -> Optional[float]:
        """The result as a rate in fps per interface (None: not a rate method)."""
        return None

    def zero_loss_throughput(self) -> Optional[float]:
        """The RFC 2544 Throughput this result measured (zero loss, zero exceed ratio), which a
        later unit of the run that needs one may reuse; None: the result is not one."""
        return None

    def repeat_summary(self) -> Optional[Stored]:
        """The runner's summary of a search repeated n ≥ 2 times, else None."""
        return repeat_of(self.stored())

    def goal_results(self) -> list[Stored]:
        return goals_of(self.stored())

    def main_metric(self) -> Optional[tuple[str, float, str]]:
        """(label, value in its unit, unit) of the main scalar (:data:`METRIC`), else None."""
        m = self.METRIC
        if m is None:
            return None
        data = self.stored()
        v = num(data.get(m.key))
        if v is None:
            v = find_key(data, (m.key,), skip=("trials", "histogram", "throughput_result"))
        return None if v is None else (m.label, v * m.scale, m.unit)

    def latency_points(self) -> list[Stored]:
        """Latency per load point (fraction, load_pps, min/avg/max_ns, percentiles_ns...): one
        point from any latency summary in the result unless the method measures points."""
        data = self.stored()
        lat = latency_of(data)
        return [dict(lat, fraction=None, load_pps=find_key(data, ("load_pps",)))] if lat else []

    def latency_at_throughput(self) -> Optional[Stored]:
        """The latency point at 100 % of Throughput (else the highest load) that has samples."""
        pts = [p for p in self.latency_points() if p.get("count") or p.get("avg_ns")]
        if not pts:
            return None
        for p in pts:
            if p.get("fraction") == 1.0:
                return p
        return max(pts, key=lambda p: num(p.get("load_pps")) or 0.0)

    def summary_text(self) -> Optional[str]:
        """The method's own run-log line (None: the generic one: rate, or scalars)."""
        mm = self.main_metric()
        return f"{mm[0]} {fmt_num(mm[1], 3 if mm[2] == 'ms' else 0)} {mm[2]}" if mm else None

    def summary(self, profile: TrafficProfile, directions: int) -> Summary:
        """One line for the run log and the headline value per interface."""
        pps = self.rate_pps()
        own = self.summary_text()
        if own is not None:
            return Summary(pps, own)
        data = self.stored()
        if pps is not None and pps <= 0:
            rub = find_key(data, ("upper_bound_pps",))
            return Summary(pps, "no loss-free load found"
                           + (f" (lowest lossy load {rub:,.0f} fps per interface)" if rub else ""))
        if pps is not None:
            size = profile.wire_size_b
            text = (f"{pps:,.0f} fps per interface ({units.pct_line_rate(pps, size, profile.link_speed_bps):.2f} "
                    f"% line rate L1, L1 {units.l1_bps(pps, size) / 1e6:,.1f} Mbps, "
                    f"L2 {units.l2_bps(pps, size) / 1e6:,.1f} Mbps); "
                    f"aggregate {pps * directions:,.0f} fps over {directions} interface(s)")
            rep = self.repeat_summary()
            if rep is not None:
                text += f"; {spread_text(rep)}"
            return Summary(pps, text)
        sc = [f"{k}={fmt_num(v)}" for k, v in scalars(data, 6)]
        return Summary(None, ", ".join(sc) or "done")

    def table_row(self, first: str) -> list[str]:
        """This result's row of :data:`TABLE` (``first``: the first cell, size or test name)."""
        raise NotImplementedError(f"{type(self).__name__} declares no TABLE")

    @classmethod
    def study_metric(cls) -> Optional[MethodMetric]:
        """What a study of this method pivots (None: a rate: the throughput pivots)."""
        return cls.METRIC


@dataclass(frozen=True)
class StoredResult(MethodResult):
    """A result of a method this nfvperf does not know (a plugin since removed): only its dict."""


def _clean(x: object) -> object:
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return _clean({f.name: getattr(x, f.name) for f in dataclasses.fields(x)})
    if isinstance(x, float) and (math.isinf(x) or math.isnan(x)):
        return None
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x
