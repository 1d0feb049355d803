"""The gRPC face of the Krypkasino API (design section 3): a thin grpc.aio servicer.

Every RPC of ``KrypkasinoService`` takes the raw request bytes, checks their
size and parses them inside the shared ``CallRunner``, and hands the message
to the transport-free ``KrypkasinoApi`` method of the same name (``GetView``
-> ``get_view``, as the HTTP gateway does). A request over
``--max-request-bytes`` and bytes that are not the request message are
therefore refused like any other bad input (``REQUEST_TOO_LARGE``,
``REQUEST_MALFORMED``: counted, logged, one ``ErrorInfo``) rather than by
grpc itself without details, and fields this release does not know are
refused (``FIELD_UNKNOWN``) as the HTTP gateway refuses unknown names, not
ignored. A refusal becomes the rich ``google.rpc.Status``
in the trailing metadata (``grpc-status-details-bin``). A call whose deadline
has passed is not served (docs/operations.md, "Overload").
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any, NoReturn, TypeVar, cast
from urllib.parse import unquote

import grpc
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass
from google.protobuf.unknown_fields import UnknownFieldSet
from grpc_status import rpc_status

from service.calls import (
    REQUEST_ID_HEADER,
    CallInfo,
    CallRunner,
    Handler,
    within_deadline,
)
from service.codec import unknown_field_bytes
from service.descriptors import snake_case
from service.errors import (
    DEADLINE_EXCEEDED,
    FIELD_UNKNOWN,
    REQUEST_MALFORMED,
    ServiceError,
    drop_tracebacks,
    invalid_argument,
    request_too_large,
)
from service.krypkasino_api import SERVICE_DESCRIPTOR, SERVICE_NAME, KrypkasinoApi
from service.trace_context import DUPLICATE, TRACEPARENT_HEADER, Trace, trace_from

RequestT = TypeVar("RequestT")
ResponseT = TypeVar("ResponseT")

#: What gRPC's retry policy sends with each retry of a call: the attempts before it.
PREVIOUS_ATTEMPTS_HEADER = "grpc-previous-rpc-attempts"
# Its values and the attempt each makes this call: gRPC makes at most 5 attempts.
_ATTEMPT_AFTER = {str(previous): previous + 1 for previous in range(1, 5)}


class KrypkasinoServicer:
    """Serves ``cardrules.krypkasino.v1.KrypkasinoService`` over gRPC."""

    def __init__(self, api: KrypkasinoApi, runner: CallRunner, max_request_bytes: int) -> None:
        self._api = api
        self._runner = runner
        self._max_request_bytes = max_request_bytes

    def rpc_handler(self) -> grpc.GenericRpcHandler:
        """The handler of every RPC of the service, for ``server.add_generic_rpc_handlers``."""
        handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
        for method in SERVICE_DESCRIPTOR.methods:
            parse_then_handle = parsing(
                GetMessageClass(method.input_type),
                getattr(self._api, snake_case(method.name)),
                self._max_request_bytes,
            )
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                self._serving(method.name, parse_then_handle),
                response_serializer=GetMessageClass(method.output_type).SerializeToString,
            )
        return grpc.method_handlers_generic_handler(SERVICE_NAME, handlers)

    def _serving(
        self, method: str, handler: Handler
    ) -> Callable[[bytes, grpc.aio.ServicerContext[bytes, Message]], Awaitable[Message]]:
        runner = self._runner

        async def serve(
            request: bytes, context: grpc.aio.ServicerContext[bytes, Message]
        ) -> Message:
            return await serve_call(runner, SERVICE_NAME, method, handler, request, context)

        return serve


async def abort_refused(
    context: grpc.aio.ServicerContext[Any, Any],
    refusal: ServiceError,
    *trailers: tuple[str, str],
) -> NoReturn:
    """End the call with ``refusal`` as the rich ``google.rpc.Status`` (its code, message
    and ``grpc-status-details-bin``), and ``trailers`` after it."""
    status = rpc_status.to_status(refusal.to_status())
    await context.abort(status.code, status.details, (*status.trailing_metadata, *trailers))
    raise AssertionError("abort returned")  # it raises; for the type checker


def parsing(request_class: type[Message], handler: Handler, limit: int) -> Handler:
    """``handler`` behind the size check and parsing of its request from the raw bytes."""
    name = request_class.DESCRIPTOR.full_name

    def parse_then_handle(raw: bytes, info: CallInfo) -> Message:
        if len(raw) > limit:
            raise request_too_large("request", limit)
        try:
            request = request_class.FromString(raw)
        except DecodeError:
            raise invalid_argument(
                REQUEST_MALFORMED, f"the request bytes are not a {name} message", ""
            ) from None
        # Protobuf would ignore them, and with them what a newer client asked for (a
        # rule flag this release lacks would make a game under other rules).
        if unknown := unknown_field_bytes(request):
            if (
                unknown <= _MISENCODED_SEARCH_BYTES
                and (path := _misencoded_field(request_class.FromString(raw))) is not None
            ):
                # The field first, its violation the why alone (docs/api.md, "Errors").
                raise invalid_argument(
                    REQUEST_MALFORMED,
                    f"{path}: encoded as another type than the field's, so the request "
                    f"bytes are not a {name} message",
                    path,
                )
            raise invalid_argument(
                FIELD_UNKNOWN,
                f"the request holds fields that {name} does not have in this release "
                "(a client built from a newer API than this server's)",
                "",
            )
        return handler(request, info)

    return parse_then_handle


#: Messages ``_misencoded_field`` looks into at most, and the most bytes of unknown
#: fields a request may hold for it to look at all: a request of 64 KiB holds 32,000
#: empty cards or 32,000 unknown fields, and reading either took about 40 to 90 ms of
#: the event loop. Real requests hold a few dozen messages.
_MISENCODED_SEARCH_LIMIT = 1000
_MISENCODED_SEARCH_BYTES = 2048


def _misencoded_field(request: Message) -> str | None:
    """The proto path of a field ``request`` holds under a known number but with another
    wire type (protobuf keeps those as unknown fields), or None, also when there are more
    messages in it than ``_MISENCODED_SEARCH_LIMIT``.

    Corrupt bytes, not a newer client: no release changes a field's type.
    """
    for message, path in itertools.islice(_messages(request, ""), _MISENCODED_SEARCH_LIMIT):
        known = message.DESCRIPTOR.fields_by_number
        unknowns = UnknownFieldSet(message)
        for index in range(len(unknowns)):  # its type stubs know no __iter__
            if (field := known.get(unknowns[index].field_number)) is not None:
                return f"{path}{field.name}"
    return None


def _messages(message: Message, path: str) -> Iterator[tuple[Message, str]]:
    """``message`` and every message in it, depth first, each with its path's prefix."""
    yield message, path
    for field, value in message.ListFields():
        if field.message_type is None or field.message_type.GetOptions().map_entry:
            continue  # no request has a map of messages
        if field.is_repeated:
            for index, element in enumerate(value):
                yield from _messages(element, f"{path}{field.name}[{index}].")
        else:
            yield from _messages(value, f"{path}{field.name}.")


async def serve_call(
    runner: CallRunner,
    service: str,
    method: str,
    handler: Callable[[RequestT, CallInfo], ResponseT],
    request: RequestT,
    context: grpc.aio.ServicerContext[RequestT, ResponseT],
) -> ResponseT:
    """One gRPC call through ``runner``: the caller's request id, metrics, the log line
    (with the trace-id and parent-id of the caller's ``traceparent``, which is not
    echoed), and a refusal aborted as the rich ``google.rpc.Status`` (a call past its
    deadline gets nothing); the request id goes back in the trailers of every answer.
    Every RPC takes this path."""
    supplied, attempt, trace = call_headers(context.invocation_metadata())
    request_id = runner.request_id(supplied)
    outcome = runner.run(
        service,
        method,
        "grpc",
        request_id,
        within_deadline(handler, context.time_remaining),
        request,
        peer(context),
        attempt=attempt,
        trace=trace,
    )
    if outcome.error is not None:
        if outcome.error.reason == DEADLINE_EXCEEDED:
            # Nothing to send: grpc ends the call itself at its deadline, and an answer
            # sent to an ended call makes grpc log an error with a traceback.
            raise asyncio.CancelledError

        try:
            await abort_refused(context, outcome.error, (REQUEST_ID_HEADER, request_id))
        except grpc.aio.AbortError as aborted:
            # grpc keeps it on the call's state, which the context holds, and raises it
            # again once this returns: nothing returned is sent. Raised on from here, its
            # traceback would hold these frames, with the context and the request's bytes,
            # in a cycle kept until Python's full collection.
            drop_tracebacks(aborted)
            return cast(ResponseT, None)
    assert outcome.response is not None
    context.set_trailing_metadata(((REQUEST_ID_HEADER, request_id),))
    return outcome.response


def peer(context: grpc.aio.ServicerContext[Any, Any]) -> str:
    """The call's peer as the request line spells it, HTTP's spelling: grpc
    percent-encodes an IPv6 peer's brackets (``ipv6:%5B::1%5D:43996``), not an IPv4
    one's, which is left untouched at no cost on the path of every call."""
    address = context.peer()
    return unquote(address) if "%" in address else address


def call_headers(
    metadata: Iterable[tuple[str, str | bytes]] | None,
) -> tuple[str | None, int, Trace | None]:
    """The caller's request id, the first one sent (as the HTTP gateway takes the first
    X-Request-Id header), which attempt of its call this is: 1, or the retry that
    ``grpc-previous-rpc-attempts`` makes it (any other value counts as 1), and the
    trace-id and parent-id of its W3C ``traceparent`` when it sent one valid one (design
    section 6).

    One pass over the metadata, on every call (a plain tuple: a NamedTuple's ``__new__``
    would cost more); a ``traceparent`` is parsed after it, and only when one came."""
    supplied: str | bytes | None = None
    attempt = 1
    traceparent: str | bytes | None = None
    for key, value in metadata or ():
        if key == REQUEST_ID_HEADER and supplied is None:
            supplied = value
        elif key == PREVIOUS_ATTEMPTS_HEADER and isinstance(value, str):
            attempt = _ATTEMPT_AFTER.get(value, 1)
        elif key == TRACEPARENT_HEADER:
            # grpc 1.85 hands on one (the last sent); should another pass two, both go.
            traceparent = value if traceparent is None else DUPLICATE
    return (
        supplied if isinstance(supplied, str) else None,
        attempt,
        trace_from(traceparent) if isinstance(traceparent, str) else None,
    )
