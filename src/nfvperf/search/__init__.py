"""nfvperf.search — which load next?  RFC 2544 binary search, NDR/PDR in one pass, an MLR-style
multi-goal search, the MLRsearch 1.2.1 engine for cross-checks, and the trial-validity rule.

All searches talk to a :class:`~nfvperf.search.validity.TrialRunner` (a measurer plus the
validity rule and the recorder callback) and return a :class:`~nfvperf.search.result.SearchResult`.
"""
from .binary import binary_search
from .common import BudgetExceeded
from .ndrpdr import ndrpdr_search
from .result import GoalResult, SearchResult, TrialRecord
from .validity import InvalidTrialsError, TrialRunner

__all__ = ["binary_search", "ndrpdr_search", "BudgetExceeded", "GoalResult", "SearchResult",
           "TrialRecord", "InvalidTrialsError", "TrialRunner"]
