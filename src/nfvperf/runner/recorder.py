"""What a test method sees of the run: :class:`Recorder` stores each trial as it ends (inside
:meth:`Interrupts.critical <nfvperf.runner.interrupts.Interrupts.critical>`, so Ctrl-C never cuts
a commit), tags a repeated search's trials with their repetition, and moves the progress bar."""
from __future__ import annotations

from typing import Optional

from nfvperf.store import Store
from nfvperf.trial import TrialResult

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

    def trial(self, test: str, tr: TrialResult, **context: object) -> None:
        context.setdefault("test", test)
        if self.repetition is not None:
            context.setdefault("repetition", self.repetition)
        with self.interrupts.critical():
            self.store.add_trial(self.test_id, tr, context)
        self.trials += 1

    def progress(self, fraction: float, message: str) -> None:
        self._progress.fraction(fraction, f"{self.label}: {message}" if message else None)

    def log(self, text: str) -> None:
        self._progress.log(text)

