"""Stop signals from the first moment of ``cardrules serve`` (docs/operations.md, "Termination").

A SIGINT or SIGHUP that the server was started with set to be ignored stays
ignored: ``nohup`` ignores SIGHUP, and a shell ignores SIGINT in its background
jobs, so that the server outlives the terminal or its Ctrl-C, as the caller
asked. SIGTERM, the orchestrator's, always stops the server.

``PendingSignals`` records them while the process is still starting, before an
event loop can take them (``service.signals.StopSignals`` takes over then). With
the default action a pod deleted just after it started would die by SIGTERM
(status 143) instead of exiting 0; and as PID 1 of a container, where the kernel
drops a signal that has no handler, it would serve on until killed. So the
console script (``service.entry``) starts recording before it imports the rest
of the server, which takes a few tenths of a second: this module imports
nothing but ``signal`` (and its package, ``service``, about 2 ms).
"""

from __future__ import annotations

import signal

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
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


_from_start: PendingSignals | None = None


def record_from_start() -> None:
    """Record stop signals from now on, for the ``pending_signals`` of this process."""
    global _from_start
    _from_start = PendingSignals()


def pending_signals() -> PendingSignals:
    """What ``record_from_start`` has recorded, or a recorder from now on if it never ran
    (``cli.main`` called directly, as tests do)."""
    return _from_start if _from_start is not None else PendingSignals()
