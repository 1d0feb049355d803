"""Every refusal of the gRPC API, against a real server on loopback (design sections 4-6).

Each error path is checked on the wire: its status code, exactly one
``ErrorInfo`` (domain ``cardrules``, the stable reason, dynamic values in
metadata) and ``BadRequest`` field violations for malformed input. Rule
violations are ``FAILED_PRECONDITION`` with the spec rule ID; ``INTERNAL``
never happens, not even for fuzzed requests (each server these tests use must have
logged no failure when its fixture stops it: ``stop_and_check`` in server_process); the
request log never holds a token.
"""

from __future__ import annotations

import base64
import json
import random
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import cast

import grpc
import pytest
from cardrules.cards.v1 import cards_pb2
from cardrules.client import error_info, request_id
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from engine.cards import (
    CARDS_PER_DECK,
    Card,
    CardError,
    check_deck,
    full_deck,
    parse_card,
    parse_cards,
)
from engine.krypkasino import (
    Config,
    ConfigError,
    IllegalMoveError,
    Move,
    Removal,
    Rules,
    State,
    Teams,
    TieRule,
    legal_moves,
    new_game,
    play,
)
from service.calls import CallInfo
from service.errors import ServiceError
from service.grpc_service import (
    _MISENCODED_SEARCH_BYTES,
    _MISENCODED_SEARCH_LIMIT,
    _misencoded_field,
    parsing,
)
from service.krypkasino_api import METHODS, SERVICE_NAME
from tests.engine.krypkasino.helpers import first_distribution_deck
from tests.service.grpc_helpers import (
    PLAIN_FLAG,
    SEALED_OVERHEAD,
    Refusal,
    Stub,
    card_code,
    card_proto,
    connect,
    deck_proto,
    game_state,
    key_id,
    move_of,
    move_proto,
    outcome,
    refused,
    seal,
    state_of_request_size,
)
from tests.service.server_process import TEST_KEY, ServerProcess, start_server, stop_and_check
from tests.sizes import fuzz_examples

OTHER_KEY = base64.b64encode(bytes(range(32))).decode()
SMALL_LIMIT = 4096
INVALID = grpc.StatusCode.INVALID_ARGUMENT
DENIED = grpc.StatusCode.PERMISSION_DENIED
PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION
UNAVAILABLE = grpc.StatusCode.UNAVAILABLE

# Position A (K7.2-K7.4), seat 1 to move after dealer 0: 8D takes AH+7C and 8S.
CAPTURE_TABLE = "AH 7C 8S 10D"
CAPTURE_HAND = "3H 4S 5H 8D 9C JD"
# Position B (K7.6): only 7C sweeps 2H 3C 4D 5S (2+5, 3+4); 9H and 10H could capture.
SWEEP_TABLE = "2H 3C 4D 5S"
SWEEP_HAND = "6D 7C 8S 9H 10H KH"
OPPONENT_HAND = "6C 6H 6S 7D 7H 7S"


@pytest.fixture(scope="module")
def game(stub: Stub) -> pb.NewGameResponse:
    """A fresh 2-player game (seed 1): seat 1 is to move."""
    return stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2), seed=1))


@pytest.fixture(scope="module")
def other_server() -> Iterator[ServerProcess]:
    """A second server with another state key and a small request limit; like the shared
    server, it must have logged no failure when it stops (``stop_and_check``)."""
    running = start_server(args=["--max-request-bytes", str(SMALL_LIMIT)], keys=OTHER_KEY)
    yield running
    stop_and_check(running)


def stacked_game(
    stub: Stub, hand: str, table: str, rules: pb.Rules | None = None
) -> pb.NewGameResponse:
    """A 2-player game whose first distribution gives seat 1 ``hand`` and the table ``table``."""
    deck = first_distribution_deck(Config(players=2), {1: hand, 0: OPPONENT_HAND}, table)
    config = pb.GameConfig(players=2, rules=rules)
    response = stub.NewGame(pb.NewGameRequest(config=config, decks=[deck_proto(deck)], seed=3))
    assert response.view.turn == 1
    assert [card_proto(c) for c in parse_cards(table)] == list(response.view.table)
    return response


def play_request(game: pb.NewGameResponse, seat: int, move: str) -> pb.PlayRequest:
    return pb.PlayRequest(
        state=game.state, seat=seat, seat_token=game.seat_tokens[seat], move=move_of(move)
    )


def state_calls(stub: Stub, token: bytes, game: pb.NewGameResponse) -> dict[str, Refusal]:
    """The refusal of every RPC that reads a state token, with otherwise valid fields."""
    seat, seat_token = 1, game.seat_tokens[1]
    return {
        "LegalMoves": refused(
            stub.LegalMoves, pb.LegalMovesRequest(state=token, seat=seat, seat_token=seat_token)
        ),
        "Play": refused(
            stub.Play,
            pb.PlayRequest(state=token, seat=seat, seat_token=seat_token, move=move_of("AS")),
        ),
        "Score": refused(stub.Score, pb.ScoreRequest(state=token)),
        "GetView": refused(stub.GetView, pb.GetViewRequest(state=token)),
    }


def assert_state_refused(refusals: dict[str, Refusal], reason: str, **metadata: str) -> None:
    for method, refusal in refusals.items():
        assert (refusal.code, refusal.reason) == (INVALID, reason), (method, refusal)
        assert set(refusal.violations) == {"state"}, (method, refusal)
        assert refusal.metadata == metadata, (method, refusal)


def public_view(stub: Stub, token: bytes) -> Refusal:
    return refused(stub.GetView, pb.GetViewRequest(state=token))


def token_reason(token: bytes) -> str:
    """The reason the design's token format gives for bytes that are not a token of ours."""
    version = token[0] & ~PLAIN_FLAG
    plain = bool(token[0] & PLAIN_FLAG)
    if version == 0 or len(token) < SEALED_OVERHEAD:
        return "TOKEN_MALFORMED"
    if plain:  # whatever its version: the test server seals
        return "TOKEN_PLAIN_DISABLED"
    # A sealed token of a later version is authenticated as that version's: these bytes
    # never are, so they are refused as any sealed token that does not open.
    if token[1:5] != key_id(TEST_KEY):
        return "TOKEN_UNKNOWN_KEY"
    return "TOKEN_INVALID"


def token_metadata(token: bytes) -> dict[str, str]:
    """The ErrorInfo metadata of ``token_reason(token)``: the version or key id read."""
    match token_reason(token):
        case "TOKEN_SCHEMA_UNSUPPORTED":
            return {"version": str(token[0] & ~PLAIN_FLAG)}
        case "TOKEN_UNKNOWN_KEY":
            return {"key_id": token[1:5].hex()}
    return {}


# -- state tokens (design section 4) -------------------------------------------------


def test_an_empty_state_is_state_missing(stub, game):
    assert_state_refused(state_calls(stub, b"", game), "STATE_MISSING")


def test_a_sealed_token_is_accepted_by_every_rpc(stub, game):
    """The baseline of the token tests: the same calls succeed with the real token."""
    seat, seat_token = 1, game.seat_tokens[1]
    moves = stub.LegalMoves(
        pb.LegalMovesRequest(state=game.state, seat=seat, seat_token=seat_token)
    ).moves
    assert moves
    request = pb.PlayRequest(state=game.state, seat=seat, seat_token=seat_token, move=moves[0].move)
    assert stub.Play(request).view.move_number == 1
    assert not stub.Score(pb.ScoreRequest(state=game.state)).game_over
    assert stub.GetView(pb.GetViewRequest(state=game.state)).view.game_id == game.game_id


@pytest.mark.parametrize("seed", range(24))
def test_random_bytes_are_refused_by_their_header(stub, game, seed):
    rng = random.Random(seed)
    # Bias the first byte towards the interesting headers: 0x01, 0x81, 0x00, others.
    first = rng.choice([0x01, 0x01, 0x81, 0x00, 0x80, rng.randrange(256)])
    token = bytes([first]) + rng.randbytes(rng.choice([0, 3, 31, 32, 33, 64, 240, 1000]))
    assert_state_refused(
        state_calls(stub, token, game), token_reason(token), **token_metadata(token)
    )


def test_random_bytes_under_the_servers_key_id_fail_authentication(stub, game):
    token = b"\x01" + key_id(TEST_KEY) + random.Random(7).randbytes(200)
    assert_state_refused(state_calls(stub, token, game), "TOKEN_INVALID")


@pytest.mark.parametrize("length", [1, 2, 5, 17, 32, 33, 34, 100, -16, -1])
def test_truncated_tokens_are_refused(stub, game, length):
    token = game.state[:length]
    assert 0 < len(token) < len(game.state)
    expected = "TOKEN_MALFORMED" if len(token) < SEALED_OVERHEAD else "TOKEN_INVALID"
    assert_state_refused(state_calls(stub, token, game), expected)


def test_every_bit_flip_is_refused(stub, game):
    """One flipped bit anywhere: header, key id, nonce, ciphertext or tag."""
    token = game.state
    seen = set()
    for position in range(1, len(token)):
        flipped = bytearray(token)
        flipped[position] ^= 1 << (position % 8)
        refusal = public_view(stub, bytes(flipped))
        assert (refusal.code, refusal.reason) == (INVALID, token_reason(bytes(flipped))), position
        assert refusal.metadata == token_metadata(bytes(flipped)), position
        seen.add(refusal.reason)
    assert seen == {"TOKEN_UNKNOWN_KEY", "TOKEN_INVALID"}
    version_flips = {}
    for bit in range(8):
        flipped_version = bytes([token[0] ^ (1 << bit)]) + token[1:]
        refusal = public_view(stub, flipped_version)
        assert refusal.reason == token_reason(flipped_version), bit
        version_flips[bit] = refusal.reason
    assert version_flips[0] == "TOKEN_MALFORMED"
    assert version_flips[1] == "TOKEN_INVALID"
    assert version_flips[7] == "TOKEN_PLAIN_DISABLED"


def test_a_token_sealed_with_another_key_is_an_unknown_key(stub, game, other_server):
    with connect(other_server.target) as other:
        foreign = other.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2), seed=1))
        assert other.GetView(pb.GetViewRequest(state=foreign.state)).view.game_id
        # Bytes 1 to 4 of a sealed token are its key id.
        key_id = foreign.state[1:5].hex()
        assert key_id != game.state[1:5].hex()
        assert_state_refused(
            state_calls(stub, foreign.state, game), "TOKEN_UNKNOWN_KEY", key_id=key_id
        )
        assert public_view(other, game.state).reason == "TOKEN_UNKNOWN_KEY"


def test_tokens_of_another_game_do_not_open(stub, game):
    payload = game_state(game.state, TEST_KEY).SerializeToString()
    assert stub.GetView(pb.GetViewRequest(state=seal(payload, TEST_KEY))).view.game_id
    assert_state_refused(
        state_calls(stub, seal(payload, TEST_KEY, game="crates"), game), "TOKEN_INVALID"
    )


# What a newer release may write into a GameState and this one cannot read: field 63
# (no release has it; a varint) at the top, in the config (field 2) and in the config's
# rules (field 3), where a new rule flag would be; an enum number of each enum a state
# holds (a new team mode, removal or tie rule).
NEWER_RELEASE_ADDITIONS = {
    "field": b"\xf8\x03\x01",
    "config field": b"\x12\x03\xf8\x03\x01",
    "rule flag": b"\x12\x05\x1a\x03\xf8\x03\x01",
    "teams": pb.GameState(config=pb.GameConfig(teams=pb.TeamMode.ValueType(9))).SerializeToString(),
    "removal": pb.GameState(
        config=pb.GameConfig(rules=pb.Rules(removal=pb.Removal.ValueType(9)))
    ).SerializeToString(),
    "tie rule": pb.GameState(
        config=pb.GameConfig(tie_rule=pb.TieRule.ValueType(9))
    ).SerializeToString(),
}


def assert_from_a_newer_release(refusals: dict[str, Refusal], **metadata: str) -> None:
    for method, refusal in refusals.items():
        assert (refusal.code, refusal.reason) == (UNAVAILABLE, "TOKEN_FROM_NEWER_RELEASE"), (
            method,
            refusal,
        )
        assert not refusal.has_bad_request and refusal.metadata == metadata, (method, refusal)


def test_a_newer_releases_token_is_unavailable_on_an_older_one(stub, game):
    """A rolling upgrade: a replica of the older release meets a token that a newer one
    sealed. It answers UNAVAILABLE, which clients retry (another replica can read the
    token), rather than refuse the game for good."""
    payload = game_state(game.state, TEST_KEY).SerializeToString()
    assert_from_a_newer_release(
        state_calls(stub, seal(payload, TEST_KEY, version=2), game), version="2"
    )


@pytest.mark.parametrize("addition", NEWER_RELEASE_ADDITIONS)
def test_what_a_newer_release_adds_is_never_dropped_or_misread(stub, game, addition):
    """Decoding would drop fields this release does not know (the next seal would lose
    them: a newer release's rule flag would silently stop applying) and cannot read an
    enum number it has no value for."""
    payload = game_state(game.state, TEST_KEY).SerializeToString()
    token = seal(payload + NEWER_RELEASE_ADDITIONS[addition], TEST_KEY)
    assert_from_a_newer_release(state_calls(stub, token, game))


@pytest.mark.parametrize("addition", NEWER_RELEASE_ADDITIONS)
def test_a_plain_token_with_what_no_release_knows_is_state_invalid(plain_stub, game, addition):
    """Nothing vouches that a newer release made a plain token: it is refused for good."""
    payload = game_state(game.state, TEST_KEY).SerializeToString()
    token = plain(payload + NEWER_RELEASE_ADDITIONS[addition])
    assert_state_refused(state_calls(plain_stub, token, game), "STATE_INVALID")


def test_a_plain_token_is_refused_by_a_sealing_server(stub, game):
    payload = game_state(game.state, TEST_KEY).SerializeToString()
    token = bytes([PLAIN_FLAG | 1]) + payload
    assert_state_refused(state_calls(stub, token, game), "TOKEN_PLAIN_DISABLED")


def broken_payloads(game: pb.NewGameResponse) -> dict[str, bytes]:
    """Serialized payloads that are no valid game state (K15 and the token's own checks)."""
    good = game_state(game.state, TEST_KEY)
    swapped = pb.GameState()
    swapped.CopyFrom(good)
    hand = bytearray(swapped.hands[0])
    hand[0] = (hand[0] + 1) % CARDS_PER_DECK  # a third copy of some card (K15.1)
    swapped.hands[0] = bytes(sorted(hand))
    bad_turn = pb.GameState()
    bad_turn.CopyFrom(good)
    bad_turn.turn = 7
    bad_config = pb.GameState()
    bad_config.CopyFrom(good)
    bad_config.config.players = 9
    no_card = pb.GameState()
    no_card.CopyFrom(good)
    no_card.table = bytes([200]) + no_card.table[1:]
    return {
        "not protobuf": b"\xff\xff\xff",
        "empty": b"",
        "config": bad_config.SerializeToString(),
        "conservation": swapped.SerializeToString(),
        "turn": bad_turn.SerializeToString(),
        "card byte": no_card.SerializeToString(),
    }


@pytest.fixture(scope="module")
def plain_server() -> Iterator[ServerProcess]:
    """A server in the debugging mode of plain (unsealed) state tokens; it must have
    logged no failure when it stops."""
    running = start_server(args=["--plain-state"])
    yield running
    stop_and_check(running)


@pytest.fixture(scope="module")
def plain_stub(plain_server: ServerProcess) -> Iterator[Stub]:
    with connect(plain_server.target) as client:
        yield client


def plain(payload: bytes) -> bytes:
    """A plain token: ``0x80 | schema version``, then the payload (design section 4)."""
    return bytes([PLAIN_FLAG | 1]) + payload


@pytest.mark.parametrize("name", ["not protobuf", "empty", "config"])
def test_an_authentic_token_of_no_game_state_is_state_invalid(stub, game, name):
    token = seal(broken_payloads(game)[name], TEST_KEY)
    assert_state_refused(state_calls(stub, token, game), "STATE_INVALID")


def test_a_plain_server_plays_from_plain_tokens(plain_stub):
    started = plain_stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2), seed=1))
    assert started.state[0] == PLAIN_FLAG | 1
    seat, token = started.view.turn, started.seat_tokens[started.view.turn]
    request = pb.LegalMovesRequest(state=started.state, seat=seat, seat_token=token)
    move = plain_stub.LegalMoves(request).moves[0].move
    played = plain_stub.Play(
        pb.PlayRequest(state=started.state, seat=seat, seat_token=token, move=move)
    )
    assert played.state[0] == PLAIN_FLAG | 1
    assert played.view.move_number == 1


@pytest.mark.parametrize(
    "name", ["not protobuf", "empty", "config", "conservation", "turn", "card byte"]
)
def test_a_plain_token_of_an_inconsistent_state_is_state_invalid(plain_stub, game, name):
    """A plain token can hold anything, so every field is checked (design section 4)."""
    token = plain(broken_payloads(game)[name])
    refusals = state_calls(plain_stub, token, game)
    assert_state_refused(refusals, "STATE_INVALID")
    if name not in ("not protobuf", "empty"):
        # What is wrong is inside the token: config.players there is no request field.
        assert all(r.message.startswith("state: ") for r in refusals.values()), refusals


# -- seats and seat tokens (design section 4) -------------------------------------------


def seat_calls(stub: Stub, game: pb.NewGameResponse, seat: int, token: bytes) -> dict[str, Refusal]:
    """The refusal of every RPC that acts for a seat."""
    return {
        "LegalMoves": refused(
            stub.LegalMoves, pb.LegalMovesRequest(state=game.state, seat=seat, seat_token=token)
        ),
        "Play": refused(
            stub.Play,
            pb.PlayRequest(state=game.state, seat=seat, seat_token=token, move=move_of("AS")),
        ),
        "GetView": refused(
            stub.GetView, pb.GetViewRequest(state=game.state, seat=seat, seat_token=token)
        ),
    }


def assert_seat_refused(refusals: dict[str, Refusal], code: grpc.StatusCode, reason: str) -> None:
    for method, refusal in refusals.items():
        assert (refusal.code, refusal.reason) == (code, reason), (method, refusal)


@pytest.mark.parametrize("seat", [0, 1])
def test_a_missing_seat_token_is_permission_denied(stub, game, seat):
    refusals = seat_calls(stub, game, seat, b"")
    assert_seat_refused(refusals, DENIED, "SEAT_TOKEN_MISSING")
    for refusal in refusals.values():
        assert refusal.metadata == {"seat": str(seat)}
        assert not refusal.has_bad_request


@pytest.mark.parametrize("seat", [0, 1])
def test_another_seats_token_is_permission_denied_naming_the_tokens_seat(stub, game, seat):
    """Seat 0 is also what a request that left ``seat`` out says (proto3 leaves out a
    zero), so there the message asks; GetView's ``seat`` is set when sent."""
    other = 1 - seat
    refusals = seat_calls(stub, game, seat, game.seat_tokens[other])
    assert_seat_refused(refusals, DENIED, "SEAT_TOKEN_INVALID")
    for method, refusal in refusals.items():
        assert refusal.metadata == {"seat": str(seat), "token_seat": str(other)}
        expected = f"not a valid seat token for seat {seat}; it is seat {other}'s token"
        if seat == 0 and method != "GetView":
            expected += ": was the seat field left out?"
        assert refusal.message == expected, method


ANOTHER_GAME_HINT = "; it is no seat's token of this game (one from another game?)"


def test_a_token_of_a_seat_the_game_does_not_have_names_no_seat(plain_stub):
    """Design section 4: a wrong seat token is named only when it is the token of another
    of the game's own seats. A hand-edited plain state gives a 3-player game's id to a
    2-player game: seat 2's token under that id is of no seat the game has."""
    three = plain_stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=3), seed=1))
    two = plain_stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2), seed=1))
    message = pb.GameState.FromString(two.state[1:])
    message.game_id = three.game_id
    game = pb.NewGameResponse(state=plain(message.SerializeToString()))
    refusals = seat_calls(plain_stub, game, 0, three.seat_tokens[2])
    assert_seat_refused(refusals, DENIED, "SEAT_TOKEN_INVALID")
    for method, refusal in refusals.items():
        assert refusal.metadata == {"seat": "0", "token_game": "other"}, method
        assert refusal.message == f"not a valid seat token for seat 0{ANOTHER_GAME_HINT}", method


@pytest.mark.parametrize("seat", [0, 1])
def test_another_games_token_is_permission_denied_asking_whether_it_is_of_another_game(
    stub, game, seat
):
    """Design section 4: the usual cause is a bot that started a new game and kept the
    old tokens, so the message says the token is none of this game's seats' and asks."""
    other = stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2), seed=1))
    assert other.game_id != game.game_id
    for token in other.seat_tokens:  # its own seat's and the other seat's
        refusals = seat_calls(stub, game, seat, token)
        assert_seat_refused(refusals, DENIED, "SEAT_TOKEN_INVALID")
        for method, refusal in refusals.items():
            # token_game says it beside the message, for clients that word refusals.
            assert refusal.metadata == {"seat": str(seat), "token_game": "other"}, method
            expected = f"not a valid seat token for seat {seat}{ANOTHER_GAME_HINT}"
            assert refusal.message == expected, method


def test_a_seat_token_of_another_key_is_permission_denied(stub, game, other_server):
    with connect(other_server.target) as other:
        foreign = other.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2), seed=1))
    assert_seat_refused(
        seat_calls(stub, game, 1, foreign.seat_tokens[1]), DENIED, "SEAT_TOKEN_INVALID"
    )


@pytest.mark.parametrize("token", [b"\x00", b"x" * 20, b"y" * 21, bytes(64)])
def test_garbage_seat_tokens_are_permission_denied(stub, game, token):
    assert_seat_refused(seat_calls(stub, game, 1, token), DENIED, "SEAT_TOKEN_INVALID")


def test_a_flipped_bit_in_a_seat_token_is_permission_denied(stub, game):
    token = game.seat_tokens[1]
    for position in range(len(token)):
        flipped = bytearray(token)
        flipped[position] ^= 0x10
        refusal = refused(
            stub.LegalMoves,
            pb.LegalMovesRequest(state=game.state, seat=1, seat_token=bytes(flipped)),
        )
        assert (refusal.code, refusal.reason) == (DENIED, "SEAT_TOKEN_INVALID"), position


@pytest.mark.parametrize("seat", [-1, 2, 6, 2**31 - 1, -(2**31)])
def test_a_seat_out_of_range_is_invalid(stub, game, seat):
    for token in (game.seat_tokens[0], b""):
        refusals = seat_calls(stub, game, seat, token)
        assert_seat_refused(refusals, INVALID, "SEAT_INVALID")
        for refusal in refusals.values():
            # docs/api.md, "Errors": the message names the field first, the violation
            # says only why.
            why = f"must be 0 to 1, not {seat}"
            assert (refusal.message, refusal.violations) == (f"seat: {why}", {"seat": why})
            assert refusal.metadata == {"seat": str(seat), "players": "2"}


@pytest.mark.parametrize("seat", [0, 1])
def test_a_seat_token_without_its_seat_is_invalid_naming_the_tokens_seat(stub, game, seat):
    """A UI that stored its seat token but not its seat learns which seat it holds, as
    LegalMoves and Play tell it (``token_seat``): its holder has the token anyway."""
    refusal = refused(
        stub.GetView, pb.GetViewRequest(state=game.state, seat_token=game.seat_tokens[seat])
    )
    message = f"a seat token was given without its seat: it is seat {seat}'s token"
    assert (refusal.code, refusal.reason, refusal.message) == (INVALID, "SEAT_MISSING", message)
    assert refusal.metadata == {"token_seat": str(seat)}
    assert refusal.violations == {"seat": message}


def test_a_seat_token_of_no_seat_of_the_game_without_a_seat_names_no_seat(stub, game, other_server):
    """Another game's token, another server's, or none at all: SEAT_MISSING alone."""
    another = stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2), seed=1))
    with connect(other_server.target) as other:
        foreign = other.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2), seed=1))
    forged = game.seat_tokens[1][:4] + bytes(16)  # a key id of the ring, a wrong MAC
    for token in (another.seat_tokens[1], foreign.seat_tokens[1], forged, b"x" * 20, b"\x00"):
        refusal = refused(stub.GetView, pb.GetViewRequest(state=game.state, seat_token=token))
        assert (refusal.code, refusal.reason, refusal.metadata) == (INVALID, "SEAT_MISSING", {})
        assert refusal.message == "a seat token was given without its seat", token
        assert set(refusal.violations) == {"seat"}


# -- malformed moves --------------------------------------------------------------------


def test_a_play_without_a_move_is_invalid(stub, game):
    request = pb.PlayRequest(state=game.state, seat=1, seat_token=game.seat_tokens[1])
    refusal = refused(stub.Play, request)
    assert (refusal.code, refusal.reason, set(refusal.violations)) == (
        INVALID,
        "MOVE_MISSING",
        {"move"},
    )


def bad_card(rank: int, suit: int) -> cards_pb2.Card:
    return cards_pb2.Card(rank=cards_pb2.Rank.ValueType(rank), suit=cards_pb2.Suit.ValueType(suit))


@pytest.mark.parametrize(
    ("move", "field"),
    [
        (pb.Move(), "move.card"),
        (pb.Move(captures=[card_proto(parse_card("AS"))]), "move.card"),
        (pb.Move(card=bad_card(0, 1)), "move.card.rank"),
        (pb.Move(card=bad_card(1, 0)), "move.card.suit"),
        (pb.Move(card=bad_card(0, 0)), "move.card.rank"),
        (pb.Move(card=bad_card(14, 1)), "move.card.rank"),
        (pb.Move(card=bad_card(-1, 1)), "move.card.rank"),
        (pb.Move(card=bad_card(13, 5)), "move.card.suit"),
        (pb.Move(card=bad_card(13, -3)), "move.card.suit"),
        (
            pb.Move(card=card_proto(parse_card("8D")), captures=[bad_card(1, 1), bad_card(7, 0)]),
            "move.captures[1].suit",
        ),
        (
            pb.Move(card=card_proto(parse_card("8D")), captures=[bad_card(99, 2)]),
            "move.captures[0].rank",
        ),
    ],
)
def test_a_malformed_move_names_its_field(stub, game, move, field):
    request = pb.PlayRequest(state=game.state, seat=1, seat_token=game.seat_tokens[1], move=move)
    refusal = refused(stub.Play, request)
    assert (refusal.code, refusal.reason) == (INVALID, "FIELD_INVALID")
    assert set(refusal.violations) == {field}


# -- moves the rules forbid (FAILED_PRECONDITION, K4.4, K7, K8.1, K13.2) -----------------


def assert_illegal(refusal: Refusal, reason: str, rule: str, seat: int, **more: str) -> None:
    assert (refusal.code, refusal.reason) == (PRECONDITION, reason), refusal
    assert refusal.metadata == {"rule": rule, "seat": str(seat), **more}, refusal
    assert not refusal.has_bad_request


@pytest.fixture(scope="module")
def capture_game(stub: Stub) -> pb.NewGameResponse:
    return stacked_game(stub, CAPTURE_HAND, CAPTURE_TABLE)


def legal_texts(stub: Stub, game: pb.NewGameResponse, seat: int) -> set[str]:
    """The seat's legal moves from the server, in the transcript notation."""
    request = pb.LegalMovesRequest(state=game.state, seat=seat, seat_token=game.seat_tokens[seat])
    return {
        str(Move.of(card_code(m.move.card), [card_code(c) for c in m.move.captures]))
        for m in stub.LegalMoves(request).moves
    }


def test_the_capture_position_is_what_the_rule_tests_assume(stub, capture_game):
    assert legal_texts(stub, capture_game, 1) == {
        "3H",
        "4S",
        "5H",
        "8D>AH+7C+8S",
        "9C>AH+8S",
        "JD>AH+10D",
    }
    # As a list: the pure-Python runtime compares a repeated field with its own kind alone.
    assert list(stub.Play(play_request(capture_game, 1, "8D>7C+8S+AH")).view.table) == [
        card_proto(parse_card("10D"))
    ]


@pytest.mark.parametrize(
    ("move", "reason", "rule", "more"),
    [
        ("6H", "CARD_NOT_IN_HAND", "K8.1", {}),
        # AS is engine card code 0: the refusal still names it.
        ("AS", "CARD_NOT_IN_HAND", "K8.1", {}),
        ("KS>AH", "CARD_NOT_IN_HAND", "K8.1", {}),
        # K7.3: captured_card names the captured card the table does not hold, and
        # table_count how often it does, so that a client can say it without reading the
        # message (and in_hand "true" when the seat's hand holds it: 5H).
        ("8D>8H", "CAPTURE_NOT_ON_TABLE", "K7.3", {"captured_card": "8H", "table_count": "0"}),
        (
            "8D>5H",
            "CAPTURE_NOT_ON_TABLE",
            "K7.3",
            {"captured_card": "5H", "table_count": "0", "in_hand": "true"},
        ),
        # K1.4: the table holds one 8S, and the capture names it twice.
        (
            "8D>AH+7C+8S+8S",
            "CAPTURE_NOT_ON_TABLE",
            "K7.3",
            {"captured_card": "8S", "table_count": "1"},
        ),
        ("8D>AH+8S", "CAPTURE_NOT_VALID", "K7.2", {}),
        ("9C>AH+7C+8S", "CAPTURE_NOT_VALID", "K7.2", {}),
        # K7.3: group_left is the group the message names (comma-separated, in its
        # order), so that a client can show it without reading the message.
        ("8D>AH+7C", "CAPTURE_NOT_MAXIMAL", "K7.3", {"group_left": "8S"}),
        ("8D>8S", "CAPTURE_NOT_MAXIMAL", "K7.3", {"group_left": "AH,7C"}),
        ("8D", "MUST_CAPTURE", "K7.4", {}),
        ("9C", "MUST_CAPTURE", "K7.4", {}),
    ],
)
def test_an_illegal_move_is_a_failed_precondition_with_its_rule(
    stub, capture_game, move, reason, rule, more
):
    refusal = refused(stub.Play, play_request(capture_game, 1, move))
    assert_illegal(refusal, reason, rule, 1, card=move.split(">")[0], **more)  # the card played


def refusal_text(stub: Stub, request: pb.PlayRequest) -> str:
    """What gRPC shows a caller of a refused ``Play``: the call's status details."""
    with pytest.raises(grpc.RpcError) as raised:
        stub.Play(request)
    call = cast(grpc.Call, raised.value)  # every error a stub raises is also the call
    assert call.code() == PRECONDITION
    return call.details() or ""


@pytest.mark.parametrize(
    ("seat", "move", "message"),
    [
        (0, "6C", "it is seat 1's turn, not seat 0's (K4.4)"),
        (1, "6H", "6H is not in seat 1's hand (K8.1)"),
        (1, "8D>8H", "8H is not on the table (K7.3)"),
        (1, "8D>AH+8S", "the captured cards do not split into groups worth 8 (K7.2)"),
        # K7.3: the refusal names a group the capture leaves, of fewest cards.
        (
            1,
            "8D>AH+7C",
            "8D captures AH+7C, but 8S left on the table also makes 8 and must be taken too (K7.3)",
        ),
        (
            1,
            "8D>8S",
            "8D captures 8S, but AH+7C left on the table also make 8 and must be taken too (K7.3)",
        ),
        (1, "8D", "8D must capture (K7.4)"),
    ],
)
def test_an_illegal_move_s_message_ends_with_its_rule(stub, capture_game, seat, move, message):
    """A refused move's message ends with its rule ID in parentheses, as a refused
    config's does (``... (K4.2)``), and names it once: metadata ``rule`` holds it too."""
    request = play_request(capture_game, seat, move)
    assert refusal_text(stub, request) == message
    refusal = refused(stub.Play, request)
    assert refusal.message == message
    assert message.count(refusal.metadata["rule"]) == 1


def test_a_capture_that_is_not_maximal_names_the_group_left_under_the_variant(
    stub: Stub,
) -> None:
    """K7.1, K16.7: under court_cards_rank_only a king is in no group of a played ace
    (14), so AD does not sweep KH AC 9S 5D 10C 4H (by default it must: K7.6), and taking
    10C+4H leaves 5D+9S as the group named, not AC+KH (1 + 13)."""

    def stacked(rank_only: bool) -> pb.NewGameResponse:
        # Six table cards (K16.1); removal=none keeps the table's king (K16.5).
        rules = Rules(
            two_player_five_six=True, removal=Removal.NONE, court_cards_rank_only=rank_only
        )
        hands = {1: "AD 2S 2C 3H 3C", 0: "6C 6H 7D 7H 7S"}
        deck = first_distribution_deck(Config(players=2, rules=rules), hands, "KH AC 9S 5D 10C 4H")
        config = pb.GameConfig(
            players=2,
            rules=pb.Rules(
                two_player_five_six=True,
                removal=pb.REMOVAL_NONE,
                court_cards_rank_only=rank_only,
            ),
        )
        return stub.NewGame(pb.NewGameRequest(config=config, decks=[deck_proto(deck)], seed=3))

    game = stacked(rank_only=True)
    aces = {m for m in legal_texts(stub, game, 1) if m.startswith("AD")}
    assert aces == {"AD>4H+5D+9S+10C", "AD>AC+4H+9S"}
    assert refusal_text(stub, play_request(game, 1, "AD>10C+4H")) == (
        "AD captures 4H+10C, but 5D+9S left on the table also make 14 and must be taken too (K7.3)"
    )
    assert refusal_text(stub, play_request(stacked(rank_only=False), 1, "AD>10C+4H")) == (
        "AD in hand sweeps the table, so it must (K7.6)"
    )


@pytest.fixture(scope="module")
def rank_only_game(stub: Stub) -> pb.NewGameResponse:
    """K16.7: seat 1 holds AC and KH; the table holds QS, which makes 14 with 2D and 13
    with AS, but which only a queen may take under court_cards_rank_only."""
    # Six table cards (K16.1); removal=none keeps the table's queen (K16.5).
    rules = Rules(two_player_five_six=True, removal=Removal.NONE, court_cards_rank_only=True)
    hands = {1: "AC KH 3C 3D 4C", 0: "6C 6H 7D 7H 7S"}
    deck = first_distribution_deck(Config(players=2, rules=rules), hands, "5C 9H QS 2D AS 10C")
    config = pb.GameConfig(
        players=2,
        rules=pb.Rules(
            two_player_five_six=True, removal=pb.REMOVAL_NONE, court_cards_rank_only=True
        ),
    )
    return stub.NewGame(pb.NewGameRequest(config=config, decks=[deck_proto(deck)], seed=3))


@pytest.mark.parametrize(
    ("move", "message", "captured"),
    [
        (
            "AC>QS+2D",
            "under court_cards_rank_only QS can be taken only by a queen, not by AC (K16.7)",
            "QS",
        ),
        ("KH>QS+AS", "under court_cards_rank_only KH takes only kings, not AS (K16.7)", "AS"),
    ],
)
def test_a_capture_the_rank_only_variant_forbids_says_why(
    stub, rank_only_game, move, message, captured
):
    """K7.1, K16.7: QS+2D do make 14 (and QS+AS 13), so the K7.2 message ("do not split
    into groups worth 14") was false: the refusal cites K16.7 and names the ineligible
    captured card in captured_card; the reason stays CAPTURE_NOT_VALID."""
    assert "AC>2D+AS+QS" not in legal_texts(stub, rank_only_game, 1)
    request = play_request(rank_only_game, 1, move)
    refusal = refused(stub.Play, request)
    assert refusal.message == message
    assert_illegal(refusal, "CAPTURE_NOT_VALID", "K16.7", 1, card=move[:2], captured_card=captured)


def test_a_move_out_of_turn_is_not_your_turn(stub, capture_game):
    refusal = refused(stub.Play, play_request(capture_game, 0, "6C"))
    assert_illegal(refusal, "NOT_YOUR_TURN", "K4.4", 0, turn="1")
    assert legal_texts(stub, capture_game, 0) == set()


def test_crawling_while_any_card_captures_is_must_capture_with_the_variant(stub):
    game = stacked_game(stub, CAPTURE_HAND, CAPTURE_TABLE, pb.Rules(must_capture_if_able=True))
    assert legal_texts(stub, game, 1) == {"8D>AH+7C+8S", "9C>AH+8S", "JD>AH+10D"}
    # The card named is one that captures (the first of K1.6's order), not the one played;
    # capturing_cards lists every one that does.
    refusal = refused(stub.Play, play_request(game, 1, "3H"))
    assert_illegal(refusal, "MUST_CAPTURE", "K16.8", 1, card="8D", capturing_cards="8D,9C,JD")
    assert refusal.message == (
        "8D, 9C or JD can capture, and under must_capture_if_able no card may crawl (K16.8)"
    )


@pytest.mark.parametrize("move", ["KH", "7C", "9H>4D+5S", "10H>2H+3C+5S", "7C>2H+5S", "6D>2H+4D"])
def test_anything_but_the_forced_sweep_is_must_sweep(stub, move):
    game = stacked_game(stub, SWEEP_HAND, SWEEP_TABLE)
    assert legal_texts(stub, game, 1) == {"7C>2H+3C+4D+5S"}
    # The card named is the one that must sweep, whichever was played.
    refusal = refused(stub.Play, play_request(game, 1, move))
    assert_illegal(refusal, "MUST_SWEEP", "K7.6", 1, card="7C", sweeping_cards="7C")
    assert refusal.message == "7C in hand sweeps the table, so it must (K7.6)"


@pytest.mark.parametrize(
    ("hand", "rules", "move", "reason", "rule", "key", "named", "message"),
    [
        # K7.6: AD (14) and 7C (2+5, 3+4) sweep 2H 3C 4D 5S; the hand holds two 7C (two
        # decks), named once, in K1.6's order.
        (
            "7C 7C AD 9H 10H KH",
            None,
            "9H",
            "MUST_SWEEP",
            "K7.6",
            "sweeping_cards",
            "AD,7C",
            "AD or 7C in hand sweeps the table, so one must (K7.6)",
        ),
        # K16.8 with K16.6: no sweep is forced, and 9H, 10H and the two 7C capture; KH,
        # which does not, may not crawl.
        (
            "7C 7C KH 9H 10H 6D",
            pb.Rules(no_forced_sweep=True, must_capture_if_able=True),
            "KH",
            "MUST_CAPTURE",
            "K16.8",
            "capturing_cards",
            "6D,7C,9H,10H",
            "6D, 7C, 9H or 10H can capture, and under must_capture_if_able no card may crawl (K16.8)",
        ),
    ],
)
def test_a_forced_sweep_or_capture_lists_every_card_that_may_be_played(
    stub, hand, rules, move, reason, rule, key, named, message
):
    """K7.6, K16.8: a UI that words "sweep with AD or 7C" itself reads every such card
    from metadata (sweeping_cards, capturing_cards), comma-separated K1.1 codes, each
    once, in K1.6's order, without asking for the legal moves: they are the cards the
    legal moves play. ``card`` stays the first."""
    game = stacked_game(stub, hand, SWEEP_TABLE, rules)
    legal = {m.split(">")[0] for m in legal_texts(stub, game, 1)}
    assert set(named.split(",")) == legal
    refusal = refused(stub.Play, play_request(game, 1, move))
    assert_illegal(refusal, reason, rule, 1, card=named.split(",")[0], **{key: named})
    assert refusal.message == message


def test_without_the_forced_sweep_the_same_capture_is_legal(stub):
    game = stacked_game(stub, SWEEP_HAND, SWEEP_TABLE, pb.Rules(no_forced_sweep=True))
    response = stub.Play(play_request(game, 1, "9H>5S+4D"))
    assert [e.WhichOneof("kind") for e in response.events] == ["captured"]


@pytest.fixture(scope="module")
def finished_game(stub: Stub) -> tuple[pb.NewGameResponse, bytes, State]:
    """A one-deal match (single deck, target 1) played to its end over the wire."""
    config = pb.GameConfig(players=2, rules=pb.Rules(single_deck=True), target_score=1)
    started = stub.NewGame(pb.NewGameRequest(config=config, seed=11))
    state = new_game(Config(players=2, rules=Rules(single_deck=True), target_score=1), seed=11)
    token = started.state
    while not state.over:
        seat = state.turn
        move = legal_moves(state, seat)[0]
        request = pb.PlayRequest(
            state=token, seat=seat, seat_token=started.seat_tokens[seat], move=move_proto(move)
        )
        token = stub.Play(request).state
        state, _ = play(state, seat, move)
    return started, token, state


@pytest.mark.parametrize("seat", [0, 1])
def test_a_move_after_the_match_is_game_over(stub, finished_game, seat):
    started, token, _ = finished_game
    assert stub.Score(pb.ScoreRequest(state=token)).game_over
    request = pb.PlayRequest(
        state=token, seat=seat, seat_token=started.seat_tokens[seat], move=move_of("AS")
    )
    assert_illegal(refused(stub.Play, request), "GAME_OVER", "K13.2", seat)
    legal = stub.LegalMoves(
        pb.LegalMovesRequest(state=token, seat=seat, seat_token=started.seat_tokens[seat])
    )
    assert list(legal.moves) == []


# -- NewGame: configs, decks and draws (K3, K4.2, K5.2, K13.2, K16) ---------------------


@pytest.mark.parametrize(
    ("config", "flag", "rule", "field"),
    [
        (pb.GameConfig(players=7), "players", "K3.1", "config.players"),
        (pb.GameConfig(players=1), "players", "K3.1", "config.players"),
        (pb.GameConfig(), "players", "K3.1", "config.players"),
        (pb.GameConfig(players=-3), "players", "K3.1", "config.players"),
        (pb.GameConfig(players=5, teams=pb.TEAM_MODE_PAIRS), "teams", "K3.2", "config.teams"),
        (pb.GameConfig(players=4, teams=pb.TEAM_MODE_TRIOS), "teams", "K3.2", "config.teams"),
        (pb.GameConfig(players=2, match_deals=3), "match_deals", "K13.2", "config.match_deals"),
        (pb.GameConfig(players=4, match_deals=6), "match_deals", "K13.2", "config.match_deals"),
        (pb.GameConfig(players=2, match_deals=0), "match_deals", "K13.2", "config.match_deals"),
        (
            pb.GameConfig(players=2, target_score=0),
            "target_score",
            "K13.2",
            "config.target_score",
        ),
        (
            pb.GameConfig(players=2, first_dealer=2),
            "first_dealer",
            "K4.2",
            "config.first_dealer",
        ),
        (
            pb.GameConfig(players=3, first_dealer=-1),
            "first_dealer",
            "K4.2",
            "config.first_dealer",
        ),
        (
            pb.GameConfig(players=3, rules=pb.Rules(two_player_five_six=True)),
            "two_player_five_six",
            "K16.1",
            "config.rules.two_player_five_six",
        ),
        (
            pb.GameConfig(players=5, rules=pb.Rules(single_deck=True)),
            "single_deck",
            "K16.3",
            "config.rules.single_deck",
        ),
        (
            pb.GameConfig(players=3, rules=pb.Rules(four_four=True)),
            "four_four",
            "K16.2",
            "config.rules.four_four",
        ),
        # K16: only the combination is refused, so both flags are named.
        (
            pb.GameConfig(players=2, rules=pb.Rules(two_player_five_six=True, single_deck=True)),
            "two_player_five_six,single_deck",
            "K16.1",
            "config.rules.two_player_five_six config.rules.single_deck",
        ),
        (
            pb.GameConfig(
                players=2,
                rules=pb.Rules(two_player_five_six=True, four_four=True, single_deck=True),
            ),
            "two_player_five_six,four_four,single_deck",
            "K16.1",
            "config.rules.two_player_five_six config.rules.four_four config.rules.single_deck",
        ),
        # K4.2: the draw decides the first dealer, so a dealer given beside it is refused
        # (as the CLI's options exclude each other), not ignored.
        (
            pb.GameConfig(players=4, first_dealer=2, draw_for_deal=True),
            "first_dealer,draw_for_deal",
            "K4.2",
            "config.first_dealer config.draw_for_deal",
        ),
        (  # seat 1 too: any seat but the default 0 is a dealer given
            pb.GameConfig(players=3, first_dealer=1, draw_for_deal=True),
            "first_dealer,draw_for_deal",
            "K4.2",
            "config.first_dealer config.draw_for_deal",
        ),
    ],
)
def test_an_invalid_config_is_config_invalid_naming_the_flag(stub, config, flag, rule, field):
    """Metadata ``rule`` is the rule ID the message cites, as a refused move's is, so
    that a client need not read it from the text."""
    refusal = refused(stub.NewGame, pb.NewGameRequest(config=config))
    assert (refusal.code, refusal.reason) == (INVALID, "CONFIG_INVALID")
    assert refusal.metadata == {"flag": flag, "rule": rule}
    assert f"{rule})" in refusal.message
    assert list(refusal.violations) == field.split()


@pytest.mark.parametrize(
    ("config", "flag", "limit"),
    [
        # 244 is a multiple of 4: only the bound refuses it, not K13.2's multiple rule.
        (pb.GameConfig(players=4, match_deals=244), "match_deals", "240"),
        (pb.GameConfig(players=2, match_deals=241, target_score=10), "match_deals", "240"),
        (pb.GameConfig(players=3, target_score=481), "target_score", "480"),
    ],
)
def test_a_match_over_the_projects_bounds_is_config_invalid_with_the_limit(
    stub, config, flag, limit
):
    """docs/krypkasino-decisions.md, "Match length": the bounds are this project's, not
    K13.2's, and cite K13.2 as the code does; metadata ``limit`` tells them from the
    flag's other refusals (0, not a multiple of the players: no ``limit``, as
    ``test_an_invalid_config_is_config_invalid_naming_the_flag`` holds) and gives the
    bound, so that a client need not read it from the English message."""
    refusal = refused(stub.NewGame, pb.NewGameRequest(config=config))
    assert (refusal.code, refusal.reason) == (INVALID, "CONFIG_INVALID")
    assert refusal.metadata == {"flag": flag, "rule": "K13.2", "limit": limit}
    assert f"at most {limit}" in refusal.message
    assert list(refusal.violations) == [f"config.{flag}"]


@pytest.mark.parametrize(
    ("request_message", "message", "why"),
    [
        (
            pb.NewGameRequest(),
            "config.players is missing or 0: Krypkasino needs 2 to 6 players, not 0 (K3.1)",
            "missing or 0: Krypkasino needs 2 to 6 players, not 0 (K3.1)",
        ),
        (
            pb.NewGameRequest(config=pb.GameConfig(players=7)),
            "config.players: Krypkasino needs 2 to 6 players, not 7 (K3.1)",
            "Krypkasino needs 2 to 6 players, not 7 (K3.1)",
        ),
    ],
)
def test_a_missing_player_count_is_called_missing(stub, request_message, message, why):
    """Proto3 cannot tell an unset ``players`` from 0: the refusal says both, so that a
    caller who left it out is not told about a 0 it never sent. The field violation
    names the field and says only why (a caller printing ``field: description`` would
    otherwise repeat the path)."""
    refusal = refused(stub.NewGame, request_message)
    assert (refusal.reason, refusal.metadata) == (
        "CONFIG_INVALID",
        {"flag": "players", "rule": "K3.1"},
    )
    assert refusal.message == message
    assert refusal.violations == {"config.players": why}


@pytest.mark.parametrize(
    "rules",
    [
        pb.Rules(two_player_five_six=True, four_four=True),
        pb.Rules(two_player_five_six=True, four_four=True, single_deck=True),
    ],
)
def test_a_refused_combination_s_violations_say_only_why(stub, rules):
    """K16.1: the message names every field of the combination first (``a and b: ...``)
    for callers that show only the message; each field violation names its field and
    gives only the reason, not the message's list of paths again."""
    refusal = refused(stub.NewGame, pb.NewGameRequest(config=pb.GameConfig(players=2, rules=rules)))
    paths, why = refusal.message.split(": ", 1)
    assert paths == " and ".join(refusal.violations)
    assert why.startswith("two_player_five_six cannot be combined with four_four")
    assert set(refusal.violations.values()) == {why}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            pb.GameConfig(players=4, first_dealer=4),
            "config.first_dealer: must be a seat from 0 to 3, not 4 (K4.2)",
        ),
        (
            pb.GameConfig(players=4, match_deals=5),
            "config.match_deals: without target_score it must be a positive multiple of 4, "
            "not 5 (every player deals equally often, K13.2)",
        ),
        (
            pb.GameConfig(players=2, rules=pb.Rules(two_player_five_six=True, four_four=True)),
            "config.rules.two_player_five_six and config.rules.four_four: "
            "two_player_five_six cannot be combined with four_four (K16.1)",
        ),
        (
            pb.GameConfig(players=4, teams=pb.TeamMode.ValueType(7)),
            "config.teams: unknown TeamMode value 7 (this release knows 0 to 3)",
        ),
        (
            pb.GameConfig(players=2, match_deals=-2),
            "config.match_deals: must be a positive number of deals, not -2 (K13.2)",
        ),
        (
            pb.GameConfig(players=2, target_score=-5),
            "config.target_score: must be a positive score, not -5 (K13.2)",
        ),
    ],
)
def test_a_config_refusal_names_the_field_in_its_message(stub, config, message):
    """Most callers show only the message (``details()``, HTTP's ``message``), so it
    names the field too, not only the field violation."""
    refusal = refused(stub.NewGame, pb.NewGameRequest(config=config))
    assert refusal.message == message


def test_a_match_deals_multiple_or_a_target_score_is_accepted(stub):
    """The counterpart of the match_deals refusals: K13.2 allows these."""
    for config in (
        pb.GameConfig(players=2, match_deals=4),
        pb.GameConfig(players=2, match_deals=3, target_score=50),
    ):
        assert stub.NewGame(pb.NewGameRequest(config=config)).view.deal_number == 1


def enum_config(field: str, value: int) -> pb.GameConfig:
    config = pb.GameConfig(players=4)
    if field == "config.rules.removal":
        config.rules.removal = pb.Removal.ValueType(value)
    elif field == "config.teams":
        config.teams = pb.TeamMode.ValueType(value)
    else:
        config.tie_rule = pb.TieRule.ValueType(value)
    return config


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("config.teams", 4),
        ("config.teams", -1),
        ("config.rules.removal", 4),
        ("config.rules.removal", 2**31 - 1),
        ("config.tie_rule", 3),
        ("config.tie_rule", -(2**31)),
    ],
)
def test_an_unknown_enum_number_is_field_invalid(stub, field, value):
    refusal = refused(stub.NewGame, pb.NewGameRequest(config=enum_config(field, value)))
    assert (refusal.code, refusal.reason) == (INVALID, "FIELD_INVALID")
    assert set(refusal.violations) == {field}
    assert refusal.metadata == {"field": field}  # design section 5: dynamic values in metadata


def two_player_new_game(
    decks: list[cards_pb2.Deck] | None = None,
    draw: cards_pb2.Deck | None = None,
    *,
    draw_for_deal: bool = False,
    rules: pb.Rules | None = None,
    match_deals: int | None = None,
) -> pb.NewGameRequest:
    config = pb.GameConfig(
        players=2, draw_for_deal=draw_for_deal, rules=rules, match_deals=match_deals
    )
    return pb.NewGameRequest(config=config, decks=decks, draw=draw)


@pytest.mark.parametrize(
    ("decks", "field"),
    [
        ([full_deck(1)], "decks[0]"),  # one deck where the config needs two (K2.1)
        ([(*full_deck(2)[:-1], parse_card("AS"))], "decks[0]"),  # a third AS, one KC short
        ([full_deck(2), full_deck(2)[1:]], "decks[1]"),
        ([()], "decks[0]"),
        ([(*full_deck(2), parse_card("2H"))], "decks[0]"),
    ],
)
def test_an_explicit_deck_that_is_not_full_is_deck_invalid(stub, decks, field):
    request = two_player_new_game(decks=[deck_proto(deck) for deck in decks])
    refusal = refused(stub.NewGame, request)
    assert (refusal.code, refusal.reason) == (INVALID, "DECK_INVALID")
    assert set(refusal.violations) == {field}
    assert refusal.metadata == {"deck": field.removeprefix("decks[").removesuffix("]")}
    assert refusal.message.startswith(f"{field}: a deck must hold 104 cards")  # which deck


def test_a_deck_of_thousands_of_cards_is_still_deck_invalid(stub):
    """The refusal names each wrong code once with a count: a card per surplus copy
    made trailers of 18 KB, over what a gRPC client accepts (RESOURCE_EXHAUSTED)."""
    deck = deck_proto([*full_deck(2), *[parse_card("AS")] * 3000])
    refusal = refused(stub.NewGame, two_player_new_game(decks=[deck]))
    assert (refusal.code, refusal.reason) == (INVALID, "DECK_INVALID")
    assert refusal.violations["decks[0]"].endswith("got 3104; extra AS x3000")


def test_a_malformed_card_in_a_deck_names_its_field(stub):
    deck = deck_proto(full_deck(2))
    deck.cards[5].rank = cards_pb2.RANK_UNSPECIFIED
    refusal = refused(stub.NewGame, two_player_new_game(decks=[deck_proto(full_deck(2)), deck]))
    assert (refusal.code, refusal.reason) == (INVALID, "FIELD_INVALID")
    assert set(refusal.violations) == {"decks[1].cards[5].rank"}


def test_the_most_explicit_decks_are_each_checked_not_refused_as_too_many(stub):
    """64 decks (MAX_DECKS) is the limit, not over it: they make a game, and a bad 64th
    deck is refused as that deck, not as one too many."""
    full = deck_proto(full_deck(2))
    game = stub.NewGame(two_player_new_game(decks=[full] * 64, match_deals=64))
    assert game.game_id and len(game.seat_tokens) == 2
    last_bad = [full] * 63 + [cards_pb2.Deck()]
    refusal = refused(stub.NewGame, two_player_new_game(decks=last_bad, match_deals=64))
    assert (refusal.code, refusal.reason, set(refusal.violations)) == (
        INVALID,
        "DECK_INVALID",
        {"decks[63]"},
    )


def test_too_many_explicit_decks_are_refused(stub):
    refusal = refused(stub.NewGame, two_player_new_game(decks=[cards_pb2.Deck()] * 65))
    assert (refusal.code, refusal.reason, set(refusal.violations)) == (
        INVALID,
        "TOO_MANY_DECKS",
        {"decks"},
    )
    assert refusal.metadata == {"limit": "64"}  # as REQUEST_TOO_LARGE gives its limit
    assert refusal.message == "65 decks, but at most 64 are accepted"


@pytest.mark.parametrize(
    ("config", "limit"),
    [
        (pb.GameConfig(players=2), 2),  # one deal per player (K13.2)
        (pb.GameConfig(players=3, match_deals=6), 6),
        (pb.GameConfig(players=2, tie_rule=pb.TIE_RULE_TIEBREAK_DEAL), 3),  # K13.3
        (pb.GameConfig(players=2, match_deals=3, target_score=50), 3),
    ],
)
def test_more_decks_than_the_match_can_deal_are_refused(stub, config, limit):
    """A deck no deal would take travelled in every state token of the match, unused
    (``cardrules simulate`` refused them already)."""
    full = deck_proto(full_deck(2))
    assert stub.NewGame(pb.NewGameRequest(config=config, decks=[full] * limit)).game_id
    refusal = refused(stub.NewGame, pb.NewGameRequest(config=config, decks=[full] * (limit + 1)))
    assert (refusal.code, refusal.reason, set(refusal.violations)) == (
        INVALID,
        "TOO_MANY_DECKS",
        {"decks"},
    )
    assert refusal.metadata == {"limit": str(limit)}
    assert refusal.message == (
        f"{limit + 1} decks, but the match has at most {limit} deals (K13.2, K13.3)"
    )


@pytest.mark.parametrize("decks", [[], [full_deck(2)]], ids=["dealt_by_seed", "explicit_deck"])
def test_a_draw_without_draw_for_deal_is_refused(stub, decks):
    request = two_player_new_game(
        draw=deck_proto(full_deck(2)), decks=[deck_proto(deck) for deck in decks]
    )
    refusal = refused(stub.NewGame, request)
    assert (refusal.code, refusal.reason, set(refusal.violations)) == (
        INVALID,
        "DRAW_WITHOUT_DRAW_FOR_DEAL",
        {"draw"},
    )


@pytest.mark.parametrize("draw", ["AS", "AS AH", "KS KH 2C"])
def test_a_draw_that_runs_out_before_a_dealer_is_found_is_refused(stub, draw):
    request = two_player_new_game(draw=deck_proto(parse_cards(draw)), draw_for_deal=True)
    refusal = refused(stub.NewGame, request)
    assert (refusal.code, refusal.reason, set(refusal.violations)) == (
        INVALID,
        "DRAW_EXHAUSTED",
        {"draw"},
    )
    assert refusal.message.startswith("draw: ")


@pytest.mark.parametrize(
    ("rules", "draw"),
    [
        (pb.Rules(single_deck=True), "AS AS AS 2S"),  # three aces of spades from one deck
        (pb.Rules(), "AS AS AS 2S"),  # the two-deck game has two
        (pb.Rules(), " ".join(["AS"] * 9000 + ["2S"])),  # a draw that would bloat the token
    ],
    ids=["single_deck", "two_decks", "long"],
)
def test_a_draw_that_could_not_come_from_one_deck_is_refused(stub, rules, draw):
    request = two_player_new_game(
        draw=deck_proto(parse_cards(draw)), draw_for_deal=True, rules=rules
    )
    refusal = refused(stub.NewGame, request)
    assert (refusal.code, refusal.reason, set(refusal.violations)) == (
        INVALID,
        "DRAW_INVALID",
        {"draw"},
    )
    assert "extra AS" in refusal.violations["draw"]
    assert refusal.message.startswith("draw: the cards must come from one deck")


def test_a_draw_of_one_decks_cards_is_accepted(stub):
    request = two_player_new_game(
        draw=deck_proto(parse_cards("AS AH 2S KS")),
        draw_for_deal=True,
        rules=pb.Rules(single_deck=True),
    )
    assert stub.NewGame(request).view.dealer == 1  # AS and AH tie; then seat 1 draws KS


def test_a_malformed_card_in_the_draw_names_its_field(stub):
    request = two_player_new_game(draw=cards_pb2.Deck(cards=[bad_card(3, 0)]), draw_for_deal=True)
    refusal = refused(stub.NewGame, request)
    assert (refusal.code, refusal.reason, set(refusal.violations)) == (
        INVALID,
        "FIELD_INVALID",
        {"draw.cards[0].suit"},
    )


# -- request size (design section 6: a limit on the maximum request size) ----------------


def assert_too_large(stub: Stub, limit: int) -> None:
    """Over the limit, not at it: the service's REQUEST_TOO_LARGE. Beyond 5/4 of the
    limit gRPC refuses the message itself, before the service sees it, so without an
    ErrorInfo (compressed messages: test_grpc_compressed_limit)."""
    at_limit = state_of_request_size(limit)
    assert public_view(stub, at_limit).reason == "TOKEN_UNKNOWN_KEY"
    refusal = public_view(stub, at_limit + b"\x00")
    assert (refusal.code, refusal.reason) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "REQUEST_TOO_LARGE",
    )
    assert refusal.metadata == {"limit": str(limit)}
    assert refusal.message == f"the request is larger than {limit} bytes"
    # Up to 5/4 of the limit, the service's own refusal, with its ErrorInfo
    # (docs/api.md: only a message over 5/4 of the limit is refused by gRPC).
    bound = limit * 5 // 4
    at_bound = public_view(stub, state_of_request_size(bound))
    assert (at_bound.code, at_bound.reason) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "REQUEST_TOO_LARGE",
    )
    with pytest.raises(grpc.RpcError) as caught:
        stub.GetView(pb.GetViewRequest(state=state_of_request_size(bound + 1)))
    assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error_info(caught.value) is None  # as the client's README says


def test_a_request_over_the_default_limit_is_request_too_large(stub, game):
    assert_too_large(stub, 64 * 1024)
    # The server keeps serving after refusing it.
    assert stub.GetView(pb.GetViewRequest(state=game.state)).view.game_id == game.game_id


def test_the_request_limit_is_configurable(other_server):
    with connect(other_server.target) as other:
        assert_too_large(other, SMALL_LIMIT)


# -- the request log (design section 6: never a token or a hand) ------------------------

FORBIDDEN_LOG_KEYS = {"state", "seat_token", "seat_tokens", "hand", "hands", "stock", "token"}


def encodings(secret: bytes) -> set[str]:
    """Ways a token could end up in a log line."""
    return {
        secret.hex(),
        secret.hex().upper(),
        base64.b64encode(secret).decode(),
        base64.urlsafe_b64encode(secret).decode().rstrip("="),
        repr(secret)[2:-1],
    }


def test_every_answer_carries_its_request_id_in_the_trailers(server, stub, capture_game):
    """docs/api.md "Request ids": the caller's id when usable, else the log line's own,
    on answers as on refusals."""
    request = pb.GetViewRequest(state=capture_game.state)
    mine = f"mine-{uuid.uuid4().hex}"
    _, call = stub.GetView.with_call(request, metadata=(("x-request-id", mine),))
    assert dict(call.trailing_metadata())["x-request-id"] == mine
    with pytest.raises(grpc.RpcError) as refusal:
        stub.GetView(pb.GetViewRequest(), metadata=(("x-request-id", f"{mine}-refused"),))
    assert request_id(refusal.value) == f"{mine}-refused"
    first, second = f"{mine}-first", f"{mine}-second"
    sent_twice = (("x-request-id", first), ("x-request-id", second))
    _, call = stub.GetView.with_call(request, metadata=sent_twice)
    assert dict(call.trailing_metadata())["x-request-id"] == first  # as HTTP takes the first
    _, call = stub.GetView.with_call(request)
    made_up = dict(call.trailing_metadata())["x-request-id"]
    [line] = wait_for_request_lines(server, [made_up])
    assert (line["method"], line["code"]) == (f"{SERVICE_NAME}/GetView", "OK")


def test_the_request_line_of_a_grpc_call_names_its_transport_and_peer(server, stub, game):
    """The request line says which transport carried the call, answered or refused, as
    the HTTP gateway's lines say ``http``, and names the peer (docs/operations.md)."""
    ids = [f"grpc-{uuid.uuid4().hex}" for _ in range(2)]
    stub.GetView(pb.GetViewRequest(state=game.state), metadata=(("x-request-id", ids[0]),))
    refused(stub.GetView, pb.GetViewRequest(), (("x-request-id", ids[1]),))
    lines = {str(line["request_id"]): line for line in wait_for_request_lines(server, ids)}
    assert [(lines[i]["code"], lines[i]["transport"]) for i in ids] == [
        ("OK", "grpc"),
        ("InvalidArgument", "grpc"),
    ]
    assert all(str(lines[i]["peer"]).startswith("ipv4:127.0.0.1:") for i in ids)


def test_the_request_log_never_holds_a_token_or_a_hand(server, stub, capture_game):
    prefix = f"log-{uuid.uuid4().hex}-"
    sent: list[bytes] = [capture_game.state, *capture_game.seat_tokens]
    request_ids = []

    def tagged(name: str) -> tuple[tuple[str, str]]:
        request_ids.append(prefix + name)
        return (("x-request-id", prefix + name),)

    state, tokens = capture_game.state, capture_game.seat_tokens
    stub.LegalMoves(
        pb.LegalMovesRequest(state=state, seat=1, seat_token=tokens[1]), metadata=tagged("legal")
    )
    played = stub.Play(play_request(capture_game, 1, "8D>AH+7C+8S"), metadata=tagged("play"))
    sent.append(played.state)
    stub.GetView(
        pb.GetViewRequest(state=played.state, seat=0, seat_token=tokens[0]),
        metadata=tagged("view"),
    )
    refused(stub.Play, play_request(capture_game, 1, "8D"), tagged("illegal"))
    refused(
        stub.LegalMoves,
        pb.LegalMovesRequest(state=state, seat=0, seat_token=tokens[1]),
        tagged("seat-token"),
    )
    flipped = bytearray(state)
    flipped[-1] ^= 1
    sent.append(bytes(flipped))
    refused(stub.GetView, pb.GetViewRequest(state=bytes(flipped)), tagged("bad-token"))
    started = stub.NewGame(
        pb.NewGameRequest(config=pb.GameConfig(players=3)), metadata=tagged("new")
    )
    sent += [started.state, *started.seat_tokens]

    lines = wait_for_request_lines(server, request_ids)
    assert {line["request_id"]: line["code"] for line in lines} == {
        prefix + "legal": "OK",
        prefix + "play": "OK",
        prefix + "view": "OK",
        prefix + "illegal": "FailedPrecondition",
        prefix + "seat-token": "PermissionDenied",
        prefix + "bad-token": "InvalidArgument",
        prefix + "new": "OK",
    }
    assert {line["game_id"] for line in lines if line["code"] == "OK"} == {
        capture_game.game_id,
        started.game_id,
    }
    secrets = set().union(*(encodings(secret) for secret in sent))
    for line in list(server.logs):
        assert not FORBIDDEN_LOG_KEYS & set(line), line
        text = json.dumps(line)
        leaked = [secret for secret in secrets if secret in text]
        assert not leaked, line


def wait_for_request_lines(
    server: ServerProcess, request_ids: list[str]
) -> list[dict[str, object]]:
    """The request lines of ``request_ids``; the log reader thread may lag a little."""
    wanted = set(request_ids)
    deadline = time.monotonic() + 20
    while True:
        lines = [line for line in server.log_events("request") if line.get("request_id") in wanted]
        if len(lines) >= len(wanted) or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert len(lines) == len(wanted), lines
    return lines


# -- fuzzing: no request makes the server fail (design section 5) -----------------------
#
# Each fuzzed request is checked against an order-free oracle: the set of
# refusals the design allows for it (any one may win when several apply),
# ``set()`` when it must succeed, or ``None`` when only the generic checks
# apply (no INTERNAL, exactly one ErrorInfo, field violations when malformed).


@dataclass(frozen=True)
class Known:
    """A state token whose game the test knows in-process, with its seat tokens."""

    token: bytes
    state: State
    seat_tokens: tuple[bytes, ...]


@dataclass(frozen=True)
class FuzzPool:
    known: tuple[Known, ...]
    foreign: bytes  # a state token of a server with another key
    seat_tokens: tuple[bytes, ...]  # of every game, the foreign one included


@pytest.fixture(scope="module")
def fuzz_pool(stub, game, capture_game, finished_game, other_server) -> FuzzPool:
    capture_deck = first_distribution_deck(
        Config(players=2), {1: CAPTURE_HAND, 0: OPPONENT_HAND}, CAPTURE_TABLE
    )
    four = pb.GameConfig(
        players=4, teams=pb.TEAM_MODE_PAIRS, rules=pb.Rules(must_capture_if_able=True)
    )
    four_game = stub.NewGame(pb.NewGameRequest(config=four, seed=99))
    four_state = new_game(
        Config(players=4, teams=Teams.PAIRS, rules=Rules(must_capture_if_able=True)), seed=99
    )
    started, finished_token, finished_state = finished_game
    known = (
        Known(game.state, new_game(Config(players=2), seed=1), tuple(game.seat_tokens)),
        Known(
            capture_game.state,
            new_game(Config(players=2), seed=3, decks=[capture_deck]),
            tuple(capture_game.seat_tokens),
        ),
        Known(finished_token, finished_state, tuple(started.seat_tokens)),
        Known(four_game.state, four_state, tuple(four_game.seat_tokens)),
    )
    for item in known:  # the in-process twin is the game the server holds
        view = stub.GetView(pb.GetViewRequest(state=item.token)).view
        assert (view.move_number, list(view.table)) == (
            item.state.move_number,
            [card_proto(c) for c in item.state.table],
        )
    with connect(other_server.target) as other:
        foreign = other.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=3), seed=5))
    seat_tokens = (*(t for item in known for t in item.seat_tokens), *foreign.seat_tokens)
    return FuzzPool(known, foreign.state, seat_tokens)


GAME_STATE_INTS = (
    "first_dealer",
    "deal",
    "dealer",
    "distribution",
    "turn",
    "last_capturer",
    "bordstabbe_seat",
    "move_number",
)
GAME_STATE_BYTES = ("stock", "table", "set_aside", "dealer_draw_seats", "dealer_draw_cards")
# What ``mutated_state`` changes: one case of the plain-server fuzz test per kind, so
# each is exercised every run rather than left to the luck of a derandomized draw.
MUTATION_KINDS = ("int", "bytes", "repeated", "config", "results", "over")


@st.composite
def mutated_state(draw: st.DrawFn, token: bytes, kind: str) -> bytes:
    """A plain token of a GameState with one field changed, of the given kind
    (one of ``MUTATION_KINDS``).

    Plain, for the plain-state server: sealed tokens are trusted (AES-GCM
    proves the server made them), so only plain ones reach the state checks.
    """
    message = game_state(token, TEST_KEY)
    if kind == "int":
        value = draw(st.one_of(st.integers(-3, 300), st.sampled_from([2**31 - 1, -(2**31)])))
        setattr(message, draw(st.sampled_from(GAME_STATE_INTS)), value)
    elif kind == "bytes":
        name = draw(st.sampled_from(GAME_STATE_BYTES))
        old = getattr(message, name)
        new = draw(st.one_of(st.binary(max_size=12), st.just(old[1:]), st.just(old + old[:1])))
        setattr(message, name, new)
    elif kind == "repeated":
        field = getattr(message, draw(st.sampled_from(["hands", "piles", "markers", "decks"])))
        if field and draw(st.booleans()):
            field[draw(st.integers(0, len(field) - 1))] = draw(st.binary(max_size=12))
        else:
            field.append(draw(st.binary(max_size=12)))
    elif kind == "config":
        message.config.players = draw(st.integers(-1, 8))
        message.config.rules.single_deck = draw(st.booleans())
        message.config.teams = pb.TeamMode.ValueType(draw(st.integers(-1, 4)))
    elif kind == "results":
        message.results.add(
            deal_number=draw(st.integers(-1, 3)), recipient=draw(st.integers(-1, 3))
        )
        message.winners.append(draw(st.integers(-1, 3)))
    elif kind == "over":
        message.over = not message.over
    else:
        raise ValueError(f"no such kind of change: {kind!r}")
    return plain(message.SerializeToString())


@st.composite
def broken_token(draw: st.DrawFn, pool: FuzzPool) -> bytes:
    """Bytes that are no token of the sealing server: random, cut short, a bit flipped,
    plain (a server that seals opens only sealed tokens), or sealed with another key."""
    token = draw(st.sampled_from([k.token for k in pool.known]))
    how = draw(st.sampled_from(["random", "truncated", "flipped", "plain", "foreign"]))
    if how == "random":
        return draw(st.binary(max_size=300))
    if how == "truncated":
        return token[: draw(st.integers(0, len(token) - 1))]
    if how == "flipped":
        flipped = bytearray(token)
        flipped[draw(st.integers(0, len(token) - 1))] ^= 1 << draw(st.integers(0, 7))
        return bytes(flipped)
    if how == "plain":
        return draw(mutated_state(token, draw(st.sampled_from(MUTATION_KINDS))))
    return pool.foreign


def any_card() -> st.SearchStrategy[cards_pb2.Card]:
    valid = st.integers(0, CARDS_PER_DECK - 1).map(lambda c: card_proto(Card(c)))
    raw = st.builds(bad_card, st.integers(-2, 15), st.integers(-2, 6))
    return st.one_of(valid, valid, valid, raw)


def any_cards(max_size: int) -> st.SearchStrategy[list[cards_pb2.Card]]:
    return st.lists(any_card(), max_size=max_size)


def any_move() -> st.SearchStrategy[pb.Move]:
    return st.builds(
        lambda card, captures: pb.Move(card=card, captures=captures),
        st.one_of(st.none(), any_card()),
        any_cards(5),
    )


@st.composite
def hand_move(draw: st.DrawFn, state: State, seat: int) -> pb.Move:
    """A well-formed move from the seat's hand, capturing table cards: legal or nearly so."""
    hand = state.hands[seat] or full_deck(1)
    card = draw(st.sampled_from(hand))
    captures = draw(st.lists(st.sampled_from(state.table or hand), max_size=4))
    return pb.Move(card=card_proto(card), captures=[card_proto(c) for c in captures])


SEATS = st.one_of(st.integers(-2, 7), st.sampled_from([2**31 - 1, -(2**31)]))


@st.composite
def seat_and_token(draw: st.DrawFn, pool: FuzzPool, known: Known) -> tuple[int, bytes]:
    """Mostly a seat of the game with its own token; otherwise anything."""
    if draw(st.integers(0, 3)):
        seat = draw(st.integers(0, known.state.players - 1))
        return seat, known.seat_tokens[seat]
    return draw(SEATS), draw(st.one_of(st.sampled_from(pool.seat_tokens), st.binary(max_size=40)))


def well_formed_move(move: pb.Move) -> Move | None:
    cards = [move.card, *move.captures]
    if not move.HasField("card") or not all(1 <= c.rank <= 13 and 1 <= c.suit <= 4 for c in cards):
        return None
    return Move.of(card_code(move.card), [card_code(c) for c in move.captures])


def allowed_refusals(
    known: Known, request: pb.PlayRequest | pb.LegalMovesRequest | pb.GetViewRequest
) -> set[tuple[str, str]]:
    """The refusals the design allows for a request on a known, valid state token."""
    allowed: set[tuple[str, str]] = set()
    seat, seat_token = request.seat, request.seat_token
    if isinstance(request, pb.GetViewRequest) and not request.HasField("seat"):
        return {("INVALID_ARGUMENT", "SEAT_MISSING")} if seat_token else set()
    if not 0 <= seat < known.state.players:
        allowed.add(("INVALID_ARGUMENT", "SEAT_INVALID"))
    elif not seat_token:
        allowed.add(("PERMISSION_DENIED", "SEAT_TOKEN_MISSING"))
    elif seat_token != known.seat_tokens[seat]:
        allowed.add(("PERMISSION_DENIED", "SEAT_TOKEN_INVALID"))
    if not isinstance(request, pb.PlayRequest):
        return allowed
    move = well_formed_move(request.move)
    if not request.HasField("move"):
        allowed.add(("INVALID_ARGUMENT", "MOVE_MISSING"))
    elif move is None:
        allowed.add(("INVALID_ARGUMENT", "FIELD_INVALID"))
    elif not allowed:
        try:
            play(known.state, seat, move)
        except IllegalMoveError as error:
            allowed.add(("FAILED_PRECONDITION", error.reason.value))
    return allowed


def check_outcome(
    stub: Stub, method: str, request: object, allowed: set[tuple[str, str]] | None
) -> object:
    """Call, decode (no INTERNAL, one ErrorInfo...), and hold the outcome to the oracle.

    Returns the response, or ``None`` for a refusal.
    """
    rpc = getattr(stub, method)
    response = None

    def call() -> None:
        nonlocal response
        response = rpc(request, timeout=10)

    refusal = outcome(call)
    got = None if refusal is None else (refusal.code.name, refusal.reason)
    event(f"{method}: {got or 'OK'}")
    if allowed is not None:
        assert got in allowed if allowed else got is None, (got, allowed, request)
    if refusal is not None and refusal.code is PRECONDITION:
        # docs/api.md: the seat to move for NOT_YOUR_TURN, the card a move's rule is about,
        # the captured card the table lacks (K7.3) or the card played may not take
        # (K16.7), and the group a capture leaves (K7.3).
        card = set() if refusal.reason in ("NOT_YOUR_TURN", "GAME_OVER") else {"card"}
        extra = card | ({"turn"} if refusal.reason == "NOT_YOUR_TURN" else set())
        rule = refusal.metadata.get("rule")
        named_capture = refusal.reason == "CAPTURE_NOT_ON_TABLE" or rule == "K16.7"
        extra |= {"captured_card"} if named_capture else set()
        # K7.3: how often the table holds it, and (only when so) that the hand holds it.
        if refusal.reason == "CAPTURE_NOT_ON_TABLE":
            extra |= {"table_count"} | ({"in_hand"} if "in_hand" in refusal.metadata else set())
            assert refusal.metadata.get("in_hand", "true") == "true", refusal
        extra |= {"group_left"} if refusal.reason == "CAPTURE_NOT_MAXIMAL" else set()
        # K7.6, K16.8: every card that sweeps (captures), of which one must be played.
        extra |= {"sweeping_cards"} if refusal.reason == "MUST_SWEEP" else set()
        extra |= {"capturing_cards"} if rule == "K16.8" else set()
        assert set(refusal.metadata) == {"rule", "seat"} | extra, refusal
    return response


@settings(max_examples=fuzz_examples(70), deadline=None, database=None)
@given(data=st.data())
def test_fuzzed_requests_on_a_valid_state_get_the_designed_answer(stub, fuzz_pool, data):
    known = data.draw(st.sampled_from(fuzz_pool.known), label="game")
    seat, seat_token = data.draw(seat_and_token(fuzz_pool, known), label="seat")
    method = data.draw(st.sampled_from(["Play"] * 4 + ["LegalMoves", "GetView"]), label="rpc")
    request: pb.PlayRequest | pb.LegalMovesRequest | pb.GetViewRequest
    if method == "GetView":
        with_seat = data.draw(st.integers(0, 3), label="with seat")
        request = pb.GetViewRequest(
            state=known.token,
            seat=seat if with_seat else None,
            seat_token=seat_token if with_seat != 1 else b"",
        )
    elif method == "LegalMoves":
        request = pb.LegalMovesRequest(state=known.token, seat=seat, seat_token=seat_token)
    else:
        kind = data.draw(st.sampled_from(["any", "hand", "legal", "legal"]), label="kind")
        move: pb.Move | None
        if kind == "legal" and not known.state.over:  # the mover's own legal move
            seat = known.state.turn
            seat_token = known.seat_tokens[seat]
            legal = legal_moves(known.state, seat)
            move = move_proto(data.draw(st.sampled_from(legal), label="move"))
        elif kind == "hand" and 0 <= seat < known.state.players:
            move = data.draw(hand_move(known.state, seat), label="move")
        else:
            move = data.draw(st.one_of(st.none(), any_move()), label="move")
        request = pb.PlayRequest(state=known.token, seat=seat, seat_token=seat_token, move=move)
    response = check_outcome(stub, method, request, allowed_refusals(known, request))
    if isinstance(response, pb.LegalMovesResponse):
        assert [m.move for m in response.moves] == [
            move_proto(m) for m in legal_moves(known.state, seat)
        ]
    if isinstance(response, pb.PlayResponse):
        assert isinstance(request, pb.PlayRequest)
        played = well_formed_move(request.move)
        assert played is not None
        after, _ = play(known.state, seat, played)
        assert list(response.view.hand) == [card_proto(c) for c in after.hands[seat]]
        assert response.view.move_number == after.move_number


def state_call(data: st.DataObject, pool: FuzzPool, token: bytes) -> tuple[str, object]:
    """A call of any RPC that takes a state token, carrying ``token``: the method's name
    and its request, with a seat and seat token where the RPC takes them."""
    known = data.draw(st.sampled_from(pool.known), label="game")
    seat, seat_token = data.draw(seat_and_token(pool, known), label="seat")
    return data.draw(
        st.sampled_from(
            [
                ("Score", pb.ScoreRequest(state=token)),
                ("GetView", pb.GetViewRequest(state=token)),
                ("GetView", pb.GetViewRequest(state=token, seat=seat, seat_token=seat_token)),
                ("LegalMoves", pb.LegalMovesRequest(state=token, seat=seat, seat_token=seat_token)),
                (
                    "Play",
                    pb.PlayRequest(
                        state=token, seat=seat, seat_token=seat_token, move=move_of("AS")
                    ),
                ),
            ]
        ),
        label="call",
    )


@settings(max_examples=fuzz_examples(50), deadline=None, database=None)
@given(data=st.data())
def test_fuzzed_state_tokens_never_fail_the_server(stub, fuzz_pool, data):
    """Nothing but its own sealed tokens opens on the sealing server, whatever else is
    wrong: each call is refused naming the token (design section 4), never INTERNAL."""
    token = data.draw(broken_token(fuzz_pool), label="token")
    method, request = state_call(data, fuzz_pool, token)
    reason = token_reason(token) if token else "STATE_MISSING"
    check_outcome(stub, method, request, {("INVALID_ARGUMENT", reason)})


@pytest.mark.parametrize("kind", MUTATION_KINDS)
@settings(max_examples=fuzz_examples(12), deadline=None, database=None)
@given(data=st.data())
def test_fuzzed_plain_states_never_fail_the_plain_server(plain_stub, fuzz_pool, kind, data):
    """Plain tokens of states with one field changed (every kind of change, every run)
    on the plain-state server, which opens them and checks the state they hold.

    A broken state may still be a game, so only the generic checks apply: no INTERNAL,
    exactly one ErrorInfo, field violations when malformed.
    """
    token = data.draw(st.sampled_from([k.token for k in fuzz_pool.known]), label="base")
    broken = data.draw(mutated_state(token, kind), label="token")
    method, request = state_call(data, fuzz_pool, broken)
    check_outcome(plain_stub, method, request, None)


def enum_number(known: int) -> st.SearchStrategy[int]:
    """Mostly a known enum number (``0..known-1``), sometimes one just outside."""
    return st.one_of(st.integers(0, known - 1), st.integers(0, known - 1), st.integers(-1, known))


def any_config() -> st.SearchStrategy[pb.GameConfig]:
    rules = st.builds(
        pb.Rules,
        two_player_five_six=st.booleans(),
        four_four=st.booleans(),
        single_deck=st.booleans(),
        last_capture_point=st.booleans(),
        removal=enum_number(4),
        no_forced_sweep=st.booleans(),
        court_cards_rank_only=st.booleans(),
        must_capture_if_able=st.booleans(),
        nordic_scoring=st.booleans(),
        bordstabbe=st.booleans(),
    )
    return st.builds(
        pb.GameConfig,
        players=st.one_of(st.integers(2, 6), st.integers(2, 6), st.integers(-1, 8)),
        teams=st.one_of(st.just(0), enum_number(4)),
        rules=st.one_of(st.none(), rules),
        first_dealer=st.one_of(st.just(0), st.integers(-1, 7)),
        draw_for_deal=st.booleans(),
        match_deals=st.one_of(st.none(), st.none(), st.integers(-1, 13)),
        target_score=st.one_of(st.none(), st.none(), st.integers(-1, 100)),
        tie_rule=enum_number(3),
    )


def any_deck() -> st.SearchStrategy[cards_pb2.Deck]:
    full = st.sampled_from([1, 2]).flatmap(
        lambda copies: st.permutations(full_deck(copies)).map(deck_proto)
    )
    return st.one_of(full, full, any_cards(8).map(lambda cards: cards_pb2.Deck(cards=cards)))


TEAM_MODES = (Teams.INDIVIDUAL, Teams.INDIVIDUAL, Teams.PAIRS, Teams.TRIOS)
REMOVALS = (Removal.COURTS, Removal.COURTS, Removal.SPADES, Removal.NONE)
TIE_RULES = (TieRule.SHARED, TieRule.SHARED, TieRule.TIEBREAK_DEAL)


def engine_config(message: pb.GameConfig) -> Config | None:
    """The engine config of known enum numbers (``*_UNSPECIFIED`` = default), else None."""
    r = message.rules
    if not (0 <= message.teams < 4 and 0 <= r.removal < 4 and 0 <= message.tie_rule < 3):
        return None
    rules = Rules(
        two_player_five_six=r.two_player_five_six,
        four_four=r.four_four,
        single_deck=r.single_deck,
        last_capture_point=r.last_capture_point,
        removal=REMOVALS[r.removal],
        no_forced_sweep=r.no_forced_sweep,
        court_cards_rank_only=r.court_cards_rank_only,
        must_capture_if_able=r.must_capture_if_able,
        nordic_scoring=r.nordic_scoring,
        bordstabbe=r.bordstabbe,
    )
    return Config(
        players=message.players,
        teams=TEAM_MODES[message.teams],
        rules=rules,
        first_dealer=message.first_dealer,
        draw_for_deal=message.draw_for_deal,
        match_deals=message.match_deals if message.HasField("match_deals") else None,
        target_score=message.target_score if message.HasField("target_score") else None,
        tie_rule=TIE_RULES[message.tie_rule],
    )


def well_formed(cards: Iterable[cards_pb2.Card]) -> list[Card] | None:
    cards = list(cards)
    if not all(1 <= c.rank <= 13 and 1 <= c.suit <= 4 for c in cards):
        return None
    return [card_code(c) for c in cards]


def new_game_refusals(request: pb.NewGameRequest) -> tuple[set[tuple[str, str]], State | None]:
    """The refusals the design allows for a NewGame request, and the game it starts if none."""
    allowed: set[tuple[str, str]] = set()
    config = engine_config(request.config)
    if config is None:
        allowed.add(("INVALID_ARGUMENT", "FIELD_INVALID"))
    else:
        try:
            config.validate()
        except ConfigError:
            allowed.add(("INVALID_ARGUMENT", "CONFIG_INVALID"))
        if config.draw_for_deal and config.first_dealer:
            allowed.add(("INVALID_ARGUMENT", "CONFIG_INVALID"))  # K4.2: the draw decides
    decks = [well_formed(deck.cards) for deck in request.decks]
    draw = well_formed(request.draw.cards) if request.HasField("draw") else []
    if draw is None or any(deck is None for deck in decks):
        allowed.add(("INVALID_ARGUMENT", "FIELD_INVALID"))
    if allowed or config is None:
        return allowed, None
    for deck in decks:
        assert deck is not None
        try:
            check_deck(deck, config.copies)
        except CardError:
            allowed.add(("INVALID_ARGUMENT", "DECK_INVALID"))
    assert draw is not None
    if request.HasField("draw") and not config.draw_for_deal:
        allowed.add(("INVALID_ARGUMENT", "DRAW_WITHOUT_DRAW_FOR_DEAL"))
    elif request.HasField("draw") and any(draw.count(c) > config.copies for c in set(draw)):
        allowed.add(("INVALID_ARGUMENT", "DRAW_INVALID"))  # K4.2: drawn from one deck
    if allowed:
        return allowed, None
    try:
        state = new_game(
            config,
            seed=request.seed,
            decks=[deck for deck in decks if deck is not None],
            draw=draw if request.HasField("draw") else None,
        )
    except ValueError:
        return {("INVALID_ARGUMENT", "DRAW_EXHAUSTED")}, None
    return set(), state


_ACE_OF_SPADES = cards_pb2.Card(rank=cards_pb2.RANK_ACE, suit=cards_pb2.SUIT_SPADES)


@settings(max_examples=fuzz_examples(40), deadline=None, database=None)
@given(
    config=any_config(),
    seed=st.integers(0, 2**64 - 1),
    decks=st.lists(any_deck(), max_size=2),
    draw=st.one_of(st.none(), any_cards(8).map(lambda cards: cards_pb2.Deck(cards=cards))),
)
# Found by this test in CI: one deck holds one ace of spades (DRAW_INVALID, K4.2).
@example(
    config=pb.GameConfig(players=2, draw_for_deal=True, rules=pb.Rules(single_deck=True)),
    seed=0,
    decks=[],
    draw=cards_pb2.Deck(cards=[_ACE_OF_SPADES, _ACE_OF_SPADES]),
)
def test_fuzzed_new_games_get_the_designed_answer(stub, config, seed, decks, draw):
    request = pb.NewGameRequest(config=config, seed=seed, decks=decks, draw=draw)
    allowed, state = new_game_refusals(request)
    response = check_outcome(stub, "NewGame", request, allowed)
    if state is not None:
        assert isinstance(response, pb.NewGameResponse)
        assert len(response.seat_tokens) == state.players
        assert (list(response.view.hand), response.view.turn) == ([], state.turn)
        assert list(response.view.table) == [card_proto(c) for c in state.table]


# -- request bytes that are no request message ------------------------------------------


@pytest.fixture(scope="module")
def channel(grpc_target: str) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(grpc_target) as opened:
        yield opened


def raw_call(channel: grpc.Channel, method: str) -> grpc.UnaryUnaryMultiCallable[bytes, bytes]:
    """``method`` called with the given bytes as the request, whatever they hold."""
    return channel.unary_unary(f"/{SERVICE_NAME}/{method}")


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(
    "raw",
    [b"\xff\xff\xff", b"\x0a\x05ab", b"\x08\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80"],
    ids=["invalid-tag", "truncated-bytes", "overlong-varint"],
)
def test_request_bytes_that_are_no_request_message_are_request_malformed(channel, method, raw):
    """Refused inside the service like any bad input (counted, logged, one ErrorInfo),
    not by grpc's deserializer with UNKNOWN and no details."""
    refusal = refused(raw_call(channel, method), raw)
    assert (refusal.code, refusal.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "REQUEST_MALFORMED")
    assert f".{method}Request message" in refusal.message


def test_a_request_field_this_release_does_not_have_is_refused_not_ignored(channel, game):
    """A client built from a newer API asks for what this server would silently ignore:
    NewGame with a rule flag it lacks (here field 63 of Rules) would start a game under
    other rules. The same request without the field is served."""
    request = pb.NewGameRequest(config=pb.GameConfig(players=2)).SerializeToString()
    flag = b"\x0a\x05\x1a\x03\xf8\x03\x01"  # config (1) > rules (3) > field 63 = 1
    new_game = raw_call(channel, "NewGame")
    assert pb.NewGameResponse.FromString(new_game(request, timeout=10)).view.game_id
    calls = {
        "NewGame": request + flag,
        "GetView": pb.GetViewRequest(state=game.state).SerializeToString() + b"\xf8\x03\x01",
    }
    for method, raw in calls.items():
        refusal = refused(raw_call(channel, method), raw)
        assert (refusal.code, refusal.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "FIELD_UNKNOWN")
        assert refusal.violations.keys() == {""}, refusal
        assert f".{method}Request does not have" in refusal.message


@pytest.mark.parametrize(
    ("method", "raw", "path"),
    [
        ("NewGame", b"\x12\x00", "seed"),  # uint64 seed (2) sent length-delimited
        ("NewGame", b"\x0a\x02\x08\x02\x12\x00", "seed"),
        ("NewGame", b"\x0a\x02\x0a\x00", "config.players"),  # an int32 as bytes
        ("Play", b"\x20\x01", "move"),  # a message as a varint
        (
            "Play",
            b"\x22\x08\x12\x02\x08\x01\x12\x02\x12\x00",  # the second capture's suit as bytes
            "move.captures[1].suit",
        ),
    ],
    ids=["top-level", "after-a-valid-field", "nested", "message-as-varint", "repeated"],
)
def test_a_known_field_sent_as_another_type_is_malformed_naming_it_not_unknown(
    channel, method, raw, path
):
    """Protobuf keeps such a field as unknown; it is corrupt bytes, not a newer client.
    The message names the field first and its violation says the why alone, as every
    refusal of a field's (docs/api.md, "Errors")."""
    refusal = refused(raw_call(channel, method), raw)
    assert (refusal.code, refusal.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "REQUEST_MALFORMED")
    why = (
        "encoded as another type than the field's, so the request bytes are not a "
        f"cardrules.krypkasino.v1.{method}Request message"
    )
    assert refusal.violations == {path: why}, refusal
    assert refusal.message == f"{path}: {why}"


@pytest.mark.parametrize(
    ("card", "path"),
    [
        (10, "decks[0].cards[10].suit"),
        # The request and the deck come first: this card is the last message sought...
        (_MISENCODED_SEARCH_LIMIT - 3, f"decks[0].cards[{_MISENCODED_SEARCH_LIMIT - 3}].suit"),
        # ... and this one the first not sought.
        (_MISENCODED_SEARCH_LIMIT - 2, None),
        (_MISENCODED_SEARCH_LIMIT + 10, None),
    ],
)
def test_the_search_for_a_misencoded_field_stops_after_a_bounded_number_of_messages(card, path):
    """A 64 KiB request holds 32,000 empty cards: walking them all took 90 ms of the event
    loop. Past the bound the request is refused as FIELD_UNKNOWN instead."""
    cards = b"".join(b"\x0a\x02\x12\x00" if index == card else b"\x0a\x00" for index in range(2000))
    # Parsed and written again by protobuf, which keeps the suit (2) sent as bytes.
    deck = cards_pb2.Deck.FromString(cards)
    request = pb.NewGameRequest.FromString(pb.NewGameRequest(decks=[deck]).SerializeToString())
    assert _misencoded_field(request) == path


@pytest.mark.parametrize(
    ("unknown_fields", "reason"),
    [
        (_MISENCODED_SEARCH_BYTES // 2 - 1, "REQUEST_MALFORMED"),
        (_MISENCODED_SEARCH_BYTES, "FIELD_UNKNOWN"),
    ],
)
def test_no_misencoded_field_is_sought_among_kilobytes_of_unknown_fields(unknown_fields, reason):
    """Reading 32,000 unknown fields (a 64 KiB request) took 30 ms of the event loop."""
    raw = b"\x12\x00" + b"\x78\x00" * unknown_fields  # seed (2) as bytes, then field 15s
    parse = parsing(pb.NewGameRequest, lambda request, info: request, 65536)
    with pytest.raises(ServiceError) as refused:
        parse(raw, CallInfo())
    assert refused.value.reason == reason


@settings(max_examples=fuzz_examples(60), deadline=None, database=None)
@given(method=st.sampled_from(METHODS), raw=st.binary(max_size=120))
def test_random_request_bytes_are_answered_or_refused_with_their_error_info(channel, method, raw):
    refusal = outcome(lambda: raw_call(channel, method)(raw, timeout=10))
    event(f"{method}: {'OK' if refusal is None else refusal.reason}")
    assert refusal is None or refusal.code is not grpc.StatusCode.INTERNAL, refusal
