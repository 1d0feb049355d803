"""``cardrules simulate --summary``: the summary whatever the number of games, so that the
rest of a stopped run, one game or many, prints counts that add to the first part's
(README.md, "The simulator"). ``--games 1`` alone prints a transcript, and the resume
line of a run stopped with one game left named just that."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import grpc

from service.cli import main
from tests.service.simulate_process import simulate_command
from tests.service.test_remote_simulate import api_server
from tests.service.test_simulate_cli import ADDED, ADDED_PER_SEAT, VARIANTS, all_events, run

# The counts a summary adds up game by game; invariant_checks is None through a server.
COUNTS = [key for key in ADDED if key != "invariant_checks"] + ADDED_PER_SEAT


def summary_of(capsys: Any, *argv: str) -> dict[str, Any]:
    status, out, err = run(capsys, *argv, "--json")
    assert status == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


def test_one_game_with_summary_prints_a_summary_of_that_game(capsys):
    """The keys of a two-game summary, the counts of the one game's transcript."""
    one = summary_of(capsys, *VARIANTS, "--seed", "3", "--games", "1", "--summary")
    two = summary_of(capsys, *VARIANTS, "--seed", "3", "--games", "2")
    assert list(one) == list(two)
    game = summary_of(capsys, *VARIANTS, "--seed", "3")  # the transcript
    assert (one["games"], one["games_asked"], one["complete"]) == (1, 1, True)
    assert one["seeds"] == [3, 3]
    assert (one["deals"], one["turns"]) == (len(game["deals"]), len(game["turns"]))
    assert one["seat_score_totals"] == game["result"]["seat_totals"]
    assert one["team_score_totals"] == game["result"]["team_totals"]
    wins = [0] * len(one["team_wins"])
    for team in game["result"]["winners"]:
        wins[team] += 1
    assert one["team_wins"] == wins
    kinds = [e["type"] for e in all_events(game)]
    assert one["crawls"] == kinds.count("crawled")
    assert one["tiebreak_deals"] == kinds.count("tiebreak_deal")
    assert one["bordstabbe_deals"] == kinds.count("bordstabbe")
    # Two one-game summaries add up to the two-game one.
    other = summary_of(capsys, *VARIANTS, "--seed", "4", "--games", "1", "--summary")
    for key in COUNTS:
        assert _added(one[key], other[key]) == two[key], key


def test_one_game_with_summary_prints_the_text_summary(capsys):
    status, out, err = run(capsys, "--players", "2", "--seed", "9", "--summary")
    assert status == 0, err
    assert out.startswith("Krypkasino: 2 players, rules: default, seeds 9..9, policy random\n")
    assert "\ngames 1, deals 2, turns " in out and "\nD1 seat" not in out


def _added(first: Any, second: Any) -> Any:
    if isinstance(first, list):
        return [a + b for a, b in zip(first, second, strict=True)]
    return first + second


def test_a_run_stopped_with_one_game_left_resumes_with_a_summary(capsys):
    """A ``--server`` that dies after the first of two games: the resume line's flags
    print a summary of the last game, whose counts add to the first part's into the
    whole run's. They said ``--games 1``, which prints a transcript: no counts to add."""
    scores = 0

    def die_after_one_game(name: str, context: grpc.ServicerContext) -> None:
        nonlocal scores
        if scores == 1:
            context.abort(grpc.StatusCode.UNAVAILABLE, "server gone")
        scores += name == "Score"

    argv = ("--players", "3", "--seed", "6")
    with api_server(die_after_one_game) as target:
        done = subprocess.run(
            simulate_command(*argv, "--games", "2", "--json", "--server", target),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1, done.stderr
    first = json.loads(done.stdout)
    assert (first["complete"], first["games"], first["seeds"]) == (False, 1, [6, 6])
    line = done.stderr.splitlines()[-1]
    assert line == (
        f"cardrules: error: {target}: UNAVAILABLE: server gone; stopped after 1 of 2 games "
        "(seed 6); the summary covers those; play the rest with --seed 7 --games 1 --summary"
    )
    rest = line.split("play the rest with ")[1].split()
    second = summary_of(capsys, "--players", "3", *rest)
    whole = summary_of(capsys, *argv, "--games", "2")
    for key in COUNTS:
        assert _added(first[key], second[key]) == whole[key], key


def test_a_one_game_summary_stopped_before_its_game_was_over_prints_none():
    done = subprocess.run(
        simulate_command(
            *("--players", "2", "--seed", "8", "--summary", "--server", "127.0.0.1:1")
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (1, "")
    line = done.stderr.splitlines()[-1]
    assert line.startswith("cardrules: error: 127.0.0.1:1: UNAVAILABLE: ")
    assert line.endswith("; stopped before the game of seed 8 was started: no summary")


def test_help_names_summary(capsys):
    assert main(["simulate", "--help"]) == 0
    assert "--summary" in capsys.readouterr().out
