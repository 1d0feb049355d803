"""Progress of ``cardrules simulate --games`` on stderr (README.md, "The simulator").

Progress is a side channel: a stderr that cannot be written never costs the run
its result. A terminal gets tqdm's bar; a log or a pipe, whole lines.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any, Protocol, TextIO

from tqdm import tqdm

#: How often ``--games`` writes a progress line where stderr is no terminal.
LOG_INTERVAL_SECONDS = 30.0


class Progress(Protocol):
    def update(self, n: int = 1) -> object: ...

    def close(self) -> None: ...


class NoProgress:
    """Progress with stderr closed (``2>&-``): nowhere to write it."""

    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


class MonotonicBar(tqdm):  # type: ignore[type-arg]  # tqdm's stubs: Generic over items
    """tqdm's bar timed on the monotonic clock. tqdm times itself with ``time.time``: a
    wall-clock step back froze the bar for as long as the step (``[-59:51<00:00,
    -0.33game/s]`` at the end), one forward showed an hour gone (a review). Its monitor
    thread, which compares its own wall-clock reading with the bar's, stays off; it was
    what redrew a bar whose games slowed after a fast stretch, so every game is a chance
    to redraw (``miniters=1``), ``mininterval`` still keeping redraws apart."""

    monitor_interval = 0

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(miniters=1, **kwargs)
        self._time = time.monotonic
        self.start_t = self.last_print_t = time.monotonic()


def games_progress(total: int) -> Progress:
    """``--games``' progress on stderr: tqdm's bar on a terminal, lines elsewhere."""
    if sys.stderr is None:
        return NoProgress()
    stream = SideChannel(sys.stderr)
    if stream.isatty():
        return MonotonicBar(
            total=total,
            desc="simulate",
            unit="game",
            file=stream,
            mininterval=0.1,
            ncols=bar_width(stream),
        )
    return LineProgress(total, stream)


def bar_width(stream: SideChannel) -> int | None:
    """The width for tqdm's bar on the terminal ``stream`` writes to, as tqdm measures
    it for ``sys.stderr`` itself (a column short of the terminal's, once): it measures
    no other file, and drew this wrapper's bar some 59 columns wide, wrapping every
    redraw on a narrower terminal. None (tqdm's own layout) where the terminal has
    no size (a pty nobody sized: tqdm's bar would be cut to nothing)."""
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError):  # io.UnsupportedOperation is both
        return None
    return columns - 1 if columns > 1 else None


class SideChannel:
    """stderr as progress writes to it. Progress is a side channel: a write that fails
    (the reader of a pipe gone, a full disk) ends the progress, never the run, whose
    result must still be printed (README.md). The stream is then pointed at
    /dev/null, so that what is left in its buffer is not written again, and fails
    again, when Python flushes it at exit (which would change the exit status)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.broken = False

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                self._stream.write(text)
            except (OSError, ValueError):  # ValueError: a closed file
                self._give_up()
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self._give_up()

    def isatty(self) -> bool:
        try:
            return self._stream.isatty()
        except (OSError, ValueError):
            return False

    def fileno(self) -> int:  # for the terminal's width (bar_width)
        return self._stream.fileno()

    @property
    def encoding(self) -> str | None:  # tqdm asks whether it may draw with block characters
        return getattr(self._stream, "encoding", None)

    def _give_up(self) -> None:
        self.broken = True
        discard(self._stream)


class LineProgress:
    """``--games``' progress where stderr is no terminal (a log, a pipe): a line at the
    start, every ``LOG_INTERVAL_SECONDS`` and at the end, each ended by a newline, and
    never the same line twice (README.md). tqdm's bar there separated its redraws by
    carriage returns (a log got one long line) and its monitor thread repeated a
    redraw 10 s after each; only its format is used."""

    def __init__(
        self, total: int, out: SideChannel, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._total = total
        self._out = out
        self._clock = clock
        self._started = clock()
        self._done = 0
        self._shown = 0
        self._next = self._started
        self._line(self._started)

    def update(self, n: int = 1) -> None:
        self._done += n
        now = self._clock()
        if now >= self._next:
            self._line(now)

    def close(self) -> None:
        if self._done != self._shown:
            self._line(self._clock())

    def _line(self, now: float) -> None:
        elapsed = now - self._started
        meter = tqdm.format_meter(
            self._done, self._total, elapsed, ncols=0, prefix="simulate", unit="game"
        )
        self._out.write(meter + "\n")
        self._out.flush()
        self._shown = self._done
        # The next whole interval from the start, however long this game took.
        self._next = self._started + LOG_INTERVAL_SECONDS * (elapsed // LOG_INTERVAL_SECONDS + 1)


def discard(stream: TextIO) -> None:
    """Point ``stream``'s file at /dev/null once writing to it failed: what was not
    written must not be written again, and fail again, when Python flushes it at exit.
    One with no file of its own (a test's capture) has nothing to flush."""
    try:
        fileno = stream.fileno()
    except (OSError, ValueError):  # io.UnsupportedOperation is both
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fileno)
    os.close(devnull)
