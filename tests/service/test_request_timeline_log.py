"""What a game RPC's request line tells of its place in the game (docs/operations.md,
"Log lines"; design section 6): the seat it names, the move number of the state it
sent, the state id of the state answered, and for NewGame who chose the cards.

A tournament audit found the lines could not rebuild a game's timeline: two forks of
one stored state and an illegal try logged alike, and a NewGame whose deal the caller
chose (a seed, decks) logged as one the server shuffled. Real servers on loopback,
over gRPC and HTTP alike; never a card on a line, not even the one a refused Play tried.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Iterator
from typing import TypeVar

import grpc
import pytest
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from google.protobuf import json_format
from google.protobuf.message import Message

from engine.cards import card_str, full_deck
from engine.krypkasino import Config
from service.krypkasino_api import DEAL_SOURCES
from tests.service.grpc_helpers import card_code, card_proto, connect, deck_proto
from tests.service.http_helpers import exchange
from tests.service.server_process import ServerProcess, start_server, stop_and_check

TRANSPORTS = ("grpc", "http")
DECK = deck_proto(full_deck(Config(2).validate().copies))
# Enough of one deck to decide the draw for deal: seat 0 draws AS, seat 1 2S.
DRAW = deck_proto(full_deck(1)[0:5:4])

ResponseT = TypeVar("ResponseT", bound=Message)
_ids = itertools.count()


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    running_server = start_server()
    yield running_server
    stop_and_check(running_server)


def call(
    server: ServerProcess,
    transport: str,
    method: str,
    request: Message,
    response: type[ResponseT],
) -> tuple[ResponseT | None, dict[str, object]]:
    """``method`` over ``transport`` with a fresh request id: its answer (None when
    refused) and its request line."""
    request_id = f"timeline-{method}-{next(_ids)}"
    answer: ResponseT | None = None
    if transport == "grpc":
        # A refusal's answer is None: its line tells why.
        with connect(server.target) as stub, contextlib.suppress(grpc.RpcError):
            answer = getattr(stub, method)(
                request, metadata=(("x-request-id", request_id),), timeout=10
            )
    else:
        name = method[0].lower() + method[1:]
        status, _, value = exchange(
            f"{server.http_url}/v1/krypkasino:{name}",
            json.dumps(json_format.MessageToDict(request)).encode(),
            headers={"Content-Type": "application/json", "X-Request-Id": request_id},
        )
        if status == 200:
            answer = json_format.ParseDict(value, response(), ignore_unknown_fields=True)
    (line,) = server.request_lines(request_id)
    return answer, line


def new_game(server: ServerProcess, transport: str) -> pb.NewGameResponse:
    """A 2-player game dealt from seed 7."""
    request = pb.NewGameRequest(config=pb.GameConfig(players=2), seed=7)
    game, _ = call(server, transport, "NewGame", request, pb.NewGameResponse)
    assert game is not None
    return game


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_two_forks_of_one_state_log_one_move_number_and_two_state_ids(
    server: ServerProcess, transport: str
) -> None:
    """Two different Plays from one state: the same seat and move number (the state
    played on), each the state id its answer gives; the reads of that state log its
    move number too, and GetView the state id it answers."""
    game = new_game(server, transport)
    seat, token = game.view.turn, game.seat_tokens[game.view.turn]
    moves, legal_line = call(
        server,
        transport,
        "LegalMoves",
        pb.LegalMovesRequest(state=game.state, seat=seat, seat_token=token),
        pb.LegalMovesResponse,
    )
    assert moves is not None
    first, last = moves.moves[0].move, moves.moves[-1].move
    assert first.card != last.card
    forks = [
        call(
            server,
            transport,
            "Play",
            pb.PlayRequest(state=game.state, seat=seat, seat_token=token, move=move),
            pb.PlayResponse,
        )
        for move in (first, last)
    ]
    number = game.view.move_number
    for answer, line in forks:
        assert answer is not None and line["code"] == "OK"
        assert (line["game_id"], line["seat"], line["move_number"]) == (game.game_id, seat, number)
        assert line["state_id"] == answer.view.state_id
        assert answer.view.move_number == number + 1
    assert forks[0][1]["state_id"] != forks[1][1]["state_id"]
    # LegalMoves answers no state id: its line would need a hash of its own.
    assert (legal_line["seat"], legal_line["move_number"]) == (seat, number)
    assert "state_id" not in legal_line
    view, view_line = call(
        server,
        transport,
        "GetView",
        pb.GetViewRequest(state=game.state, seat=seat, seat_token=token),
        pb.GetViewResponse,
    )
    assert view is not None
    assert (view_line["seat"], view_line["move_number"]) == (seat, number)
    assert view_line["state_id"] == view.view.state_id == game.view.state_id
    _, public_line = call(
        server, transport, "GetView", pb.GetViewRequest(state=game.state), pb.GetViewResponse
    )
    _, score_line = call(
        server, transport, "Score", pb.ScoreRequest(state=game.state), pb.ScoreResponse
    )
    assert "seat" not in public_line and "seat" not in score_line
    assert public_line["move_number"] == score_line["move_number"] == number
    assert "state_id" not in score_line
    assert "deal_source" not in score_line and "draw_given" not in score_line


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_refused_play_logs_who_tried_where_but_no_card(
    server: ServerProcess, transport: str
) -> None:
    """A card not in the seat's hand: the line has the seat and the move number, no
    state id (no move was made) and no card, though the caller's ErrorInfo names it."""
    game = new_game(server, transport)
    seat, token = game.view.turn, game.seat_tokens[game.view.turn]
    view, _ = call(
        server,
        transport,
        "GetView",
        pb.GetViewRequest(state=game.state, seat=seat, seat_token=token),
        pb.GetViewResponse,
    )
    assert view is not None
    hand = {card_code(card) for card in view.view.hand}
    absent = next(card for card in full_deck(1) if card not in hand)
    move = pb.Move(card=card_proto(absent))
    answer, line = call(
        server,
        transport,
        "Play",
        pb.PlayRequest(state=game.state, seat=seat, seat_token=token, move=move),
        pb.PlayResponse,
    )
    assert answer is None
    assert (line["code"], line["reason"]) == ("FailedPrecondition", "CARD_NOT_IN_HAND")
    assert (line["seat"], line["move_number"]) == (seat, game.view.move_number)
    assert "state_id" not in line
    logged = json.dumps(line)
    assert all(card_str(card) not in logged for card in {absent, *hand}), line


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_play_whose_state_cannot_be_opened_logs_its_seat_alone(
    server: ServerProcess, transport: str
) -> None:
    """No state opened, no move number: absent, not guessed."""
    answer, line = call(
        server,
        transport,
        "Play",
        pb.PlayRequest(state=b"junk", seat=1, seat_token=b"x", move=pb.Move()),
        pb.PlayResponse,
    )
    assert answer is None and line["code"] == "InvalidArgument"
    assert line["seat"] == 1
    assert "move_number" not in line and "state_id" not in line


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_seat_0_left_out_of_the_request_is_logged_as_seat_0(
    server: ServerProcess, transport: str
) -> None:
    """proto3 leaves a seat of 0 out of the bytes and out of the JSON, and the service
    reads it as seat 0: the line says 0 (docs/operations.md: "a seat of 0 left out
    included"), not nothing, for an answered LegalMoves and a refused Play alike."""
    game = new_game(server, transport)
    assert game.view.turn != 0  # so that seat 0's Play is refused
    token = game.seat_tokens[0]
    legal = pb.LegalMovesRequest(state=game.state, seat_token=token)
    card = card_proto(full_deck(1)[0])
    play = pb.PlayRequest(state=game.state, seat_token=token, move=pb.Move(card=card))
    for request in (legal, play):
        assert all(field.name != "seat" for field, _ in request.ListFields())
        assert "seat" not in json_format.MessageToDict(request)
    moves, legal_line = call(server, transport, "LegalMoves", legal, pb.LegalMovesResponse)
    assert moves is not None and not moves.moves and legal_line["code"] == "OK"
    answer, play_line = call(server, transport, "Play", play, pb.PlayResponse)
    assert answer is None and play_line["reason"] == "NOT_YOUR_TURN"
    for line in (legal_line, play_line):
        assert (line["seat"], line["move_number"]) == (0, game.view.move_number)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_get_view_refused_its_seat_token_logs_its_move_number_but_no_state_id(
    server: ServerProcess, transport: str
) -> None:
    """Seat 0 with seat 1's token (``SEAT_TOKEN_INVALID``): the state opened, so the line
    has its move number and the seat named; no view was answered, so no state id."""
    game = new_game(server, transport)
    request = pb.GetViewRequest(state=game.state, seat=0, seat_token=game.seat_tokens[1])
    answer, line = call(server, transport, "GetView", request, pb.GetViewResponse)
    assert answer is None
    assert (line["code"], line["reason"]) == ("PermissionDenied", "SEAT_TOKEN_INVALID")
    assert (line["seat"], line["move_number"]) == (0, game.view.move_number)
    assert line["game_id"] == game.game_id
    assert "state_id" not in line


def http_line(
    server: ServerProcess, method: str, body: object, **headers: str
) -> dict[str, object]:
    """The request line of ``method`` over HTTP with this JSON ``body`` and ``headers``."""
    request_id = f"timeline-unread-{next(_ids)}"
    name = method[0].lower() + method[1:]
    exchange(
        f"{server.http_url}/v1/krypkasino:{name}",
        json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "X-Request-Id": request_id, **headers},
    )
    (line,) = server.request_lines(request_id)
    return line


def test_a_call_the_service_never_read_logs_nothing_of_its_request(
    server: ServerProcess,
) -> None:
    """docs/operations.md: a body the gateway refused, or a call past its deadline before
    its handler ran, has no seat, move number or deal source, though the body named them."""
    game = new_game(server, "grpc")
    asked = json_format.MessageToDict(
        pb.LegalMovesRequest(state=game.state, seat=1, seat_token=game.seat_tokens[1])
    )
    refused = {
        "JSON_INVALID": http_line(server, "LegalMoves", {**asked, "bogus": 1}),
        "DEADLINE_EXCEEDED": http_line(server, "LegalMoves", asked, **{"Grpc-Timeout": "1n"}),
    }
    new = {"config": {"players": 2}, "seed": "7"}
    refused_new_games = [
        http_line(server, "NewGame", {**new, "bogus": 1}),
        http_line(server, "NewGame", new, **{"Grpc-Timeout": "1n"}),
    ]
    for reason, line in refused.items():
        assert line["reason"] == reason and line["game_id"] is None
        assert "seat" not in line and "move_number" not in line
    for line in refused_new_games:
        assert "deal_source" not in line and "draw_given" not in line


#: NewGame requests and the (deal_source, draw_given) of their lines.
DEALS: dict[str, tuple[pb.NewGameRequest, str, bool]] = {
    "server": (pb.NewGameRequest(config=pb.GameConfig(players=2)), "server", False),
    "seed": (pb.NewGameRequest(config=pb.GameConfig(players=2), seed=7), "seed", False),
    # A seed of 0 is a seed given (``optional``), as the game deals it.
    "seed 0": (pb.NewGameRequest(config=pb.GameConfig(players=2), seed=0), "seed", False),
    "decks": (pb.NewGameRequest(config=pb.GameConfig(players=2), decks=[DECK]), "decks", False),
    "decks and seed": (
        pb.NewGameRequest(config=pb.GameConfig(players=2), decks=[DECK], seed=7),
        "decks+seed",
        False,
    ),
    "draw": (
        pb.NewGameRequest(config=pb.GameConfig(players=2, draw_for_deal=True), draw=DRAW),
        "server",
        True,
    ),
}


def test_the_cases_cover_every_deal_source() -> None:
    assert {source for _, source, _ in DEALS.values()} == set(DEAL_SOURCES)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("case", DEALS)
def test_a_new_game_logs_who_chose_its_cards(
    server: ServerProcess, transport: str, case: str
) -> None:
    """``deal_source`` and ``draw_given``, and the state id of the first state; no seat
    and no move number, for no state was sent."""
    request, source, draw_given = DEALS[case]
    game, line = call(server, transport, "NewGame", request, pb.NewGameResponse)
    assert game is not None and line["code"] == "OK"
    assert (line["deal_source"], line["draw_given"]) == (source, draw_given)
    assert line["state_id"] == game.view.state_id
    assert "seat" not in line and "move_number" not in line


def test_the_listening_line_says_whether_chosen_deals_are_refused(
    server: ServerProcess,
) -> None:
    """And a refused chosen deal's line says what it asked for."""
    (listening,) = server.log_events("listening")
    assert listening["refuse_chosen_deals"] is False
    refusing = start_server(args=["--refuse-chosen-deals"])
    try:
        (listening,) = refusing.log_events("listening")
        assert listening["refuse_chosen_deals"] is True
        for transport in TRANSPORTS:
            answer, line = call(
                refusing,
                transport,
                "NewGame",
                pb.NewGameRequest(config=pb.GameConfig(players=2), decks=[DECK]),
                pb.NewGameResponse,
            )
            assert answer is None and line["reason"] == "CHOSEN_DEAL_REFUSED"
            assert (line["deal_source"], line["draw_given"]) == ("decks", False)
            assert "state_id" not in line
    finally:
        stop_and_check(refusing)
