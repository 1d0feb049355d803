"""Every ``ErrorInfo`` reason the service sends over gRPC (docs/api.md, "Errors").

A ``StrEnum``, so a reason read by ``error_info`` compares equal to its member
and a misspelt name fails type checking instead of never matching:

>>> from cardrules.client import ErrorReason
>>> ErrorReason("NOT_YOUR_TURN", {}).reason == Reason.NOT_YOUR_TURN
True

``ErrorReason.reason`` stays a ``str``: a newer server may send a reason this
release does not list.
"""

from __future__ import annotations

import enum


class Reason(enum.StrEnum):
    """The reasons of docs/api.md's gRPC errors table, in its order."""

    # INVALID_ARGUMENT: the request or a token is malformed
    REQUEST_MALFORMED = "REQUEST_MALFORMED"
    FIELD_UNKNOWN = "FIELD_UNKNOWN"
    STATE_MISSING = "STATE_MISSING"
    TOKEN_MALFORMED = "TOKEN_MALFORMED"
    TOKEN_SCHEMA_UNSUPPORTED = "TOKEN_SCHEMA_UNSUPPORTED"
    TOKEN_UNKNOWN_KEY = "TOKEN_UNKNOWN_KEY"
    TOKEN_INVALID = "TOKEN_INVALID"
    TOKEN_PLAIN_DISABLED = "TOKEN_PLAIN_DISABLED"
    STATE_INVALID = "STATE_INVALID"
    CONFIG_INVALID = "CONFIG_INVALID"
    FIELD_INVALID = "FIELD_INVALID"
    DECK_INVALID = "DECK_INVALID"
    TOO_MANY_DECKS = "TOO_MANY_DECKS"
    DRAW_WITHOUT_DRAW_FOR_DEAL = "DRAW_WITHOUT_DRAW_FOR_DEAL"
    DRAW_INVALID = "DRAW_INVALID"
    DRAW_EXHAUSTED = "DRAW_EXHAUSTED"
    CHOSEN_DEAL_REFUSED = "CHOSEN_DEAL_REFUSED"
    SEAT_INVALID = "SEAT_INVALID"
    SEAT_MISSING = "SEAT_MISSING"
    MOVE_MISSING = "MOVE_MISSING"
    # PERMISSION_DENIED: the seat token
    SEAT_TOKEN_MISSING = "SEAT_TOKEN_MISSING"
    SEAT_TOKEN_INVALID = "SEAT_TOKEN_INVALID"
    # FAILED_PRECONDITION: a well-formed move the rules forbid
    NOT_YOUR_TURN = "NOT_YOUR_TURN"
    CARD_NOT_IN_HAND = "CARD_NOT_IN_HAND"
    CAPTURE_NOT_ON_TABLE = "CAPTURE_NOT_ON_TABLE"
    CAPTURE_NOT_VALID = "CAPTURE_NOT_VALID"
    CAPTURE_NOT_MAXIMAL = "CAPTURE_NOT_MAXIMAL"
    MUST_CAPTURE = "MUST_CAPTURE"
    MUST_SWEEP = "MUST_SWEEP"
    GAME_OVER = "GAME_OVER"
    # RESOURCE_EXHAUSTED
    REQUEST_TOO_LARGE = "REQUEST_TOO_LARGE"
    # UNAVAILABLE: a token sealed by a newer release, during a rolling upgrade
    TOKEN_FROM_NEWER_RELEASE = "TOKEN_FROM_NEWER_RELEASE"
    # INTERNAL: a bug in the service
    INTERNAL = "INTERNAL"
