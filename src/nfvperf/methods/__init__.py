"""nfvperf.methods — the test methods (INTERFACES §4).

Each method module declares what it contributes: ``METHODS = [MethodInfo(name, ParamsModel, run,
sizeless=..., title=..., headline=..., tcp=...)]`` (:class:`nfvperf.methods.common.MethodInfo`).
Every module of this package is imported and ``REGISTRY[name]`` is built from those declarations,
so a new method is one module.  A ``REGISTRY`` entry unpacks as ``(ParamsModel, run)``;
``run(measurer, profile, params, recorder) -> MethodResult`` (a dataclass with ``to_dict()``).
``recorder.trial(test, TrialResult, **context)`` is called after every trial;
``recorder.progress(fraction, message)`` if the recorder has it.
"""
from __future__ import annotations

from typing import Any, Optional

from nfvperf.plugins import import_plugins

from .back_to_back import BackToBackParams, BackToBackResult
from .common import RATE, MethodInfo, MethodParams
from .frame_loss_rate import FrameLossRateParams, FrameLossRateResult
from .latency import LatencyParams, LatencyResult
from .reset import ResetParams, ResetResult
from .rfc2889 import (AddressCachingParams, AddressLearningParams, AddressResult,
                      ForwardingParams, ForwardingResult)
from .system_recovery import SystemRecoveryParams, SystemRecoveryResult
from .tcp import TcpParams, TcpResult
from .throughput import GoalParams, ThroughputParams, ThroughputResult


def _collect() -> dict[str, MethodInfo]:
    out: dict[str, MethodInfo] = {}
    for mod in import_plugins(__name__, __path__, skip=("common",)):
        for info in getattr(mod, "METHODS", ()):
            if info.name in out:
                raise RuntimeError(f"method {info.name!r} declared twice ({mod.__name__})")
            out[info.name] = info
    return out


#: method name -> MethodInfo (unpacks as (ParamsModel, run))
REGISTRY: dict[str, MethodInfo] = _collect()


def method_info(name: str, default: Optional[MethodInfo] = None) -> MethodInfo:
    """The declared metadata of method ``name`` (an entry replaced by a ``(params, run)`` tuple,
    as tests do, keeps its declared metadata).  Unknown names: ``default``, or KeyError."""
    entry: Any = REGISTRY.get(name)
    if isinstance(entry, MethodInfo):
        return entry
    declared = _DECLARED.get(name)
    if entry is not None:
        if declared is not None:
            return MethodInfo(**{**declared.__dict__, "params": entry[0], "run": entry[1]})
        return MethodInfo(name, entry[0], entry[1])
    if default is not None:
        return default
    raise KeyError(f"unknown method {name!r}; known: {', '.join(sorted(REGISTRY))}")


def is_sizeless(name: str) -> bool:
    """One test unit, no frame-size loop (the result does not depend on the size)."""
    info = method_info(name, _UNKNOWN)
    return info.sizeless


def runs_on_iperf3(name: str) -> bool:
    """``--tg iperf3`` can run this method."""
    return method_info(name, _UNKNOWN).tcp


def rate_methods() -> tuple[str, ...]:
    """Methods whose result is a rate in fps per interface (``headline == RATE``)."""
    return tuple(n for n in REGISTRY if method_info(n).is_rate)


_DECLARED = dict(REGISTRY)
_UNKNOWN = MethodInfo("", MethodParams, lambda *a, **k: None)

__all__ = ["REGISTRY", "MethodInfo", "RATE", "method_info", "is_sizeless", "runs_on_iperf3",
           "rate_methods", "MethodParams", "GoalParams", "ThroughputParams", "ThroughputResult",
           "LatencyParams", "LatencyResult", "FrameLossRateParams", "FrameLossRateResult",
           "BackToBackParams", "BackToBackResult", "SystemRecoveryParams", "SystemRecoveryResult",
           "ResetParams", "ResetResult", "ForwardingParams", "ForwardingResult",
           "AddressCachingParams", "AddressLearningParams", "AddressResult", "TcpParams",
           "TcpResult"]
