"""MLR-style multi-goal search: goals/presets, the pure classifier and the controller."""
from .classify import (LOWER, UNDECIDED, UPPER, classify, conditional_loss_ratio,
                       conditional_throughput, exceed_ratios)
from .goals import CSIT_NDR, CSIT_PDR, EXAMPLE_GOALS, PRESETS, RFC2544, TST009, SearchGoal
from .search import STRATEGIES, Strategy, get_strategy, mlr_search

__all__ = ["LOWER", "UPPER", "UNDECIDED", "classify", "conditional_loss_ratio",
           "conditional_throughput", "exceed_ratios", "SearchGoal", "PRESETS", "CSIT_NDR",
           "CSIT_PDR", "RFC2544", "TST009", "EXAMPLE_GOALS", "mlr_search", "Strategy", "STRATEGIES",
           "get_strategy"]
