"""One code path around every call, whatever the transport (design sections 5 and 6).

``CallRunner.run`` executes a handler, turns any refusal into a
``ServiceError`` (and any other exception into ``INTERNAL``, logged as the bug
it is), records the go-grpc-prometheus metrics and writes the one log line
per request. gRPC and HTTP only render the outcome.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import grpc

from service.errors import ServiceError, internal_error
from service.logs import get_logger, request_log_fields
from service.metrics import ServiceMetrics, code_label

RequestT = TypeVar("RequestT")
ResponseT = TypeVar("ResponseT")

REQUEST_ID_HEADER = "x-request-id"
_MAX_REQUEST_ID = 128


@dataclass(slots=True)
class CallInfo:
    """What a handler learns about its call, for the request log line."""

    game_id: str | None = None


@dataclass(frozen=True, slots=True)
class Outcome(Generic[ResponseT]):
    """Exactly one of ``response`` and ``error`` is set."""

    response: ResponseT | None
    error: ServiceError | None
    request_id: str


def request_id_from(value: str | None) -> str:
    """The caller's request id if it is usable, else a new one."""
    if value and len(value) <= _MAX_REQUEST_ID and value.isprintable():
        return value
    return uuid.uuid4().hex


class CallRunner:
    """Runs handlers with metrics and request logging."""

    def __init__(self, metrics: ServiceMetrics | None) -> None:
        self._metrics = metrics
        self._log = get_logger("cardrules.requests")

    def run(
        self,
        service: str,
        method: str,
        transport: str,
        request_id: str,
        handler: Callable[[RequestT, CallInfo], ResponseT],
        request: RequestT,
        peer: str | None = None,
    ) -> Outcome[ResponseT]:
        info = CallInfo()
        started = time.perf_counter()
        if self._metrics is not None:
            self._metrics.rpc_started(service, method)
        response: ResponseT | None = None
        error: ServiceError | None = None
        try:
            response = handler(request, info)
        except ServiceError as refusal:
            error = refusal
        except Exception:
            self._log.exception("unhandled error", method=method, request_id=request_id)
            error = internal_error()
        seconds = time.perf_counter() - started
        code = code_label(grpc.StatusCode.OK if error is None else error.code)
        if self._metrics is not None:
            self._metrics.rpc_handled(service, method, code, seconds)
        fields = request_log_fields(
            request_id=request_id,
            method=f"{service}/{method}",
            code=code,
            duration_ms=round(seconds * 1000, 3),
            game_id=info.game_id,
            transport=transport,
            peer=peer,
        )
        if error is None:
            self._log.info("request", **fields)
        else:
            self._log.info("request", reason=error.reason, **fields)
        return Outcome(response, error, request_id)
