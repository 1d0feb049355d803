"""The OpenAPI 3.1 document of the HTTP gateway, built from the proto descriptors.

Paths come from the same ``service.http_routes`` the gateway serves, schemas
from the messages under the proto3 JSON mapping (lowerCamelCase names, 64-bit
integers as strings, bytes as base64 strings with ``contentEncoding`` and the
pattern of the base64 the gateway takes, enums by name), error responses are
the ``google.rpc.Status`` of design section 5 with typed details. Descriptions
are the proto comments (``service.proto_comments``), which only a descriptor set made with ``--include_source_info`` carries:
``scripts/generate_openapi.py`` makes one and writes the committed
``service/cardrules.openapi.json``, which ships inside the package and is
what the server serves at ``/openapi.json``. Every component schema is
keyed by its ``title``, the message's name without its package
(``BadRequestFieldViolation`` for a nested one): openapi-typescript and
@hey-api/openapi-ts name types after the key, and a generator that names
classes after the title gets the same short name.
Schemas are built under their full proto names (which no two messages share)
and take their titles as keys once the document is whole (``with_short_keys``),
which refuses two schemas of one title.

The API has no authentication scheme (seat tokens travel in request bodies), so
the root ``security`` is empty; every call needs a body (``requestBody`` is
``required``), although the server reads an empty one as ``{}`` and refuses it
for what it lacks.

Response schemas say what the gateway prints (``http_json.message_json``:
``MessageToDict`` with ``always_print_fields_with_no_presence``): every field
without presence (plain proto3 scalars and enums, repeated fields, maps) is
``required``; fields with presence (``optional`` scalars, messages, oneof
members) may be absent, except the few the service sets in every response
(``SET_IN_EVERY_RESPONSE``). Response schemas allow further properties: a
later release may add fields, which clients must ignore. Request schemas
require what the server refuses a request without (``REQUIRED_IN_REQUESTS``, the
fields the protos mark ``(google.api.field_behavior) = REQUIRED``; absent fields
take their proto3 defaults) and allow no other properties, as
the server refuses names it does not know.

A message that requests and responses share has one schema for both unless
its response form requires a field that requests need not send (a repeated
field counts as sendable: an empty list is harmless) or the reverse; then
the request form has a schema of its own, built under the full name plus
``-Input`` and published under its title (``GameConfigInput``). A message
whose fields are exactly the members of one oneof that responses always set (``Event``,
``LastMove``) is a ``oneOf`` of one wrapper schema per member
(``EventCrawled``: an object requiring ``crawled``), which generators turn
into one class per kind; any
other oneof is a JSON Schema ``oneOf`` whose branches each require one member,
with a last branch that holds none of them unless the oneof is always set.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from cardrules.cards.v1 import cards_pb2
from cardrules.client.errors import USABLE_REQUEST_ID
from cardrules.krypkasino.v1 import krypkasino_pb2
from google.api import field_behavior_pb2
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import (
    Descriptor,
    EnumDescriptor,
    FieldDescriptor,
    FileDescriptor,
    OneofDescriptor,
    ServiceDescriptor,
)

from engine.krypkasino.config import MAX_MATCH_DEALS, MAX_PLAYERS, MIN_PLAYERS
from service.config import ServerConfig
from service.descriptors import message_descriptor
from service.grpc_timeout import GRPC_TIMEOUT, GRPC_TIMEOUT_HEADER
from service.http_json import BASE64_PATTERN, JSON_TYPE
from service.http_routes import OPENAPI_PATH, routes
from service.reasons import REFUSAL_REASONS

Json = dict[str, Any]

COMMITTED = Path(__file__).resolve().parent / "cardrules.openapi.json"
OPENAPI_VERSION = "3.1.0"
API_VERSION = "v1"
SERVICES: tuple[ServiceDescriptor, ...] = (
    krypkasino_pb2.DESCRIPTOR.services_by_name["KrypkasinoService"],
)
STATUS = "google.rpc.Status"
ERROR_INFO = "google.rpc.ErrorInfo"
BAD_REQUEST = "google.rpc.BadRequest"
FIELD_VIOLATION = "google.rpc.BadRequest.FieldViolation"
TYPE_URL_PREFIX = "type.googleapis.com/"
# The request form of a message that responses use too, where the two differ, is built
# under the full name plus this (proto names hold no "-", so it names no message) and
# published under its title (``GameConfigInput``).
INPUT_SUFFIX = "-Input"
DEFAULT_HTTP_PORT = ServerConfig().http_port

# Fields with presence (message fields by their full name, oneofs by theirs) that
# the service sets in every response it sends, so response schemas require them.
# Each is read from service/krypkasino_api.py, service/codec.py and
# service/view_codec.py, which build every response message;
# tests/service/test_http_openapi_presence.py checks real responses of whole
# games against the document. When unsure, leave one out:
# the field is then documented as possibly absent, which is never wrong.
SET_IN_EVERY_RESPONSE: frozenset[str] = frozenset(
    {
        # new_game, play and get_view fill their view with fill_view, which copies
        # in a template holding the config and sets game_id and state_id.
        "cardrules.krypkasino.v1.NewGameResponse.view",
        "cardrules.krypkasino.v1.PlayResponse.view",
        "cardrules.krypkasino.v1.GetViewResponse.view",
        # _config_template: every view template is built from View(config=...).
        "cardrules.krypkasino.v1.View.config",
        # codec.config_in_force_to_proto, that config, sets rules (every flag), and a
        # view's config is the only GameConfig responses hold.
        "cardrules.krypkasino.v1.GameConfig.rules",
        # legal_move_to_proto fills move with _fill_move, which copies in the card;
        # a Move appears in responses only there.
        "cardrules.krypkasino.v1.LegalMove.move",
        "cardrules.krypkasino.v1.Move.card",
        # fill_move_event copies in the card of a crawl or capture, and
        # _rare_event_to_proto builds DealEnded(score=...).
        "cardrules.krypkasino.v1.Crawled.card",
        "cardrules.krypkasino.v1.Captured.card",
        "cardrules.krypkasino.v1.DealEnded.score",
        # _fill_event sets a member for every engine event (a TypeError otherwise),
        # and fill_move_event one for the view's last move whenever there is one.
        "cardrules.krypkasino.v1.Event.kind",
        "cardrules.krypkasino.v1.LastMove.kind",
    }
)


REQUIRED = field_behavior_pb2.FieldBehavior.REQUIRED
# googleapis-common-protos' stub types the extension as a plain FieldDescriptor, which
# mypy does not take as a key of ``Extensions``.
FIELD_BEHAVIOR: Any = field_behavior_pb2.field_behavior


def marked_required(files: Iterable[FileDescriptor]) -> frozenset[str]:
    """The fields (by full name) the protos mark ``(google.api.field_behavior) = REQUIRED``
    (AIP-203): those without which the server refuses a request, so request schemas
    require them.

    tests/service/test_http_openapi_presence.py leaves each out of an otherwise valid
    request to a real server and expects a refusal naming it. Never mark a field whose
    zero value is valid: ``seat`` (0 is a seat, and proto3 JSON may omit a zero) or
    GetView's ``seat_token`` (needed only with a seat).
    """
    pending = [message for file in files for message in file.message_types_by_name.values()]
    required: set[str] = set()
    while pending:
        message = pending.pop()
        pending.extend(message.nested_types)
        required.update(
            field.full_name
            for field in message.fields
            if REQUIRED in field.GetOptions().Extensions[FIELD_BEHAVIOR]
        )
    return frozenset(required)


REQUIRED_IN_REQUESTS: frozenset[str] = marked_required(
    (krypkasino_pb2.DESCRIPTOR, cards_pb2.DESCRIPTOR)
)

_KRYPKASINO = "cardrules.krypkasino.v1."
_SEAT = {"minimum": 0, "maximum": MAX_PLAYERS - 1}
# Bounds (by full field name) outside which the server refuses a value whatever else
# the request holds (Config.validate; KrypkasinoApi._authorise for a seat), so that a
# client can check before it sends. A value inside may still be refused with the rest
# of the request: a seat or first dealer past the game's players, say. Responses hold
# values inside them too. A required token (``REQUIRED_IN_REQUESTS``) also has a
# ``minLength`` of 1: an empty one is a missing one.
FIELD_BOUNDS: Mapping[str, Json] = {
    _KRYPKASINO + "GameConfig.players": {"minimum": MIN_PLAYERS, "maximum": MAX_PLAYERS},
    _KRYPKASINO + "GameConfig.first_dealer": _SEAT,
    _KRYPKASINO + "GameConfig.match_deals": {"minimum": 1, "maximum": MAX_MATCH_DEALS},
    _KRYPKASINO + "GameConfig.target_score": {"minimum": 1},
    _KRYPKASINO + "LegalMovesRequest.seat": _SEAT,
    _KRYPKASINO + "PlayRequest.seat": _SEAT,
    _KRYPKASINO + "GetViewRequest.seat": _SEAT,
}

_INT32 = {"type": "integer", "format": "int32", "minimum": -(2**31), "maximum": 2**31 - 1}
_UINT32 = {"type": "integer", "format": "int64", "minimum": 0, "maximum": 2**32 - 1}
# The one spelling the gateway takes (http_json._CANONICAL_INTEGER) and json_format prints:
# decimal digits without a leading zero, exponent or fraction; at most as long as the
# longest value (-9223372036854775808, 18446744073709551615), so that a schema refuses
# what has more digits. The values between the largest and the next power of ten
# (2^64 to 99999999999999999999 for a uint64) still match and are refused by the
# gateway: a pattern that said so would be an alternative per digit (docs/api.md).
_INT64 = {
    "type": "string",
    "format": "int64",
    "pattern": "^(0|-?[1-9][0-9]*)$",
    "maxLength": len(str(-(2**63))),
}
_UINT64 = {
    "type": "string",
    "format": "uint64",
    "pattern": "^(0|[1-9][0-9]*)$",
    "maxLength": len(str(2**64 - 1)),
}
_SCALARS: Mapping[int, Json] = {
    FieldDescriptor.TYPE_DOUBLE: {"type": "number", "format": "double"},
    FieldDescriptor.TYPE_FLOAT: {"type": "number", "format": "float"},
    FieldDescriptor.TYPE_INT64: _INT64,
    FieldDescriptor.TYPE_SINT64: _INT64,
    FieldDescriptor.TYPE_SFIXED64: _INT64,
    FieldDescriptor.TYPE_UINT64: _UINT64,
    FieldDescriptor.TYPE_FIXED64: _UINT64,
    FieldDescriptor.TYPE_INT32: _INT32,
    FieldDescriptor.TYPE_SINT32: _INT32,
    FieldDescriptor.TYPE_SFIXED32: _INT32,
    FieldDescriptor.TYPE_UINT32: _UINT32,
    FieldDescriptor.TYPE_FIXED32: _UINT32,
    FieldDescriptor.TYPE_BOOL: {"type": "boolean"},
    FieldDescriptor.TYPE_STRING: {"type": "string"},
    # OpenAPI 3.1 says base64 with contentEncoding; 3.0's "format: byte" made
    # generators decode the string as text (datamodel-code-generator's Base64Str).
    # contentEncoding is only an annotation to a validator (JSON Schema 2020-12, 8.3),
    # so the pattern says what the gateway takes: base64 of either alphabet, padding
    # optional, never a length that is 1 more than a multiple of 4.
    FieldDescriptor.TYPE_BYTES: {
        "type": "string",
        "contentEncoding": "base64",
        "pattern": BASE64_PATTERN,
    },
}


@dataclass(frozen=True)
class ErrorResponse:
    """An error answer of the routes, under the HTTP status its reasons have
    (``RefusalReason.http_status``); a route has it when it can be refused with one of
    them (``REASONS_BY_RPC``)."""

    status: str
    name: str
    description: str


# Every reason each RPC can be refused with over HTTP, stated once here: the document's
# error responses of each operation, and the reasons each lists, are these
# (tests/service/test_http_openapi_reasons.py provokes them of a real server). Any route
# meets the gateway's own (http_gateway, http_json) and the call's: a body or framing
# refused, a body cut by the server's stop, a deadline passed, a bug. The rest are the RPCs' own (krypkasino_api.py):
# a state token's (``_open``, tokens.py), a seat's (``_authorise``, ``_seat_missing``),
# a move's (``play``, the engine's reasons) and NewGame's request. FIELD_UNKNOWN is
# gRPC's alone (over HTTP an unknown field is JSON_INVALID), CLIENT_GONE is answered to
# nobody and NOT_FOUND_ROUTE is of no route, so no operation lists them; a route answers
# HTTP_VERSION_NOT_SUPPORTED (505) and logs it as its method.
_ANY_ROUTE = frozenset(
    {
        "REQUEST_MALFORMED",
        "JSON_INVALID",
        "BODY_TIMEOUT",
        "SERVER_STOPPING",
        "TIMEOUT_INVALID",
        "METHOD_NOT_ALLOWED",
        "REQUEST_TOO_LARGE",
        "UNSUPPORTED_MEDIA_TYPE",
        "INTERNAL",
        "DEADLINE_EXCEEDED",
        "HTTP_VERSION_NOT_SUPPORTED",
    }
)
_STATE_REASONS = frozenset(
    {
        "STATE_MISSING",
        "TOKEN_MALFORMED",
        "TOKEN_SCHEMA_UNSUPPORTED",
        "TOKEN_UNKNOWN_KEY",
        "TOKEN_INVALID",
        "TOKEN_PLAIN_DISABLED",
        "STATE_INVALID",
        "TOKEN_FROM_NEWER_RELEASE",
    }
)
_SEAT_REASONS = frozenset({"SEAT_INVALID", "SEAT_TOKEN_MISSING", "SEAT_TOKEN_INVALID"})
_MOVE_REASONS = frozenset(
    {"MOVE_MISSING", "FIELD_INVALID"}
    | {r.reason for r in REFUSAL_REASONS if r.code is grpc.StatusCode.FAILED_PRECONDITION}
)
REASONS_BY_RPC: Mapping[str, frozenset[str]] = {
    "NewGame": _ANY_ROUTE
    | {
        "CONFIG_INVALID",
        "FIELD_INVALID",
        "DECK_INVALID",
        "TOO_MANY_DECKS",
        "DRAW_WITHOUT_DRAW_FOR_DEAL",
        "DRAW_INVALID",
        "DRAW_EXHAUSTED",
        "CHOSEN_DEAL_REFUSED",
    },
    "LegalMoves": _ANY_ROUTE | _STATE_REASONS | _SEAT_REASONS,
    "Play": _ANY_ROUTE | _STATE_REASONS | _SEAT_REASONS | _MOVE_REASONS,
    "Score": _ANY_ROUTE | _STATE_REASONS,
    "GetView": _ANY_ROUTE | _STATE_REASONS | _SEAT_REASONS | {"SEAT_MISSING"},
}


ERROR_RESPONSES: tuple[ErrorResponse, ...] = (
    ErrorResponse(
        "400",
        "BadRequest",
        "INVALID_ARGUMENT: a request the service cannot take as sent (a JSON body that "
        "does not parse: JSON_INVALID; a malformed Grpc-Timeout: TIMEOUT_INVALID; "
        'docs/api.md, "Errors", says when each reason is sent).',
    ),
    ErrorResponse("403", "PermissionDenied", "PERMISSION_DENIED: a missing or wrong seat token."),
    ErrorResponse(
        "405", "MethodNotAllowed", "METHOD_NOT_ALLOWED: the path has no route for this method."
    ),
    ErrorResponse(
        "413",
        "RequestTooLarge",
        "REQUEST_TOO_LARGE: the request is over --max-request-bytes once parsed, or the "
        "body (decompressed) over 16 times that.",
    ),
    ErrorResponse(
        "415",
        "UnsupportedMediaType",
        "UNSUPPORTED_MEDIA_TYPE: a non-empty body that is not application/json (UTF-8) or "
        "has no Content-Type (an empty body is the empty request whatever its type), or a "
        "Content-Encoding other than identity, gzip (or x-gzip, which RFC 9110 says to "
        "take as gzip) or deflate.",
    ),
    ErrorResponse(
        "500", "Internal", "INTERNAL: a bug in the service; details are in its log only."
    ),
    ErrorResponse(
        "503",
        "Unavailable",
        "UNAVAILABLE: the call was not run, and another replica may serve it (a state "
        "token that only a newer release reads, during a rolling upgrade, or a body still "
        "arriving when the server stopped: the reasons below say which this call can meet); "
        "retry after Retry-After.",
    ),
    ErrorResponse(
        "504",
        "DeadlineExceeded",
        "DEADLINE_EXCEEDED: the call's Grpc-Timeout passed before its answer was ready (its "
        "body came too slowly, it waited in an overloaded server, or the deadline was "
        "shorter than the call needs).",
    ),
    ErrorResponse(
        "505",
        "HttpVersionNotSupported",
        "UNIMPLEMENTED: a request line naming an HTTP version other than 1.0 or 1.1 "
        "(HTTP/2.0 as text, say); the status line says HTTP/1.1.",
    ),
)


def reasons_description() -> str:
    """ErrorInfo's ``reason``: every reason with its HTTP status and metadata keys, as
    client generators show a field's description beside it (not an ``enum``: a client
    generated with one would fail on a reason a later release adds)."""
    lines = [
        "Why the request was refused, UPPER_SNAKE_CASE and stable: branch on it, not on "
        "the message. Not a closed set: a later release may add reasons, so handle an "
        "unknown one by the HTTP status (and `code`). The reasons of this release, each "
        "with its HTTP status and the `metadata` keys it may carry (docs/api.md, "
        '"Errors", says when each is sent and which keys are present when):',
        "",
    ]
    for refusal in REFUSAL_REASONS:
        keys = ", ".join(f"`{key}`" for key in refusal.metadata)
        lines.append(
            f"- `{refusal.reason}` ({refusal.http_status} {refusal.code.name})"
            + (f": {keys}" if keys else "")
        )
    return "\n".join(lines)


def reasons_of(rpc: str, error: ErrorResponse) -> tuple[str, ...]:
    """The reasons ``rpc`` can be refused with under ``error``'s status
    (``REASONS_BY_RPC``), in docs/api.md's order; none: the operation has no such answer."""
    own = REASONS_BY_RPC[rpc]
    return tuple(
        r.reason for r in REFUSAL_REASONS if r.reason in own and str(r.http_status) == error.status
    )


def response_name(rpc: str, error: ErrorResponse) -> str:
    """The key of ``rpc``'s answer of ``error``'s status under ``components/responses``:
    ``error.name`` when every RPC that has that answer lists the same reasons, else one of
    the RPC's own (``NewGameBadRequest``), so that no operation lists a reason it never
    sends (Score is never refused NOT_YOUR_TURN)."""
    lists = {reasons_of(other, error) for other in REASONS_BY_RPC} - {()}
    return error.name if len(lists) == 1 else f"{rpc}{error.name}"


def _with_reasons(error: ErrorResponse, reasons: tuple[str, ...]) -> str:
    """The response's description and ``reasons``; a status that holds refusals of a
    move (400) says so only for the RPC that can make them (Play)."""
    codes = {r.code for r in REFUSAL_REASONS if r.reason in reasons}
    description = error.description
    if grpc.StatusCode.FAILED_PRECONDITION in codes:
        description += " Or FAILED_PRECONDITION: a move the rules forbid."
    listed = ", ".join(f"`{reason}`" for reason in reasons)
    return f"{description} Reasons (ErrorInfo `reason`): {listed}; later releases may add others."


# -- schemas ------------------------------------------------------------------------


def _ref(name: str, kind: str = "schemas") -> Json:
    return {"$ref": f"#/components/{kind}/{name}"}


def reachable(messages: Iterable[Descriptor]) -> dict[str, Descriptor]:
    """``messages`` and every message their fields hold, at any depth (map entries
    included), by full name."""
    seen: dict[str, Descriptor] = {}
    pending = list(messages)
    while pending:
        descriptor = pending.pop()
        if descriptor.full_name not in seen:
            seen[descriptor.full_name] = descriptor
            pending.extend(f.message_type for f in descriptor.fields if f.message_type)
    return seen


@functools.cache
def real_oneofs(descriptor: Descriptor) -> tuple[OneofDescriptor, ...]:
    """The message's declared oneofs, without the one-field ones of proto3 ``optional``."""
    proto = descriptor_pb2.DescriptorProto()
    descriptor.CopyToProto(proto)
    declared = {f.oneof_index for f in proto.field if f.HasField("oneof_index")}
    synthetic = {f.oneof_index for f in proto.field if f.proto3_optional}
    return tuple(descriptor.oneofs[i] for i in sorted(declared - synthetic))


def title(descriptor: Descriptor | EnumDescriptor) -> str:
    """The name without the package, parents joined: ``BadRequestFieldViolation``."""
    package = descriptor.file.package
    local = descriptor.full_name.removeprefix(f"{package}.") if package else descriptor.full_name
    return local.replace(".", "")


def _forms_differ(descriptor: Descriptor) -> bool:
    """Whether the message's own fields make its request form differ from its response form.

    It does when responses always hold a field that requests need not send (a
    repeated one aside: sending an empty list is harmless), when requests must
    send one that responses may leave out, or when responses always set a oneof.
    """
    for field in descriptor.fields:
        in_responses = declared_oneof(field) is None and _required_in(field)
        in_requests = field.full_name in REQUIRED_IN_REQUESTS
        if in_responses != in_requests and not (in_responses and field.is_repeated):
            return True
    return any(oneof.full_name in SET_IN_EVERY_RESPONSE for oneof in real_oneofs(descriptor))


@functools.cache
def has_request_form(descriptor: Descriptor) -> bool:
    """Whether a message responses hold needs a request form of its own (``INPUT_SUFFIX``):
    its forms differ, or those of a message it holds at any depth do (a shared schema
    refers to shared schemas only). Map entries have no schema of their own."""
    return any(
        _forms_differ(message)
        for message in reachable([descriptor]).values()
        if not message.GetOptions().map_entry
    )


def _kind_oneof(descriptor: Descriptor) -> OneofDescriptor | None:
    """The oneof that is the whole message and is always set in responses (``Event.kind``)."""
    oneofs = real_oneofs(descriptor)
    if len(oneofs) != 1 or oneofs[0].full_name not in SET_IN_EVERY_RESPONSE:
        return None
    members = {field.full_name for field in oneofs[0].fields}
    return oneofs[0] if members == {field.full_name for field in descriptor.fields} else None


def _names_a_type(descriptor: Descriptor, name: str) -> bool:
    """Whether ``name`` is the full name of a message or enum of the descriptor's pool."""
    pool = descriptor.file.pool
    for find in (pool.FindMessageTypeByName, pool.FindEnumTypeByName):
        try:
            find(name)
        except KeyError:
            continue
        return True
    return False


class SchemaBuilder:
    """Message schemas as requests carry them (``output=False``) or responses do.

    ``outputs`` are the full names of the messages responses hold (``reachable``):
    a request refers to their response form, which is then shared, unless
    ``has_request_form`` (then to the request form, named with ``INPUT_SUFFIX``).
    ``inputs`` are those requests hold, for the descriptions of shared forms.
    """

    def __init__(
        self,
        notes: Mapping[str, str],
        outputs: Container[str],
        inputs: Container[str] = (),
    ) -> None:
        self.notes = notes
        self.outputs = outputs
        self.inputs = inputs
        self.schemas: Json = {}

    def message(self, descriptor: Descriptor, output: bool) -> Json:
        """A ``$ref`` to the message's schema, adding it (and what it uses) on first sight."""
        name = descriptor.full_name
        if name in self.outputs:
            if output or not has_request_form(descriptor):
                output = True  # the response form, shared with requests
            else:
                name += INPUT_SUFFIX
        else:
            output = False  # a message only requests hold
        if name not in self.schemas:
            self.schemas[name] = {}  # placeholder: recursive messages stop here
            kind = _kind_oneof(descriptor) if output else None
            if kind is not None:
                self.schemas[name] = self._kinds(descriptor, kind)
            else:
                self.schemas[name] = self._object(descriptor, output, name)
        return _ref(name)

    def _object(self, descriptor: Descriptor, output: bool, name: str) -> Json:
        fields = descriptor.fields
        schema: Json = {
            "title": title(descriptor) + ("Input" if name != descriptor.full_name else ""),
            "type": "object",
            "properties": {f.json_name: self.field(f, output) for f in fields},
        }
        if output:
            required = [f.json_name for f in fields if _required_in(f)]
        else:
            required = [f.json_name for f in fields if f.full_name in REQUIRED_IN_REQUESTS]
        if required:
            schema["required"] = required
        if not output:
            # The server refuses names it does not know; a response may hold fields a
            # later release added, which clients must ignore, so response forms allow them.
            schema["additionalProperties"] = False
        choices = [self._oneof(oneof, output) for oneof in real_oneofs(descriptor)]
        if len(choices) == 1:
            schema["oneOf"] = choices[0]
        elif choices:
            schema["allOf"] = [{"oneOf": choice} for choice in choices]
        notes = [self.notes[descriptor.full_name]] if descriptor.full_name in self.notes else []
        if name != descriptor.full_name:
            notes.append(
                f"The request form of `{title(descriptor)}` (responses use that schema): "
                "it requires only the fields the server cannot do without; the others may be "
                "left out (they take their proto3 defaults)."
            )
        elif output and descriptor.full_name in self.inputs and not has_request_form(descriptor):
            sendable = [
                f"`{f.json_name}`"
                for f in fields
                if _required_in(f) and f.full_name not in REQUIRED_IN_REQUESTS
            ]
            notes.append(
                "Requests and responses share this schema (the server refuses names it "
                "does not know in requests)"
                + (
                    f"; requests may leave out {', '.join(sendable)} (then empty)."
                    if sendable
                    else "."
                )
            )
        if notes:
            schema["description"] = "\n\n".join(notes)
        return schema

    def _kinds(self, descriptor: Descriptor, oneof: OneofDescriptor) -> Json:
        """A ``oneOf`` of one wrapper schema per member, each requiring its member."""
        package = descriptor.file.package
        branches: list[Json] = []
        for field in oneof.fields:
            wrapper = title(descriptor) + field.json_name[:1].upper() + field.json_name[1:]
            name = f"{package}.{wrapper}" if package else wrapper
            if _names_a_type(descriptor, name) or name in self.schemas:
                raise ValueError(
                    f"the schema {name} of {field.full_name} would take the name of a "
                    "message or schema there is already"
                )
            self.schemas[name] = {}  # placeholder, as in message()
            self.schemas[name] = {
                "title": wrapper,
                "type": "object",
                "properties": {field.json_name: self.field(field, output=True, wrapped=True)},
                "required": [field.json_name],
            }
            branches.append(_ref(name))
        schema: Json = {"title": title(descriptor)}
        notes = [self.notes[descriptor.full_name]] if descriptor.full_name in self.notes else []
        notes.append(
            f"Exactly one of `{oneof.name}`: an object holding one member, named by its kind."
        )
        schema["description"] = "\n\n".join(notes)
        schema["oneOf"] = branches
        return schema

    @staticmethod
    def _oneof(oneof: OneofDescriptor, output: bool) -> list[Json]:
        """``oneOf`` branches: one per member, requiring it, and one of none unless always set."""
        branches: list[Json] = [{"required": [field.json_name]} for field in oneof.fields]
        if not (output and oneof.full_name in SET_IN_EVERY_RESPONSE):
            branches.append({"not": {"anyOf": [dict(branch) for branch in branches]}})
        return branches

    def enum(self, descriptor: EnumDescriptor) -> Json:
        name = descriptor.full_name
        if name not in self.schemas:
            values = "\n".join(
                f"- `{value.name}`: {self.notes.get(f'{name}.{value.name}', '')}".rstrip(": ")
                for value in descriptor.values
            )
            heading = self.notes.get(name)
            self.schemas[name] = {
                "title": title(descriptor),
                "type": "string",
                "enum": [value.name for value in descriptor.values],
                "description": f"{heading}\n\n{values}" if heading else values,
            }
        return _ref(name)

    def field(self, field: FieldDescriptor, output: bool, wrapped: bool = False) -> Json:
        """The field's schema; ``wrapped`` for a oneof member alone in its wrapper (no oneof
        note: the wrapper says it)."""
        message = field.message_type
        if message is not None and message.GetOptions().map_entry:
            key, value = message.fields_by_name["key"], message.fields_by_name["value"]
            schema: Json = {"type": "object", "additionalProperties": self._value(value, output)}
            if key.type != FieldDescriptor.TYPE_STRING:
                schema["propertyNames"] = {"pattern": "^-?[0-9]+$|^true$|^false$"}
        elif field.is_repeated:
            schema = {"type": "array", "items": self._value(field, output)}
        else:
            schema = dict(self._value(field, output))
        schema.update(FIELD_BOUNDS.get(field.full_name, {}))
        if field.full_name in REQUIRED_IN_REQUESTS and field.type == FieldDescriptor.TYPE_BYTES:
            schema["minLength"] = 1
        notes = [self.notes[field.full_name]] if field.full_name in self.notes else []
        if (oneof := declared_oneof(field)) is not None:
            if not wrapped:
                always = output and oneof.full_name in SET_IN_EVERY_RESPONSE
                notes.append(
                    f"One of `{oneof.name}`: {'exactly' if always else 'at most'} one of "
                    "these fields is set."
                )
        elif message is None and field.has_presence:
            notes.append("Optional: absent when not set.")
        if notes:
            schema["description"] = "\n\n".join(notes)
        return schema

    def _value(self, field: FieldDescriptor, output: bool) -> Json:
        if field.message_type is not None:
            return self.message(field.message_type, output)
        if field.enum_type is not None:
            return self.enum(field.enum_type)
        return dict(_SCALARS[field.type])


def declared_oneof(field: FieldDescriptor) -> OneofDescriptor | None:
    """The field's oneof, unless it is the one-field oneof of a proto3 ``optional``."""
    oneof = field.containing_oneof
    if oneof is None or oneof not in real_oneofs(field.containing_type):
        return None
    return oneof


def _required_in(field: FieldDescriptor) -> bool:
    """Whether every response holding the field's message holds the field.

    The gateway prints every field without presence, zero values and empty lists
    included, and one with presence only when set: ``SET_IN_EVERY_RESPONSE`` names
    those always set. A oneof member is never required alone: its oneof's
    ``oneOf`` says how many members are present.
    """
    return not field.has_presence or field.full_name in SET_IN_EVERY_RESPONSE


def _type_url(name: str) -> str:
    return TYPE_URL_PREFIX + name


def _detail(name: str, description: str, properties: Json, required: list[str]) -> Json:
    """A ``google.rpc`` detail message as ``Any`` prints it: ``@type`` beside its fields."""
    return {
        "title": name.removeprefix("google.rpc.").replace(".", ""),
        "type": "object",
        "description": description,
        "properties": {
            "@type": {
                "type": "string",
                "const": _type_url(name),
                "description": "The type URL of this detail.",
            },
            **properties,
        },
        "required": ["@type", *required],
    }


def _any_detail(known: list[str]) -> Json:
    """A detail of ``details``: each of the ``known`` types valid only as its own schema, and
    any other object with an ``@type`` of another URL (AIP-193: a later release may add
    details, RetryInfo or LocalizedMessage, say, and a client generated from this
    document must take them, and ignore them). The last branch refuses the known URLs,
    so a malformed ErrorInfo is refused rather than taken as some other detail; no
    ``discriminator``, whose ``mapping`` makes generated clients (openapi-generator's)
    fail on a type URL it does not map. A ``oneOf``, not an ``anyOf``: the branches
    exclude each other (each known type's ``@type`` is a ``const``, the last branch's
    refuses them all), so both take the same details, but openapi-generator's
    typescript-fetch merges an ``anyOf`` into one interface requiring every branch's
    fields, whose parser then throws on every refusal (``fieldViolations`` of an
    ErrorInfo), while it makes a ``oneOf`` a union."""
    other = {
        "type": "object",
        "description": "A detail of a type this release does not send; clients must ignore "
        "details they do not know.",
        "properties": {
            "@type": {
                "type": "string",
                "not": {"enum": [_type_url(name) for name in known]},
                "description": "The detail's type URL.",
            }
        },
        "required": ["@type"],
    }
    return {"oneOf": [*(_ref(name) for name in known), other]}


def _status_schemas() -> Json:
    """``google.rpc.Status`` as ``http_json.status_json`` prints it (``MessageToDict``, which
    leaves out empty values): ``errors.ServiceError.to_status`` always sets a code other
    than 0, a message (every refusal is made with one), an ErrorInfo with its reason
    and domain (metadata only when there is some) and, with field violations, a
    BadRequest; a violation of the whole request has no ``field``."""
    details = [ERROR_INFO, BAD_REQUEST]
    return {
        STATUS: {
            "title": "Status",
            "type": "object",
            "description": "A refusal (google.rpc.Status): `code` is the google.rpc.Code, "
            "`details` hold exactly one google.rpc.ErrorInfo (domain `cardrules`, a stable "
            "`reason`, dynamic values in `metadata`) and, for malformed input, a "
            "google.rpc.BadRequest whose `fieldViolations` name the fields. A later release "
            "may add details of other types, only of google/rpc/error_details.proto "
            "(google.rpc.RetryInfo, say): clients must ignore details they do not know, "
            "and a proto3 JSON parser must know every type of that file, as it fails on "
            "a detail whose @type it cannot resolve.",
            "properties": {
                "code": {**_INT32, "description": "The google.rpc.Code, e.g. 3 INVALID_ARGUMENT."},
                "message": {"type": "string", "description": "For developers, in English."},
                "details": {
                    "type": "array",
                    "items": _any_detail(details),
                    "description": "The ErrorInfo first, then the BadRequest if any; any "
                    "other detail, of a type of google/rpc/error_details.proto a later "
                    "release adds, is to be ignored.",
                },
            },
            "required": ["code", "message", "details"],
        },
        ERROR_INFO: _detail(
            ERROR_INFO,
            "Why the request was refused: a stable `reason` of docs/api.md, in `domain` "
            "`cardrules`.",
            {
                "reason": {"type": "string", "description": reasons_description()},
                "domain": {"type": "string", "description": "Always `cardrules`."},
                "metadata": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "description": "Dynamic values by lower_snake key, e.g. `rule` and "
                    "`seat`; the keys each reason may carry are listed under `reason`. "
                    "Absent when none.",
                },
            },
            ["reason", "domain"],
        ),
        BAD_REQUEST: _detail(
            BAD_REQUEST,
            "The malformed fields of the request.",
            {"fieldViolations": {"type": "array", "items": _ref(FIELD_VIOLATION)}},
            ["fieldViolations"],
        ),
        FIELD_VIOLATION: {
            "title": "BadRequestFieldViolation",
            "type": "object",
            "description": "One malformed field.",
            "properties": {
                "field": {
                    "type": "string",
                    "description": "The field's proto path, e.g. `move.card.rank`; absent "
                    "when the whole request is wrong.",
                },
                "description": {"type": "string", "description": "What is wrong with it."},
                "reason": {
                    "type": "string",
                    "description": "The ErrorInfo's `reason`, the same for every violation "
                    "of one refusal. Not required: earlier releases, still answering in a "
                    "rolling upgrade, leave it out.",
                },
            },
            "required": ["description"],
        },
    }


# What OpenAPI 3.1 allows as a component key (section 4.8.7.1).
_COMPONENT_KEY = re.compile(r"^[a-zA-Z0-9.\-_]+$")


def unique_titles(schemas: Json) -> dict[str, str]:
    """Each schema's title by its name; raise unless every schema has a title of its own
    that can be a component key (the titles become the keys, ``with_short_keys``, so two
    alike would make one type of two messages, or a generated client that clashes)."""
    seen: dict[str, str] = {}
    for name, schema in schemas.items():
        schema_title = schema.get("title")
        if not schema_title:
            raise ValueError(f"the schema {name} has no title")
        if not _COMPONENT_KEY.match(schema_title):
            raise ValueError(f"the title {schema_title!r} of the schema {name} is no component key")
        if schema_title in seen:
            raise ValueError(f"the schemas {seen[schema_title]} and {name} have one title")
        seen[schema_title] = name
    return {name: schema_title for schema_title, name in seen.items()}


def with_short_keys(document: Json) -> Json:
    """``document`` with each component schema keyed by its title (``unique_titles``)
    instead of the full name it was built under, and every reference to it following.

    openapi-typescript (``components["schemas"]["NewGameRequest"]``) and
    @hey-api/openapi-ts (``NewGameRequest``) name types after the key, so a full
    name there made ``CardrulesKrypkasinoV1NewGameRequest``.
    """
    keys = unique_titles(document["components"]["schemas"])
    refs = {_ref(name)["$ref"]: _ref(key)["$ref"] for name, key in keys.items()}
    renamed: Json = _replace_refs(document, refs)
    schemas = renamed["components"]["schemas"]
    renamed["components"]["schemas"] = {keys[name]: schema for name, schema in schemas.items()}
    return renamed


def _replace_refs(value: Any, refs: Mapping[str, str]) -> Any:
    """``value`` with every string that is one of ``refs``' references replaced: a
    ``$ref`` or a discriminator's mapping (no description is a bare reference)."""
    if isinstance(value, dict):
        return {key: _replace_refs(item, refs) for key, item in value.items()}
    if isinstance(value, list):
        return [_replace_refs(item, refs) for item in value]
    if isinstance(value, str):
        return refs.get(value, value)
    return value


def component_keys() -> dict[str, str]:
    """The key of each component schema of the document by the name it is built under:
    a message's or enum's full name (``cardrules.cards.v1.Card``: ``Card``), plus
    ``INPUT_SUFFIX`` for a request form, or a ``google.rpc`` name (``STATUS``: ``Status``),
    for code that starts from a descriptor."""
    return unique_titles(_document({})["components"]["schemas"])


def _operation(
    builder: SchemaBuilder,
    service: ServiceDescriptor,
    route_method: str,
    request: Descriptor,
    response: Descriptor,
) -> Json:
    method_name = f"{service.full_name}.{route_method}"
    operation: Json = {
        "operationId": f"{service.name}_{route_method}",
        "summary": route_method,
        "tags": [service.name],
    }
    if method_name in builder.notes:
        operation["description"] = builder.notes[method_name]
    operation["parameters"] = [
        _ref("X-Request-Id", "parameters"),
        _ref(GRPC_TIMEOUT_HEADER, "parameters"),
    ]
    operation["requestBody"] = {
        # The server reads an empty body as "{}" (http_json.parse_request), but every call
        # refuses that for what it lacks (a state, or NewGame's config.players), so a
        # generated client that let a call go without a body would only make refusals.
        "required": True,
        "content": {JSON_TYPE: {"schema": builder.message(request, output=False)}},
    }
    responses: Json = {"200": _answer("OK", builder.message(response, output=True))}
    for error in ERROR_RESPONSES:
        if reasons_of(route_method, error):
            responses[error.status] = _ref(response_name(route_method, error), "responses")
    operation["responses"] = responses
    return operation


def _answer(description: str, schema: Json) -> Json:
    """A response with a body, and the request id header as every answer has."""
    return {
        "description": description,
        "headers": {"X-Request-Id": _ref("X-Request-Id", "headers")},
        "content": {JSON_TYPE: {"schema": schema}},
    }


# The request id to a call that is logged (every RPC's, every refusal's) and to a GET of
# the document, which is not (docs/api.md, "Request ids"; docs/operations.md).
_LOGGED_PARAMETER = (
    "The caller's id for this call, logged as its request_id and returned in the "
    "X-Request-Id response header."
)
_UNLOGGED_PARAMETER = (
    "The caller's id for this call, returned in the X-Request-Id response header (a GET of "
    "this document is not logged)."
)
_LOGGED_HEADER = (
    "The request id of the log line: the caller's X-Request-Id when usable, else a new one."
)
_UNLOGGED_HEADER = (
    "The caller's X-Request-Id when usable, else a new one (a GET of this document is not logged)."
)


def _request_id_parameter(description: str) -> Json:
    """The optional X-Request-Id request header, first described by ``description``."""
    return {
        "name": "X-Request-Id",
        "in": "header",
        "required": False,
        "description": f"{description} Whitespace around it is not part of a header's value. "
        "A value this schema does not allow is not refused: the server makes up a new id "
        "instead.",
        "schema": {"type": "string", "pattern": f"^{USABLE_REQUEST_ID.pattern}$"},
    }


def _request_id_header(description: str) -> Json:
    """The X-Request-Id response header, described by ``description``."""
    return {"description": description, "schema": {"type": "string"}}


_OPENAPI_BAD_REQUEST = "OpenApiBadRequest"


def _error_components() -> list[tuple[ErrorResponse, str, tuple[str, ...]]]:
    """Each error response of ``components/responses`` with its key and reasons: one
    shared by the RPCs (``response_name``), or one per RPC that has the status."""
    found: dict[str, tuple[ErrorResponse, str, tuple[str, ...]]] = {}
    for error in ERROR_RESPONSES:
        for rpc in REASONS_BY_RPC:
            if reasons := reasons_of(rpc, error):
                found.setdefault(
                    response_name(rpc, error), (error, response_name(rpc, error), reasons)
                )
    return list(found.values())


def build_document(notes: Mapping[str, str] | None = None) -> Json:
    """The whole document; ``notes`` are the proto comments (``proto_comments.comments``)."""
    return with_short_keys(_document(notes or {}))


def _document(notes: Mapping[str, str]) -> Json:
    """The document with its schemas under the full names they are built under."""
    all_routes = [route for service in SERVICES for route in routes(service)]
    responses_of = [message_descriptor(route.response_class) for route in all_routes]
    requests_of = [message_descriptor(route.request_class) for route in all_routes]
    builder = SchemaBuilder(notes, reachable(responses_of), reachable(requests_of))
    paths: Json = {}
    tags: list[Json] = []
    for service in SERVICES:
        tag: Json = {"name": service.name}
        if service.full_name in builder.notes:
            tag["description"] = builder.notes[service.full_name]
        tags.append(tag)
        for route in routes(service):
            request = message_descriptor(route.request_class)
            response = message_descriptor(route.response_class)
            operation = _operation(builder, service, route.method, request, response)
            paths.setdefault(route.path, {})[route.http_method.lower()] = operation
    paths[OPENAPI_PATH] = {
        "get": {
            "operationId": "OpenApi_Get",
            "summary": "This document",
            "description": "This OpenAPI 3.1 document, generated from the service's proto "
            "API: what client generators read. Every server of a release serves the same one.",
            "tags": ["OpenApi"],
            # Not the shared request id parameter and header, which say the id is logged:
            # a GET of this document writes no line (docs/api.md). Its 405 is logged.
            "parameters": [_request_id_parameter(_UNLOGGED_PARAMETER)],
            "responses": {
                # Without additionalProperties, openapi-typescript types an object with no
                # properties as Record<string, never>, which no field of the document fits.
                "200": {
                    "description": "The OpenAPI document of this service.",
                    "headers": {"X-Request-Id": _request_id_header(_UNLOGGED_HEADER)},
                    "content": {
                        JSON_TYPE: {"schema": {"type": "object", "additionalProperties": True}}
                    },
                },
                "400": _ref(_OPENAPI_BAD_REQUEST, "responses"),
                "405": _ref("MethodNotAllowed", "responses"),
                "505": _ref("HttpVersionNotSupported", "responses"),
            },
        }
    }
    error_headers = {"X-Request-Id": _ref("X-Request-Id", "headers")}
    responses: Json = {}
    for error, name, reasons in _error_components():
        headers = dict(error_headers)
        if error.status == "405":
            headers["Allow"] = {
                "description": "The methods this path allows.",
                "schema": {"type": "string"},
            }
        if error.status == "415":
            headers["Accept-Encoding"] = {
                "description": "The content codings the server takes (RFC 9110, 12.5.3), "
                "on a refusal of the request's Content-Encoding.",
                "schema": {"type": "string"},
            }
        if error.status == "503":
            headers["Retry-After"] = {
                "description": "Seconds to wait before retrying: another replica may serve "
                "the call.",
                "schema": {"type": "integer", "minimum": 0},
            }
        responses[name] = {
            "description": _with_reasons(error, reasons),
            "headers": headers,
            "content": {JSON_TYPE: {"schema": _ref(STATUS)}},
        }
    # The gateway judges every request's framing before its path's answer, this
    # document's GET too (docs/api.md, "Errors": REQUEST_MALFORMED on any path).
    responses[_OPENAPI_BAD_REQUEST] = {
        "description": "INVALID_ARGUMENT: a request whose framing the server refuses "
        "(a Transfer-Encoding other than chunked alone, say). Reasons (ErrorInfo "
        "`reason`): `REQUEST_MALFORMED`; later releases may add others.",
        "headers": dict(error_headers),
        "content": {JSON_TYPE: {"schema": _ref(STATUS)}},
    }
    schemas = {**builder.schemas, **_status_schemas()}
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "cardrules",
            "version": API_VERSION,
            "description": "Stateless card-game rules over HTTP/JSON, generated from the "
            "proto API by scripts/generate_openapi.py: the same RPCs as gRPC, in the proto3 "
            "JSON mapping. The service keeps nothing between calls: every call is safe to retry.",
        },
        "servers": [
            {"url": "/", "description": "The server that serves this document."},
            {
                "url": "http://{host}:{port}",
                "description": "A cardrules server; `make serve` listens on "
                f"localhost:{DEFAULT_HTTP_PORT}.",
                "variables": {
                    "host": {"default": "localhost"},
                    "port": {"default": str(DEFAULT_HTTP_PORT)},
                },
            },
        ],
        # No call needs credentials: seat tokens travel in request bodies. Said at the
        # root, as linters (redocly's security-defined) want every operation to say it.
        "security": [],
        "tags": [*tags, {"name": "OpenApi", "description": "This document."}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "responses": responses,
            "headers": {"X-Request-Id": _request_id_header(_LOGGED_HEADER)},
            "parameters": {
                "X-Request-Id": _request_id_parameter(_LOGGED_PARAMETER),
                GRPC_TIMEOUT_HEADER: {
                    "name": GRPC_TIMEOUT_HEADER,
                    "in": "header",
                    "required": False,
                    "description": "The call's deadline, from when the server takes it up, as gRPC "
                    "writes it: 1 to 8 digits and a unit, H, M, S, m (milliseconds), u or n "
                    "(500m is half a second). A call still waiting in the server then is "
                    "refused 504 DEADLINE_EXCEEDED, unserved (so always with a zero value, "
                    "such as 0S); without the header a call has no deadline. A value this "
                    "schema does not allow is refused: 400 TIMEOUT_INVALID.",
                    "schema": {"type": "string", "pattern": f"^{GRPC_TIMEOUT.pattern}$"},
                },
            },
        },
    }


def render(document: Json) -> bytes:
    """The committed form: two-space indents, a final newline."""
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode()


def served_document() -> bytes:
    """The committed document (package data, so an installed server has it too)."""
    return COMMITTED.read_bytes()
