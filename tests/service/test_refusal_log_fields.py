"""What a refusal's request log line carries of its ErrorInfo (docs/operations.md,
"Metrics and alerts"): the id of a key the pod lacks, never a card.

An on-call drill found ``CardrulesStateTokensUnknownKey``'s runbook pointing at the
refusals' ``key_id``, which only the caller sees in its ErrorInfo: the pod's request
line had the reason alone. A key id is 4 bytes of SHA-256 of the key, no secret; the
other refusals' metadata can name cards, and a log line never carries a hand.
"""

from __future__ import annotations

import grpc
import pytest
from cardrules.client import KrypkasinoClient, error_info
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from engine.cards import card_str, full_deck
from service.tokens import KeyRing, SeatTokens
from tests.service.grpc_helpers import card_code, card_proto, game_state, key_id, seal
from tests.service.server_process import TEST_KEY, running

#: A key the server is not given.
OTHER_KEY = KeyRing.generate_key_text()


def refusal_info(
    client: KrypkasinoClient, call: str, request_id: str, **fields: object
) -> tuple[dict[str, str], str]:
    """The refused call's ErrorInfo metadata (what its caller sees) and its reason."""
    with pytest.raises(grpc.RpcError) as raised:
        getattr(client, call)(metadata=(("x-request-id", request_id),), **fields)
    info = error_info(raised.value)
    assert info is not None
    return dict(info.metadata), info.reason


def test_a_refusal_for_a_key_the_pod_lacks_logs_that_key_s_id() -> None:
    """A state token sealed, and a seat token made, under a key the server lacks: both
    request lines name the key as the callers' ErrorInfo does."""
    missing = key_id(OTHER_KEY).hex()
    with running() as server, KrypkasinoClient(server.target) as client:
        game = client.new_game(players=2, seed=7)
        other_state = seal(game_state(game.state, TEST_KEY).SerializeToString(), OTHER_KEY)
        state_meta, state_reason = refusal_info(
            client, "score", "unknown-state-key", state=other_state
        )
        seat = game.view.turn
        other_seat_token = SeatTokens(KeyRing.parse(OTHER_KEY)).issue(game.game_id, seat)
        seat_meta, seat_reason = refusal_info(
            client,
            "legal_moves",
            "unknown-seat-key",
            state=game.state,
            seat=seat,
            seat_token=other_seat_token,
        )
        state_line, seat_line = server.request_lines("unknown-state-key", "unknown-seat-key")
    assert (state_reason, state_meta["key_id"]) == ("TOKEN_UNKNOWN_KEY", missing)
    assert (seat_reason, seat_meta["key_id"]) == ("SEAT_TOKEN_INVALID", missing)
    assert (state_line["reason"], state_line["key_id"]) == ("TOKEN_UNKNOWN_KEY", missing)
    assert (seat_line["reason"], seat_line["key_id"]) == ("SEAT_TOKEN_INVALID", missing)
    # The seat the request names (an int, docs/operations.md), not the ErrorInfo's.
    assert seat_line["seat"] == seat


def test_a_refused_move_s_line_names_no_card() -> None:
    """``CARD_NOT_IN_HAND``'s ErrorInfo names the card played: its line must not."""
    with running() as server, KrypkasinoClient(server.target) as client:
        game = client.new_game(players=2, seed=7)
        seat = game.view.turn
        token = game.seat_tokens[seat]
        hand = {
            card_code(card)
            for card in client.get_view(state=game.state, seat=seat, seat_token=token).view.hand
        }
        absent = next(card for card in full_deck(1) if card not in hand)
        meta, reason = refusal_info(
            client,
            "play",
            "card-not-in-hand",
            state=game.state,
            seat=seat,
            seat_token=token,
            move=pb.Move(card=card_proto(absent)),
        )
        (line,) = server.request_lines("card-not-in-hand")
    assert (reason, meta["card"]) == ("CARD_NOT_IN_HAND", card_str(absent))
    assert line["reason"] == "CARD_NOT_IN_HAND"
    # None of the ErrorInfo's metadata but the seat, which the request named anyway.
    assert not (set(meta) - {"seat"}) & set(line)
    assert (meta["seat"], line["seat"]) == (str(seat), seat)
    assert card_str(absent) not in {str(value) for value in line.values()}
