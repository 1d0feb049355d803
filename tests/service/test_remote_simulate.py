"""Seeded games over gRPC give exactly the in-process transcript."""

from __future__ import annotations

import json
import subprocess

import pytest

from engine.krypkasino import Config, Removal, Rules, Teams, TieRule
from service.remote_simulate import RemoteError, play_remote_game
from service.simulate import SimulationRequest, play_game, transcript
from service.transcript import dump_document
from tests.service.server_process import CARDRULES

REQUESTS = [
    SimulationRequest(Config(players=2), seed=11),
    SimulationRequest(Config(players=4, teams=Teams.PAIRS), seed=5, policy="greedy"),
    SimulationRequest(
        Config(players=3, draw_for_deal=True, target_score=25, tie_rule=TieRule.TIEBREAK_DEAL),
        seed=9,
    ),
    SimulationRequest(
        Config(players=5, rules=Rules(four_four=True, bordstabbe=True, last_capture_point=True)),
        seed=2,
        policy="greedy",
    ),
    SimulationRequest(
        Config(
            players=6,
            teams=Teams.TRIOS,
            rules=Rules(removal=Removal.SPADES, court_cards_rank_only=True),
            match_deals=6,
        ),
        seed=4,
    ),
]


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: f"{r.config.players}p-{r.seed}")
def test_remote_transcript_equals_in_process(grpc_target, request_):
    local = transcript(play_game(request_))
    remote = transcript(play_remote_game(request_, grpc_target))
    assert remote == local
    assert len(remote["turns"]) > 0


def test_cli_server_flag_prints_the_in_process_document(grpc_target):
    args = ["simulate", "krypkasino", "--players", "4", "--seed", "21", "--json"]
    local = subprocess.run([CARDRULES, *args], capture_output=True, text=True, check=True)
    remote = subprocess.run(
        [CARDRULES, *args, "--server", grpc_target], capture_output=True, text=True, check=True
    )
    assert remote.stdout == local.stdout
    request = SimulationRequest(Config(players=4), seed=21)
    assert local.stdout == dump_document(transcript(play_game(request)))


def test_unreachable_server_is_one_line_and_status_1():
    with pytest.raises(RemoteError, match="UNAVAILABLE"):
        play_remote_game(SimulationRequest(Config(players=2)), "127.0.0.1:1")
    done = subprocess.run(
        [CARDRULES, "simulate", "krypkasino", "--players", "2", "--server", "127.0.0.1:1"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("address", "complaint"),
    [
        ("", "the server address is empty"),
        ("  ", "empty"),
        ("localhost:99999", "65535"),
        # grpc would take port 443 and fail to connect, far from the mistake
        ("localhost", "'localhost' has no port: give HOST:PORT, e.g. localhost:50051"),
        ("[::1]", "has no port"),
    ],
)
def test_a_blank_portless_or_out_of_range_server_address_is_bad_input(address, complaint):
    done = subprocess.run(
        [CARDRULES, "simulate", "krypkasino", "--players", "2", "--server", address],
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert complaint in done.stderr and done.stderr.count("\n") == 1


def test_a_summary_through_the_server_says_no_invariant_was_checked(grpc_target):
    args = ["simulate", "krypkasino", "--players", "2", "--games", "2", "--server", grpc_target]
    as_json = subprocess.run([CARDRULES, *args, "--json"], capture_output=True, text=True)
    as_text = subprocess.run([CARDRULES, *args], capture_output=True, text=True)
    assert (as_json.returncode, as_text.returncode) == (0, 0)
    summary = json.loads(as_json.stdout)
    assert summary["invariant_checks"] is None and summary["turns"] > 0
    assert "invariant checks: not run" in as_text.stdout
    assert "invariant checks passed" not in as_text.stdout
