"""A seat token sent as the request id is neither logged nor echoed (design sections 4
and 6; docs/api.md, "Request ids"; docs/operations.md, "Personal data in logs").

A backend that puts a seat token in ``X-Request-Id`` (gRPC metadata ``x-request-id``)
would otherwise find it as the ``request_id`` of the request line, beside the
``game_id`` and ``seat`` it opens, and back in the answer. The server makes up an id
instead, as for an unusable one, over both transports, telling the token by its key
id; the ids tools make (hex digits, UUIDs, KSUIDs, a W3C traceparent, words) are kept.
Each server test calls a real ``cardrules serve``.
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
import time
import uuid
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from service.calls import request_id_from
from service.tokens import KeyRing, SeatTokens
from tests.service.grpc_helpers import Stub
from tests.service.http_helpers import exchange
from tests.service.server_process import ServerProcess

# The shortest window of a token's text the log must not show: no word of a log line
# matches 12 random base64 characters.
_WINDOW = 12
_MOST_ID_CHARS = 128
_LEGAL_MOVES = "cardrules.krypkasino.v1.KrypkasinoService/LegalMoves"

Sent = Callable[[Any], str]


def _url_safe(token: str) -> str:
    return base64.urlsafe_b64encode(base64.b64decode(token)).decode().rstrip("=")


# What a backend may put in the id, from the NewGame answer (its JSON: base64 text).
TOKEN_IDS: dict[str, Sent] = {
    "seat_token": lambda game: game["seatTokens"][0],
    "seat_token_url_safe": lambda game: _url_safe(game["seatTokens"][0]),
    "seat_token_in_an_id": lambda game: f"match-7/{game['seatTokens'][0]}/try-1",
}
KEPT_IDS = {
    "python_client_hex": "0123456789abcdef0123456789abcdef",
    "uuid": "3f2504e0-4f89-41d3-9a0c-0305e82c3301",
    "uppercase_hex": "0123456789ABCDEF0123456789ABCDEF",
    "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    "aws_trace_id": "Root=1-5759e988-bd862e3fe1be46a994272793",
    "short_mixed": "Req-42aZ",
    "snake_case": "checkout_service_request_for_round_1",
    # Words joined to hex digits: one case, letters past "f", but in no one word.
    "words_and_hex": "trace-grpc-0123456789abcdef0123456789abcdef",
    "word_and_uuid": "svc_3f2504e0-4f89-41d3-9a0c-0305e82c3301",
    # Random-looking ids of a seat token's length and alphabet: no key id's start.
    "ksuid": "0ujsswThIGTUYm2K8FjOOfXtY1K",
    "words_of_both_cases": "expectation-NOT_FOUND_ROUTE",
}


def _windows(token: str) -> set[str]:
    """Every ``_WINDOW`` characters in a row of ``token``'s text, in either alphabet."""
    text = token.rstrip("=")
    spellings = {text, text.replace("+", "-").replace("/", "_")}
    spellings |= {spelling.replace("-", "+").replace("_", "/") for spelling in spellings}
    return {
        spelling[at : at + _WINDOW]
        for spelling in spellings
        for at in range(len(spelling) - _WINDOW + 1)
    }


def _logged_anywhere(server: ServerProcess, token: str) -> list[dict[str, object]]:
    # One pattern of every window, each line dumped once: the session server's log
    # holds every earlier test's lines.
    windows = re.compile("|".join(map(re.escape, _windows(token))))
    return [line for line in list(server.logs) if windows.search(json.dumps(line))]


def _lines_of(server: ServerProcess, request_id: str) -> list[dict[str, object]]:
    return [line for line in server.log_events("request") if line["request_id"] == request_id]


def _http_legal_moves(server: ServerProcess, game: Any, request_id: str) -> str:
    """A LegalMoves over HTTP sent with ``request_id``: the id it answered with."""
    body = {"state": game["state"], "seat": 0, "seatToken": game["seatTokens"][0]}
    status, headers, value = exchange(
        f"{server.http_url}/v1/krypkasino:legalMoves",
        json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "X-Request-Id": request_id},
    )
    assert status == 200, value
    (answered,) = [value for name, value in headers.items() if name.lower() == "x-request-id"]
    return answered


def _grpc_legal_moves(stub: Stub, game: Any, request_id: str) -> str:
    """A LegalMoves over gRPC sent with ``request_id``: the id its trailers carry."""
    request = pb.LegalMovesRequest(
        state=base64.b64decode(game["state"]),
        seat=0,
        seat_token=base64.b64decode(game["seatTokens"][0]),
    )
    _, call = stub.LegalMoves.with_call(
        request, metadata=(("x-request-id", request_id),), timeout=10
    )
    assert call.code() is grpc.StatusCode.OK
    (answered,) = [value for key, value in call.trailing_metadata() if key == "x-request-id"]
    assert isinstance(answered, str)
    return answered


@pytest.fixture(params=["http", "grpc"])
def legal_moves(
    request: pytest.FixtureRequest, server: ServerProcess, stub: Stub
) -> Callable[[Any, str], str]:
    if request.param == "http":
        return lambda game, request_id: _http_legal_moves(server, game, request_id)
    return lambda game, request_id: _grpc_legal_moves(stub, game, request_id)


@pytest.mark.parametrize("sent", TOKEN_IDS.values(), ids=TOKEN_IDS.keys())
def test_a_token_sent_as_the_request_id_is_replaced_and_never_logged(
    server: ServerProcess, json_game: Any, legal_moves: Callable[[Any, str], str], sent: Sent
) -> None:
    token_id = sent(json_game)
    assert len(token_id) <= _MOST_ID_CHARS  # a usable id but for the token in it
    answered = legal_moves(json_game, token_id)
    assert answered != token_id
    (line,) = server.request_lines(answered)
    # The call is served and logged as any other, under the id the server made.
    assert (line["code"], line["seat"]) == ("OK", 0) and line["game_id"]
    assert _logged_anywhere(server, token_id) == []
    assert _logged_anywhere(server, json_game["seatTokens"][0]) == []


@pytest.mark.parametrize("kept", KEPT_IDS.values(), ids=KEPT_IDS.keys())
def test_ordinary_request_ids_are_kept(
    server: ServerProcess, json_game: Any, legal_moves: Callable[[Any, str], str], kept: str
) -> None:
    before = len(_lines_of(server, kept))
    assert legal_moves(json_game, kept) == kept
    deadline = time.monotonic() + 10
    while len(lines := _lines_of(server, kept)) == before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [(line["method"], line["code"]) for line in lines[before:]] == [(_LEGAL_MOVES, "OK")]


def _key_whose_start_has(characters: str) -> bytes:
    """A key whose seat tokens' first 5 characters, in standard base64, hold one of
    ``characters`` (about one key in 13 for one of them), drawn from a seed."""
    draw = random.Random("start with " + characters)
    while True:
        key = draw.randbytes(32)
        if set(characters) & set(base64.b64encode(KeyRing.key_id(key)).decode()[:5]):
            return key


# Two keys, so that a token under the key that no longer seals is told too; two more
# whose seat tokens read otherwise in URL-safe base64 (``-`` for ``+``, ``_`` for
# ``/``), which a review found told only in standard base64 with every test passing.
RING = KeyRing(
    (bytes(range(32)), bytes(range(32, 64)), _key_whose_start_has("+"), _key_whose_start_has("/"))
)


def _seat_token_texts(keys: KeyRing) -> list[str]:
    """Seat tokens under each key of ``keys``, in standard and URL-safe base64, padded
    and not, for a few games and seats."""
    texts = []
    for key in keys.keys:
        for seat, game in ((0, "game-1"), (3, "a-game-id-of-another-shape")):
            token = SeatTokens(KeyRing((key,))).issue(game, seat)
            standard = base64.b64encode(token).decode()
            texts += [standard, standard.rstrip("="), _url_safe(standard)]
    return texts


@pytest.mark.parametrize("kept", KEPT_IDS.values(), ids=KEPT_IDS.keys())
def test_request_id_from_keeps_ordinary_ids(kept: str) -> None:
    assert request_id_from(kept, RING.seat_token_pattern()) == kept


@pytest.mark.parametrize("text", _seat_token_texts(RING))
def test_request_id_from_replaces_a_seat_token_of_any_key_of_the_ring(text: str) -> None:
    pattern = RING.seat_token_pattern()
    for sent in (text, f"req-{text}", f"match 7 {text} try 1"):
        assert request_id_from(sent, pattern) != sent
        assert request_id_from(sent) == sent  # a runner without keys (the bench's) keeps it


def test_a_seat_token_is_told_by_all_5_characters_of_its_key_ids_start() -> None:
    """27 characters of a seat token's alphabet that begin with the first 4 of a key id's
    5 and differ in the 5th are kept (4 characters, 24 bits, would take 64 times as many
    random ids for tokens as the 30 bits of 5); with all 5 the same text is replaced,
    under either key of the ring."""
    pattern = RING.seat_token_pattern()
    rest = "xYz" * 7 + "Q"  # 22 characters: 27 in all, a seat token's length unpadded
    for key in RING.keys:
        start = base64.b64encode(KeyRing.key_id(key)).decode()[:5]
        fifth = "A" if start[4] != "A" else "B"
        near = f"{start[:4]}{fifth}{rest}"
        assert request_id_from(near, pattern) == near
        assert request_id_from(f"{start}{rest}", pattern) != f"{start}{rest}"


def test_no_random_id_of_a_tool_is_taken_for_a_seat_token() -> None:
    """32 hex digits, UUIDs and 27 random base64 characters, 20,000 of each (seeded, so
    the same every run): all kept."""
    draw = random.Random(53)
    alphabet = string.ascii_letters + string.digits + "-_"
    pattern = RING.seat_token_pattern()
    replaced = [
        sent
        for sent in (
            *(f"{draw.getrandbits(128):032x}" for _ in range(20_000)),
            *(str(uuid.UUID(int=draw.getrandbits(128), version=4)) for _ in range(20_000)),
            *("".join(draw.choices(alphabet, k=27)) for _ in range(20_000)),
        )
        if request_id_from(sent, pattern) != sent
    ]
    assert replaced == []


def _key_of_a_hex_start(digits: str = "[0-9a-f]") -> bytes:
    """A key whose seat tokens' text begins with 5 hex ``digits`` (lowercase, or upper:
    about one key in 1,000 each), drawn from a seed."""
    draw = random.Random("hex start")
    while True:
        key = draw.randbytes(32)
        if re.fullmatch(f"{digits}{{5}}", base64.b64encode(KeyRing.key_id(key)).decode()[:5]):
            return key


def test_hex_ids_are_kept_under_a_key_whose_seat_tokens_begin_with_hex_digits() -> None:
    """Such a key's 5 characters are in 32 hex digits about once in 37,000: a review saw
    a tool's ids replaced under it. A seat token's own text is still told."""
    key = _key_of_a_hex_start()
    ring = KeyRing((key,))
    start = base64.b64encode(KeyRing.key_id(key)).decode()[:5]
    pattern = ring.seat_token_pattern()
    hex_id = f"0123{start}456789abcdef0123456789abcdef"[:32]
    assert request_id_from(hex_id, pattern) == hex_id
    token = base64.b64encode(SeatTokens(ring).issue("game-1", 0)).decode()
    assert token.startswith(start) and request_id_from(f"req-{token}", pattern) != f"req-{token}"


@pytest.mark.parametrize(("digits", "case"), [("[0-9a-f]", str.lower), ("[0-9A-F]", str.upper)])
def test_uuids_are_kept_under_a_key_whose_seat_tokens_begin_with_hex_digits(
    digits: str, case: Callable[[str], str]
) -> None:
    """A UUID's dashes are in the URL-safe alphabet: one that began with such a key's 5
    characters (Envoy's ids, about once in 250,000) was taken for a seat token (a
    review), and so, in upper case (macOS uuidgen's, SQL Server's), were UUIDs and 32
    hex digits. 20,000 seeded UUIDs, each with the start in its first or last run of hex
    digits (the two of 5 or more), and as many hex ids."""
    key = _key_of_a_hex_start(digits)
    start = base64.b64encode(KeyRing.key_id(key)).decode()[:5]
    pattern = KeyRing((key,)).seat_token_pattern()
    draw = random.Random("uuids")
    replaced = []
    for index in range(20_000):
        text = case(str(uuid.UUID(int=draw.getrandbits(128), version=4)))
        at = (0, 3, 24, 28, 31)[index % 5]
        hex_id = case(f"{draw.getrandbits(128):032x}")
        for sent in (f"{text[:at]}{start}{text[at + 5 :]}", f"{start}{hex_id[5:]}"):
            if request_id_from(sent, pattern) != sent:
                replaced.append(sent)
    assert replaced == []


def test_a_seat_token_after_hex_that_begins_with_a_key_id_start_is_told() -> None:
    """A run of hex digits that begins with a hex key id's start is passed, and ran on
    into the token's first letters: findall, which does not overlap, never looked at
    the token after it (a review), also under the ring's other key."""
    hex_key = _key_of_a_hex_start()
    start = base64.b64encode(KeyRing.key_id(hex_key)).decode()[:5]
    for ring, issuer in (
        (KeyRing((hex_key,)), hex_key),
        (KeyRing((bytes(range(32)), hex_key)), bytes(range(32))),
    ):
        pattern = ring.seat_token_pattern()
        token = SeatTokens(KeyRing((issuer,))).issue("game-1", 0)
        for text in (base64.b64encode(token).decode(), _url_safe(base64.b64encode(token).decode())):
            for sent in (f"{start}{'0' * 17}{text}", f"ab{start}{'0' * 21}{text}cd"):
                assert request_id_from(sent, pattern) != sent, sent


def test_hex_digits_of_both_cases_after_a_key_ids_start_are_told_as_a_seat_token() -> None:
    """Only hex digits and dashes of one case are kept, as tools write them: a seat
    token's 22 characters after its key id's start are all such about once in 2**42,
    and all hex of either case mixed about once in 2**32. Under a key whose start is
    digits alone, the same in either case, the mixed text is replaced and its lower and
    upper case spellings are kept."""
    key = _key_of_a_hex_start("[0-9]")
    start = base64.b64encode(KeyRing.key_id(key)).decode()[:5]
    pattern = KeyRing((key,)).seat_token_pattern()
    mixed = f"{start}0123456789abcdefABCDEF0123456789"[:32]
    assert request_id_from(mixed, pattern) != mixed
    for one_case in (mixed.lower(), mixed.upper()):
        assert request_id_from(one_case, pattern) == one_case
