"""State and seat tokens (design section 4), with real AES-256-GCM and HMAC throughout."""

import base64
import hashlib
import hmac
import os
import re

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from hypothesis import given, settings
from hypothesis import strategies as st

from service.tokens import (
    KEY_ID_BYTES,
    MAX_SCHEMA_VERSION,
    PLAIN_FLAG,
    SEAT_MAC_BYTES,
    SEAT_MAC_CACHE_SIZE,
    KeyRing,
    SeatTokenError,
    SeatTokens,
    StateSealer,
    TokenError,
)
from tests.sizes import fuzz_examples

GAME = "krypkasino"
PAYLOAD = b"\x08\x02\x12\x04state bytes of a game in progress"
KEY_A = bytes(range(32))
KEY_B = bytes(range(100, 132))
KEY_C = b"\xa5" * 32


def ring(*keys: bytes) -> KeyRing:
    return KeyRing(keys)


def sealer(*keys: bytes, **kwargs) -> StateSealer:
    return StateSealer(ring(*(keys or (KEY_A,))), game=kwargs.pop("game", GAME), **kwargs)


def token_error(sealer: StateSealer, token: bytes) -> TokenError:
    with pytest.raises(TokenError) as caught:
        sealer.open(token)
    assert type(caught.value) is TokenError
    return caught.value


def seat_error(
    seats: SeatTokens, game_id: str, seat: int, token: bytes, players: int = 0
) -> SeatTokenError:
    with pytest.raises(SeatTokenError) as caught:
        seats.verify(game_id, seat, token, players)
    return caught.value


# --- state tokens: format and round trip ---


def test_round_trip_and_fresh_nonce_per_seal():
    s = sealer()
    first, second = s.seal(PAYLOAD), s.seal(PAYLOAD)
    assert s.open(first) == PAYLOAD
    assert s.open(second) == PAYLOAD
    assert first != second
    assert PAYLOAD not in first
    assert s.open(s.seal(b"")) == b""


def test_wire_format_is_the_documented_one():
    # Pinned so committed token fixtures keep opening in later releases.
    s = sealer(KEY_A, schema_version=3)
    token = s.seal(PAYLOAD)
    assert token[0] == 3
    assert token[1:5] == hashlib.sha256(KEY_A).digest()[:4] == KeyRing.key_id(KEY_A)
    assert len(token) == 1 + 4 + 12 + len(PAYLOAD) + 16
    nonce, sealed = token[5:17], token[17:]
    assert AESGCM(KEY_A).decrypt(nonce, sealed, b"cardrules/krypkasino/\x03") == PAYLOAD


def test_plain_format_is_flagged_version_then_payload():
    assert sealer(plain=True).seal(PAYLOAD) == b"\x81" + PAYLOAD
    assert sealer(plain=True, schema_version=5).seal(PAYLOAD) == b"\x85" + PAYLOAD


def test_two_rings_parsed_from_the_same_text_open_each_others_tokens():
    text = f"{KeyRing.generate_key_text()},{KeyRing.generate_key_text()}"
    replica_1 = StateSealer(KeyRing.parse(text), game=GAME)
    replica_2 = StateSealer(KeyRing.parse(text), game=GAME)
    assert replica_2.open(replica_1.seal(PAYLOAD)) == PAYLOAD
    assert replica_1.open(replica_2.seal(PAYLOAD)) == PAYLOAD


def test_ephemeral_rings_are_fresh_and_do_not_open_each_other():
    """The refusal says why, as a developer meets it after restarting a server that runs
    on the default key; a configured ring's refusal names no such cause."""
    first, second = KeyRing.ephemeral(), KeyRing.ephemeral()
    assert len(first.keys) == 1 and len(first.keys[0]) == 32
    assert first.keys != second.keys
    assert first.is_ephemeral and not KeyRing.parse(KeyRing.generate_key_text()).is_ephemeral
    token = StateSealer(first, game=GAME).seal(PAYLOAD)
    error = token_error(StateSealer(second, game=GAME), token)
    assert error.reason == "TOKEN_UNKNOWN_KEY"
    assert error.message == (
        "state token was sealed with a key this server does not have; this server made its "
        "key up at start (no CARDRULES_STATE_KEYS), so tokens from before a restart or from "
        "another server cannot open"
    )
    configured = token_error(sealer(KEY_A), token)
    assert configured.message == "state token was sealed with a key this server does not have"


# --- rotation, binding to game and schema ---


def test_key_rotation():
    old_token = sealer(KEY_A).seal(PAYLOAD)
    rotated = sealer(KEY_B, KEY_A)
    assert rotated.open(old_token) == PAYLOAD
    new_token = rotated.seal(PAYLOAD)
    assert new_token[1:5] == KeyRing.key_id(KEY_B)
    # A replica not yet rotated still opens tokens of the new primary it lists.
    assert sealer(KEY_A, KEY_B).open(new_token) == PAYLOAD
    assert sealer(KEY_A).open(old_token) == PAYLOAD
    dropped = sealer(KEY_B)
    assert token_error(dropped, old_token).reason == "TOKEN_UNKNOWN_KEY"
    assert dropped.open(new_token) == PAYLOAD


def test_another_games_token_does_not_open():
    other = sealer(game="othergame").seal(PAYLOAD)
    assert token_error(sealer(), other).reason == "TOKEN_INVALID"
    # Even when a game name is a prefix of the other.
    assert token_error(sealer(game="krypkasino2"), sealer().seal(PAYLOAD)).reason == (
        "TOKEN_INVALID"
    )


def test_schema_mismatch():
    v1, v2 = sealer(schema_version=1), sealer(schema_version=2)
    error = token_error(v2, v1.seal(PAYLOAD))
    assert error.reason == "TOKEN_SCHEMA_UNSUPPORTED"
    assert error.metadata == {"version": "1"}
    assert "1" in error.message and "2" in error.message
    plain_v1 = sealer(schema_version=1, plain=True)
    plain_v2 = sealer(schema_version=2, plain=True)
    assert token_error(plain_v2, plain_v1.seal(PAYLOAD)).reason == "TOKEN_SCHEMA_UNSUPPORTED"
    assert token_error(plain_v2, v1.seal(PAYLOAD)).reason == "TOKEN_SCHEMA_UNSUPPORTED"
    # Nothing vouches for a plain token, so a later version is no proof of a newer release.
    assert token_error(plain_v1, plain_v2.seal(PAYLOAD)).reason == "TOKEN_SCHEMA_UNSUPPORTED"


def test_a_sealed_token_of_a_later_schema_version_is_from_a_newer_release():
    """During a rolling upgrade an older replica meets the newer one's tokens."""
    error = token_error(sealer(schema_version=1), sealer(schema_version=3).seal(PAYLOAD))
    assert error.reason == "TOKEN_FROM_NEWER_RELEASE"
    assert error.metadata == {"version": "3"}
    assert "3" in error.message and "1" in error.message


def test_forged_bytes_never_pass_for_a_newer_releases_token():
    """That answer asks the caller to retry, so forged bytes must not earn it."""
    v1 = sealer(schema_version=1)
    relabelled = bytearray(v1.seal(PAYLOAD))
    relabelled[0] = 2
    assert token_error(v1, bytes(relabelled)).reason == "TOKEN_INVALID"
    altered = bytearray(sealer(schema_version=2).seal(PAYLOAD))
    altered[-1] ^= 1
    assert token_error(v1, bytes(altered)).reason == "TOKEN_INVALID"
    other_key = sealer(KEY_B, schema_version=2).seal(PAYLOAD)
    error = token_error(v1, other_key)
    assert error.reason == "TOKEN_UNKNOWN_KEY"
    assert error.metadata == {"key_id": KeyRing.key_id(KEY_B).hex()}


def test_schema_version_is_authenticated_not_just_checked():
    # Rewrite the version byte of a v1 token to 2: a v2 server passes the header
    # check, and the associated data must still refuse it.
    token = bytearray(sealer(schema_version=1).seal(PAYLOAD))
    token[0] = 2
    assert token_error(sealer(schema_version=2), bytes(token)).reason == "TOKEN_INVALID"


def test_plain_mode_both_ways():
    plain, sealing = sealer(plain=True), sealer()
    plain_token = plain.seal(PAYLOAD)
    assert plain.open(plain_token) == PAYLOAD
    # Switching to plain mode does not strand games sealed earlier.
    assert plain.open(sealing.seal(PAYLOAD)) == PAYLOAD
    error = token_error(sealing, plain_token)
    assert error.reason == "TOKEN_PLAIN_DISABLED"
    assert plain.open(b"\x81") == b""
    # A plain-mode server still authenticates sealed tokens.
    token = bytearray(sealing.seal(PAYLOAD))
    token[-1] ^= 1
    assert token_error(plain, bytes(token)).reason == "TOKEN_INVALID"


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (b"", "TOKEN_MALFORMED"),
        (b"\x00" + bytes(40), "TOKEN_MALFORMED"),
        (b"\x80payload", "TOKEN_MALFORMED"),
        (b"\x01", "TOKEN_MALFORMED"),
        (b"x", "TOKEN_MALFORMED"),  # a stray byte is no token of another schema version
        (b"\x07" + bytes(31), "TOKEN_MALFORMED"),
        (b"\x01" + KeyRing.key_id(KEY_A) + bytes(27), "TOKEN_MALFORMED"),
        (b"\x01" + b"\xff\xff\xff\xff" + bytes(28), "TOKEN_UNKNOWN_KEY"),
        (b"\x01" + KeyRing.key_id(KEY_A) + bytes(28), "TOKEN_INVALID"),
        (b"\x07" + bytes(40), "TOKEN_UNKNOWN_KEY"),
        (b"\x07" + KeyRing.key_id(KEY_A) + bytes(36), "TOKEN_INVALID"),
        # A plain token, whatever its version, or as short as a sealed one cannot be.
        (b"\xff" + bytes(40), "TOKEN_PLAIN_DISABLED"),
        (b"\x81" + PAYLOAD, "TOKEN_PLAIN_DISABLED"),
        (b"\x81" + bytes(10), "TOKEN_MALFORMED"),
    ],
)
def test_reasons_for_handmade_tokens(token, reason):
    assert token_error(sealer(), token).reason == reason


def test_messages_never_depend_on_token_bytes():
    s = sealer()
    real = s.seal(PAYLOAD)
    for flip_at in (20, 30, len(real) - 1):
        tampered = bytearray(real)
        tampered[flip_at] ^= 0x10
        error = token_error(s, bytes(tampered))
        assert error.message == str(error)
        assert real[17:].hex() not in error.message
        assert error.message == token_error(s, real[:-1]).message
    unknown = token_error(s, b"\x01\xde\xad\xbe\xef" + bytes(40))
    assert "dead" not in unknown.message.lower()
    assert unknown.message == token_error(s, b"\x01\x01\x02\x03\x04" + bytes(40)).message


def test_the_highest_schema_version_seals_and_opens():
    """The header's 7 bits hold versions 1 to 127, plain or sealed (docs/api.md)."""
    assert sealer(plain=True, schema_version=MAX_SCHEMA_VERSION).seal(PAYLOAD) == (
        b"\xff" + PAYLOAD
    )
    highest = sealer(schema_version=MAX_SCHEMA_VERSION)
    token = highest.seal(PAYLOAD)
    assert token[0] == 0x7F and highest.open(token) == PAYLOAD


def test_sealer_configuration_errors():
    with pytest.raises(ValueError, match="schema version"):
        sealer(schema_version=0)
    with pytest.raises(ValueError, match="schema version"):
        sealer(schema_version=128)
    with pytest.raises(ValueError, match="game"):
        sealer(game="")


# --- property tests: nothing but TokenError, never a successful forgery ---

payloads = st.binary(max_size=80)


@settings(max_examples=fuzz_examples(40), deadline=None)
@given(payloads)
def test_every_truncation_and_every_bit_flip_of_a_real_token_is_refused(payload):
    s = sealer(KEY_A, KEY_B)
    token = s.seal(payload)
    assert s.open(token) == payload
    for length in range(len(token)):
        with pytest.raises(TokenError):
            s.open(token[:length])
    for bit in range(len(token) * 8):
        flipped = bytearray(token)
        flipped[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(TokenError):
            s.open(bytes(flipped))


@settings(max_examples=fuzz_examples(300), deadline=None)
@given(
    st.one_of(
        st.binary(max_size=200),
        # Random bytes behind a valid header, so they reach the AEAD itself.
        st.binary(max_size=200).map(lambda b: b"\x01" + KeyRing.key_id(KEY_A) + b),
        # Plain-flagged bytes (version 1), which the plain sealer must open as themselves:
        # random bytes alone almost never start with that byte.
        st.binary(max_size=200).map(lambda b: b"\x81" + b),
    )
)
def test_random_bytes_never_open(data):
    s = sealer()
    with pytest.raises(TokenError):
        s.open(data)
    plain = sealer(plain=True)
    # Plain mode has no integrity by design: anything plain-flagged opens as
    # itself, everything else still raises TokenError only.
    if data[:1] == b"\x81":
        assert plain.open(data) == data[1:]
    else:
        with pytest.raises(TokenError):
            plain.open(data)


@settings(max_examples=fuzz_examples(60), deadline=None)
@given(payloads, st.sampled_from(["othergame", "krypkasino ", "Krypkasino", "krypkasin"]))
def test_tokens_of_other_games_never_open(payload, other_game):
    token = sealer(game=other_game).seal(payload)
    assert token_error(sealer(), token).reason == "TOKEN_INVALID"


# --- seat tokens ---


def test_seat_token_right_seat_and_format():
    seats = SeatTokens(ring(KEY_A))
    token = seats.issue("game-1", 2)
    assert len(token) == 20
    assert token[:4] == KeyRing.key_id(KEY_A)
    assert seats.issue("game-1", 2) == token
    seats.verify("game-1", 2, token)
    # The MAC key is derived by HKDF, not the state key itself.
    seat_key = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=None, info=b"cardrules seat token v1"
    ).derive(KEY_A)
    assert seat_key != KEY_A
    message = (6).to_bytes(4, "big") + b"game-1" + (2).to_bytes(4, "big")
    assert token[4:] == hmac.new(seat_key, message, "sha256").digest()[:16]


def test_seat_tokens_refused_with_the_right_reason():
    seats = SeatTokens(ring(KEY_A))
    token = seats.issue("game-1", 1)
    assert seat_error(seats, "game-1", 1, b"").reason == "SEAT_TOKEN_MISSING"
    for game_id, seat, candidate in [
        ("game-1", 0, token),
        ("game-1", 2, token),
        ("game-2", 1, token),
        ("game-1", -1, token),
        ("game-1", 2**40, token),
        ("game-1", 1, SeatTokens(ring(KEY_B)).issue("game-1", 1)),
        ("game-1", 1, token[:-1]),
        ("game-1", 1, token[:4]),
        ("game-1", 1, token + b"\x00"),
        ("game-1", 1, token[:4] + bytes(16)),
    ]:
        error = seat_error(seats, game_id, seat, candidate)
        assert error.reason == "SEAT_TOKEN_INVALID", (game_id, seat)
        assert token.hex() not in error.message


def test_a_token_of_another_seat_of_the_game_is_named_as_that_seats():
    """Its holder has it anyway; saying whose it is tells a client that sent the wrong
    seat (or none) what went wrong, and nothing of the key or the token's bytes."""
    seats = SeatTokens(ring(KEY_A, KEY_B))
    for issuer in (seats, SeatTokens(ring(KEY_B))):  # under the first key and another
        token = issuer.issue("game-1", 2)
        error = seat_error(seats, "game-1", 0, token, players=4)
        assert (error.reason, error.metadata) == ("SEAT_TOKEN_INVALID", {"token_seat": "2"})
        assert error.message == "not a valid seat token for seat 0; it is seat 2's token"
        assert token.hex() not in error.message
    token = seats.issue("game-1", 2)
    forged = token[:KEY_ID_BYTES] + bytes(SEAT_MAC_BYTES)
    for game_id, candidate, players in (
        ("game-1", token, 2),  # a seat the game does not have
        ("game-2", token, 4),  # another game's: a bot that kept an old game's tokens
        ("game-1", forged, 4),
    ):
        # No seat named; a token of a seat token's form is said to be none of the game's.
        error = seat_error(seats, game_id, 0, candidate, players=players)
        assert (error.metadata, error.message) == (
            {"token_game": "other"},  # for a client that words refusals itself
            "not a valid seat token for seat 0; "
            "it is no seat's token of this game (one from another game?)",
        )
    # No players given: the token may be another seat's, so nothing is said of it.
    error = seat_error(seats, "game-1", 0, token, players=0)
    assert (error.metadata, error.message) == ({}, "not a valid seat token for seat 0")
    # Nor of bytes of no seat token's form: token_game tells those apart from the above.
    error = seat_error(seats, "game-1", 0, b"\x00\x01", players=4)
    assert (error.metadata, error.message) == ({}, "not a valid seat token for seat 0")


def test_seat_of_finds_the_seat_of_a_games_token_under_any_key_of_the_ring():
    """What GetView's SEAT_MISSING and a wrong seat's refusal name (``token_seat``)."""
    seats = SeatTokens(ring(KEY_A, KEY_B))
    for issuer in (seats, SeatTokens(ring(KEY_B))):
        for seat in range(4):
            assert seats.seat_of("game-1", issuer.issue("game-1", seat), 4) == seat
    token = seats.issue("game-1", 2)
    for game_id, candidate, players in (
        ("game-1", token, 2),  # a seat the game does not have
        ("game-2", token, 4),
        ("game-1", SeatTokens(ring(KEY_C)).issue("game-1", 2), 4),  # a key not in the ring
        ("game-1", token[:KEY_ID_BYTES] + bytes(SEAT_MAC_BYTES), 4),
        ("game-1", token[:-1], 4),
        ("game-1", token + b"\x00", 4),
        ("game-1", b"", 4),
    ):
        assert seats.seat_of(game_id, candidate, players) is None, (game_id, players)


def test_a_seat_token_under_a_key_the_server_lacks_names_that_key():
    """Told apart from a wrong token of a known key: a key retired too soon is the
    operator's to fix."""
    seats = SeatTokens(ring(KEY_A))
    retired = seat_error(seats, "game-1", 0, SeatTokens(ring(KEY_B)).issue("game-1", 0))
    assert (retired.reason, retired.metadata) == (
        "SEAT_TOKEN_INVALID",
        {"key_id": KeyRing.key_id(KEY_B).hex()},
    )
    assert retired.message == (
        "the seat token of seat 0 is under no key of this server: one retired too soon, "
        "or no seat token of this service"
    )
    wrong = seat_error(seats, "game-2", 0, seats.issue("game-1", 0))
    assert (wrong.reason, wrong.metadata) == ("SEAT_TOKEN_INVALID", {})
    # Only a token of a seat token's length names a key: the state token sent as the
    # seat token is the caller's mistake, not a key retired too soon.
    state = sealer(KEY_A).seal(b"state")
    assert state[:KEY_ID_BYTES] != KeyRing.key_id(KEY_A)
    swapped = seat_error(seats, "game-1", 0, state)
    assert (swapped.reason, swapped.metadata) == ("SEAT_TOKEN_INVALID", {})
    assert swapped.message == "not a valid seat token for seat 0"


def test_a_seat_token_from_before_a_restart_without_keys_names_the_made_up_key():
    """A server without configured keys made its key up at start: after a restart no key
    retired, and the token is one this service issued, so the refusal says what the
    state token's does (a review found the retired-key cause named here)."""
    before, after = KeyRing.ephemeral(), KeyRing.ephemeral()
    token = SeatTokens(before).issue("game-1", 1)
    error = seat_error(SeatTokens(after), "game-1", 1, token)
    assert (error.reason, error.metadata) == (
        "SEAT_TOKEN_INVALID",
        {"key_id": KeyRing.key_id(before.keys[0]).hex()},
    )
    assert error.message == (
        "the seat token of seat 1 is under no key of this server: this server made its key "
        "up at start (no CARDRULES_STATE_KEYS), so seat tokens from before a restart or from "
        "another server cannot be verified"
    )


def test_a_seat_token_sent_as_the_state_is_malformed_whatever_its_key():
    """Its first byte is its key id's: one of two keys gives it the plain flag, which
    must not make it read as a plain token of some schema version. (A plain-mode
    server, for debugging only, takes plain tokens of any length.)"""
    keys = [bytes([i]) * 32 for i in range(16)]
    flagged = {KeyRing.key_id(key)[0] >= PLAIN_FLAG for key in keys}
    assert flagged == {True, False}
    for key in keys:
        error = token_error(sealer(key), SeatTokens(ring(key)).issue("game-1", 0))
        assert (error.reason, error.message) == (
            "TOKEN_MALFORMED",
            "state token is too short: a seat token?",
        ), key[0]


def test_a_plain_token_of_another_version_on_a_plain_server_names_its_version():
    error = token_error(sealer(plain=True), b"\xff" + bytes(40))
    assert (error.reason, error.metadata) == ("TOKEN_SCHEMA_UNSUPPORTED", {"version": "127"})


def test_seat_token_encoding_separates_game_and_seat():
    seats = SeatTokens(ring(KEY_A))
    # Neighbouring games and seats whose naive concatenations overlap.
    tokens = {
        seats.issue(game_id, seat)
        for game_id in ["", "\0", "g", "g1", "g\x01", "1", "\U0001f0a1"]
        for seat in range(4)
    }
    assert len(tokens) == 7 * 4
    seat_error(seats, "g", 1, seats.issue("g1", 1))


def test_seat_tokens_verify_the_same_beyond_the_mac_cache():
    """Recent MACs are kept (design section 4 hot path); evicted ones are recomputed alike."""
    seats = SeatTokens(ring(KEY_A, KEY_B))
    games = [f"game-{i}" for i in range(SEAT_MAC_CACHE_SIZE + 10)]
    issued = {game_id: seats.issue(game_id, 1) for game_id in games}
    fresh = SeatTokens(ring(KEY_A, KEY_B))
    for game_id in (games[0], games[-1], games[0]):  # evicted, cached, evicted again
        assert fresh.issue(game_id, 1) == issued[game_id]
        seats.verify(game_id, 1, issued[game_id])
        # A cached MAC of one game and seat never stands in for another's.
        assert seat_error(seats, game_id, 2, issued[game_id]).reason == "SEAT_TOKEN_INVALID"
        assert seat_error(seats, games[1], 1, issued[game_id]).reason == "SEAT_TOKEN_INVALID"
    # Tokens of a secondary key are checked with that key, cached or not.
    old = SeatTokens(ring(KEY_B)).issue(games[5], 3)
    for _ in range(2):
        seats.verify(games[5], 3, old)
        assert seat_error(seats, games[5], 3, KeyRing.key_id(KEY_A) + old[4:]).reason == (
            "SEAT_TOKEN_INVALID"
        )


def test_seat_token_rotation():
    token = SeatTokens(ring(KEY_A)).issue("game-1", 0)
    rotated = SeatTokens(ring(KEY_B, KEY_A))
    rotated.verify("game-1", 0, token)
    assert rotated.issue("game-1", 0)[:4] == KeyRing.key_id(KEY_B)
    SeatTokens(ring(KEY_A, KEY_B)).verify("game-1", 0, rotated.issue("game-1", 0))
    assert seat_error(SeatTokens(ring(KEY_B)), "game-1", 0, token).reason == ("SEAT_TOKEN_INVALID")


def test_seat_tokens_from_replicas_parsed_from_one_text_agree():
    text = KeyRing.generate_key_text()
    token = SeatTokens(KeyRing.parse(text)).issue("game-7", 3)
    SeatTokens(KeyRing.parse(text)).verify("game-7", 3, token)


def test_issue_refuses_impossible_seats():
    seats = SeatTokens(ring(KEY_A))
    with pytest.raises(ValueError):
        seats.issue("game-1", -1)


@settings(max_examples=fuzz_examples(300), deadline=None)
@given(st.binary(max_size=40), st.text(max_size=20), st.integers(-5, 2**33))
def test_seat_verify_raises_only_seat_token_error(token, game_id, seat):
    seats = SeatTokens(ring(KEY_A))
    with pytest.raises(SeatTokenError):
        seats.verify(game_id, seat, token)


@settings(max_examples=fuzz_examples(30), deadline=None)
@given(st.text(max_size=20), st.integers(0, 3))
def test_every_bit_flip_of_a_seat_token_is_refused(game_id, seat):
    seats = SeatTokens(ring(KEY_A, KEY_B))
    token = seats.issue(game_id, seat)
    seats.verify(game_id, seat, token)
    for bit in range(len(token) * 8):
        flipped = bytearray(token)
        flipped[bit // 8] ^= 1 << (bit % 8)
        assert seat_error(seats, game_id, seat, bytes(flipped)).reason == "SEAT_TOKEN_INVALID"


# --- key rings ---


def test_parse_accepts_both_alphabets_padding_optional_and_any_separator():
    key = bytes([0xFB, 0xFF]) * 16  # encodes with '+' and '/' (or '-' and '_')
    standard = base64.b64encode(key).decode()
    urlsafe = base64.urlsafe_b64encode(key).decode().rstrip("=")
    assert "+" in standard or "/" in standard
    for text in [standard, urlsafe, f"  {standard}\n", f"{urlsafe}=="]:
        assert KeyRing.parse(text).keys == (key,)
    parsed = KeyRing.parse(f"{base64.b64encode(KEY_A).decode()},\n {standard}\t")
    assert parsed.keys == (KEY_A, key)
    assert KeyRing.parse(f"{base64.b64encode(KEY_A).decode()} {standard}").keys == (KEY_A, key)


def test_generated_key_text_parses_to_a_fresh_key():
    text = KeyRing.generate_key_text()
    (key,) = KeyRing.parse(text).keys
    assert len(key) == 32
    assert base64.b64decode(text, validate=True) == key
    assert KeyRing.generate_key_text() != text


def _parse_error(text: str) -> str:
    with pytest.raises(ValueError) as caught:
        KeyRing.parse(text)
    error = caught.value
    # No chained exception that a traceback would print along with the key text.
    assert error.__cause__ is None
    assert error.__context__ is None or error.__suppress_context__
    return str(error)


def test_parse_errors_name_the_position_never_the_key():
    good = base64.b64encode(KEY_A).decode()
    short = base64.b64encode(KEY_B[:16]).decode()
    long = base64.b64encode(KEY_B + b"x").decode()
    cases = [
        (f"{good},not*base64*at*all", "key 2", "base64"),
        (f"{good} {good[:-2]}é=", "key 2", "base64"),
        (f"{good[:-1]}AB", "key 1", "base64"),  # 45 characters: no base64 has that length
        (f"{good[:-1]}A", "key 1", "33 bytes"),
        (f"{good},{good},{short}", "key 3", "16 bytes"),
        (f"{long}", "key 1", "33 bytes"),
        (f"{good} {base64.urlsafe_b64encode(KEY_A).decode().rstrip('=')}", "key 2", "key 1"),
    ]
    for text, position, detail in cases:
        message = _parse_error(text)
        assert position in message and detail in message, message
        for item in text.replace(",", " ").split():
            assert item[:8] not in message, message


def test_a_key_in_hex_is_refused_with_the_base64_spelling_named():
    """``openssl rand -hex 32`` prints a right key in a spelling the ring does not take:
    64 hex digits are valid base64 of 48 bytes."""
    good = base64.b64encode(KEY_A).decode()
    message = _parse_error(f"{good},{KEY_B.hex()}")
    assert message.startswith("key 2 decodes to 48 bytes; AES-256 keys are 32 bytes")
    assert "64 hex digits" in message and "base64" in message
    assert KEY_B.hex()[:8] not in message
    assert "hex" not in _parse_error(base64.b64encode(KEY_B[:16]).decode())


def test_a_key_given_as_a_variables_setting_is_refused_saying_so():
    """A keys file copied from an env file holds ``CARDRULES_STATE_KEYS=<key>``."""
    good = base64.b64encode(KEY_A).decode()
    texts = (
        f"CARDRULES_STATE_KEYS={good}",
        f'export KEYS="{good}"',
        f"\n K={good},{good}",
        f"KEYS='{good}'",
        "KEYS=+" + good[1:],  # a key may begin with any base64 character
        "KEYS=/" + good[1:],
        "KEYS=-" + good[1:],
    )
    for text in texts:
        message = _parse_error(text)
        assert message == (
            "the keys are written as a variable's setting (NAME=...): give the keys alone, "
            "as `cardrules keygen` prints them"
        )
    assert "NAME=" not in _parse_error("AB*D" * 11)
    assert "NAME=" not in _parse_error(f"{good[:-1]}*")


def test_a_quoted_key_is_refused_saying_so():
    """``docker run --env-file`` and a Kustomize env file (k8s/base/config.env) keep a
    value's quotes: the key was refused as "not valid base64" (a review)."""
    good = base64.b64encode(KEY_A).decode()
    for quote in "\"'":
        assert _parse_error(f"{quote}{good}{quote}") == (
            "key 1 is quoted: give the key without quotes"
        )
        assert _parse_error(f"{good}\n{quote}{good}{quote}\n") == (
            "key 2 is quoted: give the key without quotes"
        )
        # CARDRULES_STATE_KEYS="" in a docker --env-file: the value is the two quotes.
        assert _parse_error(quote * 2) == "key 1 is quoted: give the key without quotes"
        # A list quoted whole: no key of it is quoted alone.
        assert _parse_error(f"{quote}{good},{good}{quote}") == (
            "key 1 starts or ends with a quote: give the keys without quotes"
        )
        # A key that only ends with one, after a good key: the list's closing quote.
        assert _parse_error(f"{good},{good}{quote}") == (
            "key 2 starts or ends with a quote: give the keys without quotes"
        )
    for opening, closing in ("\u201c\u201d", "\u2018\u2019", "\u201e\u201c", "\u00ab\u00bb"):
        # Typographic quotes, as a word processor or a chat puts them around a paste.
        assert _parse_error(f"{opening}{good}{closing}") == (
            "key 1 is quoted: give the key without quotes"
        )
        assert _parse_error(f"{opening}{good},{good}{closing}") == (
            "key 1 starts or ends with a quote: give the keys without quotes"
        )
        assert _parse_error(f"{good} {good}{closing}") == (
            "key 2 starts or ends with a quote: give the keys without quotes"
        )
    assert _parse_error(f"\"{good}'") == (
        "key 1 starts or ends with a quote: give the keys without quotes"
    )
    assert _parse_error('"') == "key 1 starts or ends with a quote: give the keys without quotes"
    assert _parse_error("AB*D" * 11) == "key 1 is not valid base64"


def test_parse_refuses_an_empty_entry():
    """``,NEW`` is what a rotation script writes when reading the current keys failed."""
    good = base64.b64encode(KEY_A).decode()
    for text, position in [(f",{good}", 1), (f"{good},", 2), (f"{good}, ,{good}", 2)]:
        message = _parse_error(text)
        assert f"key {position} is empty" in message, message
        assert good[:8] not in message


def test_parse_refuses_an_empty_list():
    for text in ["", "   ", ",", " , \n"]:
        assert "no keys" in _parse_error(text)


def test_key_ring_validates_direct_construction_and_hides_keys_in_repr():
    with pytest.raises(ValueError, match="at least one"):
        KeyRing(())
    with pytest.raises(ValueError, match="key 2 is 31 bytes"):
        KeyRing((KEY_A, KEY_B[:31]))
    with pytest.raises(ValueError, match="key 3 duplicates key 1"):
        KeyRing((KEY_A, KEY_B, KEY_A))
    text = repr(KeyRing((KEY_A, KEY_C)))
    assert KeyRing.key_id(KEY_A).hex() in text
    assert KEY_C.hex()[:8] not in text and "\\xa5" not in text and "a5a5" not in text


def test_key_id_is_the_sha256_prefix():
    key = os.urandom(32)
    assert KeyRing.key_id(key) == hashlib.sha256(key).digest()[:4]


def test_a_state_token_under_an_older_key_is_renewed_under_the_first():
    old_token = sealer(KEY_B).seal(PAYLOAD)
    rotated = sealer(KEY_A, KEY_B)
    renewed = rotated.renewal(old_token, rotated.open(old_token))
    assert renewed is not None and renewed[1:5] == KeyRing.key_id(KEY_A)
    assert sealer(KEY_A).open(renewed) == PAYLOAD  # opens once KEY_B is gone
    assert rotated.renewal(renewed, PAYLOAD) is None  # current: nothing to renew
    # Plain mode is for debugging: it neither renews plain tokens nor turns sealed ones plain.
    plain = sealer(KEY_A, KEY_B, plain=True)
    assert plain.renewal(plain.seal(PAYLOAD), PAYLOAD) is None
    assert plain.renewal(old_token, PAYLOAD) is None
    # Nor does a sealing server make a trusted token of an unchecked plain one.
    assert rotated.renewal(plain.seal(PAYLOAD), PAYLOAD) is None


def test_a_seat_token_under_an_older_key_is_renewed_under_the_first():
    old_token = SeatTokens(ring(KEY_B)).issue("game-1", 1)
    rotated = SeatTokens(ring(KEY_A, KEY_B))
    rotated.verify("game-1", 1, old_token)
    renewed = rotated.renewal("game-1", 1, old_token)
    assert renewed == SeatTokens(ring(KEY_A)).issue("game-1", 1)
    assert rotated.renewal("game-1", 1, renewed) is None  # current: nothing to renew
    SeatTokens(ring(KEY_A)).verify("game-1", 1, renewed)  # works once KEY_B is gone


def test_key_ring_refuses_a_long_key_given_directly():
    """AES-256 keys are exactly 32 bytes: one byte too many is refused by position too."""
    with pytest.raises(ValueError, match="key 2 is 33 bytes"):
        KeyRing((KEY_A, KEY_B + b"x"))


def test_generated_key_text_is_always_standard_padded_base64():
    """Same form as ``openssl rand -base64 32``: ``+`` and ``/``, never ``-`` or ``_``."""
    texts = [KeyRing.generate_key_text() for _ in range(64)]
    for text in texts:
        assert re.fullmatch(r"[A-Za-z0-9+/]{43}=", text), text
    # A character of 62 is a letter or digit, so 64 texts without + or / has odds 2**-125.
    assert any("+" in text or "/" in text for text in texts)


def test_the_highest_seat_has_a_token_and_the_next_one_is_refused():
    """Seats are 4-byte unsigned in the MAC: 0 to 2**32 - 1 have tokens, 2**32 has none."""
    seats = SeatTokens(ring(KEY_A))
    highest = 2**32 - 1
    token = seats.issue("game-1", highest)
    seats.verify("game-1", highest, token)
    assert SeatTokens(ring(KEY_B, KEY_A)).renewal("game-1", highest, token) is not None
    assert seat_error(seats, "game-1", highest - 1, token).reason == "SEAT_TOKEN_INVALID"
    assert seat_error(seats, "game-1", highest + 1, token).reason == "SEAT_TOKEN_INVALID"
    with pytest.raises(ValueError, match=re.escape("seat must be 0..4294967295, not 4294967296")):
        seats.issue("game-1", highest + 1)


def test_seat_tokens_of_a_game_id_with_a_lone_surrogate_are_its_own():
    """A str that is no valid UTF-8 still gets a token of its own (surrogatepass), and
    verifying one raises only SeatTokenError: no two game ids share a token."""
    seats = SeatTokens(ring(KEY_A))
    token = seats.issue("\ud800", 1)
    seats.verify("\ud800", 1, token)
    seat_key = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=None, info=b"cardrules seat token v1"
    ).derive(KEY_A)
    message = (3).to_bytes(4, "big") + b"\xed\xa0\x80" + (1).to_bytes(4, "big")
    assert token[4:] == hmac.new(seat_key, message, "sha256").digest()[:16]
    for other in ["?", "\udc80", "\ufffd", ""]:
        assert seat_error(seats, other, 1, token).reason == "SEAT_TOKEN_INVALID", other
        assert seat_error(seats, "\ud800", 1, seats.issue(other, 1)).reason == (
            "SEAT_TOKEN_INVALID"
        )
    forged = KeyRing.key_id(KEY_A) + bytes(16)
    assert seat_error(seats, "game-\udfff", 1, forged).reason == "SEAT_TOKEN_INVALID"
