"""Stop signals during ``cardrules simulate`` (README.md, "The simulator").

SIGINT, SIGTERM and SIGHUP alike end a run with the games it finished reported: a
run of hours is not thrown away, and the exit status is the one a shell reports for
the signal (130, 143, 129). SIGHUP is the terminal closed, or a supervisor's stop
(``serve`` takes it as SIGTERM, docs/operations.md, "Termination").
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

# As a shell reports a process stopped by the signal: 128 and its number.
INTERRUPTED = 128 + signal.SIGINT
#: What ``signal.signal`` takes and gives back: a function, SIG_DFL or SIG_IGN, or
#: None for a handler set from outside Python.
_Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None
#: The signals that stop a run, and the word that says which did.
_WHAT = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated", signal.SIGHUP: "hung up"}


class Stopped(BaseException):
    """A stop signal during a simulation (``SimulationStops``). A BaseException, as
    KeyboardInterrupt is: no ``except Exception`` on the way may take it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.status = 128 + signum  # 130, 143, 129, as INTERRUPTED
        self.what = _WHAT[signal.Signals(signum)]


class SimulationStops:
    """While a simulation runs, SIGINT, SIGTERM and SIGHUP alike raise ``Stopped``, so
    that the games finished are reported (a SIGTERM or SIGHUP would otherwise end the
    process silently, its progress line unended). A signal that is ignored (a
    background job's SIGINT, ``nohup``'s SIGHUP) or handled by someone else stays so.
    Signals can be handled in the main thread only: elsewhere (a test's thread) the
    handlers are left as they are."""

    def __init__(self) -> None:
        self._previous: dict[int, _Handler] = {}
        self._holding = False
        self._pending: int | None = None

    def __enter__(self) -> SimulationStops:
        if threading.current_thread() is threading.main_thread():
            for signum in _WHAT:
                if signal.getsignal(signum) in (signal.default_int_handler, signal.SIG_DFL):
                    self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._holding:
            self._pending = signum
        else:
            raise Stopped(signum)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """A signal that comes in the block is raised after it."""
        self._holding = True
        try:
            yield
        finally:
            self._holding = False
        if self._pending is not None:
            raise Stopped(self._pending)
