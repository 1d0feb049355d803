"""A stop signal repeated during ``cardrules simulate --games`` changes nothing: the
summary of the games finished, the line saying what stopped the run and the first
signal's exit status all stand (service/simulate_stops.py; README.md, "The
simulator"). bash sends its jobs SIGHUP as its terminal closes, and the kernel a
second one as bash exits; a user presses Ctrl-C twice. The second signal found the
handlers restored once the run had stopped and killed the process before or while
it wrote the summary (an empty ``--json`` output, no line) or as it exited (status
-1 for 129). Real processes, each in a session of its own."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

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


def _writing_to_a_full_pipe(pid: int) -> bool:
    """The process is blocked writing to a pipe nobody reads (the kernel's wait channel)."""
    with open(f"/proc/{pid}/wchan") as wchan:
        return wchan.read().endswith("pipe_write")  # anon_pipe_write on newer kernels


@pytest.mark.parametrize(
    "signum", [signal.SIGHUP, signal.SIGINT, signal.SIGTERM], ids=["SIGHUP", "SIGINT", "SIGTERM"]
)
def test_a_stop_signal_as_a_large_transcript_is_written_waits_for_the_whole_of_it(
    signum: signal.Signals,
) -> None:
    """A 4-player game's ``--json`` transcript (some 140 KB) outgrows a pipe's buffer: to a
    reader that does not read yet, the write blocks part way. A stop signal then cut the
    transcript at 64 KiB (CPython dropped the rest of the interrupted write), and the
    line said the game was over. Now the signal waits for the whole transcript."""
    whole = subprocess.run(
        [*COMMAND[:-1], "4", "--json"], capture_output=True, text=True, check=True
    ).stdout
    assert len(whole) > 2**17  # more than two pipe buffers: the write blocks
    simulation = subprocess.Popen(
        [*COMMAND[:-1], "4", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not _writing_to_a_full_pipe(simulation.pid):
            assert time.monotonic() < deadline, "the transcript's write never blocked"
            time.sleep(0.05)
        simulation.send_signal(signum)
        out, err = simulation.communicate(timeout=60)
    finally:
        if simulation.poll() is None:
            simulation.kill()
        simulation.wait(10)
    assert simulation.returncode == 128 + signum, (simulation.returncode, err)
    assert out == whole
    assert err == f"cardrules: error: {WORDS[signum]} after the game of seed 0 was over\n"
