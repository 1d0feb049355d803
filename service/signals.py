"""Stop signals, from the first moment of ``cardrules serve`` (design section 6).

SIGTERM, SIGINT or SIGHUP ends serving; SIGINT (Ctrl-C) also skips the drain
delay. SIGHUP (the terminal of ``make serve`` closed) drains as SIGTERM does,
instead of killing the process with calls in flight. A SIGINT or SIGHUP that the
server was started with set to be ignored stays ignored: ``nohup`` ignores SIGHUP,
and a shell ignores SIGINT in its background jobs, so that the server outlives
the terminal or its Ctrl-C, as the caller asked. SIGTERM, the orchestrator's,
always stops the server.
``PendingSignals`` records them while the process is still starting, before an
event loop can take them: with the default action a pod deleted just after it
started would die by SIGTERM (status 143) instead of exiting 0. ``StopSignals``
takes over in the event loop and replays what was recorded, so a signal that
came during start-up makes the server stop as soon as it serves.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# Stop as SIGTERM does, and are ignored once stopping.
_LIKE_SIGTERM = (signal.SIGTERM, signal.SIGHUP)
# What a terminal sends, which the one who started the server may have ignored on purpose.
FROM_A_TERMINAL = (signal.SIGINT, signal.SIGHUP)


class PendingSignals:
    """Records stop signals until ``StopSignals`` (or the supervisor) takes them over.

    ``signals`` are the stop signals this process honours: all of ``STOP_SIGNALS``
    but a SIGINT or SIGHUP it was started with set to be ignored.
    """

    def __init__(self) -> None:
        self.received: list[signal.Signals] = []
        self.signals = tuple(
            signum
            for signum in STOP_SIGNALS
            if signum not in FROM_A_TERMINAL or signal.getsignal(signum) != signal.SIG_IGN
        )
        for signum in self.signals:
            signal.signal(signum, self._record)

    def _record(self, signum: int, _frame: object) -> None:
        self.received.append(signal.Signals(signum))


class StopSignals:
    """Stop signals in the event loop, after the ones ``pending`` recorded.

    A SIGINT that comes during a SIGTERM's drain delay cuts the delay short: a
    second Ctrl-C, or the one a terminal sends to the workers of ``--workers N``.
    Once stopping, further SIGTERMs and SIGHUPs are ignored, also after the event
    loop has closed (which would restore the default action, death by the signal).
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
        """Stop as ``signum`` would: the handler of the stop signals, also called directly."""
        if self.first is None:
            self.first = signum
            for quiet in _LIKE_SIGTERM:
                self._loop.remove_signal_handler(quiet)
                signal.signal(quiet, signal.SIG_IGN)
        self.received.set()
        if signum == signal.SIGINT:
            self._hurry.set()

    def drain_delay(self, configured: float) -> float:
        """The delay to keep serving for: none once SIGINT came."""
        return 0.0 if self._hurry.is_set() else configured

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds``, or until SIGINT."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._hurry.wait(), seconds)
