"""The catalogue of refusal reasons: every stable ``ErrorInfo`` reason the service sends,
with its google.rpc code and the ``metadata`` keys it may carry (design section 5;
docs/api.md, "Errors").

``service.errors`` builds refusals; this module says which exist. It is a module of its
own rather than part of ``service.errors`` because a reason's HTTP status is the
gateway's (``http_gateway.http_status``: a few protocol refusals answer with a more
precise status than their code's), and ``service.http_gateway`` imports
``service.errors``: the catalogue sits above both. ``service.openapi`` lists it in the
served document; the Python client keeps its own ``cardrules.client.Reason``, since it
must not import server code, and tests/service/test_http_openapi_reasons.py holds the
two, docs/api.md and a real server's refusals to one another.
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from service.errors import ServiceError
from service.http_gateway import http_status


@dataclass(frozen=True)
class RefusalReason:
    """A stable ``ErrorInfo`` reason of docs/api.md ("Errors"): its google.rpc code and the
    ``metadata`` keys its refusals may carry (each only where docs/api.md says)."""

    reason: str
    code: grpc.StatusCode
    metadata: tuple[str, ...] = ()

    @property
    def http_status(self) -> int:
        """The status the gateway answers it with (``http_gateway.http_status``)."""
        return http_status(ServiceError(self.code, self.reason, ""))


_INVALID = grpc.StatusCode.INVALID_ARGUMENT
_MOVE_REFUSED = grpc.StatusCode.FAILED_PRECONDITION
# docs/api.md's two error tables in their order: the gRPC reasons (cardrules.client.Reason
# lists them in this order), then those of the HTTP gateway alone (REQUEST_MALFORMED and
# REQUEST_TOO_LARGE are in both; DEADLINE_EXCEEDED has an ErrorInfo over HTTP only).
# tests/service/test_http_openapi_reasons.py holds this to both tables and to the client's
# Reason, and real refusals of a loopback server to it: a reason added to the code and the
# docs must be added here too. The document lists them in ErrorInfo's reason description;
# it never makes reason an enum, so that clients generated from it take reasons added later.
REFUSAL_REASONS: tuple[RefusalReason, ...] = (
    RefusalReason("REQUEST_MALFORMED", _INVALID),
    RefusalReason("FIELD_UNKNOWN", _INVALID),
    RefusalReason("STATE_MISSING", _INVALID),
    RefusalReason("TOKEN_MALFORMED", _INVALID),
    RefusalReason("TOKEN_SCHEMA_UNSUPPORTED", _INVALID, ("version",)),
    RefusalReason("TOKEN_UNKNOWN_KEY", _INVALID, ("key_id",)),
    RefusalReason("TOKEN_INVALID", _INVALID),
    RefusalReason("TOKEN_PLAIN_DISABLED", _INVALID),
    RefusalReason("STATE_INVALID", _INVALID),
    RefusalReason("CONFIG_INVALID", _INVALID, ("flag", "rule", "limit")),
    RefusalReason("FIELD_INVALID", _INVALID, ("field",)),
    RefusalReason("DECK_INVALID", _INVALID, ("deck",)),
    RefusalReason("TOO_MANY_DECKS", _INVALID, ("limit",)),
    RefusalReason("DRAW_WITHOUT_DRAW_FOR_DEAL", _INVALID),
    RefusalReason("DRAW_INVALID", _INVALID),
    RefusalReason("DRAW_EXHAUSTED", _INVALID),
    RefusalReason("CHOSEN_DEAL_REFUSED", _INVALID),
    RefusalReason("SEAT_INVALID", _INVALID, ("seat", "players")),
    RefusalReason("SEAT_MISSING", _INVALID, ("token_seat",)),
    RefusalReason("MOVE_MISSING", _INVALID),
    RefusalReason("SEAT_TOKEN_MISSING", grpc.StatusCode.PERMISSION_DENIED, ("seat",)),
    RefusalReason(
        "SEAT_TOKEN_INVALID",
        grpc.StatusCode.PERMISSION_DENIED,
        ("seat", "token_seat", "token_game", "key_id"),
    ),
    RefusalReason("NOT_YOUR_TURN", _MOVE_REFUSED, ("rule", "seat", "turn")),
    RefusalReason("CARD_NOT_IN_HAND", _MOVE_REFUSED, ("rule", "seat", "card")),
    RefusalReason(
        "CAPTURE_NOT_ON_TABLE",
        _MOVE_REFUSED,
        ("rule", "seat", "card", "captured_card", "table_count", "in_hand"),
    ),
    RefusalReason("CAPTURE_NOT_VALID", _MOVE_REFUSED, ("rule", "seat", "card", "captured_card")),
    RefusalReason("CAPTURE_NOT_MAXIMAL", _MOVE_REFUSED, ("rule", "seat", "card", "group_left")),
    RefusalReason("MUST_CAPTURE", _MOVE_REFUSED, ("rule", "seat", "card", "capturing_cards")),
    RefusalReason("MUST_SWEEP", _MOVE_REFUSED, ("rule", "seat", "card", "sweeping_cards")),
    RefusalReason("GAME_OVER", _MOVE_REFUSED, ("rule", "seat")),
    RefusalReason("REQUEST_TOO_LARGE", grpc.StatusCode.RESOURCE_EXHAUSTED, ("limit",)),
    RefusalReason("TOKEN_FROM_NEWER_RELEASE", grpc.StatusCode.UNAVAILABLE, ("version",)),
    RefusalReason("INTERNAL", grpc.StatusCode.INTERNAL),
    RefusalReason("DEADLINE_EXCEEDED", grpc.StatusCode.DEADLINE_EXCEEDED),
    RefusalReason("NOT_FOUND_ROUTE", grpc.StatusCode.NOT_FOUND, ("path",)),
    RefusalReason("METHOD_NOT_ALLOWED", grpc.StatusCode.UNIMPLEMENTED, ("method",)),
    RefusalReason("HTTP_VERSION_NOT_SUPPORTED", grpc.StatusCode.UNIMPLEMENTED),
    RefusalReason("UNSUPPORTED_MEDIA_TYPE", _INVALID, ("content_type", "content_encoding")),
    RefusalReason("JSON_INVALID", _INVALID),
    RefusalReason("BODY_TIMEOUT", _INVALID),
    RefusalReason("SERVER_STOPPING", grpc.StatusCode.UNAVAILABLE),
    RefusalReason("TIMEOUT_INVALID", _INVALID, ("grpc_timeout",)),
    RefusalReason("CLIENT_GONE", grpc.StatusCode.CANCELLED),
)
