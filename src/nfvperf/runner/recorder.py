"""What a test method sees of the run: :class:`Recorder` stores each trial as it ends (inside
:meth:`Interrupts.critical <nfvperf.runner.interrupts.Interrupts.critical>`, so Ctrl-C never cuts
a commit), tags a repeated search's trials with their repetition, and moves the progress bar."""
from __future__ import annotations

from typing import Any, Optional

from nfvperf.store import Store

from .interrupts import Interrupts
from .progress import Progress

__all__ = ["Recorder"]


class Recorder:
    """What a method sees: ``trial()`` stores a trial at once, ``progress()`` moves the bar."""

    def __init__(self, store: Store, test_id: int, interrupts: Interrupts, progress: Progress,
                 label: str):
        self.store = store
        self.test_id = test_id
        self.interrupts = interrupts
        self._progress = progress
        self.label = label
        self.trials = 0
        self.repetition: Optional[int] = None     # set while a repeated search runs (``repeat``)

    def trial(self, test: Any = None, result: Any = None, **context: Any) -> None:
        if result is None and test is not None and not isinstance(test, str):
            test, result = None, test          # recorder.trial(TrialResult) also accepted
        if test is not None:
            context.setdefault("test", test if isinstance(test, (str, int, float)) else str(test))
        if self.repetition is not None:
            context.setdefault("repetition", self.repetition)
        with self.interrupts.critical():
            self.store.add_trial(self.test_id, result, context)
        self.trials += 1

    def progress(self, *args: Any, **kwargs: Any) -> None:
        """Accepts ``progress(0.4)``, ``progress(done, total)``, ``progress(fraction=, message=)``."""
        message = kwargs.pop("message", None) or kwargs.pop("msg", None) or kwargs.pop("text", None)
        frac = kwargs.pop("fraction", None)
        if frac is None and "done" in kwargs and kwargs.get("total"):
            frac = kwargs["done"] / kwargs["total"]
        nums = [a for a in args if isinstance(a, (int, float)) and not isinstance(a, bool)]
        strs = [a for a in args if isinstance(a, str)]
        if frac is None and len(nums) >= 2 and nums[1]:
            frac = nums[0] / nums[1]
        elif frac is None and len(nums) == 1:
            frac = nums[0] if nums[0] <= 1 else None
        if message is None and strs:
            message = strs[0]
        desc = f"{self.label}: {message}" if message else None
        if frac is not None:
            self._progress.fraction(float(frac), desc)
        elif desc:
            self._progress.unit(desc)

    def log(self, text: str) -> None:
        self._progress.log(text)

