"""MLR search goals and presets (METHODOLOGY §8)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class SearchGoal:
    """One MLR Search Goal.  Durations in seconds, ratios in [0, 1)."""

    name: str = "goal"
    loss_ratio: float = 0.0                 # Goal Loss Ratio
    exceed_ratio: float = 0.5               # Goal Exceed Ratio
    relative_width: float = 0.005           # Goal Width, relative to the RUB
    final_trial_duration: float = 1.0       # Goal Final Trial Duration
    duration_sum: float = 21.0              # Goal Duration Sum
    initial_trial_duration: Optional[float] = None   # Goal Initial Trial Duration (default final)
    preceding_targets: int = 2              # coarser targets before the final one
    expansion_coefficient: int = 2
    fail_fast: bool = True

    def __post_init__(self) -> None:
        if not 0.0 <= self.loss_ratio < 1.0:
            raise ValueError(f"{self.name}: loss_ratio must be in [0, 1)")
        if not 0.0 <= self.exceed_ratio < 1.0:
            raise ValueError(f"{self.name}: exceed_ratio must be in [0, 1)")
        if self.final_trial_duration <= 0 or self.duration_sum <= 0:
            raise ValueError(f"{self.name}: durations must be > 0")
        if self.relative_width <= 0 or self.relative_width >= 1:
            raise ValueError(f"{self.name}: relative_width must be in (0, 1)")
        if self.initial_trial_duration is not None and self.initial_trial_duration <= 0:
            raise ValueError(f"{self.name}: initial_trial_duration must be > 0")
        if self.preceding_targets < 0 or self.expansion_coefficient < 1:
            raise ValueError(f"{self.name}: bad preceding_targets / expansion_coefficient")

    @property
    def initial_duration(self) -> float:
        return self.initial_trial_duration or self.final_trial_duration

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


CSIT_NDR = SearchGoal("ndr", 0.0, 0.5, 0.005, 1.0, 21.0)
CSIT_PDR = SearchGoal("pdr", 0.005, 0.5, 0.005, 1.0, 21.0)
#: Zero loss as the target, but a load still counts as a Lower Bound when up to half of its
#: trial seconds lost frames: tolerates rare loss events (a preempted core, a timer), not a
#: steady loss.  CSIT's NDR goal under the name the docs offer next to strict zero loss.
LOSS_TOLERANT = SearchGoal("loss_tolerant", 0.0, 0.5, 0.005, 1.0, 21.0)
#: RFC 2544-compliant: one full 60 s trial decides; RLB = Conditional Throughput = Throughput.
RFC2544 = SearchGoal("rfc2544", 0.0, 0.0, 0.001, 60.0, 60.0, initial_trial_duration=1.0)
#: ETSI TST009 binary search with loss verification, r = 2.
TST009 = SearchGoal("tst009", 0.0, 0.5, 0.001, 60.0, 120.0, initial_trial_duration=1.0)

PRESETS: dict[str, tuple[SearchGoal, ...]] = {
    "csit_ndr_pdr": (CSIT_NDR, CSIT_PDR),
    "csit_ndr": (CSIT_NDR,),
    "csit_pdr": (CSIT_PDR,),
    "loss_tolerant": (LOSS_TOLERANT,),
    "rfc2544": (RFC2544,),
    "tst009": (TST009,),
}

#: The four goals of the MLR document's worked example (TV7, TV8).
EXAMPLE_GOALS = (
    SearchGoal("RFC2544", 0.0, 0.0, 0.005, 60.0, 60.0),
    SearchGoal("TST009", 0.0, 0.5, 0.005, 60.0, 120.0),
    SearchGoal("1s final", 0.005, 0.5, 0.005, 1.0, 120.0),
    SearchGoal("20% exceed", 0.005, 0.2, 0.005, 60.0, 60.0),
)
