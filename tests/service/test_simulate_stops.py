"""``cardrules simulate --games``: a run stopped by a signal keeps the games it finished,
and its progress on stderr is a side channel that never costs the result (README.md,
"The simulator"). Real ``python -m service`` processes; ``SimulationStops`` and the
progress lines also in this process, with real signals and a clock of the test's."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from service import cli
from service.simulate_progress import LOG_INTERVAL_SECONDS, LineProgress, SideChannel
from service.simulate_stops import SimulationStops, Stopped
from tests.service.simulate_process import simulate_command


class TerminalReader:
    """What a process writes to the terminal it has for stderr (a pty), read on a
    thread so that the process never blocks on a full terminal."""

    def __init__(self, master: int) -> None:
        self._master = master
        self._chunks: list[bytes] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            try:
                ready, _, _ = select.select([self._master], [], [], 0.1)
                if ready:
                    chunk = os.read(self._master, 4096)
                    if not chunk:
                        return
                    self._chunks.append(chunk)
            except OSError:  # EIO: every writer closed the terminal
                return

    @property
    def text(self) -> str:
        # The terminal turns "\n" into "\r\n" (onlcr).
        return b"".join(self._chunks).decode().replace("\r\n", "\n")

    def wait_for(self, found: Callable[[str], bool], timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while not found(self.text):
            assert time.monotonic() < deadline, f"not seen on the terminal: {self.text!r}"
            time.sleep(0.02)
        return self.text

    def close(self) -> str:
        self._thread.join(10)
        os.close(self._master)
        return self.text


@contextlib.contextmanager
def on_a_terminal(command: list[str]) -> Iterator[tuple[subprocess.Popen[str], TerminalReader]]:
    """``command`` with stdout a pipe and stderr a terminal, in a session of its own."""
    master, slave = pty.openpty()
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=slave, text=True, start_new_session=True
    )
    os.close(slave)
    reader = TerminalReader(master)
    try:
        yield process, reader
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)


def games_shown(text: str) -> int:
    """The number of games tqdm's bar last showed (0 before it shows any)."""
    counts = re.findall(r"(\d+)/3000\b", text)
    return int(counts[-1]) if counts else 0


@pytest.mark.parametrize(
    ("signum", "status", "word"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")],
    ids=["SIGINT", "SIGTERM"],
)
def test_a_stopped_run_prints_the_summary_of_the_games_it_finished(capsys, signum, status, word):
    """Ctrl-C or SIGTERM in a long run: the games played are summarized, marked
    incomplete, and stderr says which seeds they were and how to play the rest; the
    status stays as a shell reports the signal. It printed nothing, losing them all
    (SIGTERM: no word, the bar's line left unended)."""
    command = simulate_command("--players", "2", "--games", "3000", "--seed", "5", "--json")
    with on_a_terminal(command) as (simulation, terminal):
        terminal.wait_for(lambda text: games_shown(text) >= 3)
        simulation.send_signal(signum)
        out, _ = simulation.communicate(timeout=30)
        err = terminal.close()
    assert simulation.returncode == status, err
    summary = json.loads(out)
    done = summary["games"]
    assert (summary["complete"], summary["games_asked"]) == (False, 3000)
    assert done >= 3 and summary["seeds"] == [5, 4 + done]
    assert err.endswith("\n") and "Traceback" not in err
    *bar, message = err.rstrip("\n").split("\n")
    assert message == (
        f"cardrules: error: {word} after {done} of 3000 games (seeds 5 to {4 + done}); the "
        f"summary covers those; play the rest with --seed {5 + done} --games {3000 - done} --summary"
    )
    assert games_shown(bar[-1]) == done  # the bar's last line, ended before the message
    # The same counts as a run of just those games: summaries of the parts merge exactly.
    argv = ["simulate", "krypkasino", "--players", "2", "--games", str(done), "--seed", "5"]
    assert cli.main([*argv, "--json"]) == 0
    whole = json.loads(capsys.readouterr().out)
    assert {**summary, "complete": True, "games_asked": done} == whole


# --- progress on stderr: a side channel ---------------------------------------------------

SUMMARY = ["simulate", "krypkasino", "--players", "2", "--games", "3"]


def _summary_of(stdout: str) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads(stdout)
    assert (summary["games"], summary["complete"]) == (3, True)
    return summary


#: As a user's shell runs the command: a stderr buffered by Python, whose failed write is
#: met again when Python flushes it at exit (status 120), unless the command stopped
#: writing there. ``PYTHONUNBUFFERED``, which a test run may set, would hide that.
BUFFERED = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}


def test_a_stderr_whose_reader_left_loses_the_progress_not_the_result():
    """``2>&1 >out | head -c 20``: the bar's write met a broken pipe, and the run
    exited 1 with nothing on stdout."""
    simulation = subprocess.Popen(
        [sys.executable, "-m", "service", *SUMMARY, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=BUFFERED,
    )
    assert simulation.stderr is not None and simulation.stdout is not None
    simulation.stderr.close()  # the reader gone before the first write
    out = simulation.stdout.read()
    assert simulation.wait(30) == 0
    _summary_of(out)


def test_a_full_stderr_loses_the_progress_not_the_result():
    """``2>/dev/full``: the bar's write failed (ENOSPC) and so did the run."""
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "service", *SUMMARY, "--json"],
            stdout=subprocess.PIPE,
            stderr=full,
            text=True,
            timeout=60,
            env=BUFFERED,
        )
    assert done.returncode == 0
    _summary_of(done.stdout)


class _BrokenTerminal(io.StringIO):
    """A terminal that went away (the window closed): every write fails."""

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def _closed_file() -> io.StringIO:
    closed = io.StringIO()
    closed.close()
    return closed


@pytest.mark.parametrize(
    "stderr", [_BrokenTerminal, _closed_file], ids=["a terminal gone", "a closed file"]
)
def test_a_stderr_that_cannot_be_written_loses_the_progress_not_the_result(
    monkeypatch, capsys, stderr
):
    """A closed file's write raises ValueError, not OSError (a mutation review found
    that leaving ValueError out of the progress line's write passed)."""
    monkeypatch.setattr(sys, "stderr", stderr())
    assert cli.main([*SUMMARY, "--json"]) == 0
    _summary_of(capsys.readouterr().out)


def test_into_a_log_the_progress_is_whole_lines_at_the_start_and_the_end():
    """No terminal: lines ended by newlines, not tqdm's ``\\r``-separated redraws (a
    log got one long line), and never the same line twice."""
    done = subprocess.run(
        [sys.executable, "-m", "service", *SUMMARY[:-1], "20"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    assert "\r" not in done.stderr and done.stderr.endswith("\n")
    first, last = done.stderr.splitlines()
    assert first.startswith("simulate:   0% 0/20 [00:00<")
    assert last.startswith("simulate: 100% 20/20 [")


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_into_a_log_a_line_comes_every_interval_and_never_twice():
    """README.md: "a line at the start, every 30 s and at the end". tqdm's monitor
    thread added a stale copy of a redraw 10 s after it (1323/2600 at 00:30, again
    at 00:40)."""
    out = io.StringIO()
    clock = _Clock()
    progress = LineProgress(10, SideChannel(out), clock)
    for _ in range(10):
        clock.now += LOG_INTERVAL_SECONDS / 3  # a game every 10 s
        progress.update(1)
    progress.close()
    progress.close()  # nothing new: nothing written
    shown = [re.search(r" (\d+)/10 \[(\S+)<", line) for line in out.getvalue().splitlines()]
    assert [(m[1], m[2]) for m in shown if m] == [
        ("0", "00:00"),
        ("3", "00:30"),
        ("6", "01:00"),
        ("9", "01:30"),
        ("10", "01:40"),
    ]
    assert out.getvalue().count("\n") == 5


def test_a_game_longer_than_the_interval_gets_one_line_not_one_per_interval_missed():
    """The line after a late one comes at the next whole interval from the start, not an
    interval after the late line (a mutation review found the latter passed)."""
    out = io.StringIO()
    clock = _Clock()
    progress = LineProgress(4, SideChannel(out), clock)
    clock.now += LOG_INTERVAL_SECONDS * 3.5
    progress.update(1)
    clock.now += LOG_INTERVAL_SECONDS / 3  # still within the interval begun at 90 s
    progress.update(1)
    clock.now += LOG_INTERVAL_SECONDS / 3  # 125 s: within the one begun at 120 s
    progress.update(1)
    clock.now += 1
    progress.update(1)
    progress.close()
    assert [line.split(" [")[0] for line in out.getvalue().splitlines()] == [
        "simulate:   0% 0/4",
        "simulate:  25% 1/4",
        "simulate:  75% 3/4",
        "simulate: 100% 4/4",
    ]


# --- SimulationStops in this process ---------------------------------------------------

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def stops_in_this_process() -> Iterator[SimulationStops]:
    """``SimulationStops`` in this process, the stop signals at their defaults before it
    (as a command's are; a test run may ignore some) and restored after. Signals come
    by ``signal.raise_signal``, whose handler has run when it returns."""
    previous = {signum: signal.signal(signum, signal.SIG_DFL) for signum in _STOP_SIGNALS}
    try:
        with SimulationStops() as stops:
            # A raised signal found at SIG_DFL would end the whole pytest process.
            taken = {signum: signal.getsignal(signum) for signum in _STOP_SIGNALS}
            assert all(h == stops._handle for h in taken.values()), taken
            yield stops
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def test_a_signal_before_playing_stops_it_as_it_begins():
    """One kept since the handlers were set is raised on entering ``playing()`` (a
    mutation review found not raising it passed)."""
    with stops_in_this_process() as stops:
        signal.raise_signal(signal.SIGTERM)
        with pytest.raises(Stopped) as stopped, stops.playing():
            pass
    assert stopped.value.status == 143


def test_a_signal_while_held_is_raised_after_the_block():
    """A mutation review found a signal kept in ``held()`` and never raised passed."""
    with (
        stops_in_this_process() as stops,
        stops.playing(),
        pytest.raises(Stopped) as stopped,
        stops.held(),  # raises it as it ends
    ):
        signal.raise_signal(signal.SIGTERM)
    assert stopped.value.status == 143


def handlers_after(steps: Callable[[SimulationStops], None], *, to_exit: bool) -> list[object]:
    """The stop signals' handlers once a ``SimulationStops`` block that ran ``steps``
    (a ``Stopped`` it raised taken) has ended, the handlers at their defaults before."""
    previous = {signum: signal.signal(signum, signal.SIG_DFL) for signum in _STOP_SIGNALS}
    try:
        with contextlib.suppress(Stopped), SimulationStops(to_exit=to_exit) as stops:
            steps(stops)
        return [signal.getsignal(signum) for signum in _STOP_SIGNALS]
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _stopped_while_held(stops: SimulationStops) -> None:
    with stops.playing(), stops.held():
        signal.raise_signal(signal.SIGTERM)


def _stopped_while_writing(stops: SimulationStops) -> None:
    with stops.writing():
        signal.raise_signal(signal.SIGHUP)
    late = stops.late()
    assert late is not None and late.status == 129


def _not_stopped(stops: SimulationStops) -> None:
    with stops.playing():
        pass


@pytest.mark.parametrize(
    ("steps", "to_exit", "after"),
    [
        # The command's own process, stopped: a repeat must not kill it before it exits.
        (_stopped_while_held, True, signal.SIG_IGN),
        (_stopped_while_writing, True, signal.SIG_IGN),
        # Not stopped, or a caller's process: its handlers are its own again.
        (_not_stopped, True, signal.SIG_DFL),
        (_stopped_while_held, False, signal.SIG_DFL),
        (_stopped_while_writing, False, signal.SIG_DFL),
    ],
    ids=["held_to_exit", "writing_to_exit", "not_stopped", "held", "writing"],
)
def test_after_the_block_the_signals_stay_ignored_only_after_a_stop_with_to_exit(
    steps: Callable[[SimulationStops], None], to_exit: bool, after: object
) -> None:
    """A mutation review found each of these unpinned: ignoring them after any stop, and
    a stop raised after ``held()`` or taken by ``late()`` not counted as one."""
    assert handlers_after(steps, to_exit=to_exit) == [after] * len(_STOP_SIGNALS)


def test_a_simulation_run_outside_the_main_thread_leaves_the_signals_alone(capsys) -> None:
    """Signals can be handled in the main thread only: ``cli.main`` on another thread
    (a caller's worker) plays its games and sets no handler."""
    before = [signal.getsignal(signum) for signum in _STOP_SIGNALS]
    status: list[int] = []
    thread = threading.Thread(target=lambda: status.append(cli.main([*SUMMARY, "--json"])))
    thread.start()
    thread.join(60)
    assert status == [0]
    _summary_of(capsys.readouterr().out)
    assert [signal.getsignal(signum) for signum in _STOP_SIGNALS] == before


def test_without_a_stderr_the_run_has_no_progress_and_its_result(monkeypatch, capsys) -> None:
    """``2>&-``: Python's ``sys.stderr`` is None (a mutation review found that without
    that case the run exited 1 with nothing on stdout)."""
    monkeypatch.setattr(sys, "stderr", None)
    assert cli.main([*SUMMARY, "--json"]) == 0
    _summary_of(capsys.readouterr().out)
