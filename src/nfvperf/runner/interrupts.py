"""Ctrl-C and SIGTERM during a run: a signal becomes KeyboardInterrupt, but never inside a store
commit (:meth:`Interrupts.critical`); a forked child (netns helpers) that inherited the handler
dies as it would by default (:func:`only_owner`), never unwinding into the runner."""
from __future__ import annotations

import contextlib
import os
import signal
from typing import Any, Iterator

__all__ = ["Interrupts", "only_owner"]


class Interrupts:
    """SIGINT/SIGTERM -> KeyboardInterrupt, but never inside a store commit (``critical()``)."""

    def __init__(self) -> None:
        self.depth = 0
        self.pending = False
        self.hit = False
        self.extra = 0
        self.keep_ignoring = False
        self._old: dict[int, Any] = {}
        self.owner = os.getpid()

    def _handler(self, signum: int, _frame: Any) -> None:
        if os.getpid() != self.owner:
            # a child forked by the topology code (netns helpers) inherited this handler: it must
            # die as it would have by default, never unwind into the runner and touch the store
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            os._exit(128 + signum)
        if self.hit:
            # already unwinding: the topology is being released; do not abort that half-way
            self.extra += 1
            if self.extra < 3:
                with contextlib.suppress(Exception):
                    os.write(2, b"nfvperf: stopping, releasing the topology (Ctrl-C 3 times to force)\n")
                return
            raise KeyboardInterrupt(signal.Signals(signum).name)
        self.hit = True
        if self.depth > 0:
            self.pending = True
            return
        raise KeyboardInterrupt(signal.Signals(signum).name)

    @contextlib.contextmanager
    def critical(self) -> Iterator[None]:
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            if self.depth == 0 and self.pending:
                self.pending = False
                raise KeyboardInterrupt("SIGINT")

    def __enter__(self) -> "Interrupts":
        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handler)
        except ValueError:      # not the main thread: leave the defaults
            self._old.clear()
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, h in self._old.items():
            # a process that exits after an interrupted run keeps ignoring Ctrl-C until it has
            # said so (exit 130), instead of dying by the signal half-way through its last lines
            signal.signal(sig, signal.SIG_IGN if self.hit and self.keep_ignoring else h)


def only_owner(owner: int) -> None:
    """A forked child that unwinds into the runner exits here instead of writing the run's status."""
    if os.getpid() != owner:
        os._exit(1)
