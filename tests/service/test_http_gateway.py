"""The HTTP gateway in process, over real HTTP on loopback (design sections 3 and 5).

Routes derived from the annotations (a new annotated RPC is served with no
gateway change; unservable annotations fail at start-up), the proto3 JSON
parsing with the offending field named, the HTTP status of every code, and
CORS. The server-level behaviour is in ``test_http_server.py``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import itertools
import json
import re
import socket
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import structlog.testing
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from google.api import annotations_pb2
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from google.rpc import code_pb2

from service.calls import CallInfo, CallRunner
from service.config import ServerConfig
from service.descriptors import snake_case
from service.errors import (
    HTTP_STATUS,
    ServiceError,
    body_past_deadline,
    deadline_exceeded,
    failed_precondition,
    invalid_argument,
    permission_denied,
)
from service.http_cors import EXPOSED_HEADERS, CorsPolicy, parse_origins
from service.http_gateway import (
    JSON_BODY_FACTOR,
    SERVER_STOPPING,
    HttpGateway,
    RouteConflictError,
    http_status,
    start_http,
)
from service.http_json import parse_request
from service.http_routes import UnsupportedRouteError, routes
from service.openapi import COMMITTED
from service.server import _start_gateway, build_api
from service.tokens import KEY_ID_BYTES, KeyRing
from tests.service.grpc_helpers import game_state, key_id, seal
from tests.service.http_helpers import (
    ORIGIN,
    krypkasino_gateway,
    preflight_headers,
    refusal,
    run,
)
from tests.service.server_process import TEST_KEY

# -- routes from the annotations ------------------------------------------------------


# What parse_origins says of anything else (the setting is named by service.config).
NOT_AN_ORIGIN = r"^must be an origin like https://example\.com\[:port\], not '"


def test_the_routes_are_those_of_the_annotations_in_design_section_3():
    gateway = krypkasino_gateway()
    assert [(r.http_method, r.path, r.method, r.handler_name) for r in gateway.routes] == [
        ("POST", "/v1/krypkasino:newGame", "NewGame", "new_game"),
        ("POST", "/v1/krypkasino:legalMoves", "LegalMoves", "legal_moves"),
        ("POST", "/v1/krypkasino:play", "Play", "play"),
        ("POST", "/v1/krypkasino:score", "Score", "score"),
        ("POST", "/v1/krypkasino:getView", "GetView", "get_view"),
    ]
    assert {r.service for r in gateway.routes} == {"cardrules.krypkasino.v1.KrypkasinoService"}
    by_method = {r.method: r for r in gateway.routes}
    assert by_method["Play"].request_class is pb.PlayRequest
    assert by_method["Play"].response_class is pb.PlayResponse


@pytest.mark.parametrize(
    ("rpc", "handler"),
    [
        ("NewGame", "new_game"),
        ("GetView", "get_view"),
        ("LegalMoves", "legal_moves"),
        ("Play", "play"),
        ("GetHTTPStatus", "get_http_status"),
        ("V2Thing", "v2_thing"),
    ],
)
def test_snake_case_names_the_api_method_of_an_rpc(rpc, handler):
    assert snake_case(rpc) == handler


def echo_service(
    path: str = "/v1/echo:pingPong",
    verb: str = "post",
    body: str = "*",
    *,
    response_body: str = "",
    also: tuple[tuple[str, str], ...] = (),
) -> ServiceDescriptor:
    """A service that exists nowhere in the code base, annotated like ours; ``verb``
    ``custom`` makes a custom pattern, ``also`` additional (verb, path) bindings."""
    file = descriptor_pb2.FileDescriptorProto(
        name=f"test/echo_{abs(hash((path, verb, body, response_body, also)))}.proto",
        package="test.v1",
        syntax="proto3",
    )
    request = file.message_type.add(name="PingRequest")
    request.field.add(name="text_value", number=1, type=9, label=1, json_name="textValue")
    request.field.add(name="times", number=2, type=3, label=1, json_name="times")
    reply = file.message_type.add(name="PingResponse")
    reply.field.add(name="echo", number=1, type=9, label=3, json_name="echo")
    method = file.service.add(name="EchoService").method.add(
        name="PingPong", input_type=".test.v1.PingRequest", output_type=".test.v1.PingResponse"
    )
    http: Any = annotations_pb2.http  # the stubs do not type it as an extension
    rule = method.options.Extensions[http]
    if verb == "custom":
        rule.custom.kind, rule.custom.path = "HEAD", path
    else:
        setattr(rule, verb, path)
    rule.body = body
    rule.response_body = response_body
    for other_verb, other_path in also:
        binding = rule.additional_bindings.add(body="*")
        setattr(binding, other_verb, other_path)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return pool.FindServiceByName("test.v1.EchoService")


class EchoApi:
    def __init__(self, service: ServiceDescriptor) -> None:
        method = service.methods_by_name["PingPong"]
        self.reply_class = GetMessageClass(method.output_type)

    def ping_pong(self, request: Any, info: CallInfo) -> Message:
        if request.text_value == "refuse":
            raise invalid_argument("ECHO_REFUSED", "no", "text_value")
        return self.reply_class(echo=[request.text_value] * request.times)


def test_a_newly_annotated_rpc_is_served_with_no_change_to_the_gateway():
    service = echo_service()
    gateway = HttpGateway(
        EchoApi(service),
        CallRunner(None),
        [service],
        max_request_bytes=1024,
        cors=CorsPolicy(()),
        openapi=b"{}",
    )

    async def scenario(session: aiohttp.ClientSession, url: str) -> None:
        async with session.post(
            f"{url}/v1/echo:pingPong", json={"textValue": "hi", "times": "2"}
        ) as r:
            assert r.status == 200
            assert await r.json() == {"echo": ["hi", "hi"]}
        async with session.post(f"{url}/v1/echo:pingPong", json={"text_value": "refuse"}) as r:
            assert r.status == 400
            assert (await r.json())["details"][0]["reason"] == "ECHO_REFUSED"

    run(gateway, scenario)


def test_a_read_renews_a_state_token_under_an_older_key_in_json_as_over_grpc():
    """docs/api.md, "Tokens across a key rotation": the renewed state is ``state``, base64."""
    new = KeyRing.generate_key_text()
    old_api = build_api(ServerConfig(), KeyRing.parse(TEST_KEY), None)
    game = old_api.new_game(pb.NewGameRequest(config=pb.GameConfig(players=2)), CallInfo())
    old_state = base64.b64encode(game.state).decode()

    async def scenario(session: aiohttp.ClientSession, url: str) -> None:
        async with session.post(f"{url}/v1/krypkasino:score", json={"state": old_state}) as r:
            assert r.status == 200
            renewed = base64.b64decode((await r.json())["state"])
        assert renewed[1 : 1 + KEY_ID_BYTES] == key_id(new)
        current = {"state": base64.b64encode(renewed).decode()}
        async with session.post(f"{url}/v1/krypkasino:getView", json=current) as r:
            answer = await r.json()
        assert "state" not in answer
        assert answer["view"]["stateId"] == game.view.state_id  # the same state, resealed

    run(krypkasino_gateway(keys=f"{new},{TEST_KEY}"), scenario)


def test_a_newer_releases_token_is_503_over_http_as_it_is_unavailable_over_grpc():
    """docs/api.md, "Upgrades": what HTTP clients and proxies retry, and when (urllib3's
    Retry, for one, waits for Retry-After on a 503); no other refusal names a time."""
    api = build_api(ServerConfig(), KeyRing.parse(TEST_KEY), None)
    game = api.new_game(pb.NewGameRequest(config=pb.GameConfig(players=2)), CallInfo())
    payload = game_state(game.state, TEST_KEY).SerializeToString()
    newer = {"state": base64.b64encode(seal(payload, TEST_KEY, version=2)).decode()}

    async def scenario(session: aiohttp.ClientSession, url: str) -> None:
        async with session.post(f"{url}/v1/krypkasino:getView", json=newer) as r:
            assert r.status == 503
            assert r.headers["Retry-After"] == "1"
            answer = refusal(await r.json())
        assert answer == (code_pb2.UNAVAILABLE, "TOKEN_FROM_NEWER_RELEASE", {"version": "2"}, {})
        async with session.post(f"{url}/v1/krypkasino:getView", json={"state": "AAAA"}) as r:
            assert r.status == 400
            assert "Retry-After" not in r.headers

    run(krypkasino_gateway(), scenario)


def test_an_annotated_rpc_without_an_api_method_fails_at_start_up():
    with pytest.raises(RouteConflictError, match="has no method ping_pong"):
        HttpGateway(
            object(),
            CallRunner(None),
            [echo_service()],
            max_request_bytes=1024,
            cors=CorsPolicy(()),
            openapi=b"{}",
        )


@pytest.mark.parametrize(
    "services",
    [
        pytest.param(lambda: [echo_service()] * 2, id="one_path_twice"),
        pytest.param(lambda: [echo_service("/healthz")], id="a_path_the_gateway_serves"),
    ],
)
def test_two_routes_on_one_method_and_path_fail_at_start_up(services):
    """No annotation silently takes the place of another, or of ``/healthz``."""
    bound = services()
    with pytest.raises(RouteConflictError, match=r"^POST /\S+ is bound twice$"):
        HttpGateway(
            EchoApi(bound[0]),
            CallRunner(None),
            bound,
            max_request_bytes=1024,
            cors=CorsPolicy(()),
            openapi=b"{}",
        )


@pytest.mark.parametrize(
    ("path", "verb", "body", "complaint"),
    [
        ("/v1/echo/{text_value}", "post", "*", "literal paths"),
        ("/v1/echo:ping", "get", "", 'body "\\*"'),
        ("/v1/echo:ping", "post", "text_value", 'body "\\*"'),
        ("v1/echo:ping", "post", "*", "literal paths"),
        ("/v1/echo/*", "post", "*", "literal paths"),
        ("/v1/echo:ping", "get", "*", 'body "\\*"'),
        ("/v1/echo:ping", "custom", "*", "pattern 'custom' is not supported"),
    ],
)
def test_annotations_the_gateway_cannot_serve_fail_at_start_up(path, verb, body, complaint):
    with pytest.raises(UnsupportedRouteError, match=complaint):
        list(routes(echo_service(path, verb, body)))


def test_an_unsupported_binding_is_named_by_its_method_verb_and_path():
    """The one refused among a method's bindings, which only the refusal says."""
    refused = r"^test\.v1\.EchoService\.PingPong \(PUT /v1/echo/\{x\}\): only literal paths"
    with pytest.raises(UnsupportedRouteError, match=refused):
        list(routes(echo_service(also=(("put", "/v1/echo/{x}"),))))


def test_a_response_body_annotation_fails_at_start_up():
    with pytest.raises(UnsupportedRouteError, match="response_body is not supported"):
        list(routes(echo_service(response_body="echo")))


def test_additional_bindings_are_routes_too_in_declaration_order():
    """docs/api.md, "HTTP/JSON": every literal path with ``body: "*"`` is served, in any
    verb that carries a body."""
    also = (("put", "/v1/echo:put"), ("delete", "/v1/echo:delete"), ("patch", "/v1/echo:patch"))
    service = echo_service(also=also)
    assert [(r.http_method, r.path, r.handler_name) for r in routes(service)] == [
        ("POST", "/v1/echo:pingPong", "ping_pong"),
        ("PUT", "/v1/echo:put", "ping_pong"),
        ("DELETE", "/v1/echo:delete", "ping_pong"),
        ("PATCH", "/v1/echo:patch", "ping_pong"),
    ]


# -- proto3 JSON in ---------------------------------------------------------------------


def violation(error: ServiceError) -> str:
    assert error.reason == "JSON_INVALID"
    (only,) = error.violations
    return only.field


def test_proto3_json_accepts_camel_case_proto_names_enum_numbers_and_int64_numbers():
    camel = parse_request(
        b'{"config": {"players": 4, "teams": "TEAM_MODE_PAIRS", "matchDeals": 2}, "seed": "7"}',
        pb.NewGameRequest,
    )
    snake = parse_request(
        b'{"config": {"players": 4, "teams": 2, "match_deals": 2}, "seed": 7}', pb.NewGameRequest
    )
    assert camel == snake
    assert camel.config.teams == pb.TEAM_MODE_PAIRS and camel.seed == 7
    assert camel.config.HasField("match_deals") and not camel.config.HasField("target_score")
    assert parse_request(b"", pb.ScoreRequest) == pb.ScoreRequest()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"config": {"players": 2, "bogus": 1}}', "config.bogus"),
        (b'{"cofnig": {}}', "cofnig"),
        (b'{"config": {"rules": {"nordicScoring": "yes"}}}', "config.rules.nordic_scoring"),
        (
            b'{"decks": [{"cards": []}, {"cards": [{"rank": "RANK_ACE"}, {"rank": "X"}]}]}',
            "decks[1].cards[1].rank",
        ),
        (  # a valid list before the refused field: the field is named, not the list
            b'{"decks": [{"cards": [{"rank": "RANK_ACE", "suit": "SUIT_SPADES"}]}],'
            b' "draw": {"cards": [null]}}',
            "draw.cards[0]",
        ),
        (b'{"seed": "-1"}', "seed"),
        (b'{"seed": "seven"}', "seed"),
        (b'{"config": {"players": 2.5}}', "config.players"),
        (b'{"config": {"players": 2, "players": 3}}', "config.players"),
        (b'{"config": "two players"}', "config"),
    ],
)
def test_a_body_that_is_not_the_request_names_the_offending_field(body, field):
    with pytest.raises(ServiceError) as refused:
        parse_request(body, pb.NewGameRequest)
    assert violation(refused.value) == field
    assert refused.value.code.name == "INVALID_ARGUMENT"


@pytest.mark.parametrize("body", [b"{", b"[1, 2]", b'"state"', b"\xff\xfe{}", b"null"])
def test_a_body_that_is_no_json_object_is_refused_for_the_whole_body(body):
    with pytest.raises(ServiceError) as refused:
        parse_request(body, pb.ScoreRequest)
    assert violation(refused.value) == ""


# -- HTTP statuses ------------------------------------------------------------------------


def test_refusals_take_the_standard_http_mapping_of_their_code():
    assert http_status(invalid_argument("STATE_MISSING", "x", "state")) == 400
    assert http_status(failed_precondition("NOT_YOUR_TURN", "x", rule="K4.4")) == 400
    assert http_status(permission_denied("SEAT_TOKEN_INVALID", "x")) == 403


# -- CORS -----------------------------------------------------------------------------------


def test_origins_parse_from_a_comma_separated_list():
    assert parse_origins(" https://a.example, http://b.example:8000/ ,") == (
        "https://a.example",
        "http://b.example:8000",
    )
    assert parse_origins("*") == ("*",)
    assert parse_origins("") == ()
    assert parse_origins(" \n") == ()


@pytest.mark.parametrize("port", ["0", "65536", "99999"])
def test_an_origin_whose_port_is_no_tcp_port_is_refused(port):
    """A port is 1 to 65535: no browser sends another, so ``--cors-origins`` naming one is
    a slip, refused (the server does not start: exit 2), not an origin that never
    matches. A mutation review found the upper bound unpinned (65536 was taken)."""
    with pytest.raises(ValueError, match=NOT_AN_ORIGIN + f"https://a\\.example:{port}'$"):
        parse_origins(f"https://a.example:{port}")


def test_an_origin_may_name_any_tcp_port():
    """The bounds of the range, 1 and 65535, are ports an origin may name (kept as given)."""
    assert parse_origins("https://a.example:65535, http://b.example:1") == (
        "https://a.example:65535",
        "http://b.example:1",
    )


def test_origins_parse_separated_by_white_space_too():
    """As ``CARDRULES_STATE_KEYS`` are: ``"http://a http://b"`` was refused whole, quoted as
    one origin."""
    assert parse_origins("https://a.example http://b.example:8000/\thttps://C.example\n") == (
        "https://a.example",
        "http://b.example:8000",
        "https://c.example",
    )
    assert parse_origins("https://a.example ,\n https://b.example") == (
        "https://a.example",
        "https://b.example",
    )
    with pytest.raises(ValueError, match=NOT_AN_ORIGIN + "b.example'$"):
        parse_origins("https://a.example b.example")
    for bad in ("a.example", "ftp://a.example", "https://a.example/path", "https://"):
        with pytest.raises(ValueError, match=NOT_AN_ORIGIN):
            parse_origins(bad)


def test_cors_answers_allowed_origins_only():
    async def scenario(session: aiohttp.ClientSession, url: str) -> None:
        score = f"{url}/v1/krypkasino:score"
        async with session.options(score, headers=preflight_headers(ORIGIN)) as r:
            assert r.status == 204 and r.headers["Cache-Control"] == "no-store"
            assert r.headers["Access-Control-Allow-Origin"] == ORIGIN
            assert r.headers["Access-Control-Allow-Methods"] == "POST"
            assert "Content-Type" in r.headers["Access-Control-Allow-Headers"]
            assert r.headers["Vary"] == "Origin"
        async with session.options(score, headers=preflight_headers("https://evil.example")) as r:
            assert r.status == 204
            assert "Access-Control-Allow-Origin" not in r.headers
        async with session.post(score, json={}, headers={"Origin": ORIGIN}) as r:
            assert r.status == 400  # a refusal is still readable by the allowed page
            assert r.headers["Access-Control-Allow-Origin"] == ORIGIN
            assert r.headers["Access-Control-Expose-Headers"] == (
                "X-Request-Id, Retry-After, Allow, Accept-Encoding"
            )
        async with session.post(score, json={}, headers={"Origin": "https://evil.example"}) as r:
            assert "Access-Control-Allow-Origin" not in r.headers
            assert r.headers["Vary"] == "Origin"

    run(krypkasino_gateway(cors=(ORIGIN,)), scenario)


def test_no_cors_headers_without_configured_origins():
    async def scenario(session: aiohttp.ClientSession, url: str) -> None:
        score = f"{url}/v1/krypkasino:score"
        async with session.options(score, headers=preflight_headers(ORIGIN)) as r:
            assert r.status == 204 and r.headers["Allow"] == "POST, OPTIONS"
            assert not [h for h in r.headers if h.lower().startswith("access-control-")]
        async with session.post(score, json={}, headers={"Origin": ORIGIN}) as r:
            assert not [h for h in r.headers if h.lower().startswith("access-control-")]
            assert "Vary" not in r.headers

    run(krypkasino_gateway(), scenario)


def test_any_origin_with_a_star():
    async def scenario(session: aiohttp.ClientSession, url: str) -> None:
        async with session.get(f"{url}/openapi.json", headers={"Origin": ORIGIN}) as r:
            assert r.status == 200 and r.headers["Access-Control-Allow-Origin"] == "*"
            assert json.loads(await r.read()) == {"openapi": "3.1.0"}

    run(krypkasino_gateway(cors=("*",)), scenario)


def test_a_preflight_allows_the_documented_headers_and_never_credentials():
    """docs/api.md, "CORS": ``Accept``, ``Accept-Language`` and ``Content-Language`` with
    any value (Fetch safelists only some: ``Accept: application/json; profile="..."``
    fails a preflight that does not allow it), W3C ``baggage``, ``Content-Encoding`` (a
    page's gzip body), ``Content-Type``, ``Grpc-Timeout``, ``X-Request-Id`` and W3C trace
    context's ``traceparent`` and ``tracestate`` are allowed headers, and nothing uses
    cookies, so credentials are never allowed. Browsers keep a granted preflight 600 s
    (``Access-Control-Max-Age``; docs/api.md, "Upgrades": what a rollback must mind); a
    mutation review found the value unpinned."""

    async def scenario(session: aiohttp.ClientSession, url: str) -> None:
        score = f"{url}/v1/krypkasino:score"
        headers = {**preflight_headers(ORIGIN), "Access-Control-Request-Headers": "x-request-id"}
        async with session.options(score, headers=headers) as r:
            assert r.headers["Access-Control-Allow-Origin"] == ORIGIN
            allowed = r.headers["Access-Control-Allow-Headers"].lower().split(", ")
            assert allowed == [
                "accept",
                "accept-language",
                "baggage",
                "content-encoding",
                "content-language",
                "content-type",
                "grpc-timeout",
                "traceparent",
                "tracestate",
                "x-request-id",
            ]
            assert r.headers["Access-Control-Max-Age"] == "600"
            assert "Access-Control-Allow-Credentials" not in r.headers
        async with session.post(score, json={}, headers={"Origin": ORIGIN}) as r:
            assert r.headers["Access-Control-Allow-Origin"] == ORIGIN
            assert "Access-Control-Allow-Credentials" not in r.headers

    async def under_a_star(session: aiohttp.ClientSession, url: str) -> None:
        score = f"{url}/v1/krypkasino:score"
        async with session.post(score, json={}, headers={"Origin": ORIGIN}) as r:
            assert r.headers["Access-Control-Allow-Origin"] == "*"
            assert "Access-Control-Allow-Credentials" not in r.headers

    run(krypkasino_gateway(cors=(ORIGIN,)), scenario)
    run(krypkasino_gateway(cors=("*",)), under_a_star)


def test_a_preflight_of_a_mistyped_path_lets_the_page_read_the_404():
    """A browser shows its page only a CORS failure for a refused preflight: an allowed
    origin's preflight of a path no route has is answered, and the POST that follows
    gets a 404 the page can read, naming the path a slip away. Other origins' preflights
    there stay a 404."""

    async def scenario(session: aiohttp.ClientSession, url: str) -> None:
        slip = f"{url}/v1/krypkasino:Score"
        async with session.options(slip, headers=preflight_headers(ORIGIN)) as r:
            assert r.status == 204
            assert r.headers["Access-Control-Allow-Origin"] == ORIGIN
            assert r.headers["Access-Control-Allow-Methods"] == "POST"
            # As every answer (docs/api.md), the preflight of a path no route has too.
            assert r.headers["Cache-Control"] == "no-store" and r.headers["X-Request-Id"]
        async with session.post(slip, json={}, headers={"Origin": ORIGIN}) as r:
            assert r.status == 404 and r.headers["Access-Control-Allow-Origin"] == ORIGIN
            body = json.loads(await r.read())
            assert body["message"].endswith("did you mean /v1/krypkasino:score?")
        async with session.options(slip, headers=preflight_headers("https://evil.example")) as r:
            assert r.status == 404 and "Access-Control-Allow-Methods" not in r.headers

    async def without_cors(session: aiohttp.ClientSession, url: str) -> None:
        slip = f"{url}/v1/krypkasino:Score"
        async with session.options(slip, headers=preflight_headers(ORIGIN)) as r:
            assert r.status == 404

    async def asterisk(session: aiohttp.ClientSession, url: str) -> None:
        """``OPTIONS *`` asks about the server, no path: still the 404 api.md names."""
        head, _ = await raw_exchange(
            url,
            f"OPTIONS * HTTP/1.1\r\nHost: test\r\nOrigin: {ORIGIN}\r\n"
            "Access-Control-Request-Method: POST\r\n\r\n".encode(),
        )
        assert head.startswith(b"HTTP/1.1 404 ")

    run(krypkasino_gateway(cors=(ORIGIN,)), scenario)
    run(krypkasino_gateway(), without_cors)
    run(krypkasino_gateway(cors=(ORIGIN,)), asterisk)


def test_a_preflight_of_the_openapi_document_allows_get():
    """A page fetching ``/openapi.json`` with a header that needs a preflight is allowed its
    ``GET``: the preflight names that path's methods, not the calls' ``POST``."""

    async def scenario(session: aiohttp.ClientSession, url: str) -> None:
        async with session.options(
            f"{url}/openapi.json", headers=preflight_headers(ORIGIN, "GET")
        ) as r:
            assert r.status == 204
            assert r.headers["Access-Control-Allow-Origin"] == ORIGIN
            assert "GET" in r.headers["Access-Control-Allow-Methods"].split(", ")
        headers = {"Origin": ORIGIN, "X-Request-Id": "page-1"}
        async with session.get(f"{url}/openapi.json", headers=headers) as r:
            assert r.status == 200 and r.headers["Access-Control-Allow-Origin"] == ORIGIN

    run(krypkasino_gateway(cors=(ORIGIN,)), scenario)


def test_an_allowed_origin_may_preflight_any_method_and_read_the_405_or_404_it_gets():
    """A page's ``GET`` of ``:getView`` with a ``Content-Type`` (or ``PUT`` with a JSON
    body) is preflighted: refused, the page saw only "blocked by CORS policy" where a simple
    ``GET`` reads the 405. Allowing a method is not serving it: the request that follows
    gets its 405 (404 on a path no route has), with ``Allow`` exposed to the page."""

    async def scenario(session: aiohttp.ClientSession, url: str, allowed: str) -> None:
        view = f"{url}/v1/krypkasino:getView"
        asked = {
            "Origin": ORIGIN,
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "content-type,x-request-id",
        }
        async with session.options(view, headers=asked) as r:
            assert r.status == 204 and r.headers["Access-Control-Allow-Origin"] == allowed
            assert r.headers["Access-Control-Allow-Methods"] == "POST, GET"
            assert r.headers["Allow"] == "POST, OPTIONS"  # what the path serves
        headers = {"Origin": ORIGIN, "Content-Type": "application/json", "X-Request-Id": "p-1"}
        async with session.get(view, headers=headers) as r:
            assert r.status == 405 and r.headers["Access-Control-Allow-Origin"] == allowed
            assert "Allow" in r.headers["Access-Control-Expose-Headers"].split(", ")
            assert r.headers["Allow"] == "POST, OPTIONS"
            assert refusal(json.loads(await r.read()))[1] == "METHOD_NOT_ALLOWED"
        for path, method, status in (
            ("/v1/krypkasino:score", "PUT", 405),
            ("/v1/krypkasino:score", "DELETE", 405),
            ("/healthz", "POST", 405),
            ("/v1/krypkasino:Score", "PUT", 404),
        ):
            async with session.options(
                f"{url}{path}", headers=preflight_headers(ORIGIN, method)
            ) as r:
                assert r.status == 204 and r.headers["Access-Control-Allow-Origin"] == allowed
                assert method in r.headers["Access-Control-Allow-Methods"].split(", ")
            async with session.request(
                method, f"{url}{path}", json={}, headers={"Origin": ORIGIN}
            ) as r:
                assert r.status == status and r.headers["Access-Control-Allow-Origin"] == allowed
        # A method no HTTP method could be is refused.
        for method in ("GET, POST", ""):
            async with session.options(view, headers=preflight_headers(ORIGIN, method)) as r:
                assert r.status == 204 and "Access-Control-Allow-Origin" not in r.headers

    async def listed(session: aiohttp.ClientSession, url: str) -> None:
        await scenario(session, url, ORIGIN)
        # Other origins stay refused.
        evil = preflight_headers("https://evil.example", "GET")
        async with session.options(f"{url}/v1/krypkasino:getView", headers=evil) as r:
            assert r.status == 204 and "Access-Control-Allow-Origin" not in r.headers

    async def any_origin(session: aiohttp.ClientSession, url: str) -> None:
        await scenario(session, url, "*")

    run(krypkasino_gateway(cors=(ORIGIN,)), listed)
    run(krypkasino_gateway(cors=("*",)), any_origin)


def test_a_page_reads_the_accept_encoding_of_a_415():
    """docs/api.md tells clients a 415 carries ``Accept-Encoding``: a page reads no header
    that is not exposed to it."""

    async def scenario(session: aiohttp.ClientSession, url: str) -> None:
        headers = {"Origin": ORIGIN, "Content-Type": "application/json", "Content-Encoding": "br"}
        async with session.post(f"{url}/v1/krypkasino:score", data=b"{}", headers=headers) as r:
            assert r.status == 415 and r.headers["Accept-Encoding"] == "deflate, gzip"
            exposed = r.headers["Access-Control-Expose-Headers"].split(", ")
            assert {"Accept-Encoding", "Allow", "X-Request-Id", "Retry-After"} <= set(exposed)

    run(krypkasino_gateway(cors=(ORIGIN,)), scenario)


def test_each_header_exposed_to_pages_is_declared_by_the_document():
    """The headers the gateway exposes to pages are those a client reads; the OpenAPI
    document declared ``Accept-Encoding`` on no response, though a 415 of a
    ``Content-Encoding`` carries it."""
    document = json.loads(COMMITTED.read_text(encoding="utf-8"))
    declared = {
        name: key
        for key, response in document["components"]["responses"].items()
        for name in response.get("headers", {})
    }
    assert set(EXPOSED_HEADERS.split(", ")) <= set(declared), declared
    assert declared["Accept-Encoding"] == "UnsupportedMediaType"


def test_a_preflight_with_w3c_trace_context_is_allowed():
    """OpenTelemetry's browser fetch instrumentation adds ``traceparent`` and ``tracestate``
    to every call: a header not allowed fails the preflight, and every call with it."""

    async def scenario(session: aiohttp.ClientSession, url: str) -> None:
        score = f"{url}/v1/krypkasino:score"
        headers = {
            **preflight_headers(ORIGIN),
            "Access-Control-Request-Headers": "content-type,traceparent,tracestate",
        }
        async with session.options(score, headers=headers) as r:
            assert r.headers["Access-Control-Allow-Origin"] == ORIGIN
            allowed = set(r.headers["Access-Control-Allow-Headers"].lower().split(", "))
            assert {"content-type", "traceparent", "tracestate"} <= allowed

    run(krypkasino_gateway(cors=(ORIGIN,)), scenario)


def test_refused_preflights_are_counted():
    """A page refused sees only "blocked by CORS policy" and the server logged nothing:
    ``on_refused_preflight`` (``cardrules_http_cors_preflights_refused_total``) counts each
    preflight from an origin not allowed, on a served path or not, and nothing else: not
    an allowed origin's malformed one (no browser sends it), though it is refused too."""
    refused: list[None] = []

    def count() -> None:
        refused.append(None)

    async def scenario(session: aiohttp.ClientSession, url: str) -> None:
        score, slip = f"{url}/v1/krypkasino:score", f"{url}/v1/krypkasino:Score"
        evil = preflight_headers("https://evil.example")
        for target, headers in ((score, evil), (slip, evil), (score, {**evil, "Origin": "null"})):
            async with session.options(target, headers=headers) as r:
                assert "Access-Control-Allow-Origin" not in r.headers
        assert len(refused) == 3
        # Not preflights refused: an answered one, an OPTIONS that is no preflight, a POST.
        async with session.options(score, headers=preflight_headers(ORIGIN)) as r:
            assert r.headers["Access-Control-Allow-Origin"] == ORIGIN
        async with session.options(score, headers={"Origin": "https://evil.example"}) as r:
            assert r.status == 204
        malformed = {**preflight_headers(ORIGIN), "Access-Control-Request-Method": "GET, POST"}
        async with session.options(score, headers=malformed) as r:
            assert "Access-Control-Allow-Origin" not in r.headers
        async with session.post(score, json={}, headers={"Origin": "https://evil.example"}) as r:
            assert r.status == 400
        assert len(refused) == 3

    async def none_configured(session: aiohttp.ClientSession, url: str) -> None:
        async with session.options(
            f"{url}/v1/krypkasino:score", headers=preflight_headers(ORIGIN)
        ) as r:
            assert r.status == 204 and "Access-Control-Allow-Origin" not in r.headers
        assert len(refused) == 4

    run(krypkasino_gateway(cors=(ORIGIN,), on_refused_preflight=count), scenario)
    run(krypkasino_gateway(on_refused_preflight=count), none_configured)


@pytest.mark.parametrize("cors", [(ORIGIN,), ()], ids=["origins_configured", "none"])
def test_only_an_options_with_both_origin_and_request_method_counts_as_a_preflight(cors):
    """docs/operations.md: ``cardrules_http_cors_preflights_refused_total`` counts browser
    preflights from an ``Origin`` not allowed. A browser's preflight carries both
    ``Origin`` and ``Access-Control-Request-Method``; an ``OPTIONS`` with only one of them
    (a probe, a tool's request) is no preflight and no browser was refused. A mutation
    review found the ``Origin`` half unpinned: without it, an ``OPTIONS`` with the method
    header alone counted."""
    refused: list[None] = []

    def count() -> None:
        refused.append(None)

    async def scenario(session: aiohttp.ClientSession, url: str) -> None:
        score = f"{url}/v1/krypkasino:score"
        evil = preflight_headers("https://evil.example")
        without_origin = {k: v for k, v in evil.items() if k != "Origin"}
        without_method = {k: v for k, v in evil.items() if k != "Access-Control-Request-Method"}
        for headers in (without_origin, without_method):
            async with session.options(score, headers=headers) as r:
                assert r.status == 204 and "Access-Control-Allow-Origin" not in r.headers
        assert refused == []
        async with session.options(score, headers=evil) as r:
            assert r.status == 204 and "Access-Control-Allow-Origin" not in r.headers
        assert len(refused) == 1

    run(krypkasino_gateway(cors=cors, on_refused_preflight=count), scenario)


# -- slow and idle clients ------------------------------------------------------------


async def open_raw(url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A plain TCP connection to the server at ``url``, to send bytes as they are."""
    host, port = url.removeprefix("http://").split(":")
    return await asyncio.open_connection(host, int(port))


async def raw_exchange(
    url: str, data: bytes, then: bytes = b"", *, until_closed: bool = False
) -> tuple[bytes, bytes]:
    """Send ``data``, wait a moment, send ``then``; the head and body of the answer. With
    ``until_closed``, read on until the server closes the connection (bounded wait)."""
    reader, writer = await open_raw(url)
    try:
        writer.write(data)
        await writer.drain()
        if then:
            await asyncio.sleep(0.1)
            writer.write(then)
            await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        length = int(re.search(rb"Content-Length: (\d+)", head)[1])  # type: ignore[index]
        body = await asyncio.wait_for(reader.readexactly(length), 30)
        if until_closed:
            assert await asyncio.wait_for(reader.read(), 30) == b""
    finally:
        writer.close()
    return head, body


SCORE_HEAD = (
    b"POST /v1/krypkasino:score HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
)


@pytest.mark.parametrize(
    ("head", "body", "then"),
    [
        (b"Content-Length: 100\r\n\r\n", b'{"state": "', b""),  # stalls mid-body
        # A bad chunk after a good one: aiohttp's parser stops feeding the body, silently.
        (b"Transfer-Encoding: chunked\r\n\r\n", b'2\r\n{"\r\n', b"ZZ\r\n"),
    ],
    ids=["stalled", "bad_chunk_mid_body"],
)
@pytest.mark.parametrize("deadline", [False, True], ids=["", "past_its_deadline"])
def test_a_body_that_does_not_arrive_in_time_is_refused_and_the_connection_closed(
    head, body, then, deadline
):
    """Past its ``Grpc-Timeout`` too the call is refused (504 then, saying that the body
    was slow), and the connection, whose body was never read whole, closed all the
    same."""
    gateway = krypkasino_gateway(body_seconds=0.5)  # the default (BODY_SECONDS) is 15 s
    grpc_timeout = b"Grpc-Timeout: 100m\r\n" if deadline else b""

    async def scenario(_: aiohttp.ClientSession, url: str) -> None:
        answer, status = await raw_exchange(url, SCORE_HEAD + grpc_timeout + head + body, then)
        assert answer.startswith(b"HTTP/1.1 504 " if deadline else b"HTTP/1.1 400 ")
        assert b"Connection: close" in answer
        refused = json.loads(status)
        info = refused["details"][0]
        reason = "DEADLINE_EXCEEDED" if deadline else "BODY_TIMEOUT"
        assert (info["reason"], info["domain"]) == (reason, "cardrules")
        assert ("request body was read whole" in refused["message"]) is deadline

    run(gateway, scenario)


def test_a_body_that_came_whole_only_after_the_deadline_is_refused_naming_the_body():
    """A slow upload's 504 names the body first, not only an overloaded server or a
    short deadline, as the 504 of a call that waited its turn past its deadline does."""

    async def scenario(_: aiohttp.ClientSession, url: str) -> None:
        head = SCORE_HEAD + b"Grpc-Timeout: 50m\r\nContent-Length: 2\r\n\r\n"
        answer, status = await raw_exchange(url, head + b"{", b"}")  # "}" 0.1 s later
        assert answer.startswith(b"HTTP/1.1 504 ")
        refused = json.loads(status)
        assert refused["details"][0]["reason"] == "DEADLINE_EXCEEDED"
        assert refused["message"] == body_past_deadline().message != deadline_exceeded().message

    run(krypkasino_gateway(), scenario)


@pytest.mark.parametrize("grpc_timeout", ["0S", "0m", "1n"])
def test_a_deadline_spent_before_the_body_began_is_refused_naming_the_deadline(grpc_timeout):
    """A deadline already over when the headers came says so, not that the body (sent
    whole with them) came too slowly."""

    async def scenario(_: aiohttp.ClientSession, url: str) -> None:
        timeout = f"Grpc-Timeout: {grpc_timeout}\r\n".encode()
        answer, status = await raw_exchange(
            url, SCORE_HEAD + timeout + b"Content-Length: 2\r\n\r\n{}"
        )
        assert answer.startswith(b"HTTP/1.1 504 ")
        refused = json.loads(status)
        assert refused["details"][0]["reason"] == "DEADLINE_EXCEEDED"
        assert refused["message"] == deadline_exceeded().message

    run(krypkasino_gateway(), scenario)


def test_an_idle_kept_alive_connection_is_closed_after_the_keepalive_timeout():
    async def scenario(_: aiohttp.ClientSession, url: str) -> None:
        request = b"GET /openapi.json HTTP/1.1\r\nHost: test\r\n\r\n"
        answer, _body = await raw_exchange(url, request, until_closed=True)
        # Kept alive after the answer (HTTP/1.1), then closed by the server once idle.
        assert answer.startswith(b"HTTP/1.1 200 ")
        assert b"Connection: close" not in answer

    run(krypkasino_gateway(), scenario, keepalive_seconds=0.5)


HALF_A_HEAD = b"POST /v1/krypkasino:score HTTP/1.1\r\nHost: test\r\n"


@pytest.mark.parametrize(
    ("head", "trickle"),
    [(b"", False), (HALF_A_HEAD, False), (HALF_A_HEAD, True)],
    ids=["silent", "half_a_head", "head_a_line_at_a_time"],
)
def test_a_connection_without_a_whole_request_head_is_closed_after_the_keepalive_timeout(
    head, trickle
):
    """A client cannot hold a connection by sending nothing, or its head a line at a
    time: aiohttp's keep-alive timer runs from the connection's start."""

    async def scenario(_: aiohttp.ClientSession, url: str) -> None:
        reader, writer = await open_raw(url)

        sent = 0

        async def send_a_line_now_and_then() -> None:
            nonlocal sent
            with contextlib.suppress(ConnectionError):
                for number in itertools.count():  # until the server closes, or the test fails
                    writer.write(f"X-Line-{number}: 1\r\n".encode())
                    await writer.drain()
                    sent += 1
                    await asyncio.sleep(0.1)

        writer.write(head)
        trickling = asyncio.create_task(send_a_line_now_and_then()) if trickle else None
        try:
            assert await asyncio.wait_for(reader.read(), 30) == b""  # closed, nothing said
        finally:
            if trickling is not None:
                trickling.cancel()
            writer.close()
        assert sent >= 2 if trickle else sent == 0

    run(krypkasino_gateway(), scenario, keepalive_seconds=0.5)


def test_the_drain_ends_at_once_when_no_request_is_in_flight():
    """The SIGTERM drain waits for requests in flight only: with none, before any request
    came or after the last was answered, the server stops without waiting out its grace."""

    async def main() -> None:
        idle = krypkasino_gateway()
        await asyncio.wait_for(idle.drain(60), 5)  # no request ever came
        gateway = krypkasino_gateway()
        server = await start_http(gateway, "127.0.0.1", 0, reuse_port=False, grace_seconds=60)
        try:
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"http://127.0.0.1:{server.port}/healthz") as r,
            ):
                assert r.status == 200
        finally:
            await asyncio.wait_for(server.stop(), 5)

    asyncio.run(main())


def test_the_drain_waits_for_a_request_in_flight_when_another_has_ended():
    """A request answered while another's body is still coming does not end the drain."""
    gateway = krypkasino_gateway()

    async def scenario(session: aiohttp.ClientSession, url: str) -> None:
        reader, writer = await open_raw(url)
        try:
            writer.write(SCORE_HEAD + b'Content-Length: 100\r\n\r\n{"state": "')
            await writer.drain()
            await asyncio.sleep(0.2)  # the score call is in flight, its body still coming
            async with session.get(f"{url}/healthz") as r:
                assert r.status == 200
            draining = asyncio.create_task(gateway.drain(60))
            await asyncio.sleep(0.3)
            assert not draining.done()
            writer.write(b"A" * 87 + b'"}')
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            assert head.startswith(b"HTTP/1.1 400 ")
            await asyncio.wait_for(draining, 5)
        finally:
            writer.close()

    run(gateway, scenario)


def test_a_request_without_a_body_needs_no_content_type():
    """No body, nothing to type: the call is made on an empty request (here refused for
    its missing state, as an empty JSON object would be)."""

    async def scenario(_: aiohttp.ClientSession, url: str) -> None:
        request = b"POST /v1/krypkasino:score HTTP/1.1\r\nHost: test\r\nContent-Length: 0\r\n\r\n"
        answer, status = await raw_exchange(url, request)
        assert answer.startswith(b"HTTP/1.1 400 ")
        assert refusal(json.loads(status))[:2] == (code_pb2.INVALID_ARGUMENT, "STATE_MISSING")

    run(krypkasino_gateway(), scenario)


def test_a_body_without_a_content_type_is_415():
    async def scenario(_: aiohttp.ClientSession, url: str) -> None:
        request = b"POST /v1/krypkasino:score HTTP/1.1\r\nHost: test\r\nContent-Length: 2\r\n\r\n{}"
        answer, status = await raw_exchange(url, request)
        assert answer.startswith(b"HTTP/1.1 415 ")
        assert refusal(json.loads(status)) == (
            code_pb2.INVALID_ARGUMENT,
            "UNSUPPORTED_MEDIA_TYPE",
            {},
            {},
        )

    run(krypkasino_gateway(), scenario)


def test_a_refused_call_keeps_its_connection_for_the_next_request():
    """Only a body that could not be read (or came too late) closes the connection."""

    async def scenario(_: aiohttp.ClientSession, url: str) -> None:
        reader, writer = await open_raw(url)
        try:
            for _answer in range(2):
                writer.write(SCORE_HEAD + b"Content-Length: 2\r\n\r\n{}")
                await writer.drain()
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
                assert head.startswith(b"HTTP/1.1 400 ") and b"Connection: close" not in head
                length = int(re.search(rb"Content-Length: (\d+)", head)[1])  # type: ignore[index]
                assert b"STATE_MISSING" in await reader.readexactly(length)
        finally:
            writer.close()

    run(krypkasino_gateway(), scenario)


def test_a_content_length_over_the_limit_is_413_before_any_of_the_body_comes():
    """The declared length alone refuses it: the gateway does not wait for a body it
    would not take."""

    async def scenario(_: aiohttp.ClientSession, url: str) -> None:
        over = 4096 * JSON_BODY_FACTOR + 1
        answer, status = await asyncio.wait_for(
            raw_exchange(url, SCORE_HEAD + f"Content-Length: {over}\r\n\r\n".encode()), 5
        )
        assert answer.startswith(b"HTTP/1.1 413 ")
        assert refusal(json.loads(status))[:2] == (code_pb2.RESOURCE_EXHAUSTED, "REQUEST_TOO_LARGE")

    run(krypkasino_gateway(limit=4096), scenario)


def test_a_chunked_body_is_413_as_soon_as_it_passes_the_limit():
    """Without a length the body is counted as it comes: the first chunk past 16 times
    the limit is refused, and the rest is neither awaited nor read."""

    async def scenario(_: aiohttp.ClientSession, url: str) -> None:
        size = 4096 * JSON_BODY_FACTOR + 1
        chunk = f"{size:x}\r\n".encode() + b" " * size + b"\r\n"  # and no last chunk
        head = SCORE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
        answer, status = await asyncio.wait_for(raw_exchange(url, head + chunk), 5)
        assert answer.startswith(b"HTTP/1.1 413 ")
        assert refusal(json.loads(status))[:2] == (code_pb2.RESOURCE_EXHAUSTED, "REQUEST_TOO_LARGE")

    run(krypkasino_gateway(limit=4096), scenario)


OVER_THE_BODY_LIMIT = 4096 * JSON_BODY_FACTOR + 1
EXPECTING_CONTINUE_OVER_THE_LIMIT = (
    f"Expect: 100-continue\r\nContent-Length: {OVER_THE_BODY_LIMIT}\r\n\r\n".encode()
)


@pytest.mark.parametrize(
    ("head", "status"),
    [
        (SCORE_HEAD + f"Content-Length: {OVER_THE_BODY_LIMIT}\r\n\r\n".encode(), 413),
        (SCORE_HEAD + EXPECTING_CONTINUE_OVER_THE_LIMIT, 413),
        (
            SCORE_HEAD
            + b"Transfer-Encoding: chunked\r\n\r\n"
            + f"{OVER_THE_BODY_LIMIT:x}\r\n".encode()
            + b" " * OVER_THE_BODY_LIMIT
            + b"\r\n",
            413,
        ),
        (SCORE_HEAD + b"Grpc-Timeout: soon\r\n" + EXPECTING_CONTINUE_OVER_THE_LIMIT, 400),
        (SCORE_HEAD + b"Content-Encoding: br\r\n" + EXPECTING_CONTINUE_OVER_THE_LIMIT, 415),
        (SCORE_HEAD.replace(b":score", b":nowhere") + EXPECTING_CONTINUE_OVER_THE_LIMIT, 404),
    ],
    ids=[
        "by_its_length",
        "by_its_length_expecting_continue",
        "as_it_comes",
        "bad_deadline_expecting_continue",
        "unknown_coding_expecting_continue",
        "no_route_expecting_continue",
    ],
)
def test_an_answer_that_leaves_a_body_over_the_limit_unread_closes_the_connection(head, status):
    """RFC 9110, 10.1.1: an answer sent before the whole body is read says whether the
    connection stays. The rest of a body over the limit is never read, and after an
    ``Expect: 100-continue`` answered without the 100 (a ``Content-Length`` over the
    limit), never sent: a next request on the connection would be taken for it, so the
    answer says ``Connection: close``, whatever the refusal."""

    async def scenario(_: aiohttp.ClientSession, url: str) -> None:
        answer, _body = await asyncio.wait_for(raw_exchange(url, head), 5)
        assert answer.startswith(f"HTTP/1.1 {status} ".encode())
        assert b"100 Continue" not in answer
        assert b"Connection: close" in answer

    run(krypkasino_gateway(limit=4096), scenario)


def test_a_request_too_large_once_parsed_keeps_its_connection():
    """A body read whole and refused as too large once parsed leaves the connection
    clean: only a body left unread closes it."""

    async def scenario(_: aiohttp.ClientSession, url: str) -> None:
        body = json.dumps({"config": {"players": 2}, "decks": [{}] * 2049}).encode()
        head = SCORE_HEAD.replace(b":score", b":newGame")
        head += f"Content-Length: {len(body)}\r\n\r\n".encode()
        answer, status = await asyncio.wait_for(raw_exchange(url, head + body), 5)
        assert answer.startswith(b"HTTP/1.1 413 ")
        assert b"Connection: close" not in answer
        assert refusal(json.loads(status))[1] == "REQUEST_TOO_LARGE"

    run(krypkasino_gateway(limit=4096), scenario)


def test_stopping_closes_a_kept_alive_connection():
    async def main() -> None:
        server = await start_http(
            krypkasino_gateway(), "127.0.0.1", 0, reuse_port=False, grace_seconds=1
        )
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            assert head.startswith(b"HTTP/1.1 200 ") and b"Connection: close" not in head
            await asyncio.wait_for(server.stop(), 5)
            await asyncio.wait_for(reader.readuntil(b"}"), 5)  # the rest of the answer
            assert await asyncio.wait_for(reader.read(), 5) == b""
        finally:
            writer.close()

    asyncio.run(main())


STOPPING = "the server is stopping, and the body did not arrive in time: send the request again"
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n"
PARTIAL_SCORE = SCORE_HEAD + b'Content-Length: 100\r\n\r\n{"state": "'


async def next_answer(reader: asyncio.StreamReader) -> tuple[bytes, Any]:
    """The head and the JSON body of the next answer on a connection."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    length = re.search(rb"Content-Length: (\d+)", head)
    assert length is not None
    return head, json.loads(await asyncio.wait_for(reader.readexactly(int(length[1])), 5))


def test_bodies_still_arriving_when_the_grace_ends_are_refused_and_logged_before_the_close():
    """The drain waits the grace period for requests in flight. A body still arriving then
    was cut a second later with no answer, and nothing logged or counted the call; now it
    is refused at the grace's end through the ``CallRunner``, whatever the body timeout,
    and so is one that a kept-alive connection started during the drain: 503
    ``SERVER_STOPPING`` with ``Retry-After``, which retry helpers resend to another
    replica (a 400 ``BODY_TIMEOUT`` before, which none retries)."""

    async def main() -> tuple[list[tuple[bytes, Any]], list[MutableMapping[str, Any]]]:
        with structlog.testing.capture_logs() as logs:
            gateway = krypkasino_gateway(body_seconds=120)
            server = await start_http(gateway, "127.0.0.1", 0, reuse_port=False, grace_seconds=0.5)
            early_reader, early = await asyncio.open_connection("127.0.0.1", server.port)
            kept_reader, kept = await asyncio.open_connection("127.0.0.1", server.port)
            try:
                kept.write(HEALTHZ)
                head, _ = await next_answer(kept_reader)
                assert b"Connection: close" not in head
                early.write(PARTIAL_SCORE)
                await early.drain()
                await asyncio.sleep(0.2)
                stopping = asyncio.create_task(server.stop())
                await asyncio.sleep(0.1)
                kept.write(PARTIAL_SCORE)
                await kept.drain()
                await asyncio.wait_for(stopping, 10)
                assert gateway.drain_expired  # the stopped line's grace_expired
                answers = [await next_answer(early_reader), await next_answer(kept_reader)]
            finally:
                early.close()
                kept.close()
        return answers, logs

    answers, logs = asyncio.run(main())
    for head, status in answers:
        assert head.startswith(b"HTTP/1.1 503 ") and b"Connection: close" in head
        assert b"Retry-After: 1\r\n" in head
        assert (status["details"][0]["reason"], status["message"]) == (SERVER_STOPPING, STOPPING)
    lines = [(entry["code"], entry.get("reason")) for entry in logs if entry["event"] == "request"]
    assert lines == [("Unavailable", SERVER_STOPPING)] * 2


def test_a_body_cut_by_the_drain_after_its_deadline_is_504_and_still_closes():
    """docs/api.md, ``SERVER_STOPPING``: a call whose ``Grpc-Timeout`` has passed when the
    drain cuts its body is answered 504 ``DEADLINE_EXCEEDED`` instead, logged so, and its
    connection, whose body was never read whole, closed all the same."""

    async def main() -> tuple[bytes, Any, bytes, list[MutableMapping[str, Any]]]:
        with structlog.testing.capture_logs() as logs:
            gateway = krypkasino_gateway(body_seconds=120)
            server = await start_http(gateway, "127.0.0.1", 0, reuse_port=False, grace_seconds=0.5)
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            try:
                writer.write(
                    PARTIAL_SCORE.replace(SCORE_HEAD, SCORE_HEAD + b"Grpc-Timeout: 100m\r\n")
                )
                await writer.drain()
                await asyncio.sleep(0.2)
                await asyncio.wait_for(server.stop(), 10)
                head, status = await next_answer(reader)
                rest = await asyncio.wait_for(reader.read(), 10)
            finally:
                writer.close()
        return head, status, rest, logs

    head, status, rest, logs = asyncio.run(main())
    assert head.startswith(b"HTTP/1.1 504 ") and b"Connection: close" in head
    assert status["details"][0]["reason"] == "DEADLINE_EXCEEDED"
    assert rest == b""  # closed by the server
    lines = [(entry["code"], entry.get("reason")) for entry in logs if entry["event"] == "request"]
    assert lines == [("DeadlineExceeded", "DEADLINE_EXCEEDED")]


NEW_GAME = (
    SCORE_HEAD.replace(b":score", b":newGame")
    + b'Content-Length: 26\r\n\r\n{"config": {"players": 2}}'
)


@pytest.mark.parametrize(
    ("first", "then", "said"),
    [
        (NEW_GAME, b"GARBAGE / HTTP/1.1\r\nHost: test\r\n\r\n", b"Invalid method"),
        (
            NEW_GAME.replace(b"Host: test\r\n", b"Host: test\r\nConnection: close\r\n"),
            HEALTHZ,
            b"Data after `Connection: close`",
        ),
    ],
    ids=["malformed_next", "after_connection_close"],
)
def test_the_two_pipelining_limits_docs_api_names(first, then, said):
    """docs/api.md, "Pipelining": with aiohttp 3.14.5 (aio-libs/aiohttp#8087), a valid
    request in one write with a malformed one after it, or with anything after its
    ``Connection: close``, gets aiohttp's plain-text 400 alone and is never served or
    logged. If this fails after an aiohttp upgrade, the limit may be gone: say so there."""

    async def main() -> tuple[bytes, list[MutableMapping[str, Any]]]:
        with structlog.testing.capture_logs() as logs:
            server = await start_http(
                krypkasino_gateway(), "127.0.0.1", 0, reuse_port=False, grace_seconds=1
            )
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
                writer.write(first + then)
                everything = await asyncio.wait_for(reader.read(), 10)  # until closed
                writer.close()
            finally:
                await server.stop()
        return everything, logs

    everything, logs = asyncio.run(main())
    head, _, rest = everything.partition(b"\r\n\r\n")
    assert re.match(rb"HTTP/1\.[01] 400 ", head) and said in rest
    # That answer alone, none to the valid request.
    assert len(rest) == int(re.search(rb"Content-Length: (\d+)", head)[1])  # type: ignore[index]
    assert [entry for entry in logs if entry["event"] == "request"] == []


def test_a_request_started_as_the_last_one_ends_gets_the_rest_of_the_grace():
    """The drain waited once for the gateway to fall idle: when the last request in flight
    ended and a kept-alive connection started another before the drain ran again, the
    drain ended at once with most of its grace left, cut the new body (503
    ``SERVER_STOPPING``) and said the grace had run out. It now waits on, until nothing
    is in flight or the grace is over."""
    gateway = krypkasino_gateway(body_seconds=120)
    new_game = SCORE_HEAD.replace(b":score", b":newGame")
    body = json.dumps({"config": {"players": 2}}).encode()

    async def scenario(_: aiohttp.ClientSession, url: str) -> None:
        last_reader, last = await open_raw(url)
        kept_reader, kept = await open_raw(url)
        try:
            kept.write(HEALTHZ)
            await next_answer(kept_reader)
            last.write(PARTIAL_SCORE)
            await last.drain()
            await asyncio.sleep(0.2)  # in flight, its body still coming
            draining = asyncio.create_task(gateway.drain(60))
            await asyncio.sleep(0.1)
            # In one go, with no await between: the server reads both in the same loop
            # turn, so the new request starts before the drain runs again.
            last.write(b"A" * 87 + b'"}')
            kept.write(new_game + f"Content-Length: {len(body)}\r\n\r\n".encode() + body[:5])
            assert (await next_answer(last_reader))[0].startswith(b"HTTP/1.1 400 ")
            await asyncio.sleep(0.3)
            assert not draining.done()  # the new body is still coming, within the grace
            kept.write(body[5:])
            head, _ = await next_answer(kept_reader)
            await asyncio.wait_for(draining, 5)
        finally:
            last.close()
            kept.close()
        assert head.startswith(b"HTTP/1.1 200 ")
        assert not gateway.drain_expired

    run(gateway, scenario)


def test_a_body_started_after_a_drain_that_found_nothing_in_flight_is_refused_at_once():
    """A drain with nothing in flight ends at once, and aiohttp's shutdown follows, which
    drops what clients still send: a request that a kept-alive connection starts just
    then would wait for a body that never comes, and be cut with no answer and no log."""
    gateway = krypkasino_gateway(body_seconds=120)

    async def scenario(_: aiohttp.ClientSession, url: str) -> None:
        reader, writer = await open_raw(url)
        try:
            writer.write(HEALTHZ)
            await next_answer(reader)
            await asyncio.wait_for(gateway.drain(60), 5)
            assert not gateway.drain_expired
            writer.write(PARTIAL_SCORE)
            head, status = await next_answer(reader)
        finally:
            writer.close()
        assert head.startswith(b"HTTP/1.1 503 ")
        assert (status["details"][0]["reason"], status["message"]) == (SERVER_STOPPING, STOPPING)

    run(gateway, scenario)


def test_the_drain_leaves_alone_a_body_wait_whose_time_has_come():
    """A wait that has timed out before its request took the TimeoutError in cannot be
    rescheduled (asyncio raises), and that must not stop the drain."""

    async def main() -> None:
        gateway = krypkasino_gateway()
        await asyncio.wait_for(gateway.drain(0), 5)  # nothing in flight: at once
        assert not gateway.drain_expired  # though wait_for(..., 0) raises TimeoutError
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.01) as wait:  # its time lies beyond the drain's end
                await asyncio.sleep(5)
        assert wait.expired()
        gateway._end_by_drain(wait)
        assert wait.expired()

    asyncio.run(main())


def test_a_body_timeout_before_the_grace_ends_keeps_its_own_message():
    """A drain brings a body's wait forward only when it would last beyond the grace."""
    gateway = krypkasino_gateway(body_seconds=0.3)

    async def scenario(_: aiohttp.ClientSession, url: str) -> None:
        reader, writer = await open_raw(url)
        try:
            writer.write(PARTIAL_SCORE)
            await writer.drain()
            await asyncio.sleep(0.1)  # in flight, so that the drain waits for it
            draining = asyncio.create_task(gateway.drain(60))
            status = (await next_answer(reader))[1]
            await asyncio.wait_for(draining, 5)
        finally:
            writer.close()
        assert status["message"] == "the body did not arrive within 0.3 s"

    run(gateway, scenario)


def test_the_gateway_the_server_builds_times_a_body_out_at_the_documented_15_s():
    """docs/api.md, "Errors": ``BODY_TIMEOUT`` is "the whole body did not arrive within 15
    s". Every other body test passes its own ``body_seconds``; this one takes the gateway
    as ``cardrules serve`` builds it (``service.server._start_gateway``, which passes
    none). The wait a body gets ends 15 s after the body began; brought forward (no test
    waits 15 s), it refuses the body in the documented words. A mutation review found
    ``BODY_SECONDS`` unpinned (20 s passed every test)."""
    api_md = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
    documented = re.search(
        r"\| `BODY_TIMEOUT` \| 400 \| the whole body did not arrive within (\d+) s", api_md
    )
    assert documented is not None and documented[1] == "15"

    async def main() -> None:
        loop = asyncio.get_running_loop()
        config = ServerConfig(host="127.0.0.1", http_port=0)
        http = await _start_gateway(
            config, build_api(config, KeyRing.parse(TEST_KEY), None), CallRunner(None), None
        )
        assert http is not None
        try:
            reader, writer = await open_raw(f"http://127.0.0.1:{http.port}")
            try:
                began = loop.time()
                writer.write(PARTIAL_SCORE)
                await writer.drain()
                async with asyncio.timeout(10):  # a wait never set fails, not hangs
                    while not http.gateway._body_waits:  # the body has begun: its wait is set
                        await asyncio.sleep(0.01)
                (wait,) = http.gateway._body_waits
                deadline = wait.when()
                assert deadline is not None
                assert began + 15 <= deadline <= loop.time() + 15
                wait.reschedule(loop.time())
                head, status = await next_answer(reader)
            finally:
                writer.close()
        finally:
            await http.stop()
        assert head.startswith(b"HTTP/1.1 400 ") and b"Connection: close" in head
        assert status["details"][0]["reason"] == "BODY_TIMEOUT"
        assert status["message"] == "the body did not arrive within 15 s"

    asyncio.run(main())


def test_a_port_in_use_fails_the_start_with_the_systems_error():
    """What ``serve`` reports when the HTTP port is taken: the bind's own error."""

    async def main() -> None:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            with pytest.raises(OSError) as raised:
                await start_http(
                    krypkasino_gateway(), "127.0.0.1", port, reuse_port=False, grace_seconds=1
                )
        assert raised.value.errno == errno.EADDRINUSE

    asyncio.run(main())


def test_http_statuses_are_the_standard_mapping_of_google_rpc_codes() -> None:
    """google/rpc/code.proto gives each code its "HTTP Mapping"; the gateway uses exactly it."""
    proto = Path(code_pb2.__file__).with_name("code.proto").read_text()
    documented = {
        code_pb2.Code.Value(name): int(status)
        for status, name in re.findall(r"HTTP Mapping: (\d+)[^\n]*\n\s*(\w+) = \d+;", proto)
    }
    assert len(documented) == len(code_pb2.Code.values())
    assert documented == HTTP_STATUS


def test_of_two_request_ids_the_first_counts():
    """docs/api.md, "HTTP/JSON": as the gRPC service takes the first ``x-request-id``."""

    async def scenario(session: aiohttp.ClientSession, url: str) -> None:
        for first, second in (("first-id", "second-id"), ("second-id", "first-id")):
            headers = [
                ("Content-Type", "application/json"),
                ("X-Request-Id", first),
                ("X-Request-Id", second),
            ]
            async with session.post(
                f"{url}/v1/krypkasino:getView", data=b"{}", headers=headers
            ) as r:
                assert r.status == 400  # no state: the answer still carries the id
                assert r.headers.getall("X-Request-Id") == [first]

    run(krypkasino_gateway(), scenario)
