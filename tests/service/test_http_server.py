"""The HTTP/JSON gateway of a real ``cardrules serve`` (design sections 5 and 6).

Same process and loop as gRPC: tokens cross transports, calls land in the
same metrics series and request log lines (``transport: http``). Every
refusal is the ``google.rpc.Status`` JSON with one ``ErrorInfo`` and the
standard HTTP status. Configuration by flags and environment (port, CORS
origins, request limit), ``--workers`` sharing the HTTP port, and the SIGTERM
drain of an HTTP request in flight.
"""

from __future__ import annotations

import base64
import codecs
import gzip
import http.client
import json
import re
import socket
import time
import urllib.parse
import urllib.request
import zlib
from typing import Any, cast

import grpc
import pytest
from cardrules.cards.v1 import cards_pb2
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from cardrules.krypkasino.v1 import krypkasino_pb2_grpc
from google.protobuf import json_format

from engine.cards import parse_card
from engine.krypkasino import Config
from service.http_gateway import JSON_BODY_FACTOR
from service.http_json import message_json
from tests.engine.krypkasino.helpers import first_distribution_deck
from tests.service.grpc_helpers import card_proto, deck_proto, state_of_request_size
from tests.service.http_helpers import ORIGIN, exchange, refusal, rpc
from tests.service.metrics_helpers import handled, metric_samples, rpc_sample
from tests.service.server_process import (
    ServerProcess,
    cannot_listen_line,
    free_port,
    free_ports,
    loaded_at_start,
    port_taken,
    running,
    serve_and_fail,
)

SERVICE = "cardrules.krypkasino.v1.KrypkasinoService"
LIMIT = 64 * 1024  # the default --max-request-bytes
BODY_LIMIT = JSON_BODY_FACTOR * LIMIT  # of a JSON body, by its length


# -- the API in JSON ----------------------------------------------------------------------


def test_json_is_proto3_canonical_and_tokens_cross_transports(server, json_game):
    assert set(json_game) == {"gameId", "state", "seatTokens", "view", "events"}
    view = json_game["view"]
    assert view["moveNumber"] == "0" and isinstance(view["handSizes"], list)
    assert "seat" not in view and view["hand"] == []  # public view: no seat, empty hand
    assert json_game["events"][0]["distributionDealt"]["dealNumber"] == 1
    turn = view["turn"]
    # A state token from HTTP plays over gRPC, and the next one back over HTTP.
    with grpc.insecure_channel(server.target) as channel:
        stub = krypkasino_pb2_grpc.KrypkasinoServiceStub(channel)
        tokens = [base64.b64decode(t) for t in json_game["seatTokens"]]
        legal = stub.LegalMoves(
            pb.LegalMovesRequest(
                state=base64.b64decode(json_game["state"]), seat=turn, seat_token=tokens[turn]
            )
        )
        played = stub.Play(
            pb.PlayRequest(
                state=base64.b64decode(json_game["state"]),
                seat=turn,
                seat_token=tokens[turn],
                move=legal.moves[0].move,
            )
        )
    after = rpc(server, "getView", {"state": base64.b64encode(played.state).decode()})
    assert after["view"]["moveNumber"] == "1" and after["view"]["gameId"] == json_game["gameId"]
    by_names = rpc(
        server,
        "legalMoves",
        {"state": json_game["state"], "seat": turn, "seat_token": json_game["seatTokens"][turn]},
    )
    assert by_names["moves"][0]["move"]["card"] == {
        "rank": cards_pb2.Rank.Name(legal.moves[0].move.card.rank),
        "suit": cards_pb2.Suit.Name(legal.moves[0].move.card.suit),
    }


def test_responses_name_the_service_but_no_versions_and_are_never_stored(server):
    """aiohttp's default ``Server: Python/3.11 aiohttp/3.x`` tells a scanner what to try.

    Answers carry state and seat tokens, which are credentials, so no cache may
    keep one, and every body is JSON, which a browser must not sniff as more."""
    answers = [
        exchange(f"{server.http_url}/v1/krypkasino:newGame", b'{"config": {"players": 2}}'),
        exchange(f"{server.http_url}/v1/krypkasino:newGame", b'{"config": {"players": 9}}'),
        exchange(f"{server.http_url}/v1/krypkasino:shuffle", b"{}"),
        exchange(f"{server.http_url}/healthz", method="GET"),
        exchange(f"{server.http_url}/openapi.json", method="GET"),
        exchange(f"{server.http_url}/v1/krypkasino:newGame", method="OPTIONS"),
    ]
    assert [status for status, _, _ in answers] == [200, 400, 404, 200, 200, 204]
    assert {
        (headers["Server"], headers["Cache-Control"], headers["X-Content-Type-Options"])
        for _, headers, _ in answers
    } == {("cardrules", "no-store", "nosniff")}


# -- refusals -------------------------------------------------------------------------------


def test_an_unknown_path_is_404_not_found_route(server):
    status, headers, body = exchange(f"{server.http_url}/v1/krypkasino:shuffle", b"{}")
    assert status == 404 and headers["Content-Type"].startswith("application/json")
    assert refusal(body)[:3] == (5, "NOT_FOUND_ROUTE", {"path": "/v1/krypkasino:shuffle"})


@pytest.mark.parametrize(
    ("path", "near"),
    [
        ("/v1/krypkasino/score", "/v1/krypkasino:score"),
        ("/v1/krypkasino:Score", "/v1/krypkasino:score"),
        ("/v1/krypkasino:play/", "/v1/krypkasino:play"),
        ("/v1/krypkasino/new_game", "/v1/krypkasino:newGame"),
        ("/V1/KRYPKASINO:GETVIEW", "/v1/krypkasino:getView"),
        ("/health", "/healthz"),
        ("/v1/krypkasino:shuffle", None),  # 0.81 against /v1/krypkasino:score, under 0.85
        ("/v1/" + "krypkasino:score" * 8, None),
    ],
)
def test_a_404_names_the_path_an_unknown_one_is_a_slip_from(server, path, near):
    """REST-style slashes, capitals and a trailing slash are the first mistakes of a
    hand-written client; a path that is no slip from one served gets no guess."""
    status, _, body = exchange(f"{server.http_url}{path}", b"{}")
    assert status == 404 and refusal(body)[1] == "NOT_FOUND_ROUTE"
    hint = f"; did you mean {near}?" if near else ""
    assert body["message"] == f"no route for this path{hint}"


def test_a_seat_outside_the_game_is_refused_naming_the_seat_first(server, json_game):
    """docs/api.md, "Errors": the message names the field first, the violation says only
    why (was ``seat must be 0 to 1, not 5`` in both)."""
    asked = {"state": json_game["state"], "seat": 5, "seatToken": json_game["seatTokens"][0]}
    status, _, value = exchange(
        f"{server.http_url}/v1/krypkasino:getView", json.dumps(asked).encode()
    )
    assert (status, value["message"]) == (400, "seat: must be 0 to 1, not 5")
    assert refusal(value)[1:] == (
        "SEAT_INVALID",
        {"seat": "5", "players": "2"},
        {"seat": "must be 0 to 1, not 5"},
    )


def test_a_json_value_out_of_range_is_refused_naming_its_field_first(server):
    """docs/api.md, "Errors" and "JSON": ``path: why``, the violation the why alone (was
    ``config.players must be -2147483648 to 2147483647, not 99999999999`` in both)."""
    body = b'{"config": {"players": 99999999999}, "seed": -1}'
    status, _, value = exchange(f"{server.http_url}/v1/krypkasino:newGame", body)
    why = "must be -2147483648 to 2147483647, not 99999999999"
    assert (status, value["message"]) == (400, f"config.players: {why}")
    assert refusal(value)[1:] == ("JSON_INVALID", {}, {"config.players": why})


def test_a_body_with_a_byte_order_mark_is_served(server):
    """docs/api.md, "JSON": as Windows tools write it before the JSON."""
    body = codecs.BOM_UTF8 + json.dumps({"config": {"players": 2}}).encode()
    status, _, answer = exchange(f"{server.http_url}/v1/krypkasino:newGame", body)
    assert status == 200 and answer["view"]["config"]["players"] == 2


def post_on_no_route(
    server: ServerProcess, path: str, request_id: str
) -> tuple[bytes, dict[str, object]]:
    """POST ``{}`` to ``path``, which no route takes: the 404's body, the request line."""
    status, _, body = exchange(
        f"{server.http_url}{path}",
        b"{}",
        headers={"Content-Type": "application/json", "X-Request-Id": request_id},
    )
    assert status == 404
    (line,) = server.request_lines(request_id)
    return body, line


def test_a_long_unknown_path_is_echoed_as_its_first_120_characters(server):
    """What the client sent is quoted back in the refusal, cut to 120 characters: a
    request cannot make it as long as it likes. The log line gives a path that does not
    look like a route only as its length, as it could hold a token."""
    path = "/v1/" + "x" * 300
    body, line = post_on_no_route(server, path, "echo-cut-to-120")
    assert refusal(body)[:3] == (5, "NOT_FOUND_ROUTE", {"path": path[:120]})
    assert line["method"] == f"POST [a path of {len(path)} characters]"


@pytest.mark.parametrize("slip", ["%E2%80%A8", "%C2%85", "%E2%80%AE", "%E2%80%8B", "%C3%A9"])
def test_a_path_a_slip_from_a_route_is_logged_as_it_came_only_in_printable_ascii(server, slip):
    """A privacy review's find: a character a slip away from a route reached the JSON line
    unescaped, so U+2028 or U+0085 split it for line-based readers, U+0085 hid itself in
    "POST /v1/krypkasino:play", and U+202E reversed the text after it."""
    path = f"/v1/krypkasino:pla{slip}y"
    body, line = post_on_no_route(server, path, f"slip-{slip}")
    assert refusal(body)[1] == "NOT_FOUND_ROUTE"
    decoded = urllib.parse.unquote(path)
    assert line["method"] == f"POST [a path of {len(decoded)} characters]"
    # The same slip in printable ASCII (no route's character) is logged as it came.
    _, line = post_on_no_route(server, "/v1/krypkasino:pla!y", f"ascii-slip-{slip}")
    assert line["method"] == "POST /v1/krypkasino:pla!y"


@pytest.mark.parametrize("alphabet", ["base64", "base64url", "split"])
def test_a_token_sent_in_an_unknown_path_is_not_logged(server, json_game, alphabet):
    """Design section 6: never a token in the log, whatever a client does with it.
    ``split``: a seat token holds a "/" one time in three, and unpadded, split by it
    into short segments, it was logged as a route (a security review's find)."""
    token = json_game["seatTokens"][0]
    if alphabet != "base64":
        token = base64.urlsafe_b64encode(base64.b64decode(token)).decode().rstrip("=")
    quoted = urllib.parse.quote(token, safe="")
    if alphabet == "split":  # as if its "/"s had come every 9 characters
        quoted = "/".join(token[start : start + 9] for start in range(0, len(token), 9))
    path = f"/v1/krypkasino/{quoted}:play"
    _, line = post_on_no_route(server, path, f"token-in-path-{alphabet}")
    assert str(line["method"]).startswith("POST [a path of ")
    assert not [logged for logged in server.logs if token[:8] in json.dumps(logged)]


def test_a_request_no_route_takes_still_has_its_one_log_line(server):
    """Design section 6: every request is logged, the ones no RPC sees included; a path
    that looks like a route (a mistyped one) as it came."""
    _, line = post_on_no_route(server, "/v1/nowhere", "unrouted-line")
    assert re.fullmatch(r"ipv4:127\.0\.0\.1:[1-9]\d*", str(line["peer"]))
    assert {k: line[k] for k in ("method", "code", "reason", "transport", "game_id")} == {
        "method": "POST /v1/nowhere",
        "code": "NotFound",
        "reason": "NOT_FOUND_ROUTE",
        "transport": "http",
        "game_id": None,
    }


def test_an_http_request_has_no_access_log_line_besides_its_request_line(server):
    """aiohttp's access log would be a second line per request, in its own format."""
    for request_id in ("no-access-line-1", "no-access-line-2"):
        status, _, _ = exchange(
            f"{server.http_url}/healthz", method="GET", headers={"X-Request-Id": request_id}
        )
        assert status == 200
    exchange(
        f"{server.http_url}/v1/nowhere",
        b"{}",
        headers={"Content-Type": "application/json", "X-Request-Id": "no-access-line-3"},
    )
    server.request_lines("no-access-line-3")
    assert not [line for line in server.logs if line.get("logger") == "aiohttp.access"]


def test_the_root_path_reaches_the_gateway(server):
    status, headers, body = exchange(f"{server.http_url}/", b"{}")
    assert status == 404 and headers["X-Request-Id"]
    assert refusal(body)[:3] == (5, "NOT_FOUND_ROUTE", {"path": "/"})


def test_a_path_with_an_encoded_newline_reaches_the_gateway(server):
    status, headers, body = exchange(f"{server.http_url}/v1/a%0Ab", b"{}")
    assert status == 404 and headers["X-Request-Id"]
    assert refusal(body)[:3] == (5, "NOT_FOUND_ROUTE", {"path": "/v1/a\nb"})


def raw_exchange(server: ServerProcess, head: str) -> tuple[http.client.HTTPResponse, bytes]:
    """One request written as it is (a request target urllib cannot send), its answer."""
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as connection:
        connection.sendall(head.encode())
        answer = http.client.HTTPResponse(connection)
        answer.begin()
        return answer, answer.read()


@pytest.mark.parametrize(
    ("request_line", "method", "path", "logged"),
    [
        ("OPTIONS * HTTP/1.1", "OPTIONS", "*", "OPTIONS *"),
        ("CONNECT cardrules.example:443 HTTP/1.1", "CONNECT", "", "CONNECT"),
        ("GET http://cardrules.example HTTP/1.1", "GET", "", "GET"),
    ],
    ids=["asterisk", "authority", "absolute_without_path"],
)
def test_a_request_target_that_is_no_path_reaches_the_gateway(
    server, request_line, method, path, logged
):
    """A target no route's pattern can match ("*", an authority, an absolute URL without a
    path) is a well-formed request: it gets the gateway's 404 with its headers and its log
    line, not aiohttp's own plain-text 404 without either. Without a path the line's
    ``method`` is the method alone, not ``"CONNECT "`` with a trailing space."""
    request_id = f"no-path-target-{method}"
    answer, body = raw_exchange(
        server, f"{request_line}\r\nHost: test\r\nX-Request-Id: {request_id}\r\n\r\n"
    )
    assert answer.status == 404
    assert answer.getheader("X-Request-Id") == request_id
    assert answer.getheader("Cache-Control") == "no-store"
    assert refusal(json.loads(body))[:3] == (5, "NOT_FOUND_ROUTE", {"path": path})
    (line,) = server.request_lines(request_id)
    assert (line["method"], line["code"]) == (logged, "NotFound")


@pytest.mark.parametrize(
    ("request_line", "status", "code", "reason"),
    [
        ("POST /v1/krypkasino:score", 400, "InvalidArgument", "STATE_MISSING"),
        # aiohttp takes Expect by the route the path matches: a path the route's pattern
        # missed (an encoded newline, were it ".*") would get aiohttp's 417.
        ("GET /v1/a%0Ab", 404, "NotFound", "NOT_FOUND_ROUTE"),
    ],
)
def test_an_unknown_expectation_is_ignored_and_the_call_answered_and_logged(
    server, request_line, status, code, reason
):
    """RFC 9110 lets a server ignore an expectation it does not know; aiohttp's own 417
    came without the gateway's headers, log line or metrics."""
    answer, body = raw_exchange(
        server,
        f"{request_line} HTTP/1.1\r\nHost: test\r\nExpect: teapot\r\n"
        f"X-Request-Id: expectation-{reason}\r\nContent-Length: 0\r\n\r\n",
    )
    assert (answer.status, answer.getheader("X-Request-Id")) == (status, f"expectation-{reason}")
    assert refusal(json.loads(body))[1] == reason
    (line,) = server.request_lines(f"expectation-{reason}")
    assert (line["code"], line["reason"]) == (code, reason)


def expecting_continue(
    length: int, version: str = "1.1", expectation: str = "100-continue"
) -> bytes:
    """The head of a Score request whose body of ``length`` bytes waits for 100 Continue."""
    return (
        f"POST /v1/krypkasino:score HTTP/{version}\r\nHost: test\r\nExpect: {expectation}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def new_game_head(request_id: str, extra: str = "", body: bytes = b"{}") -> bytes:
    """A whole ``newGame`` request as sent, with extra header lines."""
    return (
        f"POST /v1/krypkasino:newGame HTTP/1.1\r\nHost: x\r\nX-Request-Id: {request_id}\r\n"
        f"Content-Type: application/json\r\n{extra}Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def answers_until_closed(server: ServerProcess, sent: bytes) -> list[tuple[int, str]]:
    """The status and request id of each answer on one connection, read until the server
    closes it (a connection it leaves open fails the read at 10 s)."""
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as connection:
        connection.sendall(sent)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    found = re.findall(rb"HTTP/1\.1 (\d{3}) .*?\r\nX-Request-Id: ([^\r]*)\r\n", received, re.S)
    return [(int(status), request_id.decode()) for status, request_id in found]


def test_a_request_asking_to_upgrade_is_answered_and_its_connection_closed(server):
    """aiohttp reads no more of such a connection: a request pipelined behind it went
    unanswered, and the answer of the one after came in its place (an HTTP review)."""
    body = b'{"config": {"players": 2}}'
    upgrade = new_game_head("asked-h2c", "Connection: Upgrade\r\nUpgrade: h2c\r\n", body)
    answers = answers_until_closed(server, upgrade + new_game_head("behind", body=body))
    assert answers == [(200, "asked-h2c")]


def chunked_new_game(request_id: str, codings: str) -> bytes:
    body = b'{"config": {"players": 2}}'
    return (
        (
            f"POST /v1/krypkasino:newGame HTTP/1.1\r\nHost: x\r\nX-Request-Id: {request_id}\r\n"
            f"Content-Type: application/json\r\nTransfer-Encoding: {codings}\r\n\r\n"
            f"{len(body):x}\r\n"
        ).encode()
        + body
        + b"\r\n0\r\n\r\n"
    )


@pytest.mark.parametrize(
    "sent",
    [
        new_game_head("framed", "Transfer-Encoding: \r\n", b'{"config": {"players": 2}}'),
        chunked_new_game("framed", "foo, chunked"),
        chunked_new_game("framed", "gzip, chunked"),
    ],
    ids=["empty_before_a_length", "unknown_before_chunked", "gzip_before_chunked"],
)
def test_a_body_framed_but_by_length_or_chunked_alone_is_refused_and_closed(server, sent):
    """RFC 9112 6.3. aiohttp took an empty Transfer-Encoding before a Content-Length, and
    codings it ignored before chunked, where a proxy in front may frame the body
    otherwise: the start of request smuggling (an HTTP review). Chunked alone is served."""
    answers = answers_until_closed(server, sent + new_game_head("next"))
    assert answers == [(400, "framed")]
    chunked = chunked_new_game("chunked", "chunked") + new_game_head(
        "next", "Connection: close\r\n"
    )
    assert answers_until_closed(server, chunked) == [(200, "chunked"), (400, "next")]


def test_a_body_too_large_by_its_length_is_refused_before_100_continue(server):
    """The client waits for 100 Continue before it sends the body: a body the gateway
    refuses by its Content-Length alone gets the 413 at once, not a 100 that has the
    client send megabytes for nothing."""
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as connection:
        connection.sendall(expecting_continue(BODY_LIMIT + 1))
        # Read as it comes: http.client would skip a 100 Continue.
        answer = connection.makefile("rb")
        # The reason phrase is the interpreter's (Python 3.13: RFC 9110's "Content Too Large").
        assert answer.readline().startswith(b"HTTP/1.1 413 ")
        headers = http.client.parse_headers(answer)
        body = answer.read(int(headers["Content-Length"]))
    assert refusal(json.loads(body))[1] == "REQUEST_TOO_LARGE"


def test_a_body_within_the_limit_gets_100_continue_and_is_served(server):
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as connection:
        connection.sendall(expecting_continue(2))
        assert connection.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        connection.sendall(b"{}")
        answer = http.client.HTTPResponse(connection)
        answer.begin()
        assert answer.status == 400
        assert refusal(json.loads(answer.read()))[1] == "STATE_MISSING"


def test_a_body_at_the_limit_by_its_length_gets_100_continue(server):
    """Only a length over the limit is refused unread; one at it is asked for."""
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as connection:
        connection.sendall(expecting_continue(BODY_LIMIT))
        assert connection.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"


@pytest.mark.parametrize("expectation", ["100-Continue", "100-CONTINUE"])
def test_a_100_continue_expectation_is_one_in_any_case(server, expectation):
    """RFC 9110, 10.1.1: the expectation is case-insensitive; unanswered, a client such
    as curl waits a second before it sends the body anyway."""
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as connection:
        connection.sendall(expecting_continue(2, expectation=expectation))
        assert connection.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"


def test_a_query_string_is_ignored(server):
    """docs/api.md: every field travels in the body, so ``:newGame?config.players=2``
    with no body is refused for its missing ``config.players``; probes that add a query
    string get their answers too."""
    status, _, body = exchange(f"{server.http_url}/v1/krypkasino:newGame?config.players=2", b"")
    assert status == 400 and "config.players" in body["message"]
    for path in ("/healthz?probe=1", "/readyz?probe=1"):
        assert exchange(f"{server.http_url}{path}", method="GET")[0] == 200


def test_an_http_1_0_request_gets_no_100_continue(server):
    """RFC 9110, 10.1.1: a 100-continue expectation in an HTTP/1.0 request is ignored; an
    HTTP/1.0 client knows no interim answers and would take the 100 for the answer."""
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as connection:
        connection.sendall(expecting_continue(2, version="1.0") + b"{}")
        answer = connection.makefile("rb")
        status_line = answer.readline()
        headers = http.client.parse_headers(answer)
        body = answer.read(int(headers["Content-Length"]))
    assert status_line.split()[1:2] == [b"400"], status_line
    assert refusal(json.loads(body))[1] == "STATE_MISSING"


def test_a_wrong_method_is_405_with_allow(server):
    status, headers, body = exchange(f"{server.http_url}/v1/krypkasino:score", method="GET")
    assert status == 405 and headers["Allow"] == "POST, OPTIONS"
    assert refusal(body)[:2] == (12, "METHOD_NOT_ALLOWED")
    status, headers, _ = exchange(f"{server.http_url}/openapi.json", b"{}", method="PUT")
    assert status == 405 and headers["Allow"] == "GET, HEAD, OPTIONS"


def test_a_wrong_method_is_named_in_its_refusal(server):
    status, _, body = exchange(f"{server.http_url}/v1/krypkasino:score", method="DELETE")
    assert status == 405
    assert refusal(body)[:3] == (12, "METHOD_NOT_ALLOWED", {"method": "DELETE"})


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "application/json; charset=latin-1",
        # A parameter's name is one in any case (RFC 9110, 5.6.6).
        "application/json; Charset=latin-1",
        "application/json; CHARSET=latin-1",
        None,
    ],
)
def test_a_body_that_is_not_json_is_415(server, content_type):
    headers = {} if content_type is None else {"Content-Type": content_type}
    request = urllib.request.Request(
        f"{server.http_url}/v1/krypkasino:score", data=b'{"state": "AA=="}', headers=headers
    )
    if content_type is None:
        request.remove_header("Content-type")  # urllib adds a form type to every body
        request.unredirected_hdrs.pop("Content-type", None)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 415
    assert refusal(json.loads(refused.value.read()))[:2] == (3, "UNSUPPORTED_MEDIA_TYPE")


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        (None, b""),  # urllib's own: application/x-www-form-urlencoded
        ("text/plain", b""),
        ("application/json; charset=latin-1", b""),
        ("text/plain", b" \r\n"),
    ],
)
def test_an_empty_body_is_the_empty_request_whatever_its_content_type(server, content_type, body):
    """docs/api.md: an empty body needs no Content-Type, so it needs no right one either;
    the call is made on the empty request, here refused for its missing state."""
    headers = {} if content_type is None else {"Content-Type": content_type}
    request = urllib.request.Request(
        f"{server.http_url}/v1/krypkasino:score", data=body, headers=headers
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    sent = request.get_header("Content-type")  # urllib adds its form type to every body
    assert sent == (content_type or "application/x-www-form-urlencoded")
    assert refused.value.code == 400
    assert refusal(json.loads(refused.value.read()))[:2] == (3, "STATE_MISSING")


@pytest.mark.parametrize(
    "content_type",
    [
        *(
            f"application/json; charset={name}"
            for name in ("UTF-8", "utf-8", '"utf-8"', "utf8", "UTF8")
        ),
        "Application/JSON",  # RFC 9110, 8.3.1: a media type's case does not matter
    ],
)
def test_json_with_a_charset_is_fine(server, json_game, content_type):
    """utf8 too: WHATWG's label for UTF-8 (RFC 8259 11: the parameter has no effect)."""
    status, _, body = exchange(
        f"{server.http_url}/v1/krypkasino:score",
        json.dumps({"state": json_game["state"]}).encode(),
        headers={"Content-Type": content_type},
    )
    assert status == 200 and body["totals"] == [0, 0]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"state": ', ""),
        (b'{"state": "AA==", "seed": "1"}', "seed"),
        (b'{"state": "AA==", "extra": {"deep": 1}}', "extra"),
    ],
)
def test_malformed_json_or_an_unknown_field_is_400_naming_it(server, body, field):
    status, _, value = exchange(f"{server.http_url}/v1/krypkasino:score", body)
    code, reason, _, violations = refusal(value)
    assert (status, code, reason) == (400, 3, "JSON_INVALID")
    assert list(violations) == [field]


@pytest.mark.parametrize(
    ("route", "body", "field"),
    [
        ("score", b"[" * 5000 + b"]" * 5000, ""),
        ("score", b'{"state": "AA==", "\\ud800": 1}', ""),
        ("newGame", b'{"config": {"players": 2, "teams": "\\udfff"}}', ""),
        ("score", b'{"\\ud800": 1, "\\ud800": 2}', ""),
    ],
    ids=["nested-too-deep", "lone-surrogate-name", "lone-surrogate-enum", "duplicate-surrogate"],
)
def test_json_python_cannot_hold_is_400_json_invalid_not_a_server_error(server, route, body, field):
    """Nesting past Python's recursion limit and lone UTF-16 surrogate escapes are bad
    input like any other: a Status with its ErrorInfo, never a 500."""
    status, headers, value = exchange(f"{server.http_url}/v1/krypkasino:{route}", body)
    code, reason, _, violations = refusal(value)
    assert (status, code, reason) == (400, 3, "JSON_INVALID"), value
    assert list(violations) == [field]
    assert headers["X-Request-Id"]


def test_a_content_type_that_is_not_utf8_is_415_with_its_status(server):
    """aiohttp decodes header bytes with surrogateescape; echoing one back in the
    ErrorInfo must not turn the refusal into a 500."""
    status, headers, value = exchange(
        f"{server.http_url}/v1/krypkasino:score", b"{}", headers={"Content-Type": "text/\xff"}
    )
    code, reason, metadata, _ = refusal(value)
    assert (status, code, reason) == (415, 3, "UNSUPPORTED_MEDIA_TYPE"), value
    assert metadata["content_type"] == "text/\\udcff"
    assert headers["X-Request-Id"]


def test_a_bad_nested_field_is_named_by_its_proto_path(server, json_game):
    move = {"card": {"rank": "RANK_ACE", "suit": "SUIT_SPADES"}, "captures": [{}, {"rnak": 1}]}
    body = {
        "state": json_game["state"],
        "seat": 0,
        "seatToken": json_game["seatTokens"][0],
        "move": move,
    }
    status, _, value = exchange(f"{server.http_url}/v1/krypkasino:play", json.dumps(body).encode())
    assert status == 400
    assert refusal(value)[1:] == (
        "JSON_INVALID",
        {},
        {"move.captures[1].rnak": refusal(value)[3]["move.captures[1].rnak"]},
    )


def test_service_refusals_take_the_standard_http_mapping(server, json_game):
    url = f"{server.http_url}/v1/krypkasino"
    turn = json_game["view"]["turn"]
    other = 1 - turn
    status, _, value = exchange(f"{url}:score", b"{}")
    assert (status, refusal(value)[1]) == (400, "STATE_MISSING")
    assert refusal(value)[3] == {"state": "the state token is required"}
    wrong_token = {
        "state": json_game["state"],
        "seat": turn,
        "seatToken": json_game["seatTokens"][other],
    }
    status, _, value = exchange(f"{url}:legalMoves", json.dumps(wrong_token).encode())
    assert (status, refusal(value)[:2]) == (403, (7, "SEAT_TOKEN_INVALID"))
    out_of_turn = {
        "state": json_game["state"],
        "seat": other,
        "seatToken": json_game["seatTokens"][other],
        "move": {"card": {"rank": "RANK_ACE", "suit": "SUIT_SPADES"}},
    }
    status, _, value = exchange(f"{url}:play", json.dumps(out_of_turn).encode())
    code, reason, metadata, _ = refusal(value)
    assert (status, code, reason) == (400, 9, "NOT_YOUR_TURN")
    assert metadata == {"rule": "K4.4", "seat": str(other), "turn": str(turn)}


@pytest.mark.parametrize("route", ["legalMoves", "play"])
def test_seat_left_out_with_another_seats_token_is_refused_saying_whose_token_it_is(
    server, json_game, route
):
    """A left-out seat is 0: the refusal names the token's seat and asks about ``seat``
    rather than sending the client after a token it does not have."""
    body = {"state": json_game["state"], "seatToken": json_game["seatTokens"][1]}
    if route == "play":
        body["move"] = {"card": {"rank": "RANK_ACE", "suit": "SUIT_SPADES"}}
    status, _, value = exchange(
        f"{server.http_url}/v1/krypkasino:{route}", json.dumps(body).encode()
    )
    code, reason, metadata, _ = refusal(value)
    assert (status, code, reason) == (403, 7, "SEAT_TOKEN_INVALID"), value
    assert metadata == {"seat": "0", "token_seat": "1"}
    assert value["message"] == (
        "not a valid seat token for seat 0; it is seat 1's token: was the seat field left out?"
    )


@pytest.mark.parametrize("route", ["legalMoves", "play", "getView"])
def test_another_games_seat_token_is_refused_asking_whether_it_is_of_another_game(
    server, json_game, route
):
    """The usual cause of a token of no seat of the game: a bot that started a new game
    and kept the old tokens. The message says so, as over gRPC (design section 4)."""
    old = rpc(server, "newGame", {"config": {"players": 2}, "seed": "7"})
    turn = json_game["view"]["turn"]
    body = {"state": json_game["state"], "seat": turn, "seatToken": old["seatTokens"][turn]}
    if route == "play":
        body["move"] = {"card": {"rank": "RANK_ACE", "suit": "SUIT_SPADES"}}
    status, _, value = exchange(
        f"{server.http_url}/v1/krypkasino:{route}", json.dumps(body).encode()
    )
    code, reason, metadata, _ = refusal(value)
    assert (status, code, reason) == (403, 7, "SEAT_TOKEN_INVALID"), value
    # token_game tells a client that words refusals itself what the message says.
    assert metadata == {"seat": str(turn), "token_game": "other"}
    assert value["message"] == (
        f"not a valid seat token for seat {turn}; "
        "it is no seat's token of this game (one from another game?)"
    )


def card_json(code: str) -> Any:
    """A card of K1.1's notation as the JSON API writes it."""
    return json_format.MessageToDict(card_proto(parse_card(code)))


@pytest.mark.parametrize(
    ("captures", "metadata", "message"),
    [
        # The table holds one 8S; the capture names it twice (K1.4).
        (
            "AH 7C 8S 8S",
            {"captured_card": "8S", "table_count": "1"},
            "the capture names 8S 2 times, but the table holds 1 (K7.3)",
        ),
        (
            "5H",
            {"captured_card": "5H", "table_count": "0", "in_hand": "true"},
            "5H is in seat 1's hand, not on the table (K7.3)",
        ),
        ("8H", {"captured_card": "8H", "table_count": "0"}, "8H is not on the table (K7.3)"),
    ],
)
def test_capture_not_on_table_says_how_often_the_table_holds_the_card(
    server, captures, metadata, message
):
    """K7.3: the table is sealed in the state, so a client with a stale view cannot count
    the copies; ``table_count`` and ``in_hand`` say what the English message says, for a
    client that words refusals itself (docs/api.md, "Errors")."""
    hands = {1: "3H 4S 5H 8D 9C JD", 0: "6C 6H 6S 7D 7H 7S"}
    deck = first_distribution_deck(Config(players=2), hands, "AH 7C 8S 10D")
    game = rpc(
        server,
        "newGame",
        {
            "config": {"players": 2},
            "decks": [json_format.MessageToDict(deck_proto(deck))],
            "seed": "3",
        },
    )
    move = {"card": card_json("8D"), "captures": [card_json(c) for c in captures.split()]}
    body = {"state": game["state"], "seat": 1, "seatToken": game["seatTokens"][1], "move": move}
    status, _, value = exchange(f"{server.http_url}/v1/krypkasino:play", json.dumps(body).encode())
    code, reason, got, _ = refusal(value)
    assert (status, code, reason) == (400, 9, "CAPTURE_NOT_ON_TABLE"), value
    assert got == {"rule": "K7.3", "seat": "1", "card": "8D", **metadata}
    assert value["message"] == message


@pytest.mark.parametrize(
    ("config", "limit"),
    [
        ({"players": 4, "matchDeals": 244}, {"limit": "240"}),
        ({"players": 4, "matchDeals": 6}, {}),  # K13.2's multiple rule: no bound of ours
        ({"players": 4, "matchDeals": 0}, {}),
        ({"players": 2, "targetScore": 481}, {"limit": "480"}),
        ({"players": 2, "targetScore": 0}, {}),
    ],
)
def test_config_invalid_gives_the_limit_of_the_match_bounds_alone(server, config, limit):
    """docs/krypkasino-decisions.md, "Match length": 240 deals and a target of 480 are
    this project's bounds, cited as K13.2 like the flag's other refusals; ``limit`` tells
    them apart and names the bound without the English message."""
    status, _, value = exchange(
        f"{server.http_url}/v1/krypkasino:newGame", json.dumps({"config": config}).encode()
    )
    code, reason, metadata, _ = refusal(value)
    assert (status, code, reason) == (400, 3, "CONFIG_INVALID"), value
    flag = "match_deals" if "matchDeals" in config else "target_score"
    assert metadata == {"flag": flag, "rule": "K13.2", **limit}


def test_getview_with_a_seat_token_but_no_seat_is_refused_naming_the_tokens_seat(server, json_game):
    """A UI back from a reconnect with its seat token alone learns its seat from the
    refusal (``token_seat``); another game's token, or garbage, names no seat."""
    url = f"{server.http_url}/v1/krypkasino:getView"
    state, tokens = json_game["state"], json_game["seatTokens"]
    for seat, token in enumerate(tokens):
        body = json.dumps({"state": state, "seatToken": token}).encode()
        status, _, value = exchange(url, body)
        code, reason, metadata, violations = refusal(value)
        message = f"a seat token was given without its seat: it is seat {seat}'s token"
        assert (status, code, reason, metadata) == (
            400,
            3,
            "SEAT_MISSING",
            {"token_seat": str(seat)},
        )
        assert (value["message"], violations) == (message, {"seat": message})
    another = rpc(server, "newGame", {"config": {"players": 2}})["seatTokens"][1]
    for token in (another, base64.b64encode(b"x" * 20).decode()):
        body = json.dumps({"state": state, "seatToken": token}).encode()
        status, _, value = exchange(url, body)
        assert (status, refusal(value)[1:3]) == (400, ("SEAT_MISSING", {}))
        assert value["message"] == "a seat token was given without its seat"


def test_a_request_over_the_limit_as_protobuf_is_413_as_over_grpc(server):
    """Its JSON is well under the body limit; the message itself is what counts."""
    state = base64.b64encode(b"A" * LIMIT).decode()
    status, _, value = exchange(f"{server.http_url}/v1/krypkasino:score", _body(state=state))
    assert status == 413
    assert refusal(value)[:3] == (8, "REQUEST_TOO_LARGE", {"limit": str(LIMIT)})
    assert value["message"] == f"the request is larger than {LIMIT} bytes"


def test_a_gzip_bomb_of_empty_values_is_413_before_its_json_is_parsed(server):
    """A few hundred bytes of gzip hold 33,000 empty cards: at least 2 protobuf bytes
    each, over the limit. The gateway counts them before json_format, which took
    5 s to parse and search such a list for the bad last element it ends with."""
    captures = b",".join([b"{}"] * (LIMIT // 2 + 1))
    body = b'{"move": {"captures": [' + captures + b', {"rank": "X"}]}}'
    packed = gzip.compress(body)
    assert len(packed) < 1000
    status, _, value = exchange(
        f"{server.http_url}/v1/krypkasino:play",
        packed,
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    assert status == 413
    assert refusal(value)[:3] == (8, "REQUEST_TOO_LARGE", {"limit": str(LIMIT)})


def test_a_body_over_sixteen_times_the_limit_is_413_with_or_without_a_length(server):
    big = _body(state="A" * BODY_LIMIT)
    status, _, value = exchange(f"{server.http_url}/v1/krypkasino:score", big)
    assert status == 413 and refusal(value)[2] == {"limit": str(BODY_LIMIT)}
    # Chunked, so the server finds out only while reading.
    request = urllib.request.Request(
        f"{server.http_url}/v1/krypkasino:score",
        data=iter([big[:40_000], big[40_000:]]),
        headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 413


def test_the_largest_real_request_is_taken_over_both_transports(server):
    """A NewGame with the most explicit decks (64): 40 KB as protobuf, 282 KB as JSON."""
    ranks = [r for r in cards_pb2.Rank.values() if r]
    suits = [s for s in cards_pb2.Suit.values() if s]
    deck = [
        {"rank": cards_pb2.Rank.Name(r), "suit": cards_pb2.Suit.Name(s)}
        for r in ranks
        for s in suits
    ] * 2
    body = {"config": {"players": 2, "matchDeals": 64}, "decks": [{"cards": deck}] * 64}
    message = json_format.ParseDict(body, pb.NewGameRequest())
    assert message.ByteSize() > 40_000 and len(json.dumps(body)) > 4 * LIMIT
    status, _, value = exchange(f"{server.http_url}/v1/krypkasino:newGame", _body(**body))
    assert status == 200, value
    with grpc.insecure_channel(server.target) as channel:
        answer = krypkasino_pb2_grpc.KrypkasinoServiceStub(channel).NewGame(message, timeout=10)
    assert same_deal(json.loads(message_json(answer.view)), value["view"])


def _body(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


def same_deal(view: dict[str, Any], other: dict[str, Any]) -> bool:
    """Two views of a seed's game, whatever their game ids."""
    return {**view, "gameId": "", "stateId": ""} == {**other, "gameId": "", "stateId": ""}


def raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


def test_a_gzip_or_deflate_body_is_taken(server, json_game):
    """Deflate as zlib data (RFC 9110) or raw, as some clients send it; gzip also by its
    older name ``x-gzip``, which RFC 9110 (8.4.1.3) says to take as gzip."""
    body = _body(config={"players": 2}, seed="7")  # json_game's request
    for coding, packed in (
        ("gzip", gzip.compress(body)),
        ("x-gzip", gzip.compress(body)),
        ("X-Gzip", gzip.compress(body)),
        ("deflate", zlib.compress(body)),
        ("deflate", raw_deflate(body)),
    ):
        status, _, value = exchange(
            f"{server.http_url}/v1/krypkasino:newGame",
            packed,
            headers={"Content-Type": "application/json", "Content-Encoding": coding},
        )
        assert status == 200 and same_deal(value["view"], json_game["view"]), coding


GAME = _body(config={"players": 2})


@pytest.mark.parametrize(
    ("packed", "why"),
    [
        (GAME, "incorrect header check"),
        # Whole JSON, so only the missing end of its gzip data gives it away.
        (gzip.compress(GAME, mtime=0)[:-8], "the body ends before its gzip data does"),
        (
            gzip.compress(GAME, mtime=0) * 2,
            "data follows the end of the gzip data (a gzip body of several members is not read)",
        ),
    ],
    ids=["not_gzip", "cut_short", "more_after_the_end"],
)
def test_a_body_that_is_not_whole_gzip_is_400_and_closes_the_connection(server, packed, why):
    status, headers, value = exchange(
        f"{server.http_url}/v1/krypkasino:newGame",
        packed,
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    assert status == 400 and refusal(value)[:2] == (3, "REQUEST_MALFORMED")
    assert value["message"] == (
        f"the body does not decode as the gzip its Content-Encoding names: {why}"
    )
    assert headers["Connection"] == "close"


def test_a_brotli_body_is_refused_by_the_gateway_which_leaves_bodies_undecoded_to_aiohttp(server):
    """aiohttp decodes no body (it would go on inflating the rest of one the gateway
    refused early): a coding the gateway does not read is its own 415, not aiohttp's."""
    status, headers, value = exchange(
        f"{server.http_url}/v1/krypkasino:newGame",
        GAME,
        headers={"Content-Type": "application/json", "Content-Encoding": "br"},
    )
    assert status == 415
    assert refusal(value)[:3] == (3, "UNSUPPORTED_MEDIA_TYPE", {"content_encoding": "br"})
    # RFC 9110 15.5.16: the codings that would have been taken.
    assert headers["Accept-Encoding"] == "deflate, gzip"


def test_a_body_in_an_unknown_coding_is_415(server):
    status, _, value = exchange(
        f"{server.http_url}/v1/krypkasino:newGame",
        _body(config={"players": 2}),
        headers={"Content-Type": "application/json", "Content-Encoding": "x-secret"},
    )
    assert status == 415
    assert refusal(value)[:3] == (3, "UNSUPPORTED_MEDIA_TYPE", {"content_encoding": "x-secret"})


def test_two_content_encoding_lines_are_one_list_of_codings(server):
    """RFC 9110 (5.3): two Content-Encoding lines mean what one line "gzip, deflate" does,
    a body gzipped and then deflated, which the gateway does not read: refused as that
    line is, not read as the first line alone says (a proxy would read it otherwise)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
    try:
        body = gzip.compress(_body(config={"players": 2}))
        connection.putrequest("POST", "/v1/krypkasino:newGame")
        connection.putheader("Content-Type", "application/json")
        connection.putheader("Content-Encoding", "gzip")
        connection.putheader("Content-Encoding", "deflate")
        connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        status, value = response.status, json.loads(response.read())
    finally:
        connection.close()
    assert status == 415
    assert refusal(value)[:3] == (
        3,
        "UNSUPPORTED_MEDIA_TYPE",
        {"content_encoding": "gzip, deflate"},
    )


# -- observability ----------------------------------------------------------------------------


# -- configuration, workers and drain ---------------------------------------------------------


def test_http_calls_share_the_grpc_metrics_and_log_lines():
    with running(("--metrics-port", str(free_port()))) as server:
        server.wait_for_logs("metrics")
        game = rpc(server, "newGame", {"config": {"players": 2}, "seed": "7"})
        check_shared_metrics_and_logs(server, game)


def check_shared_metrics_and_logs(server: ServerProcess, game: Any) -> None:
    before = (
        handled(server.metrics_url, "Score", "OK"),
        handled(server.metrics_url, "Score", "InvalidArgument"),
    )
    request_id = "http-metrics-test-1"
    status, headers, _ = exchange(
        f"{server.http_url}/v1/krypkasino:score",
        json.dumps({"state": game["state"]}).encode(),
        headers={"Content-Type": "application/json", "X-Request-Id": request_id},
    )
    assert status == 200 and headers["X-Request-Id"] == request_id
    exchange(f"{server.http_url}/v1/krypkasino:score", b"{not json")
    with grpc.insecure_channel(server.target) as channel:
        stub = krypkasino_pb2_grpc.KrypkasinoServiceStub(channel)
        stub.Score(pb.ScoreRequest(state=base64.b64decode(game["state"])))
    after = (
        handled(server.metrics_url, "Score", "OK"),
        handled(server.metrics_url, "Score", "InvalidArgument"),
    )
    assert (after[0] - before[0], after[1] - before[1]) == (2, 1)
    (line,) = server.request_lines(request_id)
    assert [r for r in server.log_events("request") if r["request_id"] == request_id] == [line]
    assert line["transport"] == "http" and line["method"] == f"{SERVICE}/Score"
    assert line["code"] == "OK" and line["game_id"] == game["gameId"]
    assert str(line["peer"]).startswith("ipv4:127.0.0.1:")
    assert game["state"] not in json.dumps(server.logs), "a state token was logged"


def test_an_http_call_refused_before_its_body_came_received_no_message():
    """``grpc_server_msg_received_total`` counts a request message once its body came
    whole, whatever became of it then; ``started`` counts every call."""
    url = "/v1/krypkasino:score"
    with running(("--metrics-port", str(free_port()))) as server:
        server.wait_for_logs("metrics")

        def counts() -> list[float]:
            return [
                rpc_sample(server.metrics_url, f"grpc_server_{name}_total", "Score")
                for name in ("started", "msg_received")
            ]

        before = counts()
        unread = {"Content-Type": "application/json", "Content-Encoding": "br"}
        assert exchange(f"{server.http_url}{url}", b"{}", headers=unread)[0] == 415
        read = {"Content-Type": "text/plain"}
        assert exchange(f"{server.http_url}{url}", b"{}", headers=read)[0] == 415
        assert exchange(f"{server.http_url}{url}", b"{}")[0] == 400  # no state
        started, received = (a - b for a, b in zip(counts(), before, strict=True))
    assert (started, received) == (3, 2)


def test_a_request_at_the_limit_is_served_and_one_byte_more_is_413(server):
    """The limit is on the parsed message, as over gRPC, to the byte."""
    state = state_of_request_size(LIMIT)
    for extra, expected in (
        (b"", (400, "TOKEN_UNKNOWN_KEY")),
        (b"\x00", (413, "REQUEST_TOO_LARGE")),
    ):
        body = _body(state=base64.b64encode(state + extra).decode())
        status, _, value = exchange(f"{server.http_url}/v1/krypkasino:getView", body)
        assert (status, refusal(value)[1]) == expected, extra


def test_port_cors_origins_and_limit_come_from_the_environment():
    port = free_port()
    env = {
        "CARDRULES_HTTP_PORT": str(port),
        "CARDRULES_CORS_ORIGINS": f"{ORIGIN}, https://other.example",
        "CARDRULES_MAX_REQUEST_BYTES": "2048",
    }
    with running(env=env) as server:
        (listening,) = server.log_events("listening")
        assert listening["http_port"] == port and listening["http"] == f"127.0.0.1:{port}"
        url = f"http://127.0.0.1:{port}/v1/krypkasino:newGame"
        preflight = urllib.request.Request(
            url,
            method="OPTIONS",
            headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"},
        )
        with urllib.request.urlopen(preflight, timeout=10) as answer:
            assert answer.status == 204
            assert answer.headers["Access-Control-Allow-Origin"] == ORIGIN
        status, headers, _ = exchange(
            url,
            b'{"config": {"players": 2}}',
            headers={"Content-Type": "application/json", "Origin": "https://elsewhere.example"},
        )
        assert status == 200 and "Access-Control-Allow-Origin" not in headers
        # 1,100 empty decks: 13 KB of JSON, 2,200 bytes as protobuf.
        status, _, value = exchange(url, json.dumps({"decks": [{}] * 1100}).encode())
        assert status == 413 and refusal(value)[2] == {"limit": "2048"}
        # The body may be 16 times the limit, to the byte, and not a byte more.
        for size, expected in ((16 * 2048, 200), (16 * 2048 + 1, 413)):
            small = b'{"config": {"players": 2}}'
            status, _, _ = exchange(url, small + b" " * (size - len(small)))
            assert status == expected, size


def test_the_operator_sees_the_allowed_origins_and_the_refused_preflights():
    """Origins separated by white space, as state keys may be; every worker's ``listening``
    line names them (``cors_origins``), and ``cardrules_http_cors_preflights_refused_total``,
    at 0 from the start, sums the preflights every worker refused (no origin label)."""
    grpc_port, http_port, metrics_port = free_ports(3)
    args: tuple[str, ...] = ("--workers", "2", "--grpc-port", str(grpc_port))
    args += ("--http-port", str(http_port), "--metrics-port", str(metrics_port))
    env = {"CARDRULES_CORS_ORIGINS": f"{ORIGIN}\thttps://Other.example:443 \n"}
    refused: tuple[str, frozenset[tuple[str, str]]] = (
        "cardrules_http_cors_preflights_refused_total",
        frozenset(),
    )
    with running(args, env=env) as server:
        listening = server.wait_for_logs("listening", 2)
        assert [line["cors_origins"] for line in listening] == [
            [ORIGIN, "https://other.example"]
        ] * 2
        assert metric_samples(server.metrics_url)[refused] == 0
        url = f"http://127.0.0.1:{http_port}/v1/krypkasino:newGame"
        for origin, allowed in (
            ("https://other.example", True),
            ("https://evil.example", False),
            (ORIGIN, True),
        ) * 3:
            headers = {"Origin": origin, "Access-Control-Request-Method": "POST"}
            status, answer, _ = exchange(url, method="OPTIONS", headers=headers)
            assert status == 204 and ("Access-Control-Allow-Origin" in answer) is allowed
        assert metric_samples(server.metrics_url)[refused] == 3


@pytest.mark.parametrize(
    ("env", "complaint"),
    [
        (
            {"CARDRULES_CORS_ORIGINS": "play.example"},
            "CARDRULES_CORS_ORIGINS: must be an origin like https://example.com[:port], "
            "not 'play.example'",
        ),
        ({"CARDRULES_HTTP_PORT": "80000"}, "CARDRULES_HTTP_PORT: must be 0 to 65535, not 80000"),
    ],
)
def test_bad_cors_origins_or_http_port_stop_the_server_at_start(env, complaint):
    done = serve_and_fail(env=env)
    assert done.returncode == 2 and complaint in done.stderr


def test_workers_share_one_http_port():
    port, grpc_port = free_ports(2)
    args = ("--workers", "2", "--grpc-port", str(grpc_port), "--http-port", str(port))
    with running(args) as server:
        listening = server.wait_for_logs("listening", 2)
        assert {line["http_port"] for line in listening} == {port}
        assert len({line["pid"] for line in listening}) == 2
        for _ in range(6):
            status, _, _ = exchange(f"http://127.0.0.1:{port}/v1/krypkasino:newGame", b"{}")
            assert status == 400  # no players: CONFIG_INVALID from whichever worker


def test_an_http_port_in_use_stops_the_server_with_status_1():
    with port_taken() as port:
        done = serve_and_fail("--http-port", str(port))
    line = cannot_listen_line(done)
    assert (line["listener"], line["address"]) == ("http", f"127.0.0.1:{port}")


def test_workers_refuse_an_ephemeral_http_port():
    """Each worker would bind a port of its own: a fixed one is needed to share it."""
    done = serve_and_fail("--workers", "2", "--http-port", "0")
    assert done.returncode == 2
    assert "--workers 2 needs a fixed port, and --http-port is 0" in done.stderr


@pytest.mark.parametrize(
    "body",
    [
        # Chunked, but the JSON comes without its chunk framing.
        b'{"state":"SECRETSTATETOKEN","seatToken":"SECRETSEATTOKEN"}\r\n0\r\n\r\n',
        # A chunk longer than its announced size.
        b'4\r\n{"state":"SECRETSTATETOKEN"}\r\n0\r\n\r\n',
    ],
    ids=["no_framing", "wrong_size"],
)
def test_a_body_with_broken_chunks_is_400_and_its_text_stays_out_of_the_log(body):
    """aiohttp's parser refuses it (its plain-text 400, docs/api.md) and logs the error,
    whose message quotes the body: the log keeps only the exception's type, at debug
    level (the client's mistake is no server error)."""
    with running(("--log-level", "debug")) as server:
        with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as connection:
            head = (
                "POST /v1/krypkasino:getView HTTP/1.1\r\nHost: test\r\n"
                "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            connection.sendall(head.encode() + body)
            answer = http.client.HTTPResponse(connection)
            answer.begin()
            answer.read()
        assert answer.status == 400
        [error] = server.wait_for_logs("Error handling request from 127.0.0.1")
    assert "SECRET" not in json.dumps(server.logs)
    [exception] = cast(list[dict[str, str]], error["exception"])
    assert exception["exc_value"].endswith("message withheld, it may quote the request")
    assert error["level"] == "debug"


@pytest.mark.parametrize(
    ("grpc_timeout", "logged"),
    [
        ("", ("Canceled", "CLIENT_GONE")),
        ("Grpc-Timeout: 1n\r\n", ("DeadlineExceeded", "DEADLINE_EXCEEDED")),
    ],
    ids=["", "past_its_deadline"],
)
def test_a_body_cut_short_is_logged_as_one_cancelled_request(grpc_timeout, logged):
    """The client says 1,000 bytes, sends 20 and stops writing: the call still has its line,
    counted as cancelled, not as a bad request. aiohttp closes a connection whose client
    stopped writing, so nobody can read an answer, as when a gRPC client cancels. One whose
    ``Grpc-Timeout`` has passed is logged ``DeadlineExceeded`` instead
    (docs/api.md, ``CLIENT_GONE``)."""
    head = (
        "POST /v1/krypkasino:score HTTP/1.1\r\nHost: test\r\n"
        f"Content-Type: application/json\r\n{grpc_timeout}Content-Length: 1000\r\n\r\n"
    )
    with (
        running() as server,
        socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as connection,
    ):
        connection.sendall(head.encode() + b'{"state":"SECRETSTAT')
        connection.shutdown(socket.SHUT_WR)
        [line] = server.wait_for_logs("request")
        assert connection.recv(1) == b""  # closed, nothing said
    assert (line["code"], line["reason"]) == logged
    assert not [entry for entry in server.logs if entry.get("level") == "error"]
    assert "SECRET" not in json.dumps(server.logs)


def _queues(local: tuple[str, int], remote: tuple[str, int]) -> tuple[int, int] | None:
    """The (send, receive) queue bytes of this host's IPv4 TCP socket from ``local`` to
    ``remote``, as ``/proc/net/tcp`` shows them, or None if there is none."""

    def spelled(address: tuple[str, int]) -> str:
        # The kernel's spelling: the address as a little-endian hex word, then the port.
        return f"{int.from_bytes(socket.inet_aton(address[0]), 'little'):08X}:{address[1]:04X}"

    wanted = (spelled(local), spelled(remote))
    with open("/proc/net/tcp") as table:
        for row in table.readlines()[1:]:
            fields = row.split()
            if (fields[1], fields[2]) == wanted:
                sent, received = fields[4].split(":")
                return int(sent, 16), int(received, 16)
    return None


def wait_until_read(connection: socket.socket, within: float = 10) -> None:
    """Return once the server has read every byte sent on ``connection``: the client's
    socket has them all acknowledged and the server's holds none unread. The server logs
    nothing as it starts reading a request, and a sleep meant to outlast that was as
    short on a loaded machine as it was long on an idle one."""
    client, server = connection.getsockname()[:2], connection.getpeername()[:2]
    deadline = time.monotonic() + within
    while (_queues(client, server), _queues(server, client)) != ((0, 0), (0, 0)):
        assert time.monotonic() < deadline, f"the server left bytes of {client} unread"
        time.sleep(0.005)


# Test-only fault, loaded by the server's interpreter at start (``sitecustomize`` on
# PYTHONPATH): the gateway's body read starts half a second late, so the bad chunk has
# come and failed the body before anyone waits for it, as happens by chance when the
# handler is busy. aiohttp then raises its RequestPayloadError, not the parser's error.
BODY_READ_STARTS_LATE = """
import asyncio

import aiohttp.streams

_iter_chunked = aiohttp.streams.StreamReader.iter_chunked


async def iter_chunked(self, n):
    await asyncio.sleep(0.5)
    async for chunk in _iter_chunked(self, n):
        yield chunk


aiohttp.streams.StreamReader.iter_chunked = iter_chunked
"""


@pytest.mark.parametrize("read_starts_late", [False, True], ids=["read waiting", "read late"])
def test_a_bad_chunk_mid_body_from_a_client_still_there_is_400_request_malformed(
    tmp_path, read_starts_late
):
    """aiohttp's pure-Python parser (where its C parser is not built) fails the body's read
    with the connection open, so the client can read the answer: ``REQUEST_MALFORMED``,
    naming only the error's type, the parser's, whether the read was waiting when the
    chunk came or began after it. (The C parser stops feeding the body instead, which
    ends in ``BODY_TIMEOUT``: ``test_http_gateway``.)"""
    head = (
        "POST /v1/krypkasino:score HTTP/1.1\r\nHost: test\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    env = {"AIOHTTP_NO_EXTENSIONS": "1"}
    if read_starts_late:
        env["PYTHONPATH"] = loaded_at_start(tmp_path, BODY_READ_STARTS_LATE)
    with running(env=env) as server:
        with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as connection:
            connection.sendall(head.encode() + b'6\r\n{"stat\r\n')
            # The server is reading the body when the bad chunk comes: in the first packet
            # it would be aiohttp's own plain-text 400.
            wait_until_read(connection)
            connection.sendall(b"ZZ\r\nSECRET\r\n")
            answer = http.client.HTTPResponse(connection)
            answer.begin()
            status = json.loads(answer.read())
        [line] = server.wait_for_logs("request")
    assert answer.status == 400 and answer.getheader("Connection") == "close"
    assert status["details"][0]["reason"] == "REQUEST_MALFORMED"
    assert status["message"] == "the body could not be read (TransferEncodingError)"
    assert (line["code"], line["reason"]) == ("InvalidArgument", "REQUEST_MALFORMED")
    assert "SECRET" not in json.dumps(server.logs)


def test_a_client_gone_before_its_body_came_is_logged_with_its_peer():
    """Design section 6: the request line of a client that closed its connection in the
    middle of its body still says who it was, as every other request line does."""
    head = (
        "POST /v1/krypkasino:score HTTP/1.1\r\nHost: test\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    )
    with running() as server:
        with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as connection:
            connection.sendall(head.encode() + b'{"state":"')
            client_port = connection.getsockname()[1]
            # The server has the head, so the call has begun when the client goes.
            wait_until_read(connection)
        [line] = server.wait_for_logs("request")
    assert (line["code"], line["reason"]) == ("Canceled", "CLIENT_GONE")
    assert line.get("peer") == f"ipv4:127.0.0.1:{client_port}", line


def refuses_connections(port: int, within: float = 10) -> bool:
    """Whether new connections to ``port`` are refused before ``within`` seconds pass."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except ConnectionRefusedError:
            return True
        time.sleep(0.01)
    return False


def health_over_http(server: ServerProcess) -> dict[str, tuple[int, str]]:
    answers = {}
    for path in ("/healthz", "/readyz"):
        status, headers, value = exchange(f"{server.http_url}{path}", method="GET")
        assert headers["Cache-Control"] == "no-store"
        head = urllib.request.Request(f"{server.http_url}{path}", method="HEAD")
        try:
            with urllib.request.urlopen(head, timeout=10) as answer:
                head_status = answer.status
        except urllib.error.HTTPError as error:
            head_status = error.code
        assert head_status == status
        answers[path] = (status, value["status"])
    return answers


def test_health_answers_are_json(server):
    for path in ("/healthz", "/readyz"):
        status, headers, value = exchange(f"{server.http_url}{path}", method="GET")
        assert (status, value) == (200, {"status": "SERVING"})
        assert headers["Content-Type"] == "application/json"


def test_readyz_turns_503_when_the_drain_begins_and_healthz_stays_200():
    """The HTTP twins of gRPC's readiness and liveness, for HTTP-only load balancers."""
    with running(("--drain-delay-seconds", "3")) as server:
        serving = (200, "SERVING")
        assert health_over_http(server) == {"/healthz": serving, "/readyz": serving}
        server.process.terminate()
        server.wait_for_logs("draining")
        assert health_over_http(server) == {"/healthz": serving, "/readyz": (503, "NOT_SERVING")}
        assert server.terminate() == 0


def answer_on(connection: socket.socket, request: bytes) -> tuple[http.client.HTTPResponse, Any]:
    """The answer to ``request`` sent on ``connection``, and its JSON body."""
    connection.sendall(request)
    answer = http.client.HTTPResponse(connection)
    answer.begin()
    return answer, json.loads(answer.read())


def closed_by_server(connection: socket.socket, within: float = 5) -> bool:
    """Whether the server closes ``connection`` (end of stream) within ``within`` seconds."""
    connection.settimeout(within)
    try:
        return connection.recv(1) == b""
    except TimeoutError:
        return False


def test_answers_close_their_connection_from_the_readiness_flip_on():
    """A proxy's pooled keep-alive connections (ingress-nginx's upstream keepalive) must
    move away during the drain delay: kept open until the stop closed them, a POST nginx
    had just sent on one was lost with a 502, which nginx does not retry. So from the
    readiness flip every answer, /readyz's 503 too, says ``Connection: close`` and the
    server closes the connection, while the listener still accepts (docs/operations.md,
    "Termination")."""
    delay = 8.0
    with running(("--drain-delay-seconds", f"{delay:g}")) as server:
        game = rpc(server, "newGame", {"config": {"players": 2}, "seed": "1"})
        body = json.dumps({"state": game["state"]}).encode()
        score = (
            "POST /v1/krypkasino:score HTTP/1.1\r\nHost: test\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        readyz = b"GET /readyz HTTP/1.1\r\nHost: test\r\n\r\n"
        with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as pooled:
            before, value = answer_on(pooled, score)
            assert (before.status, value["totals"]) == (200, [0, 0])
            assert before.getheader("Connection") is None
            assert not closed_by_server(pooled, within=0.2), "kept alive while serving"
            server.process.terminate()
            server.wait_for_logs("draining")
            # The flip follows the draining line by a few awaits: asked until it shows.
            deadline = time.monotonic() + delay / 2
            while True:
                with socket.create_connection(("127.0.0.1", server.http_port)) as probe:
                    ready, value = answer_on(probe, readyz)
                    if ready.status == 503:
                        assert value == {"status": "NOT_SERVING"}
                        assert ready.getheader("Connection") == "close"
                        assert closed_by_server(probe)
                        break
                assert time.monotonic() < deadline, "/readyz stayed 200 after SIGTERM"
                time.sleep(0.02)
            # The connection opened before the signal, idle through it, takes one more call.
            during, value = answer_on(pooled, score)
            assert (during.status, value["totals"]) == (200, [0, 0])
            assert during.getheader("Connection") == "close"
            assert closed_by_server(pooled)
            assert not server.log_events("stopping"), "closed by the stop, not by the answer"
        assert server.terminate() == 0


HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n"


def idle_after_an_answer(server: ServerProcess, within: float) -> float | None:
    """How long a kept-alive connection stays open idle after an answer before the server
    closes it, or None if it is still open after ``within`` seconds."""
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as connection:
        answer, value = answer_on(connection, HEALTHZ)
        assert (answer.status, value) == (200, {"status": "SERVING"})
        assert answer.getheader("Connection") is None  # kept alive
        answered = time.monotonic()
        if not closed_by_server(connection, within):
            return None
        return time.monotonic() - answered


def test_the_keepalive_setting_closes_an_idle_connection_after_that_long():
    """--http-keepalive-seconds reaches the gateway (docs/api.md): behind a proxy whose
    idle timeout is longer than the 75 s default (Google's load balancers, Envoy) the
    operator raises it, and a short one shows it is the setting that closes."""
    with running(("--http-keepalive-seconds", "1")) as server:
        idle = idle_after_an_answer(server, within=10)
    assert idle is not None, "still open 10 s after the answer"
    assert 0.5 < idle < 5, idle


def test_by_default_an_idle_connection_is_kept_longer_than_a_short_keepalive():
    """The default (75 s) is not the 1 s above: the connection outlives it well."""
    with running() as server:
        assert idle_after_an_answer(server, within=3) is None


def test_sigterm_lets_an_http_request_in_flight_finish():
    """Design section 6: stop accepting, finish what is in flight (a body still arriving too)."""
    with running() as server:
        game = rpc(server, "newGame", {"config": {"players": 2}, "seed": "1"})
        body = json.dumps({"state": game["state"]}).encode()
        with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as connection:
            head = (
                "POST /v1/krypkasino:score HTTP/1.1\r\nHost: test\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            )
            connection.sendall(head.encode() + body[:10])
            # The server has the head: the call is in flight before the signal is handled.
            wait_until_read(connection)
            server.process.terminate()
            server.wait_for_logs("draining")
            assert refuses_connections(server.http_port), "still accepting while draining"
            connection.sendall(body[10:])
            answer = http.client.HTTPResponse(connection)
            answer.begin()
            assert answer.status == 200
            assert answer.getheader("Connection") == "close"  # reconnect to a replica serving
            assert json.loads(answer.read())["totals"] == [0, 0]
        assert server.terminate() == 0
