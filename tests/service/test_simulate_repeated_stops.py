"""A stop signal repeated during ``cardrules simulate --games`` changes nothing: the
summary of the games finished, the line saying what stopped the run and the first
signal's exit status all stand (service/simulate_stops.py; README.md, "The
simulator"). bash sends its jobs SIGHUP as its terminal closes, and the kernel a
second one as bash exits; a user presses Ctrl-C twice. The second signal found the
handlers restored once the run had stopped and killed the process before or while
it wrote the summary (an empty ``--json`` output, no line) or as it exited (status
-1 for 129). Real processes, each in a session of its own, and ``SimulationStops`` in
this process."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from service.simulate_stops import Stopped
from tests.service.test_simulate_cli import KX30_DECK
from tests.service.test_simulate_stops import stops_in_this_process

# The stop signals at their default actions, then the command: a test run under
# nohup, or in a script's background, has some ignored, which exec keeps.
_WITH_DEFAULTS = (
    "import os, signal, sys\n"
    "for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):\n"
    "    signal.signal(signum, signal.SIG_DFL)\n"
    "os.execv(sys.executable, [sys.executable, '-m', 'service', *sys.argv[1:]])"
)
GAMES = 100_000  # some fifteen minutes: the run is always stopped
COMMAND = [sys.executable, "-c", _WITH_DEFAULTS, "simulate", "krypkasino", "--players", "2"]
WORDS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated", signal.SIGHUP: "hung up"}
GAPS = [0.0005, 0.005, 0.03]  # the reviewer's: each lost the summary or the status


def _stopped_twice(first: signal.Signals, second: signal.Signals, gap: float) -> None:
    simulation = subprocess.Popen(
        [*COMMAND, "--games", str(GAMES), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert simulation.stderr is not None
        # Into a pipe the progress is whole lines, the first as play begins: the
        # handlers are set by then. Some games played, then the two signals.
        assert simulation.stderr.readline().startswith("simulate:   0% 0/100000")
        time.sleep(0.5)
        simulation.send_signal(first)
        time.sleep(gap)
        simulation.send_signal(second)
        out, err = simulation.communicate(timeout=60)
    finally:
        if simulation.poll() is None:
            simulation.kill()
        simulation.wait(10)
    assert simulation.returncode == 128 + first, (simulation.returncode, err)
    summary = json.loads(out)
    done = summary["games"]
    assert done >= 1 and (summary["complete"], summary["games_asked"]) == (False, GAMES)
    assert summary["seeds"] == [0, done - 1]
    assert "Traceback" not in err and err.endswith("\n")
    assert err.rstrip("\n").split("\n")[-1] == (
        f"cardrules: error: {WORDS[first]} after {done} of {GAMES} games (seeds 0 to {done - 1}); "
        f"the summary covers those; play the rest with --seed {done} --games {GAMES - done} "
        "--summary"
    )


@pytest.mark.parametrize("gap", GAPS)
@pytest.mark.parametrize(
    "signum", [signal.SIGHUP, signal.SIGINT, signal.SIGTERM], ids=["SIGHUP", "SIGINT", "SIGTERM"]
)
def test_the_same_stop_signal_twice_keeps_the_summary_and_the_first_ones_status(
    signum: signal.Signals, gap: float
) -> None:
    _stopped_twice(signum, signum, gap)


def test_another_stop_signal_after_the_first_changes_nothing() -> None:
    """Ctrl-C, then a ``kill`` as the summary is written: still an interrupted run."""
    _stopped_twice(signal.SIGINT, signal.SIGTERM, 0.005)


def test_a_second_signal_as_the_first_unwinds_the_games_is_only_kept() -> None:
    """Within ``playing()``, after the first raised ``Stopped`` and before the block is
    left (a mutation review found a second ``Stopped`` there passed)."""
    with stops_in_this_process() as stops, stops.playing():
        with pytest.raises(Stopped):
            signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGTERM)
    assert stops.late() is None


def test_of_signals_kept_the_first_is_the_stop() -> None:
    """A mutation review found keeping the last passed."""
    with stops_in_this_process() as stops:
        signal.raise_signal(signal.SIGHUP)
        signal.raise_signal(signal.SIGINT)
        late = stops.late()
    assert late is not None and late.status == 129


def _writing_to_a_full_pipe(pid: int) -> bool:
    """The process is blocked writing to a pipe nobody reads (the kernel's wait channel)."""
    with open(f"/proc/{pid}/wchan") as wchan:
        return wchan.read().endswith("pipe_write")  # anon_pipe_write on newer kernels


# A result larger than two buffers of its pipe, whose write blocks part way: a 4-player
# game's --json transcript (some 140 KB, the default pipe of 64 KiB), or a summary whose
# config names 64 decks (NewGame's most; some 40 KB, a pipe of one page); and the
# line after it, as the run stopped after its last game.
RESULTS = {
    "transcript": (["4", "--json"], 2**16, "{} after the game of seed 0 was over"),
    "summary": (
        ["2", "--games", "2", "--deals", "64", *["--deck", KX30_DECK] * 64, "--json"],
        4096,
        "{} after 2 of 2 games (seeds 0 to 1)",
    ),
}


@pytest.mark.parametrize("result", RESULTS)
@pytest.mark.parametrize(
    "signum", [signal.SIGHUP, signal.SIGINT, signal.SIGTERM], ids=["SIGHUP", "SIGINT", "SIGTERM"]
)
def test_a_stop_signal_as_a_large_result_is_written_waits_for_the_whole_of_it(
    signum: signal.Signals, result: str
) -> None:
    """To a reader that does not read yet, the write of a large result blocks part way.
    A stop signal then cut the transcript at 64 KiB (CPython dropped the rest of the
    interrupted write), and the line said the game was over. Now the signal waits for
    the whole result. A summary's line names no rest to play (a mutation review found
    one naming ``--games 0`` passed)."""
    argv, pipe_size, line = RESULTS[result]
    whole = subprocess.run(
        [*COMMAND[:-1], *argv], capture_output=True, text=True, check=True
    ).stdout
    assert len(whole) > 2 * pipe_size  # the write blocks
    simulation = subprocess.Popen(
        [*COMMAND[:-1], *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        pipesize=pipe_size,
    )
    try:
        deadline = time.monotonic() + 60
        while not _writing_to_a_full_pipe(simulation.pid):
            assert time.monotonic() < deadline, "the result's write never blocked"
            time.sleep(0.05)
        simulation.send_signal(signum)
        out, err = simulation.communicate(timeout=60)
    finally:
        if simulation.poll() is None:
            simulation.kill()
        simulation.wait(10)
    assert simulation.returncode == 128 + signum, (simulation.returncode, err)
    assert out == whole
    *progress, last = err.splitlines()  # a summary's progress lines, then one line
    assert result == "summary" or progress == [], err  # a transcript: one line alone
    assert all(shown.startswith("simulate: ") for shown in progress) and err.endswith("\n")
    assert last == "cardrules: error: " + line.format(WORDS[signum])
