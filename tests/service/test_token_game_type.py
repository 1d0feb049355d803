"""What a sealed state token's associated data binds (docs/api.md, "State tokens"): the
game type and schema version, not the game id. TOKEN_INVALID's message says "of another
game type", not "of another game", which a token of another match is not refused as;
the seat tokens, which bind the game id, keep one match's players out of another's."""

from __future__ import annotations

import grpc
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from service.krypkasino_api import GAME
from service.tokens import KeyRing, StateSealer
from tests.service.grpc_helpers import Stub, refused
from tests.service.server_process import TEST_KEY


def new_game(stub: Stub, seed: int) -> pb.NewGameResponse:
    return stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2), seed=seed))


def test_a_token_of_another_game_type_fails_authentication_saying_so(stub: Stub) -> None:
    keys = KeyRing.parse(TEST_KEY)
    payload = StateSealer(keys, game=GAME).open(new_game(stub, 1).state)
    other_type = StateSealer(keys, game="crates").seal(payload)
    refusal = refused(stub.GetView, pb.GetViewRequest(state=other_type))
    assert (refusal.code, refusal.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "TOKEN_INVALID")
    assert refusal.message == (
        "state token failed authentication (altered, truncated, or of another game type)"
    )


def test_a_token_of_another_match_opens_and_its_seats_need_that_matchs_tokens(
    stub: Stub,
) -> None:
    mine, other = new_game(stub, 1), new_game(stub, 2)
    view = stub.GetView(pb.GetViewRequest(state=other.state))
    assert view.view.game_id == other.game_id != mine.game_id
    refusal = refused(
        stub.LegalMoves,
        pb.LegalMovesRequest(state=other.state, seat=1, seat_token=mine.seat_tokens[1]),
    )
    assert (refusal.code, refusal.reason) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "SEAT_TOKEN_INVALID",
    )
