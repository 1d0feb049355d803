"""Stop signals in the event loop of ``cardrules serve`` (design section 6).

SIGTERM, SIGINT or SIGHUP ends serving; SIGINT (Ctrl-C) also skips the drain
delay. SIGHUP (the terminal of ``make serve`` closed) drains as SIGTERM does,
instead of killing the process with calls in flight. ``StopSignals`` takes over
from ``service.start_signals.PendingSignals``, which records them while the
process starts, and replays what it recorded, so a signal that came during
start-up makes the server stop as soon as it serves.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterable, Iterator

from service.start_signals import PendingSignals

# Stop as SIGTERM does; SIGINT also cuts the drain delay short.
_LIKE_SIGTERM = (signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def signals_blocked(signals: Iterable[int]) -> Iterator[set[int | signal.Signals]]:
    """``signals`` blocked in this thread and the threads it starts meanwhile (a thread
    inherits the mask of the thread that starts it); yields the mask before."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield mask
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


class StopSignals:
    """Stop signals in the event loop, after the ones ``pending`` recorded.

    A SIGINT that comes during a SIGTERM's drain delay cuts the delay short: a
    second Ctrl-C, or the one a terminal sends to the workers of ``--workers N``.
    Once stopping, further SIGTERMs and SIGHUPs change nothing, and once serving is
    over every stop signal is ignored, also after the event loop has closed (which
    would restore the default action, death by the signal).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, pending: PendingSignals) -> None:
        self._loop = loop
        self.received = asyncio.Event()
        self._hurry = asyncio.Event()
        self.first: signal.Signals | None = None
        for signum in pending.signals:
            loop.add_signal_handler(signum, self.stop, signum)
        for signum in pending.received:
            self.stop(signum)

    def stop(self, signum: signal.Signals) -> None:
        """Stop as ``signum`` would: the handler of the stop signals, also called directly.

        The loop keeps handling repeats until ``finished``: asyncio's
        ``remove_signal_handler`` resets a signal to its default action before this
        could ignore it, and a repeat in that moment, such as the copy the supervisor
        of ``--workers N`` forwards right after its process group's, killed the process.
        """
        if self.first is None:
            self.first = signum
        self.received.set()
        if signum == signal.SIGINT:
            self._hurry.set()

    def drain_delay(self, configured: float) -> float:
        """The delay to keep serving for: none once SIGINT came."""
        return 0.0 if self._hurry.is_set() else configured

    def finished(self) -> None:
        """Serving is over: every stop signal is ignored from now on. Left to the event
        loop, its closing would restore their default actions: SIGTERM would kill, and
        a second Ctrl-C in the last tenths of a second of the exit would end a clean
        stop with status 130 (Python's KeyboardInterrupt)."""
        stops = (signal.SIGINT, *_LIKE_SIGTERM)
        # asyncio resets a signal to its default action as it lets go of it: done while
        # no thread takes one, as the server's other threads block them from their start
        # (``run_servers``), and a signal that comes meanwhile waits, then is dropped by
        # SIG_IGN. Blocking runs the handlers of those Python has taken first: one taken
        # but not yet handled when SIG_IGN is set is reported with a traceback.
        with signals_blocked(stops):
            for signum in stops:
                self._loop.remove_signal_handler(signum)
                signal.signal(signum, signal.SIG_IGN)

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds``, or until SIGINT."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._hurry.wait(), seconds)
