"""Stop signals during ``cardrules simulate`` (README.md, "The simulator").

SIGINT, SIGTERM and SIGHUP alike end a run with the games it finished reported: a
run of hours is not thrown away, and the exit status is the one a shell reports for
the signal (130, 143, 129). SIGHUP is the terminal closed, or a supervisor's stop
(``serve`` takes it as SIGTERM, docs/operations.md, "Termination"). Only the first
counts: more of them (a second Ctrl-C, the second SIGHUP of a closed terminal) wait
until the summary and its line are written, and then change nothing.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from service.signals import signals_blocked

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
    """For the block, SIGINT, SIGTERM and SIGHUP alike are taken by the simulation, so
    that the games finished are reported (a SIGTERM or SIGHUP would otherwise end the
    process silently, its progress line unended). Inside ``playing()`` the first of
    them raises ``Stopped``; any other, and every one after the first, is only kept
    (``late``) until the block ends: the summary and the line saying what stopped the
    run are written whole, however many signals come (bash sends its jobs SIGHUP, and
    the kernel a second one as bash exits; a user presses Ctrl-C twice). The block
    over, the handlers before it are restored; or, with ``to_exit`` (the command is
    the process's own, which ends with the block) and after a stop, the signals stay
    ignored until the process exits, a repeat killing it otherwise with the status
    told (129, 130, 143) lost.

    A signal that is ignored (a background job's SIGINT, ``nohup``'s SIGHUP) or handled
    by someone else stays so. Signals can be handled in the main thread only:
    elsewhere (a test's thread) the handlers are left as they are."""

    def __init__(self, *, to_exit: bool = False) -> None:
        self._to_exit = to_exit
        self._previous: dict[int, _Handler] = {}
        self._armed = False  # a signal raises Stopped (within playing(), not held())
        self._stopped = False  # one was raised, or taken by late()
        self._pending: int | None = None  # the first signal that came unarmed

    def __enter__(self) -> SimulationStops:
        if threading.current_thread() is threading.main_thread():
            for signum in _WHAT:
                if signal.getsignal(signum) in (signal.default_int_handler, signal.SIG_DFL):
                    self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, signal.SIG_IGN if self._to_exit and self._stopped else previous)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._armed:
            self._armed = False  # first: a repeat while this one unwinds is only kept
            self._stopped = True
            raise Stopped(signum)
        if self._pending is None:
            self._pending = signum

    def _raise_pending(self) -> None:
        """Raise the signal kept while unarmed, if any, as the stop."""
        if self._pending is not None:
            self._armed = False
            self._stopped = True
            raise Stopped(self._pending)

    @contextlib.contextmanager
    def playing(self) -> Iterator[None]:
        """The games: a stop signal in the block raises ``Stopped`` (one that came
        since the handlers were set, on entry). After the block, and once one was
        raised, signals are kept, not raised."""
        self._raise_pending()
        self._armed = True
        try:
            yield
        finally:
            self._armed = False

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Within ``playing()``: a signal that comes in the block is raised after it."""
        armed, self._armed = self._armed, False
        try:
            yield
        finally:
            # Armed again only if nothing came: the pending one is raised unarmed.
            if self._pending is None:
                self._armed = armed
        if armed:
            self._raise_pending()

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """The result being written: a stop signal waits, blocked, until it is written
        whole, and is then kept for ``late()``. With the signal let in, CPython dropped
        the rest of a write to a pipe that one interrupted after a partial write: a
        transcript larger than the pipe's buffer, to a slow reader, ended at 64 KiB,
        and the stop line said the game was over."""
        with signals_blocked(_WHAT):
            yield

    def late(self) -> Stopped | None:
        """A stop signal that came outside ``playing()`` (as the output was written)
        and not raised, to report as the run's stop; None if none came or the run was
        already stopped (a repeat, which changes nothing)."""
        if self._stopped or self._pending is None:
            return None
        self._stopped = True
        return Stopped(self._pending)
