"""``--refuse-chosen-deals`` (docs/operations.md, "NewGame belongs to the backend"): a
server that player-facing callers reach refuses a NewGame that chooses its cards,
``seed``, ``decks`` or ``draw``, as INVALID_ARGUMENT ``CHOSEN_DEAL_REFUSED`` with a field
violation for each (design section 5), over gRPC and HTTP alike; ``config.first_dealer``,
which every view's config shows, stays allowed. Real servers on loopback."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from google.protobuf import json_format

from engine.cards import full_deck
from engine.krypkasino import Config
from service.config import ConfigValueError, add_server_arguments, resolve
from service.tokens import KeyRing, StateSealer
from tests.service.grpc_helpers import Stub, connect, deck_proto, refused
from tests.service.http_helpers import exchange, refusal, rpc
from tests.service.server_process import (
    TEST_KEY,
    ServerProcess,
    running,
    serve_and_fail,
    start_server,
    stop_and_check,
)

REASON = "CHOSEN_DEAL_REFUSED"
WHY = "this server deals only cards of its own choosing (--refuse-chosen-deals)"
DECK = deck_proto(full_deck(Config(2).validate().copies))
# The draw for deal needs no more than one deck's cards: seat 0 draws AS, seat 1 2S.
DRAW = deck_proto(full_deck(1)[0:5:4])

#: (request, the fields it chooses the cards by), each a NewGame the flag refuses.
CHOSEN: dict[str, tuple[pb.NewGameRequest, list[str]]] = {
    "seed": (pb.NewGameRequest(config=pb.GameConfig(players=2), seed=7), ["seed"]),
    # A seed of 0 is given too (``optional``): 0 is a seed like any other.
    "seed 0": (pb.NewGameRequest(config=pb.GameConfig(players=2), seed=0), ["seed"]),
    "decks": (pb.NewGameRequest(config=pb.GameConfig(players=2), decks=[DECK]), ["decks"]),
    "draw": (
        pb.NewGameRequest(config=pb.GameConfig(players=2, draw_for_deal=True), draw=DRAW),
        ["draw"],
    ),
    "all three": (
        pb.NewGameRequest(
            config=pb.GameConfig(players=2, draw_for_deal=True), seed=7, decks=[DECK], draw=DRAW
        ),
        ["seed", "decks", "draw"],
    ),
    # Refused before anything else is checked: the configuration is never looked at.
    "seed, players 9": (pb.NewGameRequest(config=pb.GameConfig(players=9), seed=7), ["seed"]),
}

#: NewGames that choose no card, which the flag leaves alone.
UNCHOSEN: dict[str, pb.NewGameRequest] = {
    "plain": pb.NewGameRequest(config=pb.GameConfig(players=2)),
    "first dealer": pb.NewGameRequest(config=pb.GameConfig(players=3, first_dealer=2)),
    "draw from the seed": pb.NewGameRequest(config=pb.GameConfig(players=2, draw_for_deal=True)),
}


@pytest.fixture(scope="module")
def refusing() -> Iterator[ServerProcess]:
    running_server = start_server(args=["--refuse-chosen-deals"])
    yield running_server
    stop_and_check(running_server)


@pytest.fixture(scope="module")
def refusing_stub(refusing: ServerProcess) -> Iterator[Stub]:
    with connect(refusing.target) as client:
        yield client


def as_json(request: pb.NewGameRequest) -> dict[str, Any]:
    return json_format.MessageToDict(request)


def new_game_over_http(server: ServerProcess, body: dict[str, Any]) -> tuple[int, Any]:
    status, _, value = exchange(
        f"{server.http_url}/v1/krypkasino:newGame", json.dumps(body).encode()
    )
    return status, value


@pytest.mark.parametrize("case", CHOSEN)
def test_grpc_refuses_a_chosen_deal_naming_each_field(refusing_stub: Stub, case: str) -> None:
    request, fields = CHOSEN[case]
    refusal_seen = refused(refusing_stub.NewGame, request)
    assert refusal_seen.code is grpc.StatusCode.INVALID_ARGUMENT
    assert refusal_seen.reason == REASON
    assert refusal_seen.metadata == {}
    assert refusal_seen.violations == dict.fromkeys(fields, WHY)
    assert refusal_seen.message == f"{' and '.join(fields)}: {WHY}"


@pytest.mark.parametrize("case", CHOSEN)
def test_http_refuses_a_chosen_deal_as_grpc_does(refusing: ServerProcess, case: str) -> None:
    request, fields = CHOSEN[case]
    status, value = new_game_over_http(refusing, as_json(request))
    assert status == 400
    code, reason, metadata, violations = refusal(value)
    assert (code, reason, metadata) == (grpc.StatusCode.INVALID_ARGUMENT.value[0], REASON, {})
    assert violations == dict.fromkeys(fields, WHY)
    assert value["message"] == f"{' and '.join(fields)}: {WHY}"


@pytest.mark.parametrize("case", UNCHOSEN)
def test_a_new_game_that_chooses_no_card_is_dealt(
    refusing: ServerProcess, refusing_stub: Stub, case: str
) -> None:
    request = UNCHOSEN[case]
    asked = (request.config.players, request.config.first_dealer, request.config.draw_for_deal)
    config = refusing_stub.NewGame(request, timeout=10).view.config
    assert (config.players, config.first_dealer, config.draw_for_deal) == asked
    config_json = rpc(refusing, "newGame", as_json(request))["view"]["config"]
    assert json_format.ParseDict(config_json, pb.GameConfig()) == config


def test_the_first_dealer_chosen_is_in_every_view(refusing_stub: Stub) -> None:
    """Why ``first_dealer`` is taken: everyone sees it, in the public view's config."""
    game = refusing_stub.NewGame(UNCHOSEN["first dealer"], timeout=10)
    public = refusing_stub.GetView(pb.GetViewRequest(state=game.state), timeout=10).view
    assert public.config.first_dealer == 2 and public.dealer == 2


def test_a_server_without_the_flag_takes_a_seed_and_decks(stub: Stub) -> None:
    """Off by default: tests and replays give seeds and decks."""
    request, _ = CHOSEN["all three"]
    token = stub.NewGame(request, timeout=10).state
    state = pb.GameState.FromString(
        StateSealer(KeyRing.parse(TEST_KEY), game="krypkasino").open(token)
    )
    assert state.seed == 7


def test_the_variable_turns_it_on_in_any_case() -> None:
    with (
        running(env={"CARDRULES_REFUSE_CHOSEN_DEALS": "TRUE"}) as server,
        connect(server.target) as client,
    ):
        request, fields = CHOSEN["decks"]
        assert refused(client.NewGame, request).violations == dict.fromkeys(fields, WHY)


def parser() -> argparse.ArgumentParser:
    built = argparse.ArgumentParser()
    add_server_arguments(built)
    return built


@pytest.mark.parametrize(
    ("argv", "variable", "refuses"),
    [
        ([], None, False),
        ([], "1", True),
        ([], " on ", True),
        ([], "No", False),
        (["--refuse-chosen-deals"], None, True),
        (["--refuse-chosen-deals"], "false", True),
        (["--no-refuse-chosen-deals"], "true", False),
    ],
)
def test_the_flag_wins_over_the_variable_either_way(
    argv: list[str], variable: str | None, refuses: bool
) -> None:
    environ = {} if variable is None else {"CARDRULES_REFUSE_CHOSEN_DEALS": variable}
    assert resolve(parser().parse_args(argv), environ=environ).refuse_chosen_deals is refuses


@pytest.mark.parametrize("value", ["maybe", "", " ", "2"])
def test_a_bad_value_of_the_variable_is_refused_naming_it(value: str) -> None:
    with pytest.raises(ConfigValueError) as refused_value:
        resolve(parser().parse_args([]), environ={"CARDRULES_REFUSE_CHOSEN_DEALS": value})
    if value.strip():
        assert str(refused_value.value) == (
            "CARDRULES_REFUSE_CHOSEN_DEALS: must be true or false "
            f"(true, false, 1, 0, yes, no, on or off), not {value!r}"
        )
    else:
        assert str(refused_value.value) == (
            "CARDRULES_REFUSE_CHOSEN_DEALS: set but empty: give a value, or leave it out for "
            "the default"
        )


def test_a_server_given_a_bad_value_exits_2_with_one_line() -> None:
    result = serve_and_fail(env={"CARDRULES_REFUSE_CHOSEN_DEALS": "sometimes"})
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        "cardrules: error: CARDRULES_REFUSE_CHOSEN_DEALS: must be true or false "
        "(true, false, 1, 0, yes, no, on or off), not 'sometimes'\n"
    )


def test_the_flag_takes_no_value() -> None:
    result = serve_and_fail("--refuse-chosen-deals=yes")
    assert result.returncode == 2
    assert result.stderr.startswith(
        "cardrules: error: --refuse-chosen-deals/--no-refuse-chosen-deals: takes no value, "
        "not 'yes': give --refuse-chosen-deals or --no-refuse-chosen-deals alone"
    )
