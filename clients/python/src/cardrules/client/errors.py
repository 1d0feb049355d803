"""The ``google.rpc.ErrorInfo`` of a failed call, and its request id (docs/api.md, "Errors").

The service puts a ``google.rpc.Status`` with exactly one ``ErrorInfo``
(domain ``cardrules``, a stable UPPER_SNAKE reason such as ``NOT_YOUR_TURN``)
in the ``grpc-status-details-bin`` trailer, and the call's request id, which
its log line carries too, in the ``x-request-id`` trailer. This module
decodes them with googleapis-common-protos alone, so the client needs no
grpcio-status. A call that ends without the server's answer (past its deadline,
or never delivered) has no trailers: the clients keep on its error the request id
they sent it with (``note_sent_request_id``), which ``request_id`` then gives.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

import grpc
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2

STATUS_DETAILS_KEY = "grpc-status-details-bin"
REQUEST_ID_KEY = "x-request-id"
#: The request ids the service takes (docs/api.md, "Request ids"): 1 to 128 printable
#: ASCII characters, spaces only inside. It replaces any other; the client refuses it.
USABLE_REQUEST_ID = re.compile(r"[!-~](?:[ -~]{0,126}[!-~])?")
#: The ``ErrorInfo`` domain of the service's refusals; a reason is stable within its domain.
DOMAIN = "cardrules"
#: The attribute of a client's ``grpc.RpcError`` that holds the request id its call was sent
#: with (``note_sent_request_id``); read it with ``request_id``.
SENT_REQUEST_ID = "cardrules_request_id"


class ErrorReason(NamedTuple):
    """The reason and metadata of an ``ErrorInfo``; unpacks as ``reason, metadata``."""

    reason: str
    metadata: dict[str, str]


def rpc_status(error: grpc.RpcError) -> status_pb2.Status | None:
    """The rich ``google.rpc.Status`` of a failed call, or ``None`` if the server sent none.

    Works for the errors of both the sync and the asyncio clients.
    """
    value = _trailer(error, STATUS_DETAILS_KEY)
    if not isinstance(value, bytes):
        return None
    status = status_pb2.Status()
    try:
        status.ParseFromString(value)
    except DecodeError:  # a garbled trailer means "no details", not a new failure
        return None
    return status


def request_id(error: grpc.RpcError) -> str | None:
    """The request id of the failed call: the one the server sent back in its
    ``x-request-id`` trailer, else the one the client sent the call with (the caller's own,
    if it passed one as ``x-request-id`` metadata, else the client's); ``None`` only for an
    error without that trailer that no client of this package raised.

    The server logs every call it receives under the id it was sent with (docs/api.md,
    "Request ids") but sends it back only with its answer: a call that ends
    ``DEADLINE_EXCEEDED`` gets no trailers, however far the server got with it. Its id is
    the one sent, which the server logged if the call reached it. No server logged the id
    of a call that never reached one: ``UNAVAILABLE`` "failed to connect", or
    ``DEADLINE_EXCEEDED`` while the server was down.

    >>> request_id(grpc.RpcError()) is None
    True
    """
    value = _trailer(error, REQUEST_ID_KEY)
    if isinstance(value, str):
        return value
    sent = getattr(error, SENT_REQUEST_ID, None)
    return sent if isinstance(sent, str) else None


def note_sent_request_id(error: grpc.RpcError, metadata: Iterable[tuple[str, str | bytes]]) -> None:
    """Keep on ``error``, the ``grpc.RpcError`` of a call, the request id of the call's
    ``metadata`` (the first, which the service takes), for ``request_id``.

    An attribute, so that the clients raise grpc's own errors, of the types they always
    raised; gRPC sends every retry with the call's metadata, so one id covers all attempts.
    """
    sent = next((value for key, value in metadata if key == REQUEST_ID_KEY), None)
    if sent is not None:  # always, from the clients' call_metadata
        # call_metadata refused any id that is not printable ASCII.
        setattr(error, SENT_REQUEST_ID, sent.decode("ascii") if isinstance(sent, bytes) else sent)


def _trailer(error: grpc.RpcError, name: str) -> str | bytes | None:
    """One trailing metadata value of a failed call of the sync or the asyncio client."""
    trailing = getattr(error, "trailing_metadata", None)
    if not callable(trailing):
        return None
    pairs: Iterable[tuple[str, str | bytes]] | None = trailing()
    return next((value for key, value in pairs or () if key == name), None)


def error_info(error: grpc.RpcError) -> ErrorReason | None:
    """``(reason, metadata)`` of the call's ``ErrorInfo`` of domain ``cardrules`` (metadata in key
    order), or ``None``
    if it has none. An ``ErrorInfo`` of another domain (a proxy's or a gateway's) is not the
    service's, whose reasons would not mean what a reason of its own spelling means here.

    >>> error_info(grpc.RpcError()) is None
    True
    """
    status = rpc_status(error)
    if status is None:
        return None
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info) and info.domain == DOMAIN:
            # In key order: a map's own order changes with each process.
            return ErrorReason(info.reason, dict(sorted(info.metadata.items())))
    return None


def field_violations(error: grpc.RpcError) -> list[tuple[str, str]]:
    """``(field, description)`` of every ``BadRequest`` field violation of a failed call."""
    status = rpc_status(error)
    violations: list[tuple[str, str]] = []
    for detail in status.details if status is not None else ():
        bad_request = error_details_pb2.BadRequest()
        if detail.Unpack(bad_request):
            violations += [(v.field, v.description) for v in bad_request.field_violations]
    return violations
