"""What the person running nfvperf sees while a run is on: a progress bar with an ETA over all
(test, frame size) units (plain lines without a tty), and the ``nfvperf.progress`` logger's lines
(long set-up steps, e.g. installing 2M OpenFlow rules) while :func:`progress_logs` is entered."""
from __future__ import annotations

import contextlib
import logging
import sys
from typing import Any, Callable, Iterator, Optional

from nfvperf.host.run import PROGRESS_LOGGER
from rich.console import Console
from rich.progress import (BarColumn, Progress as RichProgress, TaskProgressColumn, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)
from rich.markup import escape

__all__ = ["Progress", "progress_logs"]


class Progress:
    """Rich progress bar with ETA over all (test, frame size) units; plain lines without a tty."""

    def __init__(self, total_units: int, enabled: bool = True, stream: Any = None):
        self.total = max(1, total_units)
        self.done_units = 0
        self.stream = stream or sys.stderr
        self._bar = None
        self._task = None
        if enabled and self.stream.isatty():
            self._bar = RichProgress(TextColumn("[bold]{task.description}"), BarColumn(),
                                     TaskProgressColumn(), TimeElapsedColumn(), TextColumn("ETA"),
                                     TimeRemainingColumn(), console=Console(file=self.stream),
                                     transient=False)
            self._task = self._bar.add_task("starting", total=self.total)

    def __enter__(self) -> "Progress":
        if self._bar:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar:
            self._bar.stop()

    def unit(self, label: str) -> None:
        if self._bar and self._task is not None:
            self._bar.update(self._task, description=escape(label), completed=self.done_units)

    def fraction(self, frac: float, message: Optional[str] = None) -> None:
        frac = min(1.0, max(0.0, frac))
        if self._bar and self._task is not None:
            kw: dict[str, Any] = {"completed": self.done_units + frac}
            if message:
                kw["description"] = escape(message)
            self._bar.update(self._task, **kw)

    def unit_done(self) -> None:
        self.done_units += 1
        if self._bar and self._task is not None:
            self._bar.update(self._task, completed=self.done_units)

    def log(self, text: str) -> None:
        """Print a line; a closed stdout/stderr (``| head``) must never fail the run."""
        if self.stream is None:
            return
        try:
            if self._bar:
                self._bar.console.print(text, highlight=False, markup=False)
            else:
                print(text, file=self.stream, flush=True)
        except (OSError, ValueError):
            self.stream = None


@contextlib.contextmanager
def progress_logs(say: Callable[[str], None]) -> Iterator[None]:
    """While inside: INFO lines of :data:`~nfvperf.host.run.PROGRESS_LOGGER` (progress of long
    set-up steps, e.g. installing 2M OpenFlow rules) go to ``say`` (the run's progress log)."""
    class _Say(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            say(record.getMessage())

    lg = logging.getLogger(PROGRESS_LOGGER)
    handler, level = _Say(logging.INFO), lg.level
    lg.addHandler(handler)
    lg.setLevel(logging.INFO)
    try:
        yield
    finally:
        lg.removeHandler(handler)
        lg.setLevel(level)

