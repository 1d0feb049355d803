"""The ``google.rpc.ErrorInfo`` of a failed call (design section 5).

The service puts a ``google.rpc.Status`` with exactly one ``ErrorInfo``
(domain ``cardrules``, a stable UPPER_SNAKE reason such as ``NOT_YOUR_TURN``)
in the ``grpc-status-details-bin`` trailer. This module decodes it with
googleapis-common-protos alone, so the client needs no grpcio-status.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import grpc
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2

STATUS_DETAILS_KEY = "grpc-status-details-bin"


class ErrorReason(NamedTuple):
    """The reason and metadata of an ``ErrorInfo``; unpacks as ``reason, metadata``."""

    reason: str
    metadata: dict[str, str]


def rpc_status(error: grpc.RpcError) -> status_pb2.Status | None:
    """The rich ``google.rpc.Status`` of a failed call, or ``None`` if the server sent none.

    Works for the errors of both the sync and the asyncio clients.
    """
    trailing = getattr(error, "trailing_metadata", None)
    if not callable(trailing):
        return None
    pairs: Iterable[tuple[str, str | bytes]] | None = trailing()
    for key, value in pairs or ():
        if key == STATUS_DETAILS_KEY and isinstance(value, bytes):
            status = status_pb2.Status()
            try:
                status.ParseFromString(value)
            except DecodeError:  # a garbled trailer means "no details", not a new failure
                return None
            return status
    return None


def error_info(error: grpc.RpcError) -> ErrorReason | None:
    """``(reason, metadata)`` of the call's ``ErrorInfo``, or ``None`` if it has none.

    >>> error_info(grpc.RpcError()) is None
    True
    """
    status = rpc_status(error)
    if status is None:
        return None
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return ErrorReason(info.reason, dict(info.metadata))
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
