"""What the HTTP gateway judges of a request's head before its path (docs/api.md, "HTTP/JSON"
and "Errors"), on raw sockets against a real ``cardrules serve``.

A request whose framing a proxy in front may read otherwise (RFC 9112, 6.1 and 6.3) is
refused ``REQUEST_MALFORMED`` and its connection closed on every path, not only on the
routes that read a body; a request line of another version than HTTP/1.0 or 1.1 is
answered ``HTTP/1.1 505``; and ``Expect: 100-continue`` gets its 100 only when the body
will be read (RFC 9110, 10.1.1), every other answer coming at once (an HTTP review).
"""

from __future__ import annotations

import http.client
import json
import socket
from dataclasses import dataclass
from typing import Any

import pytest

from service.openapi import COMMITTED
from tests.service.http_helpers import refusal
from tests.service.server_process import ServerProcess

_BODY = b'{"config": {"players": 2}}'


@dataclass(frozen=True)
class Answer:
    status_line: bytes
    headers: http.client.HTTPMessage
    body: Any  # the JSON body, None if empty


def _read_answer(stream: Any) -> Answer | None:
    """The next answer on ``stream``, or None at its end."""
    status_line = stream.readline()
    if not status_line:
        return None
    headers = http.client.parse_headers(stream)
    body = stream.read(int(headers.get("Content-Length", "0")))
    return Answer(status_line.rstrip(b"\r\n"), headers, json.loads(body) if body else None)


def answers_until_closed(server: ServerProcess, sent: bytes) -> list[Answer]:
    """Every answer to ``sent`` on one connection, read until the server closes it (one it
    leaves open fails the read at 10 s)."""
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as connection:
        connection.sendall(sent)
        stream = connection.makefile("rb")
        found = []
        while (answer := _read_answer(stream)) is not None:
            found.append(answer)
    return found


def head(request_line: str, request_id: str, extra: str = "") -> bytes:
    return f"{request_line}\r\nHost: x\r\nX-Request-Id: {request_id}\r\n{extra}\r\n".encode()


def chunked(body: bytes) -> bytes:
    return f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"


_TYPE = "Content-Type: application/json\r\n"
# Each framing as (HTTP version, header lines, body as sent).
FRAMINGS = {
    "identity_before_chunked": ("1.1", "Transfer-Encoding: identity, chunked\r\n", chunked(_BODY)),
    "gzip_before_chunked": ("1.1", "Transfer-Encoding: gzip, chunked\r\n", chunked(_BODY)),
    "empty_before_a_length": (
        "1.1",
        f"Transfer-Encoding: \r\nContent-Length: {len(_BODY)}\r\n",
        _BODY,
    ),
    "chunked_in_http_1_0": (
        "1.0",
        "Connection: keep-alive\r\nTransfer-Encoding: chunked\r\n",
        chunked(_BODY),
    ),
}
# Every kind of answer a path gives: a health check, the document, an unknown path, a
# method the route does not take, a preflight, and a call.
TARGETS = {
    "healthz": "GET /healthz",
    "openapi_posted": "POST /openapi.json",
    "unknown_path": "POST /nope",
    "method_not_allowed": "GET /v1/krypkasino:newGame",
    "options": "OPTIONS /v1/krypkasino:newGame",
    "call": "POST /v1/krypkasino:score",
}
BEHIND = head("GET /readyz HTTP/1.1", "behind")


@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize("target", TARGETS)
def test_bad_framing_is_refused_and_closes_the_connection_on_every_path(server, target, framing):
    """RFC 9112, 6.3 (and 6.1: HTTP/1.0 has no Transfer-Encoding). Only the routes that read
    a body refused these; every other path answered as usual and kept the connection, so
    that the request pipelined behind the body, which a proxy in front may have framed
    otherwise, was served too."""
    version, lines, body = FRAMINGS[framing]
    request_id = f"framing-{target}-{framing}"
    sent = head(f"{TARGETS[target]} HTTP/{version}", request_id, _TYPE + lines) + body
    (answer,) = answers_until_closed(server, sent + BEHIND)
    assert answer.status_line == f"HTTP/{version} 400 Bad Request".encode()
    assert answer.headers["X-Request-Id"] == request_id
    # HTTP/1.0 closes unless told otherwise; 1.1 says so.
    assert answer.headers.get("Connection") == ("close" if version == "1.1" else None)
    assert refusal(answer.body)[:2] == (3, "REQUEST_MALFORMED")
    (line,) = server.request_lines(request_id)
    assert (line["code"], line["reason"]) == ("InvalidArgument", "REQUEST_MALFORMED")


def test_chunked_alone_is_still_served_off_the_routes(server):
    """The check refuses other framings only: a chunked body beside /healthz is read and
    dropped, and the request behind it served."""
    sent = head("GET /healthz HTTP/1.1", "chunked-healthz", "Transfer-Encoding: chunked\r\n")
    last = head("GET /readyz HTTP/1.1", "behind", "Connection: close\r\n")
    answers = answers_until_closed(server, sent + chunked(_BODY) + last)
    assert [(a.status_line, a.headers["X-Request-Id"]) for a in answers] == [
        (b"HTTP/1.1 200 OK", "chunked-healthz"),
        (b"HTTP/1.1 200 OK", "behind"),
    ]


@pytest.mark.parametrize("version", ["2.0", "0.9"])
@pytest.mark.parametrize(
    ("request_line", "logged"),
    [
        ("GET /healthz", "GET /healthz"),
        ("POST /nope", "POST /nope"),
        ("POST /v1/krypkasino:score", "cardrules.krypkasino.v1.KrypkasinoService/Score"),
    ],
    ids=["healthz", "unknown_path", "call"],
)
def test_another_http_version_is_answered_505_as_http_1_1_and_closed(
    server, version, request_line, logged
):
    """aiohttp's parser takes HTTP/2.0 and HTTP/0.9 request lines, and the answer echoed
    the version (``HTTP/2.0 200 OK``). RFC 9112, 2.3: the answer names the server's
    version; RFC 9110, 15.6.6: 505 for a major version it does not support."""
    request_id = f"version-{version}-{logged}"
    sent = head(f"{request_line} HTTP/{version}", request_id, _TYPE + "Content-Length: 2\r\n")
    # Nothing pipelined behind: aiohttp's parser takes these versions to close, and would
    # refuse what follows in the same write itself (docs/api.md, "Pipelining").
    (answer,) = answers_until_closed(server, sent + b"{}")
    assert answer.status_line == b"HTTP/1.1 505 HTTP Version Not Supported"
    assert answer.headers["Connection"] == "close"
    assert (answer.headers["X-Request-Id"], answer.headers["Server"]) == (request_id, "cardrules")
    assert refusal(answer.body)[:2] == (12, "HTTP_VERSION_NOT_SUPPORTED")
    assert f"HTTP/{version}" in answer.body["message"]
    (line,) = server.request_lines(request_id)
    assert (line["method"], line["code"]) == (logged, "Unimplemented")
    assert line["reason"] == "HTTP_VERSION_NOT_SUPPORTED"


@pytest.mark.parametrize(
    ("request_line", "extra", "status", "reason"),
    [
        ("GET /openapi.json HTTP/2.0", "", 505, "HTTP_VERSION_NOT_SUPPORTED"),
        (
            "GET /openapi.json HTTP/1.1",
            "Transfer-Encoding: gzip, chunked\r\n",
            400,
            "REQUEST_MALFORMED",
        ),
    ],
    ids=["version", "framing"],
)
def test_the_documents_own_get_lists_the_refusals_every_path_can_meet(
    server, request_line, extra, status, reason
):
    """The gateway judges the version and framing of every request before its path's
    answer, the document's GET too, which listed 200 and 405 alone (a review)."""
    sent = head(request_line, f"document-{status}", extra)
    if extra:
        sent += b"0\r\n\r\n"  # an empty chunked body
    (answer,) = answers_until_closed(server, sent)
    assert int(answer.status_line.split()[1]) == status
    assert refusal(answer.body)[1] == reason
    document = json.loads(COMMITTED.read_text(encoding="utf-8"))
    listed = document["paths"]["/openapi.json"]["get"]["responses"][str(status)]
    name = listed["$ref"].rsplit("/", 1)[1]
    assert f"`{reason}`" in document["components"]["responses"][name]["description"]


def test_http_1_0_is_still_served(server):
    (answer,) = answers_until_closed(server, head("GET /healthz HTTP/1.0", "version-1.0"))
    assert answer.status_line == b"HTTP/1.0 200 OK"
    assert answer.body == {"status": "SERVING"}


# Each head answered at once, for a body of 20 bytes asked with Expect: 100-continue:
# (request line, header lines, status, reason).
DECIDED_BY_THE_HEAD = {
    "unknown_path": ("POST /nope", _TYPE, 404, "NOT_FOUND_ROUTE"),
    "method_not_allowed": ("PUT /v1/krypkasino:newGame", _TYPE, 405, "METHOD_NOT_ALLOWED"),
    "healthz": ("GET /healthz", "", 200, None),
    "brotli": (
        "POST /v1/krypkasino:newGame",
        _TYPE + "Content-Encoding: br\r\n",
        415,
        "UNSUPPORTED_MEDIA_TYPE",
    ),
    "text": (
        "POST /v1/krypkasino:newGame",
        "Content-Type: text/plain\r\n",
        415,
        "UNSUPPORTED_MEDIA_TYPE",
    ),
    "no_type": ("POST /v1/krypkasino:newGame", "", 415, "UNSUPPORTED_MEDIA_TYPE"),
    "bad_timeout": (
        "POST /v1/krypkasino:newGame",
        _TYPE + "Grpc-Timeout: soon\r\n",
        400,
        "TIMEOUT_INVALID",
    ),
    "bad_framing": (
        "POST /v1/krypkasino:newGame",
        _TYPE + "Transfer-Encoding: identity, chunked\r\n",
        400,
        "REQUEST_MALFORMED",
    ),
}


@pytest.mark.parametrize("case", DECIDED_BY_THE_HEAD)
def test_an_answer_the_head_decides_comes_without_100_continue_and_closes(server, case):
    """RFC 9110, 10.1.1: the client waits for 100 Continue before it sends its body; a 100
    for a request whose answer its head already decides had it send the body for nothing.
    The connection is closed after the answer: it would take the body it never asked for
    as the next request."""
    request_line, lines, status, reason = DECIDED_BY_THE_HEAD[case]
    framing = "" if "Transfer-Encoding" in lines else "Content-Length: 20\r\n"
    request_id = f"expect-{case}"
    sent = head(
        f"{request_line} HTTP/1.1", request_id, lines + framing + "Expect: 100-continue\r\n"
    )
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as connection:
        connection.sendall(sent)
        # Read as it comes: http.client would skip a 100 Continue.
        answer = _read_answer(connection.makefile("rb"))
    assert answer is not None
    assert answer.status_line.split(b" ")[1] == str(status).encode(), answer.status_line
    assert (answer.headers["X-Request-Id"], answer.headers["Connection"]) == (request_id, "close")
    if reason is None:
        assert answer.body == {"status": "SERVING"}
    else:
        assert refusal(answer.body)[1] == reason


@pytest.mark.parametrize("framing", ["Content-Length: 26", "Transfer-Encoding: chunked"])
def test_a_call_that_reads_its_body_gets_100_continue_and_is_served(server, framing):
    body = _BODY if framing.startswith("Content-Length") else chunked(_BODY)
    sent = head(
        "POST /v1/krypkasino:newGame HTTP/1.1",
        f"expect-served-{framing[:7]}",
        f"{_TYPE}{framing}\r\nExpect: 100-continue\r\nConnection: close\r\n",
    )
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as connection:
        connection.sendall(sent)
        stream = connection.makefile("rb")
        assert stream.readline() == b"HTTP/1.1 100 Continue\r\n"
        assert stream.readline() == b"\r\n"
        connection.sendall(body)
        answer = _read_answer(stream)
    assert answer is not None and answer.status_line == b"HTTP/1.1 200 OK"
    assert len(answer.body["seatTokens"]) == 2
