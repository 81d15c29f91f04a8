"""nfvperf.methods — the test methods (INTERFACES §4).

``REGISTRY[name] = (ParamsModel, run)``; ``run(measurer, profile, params, recorder) ->
MethodResult`` (a dataclass with ``to_dict()``).  ``recorder.trial(test, TrialResult, **context)``
is called after every trial; ``recorder.progress(fraction, message)`` if the recorder has it.
"""
from __future__ import annotations

from typing import Any, Callable

from . import back_to_back, frame_loss_rate, latency, reset, rfc2889, system_recovery, tcp, throughput
from .back_to_back import BackToBackParams, BackToBackResult
from .common import MethodParams
from .frame_loss_rate import FrameLossRateParams, FrameLossRateResult
from .latency import LatencyParams, LatencyResult
from .reset import ResetParams, ResetResult
from .rfc2889 import (AddressCachingParams, AddressLearningParams, AddressResult,
                      ForwardingParams, ForwardingResult)
from .system_recovery import SystemRecoveryParams, SystemRecoveryResult
from .tcp import TcpParams, TcpResult
from .throughput import GoalParams, ThroughputParams, ThroughputResult

REGISTRY: dict[str, tuple[type[MethodParams], Callable[..., Any]]] = {
    "throughput": (ThroughputParams, throughput.run),
    "latency": (LatencyParams, latency.run),
    "frame_loss_rate": (FrameLossRateParams, frame_loss_rate.run),
    "back_to_back": (BackToBackParams, back_to_back.run),
    "system_recovery": (SystemRecoveryParams, system_recovery.run),
    "reset": (ResetParams, reset.run),
    "rfc2889_forwarding": (ForwardingParams, rfc2889.run_forwarding),
    "rfc2889_address_caching": (AddressCachingParams, rfc2889.run_address_caching),
    "rfc2889_address_learning": (AddressLearningParams, rfc2889.run_address_learning),
    "tcp": (TcpParams, tcp.run),
}

__all__ = ["REGISTRY", "MethodParams", "GoalParams", "ThroughputParams", "ThroughputResult",
           "LatencyParams", "LatencyResult", "FrameLossRateParams", "FrameLossRateResult",
           "BackToBackParams", "BackToBackResult", "SystemRecoveryParams", "SystemRecoveryResult",
           "ResetParams", "ResetResult", "ForwardingParams", "ForwardingResult",
           "AddressCachingParams", "AddressLearningParams", "AddressResult", "TcpParams",
           "TcpResult"]
