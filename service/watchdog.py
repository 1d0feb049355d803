"""The supervisor's watch on its workers' event loops (docs/operations.md "Workers").

A worker whose loop stops running (deadlocked, stopped with SIGSTOP, stuck in a
system call) still gets its share of new connections from the kernel
(SO_REUSEPORT), and their calls hang until their deadlines. Each worker's loop
stamps the time into its slot of a mapping shared with the supervisor every
``BEAT_SECONDS``; the supervisor kills a worker whose stamp is older than the
timeout, and then stops the others and exits 1 as for any worker that exits on
its own, so that the orchestrator restarts the server. Silence is counted only
while the watch itself runs: when the whole server was paused (``docker pause``,
a cgroup freeze, Ctrl-Z), every worker's stamp is old on resuming, and counting
that silence would kill them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import mmap
import os
import signal
import struct
import threading
import time
from collections.abc import Callable, Mapping

from service.logs import get_logger

BEAT_SECONDS = 0.5
_SLOT = struct.Struct("d")

_log = get_logger("cardrules.server")


class Heartbeats:
    """One time stamp per worker (1 to N) in memory shared across ``fork``.

    ``time.monotonic`` reads one clock for every process of the machine, so the
    supervisor can compare a worker's stamp with its own time. Every slot starts
    at the time the mapping is made: a worker that hangs before its loop runs
    is overdue too.
    """

    def __init__(self, workers: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._slots = mmap.mmap(-1, _SLOT.size * workers)  # anonymous and MAP_SHARED
        for worker in range(1, workers + 1):
            self.beat(worker)

    def beat(self, worker: int) -> None:
        _SLOT.pack_into(self._slots, _SLOT.size * (worker - 1), self._clock())

    def silent_for(self, worker: int) -> float:
        """Seconds since ``worker`` last beat."""
        (last,) = _SLOT.unpack_from(self._slots, _SLOT.size * (worker - 1))
        return float(self._clock() - last)

    def now(self) -> float:
        """The time on the clock the beats are stamped with."""
        return self._clock()


def keep_beating(loop: asyncio.AbstractEventLoop, beat: Callable[[], None]) -> None:
    """Call ``beat`` now and every ``BEAT_SECONDS`` for as long as ``loop`` runs callbacks."""

    def again() -> None:
        beat()
        loop.call_later(BEAT_SECONDS, again)

    again()


def overdue(
    workers: Mapping[int, int],
    heartbeats: Heartbeats,
    timeout: float,
    watched_for: float = float("inf"),
) -> list[tuple[int, int, float]]:
    """``(pid, worker, silent seconds)`` of each worker silent for longer than ``timeout``,
    counting no more of its silence than the ``watched_for`` seconds the watch has been
    running without a break."""
    found = []
    for pid, worker in list(workers.items()):  # a copy: the supervisor's thread reaps
        silent = min(heartbeats.silent_for(worker), watched_for)
        if silent > timeout:
            found.append((pid, worker, silent))
    return found


def start_watchdog(
    workers: Mapping[int, int], heartbeats: Heartbeats, timeout: float
) -> Callable[[], None]:
    """Kill, from a thread of the supervisor, each of ``workers`` (worker by pid) that
    is silent for longer than ``timeout``; returns the function that ends the watch."""
    ended = threading.Event()

    def watch() -> None:
        killed: set[int] = set()
        watching_since = last = heartbeats.now()
        while not ended.wait(BEAT_SECONDS):
            now = heartbeats.now()
            if now - last > timeout / 2:
                # The supervisor itself did not run for that long: the whole server was
                # paused (``docker pause``, a cgroup freeze, Ctrl-Z), its workers with
                # it. Their silence until now says nothing of their loops; count anew.
                watching_since = now
            last = now
            found = [
                hung
                for hung in overdue(workers, heartbeats, timeout, now - watching_since)
                if hung[0] not in killed
            ]
            # All killed before any log line: a log reader that stalls every write (one
            # reason workers hang) would stall this thread at its first line.
            for pid, _, _ in found:
                killed.add(pid)  # killed, perhaps not yet reaped
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            for pid, worker, silent in found:
                _log.error("worker hung", worker=worker, pid=pid, silent_seconds=round(silent, 1))

    # A daemon, never joined: a thread stuck writing to a stalled stdout must not keep
    # the supervisor from exiting.
    threading.Thread(target=watch, name="cardrules-watchdog", daemon=True).start()
    return ended.set
