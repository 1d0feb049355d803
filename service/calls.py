"""One code path around every call, whatever the transport (design sections 5 and 6).

``CallRunner.run`` executes a handler, turns any refusal into a
``ServiceError`` (and any other exception into ``INTERNAL``, logged as the bug
it is), records the go-grpc-prometheus metrics and writes the one log line
per request. gRPC and HTTP only render the outcome.

It runs on every request, so it is kept lean: no uuid (a
``getrandom`` system call) per request id, a plain (not frozen) ``Outcome``,
and a logger bound once (``CallRunner`` is built after ``configure_logging``).
"""

from __future__ import annotations

import itertools
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import grpc
from cardrules.client.errors import USABLE_REQUEST_ID
from google.protobuf.message import Message

from service.errors import ServiceError, deadline_exceeded, drop_tracebacks, internal_error
from service.logs import bound_logger, request_log_fields, trace_log_fields
from service.metrics import ServiceMetrics, code_label
from service.trace_context import Trace

RequestT = TypeVar("RequestT")
ResponseT = TypeVar("ResponseT")

REQUEST_ID_HEADER = "x-request-id"
_OK = code_label(grpc.StatusCode.OK)
# The answers a call's domain counters are not counted for (``CallInfo``): dropped at
# the deadline (``within_deadline``) or failed by a bug.
_NOT_STANDING = frozenset({grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.INTERNAL})
# The one ErrorInfo metadata key a refusal's request line carries: the id of a key the
# pod lacks (TOKEN_UNKNOWN_KEY, SEAT_TOKEN_INVALID), 4 bytes of SHA-256 of the key in
# hex, no secret, which ErrorInfo shows only the caller. Never the rest: other
# refusals' metadata names cards, and a log line never carries a hand (design section 6).
_LOGGED_METADATA = "key_id"
# Hex digits and dashes of one case: a tool's 32 hex digits, or a UUID's text (Envoy's
# ids; macOS uuidgen's are upper case), which under a key id whose start is hex (a key in
# 1,000 for each case) held that start and 22 more characters of the URL-safe alphabet
# about once in 250,000 (a review).
_HEX_OR_UUID = re.compile("[0-9a-f-]+|[0-9A-F-]+")


@dataclass(slots=True)
class CallInfo:
    """What a handler tells about its call: the game for the request log line, and the
    domain counters of what it did (design section 6), counted by ``CallRunner`` only
    when its answer stands. A call dropped at its deadline, or failed by a bug, counts
    none: no caller received the game it started or the move it played.

    The rest place the call in its game's timeline on its line (``request_log_fields``),
    each None when unknown, and never anything of a hand: ``seat``, the seat the request
    names; ``move_number``, the one of the state it sent; ``state_id``, the answered
    state's, only where the answer computes it anyway; ``deal_source`` and
    ``draw_given``, what a NewGame chose of its cards."""

    game_id: str | None = None
    counts: list[Callable[[], None]] = field(default_factory=list)
    seat: int | None = None
    move_number: int | None = None
    state_id: str | None = None
    deal_source: str | None = None
    draw_given: bool | None = None


#: An API method as both transports call it: a request message in, a response out.
Handler = Callable[[Any, CallInfo], Message]


# Not frozen: a frozen dataclass's __init__ costs three object.__setattr__ calls per request.
@dataclass(slots=True)
class Outcome(Generic[ResponseT]):
    """Exactly one of ``response`` and ``error`` is set."""

    response: ResponseT | None
    error: ServiceError | None


def within_deadline(
    handler: Callable[[RequestT, CallInfo], ResponseT],
    time_remaining: Callable[[], float | None],
    refusal: Callable[[], ServiceError] = deadline_exceeded,
) -> Callable[[RequestT, CallInfo], ResponseT]:
    """``handler``, refused with ``refusal()`` (a ``DEADLINE_EXCEEDED``) once the call's
    deadline has passed, before it runs or by the time it has answered or refused.

    ``time_remaining`` gives the seconds left: 0 once the deadline has passed, None
    without one (a gRPC call's ``context.time_remaining``; an HTTP call's
    ``Grpc-Timeout``). An overloaded server queues calls until their callers stop
    waiting; doing their work anyway would spend it on answers nobody reads, and log
    and count them OK.
    """

    def handle(request: RequestT, info: CallInfo) -> ResponseT:
        if time_remaining() == 0:
            raise refusal()
        try:
            response = handler(request, info)
        except ServiceError:
            if time_remaining() == 0:  # a refusal nobody reads either
                raise refusal() from None
            raise
        if time_remaining() == 0:
            raise refusal()
        return response

    return handle


class _RequestIds:
    """Request ids: a random per-process prefix and a counter.

    Ids only correlate log lines and responses, they are no secret and need
    not be unguessable: 64 random bits per process (drawn again in each forked
    worker) and a 64-bit counter give 32 hex digits, as ``uuid4().hex`` did,
    unique across processes and calls without a system call per request.
    """

    def __init__(self) -> None:
        self.reseed()

    def reseed(self) -> None:
        """A new prefix and counter: at start and in every forked child."""
        self.prefix = os.urandom(8).hex()
        self.counter = itertools.count()

    def new(self) -> str:
        # next() on itertools.count is atomic under the GIL: threads never share an id.
        return f"{self.prefix}{next(self.counter):016x}"


_REQUEST_IDS = _RequestIds()
# Workers fork from one supervisor: without this they would hand out the same ids.
os.register_at_fork(after_in_child=_REQUEST_IDS.reseed)


def new_request_id() -> str:
    """A request id unique to this process and call (32 hex digits)."""
    return _REQUEST_IDS.new()


def request_id_from(value: str | None, seat_tokens: re.Pattern[str] | None = None) -> str:
    """The caller's request id if it is usable, else a new one.

    Usable: 1 to 128 printable ASCII characters, spaces only inside. gRPC
    metadata holds nothing else: an "é" echoed in the trailers of a refusal
    turned the refusal into INTERNAL. Nor may it hold the text of a seat token of
    this server's keys (``KeyRing.seat_token_pattern``), a seat's credential for the
    whole match, which is never logged (design sections 4 and 6): a backend that sent
    one as the id had it on the request line, beside the game and seat it opens. Its
    key id's first 5 characters tell it; 27 hex digits and dashes of one case are not
    taken for one (a token's are, about once in 2**42), or the 32 hex digits and the UUIDs of
    most tools' ids would be under a key id whose start is hex (a key in 1,000).
    """
    if (
        value
        and USABLE_REQUEST_ID.fullmatch(value)
        and not (
            seat_tokens is not None
            and any(not _HEX_OR_UUID.fullmatch(text) for text in seat_tokens.findall(value))
        )
    ):
        return value
    return new_request_id()


class CallRunner:
    """Runs handlers with metrics and request logging."""

    def __init__(
        self, metrics: ServiceMetrics | None, seat_tokens: re.Pattern[str] | None = None
    ) -> None:
        self._metrics = metrics
        self._log = bound_logger("cardrules.requests")
        self._seat_tokens = seat_tokens

    def request_id(self, supplied: str | None) -> str:
        """The call's request id: ``supplied`` if usable (``request_id_from``), else new."""
        return request_id_from(supplied, self._seat_tokens)

    def run(
        self,
        service: str,
        method: str,
        transport: str,
        request_id: str,
        handler: Callable[[RequestT, CallInfo], ResponseT],
        request: RequestT,
        peer: str | None = None,
        received: bool = True,
        attempt: int = 1,
        trace: Trace | None = None,
    ) -> Outcome[ResponseT]:
        """``handler`` on ``request``, counted, timed and logged; ``received`` is False
        when the request message never came (an HTTP body refused before or while it was
        read); ``attempt`` is 2 or more for a client's retry of the call; ``trace`` is
        the trace-id and parent-id of its valid ``traceparent``
        (``service.trace_context``), on both of its lines (design section 6)."""
        info = CallInfo()
        metrics = self._metrics
        started = time.perf_counter()
        if metrics is not None:
            metrics.rpc_started(service, method, received, retried=attempt > 1)
        response: ResponseT | None = None
        error: ServiceError | None = None
        try:
            response = handler(request, info)
        except ServiceError as refusal:
            # Its traceback holds this frame, whose ``error`` holds it, and by the frame
            # chain the transport's, with the request and its bytes: a cycle kept until
            # Python's full collection. Nothing logs it (its line tells the reason only).
            drop_tracebacks(refusal)
            error = refusal
        except Exception:
            # Named as its request line names the call, which is logged only afterwards.
            traced = {} if trace is None else trace_log_fields(trace)
            self._log.exception(
                "unhandled error",
                request_id=request_id,
                method=f"{service}/{method}",
                transport=transport,
                game_id=info.game_id,
                **traced,
            )
            error = internal_error()
        seconds = time.perf_counter() - started
        code = _OK if error is None else code_label(error.code)
        if metrics is not None:
            metrics.rpc_handled(service, method, code, seconds)
        if error is None or error.code not in _NOT_STANDING:
            for count in info.counts:
                count()
        # The state a handler made is on the line only if its caller got it: a call
        # dropped at its deadline after the handler had sealed one would read as a move
        # delivered (docs/operations.md, "Log lines").
        state_id = info.state_id if error is None else None
        fields = request_log_fields(
            request_id=request_id,
            method=f"{service}/{method}",
            code=code,
            duration_ms=seconds * 1000,
            game_id=info.game_id,
            transport=transport,
            peer=peer,
            seat=info.seat,
            move_number=info.move_number,
            state_id=state_id,
            deal_source=info.deal_source,
            draw_given=info.draw_given,
            attempt=attempt,
            trace=trace,
        )
        if error is None:
            self._log.info("request", **fields)
        else:
            self._log.info("request", reason=error.reason, **_logged_metadata(error), **fields)
        return Outcome(response, error)


def _logged_metadata(error: ServiceError) -> dict[str, str]:
    """What of ``error``'s metadata its request line carries: a lacking key's id only."""
    key_id = error.metadata.get(_LOGGED_METADATA)
    return {} if key_id is None else {_LOGGED_METADATA: key_id}
