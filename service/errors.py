"""Domain errors mapped to ``google.rpc.Status`` in one place (design section 5).

Every refusal carries exactly one ``ErrorInfo`` (domain ``cardrules``, a
stable UPPER_SNAKE reason, dynamic values in metadata) and, for malformed
input, a ``BadRequest`` with field violations. gRPC and HTTP both render the
same ``Status``; only ``INTERNAL`` is reserved for bugs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import google.rpc.code_pb2 as code_pb2
import google.rpc.error_details_pb2 as error_details_pb2
import google.rpc.status_pb2 as status_pb2
import grpc
from google.protobuf import any_pb2

DOMAIN = "cardrules"


@dataclass(frozen=True, slots=True)
class FieldViolation:
    """One malformed request field, named by its path (``move.captures[1].rank``)."""

    field: str
    description: str


@dataclass(slots=True)
class ServiceError(Exception):
    """A request the service refuses: status code, stable reason, message, details."""

    code: grpc.StatusCode
    reason: str
    message: str
    metadata: Mapping[str, str] = field(default_factory=dict)
    violations: Sequence[FieldViolation] = ()

    def __str__(self) -> str:
        return f"{self.code.name} {self.reason}: {self.message}"

    def to_status(self) -> status_pb2.Status:
        """The ``google.rpc.Status`` with ErrorInfo first and BadRequest if any, each of
        its field violations with the ErrorInfo's reason."""
        info = error_details_pb2.ErrorInfo(
            reason=self.reason,
            domain=DOMAIN,
            metadata={_utf8(k): _utf8(v) for k, v in self.metadata.items()},
        )
        details = [_pack(info)]
        if self.violations:
            bad_request = error_details_pb2.BadRequest(
                field_violations=[
                    # Its reason is the ErrorInfo's (google.rpc: unique within the
                    # domain): every violation of one refusal is refused for it.
                    error_details_pb2.BadRequest.FieldViolation(
                        field=_utf8(v.field), description=_utf8(v.description), reason=self.reason
                    )
                    for v in self.violations
                ]
            )
            details.append(_pack(bad_request))
        return status_pb2.Status(
            code=self.code.value[0], message=_utf8(self.message), details=details
        )


def drop_tracebacks(error: BaseException) -> None:
    """Unlinks ``error``, and the errors it was raised from or while handling, from the
    frames they passed through.

    An error kept after it was caught (a refusal in ``CallRunner.run``'s locals, the
    error aiohttp keeps on a request's stream) is held by a frame its traceback holds:
    a cycle, and through the frame chain the request and its bytes stay with it until
    Python's full collection (a resource review: up to ``--max-request-bytes`` and
    more per refused call).
    """
    pending: list[BaseException | None] = [error]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        current.__traceback__ = None
        pending += (current.__cause__, current.__context__)


def _utf8(text: str) -> str:
    """``text`` as protobuf strings must be, valid UTF-8.

    Refusals echo the caller's input (a header, a JSON name), which may hold
    a lone surrogate (aiohttp decodes headers with ``surrogateescape``; JSON
    allows a lone ``\\udXXX`` escape); it is shown backslash-escaped.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _pack(message: error_details_pb2.ErrorInfo | error_details_pb2.BadRequest) -> any_pb2.Any:
    packed = any_pb2.Any()
    # Deterministic sorts the metadata map by key: protobuf orders a map by a hash table
    # whose order changes with each process, so every replica would send other bytes.
    packed.Pack(message, deterministic=True)
    return packed


def invalid_argument(
    reason: str,
    message: str,
    field_path: str | Sequence[str] | None = None,
    *,
    description: str | None = None,
    **metadata: str,
) -> ServiceError:
    """A malformed request (``INVALID_ARGUMENT``), with a field violation unless ``field_path``
    is ``None``, one per path if it is several; ``""`` names no field, the whole request
    (as Google APIs do).

    The message names the field first, ``path: why`` (``seat: must be 0 to 1, not 5``),
    for callers that show only the message (docs/api.md, "Errors"); the violation's
    field names it already, so its description is the why alone: ``description`` where
    the message does not start with one path (``a and b: ...``), else the message
    without its ``path: ``."""
    paths = [field_path] if isinstance(field_path, str) else field_path or ()
    violations = tuple(
        FieldViolation(
            path, message.removeprefix(f"{path}: ") if description is None else description
        )
        for path in paths
    )
    return ServiceError(grpc.StatusCode.INVALID_ARGUMENT, reason, message, metadata, violations)


def permission_denied(reason: str, message: str, **metadata: str) -> ServiceError:
    return ServiceError(grpc.StatusCode.PERMISSION_DENIED, reason, message, metadata)


def failed_precondition(reason: str, message: str, **metadata: str) -> ServiceError:
    """A well-formed request that the rules or the game's progress forbid."""
    return ServiceError(grpc.StatusCode.FAILED_PRECONDITION, reason, message, metadata)


def unavailable(reason: str, message: str, **metadata: str) -> ServiceError:
    """A request this replica cannot serve and another may: callers retry (the client does)."""
    return ServiceError(grpc.StatusCode.UNAVAILABLE, reason, message, metadata)


REQUEST_TOO_LARGE = "REQUEST_TOO_LARGE"
REQUEST_MALFORMED = "REQUEST_MALFORMED"
FIELD_UNKNOWN = "FIELD_UNKNOWN"


def request_too_large(what: str, limit: int) -> ServiceError:
    """``what`` (a request, a body) is over ``--max-request-bytes``; metadata ``limit``."""
    return ServiceError(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        REQUEST_TOO_LARGE,
        f"the {what} is larger than {limit} bytes",
        {"limit": str(limit)},
    )


DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"


def deadline_exceeded() -> ServiceError:
    """The call's deadline passed before its answer was ready: its caller has stopped
    waiting. Logged and counted; over gRPC never sent (gRPC ends the call itself), over
    HTTP sent as a 504 (the deadline of its ``Grpc-Timeout`` header)."""
    return ServiceError(
        grpc.StatusCode.DEADLINE_EXCEEDED,
        DEADLINE_EXCEEDED,
        "the call's deadline passed before its answer was ready: the server is "
        "overloaded, or the deadline is shorter than the call needs",
    )


def body_past_deadline() -> ServiceError:
    """``deadline_exceeded`` of an HTTP call whose deadline passed before its body was
    read whole: a slow upload first, which an overload cannot be told from."""
    return ServiceError(
        grpc.StatusCode.DEADLINE_EXCEEDED,
        DEADLINE_EXCEEDED,
        "the call's deadline passed before its request body was read whole: the body "
        "came too slowly, the server is overloaded, or the deadline is shorter than the "
        "call needs",
    )


def internal_error() -> ServiceError:
    """A bug: details stay in the server log, never in the response."""
    return ServiceError(grpc.StatusCode.INTERNAL, "INTERNAL", "internal error")


# The standard HTTP mapping of google.rpc.Code (google/rpc/code.proto).
HTTP_STATUS = {
    code_pb2.OK: 200,
    code_pb2.CANCELLED: 499,
    code_pb2.UNKNOWN: 500,
    code_pb2.INVALID_ARGUMENT: 400,
    code_pb2.DEADLINE_EXCEEDED: 504,
    code_pb2.NOT_FOUND: 404,
    code_pb2.ALREADY_EXISTS: 409,
    code_pb2.PERMISSION_DENIED: 403,
    code_pb2.UNAUTHENTICATED: 401,
    code_pb2.RESOURCE_EXHAUSTED: 429,
    code_pb2.FAILED_PRECONDITION: 400,
    code_pb2.ABORTED: 409,
    code_pb2.OUT_OF_RANGE: 400,
    code_pb2.UNIMPLEMENTED: 501,
    code_pb2.INTERNAL: 500,
    code_pb2.UNAVAILABLE: 503,
    code_pb2.DATA_LOSS: 500,
}
