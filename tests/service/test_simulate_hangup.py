"""SIGHUP during ``cardrules simulate --games`` stops the run as SIGINT and SIGTERM do, with
the games it finished summarized and exit status 129 (service/simulate_stops.py;
README.md, "The simulator"): the run ended silently, losing them all. A SIGHUP the run
was started with set to be ignored (``nohup``) stays ignored. Real processes, each in
a session of its own with stderr a terminal, whose bar says how many games are done."""

from __future__ import annotations

import json
import signal
import sys

from tests.service.test_simulate_stops import games_shown, on_a_terminal

# The SIGHUP action the test asks for (argv[1]: SIG_DFL or SIG_IGN), then the command:
# a test run under nohup has SIGHUP ignored, which exec keeps. SIGINT's default too, as
# tests/service/simulate_process.py sets it.
_WITH_SIGHUP = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "signal.signal(signal.SIGHUP, getattr(signal, sys.argv[1])); "
    "os.execv(sys.executable, [sys.executable, '-m', 'service', *sys.argv[2:]])"
)
ARGV = ["simulate", "krypkasino", "--players", "2", "--games", "3000", "--seed", "5", "--json"]


def _simulate(sighup: str) -> list[str]:
    return [sys.executable, "-c", _WITH_SIGHUP, sighup, *ARGV]


def test_a_hang_up_prints_the_summary_of_the_games_finished_and_exits_129() -> None:
    with on_a_terminal(_simulate("SIG_DFL")) as (simulation, terminal):
        terminal.wait_for(lambda text: games_shown(text) >= 3)
        simulation.send_signal(signal.SIGHUP)
        out, _ = simulation.communicate(timeout=30)
        err = terminal.close()
    assert simulation.returncode == 128 + signal.SIGHUP == 129, err
    summary = json.loads(out)
    done = summary["games"]
    assert (summary["complete"], summary["games_asked"]) == (False, 3000)
    assert done >= 3 and summary["seeds"] == [5, 4 + done]
    assert "Traceback" not in err
    assert err.rstrip("\n").split("\n")[-1] == (
        f"cardrules: error: hung up after {done} of 3000 games (seeds 5 to {4 + done}); the "
        f"summary covers those; play the rest with --seed {5 + done} --games {3000 - done} --summary"
    )


def test_a_hang_up_ignored_from_the_start_stays_ignored() -> None:
    """``nohup cardrules simulate ...``: the run outlives its terminal; a SIGTERM still
    stops it, as the proof that the SIGHUP came while it ran."""
    with on_a_terminal(_simulate("SIG_IGN")) as (simulation, terminal):
        terminal.wait_for(lambda text: games_shown(text) >= 3)
        simulation.send_signal(signal.SIGHUP)
        after = games_shown(terminal.text)
        terminal.wait_for(lambda text: games_shown(text) >= after + 3)
        assert simulation.poll() is None
        simulation.send_signal(signal.SIGTERM)
        out, _ = simulation.communicate(timeout=30)
        err = terminal.close()
    assert simulation.returncode == 143, err
    done = json.loads(out)["games"]
    assert done >= after + 3
    assert err.rstrip("\n").split("\n")[-1].startswith(f"cardrules: error: terminated after {done}")
