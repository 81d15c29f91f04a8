"""nfvperf.methods — the test methods (INTERFACES §4).

Each method module declares what it contributes: ``METHODS = [MethodInfo(name, ParamsModel, run,
result=ResultClass, sizeless=..., title=..., headline=..., tcp=...)]``
(:class:`nfvperf.methods.common.MethodInfo`).  Every module of this package is imported and
``REGISTRY[name]`` is built from those declarations, so a new method is one module.
``run(measurer, profile, params, recorder) -> ResultClass``, a dataclass over
:class:`nfvperf.methods.result.MethodResult`: ``to_dict()`` is what the store keeps and
``from_dict()`` reads it back (:func:`result_of`); the report asks the result for its rate,
main scalar, run-log line, latency points and table row.
``recorder.trial(test, TrialResult, **context)`` is called after every trial;
``recorder.progress(fraction, message)`` if the recorder has it.
"""
from __future__ import annotations

from typing import Mapping, Optional

from nfvperf.plugins import import_plugins

from .back_to_back import BackToBackParams, BackToBackResult
from .common import RATE, MethodInfo, MethodParams
from .result import MethodResult, StoredResult
from .frame_loss_rate import FrameLossRateParams, FrameLossRateResult
from .latency import LatencyParams, LatencyResult
from .reset import ResetParams, ResetResult
from .rfc2889 import (AddressCachingParams, AddressCachingResult, AddressLearningParams,
                      AddressLearningResult, AddressResult, ForwardingParams, ForwardingResult)
from .system_recovery import SystemRecoveryParams, SystemRecoveryResult
from .tcp import TcpParams, TcpResult
from .throughput import GoalParams, ThroughputParams, ThroughputResult


def _collect() -> dict[str, MethodInfo]:
    out: dict[str, MethodInfo] = {}
    for mod in import_plugins(__name__, __path__, skip=("common", "result")):
        for info in getattr(mod, "METHODS", ()):
            if info.name in out:
                raise RuntimeError(f"method {info.name!r} declared twice ({mod.__name__})")
            out[info.name] = info
    return out


#: method name -> MethodInfo
REGISTRY: dict[str, MethodInfo] = _collect()


def method_info(name: str, default: Optional[MethodInfo] = None) -> MethodInfo:
    """The declared metadata of method ``name``.  Unknown names: ``default``, or KeyError."""
    entry = REGISTRY.get(name, default)
    if entry is None:
        raise KeyError(f"unknown method {name!r}; known: {', '.join(sorted(REGISTRY))}")
    return entry


def result_class(method: str) -> type[MethodResult]:
    """The result class ``method`` declares (:class:`StoredResult` for a method not known)."""
    return method_info(method, _UNKNOWN).result


def result_of(method: str, data: Optional[Mapping[str, object]]) -> MethodResult:
    """A stored result of ``method`` as its declared result class (a method this nfvperf does
    not know: a :class:`StoredResult` that only holds the dict)."""
    return method_info(method, _UNKNOWN).read(data or {})


def is_sizeless(name: str) -> bool:
    """One test unit, no frame-size loop (the result does not depend on the size)."""
    return method_info(name, _UNKNOWN).sizeless


def runs_on_iperf3(name: str) -> bool:
    """``--tg iperf3`` can run this method."""
    return method_info(name, _UNKNOWN).tcp


def rate_methods() -> tuple[str, ...]:
    """Methods whose result is a rate in fps per interface (``headline == RATE``)."""
    return tuple(n for n in REGISTRY if method_info(n).is_rate)


def _no_run(*args: object, **kwargs: object) -> MethodResult:
    raise KeyError("unknown method")


_UNKNOWN = MethodInfo("", MethodParams, _no_run, result=StoredResult)

__all__ = ["REGISTRY", "MethodInfo", "MethodResult", "StoredResult", "result_of", "result_class", "RATE", "method_info",
           "is_sizeless", "runs_on_iperf3",
           "rate_methods", "MethodParams", "GoalParams", "ThroughputParams", "ThroughputResult",
           "LatencyParams", "LatencyResult", "FrameLossRateParams", "FrameLossRateResult",
           "BackToBackParams", "BackToBackResult", "SystemRecoveryParams", "SystemRecoveryResult",
           "ResetParams", "ResetResult", "ForwardingParams", "ForwardingResult",
           "AddressCachingParams", "AddressLearningParams", "AddressResult", "AddressCachingResult",
           "AddressLearningResult", "TcpParams",
           "TcpResult"]
