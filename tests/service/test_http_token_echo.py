"""A seat token sent in the wrong place is not echoed by the HTTP gateway's refusal
(design section 4: a token is never echoed; docs/api.md, "Errors").

A client that swaps two fields, or sends a token as a name, logs the refusal it
gets, and a seat token is its seat's credential for the whole match. So a name or
value that holds a run of base64 as long as a seat token's text (27 characters
unpadded, 28 padded) that looks drawn at random is told by its length, in the
message and in the field violation's path, where a shorter wrong value, a misspelt
name, or a long text of one case that people and tools write (a media type, a
path, a snake_case name) is still quoted.
Each test sends the token to a real ``cardrules serve`` and reads the JSON it answers.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.service.http_helpers import exchange, refusal
from tests.service.server_process import ServerProcess

INTEGER_WORDS = "an integer (a JSON number, or a string of decimal digits without a leading zero)"
# The shortest window of a token's text that a refusal must not show: no English word
# of an answer matches 12 random base64 characters.
_WINDOW = 12

Body = Callable[[Any, str], dict[str, Any]]


def withheld(text: str) -> str:
    return f"[{len(text)} characters, not shown: it reads as a token]"


def url_safe(token: str) -> str:
    """The token's text (standard base64) as URL-safe base64 without padding: 27
    characters."""
    return base64.urlsafe_b64encode(base64.b64decode(token)).decode().rstrip("=")


def shows_part_of(answer: str, token: str) -> bool:
    """Whether ``answer`` holds ``_WINDOW`` characters of ``token`` in a row, in either
    alphabet, whichever ``token`` is spelt in."""
    text = token.rstrip("=").replace("-", "+").replace("_", "/")
    standard = base64.b64encode(base64.b64decode(text + "=" * (-len(text) % 4))).decode()
    spellings = {standard.rstrip("="), url_safe(standard)}
    return any(
        spelling[at : at + _WINDOW] in answer
        for spelling in spellings
        for at in range(len(spelling) - _WINDOW + 1)
    )


def refused(server: ServerProcess, route: str, body: bytes) -> tuple[str, str, str]:
    """The field and description of the one violation of a ``JSON_INVALID`` refusal, and
    the whole answer as text; its message is ``field: description`` (docs/api.md)."""
    status, _, value = exchange(f"{server.http_url}/v1/krypkasino:{route}", body)
    code, reason, _, violations = refusal(value)
    assert (status, code, reason) == (400, 3, "JSON_INVALID"), value
    ((field, description),) = violations.items()
    assert value["message"] == (f"{field}: " if field else "") + description
    return field, description, json.dumps(value, ensure_ascii=False)


def seat_token(game: Any, spelling: str) -> str:
    token: str = game["seatTokens"][0]
    return token if spelling == "standard" else url_safe(token)


SPELLINGS = pytest.mark.parametrize("spelling", ["standard", "url-safe"])


def _legal_moves(game: Any, seat: str) -> dict[str, Any]:
    return {"state": game["state"], "seat": seat, "seatToken": game["seatTokens"][0]}


@SPELLINGS
@pytest.mark.parametrize(
    ("route", "body", "field"),
    [
        ("legalMoves", _legal_moves, "seat"),
        ("newGame", lambda game, value: {"config": {"players": value}}, "config.players"),
        ("newGame", lambda game, value: {"seed": value}, "seed"),
    ],
)
def test_a_seat_token_in_an_integer_field_is_told_by_its_length_where_a_short_value_is_quoted(
    server: ServerProcess, json_game: Any, spelling: str, route: str, body: Body, field: str
) -> None:
    token = seat_token(json_game, spelling)
    sent = json.dumps(body(json_game, token)).encode()
    named, description, answer = refused(server, route, sent)
    assert (named, description) == (field, f"must be {INTEGER_WORDS}, not {withheld(token)}")
    assert not shows_part_of(answer, token)
    short = json.dumps(body(json_game, "seven")).encode()
    assert refused(server, route, short)[:2] == (field, f'must be {INTEGER_WORDS}, not "seven"')


@SPELLINGS
def test_a_seat_token_sent_as_a_name_is_not_shown_in_the_path_or_the_why(
    server: ServerProcess, json_game: Any, spelling: str
) -> None:
    """The path says the name is not shown; the why does not say it twice. A misspelt
    name is still named in the path, and quoted in the why if the path would not show
    it plainly, with the field it is near."""
    token = seat_token(json_game, spelling)
    field, description, answer = refused(
        server, "legalMoves", json.dumps({**_legal_moves(json_game, "0"), token: 1}).encode()
    )
    assert (field, description) == (withheld(token), "the request has no such field")
    assert not shows_part_of(answer, token)
    for name, why in [
        ("seatTokn", "the request has no such field"),
        ("seat-token", 'the request has no field "seat-token"'),
    ]:
        sent = json.dumps({**_legal_moves(json_game, "0"), name: 1}).encode()
        assert refused(server, "legalMoves", sent)[:2] == (name, f"{why}; did you mean seat_token?")


@SPELLINGS
def test_a_seat_token_sent_as_a_nested_name_is_not_shown_in_the_path(
    server: ServerProcess, json_game: Any, spelling: str
) -> None:
    token = seat_token(json_game, spelling)
    sent = json.dumps({"config": {"players": 2, token: 1}}).encode()
    field, description, answer = refused(server, "newGame", sent)
    assert (field, description) == (f"config.{withheld(token)}", "config has no such field")
    assert not shows_part_of(answer, token)
    misspelt = json.dumps({"config": {"playrs": 2}}).encode()
    assert refused(server, "newGame", misspelt)[:2] == (
        "config.playrs",
        "config has no such field; did you mean config.players?",
    )


def test_a_seat_token_sent_twice_as_a_name_is_not_shown(
    server: ServerProcess, json_game: Any
) -> None:
    token = seat_token(json_game, "standard")
    sent = f'{{"config": {{"{token}": 1, "{token}": 2}}}}'.encode()
    field, description, answer = refused(server, "newGame", sent)
    assert (field, description) == (f"config.{withheld(token)}", "appears twice")
    assert not shows_part_of(answer, token)


@pytest.mark.parametrize(
    "value",
    [
        "Bearer {token}",  # quoted whole: it is shorter than 40 characters
        "!" * 20 + "{token}",  # cut at 40 characters, after 20 of the token's
    ],
)
def test_a_value_that_holds_a_seat_token_is_told_by_its_length_whole(
    server: ServerProcess, json_game: Any, value: str
) -> None:
    text = value.format(token=seat_token(json_game, "standard"))
    field, description, answer = refused(
        server, "legalMoves", json.dumps(_legal_moves(json_game, text)).encode()
    )
    assert (field, description) == ("seat", f"must be {INTEGER_WORDS}, not {withheld(text)}")
    assert not shows_part_of(answer, seat_token(json_game, "standard"))


def test_a_run_of_base64_shorter_than_a_seat_tokens_text_is_quoted(
    server: ServerProcess, json_game: Any
) -> None:
    """27 characters are a seat token's 20 bytes unpadded; 26 are 19 bytes, no token."""
    mixed = "Ab" * 14
    for text, shown in [(mixed[:26], f'"{mixed[:26]}"'), (mixed[:27], withheld(mixed[:27]))]:
        sent = json.dumps(_legal_moves(json_game, text)).encode()
        assert refused(server, "legalMoves", sent)[:2] == (
            "seat",
            f"must be {INTEGER_WORDS}, not {shown}",
        )


def test_a_seat_token_of_one_case_is_told_by_its_letters_next_to_digits(
    server: ServerProcess, json_game: Any
) -> None:
    """About one seat token in 300,000 has letters of one case only: it reads as a token by
    three letters next to a digit and a letter past "f", where a hex digest is quoted.
    Each bound is pinned: three pairs, not four (``d1``, ``1e``, ``e2``); a digit first
    counts as a letter first does (``1a``, ``z2``, ``2a``); ``g`` is past "f"."""
    for text, shown in [
        ("kybtqagro7vjml24z+b07zjlwbo", False),
        ("KYBTQAGRO7VJML24Z-B07ZJLWBO", False),
        ("ghijklmnopqrstuvwxyzabcd1e2", False),
        ("1abcdefghijklmnopqrstuvwxyz2a", False),
        ("abcdefgabcdefgabcdefga1b2c3", False),
        ("ABCDEFGABCDEFGABCDEFGA1B2C3", False),
        ("da39a3ee5e6b4b0d3255bfef95601890afd80709", True),
        ("A" * 27, True),
    ]:
        sent = json.dumps(_legal_moves(json_game, text)).encode()
        quoted = json.dumps(_cut(text))
        assert refused(server, "legalMoves", sent)[:2] == (
            "seat",
            f"must be {INTEGER_WORDS}, not {quoted if shown else withheld(text)}",
        )


def test_a_row_of_eight_symbols_ends_a_run_and_one_of_seven_does_not(
    server: ServerProcess, json_game: Any
) -> None:
    """Eight or more of one symbol in a row (a multipart boundary's dashes) end a run of
    base64; seven are still part of it, which reads as a token here."""
    for text, shown in [
        ("AbCdEfGhIjKlMn-------OpQrStUvWxYz", False),
        ("AbCdEfGhIjKlMn--------OpQrStUvWxYz", True),
    ]:
        sent = json.dumps(_legal_moves(json_game, text)).encode()
        assert refused(server, "legalMoves", sent)[:2] == (
            "seat",
            f"must be {INTEGER_WORDS}, not {json.dumps(text) if shown else withheld(text)}",
        )


def _cut(text: str) -> str:
    return text if len(text) <= 40 else text[:40] + "..."


# What a client writes of its own, as long as a token's text or longer, in one case or
# with rows of dashes: quoted as sent, so that a refusal still says what was wrong.
CURL_FORM = "application/x-www-form-urlencoded"  # curl -d's type
CURL7_MULTIPART = "multipart/form-data; boundary=------------------------1dc293ef8701bd73"
CURL8_MULTIPART = "multipart/form-data; boundary=------------------------wjHtL7DvKhHA0aPOZI6ZFs"


BROWSER_MULTIPART = "multipart/form-data; boundary=----WebKitFormBoundary7MA4YWxkTrZu0gW"


@pytest.mark.parametrize(
    ("content_type", "echoed"),
    [
        (CURL_FORM, CURL_FORM),
        (CURL7_MULTIPART, CURL7_MULTIPART),
        (CURL8_MULTIPART, CURL8_MULTIPART),
        (BROWSER_MULTIPART, withheld(BROWSER_MULTIPART)),
    ],
)
def test_a_content_type_of_curls_is_echoed_in_a_415(
    server: ServerProcess, content_type: str, echoed: str
) -> None:
    """``curl -d '{}'`` sends a form type, ``curl -F`` multipart with a boundary of 24
    dashes and random characters: the most common 415s name the type sent. A browser's
    boundary, random letters of both cases glued to a name, reads as a token."""
    status, _, answer = exchange(
        f"{server.http_url}/v1/krypkasino:newGame",
        b"{}",
        headers={"Content-Type": content_type},
    )
    assert (status, refusal(answer)[1:3]) == (
        415,
        ("UNSUPPORTED_MEDIA_TYPE", {"content_type": echoed}),
    )


@pytest.mark.parametrize(
    "path", ["/v1/krypkasino/legal_moves/extra", "/api/cardrules/v1/krypkasino:newGame"]
)
def test_a_long_path_of_one_case_is_echoed_in_a_404(server: ServerProcess, path: str) -> None:
    status, _, answer = exchange(f"{server.http_url}{path}", b"{}")
    assert (status, refusal(answer)[1:3]) == (404, ("NOT_FOUND_ROUTE", {"path": path}))


def test_a_long_snake_case_name_or_a_number_of_30_digits_is_quoted(
    server: ServerProcess, json_game: Any
) -> None:
    """A misspelt name of many words, or a seed of 30 digits with a leading zero, is no
    token."""
    name = "seeed_for_the_tournament_round_1"
    sent = json.dumps({"config": {"players": 2}, name: 1}).encode()
    assert refused(server, "newGame", sent)[:2] == (name, "the request has no such field")
    digits = "0" + "123456789" * 3 + "0"
    sent = json.dumps({"seed": digits}).encode()
    assert refused(server, "newGame", sent)[:2] == (
        "seed",
        f'must be {INTEGER_WORDS}, not "{digits}"',
    )


@SPELLINGS
def test_a_seat_token_in_the_url_or_a_header_is_told_by_its_length(
    server: ServerProcess, json_game: Any, spelling: str
) -> None:
    """A REST-minded client puts the token in the path (``/v1/games/TOKEN``), or a header
    mix-up puts it in ``Grpc-Timeout``: the refusal's metadata gives its length only,
    where a short path or value is echoed as sent."""
    token = seat_token(json_game, spelling)
    # The whole path is searched, not only the part that would be echoed: the token may
    # begin past its 64th character and still end inside the 120 echoed.
    for path in [f"/v1/games/{token}", "/v1/" + "a" * 70 + "/" + token]:
        status, _, answer = exchange(f"{server.http_url}{path}", b"{}")
        assert (status, refusal(answer)[1:3]) == (
            404,
            ("NOT_FOUND_ROUTE", {"path": withheld(path)}),
        )
        assert not shows_part_of(json.dumps(answer), token)
    status, _, answer = exchange(f"{server.http_url}/v1/games/7", b"{}")
    assert (status, refusal(answer)[2]) == (404, {"path": "/v1/games/7"})
    for value, echoed in [(token, withheld(token)), ("2x", "2x")]:
        status, _, answer = exchange(
            f"{server.http_url}/v1/krypkasino:score",
            json.dumps({"state": json_game["state"]}).encode(),
            headers={"Content-Type": "application/json", "Grpc-Timeout": value},
        )
        assert (status, refusal(answer)[1:3]) == (
            400,
            ("TIMEOUT_INVALID", {"grpc_timeout": echoed}),
        )
