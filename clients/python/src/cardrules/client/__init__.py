"""Typed Python client of the cardrules Krypkasino service (docs/api.md).

>>> from cardrules.client import card, cards_pb2
>>> card("10D").rank == cards_pb2.RANK_TEN
True

``KrypkasinoClient`` blocks, ``AsyncKrypkasinoClient`` runs on asyncio; both
give every call a default deadline and retry ``UNAVAILABLE`` and
``CANCELLED`` through the channel's service config, which is safe because the
service keeps no state: every RPC but ``NewGame`` is a pure function of its
request, and a retried ``NewGame`` only starts another game. This package
imports only grpcio, protobuf, googleapis-common-protos and the generated
stubs.
"""

from __future__ import annotations

from importlib import metadata

from cardrules.cards.v1 import cards_pb2
from cardrules.client.aio import AsyncKrypkasinoClient
from cardrules.client.channel import (
    DEFAULT,
    DEFAULT_TIMEOUT,
    LOAD_BALANCING_POLICIES,
    RETRY_POLICY,
    Metadata,
    Timeout,
    channel_options,
    service_config,
)
from cardrules.client.codes import card, card_code, cards, cards_code, rank_code
from cardrules.client.errors import (
    ErrorReason,
    error_info,
    field_violations,
    request_id,
    rpc_status,
)
from cardrules.client.reasons import Reason
from cardrules.client.sync import KrypkasinoClient
from cardrules.client.tokens import TokenBytes, renewed_state, seat_token_to_keep, state_to_keep
from cardrules.krypkasino.v1 import krypkasino_pb2, krypkasino_pb2_grpc

try:
    __version__ = metadata.version("cardrules-client")
except metadata.PackageNotFoundError:  # imported from a source tree, not installed
    __version__ = "0+unknown"

__all__ = [
    "DEFAULT",
    "DEFAULT_TIMEOUT",
    "LOAD_BALANCING_POLICIES",
    "RETRY_POLICY",
    "AsyncKrypkasinoClient",
    "ErrorReason",
    "KrypkasinoClient",
    "Metadata",
    "Reason",
    "Timeout",
    "TokenBytes",
    "card",
    "card_code",
    "cards",
    "cards_code",
    "cards_pb2",
    "channel_options",
    "error_info",
    "field_violations",
    "krypkasino_pb2",
    "krypkasino_pb2_grpc",
    "rank_code",
    "renewed_state",
    "request_id",
    "rpc_status",
    "seat_token_to_keep",
    "service_config",
    "state_to_keep",
]
