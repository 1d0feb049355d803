"""What the command line draws on a terminal: ``simulate``'s bar fits the terminal's width
(service/simulate_progress.py), and ``serve``'s console log has no colours where
``NO_COLOR`` or ``TERM=dumb`` asks for none (service/logs.py; docs/operations.md,
"Configuration"). Real processes on a pty of a set size."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator

import pytest
from tqdm._monitor import TMonitor

from service.simulate_progress import MonotonicBar, games_progress
from tests.service.server_process import (
    ServerProcess,
    kill_group,
    server_environment,
    start_session,
)
from tests.service.test_simulate_stops import TerminalReader

COLUMNS = 40
# A colour or cursor escape (tqdm moves up with ESC [ A).
_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class Pty:
    """A pty of ``columns`` by 24 (a fresh pty has no size). Its terminal side is closed
    once however often it is asked (a second ``os.close`` of the number could close
    whatever another thread opened since); the controller is the caller's to close
    after it (``TerminalReader.close``), as its reader reads until then."""

    def __init__(self, columns: int) -> None:
        self.controller, self.terminal = pty.openpty()
        fcntl.ioctl(self.terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
        self._terminal_open = True

    def close_terminal(self) -> None:
        if self._terminal_open:
            self._terminal_open = False
            os.close(self.terminal)


@contextlib.contextmanager
def a_terminal(columns: int = COLUMNS) -> Iterator[Pty]:
    """A :class:`Pty` whose terminal side is closed on leaving."""
    terminal = Pty(columns)
    try:
        yield terminal
    finally:
        terminal.close_terminal()


def _widest_redraw(text: str) -> int:
    """The widest of the lines and carriage-return redraws in ``text``, escapes aside."""
    return max(len(_ESCAPE.sub("", part)) for part in re.split(r"[\r\n]", text))


def _simulate_on_a_terminal(*argv: str) -> str:
    """``simulate krypkasino ARGV`` with stderr on a 40-column UTF-8 terminal: what it
    drew."""
    with a_terminal() as terminal:
        simulation = start_session(
            [sys.executable, "-m", "service", "simulate", "krypkasino", *argv],
            stdout=subprocess.DEVNULL,
            stderr=terminal.terminal,
            text=True,
            env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        )
        terminal.close_terminal()
        reader = TerminalReader(terminal.controller)
        try:
            assert simulation.wait(120) == 0
        finally:
            kill_group(simulation)
        return reader.close()


def test_the_games_bar_fits_the_terminal() -> None:
    """On 40 columns the bar was drawn in about 51, each redraw wrapping to a new line.
    It is a column short of the terminal, as tqdm draws its own on stderr (a mutation
    review found a bar of all 40 passed)."""
    drawn = _simulate_on_a_terminal("--players", "2", "--games", "200")
    assert "200/200" in drawn
    assert _widest_redraw(drawn) == COLUMNS - 1, drawn
    # Named, and drawn in blocks where the terminal takes them (tqdm reads the stream's
    # encoding; without it, '#').
    last = _ESCAPE.sub("", re.split(r"[\r\n]", drawn.strip())[-1])
    assert last.startswith("simulate: 100%|█"), last


def test_the_deals_bar_of_a_game_through_a_server_fits_the_terminal(
    server: ServerProcess,
) -> None:
    drawn = _simulate_on_a_terminal("--players", "2", "--server", server.target)
    assert "deal" in drawn
    assert _widest_redraw(drawn) <= COLUMNS, drawn


def _serve_on_a_terminal(env: dict[str, str]) -> str:
    """``serve`` with its console log (auto, on a terminal): what it wrote until stopped."""
    environ = server_environment(
        {
            "CARDRULES_LOG_FORMAT": "auto",
            "CARDRULES_HOST": "127.0.0.1",
            "CARDRULES_GRPC_PORT": "0",
            "CARDRULES_METRICS_PORT": "0",
            **env,
        }
    )
    for name in ("NO_COLOR", "TERM"):
        if name not in env:
            environ.pop(name, None)
    with a_terminal(120) as terminal:
        serving = start_session(
            [sys.executable, "-m", "service", "serve"],
            stdout=terminal.terminal,
            stderr=subprocess.STDOUT,
            env=environ,
            text=True,
        )
        terminal.close_terminal()
        reader = TerminalReader(terminal.controller)
        try:
            reader.wait_for(lambda text: "listening" in text)
            serving.send_signal(signal.SIGTERM)
            assert serving.wait(60) == 0
        finally:
            kill_group(serving)
        return reader.close()


@pytest.mark.parametrize(
    "env",
    [{"NO_COLOR": "1"}, {"NO_COLOR": "anything", "TERM": "xterm"}, {"TERM": "dumb"}],
    ids=["NO_COLOR=1", "NO_COLOR=anything", "TERM=dumb"],
)
def test_the_console_log_has_no_colours_where_none_are_asked_for(env: dict[str, str]) -> None:
    written = _serve_on_a_terminal(env)
    assert "listening" in written and "stopped" in written
    assert "\x1b[" not in written, written


@pytest.mark.parametrize(
    "env", [{"TERM": "xterm"}, {"NO_COLOR": "", "TERM": "xterm"}], ids=["xterm", "NO_COLOR="]
)
def test_the_console_log_is_in_colour_on_a_terminal_otherwise(env: dict[str, str]) -> None:
    """An empty NO_COLOR asks for nothing (no-color.org)."""
    written = _serve_on_a_terminal(env)
    assert "listening" in written
    assert "\x1b[" in written


def test_the_bar_keeps_its_time_through_a_wall_clock_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """tqdm timed the bar with ``time.time``: the wall clock stepped back an hour (NTP,
    a VM resumed) froze the bar and ended it ``[-59:59<00:00, ...]`` (a review). The
    step is tqdm's own clock function stepping, as the wall clock would, mid-run; the
    bar must still redraw during the run, not only at its end."""
    step = [0.0]
    # tqdm.std's clock is time.time, taken by name (``from time import time``).
    monkeypatch.setattr("tqdm.std.time", lambda: time.time() + step[0])
    with a_terminal(80) as terminal, open(terminal.terminal, "w", closefd=False) as tty:
        monkeypatch.setattr(sys, "stderr", tty)
        reader = TerminalReader(terminal.controller)
        bar = games_progress(3)
        step[0] = -3600.0
        time.sleep(0.15)  # past the bar's mininterval
        bar.update(1)
        tty.flush()
        reader.wait_for(lambda text: "1/3" in text, timeout=5)
        bar.update(2)
        bar.close()
        tty.flush()
        drawn = reader.wait_for(lambda text: "3/3" in text)
    reader.close()
    last = _ESCAPE.sub("", re.split(r"[\r\n]", drawn.strip())[-1])
    assert re.search(r"3/3 \[00:0\d<00:00, ", last), last


def test_a_slow_game_after_fast_ones_is_drawn(monkeypatch: pytest.MonkeyPatch) -> None:
    """tqdm's bar waits for as many games as it saw in its last redraw interval before it
    looks at the clock again; its monitor thread, off for the monotonic bar, redrew a bar
    whose games slowed after a fast stretch, 10 to 20 s late (a review). It stays off (a
    mutation review found the monitor on again passed): the bar starts no monitor thread,
    though another tqdm bar of this process may have started one."""
    with a_terminal(80) as terminal, open(terminal.terminal, "w", closefd=False) as tty:
        monkeypatch.setattr(sys, "stderr", tty)
        reader = TerminalReader(terminal.controller)
        monitors = _monitor_threads()
        bar = games_progress(1000)
        assert isinstance(bar, MonotonicBar) and _monitor_threads() == monitors
        for _ in range(300):  # fast games, then a slow one
            time.sleep(0.001)
            bar.update(1)
        time.sleep(0.15)
        bar.update(1)
        tty.flush()
        reader.wait_for(lambda text: "301/1000" in text, timeout=5)
        bar.close()
    reader.close()


def _monitor_threads() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if isinstance(thread, TMonitor)}
