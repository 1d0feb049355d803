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

import asyncio
import contextlib
import inspect
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar, cast

import grpc
from google.protobuf import descriptor_pool
from google.protobuf.message import DecodeError
from grpc_health.v1 import health, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2_grpc

from service.errors import REQUEST_MALFORMED, invalid_argument
from service.grpc_service import abort_refused

Context = grpc.aio.ServicerContext[Any, Any]
_T = TypeVar("_T")
Parse = Callable[[bytes], Any]


def add_health_and_reflection(
    server: grpc.aio.Server,
    health_servicer: health.aio.HealthServicer,
    reflection_servicer: DrainingReflection,
) -> None:
    """Serve ``health_servicer`` and ``reflection_servicer`` on ``server``."""
    # The generated functions use only the two methods _ParsingInside has.
    parsing = cast(grpc.aio.Server, _ParsingInside(server))
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, parsing)
    # grpcio-reflection ships its generated reflection_pb2_grpc without annotations.
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(  # type: ignore[no-untyped-call]
        reflection_servicer, parsing
    )


class DrainingReflection:
    """Server reflection whose streams end when the server stops, and which describes a
    method as grpcurl asks for it (``describe Service.Method``).

    A reflection stream stays open as long as its client (a GUI tool's session)
    wants, and like a health Watch it held ``server.stop`` for the whole grace
    period: every rollout took 10 s longer while anyone had a tool connected.
    """

    def __init__(self, service_names: Sequence[str]) -> None:
        self._servicer = reflection.aio.ReflectionServicer(service_names)
        self._stopping = asyncio.Event()

    async def ServerReflectionInfo(  # noqa: N802 - the name is the RPC's
        self, request_iterator: AsyncIterator[Any], context: Context
    ) -> AsyncIterator[Any]:
        asked: deque[Any] = deque()  # each answer's request, as its client sent it
        inner = cast(Any, self._servicer).ServerReflectionInfo(
            _methods_by_service(request_iterator, asked), context
        )
        answers = cast(AsyncIterator[Any], inner).__aiter__()
        while True:
            answer = await until_stopped(self._stopping, answers.__anext__())
            if answer is None:  # stopping: the stream ends with status OK
                return
            try:
                response = answer.result()
            except StopAsyncIteration:
                return
            response.original_request.CopyFrom(asked.popleft())
            yield response

    def end_streams(self) -> None:
        """End every reflection stream, and each one opened from now on."""
        self._stopping.set()


async def until_stopped(
    stopping: asyncio.Event, awaitable: Awaitable[_T]
) -> asyncio.Future[_T] | None:
    """``awaitable`` run until it ends or ``stopping`` is set: its finished future, whose
    result the caller reads, or None once ``stopping`` came first (``awaitable`` is then
    cancelled). Also when the caller is cancelled meanwhile (its client gone), no task is
    left to end unseen, which asyncio logs at error level ("Task exception was never
    retrieved")."""
    task = asyncio.ensure_future(awaitable)
    stopped = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait((task, stopped), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        if not task.cancel() and not task.cancelled():
            task.exception()  # marks it read; the caller reads it again with result()
    return task if task.done() and not task.cancelled() else None


async def _methods_by_service(
    requests: AsyncIterator[Any], asked: deque[Any]
) -> AsyncIterator[Any]:
    """Each request, a method's name asked as its service's: the pool grpc's reflection
    reads (upb's) finds no method by its name (grpc/grpc#34743), so grpcurl's describe
    of ``Service.Method`` was NOT_FOUND."""
    async for request in requests:
        asked.append(request)
        service, _, method = request.file_containing_symbol.rpartition(".")
        with contextlib.suppress(KeyError):
            if method in descriptor_pool.Default().FindServiceByName(service).methods_by_name:
                request = type(request)(file_containing_symbol=service)
        yield request


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
