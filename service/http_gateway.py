"""The HTTP/JSON face of the API on aiohttp (design sections 3, 5 and 6).

Routes come from the ``google.api.http`` annotations (``service.http_routes``);
every call on a route goes through the same ``CallRunner`` as gRPC, with
``transport="http"``, so it is counted under the same go-grpc-prometheus
series and logged in the same one line per request. Refusals are the
``google.rpc.Status`` as JSON with the standard HTTP mapping of its code;
what only HTTP can get wrong has a reason of its own:

==============================  ====  ======================  ========================================
reason                          HTTP  code                    when
==============================  ====  ======================  ========================================
``NOT_FOUND_ROUTE``             404   ``NOT_FOUND``           no route has this path
``METHOD_NOT_ALLOWED``          405   ``UNIMPLEMENTED``       the path has no route for the method
``HTTP_VERSION_NOT_SUPPORTED``  505   ``UNIMPLEMENTED``       a request line of another version than
                                                              HTTP/1.0 or HTTP/1.1
``UNSUPPORTED_MEDIA_TYPE``      415   ``INVALID_ARGUMENT``    a non-empty body that is not
                                                              ``application/json``, or compressed
                                                              other than by gzip or deflate
``REQUEST_TOO_LARGE``           413   ``RESOURCE_EXHAUSTED``  a request over ``--max-request-bytes``
                                                              as protobuf, or a body over 16 times
                                                              that
``JSON_INVALID``                400   ``INVALID_ARGUMENT``    malformed JSON, an unknown field, a bad
                                                              value
``REQUEST_MALFORMED``           400   ``INVALID_ARGUMENT``    a request framed otherwise than by
                                                              Content-Length or chunked alone (any
                                                              path), a body that is not
                                                              decompressible, or whose chunk framing
                                                              breaks
``BODY_TIMEOUT``                400   ``INVALID_ARGUMENT``    a body that did not arrive within 15 s
``SERVER_STOPPING``             503   ``UNAVAILABLE``         a body still arriving at the end of a
                                                              stopping server's drain: sent again,
                                                              it reaches another replica
``TIMEOUT_INVALID``             400   ``INVALID_ARGUMENT``    a ``Grpc-Timeout`` header that is not 1
                                                              to 8 digits and a unit
                                                              (``service.grpc_timeout``)
``CLIENT_GONE``                 499   ``CANCELLED``           the client closed the connection before
                                                              its body came whole or while the call
                                                              waited its turn (logged, never read)
==============================  ====  ======================  ========================================

``HTTP_VERSION_NOT_SUPPORTED`` and a request's framing are judged first, on every path, and
close the connection; on a route they, and the last eight, pass through the ``CallRunner``
too. A request that waits for ``100 Continue`` gets it only when the gateway will read its
body (``_reads_body``); else its final answer comes at once and, when a body was to follow,
closes the connection, which would take that unsent body for the next request. A call
with a ``Grpc-Timeout`` header has that deadline, as a gRPC call has its own: one
reached after it is refused 504 ``DEADLINE_EXCEEDED`` unserved.
``GET /openapi.json`` serves the OpenAPI document, and ``GET /healthz`` and
``/readyz`` the gRPC health service's ``liveness`` and ``readiness`` for
checkers that speak only HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from aiohttp import HttpVersion10, HttpVersion11, web
from aiohttp.http import RawRequestMessage
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.typedefs import Handler as WebHandler
from google.protobuf.descriptor import ServiceDescriptor

from service.calls import (
    REQUEST_ID_HEADER,
    CallInfo,
    CallRunner,
    Handler,
    within_deadline,
)
from service.config import ECHOED_CHARS, HTTP_KEEPALIVE_SECONDS
from service.content_coding import (
    CODINGS,
    BodyCodingError,
    BodyTooLargeError,
    Inflater,
    canonical_coding,
)
from service.errors import (
    HTTP_STATUS,
    REQUEST_MALFORMED,
    REQUEST_TOO_LARGE,
    ServiceError,
    body_past_deadline,
    deadline_exceeded,
    drop_tracebacks,
    invalid_argument,
    request_too_large,
)
from service.grpc_timeout import GRPC_TIMEOUT_HEADER, timeout_seconds
from service.http_cors import CorsPolicy, is_preflight
from service.http_json import (
    JSON_TYPE,
    JSON_WHITE_SPACE,
    echoed,
    message_json,
    parse_request,
    status_json,
)
from service.http_routes import LIVENESS_PATH, OPENAPI_PATH, READINESS_PATH, Route, routes
from service.listen import listen_addresses, numeric_host, one_port
from service.logs import get_logger, request_log_fields
from service.metrics import code_label
from service.spelling import nearest
from service.trace_context import DUPLICATE, TRACEPARENT_HEADER, Trace, trace_from
from service.turn_budget import TurnBudget

_FIXED_PATHS = frozenset({OPENAPI_PATH, LIVENESS_PATH, READINESS_PATH})
TRANSPORT = "http"
SERVER_HEADER = "cardrules"
#: The ``Retry-After`` of a 503: a retry within a second reaches another replica.
RETRY_AFTER_SECONDS = "1"

NOT_FOUND_ROUTE = "NOT_FOUND_ROUTE"
METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
UNSUPPORTED_MEDIA_TYPE = "UNSUPPORTED_MEDIA_TYPE"
CLIENT_GONE = "CLIENT_GONE"
HTTP_VERSION_NOT_SUPPORTED = "HTTP_VERSION_NOT_SUPPORTED"
# RFC 9112, 2.3: the versions the gateway speaks; aiohttp's C parser also takes 0.9 and 2.0
# request lines (its pure-Python one any digit.digit), and answered them with that version.
_SPOKEN_VERSIONS = frozenset({HttpVersion10, HttpVersion11})

# Protocol refusals whose HTTP status is more precise than the mapping of their code.
_HTTP_STATUS_OF_REASON = {
    METHOD_NOT_ALLOWED: 405,
    HTTP_VERSION_NOT_SUPPORTED: 505,
    UNSUPPORTED_MEDIA_TYPE: 415,
    REQUEST_TOO_LARGE: 413,
}


# A path no route took is logged only when it looks like a route, or is a slip from one
# (``service.spelling``), so that a token a client put in its path is not logged: up to six
# segments of lowercase letters, digits and "._-", each no longer than a route's, and a
# method after a ":" as routes have ("krypkasino:legalMoves"). A seat token's 27 base64
# characters hold a "/" one time in three, and split by it they passed for segments
# when capitals were allowed in them; all of them lowercase or digits happens once in
# millions. "*" and "" are the targets that are no path ("OPTIONS *", "CONNECT h:443").
_ROUTE_LIKE_PATH = re.compile(r"\*|(/[a-z0-9._-]{0,24}(:[A-Za-z]{1,24})?){0,6}")
_READ_CHUNK = 16 * 1024
# A request is held to --max-request-bytes as a protobuf message, as over gRPC, so both
# transports take the same requests. Its JSON is larger: the largest real request (a
# NewGame with 64 explicit decks, cards as enum names) is about 7 times its protobuf size
# in compact JSON, so a body may be 16 times the limit, with room for pretty-printing.
JSON_BODY_FACTOR = 16
# The codings the gateway reads; any other would reach the JSON parser as it came.
_CONTENT_CODINGS = frozenset({"", "identity"}) | CODINGS
_ACCEPTED_CODINGS = ", ".join(sorted(CODINGS))
# A whole body must arrive within this long; aiohttp itself never times a body out, so a
# client that stalls (or a chunk the parser rejects mid-body) would hold the call forever.
BODY_SECONDS = 15.0
BODY_TIMEOUT = "BODY_TIMEOUT"
# A body cut by the drain's end is no fault of its client's, and another replica can take
# it: UNAVAILABLE, a 503 with Retry-After, which retry helpers retry (urllib3's Retry with
# docs/api.md's status_forcelist), as a gRPC client retries a call its stopping server cut.
SERVER_STOPPING = "SERVER_STOPPING"
# How long a connection may stay idle between two requests, or take to send a request
# head, unless --http-keepalive-seconds says otherwise (aiohttp's default is an hour):
# 75 s, longer than the idle timeouts of common load balancers (60 s), so that they, not
# the server, close a kept-alive connection, and no request meets a closing socket.
# service.config has the default and its bounds.
KEEPALIVE_SECONDS = HTTP_KEEPALIVE_SECONDS
# HTTP calls run per turn of the event loop while calls queue (service.turn_budget; at most
# twice as many in a turn that finds no queue): about 1 ms of Play work,
# so that health checks and gRPC calls wait about that per turn, not for every call in
# flight. Measured with 200 HTTP calls in flight, 2 against 8 gave the same HTTP throughput,
# probes in 20-30 ms instead of 60-90, and concurrent gRPC calls 2.5 times their share;
# 1 cost throughput when both transports were loaded.
CALLS_PER_TURN = 2
# Refusals after which the connection's byte stream cannot be trusted or was never read.
_CLOSING = frozenset({REQUEST_MALFORMED, BODY_TIMEOUT, SERVER_STOPPING, HTTP_VERSION_NOT_SUPPORTED})
# Of the body's refusals, also one too large: the rest of the body (chunked, or compressed
# past the limit) is left unread, so the connection cannot carry another request. RFC 9110,
# 10.1.1: an answer sent before the whole body says whether the connection stays.
_CLOSING_BODY_REFUSALS = _CLOSING | {REQUEST_TOO_LARGE}


@dataclass(frozen=True, slots=True)
class _Bound:
    route: Route
    handler: Handler


class RouteConflictError(ValueError):
    """Two annotations claim one method and path, or a route has no API method."""


def http_status(error: ServiceError) -> int:
    """The HTTP status of a refusal: a more precise one for a few gateway reasons (405, 413,
    415, 505), else the standard mapping of its code (design section 5)."""
    specific = _HTTP_STATUS_OF_REASON.get(error.reason)
    code: Any = error.code.value[0]  # a google.rpc.Code number (typed as its enum there)
    return specific if specific is not None else HTTP_STATUS[code]


def _refusal(code: grpc.StatusCode, reason: str, message: str, **metadata: str) -> ServiceError:
    return ServiceError(code, reason, message, metadata)


def _json_body(request: web.Request, body: bytes) -> bytes | ServiceError:
    """``body``, or its refusal when it is not JSON by its ``Content-Type``."""
    # Judged once read: an empty body is the empty request whatever type it is said
    # to have (urllib sends a form type with data=b""), as parse_request takes it.
    if not body.strip(JSON_WHITE_SPACE):
        return body
    refusal = _type_refusal(request)
    return body if refusal is None else refusal


def _type_refusal(request: web.Request) -> ServiceError | None:
    """The refusal of a body by its ``Content-Type``, were the body not empty."""
    content_type = request.headers.get("Content-Type")
    if content_type is None:
        return _refusal(
            grpc.StatusCode.INVALID_ARGUMENT,
            UNSUPPORTED_MEDIA_TYPE,
            f"a body needs Content-Type: {JSON_TYPE}",
        )
    if not _is_json(content_type):
        return _refusal(
            grpc.StatusCode.INVALID_ARGUMENT,
            UNSUPPORTED_MEDIA_TYPE,
            f"the body must be {JSON_TYPE} (UTF-8)",
            content_type=echoed(content_type, ECHOED_CHARS),
        )
    return None


def _unfit(request: web.Request) -> ServiceError | None:
    """The refusal of a request no path may answer: another HTTP version than 1.0 or 1.1
    (RFC 9110, 15.6.6), or framing that a proxy in front may read otherwise (RFC 9112, 6.1
    and 6.3). Judged before its route is, and its connection closed after the answer."""
    version = request.version
    if version not in _SPOKEN_VERSIONS:
        return _refusal(
            grpc.StatusCode.UNIMPLEMENTED,
            HTTP_VERSION_NOT_SUPPORTED,
            f"HTTP/{version.major}.{version.minor} is not served: send HTTP/1.1",
        )
    if "Transfer-Encoding" not in request.headers:
        return None
    if version == HttpVersion10:
        # RFC 9112 6.1: HTTP/1.0 has no Transfer-Encoding, so one in an HTTP/1.0 request is
        # faulty framing, whatever it names; aiohttp's parser read the body as chunked and
        # kept the connection alive.
        return invalid_argument(
            REQUEST_MALFORMED, "an HTTP/1.0 request may not have a Transfer-Encoding", ""
        )
    if _listed(request, "Transfer-Encoding") != "chunked":
        # RFC 9112 6.3: a body framed otherwise than by chunked alone is refused and its
        # connection closed, on every path, whether or not the path reads a body. aiohttp's
        # parser took an empty coding before a Content-Length, and unknown ones before
        # chunked, where a proxy in front may frame the body otherwise: the start of request
        # smuggling (an HTTP review).
        return invalid_argument(
            REQUEST_MALFORMED,
            "a body is framed by Content-Length or by Transfer-Encoding chunked alone",
            "",
        )
    return None


def _expects_continue(request: web.Request) -> bool:
    """Whether the client waits for ``100 Continue`` before it sends the body: RFC 9110,
    10.1.1 has a server ignore the expectation in an HTTP/1.0 request."""
    expectation = request.headers.get("Expect", "").strip().lower()
    return expectation == "100-continue" and request.version == HttpVersion11


def _client_left(request: web.Request) -> bool:
    """Whether ``request``'s connection is closed or closing: no answer can reach it."""
    return request.transport is None or request.transport.is_closing()


def _client_gone(message: str) -> ServiceError:
    return _refusal(grpc.StatusCode.CANCELLED, CLIENT_GONE, message)


class HttpGateway:
    """Serves the annotated RPCs of ``services`` from ``api`` as HTTP/JSON."""

    def __init__(
        self,
        api: object,
        runner: CallRunner,
        services: Sequence[ServiceDescriptor],
        *,
        max_request_bytes: int,
        cors: CorsPolicy,
        openapi: bytes,
        body_seconds: float = BODY_SECONDS,
        on_refused_preflight: Callable[[], None] | None = None,
    ) -> None:
        self._runner = runner
        self._on_refused_preflight = on_refused_preflight
        self._max_request_bytes = max_request_bytes
        self._body_seconds = body_seconds
        self._cors = cors
        self._openapi = openapi
        self._log = get_logger("cardrules.requests")
        self._table: dict[str, dict[str, _Bound]] = {}
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        # Loop time at which the drain stops waiting for bodies (None until it begins),
        # and the body waits to bring forward to it.
        self._bodies_end_at: float | None = None
        self._body_waits: set[asyncio.Timeout] = set()
        #: Whether the drain's time ran out with requests in flight (their bodies refused
        #: ``SERVER_STOPPING``): what the ``stopped`` line's ``grace_expired`` says.
        self.drain_expired = False
        self._ready = True
        self._turns = TurnBudget(CALLS_PER_TURN)
        for service in services:
            for route in routes(service):
                self._add(route, api)

    def _add(self, route: Route, api: object) -> None:
        handler = getattr(api, route.handler_name, None)
        if not callable(handler):
            raise RouteConflictError(
                f"{route.service}/{route.method} is annotated but "
                f"{type(api).__name__} has no method {route.handler_name}"
            )
        by_method = self._table.setdefault(route.path, {})
        if route.http_method in by_method or route.path in _FIXED_PATHS:
            raise RouteConflictError(f"{route.http_method} {route.path} is bound twice")
        by_method[route.http_method] = _Bound(route, handler)

    def _near_path(self, path: str) -> str:
        """``"; did you mean /v1/krypkasino:score?"`` for a path a slip away from one the
        gateway serves (a ``/`` for the ``:``, capitals, a trailing ``/``), else ``""``.
        A long path is no slip and skipped: difflib indexes it whole (about 1 ms for 8,000
        characters)."""
        if len(path) > ECHOED_CHARS:
            return ""
        near = nearest(path, (*self._table, *_FIXED_PATHS))
        return f"; did you mean {near}?" if near else ""

    @property
    def routes(self) -> list[Route]:
        """Every bound route, for documentation and tests."""
        return [bound.route for by_method in self._table.values() for bound in by_method.values()]

    def application(self) -> web.Application:
        # The middleware sends every request the parser accepted to the gateway, also one
        # no route of aiohttp's can match: a request target that is no path ("OPTIONS *",
        # "CONNECT host:443", "GET http://host" without a path) would otherwise get
        # aiohttp's own plain 404, without the gateway's headers, unlogged.
        app = web.Application(middlewares=(self._every_target,))
        # [\s\S], not ".": a path with an encoded newline (%0A) would miss the route. The
        # route (with the middleware above) keeps aiohttp's per-route middleware cache and
        # takes the Expect header the gateway's way (_expect).
        app.router.add_route("*", r"/{path:[\s\S]*}", self.handle, expect_handler=self._expect)
        app.on_response_prepare.append(_common_headers)
        return app

    @web.middleware
    async def _every_target(self, request: web.Request, handler: WebHandler) -> web.StreamResponse:
        return await self.handle(request)

    async def _expect(self, request: web.Request) -> None:
        """``Expect: 100-continue`` is answered 100 only when the gateway will read the body
        (``_reads_body``): an answer its head alone decides (a 404, a 405, a coding or type
        refused, bad framing, a body too large by its length) comes at once instead, so that
        the client does not send the body for nothing (RFC 9110, 10.1.1). Any other
        expectation is ignored (RFC 9110 allows that), so that the request is answered,
        logged and counted as the gateway answers every request, not refused 417 by aiohttp
        unlogged."""
        if not _expects_continue(request) or not self._reads_body(request):
            return
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # as aiohttp's own handler: the body is yet to come

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Every request, counted while in flight so that a drain can wait for it."""
        self._in_flight += 1
        self._idle.clear()
        try:
            response = await self._respond(request)
            if self._bodies_end_at is not None or not self._ready:  # stopping
                # From the readiness flip on, not only once the listener closes: a proxy's
                # pooled keep-alive connections (nginx's upstream keepalive) would stay on
                # this pod through the drain delay, and a request it sends on one just as
                # the stop closes it is lost: nginx retries no POST it has sent. Closed
                # after each answer, the pool reconnects, to a replica still serving.
                response.force_close()
            elif (
                self._too_large_by_length(request)
                or "Upgrade" in request.headers
                or (
                    _expects_continue(request)
                    and request.body_exists
                    and not self._reads_body(request)
                )
            ):
                # Whatever the answer, that body is never read (nor, without its 100
                # Continue, sent): a next request on the connection would be taken for it.
                # And aiohttp reads no more of a connection whose request asked to upgrade
                # (h2c) but was answered as HTTP/1.1: a request pipelined behind it went
                # unanswered, and the next one's answer came in its place (aiohttp #13432,
                # fixed after 3.14.5, the newest release here).
                response.force_close()
            if request.version not in _SPOKEN_VERSIONS:
                await _answer_as_http11(request, response)
            return response
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                self._idle.set()

    def _reads_body(self, request: web.Request) -> bool:
        """Whether the gateway reads ``request``'s body: only a call's (a route's method on
        its path) that its head alone does not refuse."""
        call = self._table.get(request.path, {}).get(request.method)
        return call is not None and self._head_refusal(request) is None

    def _head_refusal(self, request: web.Request) -> ServiceError | None:
        """The refusal of a call by its head alone, its body left unread: an unfit request
        (``_unfit``), a bad ``Grpc-Timeout``, a content coding the gateway does not read, a
        ``Content-Length`` over the limit, and, when the client waits for ``100 Continue``
        before it sends a body, a ``Content-Type`` other than JSON: a client that asks
        before sending means to send a body, not JSON white space alone, which
        ``_json_body`` would take as the empty request."""
        refusal = _unfit(request)
        if refusal is not None:
            return refusal
        deadline = _deadline(request.headers.get(GRPC_TIMEOUT_HEADER))
        if isinstance(deadline, ServiceError):
            return deadline
        coding = canonical_coding(_listed(request, "Content-Encoding"))
        if coding not in _CONTENT_CODINGS:
            return _refusal(
                grpc.StatusCode.INVALID_ARGUMENT,
                UNSUPPORTED_MEDIA_TYPE,
                "the body may be sent as it is or with Content-Encoding gzip or deflate",
                content_encoding=echoed(coding, ECHOED_CHARS),
            )
        if self._too_large_by_length(request):
            return request_too_large("body", self._max_request_bytes * JSON_BODY_FACTOR)
        if _expects_continue(request) and request.body_exists:
            return _type_refusal(request)
        return None

    def _too_large_by_length(self, request: web.Request) -> bool:
        """Whether the body is over the limit by its ``Content-Length`` alone: refused unread."""
        length = request.content_length
        return length is not None and length > self._max_request_bytes * JSON_BODY_FACTOR

    def not_ready(self) -> None:
        """``/readyz`` answers 503 from now on, and every answer (that 503 too) closes its
        connection: the first step of the SIGTERM drain (design section 6), so that
        kept-alive connections move away during the drain delay, before the stop closes
        them."""
        self._ready = False

    async def drain(self, timeout: float) -> None:
        """Wait until no request is in flight (a body still arriving included), at most ``timeout``.

        A body still arriving when the drain ends is refused then (``SERVER_STOPPING``), so
        that its call is answered, logged and counted before the connections close: at
        the end of ``timeout``, or as soon as the drain finds nothing in flight, since a
        request can start on a kept-alive connection just then, and aiohttp's shutdown,
        which follows, drops whatever its client still sends.

        A request that starts while the drain waits (on a kept-alive connection) is waited
        for too, within what is left of ``timeout``: the last request's end wakes the
        drain, but one can start before the drain runs, and ending then would cut it at
        once with most of the grace left.
        """
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        busy = not self._idle.is_set()
        self._end_bodies_at(end)
        while not self._idle.is_set() and (left := end - loop.time()) > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), left)
        # Not "in flight" alone: the bodies cut at the end end their requests at that very
        # moment, and the wait may then return idle rather than time out. ``busy`` for a
        # timeout of 0, whose end has passed however idle the gateway is.
        self.drain_expired = busy and (not self._idle.is_set() or loop.time() >= end)
        self._end_bodies_at(loop.time())

    def _end_bodies_at(self, end: float) -> None:
        self._bodies_end_at = end
        for wait in self._body_waits:
            self._end_by_drain(wait)

    def _end_by_drain(self, wait: asyncio.Timeout) -> None:
        """Bring a body's wait forward to the drain's end, when it would last beyond it.

        A wait whose time has come but whose request has not yet run to take it in
        is left alone: ``reschedule`` would raise, and stop the drain with it.
        """
        end, when = self._bodies_end_at, wait.when()
        if end is not None and not wait.expired() and (when is None or when > end):
            wait.reschedule(end)

    async def _respond(self, request: web.Request) -> web.StreamResponse:
        request_id = self._runner.request_id(request.headers.get(REQUEST_ID_HEADER))
        origin = request.headers.get("Origin")
        # Answers carry tokens, which are credentials: nothing may keep them.
        headers = {
            "X-Request-Id": request_id,
            "Cache-Control": "no-store",
            **self._cors.response_headers(origin),
        }
        path = request.path
        unfit = _unfit(request)
        call = self._table.get(path, {}).get(request.method)
        if unfit is not None and call is None:
            # Before the path's own answer, whatever it is: aiohttp would read (or skip) the
            # body by the framing it guessed, and serve what follows it on the connection.
            logged = path if _ROUTE_LIKE_PATH.fullmatch(path) else _length_of(path)
            response = self._unrouted(request, request_id, unfit, headers, logged)
            response.force_close()
            return response
        if path in _FIXED_PATHS:
            methods: Sequence[str] = ("GET", "HEAD")
            by_method: Mapping[str, _Bound] = {}
        else:
            by_method = self._table.get(path, {})
            methods = sorted(by_method)
        if not methods and request.method == "OPTIONS" and path.startswith("/"):  # not "*"
            # A page sees nothing of a refused preflight but a CORS failure: answered for
            # an allowed origin, the request that follows gets the 404 below, which the
            # page can read, with the path a slip away.
            preflight = self._preflight(request, origin, ())
            if "Access-Control-Allow-Origin" in preflight:
                preflight.update({"X-Request-Id": request_id, "Cache-Control": "no-store"})
                return web.Response(status=204, headers=preflight)
        if not methods:
            near = self._near_path(path)
            refusal = _refusal(
                grpc.StatusCode.NOT_FOUND,
                NOT_FOUND_ROUTE,
                f"no route for this path{near}",
                path=echoed(path, ECHOED_CHARS),
            )
            logged = path if _shown_in_log(path, near) else _length_of(path)
            return self._unrouted(request, request_id, refusal, headers, logged)
        allow = ", ".join((*methods, "OPTIONS"))
        if request.method == "OPTIONS":
            preflight = self._preflight(request, origin, methods)
            headers = {
                "X-Request-Id": request_id,
                "Cache-Control": headers["Cache-Control"],
                **preflight,
                "Allow": allow,
            }
            return web.Response(status=204, headers=headers)
        if request.method not in methods:
            refusal = _refusal(
                grpc.StatusCode.UNIMPLEMENTED,
                METHOD_NOT_ALLOWED,
                f"{request.method} is not allowed here; use {' or '.join(methods)}",
                method=request.method[:ECHOED_CHARS],
            )
            headers = {**headers, "Allow": allow}
            return self._unrouted(request, request_id, refusal, headers, path)
        if path == OPENAPI_PATH:
            return web.Response(body=self._openapi, content_type=JSON_TYPE, headers=headers)
        if path in (LIVENESS_PATH, READINESS_PATH):
            serving = path == LIVENESS_PATH or self._ready
            status = "SERVING" if serving else "NOT_SERVING"
            body = f'{{"status":"{status}"}}'.encode()
            return web.Response(
                status=200 if serving else 503, body=body, content_type=JSON_TYPE, headers=headers
            )
        bound = by_method[request.method]
        # Read now: once its client has gone (mid-body, or while the call waits its turn)
        # the connection is no more, and the request line would not say whose call it was.
        peer = _peer(request)
        trace = _trace(request)
        # The deadline counts from here, once the headers are read: as near the caller's
        # send as the gateway sees.
        deadline = _deadline(request.headers.get(GRPC_TIMEOUT_HEADER))
        spent_on_arrival = callable(deadline) and deadline() == 0
        refused = self._head_refusal(request)
        payload = refused if refused is not None else await self._read_body(request)
        # Spent while the body came, before the call waits its turn: the body came too
        # slowly (or never), likelier than an overload then. A deadline spent before the
        # body began (0S, 1n) was too short whatever the body did.
        past_deadline = (
            body_past_deadline
            if not spent_on_arrival and callable(deadline) and deadline() == 0
            else deadline_exceeded
        )
        # The request message came (for grpc_server_msg_received_total) once its body did.
        received = False
        if isinstance(payload, bytes):
            received = True
            payload = _json_body(request, payload)
        await self._turns.take()
        if not isinstance(payload, ServiceError) and _client_left(request):
            # Gone while it waited its turn: work for it would be spent on an answer nobody
            # reads, as for a gRPC call past its deadline.
            payload = _client_gone("the client closed the connection before the call's turn came")
        handler: Callable[[bytes | ServiceError, CallInfo], bytes] = functools.partial(
            _call, bound, limit=self._max_request_bytes
        )
        if callable(deadline):
            handler = within_deadline(handler, deadline, past_deadline)
        outcome = self._runner.run(
            bound.route.service,
            bound.route.method,
            TRANSPORT,
            request_id,
            handler,
            payload,
            peer,
            received=received,
            trace=trace,
        )
        if outcome.error is not None:
            response = self._error_response(outcome.error, headers)
            # The body's refusal decides, also when the deadline's replaced it: unread whole.
            if isinstance(payload, ServiceError):
                closing = payload.reason in _CLOSING_BODY_REFUSALS
            else:
                closing = outcome.error.reason in _CLOSING
            if closing:
                response.force_close()
            return response
        assert outcome.response is not None
        return web.Response(body=outcome.response, content_type=JSON_TYPE, headers=headers)

    async def _read_body(self, request: web.Request) -> bytes | ServiceError:
        """The whole body of a call its head did not refuse (``_head_refusal``), or the
        refusal the ``CallRunner`` will raise for it."""
        coding = canonical_coding(_listed(request, "Content-Encoding"))
        limit = self._max_request_bytes * JSON_BODY_FACTOR
        chunks: list[bytes] = []
        refusal = await self._receive(request, coding, limit, chunks)
        if refusal is not None:
            # What came of the body is nobody's now: freed at once, whatever still holds
            # the list (a megabyte inflated from a kilobyte of gzip, per request).
            chunks.clear()
            return refusal
        return b"".join(chunks)

    async def _receive(
        self, request: web.Request, coding: str, limit: int, chunks: list[bytes]
    ) -> ServiceError | None:
        """Reads ``request``'s body into ``chunks``, inflated if ``coding`` is one the
        gateway reads, until it ends (None) or is refused."""
        too_large = request_too_large("body", limit)
        inflater = Inflater(coding, limit) if coding in CODINGS else None
        size = 0
        try:
            async with asyncio.timeout(self._body_seconds) as wait:
                self._body_waits.add(wait)
                self._end_by_drain(wait)
                try:
                    async for chunk in request.content.iter_chunked(_READ_CHUNK):
                        # The bytes as sent count too: gzip can grow without inflating.
                        size += len(chunk)
                        if size > limit:
                            return too_large
                        chunks.append(chunk if inflater is None else inflater.feed(chunk))
                    if inflater is not None:
                        inflater.finish()
                finally:
                    self._body_waits.discard(wait)
        except BodyTooLargeError:
            return too_large
        except BodyCodingError as error:
            return invalid_argument(
                REQUEST_MALFORMED,
                f"the body does not decode as the {coding} its Content-Encoding names: {error}",
                "",
            )
        except TimeoutError:
            if wait.when() == self._bodies_end_at:
                return _refusal(
                    grpc.StatusCode.UNAVAILABLE,
                    SERVER_STOPPING,
                    "the server is stopping, and the body did not arrive in time: send the "
                    "request again",
                )
            return invalid_argument(
                BODY_TIMEOUT, f"the body did not arrive within {self._body_seconds:g} s", ""
            )
        except (HttpProcessingError, ConnectionResetError, web.RequestPayloadError) as error:
            # aiohttp keeps this error on the request's stream, and its traceback holds this
            # frame, whose locals hold the request (and the inflater): a cycle that only the
            # cyclic collector would free, late, with the frames of aiohttp's reader.
            drop_tracebacks(error)
            if _client_left(request):
                # Nobody is left to read an answer: counted as a gRPC call its client
                # cancelled, not as a bad request.
                return _client_gone("the client closed the connection before the whole body came")
            # Broken chunk framing (aiohttp's pure-Python parser; its C parser stops feeding
            # the body instead). The error's text may quote the body, which may hold a token:
            # only its type is told. A read waiting when the framing broke gets the parser's
            # error; a read that came after it, aiohttp's RequestPayloadError caused by it:
            # the same mistake of the client's, so named by the parser's error either way.
            if isinstance(error, web.RequestPayloadError) and isinstance(
                error.__cause__, HttpProcessingError
            ):
                error = error.__cause__
            described = f"the body could not be read ({type(error).__name__})"
            return invalid_argument(REQUEST_MALFORMED, described, "")
        return None

    def _error_response(self, error: ServiceError, headers: Mapping[str, str]) -> web.Response:
        if error.code is grpc.StatusCode.UNAVAILABLE:
            # Another replica may serve the call (a rolling upgrade): HTTP clients' retry
            # helpers (urllib3's Retry, say) retry a 503 after the time this names.
            headers = {**headers, "Retry-After": RETRY_AFTER_SECONDS}
        elif "content_encoding" in error.metadata:
            # RFC 9110 15.5.16: a 415 for a content coding names the codings accepted.
            headers = {**headers, "Accept-Encoding": _ACCEPTED_CODINGS}
        return web.Response(
            status=http_status(error),
            body=status_json(error),
            content_type=JSON_TYPE,
            headers=headers,
        )

    def _preflight(
        self, request: web.Request, origin: str | None, methods: Sequence[str]
    ) -> dict[str, str]:
        """The CORS headers of an ``OPTIONS`` on a path serving ``methods``; a preflight
        from an origin not allowed is counted, as the page that sent it sees only
        "blocked by CORS policy" (an allowed origin's malformed one is no browser's)."""
        refused = not self._cors.allows(origin) and is_preflight(request.headers)
        if refused and self._on_refused_preflight is not None:
            self._on_refused_preflight()
        return self._cors.preflight_headers(origin, request.headers, methods)

    def _unrouted(
        self,
        request: web.Request,
        request_id: str,
        error: ServiceError,
        headers: Mapping[str, str],
        logged_path: str,
    ) -> web.Response:
        """A request no RPC sees still gets its one log line (design section 6), which
        names its path as ``logged_path``."""
        method = request.method[:16]
        fields = request_log_fields(
            request_id=request_id,
            # A target that is no path (``CONNECT host:443``) logs the method alone.
            method=f"{method} {logged_path}" if logged_path else method,
            code=code_label(error.code),
            duration_ms=0.0,
            game_id=None,
            transport=TRANSPORT,
            peer=_peer(request),
            trace=_trace(request),
        )
        self._log.info("request", reason=error.reason, **fields)
        return self._error_response(error, headers)


def _trace(request: web.Request) -> Trace | None:
    """The trace-id and parent-id of the request's ``traceparent`` header for its log
    line (design section 6), when it has one valid one (``service.trace_context``);
    never echoed."""
    headers = request.headers
    traceparent = headers.get(TRACEPARENT_HEADER)
    if traceparent is not None and len(headers.getall(TRACEPARENT_HEADER)) > 1:
        traceparent = DUPLICATE
    return trace_from(traceparent)


def _shown_in_log(path: str, near: str) -> bool:
    """Whether the request line may hold ``path`` as it came: a path that looks like a
    route, or one a slip away from a route (``near``) in printable ASCII. A slip may hold
    any character, and one that is invisible or moves text (U+2028, U+0085, U+202E) would
    make a line read as another; the JSON renderer escapes only control characters."""
    if _ROUTE_LIKE_PATH.fullmatch(path):
        return True
    return bool(near) and path.isascii() and path.isprintable()


def _length_of(path: str) -> str:
    """What the request line says of a path that could hold a token (design section 6)."""
    return f"[a path of {len(path)} characters]"


def _call(bound: _Bound, body: bytes | ServiceError, info: CallInfo, limit: int) -> bytes:
    """Inside the ``CallRunner``: so protocol refusals on a route are counted and logged
    too, and the call's duration includes rendering the JSON answer, which for a long
    list of legal moves costs more than finding them."""
    if isinstance(body, ServiceError):
        raise body
    request = parse_request(body, bound.route.request_class, limit)
    if request.ByteSize() > limit:
        raise request_too_large("request", limit)
    return message_json(bound.handler(request, info))


def _deadline(header: str | None) -> Callable[[], float] | ServiceError | None:
    """The seconds left to a call with this ``Grpc-Timeout`` header, from now (0 once it
    has passed), for ``within_deadline``; the refusal of a malformed one; None without."""
    if header is None:
        return None
    try:
        seconds = timeout_seconds(header)
    except ServiceError as refusal:
        return refusal
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    return lambda: max(0.0, end - loop.time())


def _is_json(content_type: str) -> bool:
    media_type, _, parameters = content_type.partition(";")
    if media_type.strip().lower() != JSON_TYPE:
        return False
    for parameter in parameters.split(";"):
        name, _, value = parameter.partition("=")
        # "utf8" too: WHATWG's label for UTF-8, which some clients send.
        charset = value.strip().strip('"').lower()
        if name.strip().lower() == "charset" and charset not in ("utf-8", "utf8"):
            return False
    return True


def _peer(request: web.Request) -> str | None:
    """``ipv4:127.0.0.1:50123``, spelled as gRPC spells its peers."""
    transport = request.transport
    peer = transport.get_extra_info("peername") if transport is not None else None
    if not isinstance(peer, tuple) or len(peer) < 2:
        return None
    host, port = peer[0], peer[1]
    return f"ipv6:[{host}]:{port}" if ":" in str(host) else f"ipv4:{host}:{port}"


# aiohttp's own shutdown stops reading request bodies at once, so the drain
# waits for requests in flight first, and ends the bodies still arriving itself;
# this is only for an answer the client has not taken by then.
_FINAL_SHUTDOWN_SECONDS = 1.0


def _listed(request: web.Request, header: str) -> str:
    """A list header's values, lower case: every line, as two mean what one "gzip, deflate"
    does (RFC 9110, 5.3), not the first."""
    return ", ".join(request.headers.getall(header, ())).strip().lower()


async def _answer_as_http11(request: web.Request, response: web.StreamResponse) -> None:
    """Send ``response`` (a 505) to a request of another HTTP version with ``HTTP/1.1`` in
    its status line: RFC 9112, 2.3 has a server name the highest version it speaks, not the
    request's. aiohttp writes the version of the request a response is prepared for
    (``HTTP/2.0 505``) and takes no other, so the answer is prepared here for a copy of the
    request that says HTTP/1.1 and asks to close; aiohttp then finds it sent already."""
    message = RawRequestMessage(
        method=request.method,
        path=request.raw_path,
        version=HttpVersion11,
        headers=request.headers,
        raw_headers=request.raw_headers,
        should_close=True,
        compression=None,
        upgrade=False,
        chunked=False,
        url=request.rel_url,
    )
    as_http11 = web.BaseRequest(
        message,
        request.content,
        request.protocol,
        request.writer,
        request.task,
        asyncio.get_running_loop(),
    )
    await _common_headers(request, response)  # as_http11 has no app to run the signal
    # A client gone meanwhile: aiohttp's own write of the answer, which follows, meets it.
    with contextlib.suppress(ConnectionError):
        await response.prepare(as_http11)
        await response.write_eof()


async def _common_headers(_request: web.Request, response: web.StreamResponse) -> None:
    # aiohttp's default Server names Python's and its own version: a hint for anyone
    # scanning for servers with a known flaw.
    response.headers["Server"] = SERVER_HEADER
    # Every body is JSON; a browser must not guess otherwise.
    response.headers["X-Content-Type-Options"] = "nosniff"


@dataclass(slots=True)
class HttpServer:
    """A started gateway: its port, and ``stop`` for the SIGTERM drain (design section 6)."""

    gateway: HttpGateway
    runner: web.AppRunner
    port: int
    grace_seconds: float

    async def stop(self) -> None:
        """Stop accepting, let requests in flight finish within the grace period, close."""
        for site in list(self.runner.sites):
            await site.stop()
        await self.gateway.drain(self.grace_seconds)
        await self.runner.cleanup()


async def start_http(
    gateway: HttpGateway,
    host: str,
    port: int,
    *,
    reuse_port: bool,
    grace_seconds: float,
    keepalive_seconds: float = KEEPALIVE_SECONDS,
) -> HttpServer:
    """Listen on ``host:port`` (0 = any free port) in the running event loop; a wildcard
    host on IPv4 and IPv6 alike, as gRPC serves it (``service.listen``), a name on every
    address it resolves to; all of them on one port."""
    runner = web.AppRunner(
        gateway.application(),
        access_log=None,
        auto_decompress=False,  # the gateway inflates bodies itself (service.content_coding)
        shutdown_timeout=_FINAL_SHUTDOWN_SECONDS,
        keepalive_timeout=keepalive_seconds,
    )
    await runner.setup()
    try:
        # Resolved here, numeric, not by each site: a site given a name binds every
        # address it resolves to, each on a port of its own when the port is 0. On the
        # loop, as the port check and gRPC did just before: nothing is served yet, and a
        # thread for it would be one more to start (and to fail under a pids limit).
        addresses = listen_addresses(host, port)
        port = one_port(addresses, port)
        for _, address in addresses:
            site = web.TCPSite(runner, numeric_host(address), port, reuse_port=reuse_port or None)
            await site.start()
            port = _bound_port(runner.addresses)  # port 0 at a single address
    except BaseException:
        await runner.cleanup()
        raise
    return HttpServer(gateway, runner, port, grace_seconds)


def _bound_port(addresses: Iterable[Any]) -> int:
    for address in addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            port: int = address[1]
            return port
    raise RuntimeError("the HTTP site has no TCP address")
