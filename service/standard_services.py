"""gRPC's standard health and reflection services, refusing undecodable requests as
``REQUEST_MALFORMED`` (design section 5), as the Krypkasino RPCs do.

Their generated handlers have grpc.aio parse each request before the servicer
runs, and grpc.aio answers bytes that do not parse with ``UNKNOWN`` and logs the
``DecodeError`` with its traceback at error level: any client could fill the
log with errors and trip the alerts on them. ``add_health_and_reflection`` registers the
same handlers taking the raw bytes and parses them inside, where a refusal is
``INVALID_ARGUMENT`` with its ``ErrorInfo``, and nothing is logged.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, cast

import grpc
from google.protobuf.message import DecodeError
from grpc_health.v1 import health, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2_grpc

from service.errors import REQUEST_MALFORMED, invalid_argument
from service.grpc_service import abort_refused

Context = grpc.aio.ServicerContext[Any, Any]
Parse = Callable[[bytes], Any]


def add_health_and_reflection(
    server: grpc.aio.Server, health_servicer: health.aio.HealthServicer, reflected: Sequence[str]
) -> None:
    """Serve ``health_servicer`` and reflection of the services ``reflected`` on ``server``."""
    # The generated functions use only the two methods _ParsingInside has.
    parsing = cast(grpc.aio.Server, _ParsingInside(server))
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, parsing)
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(  # type: ignore[no-untyped-call]
        reflection.aio.ReflectionServicer(reflected), parsing
    )


class _ParsingInside:
    """What the generated ``add_*Servicer_to_server`` functions use of a server: each
    handler goes to ``server`` with its request parsed inside it."""

    def __init__(self, server: grpc.aio.Server) -> None:
        self._server = server

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        self._server.add_generic_rpc_handlers(tuple(_ParsingGeneric(h) for h in handlers))

    def add_registered_method_handlers(
        self, service: str, handlers: dict[str, grpc.RpcMethodHandler[Any, Any]]
    ) -> None:
        self._server.add_registered_method_handlers(
            service,
            {name: _parsed_inside(h, f"/{service}/{name}") for name, h in handlers.items()},
        )


class _ParsingGeneric(grpc.GenericRpcHandler):
    def __init__(self, handler: grpc.GenericRpcHandler) -> None:
        self._handler = handler

    def service(
        self, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        found = self._handler.service(handler_call_details)
        return None if found is None else _parsed_inside(found, handler_call_details.method)


def _parsed_inside(
    handler: grpc.RpcMethodHandler[Any, Any], method: str
) -> grpc.RpcMethodHandler[Any, Any]:
    """``handler`` taking raw bytes, its own deserializer run inside it. The kinds of
    method the health and reflection servicers of grpc.aio have, only: grpc.aio tells a
    coroutine (reader-writer API) from an async generator by its kind."""
    parse = handler.request_deserializer
    serialize = handler.response_serializer
    if parse is None:
        raise TypeError(f"{method}: no request deserializer to run inside")
    if inspect.iscoroutinefunction(handler.unary_unary):
        return grpc.unary_unary_rpc_method_handler(
            _unary(handler.unary_unary, parse, method), None, serialize
        )
    if inspect.iscoroutinefunction(handler.unary_stream):
        return grpc.unary_stream_rpc_method_handler(
            _unary(handler.unary_stream, parse, method), None, serialize
        )
    if inspect.isasyncgenfunction(handler.stream_stream):
        return grpc.stream_stream_rpc_method_handler(
            _streaming(handler.stream_stream, parse, method), None, serialize
        )
    raise TypeError(f"{method}: not an async method of a kind served here")


def _unary(behaviour: Callable[..., Any], parse: Parse, method: str) -> Callable[..., Any]:
    async def answer(raw: bytes, context: Context) -> Any:
        return await behaviour(await _parsed(raw, parse, method, context), context)

    return answer


def _streaming(behaviour: Callable[..., Any], parse: Parse, method: str) -> Callable[..., Any]:
    async def answers(raws: AsyncIterator[bytes], context: Context) -> AsyncIterator[Any]:
        async def requests() -> AsyncIterator[Any]:
            async for raw in raws:
                yield await _parsed(raw, parse, method, context)

        async for answer in behaviour(requests(), context):
            yield answer

    return answers


async def _parsed(raw: bytes, parse: Parse, method: str, context: Context) -> Any:
    try:
        return parse(raw)
    except DecodeError:
        await abort_refused(
            context,
            invalid_argument(
                REQUEST_MALFORMED, f"the request bytes are not a request message of {method}", ""
            ),
        )
