"""The OpenAPI 3.1 document of the HTTP gateway, built from the proto descriptors.

Paths come from the same ``service.http_routes`` the gateway serves, schemas
from the messages under the proto3 JSON mapping (lowerCamelCase names, 64-bit
integers as strings, bytes as base64, enums by name), error responses are the
``google.rpc.Status`` of design section 5. Descriptions are the proto comments,
which only a descriptor set made with ``--include_source_info`` carries:
``scripts/generate_openapi.py`` makes one and writes the committed
``service/cardrules.openapi.json``, which ships inside the package and is
what the server serves at ``/openapi.json``.

Response schemas say what the gateway prints (``http_json.message_json``:
``MessageToDict`` with ``always_print_fields_with_no_presence``): every field
without presence (plain proto3 scalars and enums, repeated fields, maps) is
``required``; fields with presence (``optional`` scalars, messages, oneof
members) may be absent, except the few the service sets in every response
(``SET_IN_EVERY_RESPONSE``). Request schemas require nothing: the server
parses any subset of the fields (absent ones take their proto3 defaults) and
its RPCs refuse what they cannot use with a ``google.rpc.Status`` naming the
field. A message that requests and responses share therefore has two schemas:
the response form under its full name and the request form under the full
name plus ``-Input`` (``cardrules.cards.v1.Card-Input``). Each oneof is a JSON
Schema ``oneOf`` whose branches each require one member: exactly one member
where the service always sets one (``SET_IN_EVERY_RESPONSE``), else a last
branch that holds none of them makes it at most one.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cardrules.krypkasino.v1 import krypkasino_pb2
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import (
    Descriptor,
    EnumDescriptor,
    FieldDescriptor,
    OneofDescriptor,
    ServiceDescriptor,
)

from service.http_json import JSON_TYPE
from service.http_routes import message_descriptor, routes

Json = dict[str, Any]

COMMITTED = Path(__file__).resolve().parent / "cardrules.openapi.json"
OPENAPI_VERSION = "3.1.0"
API_VERSION = "v1"
SERVICES: tuple[ServiceDescriptor, ...] = (
    krypkasino_pb2.DESCRIPTOR.services_by_name["KrypkasinoService"],
)
STATUS = "google.rpc.Status"
ANY = "google.protobuf.Any"
# The request form of a message that responses use too (component names may hold
# "-", proto names may not, so it names no message).
INPUT_SUFFIX = "-Input"

# Fields with presence (message fields by their full name, oneofs by theirs) that
# the service sets in every response it sends, so response schemas require them.
# Each is read from service/krypkasino_api.py and service/codec.py, which build
# every response message; tests/service/test_http_openapi_presence.py checks
# real responses of whole games against the document. When unsure, leave one out:
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
        # legal_move_to_proto fills move with _fill_move, which copies in the card;
        # a Move appears in responses only there.
        "cardrules.krypkasino.v1.LegalMove.move",
        "cardrules.krypkasino.v1.Move.card",
        # _fill_event copies in the card of a crawl or capture, and
        # _rare_event_to_proto builds DealEnded(score=...).
        "cardrules.krypkasino.v1.Crawled.card",
        "cardrules.krypkasino.v1.Captured.card",
        "cardrules.krypkasino.v1.DealEnded.score",
        # _fill_event sets a member for every engine event (a TypeError otherwise).
        "cardrules.krypkasino.v1.Event.kind",
    }
)

_INT32 = {"type": "integer", "format": "int32", "minimum": -(2**31), "maximum": 2**31 - 1}
_UINT32 = {"type": "integer", "format": "int64", "minimum": 0, "maximum": 2**32 - 1}
_INT64 = {"type": "string", "format": "int64", "pattern": "^-?[0-9]+$"}
_UINT64 = {"type": "string", "format": "uint64", "pattern": "^[0-9]+$"}
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
    FieldDescriptor.TYPE_BYTES: {"type": "string", "format": "byte", "contentEncoding": "base64"},
}

# (HTTP status, component name, description): every error a route can answer.
ERROR_RESPONSES: tuple[tuple[str, str, str], ...] = (
    (
        "400",
        "BadRequest",
        "INVALID_ARGUMENT (a malformed request, token or JSON body: reason JSON_INVALID "
        "and the others of docs/api.md) or FAILED_PRECONDITION (a move the rules forbid).",
    ),
    ("403", "PermissionDenied", "PERMISSION_DENIED: a missing or wrong seat token."),
    ("405", "MethodNotAllowed", "METHOD_NOT_ALLOWED: the path has no route for this method."),
    ("413", "RequestTooLarge", "REQUEST_TOO_LARGE: the body is over --max-request-bytes."),
    ("415", "UnsupportedMediaType", "UNSUPPORTED_MEDIA_TYPE: the body is not application/json."),
    ("500", "Internal", "INTERNAL: a bug in the service; details are in its log only."),
)


# -- comments -----------------------------------------------------------------------

# Field numbers of descriptor.proto, as used in SourceCodeInfo location paths.
_FILE_MESSAGE, _FILE_ENUM, _FILE_SERVICE = 4, 5, 6
_MESSAGE_FIELD, _MESSAGE_NESTED, _MESSAGE_ENUM = 2, 3, 4
_ENUM_VALUE, _SERVICE_METHOD = 2, 2


def comments(files: descriptor_pb2.FileDescriptorSet) -> dict[str, str]:
    """Leading comments by full name (``pkg.Message.field``, ``pkg.Enum.VALUE``, ...)."""
    found: dict[str, str] = {}
    for file in files.file:
        _Comments(file, found).collect()
    return found


class _Comments:
    """Walks one file's declarations beside its SourceCodeInfo location paths."""

    def __init__(self, file: descriptor_pb2.FileDescriptorProto, found: dict[str, str]) -> None:
        self.file = file
        self.found = found
        self.located = {
            tuple(location.path): location.leading_comments or location.trailing_comments
            for location in file.source_code_info.location
        }

    def collect(self) -> None:
        prefix = f"{self.file.package}." if self.file.package else ""
        for i, message in enumerate(self.file.message_type):
            self.message(prefix + message.name, message, (_FILE_MESSAGE, i))
        for i, enum in enumerate(self.file.enum_type):
            self.enum(prefix + enum.name, enum, (_FILE_ENUM, i))
        for i, service in enumerate(self.file.service):
            self.note(prefix + service.name, (_FILE_SERVICE, i))
            for j, method in enumerate(service.method):
                path = (_FILE_SERVICE, i, _SERVICE_METHOD, j)
                self.note(f"{prefix}{service.name}.{method.name}", path)

    def note(self, name: str, path: tuple[int, ...]) -> None:
        if text := _clean(self.located.get(path, "")):
            self.found[name] = text

    def enum(
        self, name: str, enum: descriptor_pb2.EnumDescriptorProto, path: tuple[int, ...]
    ) -> None:
        self.note(name, path)
        for i, value in enumerate(enum.value):
            self.note(f"{name}.{value.name}", (*path, _ENUM_VALUE, i))

    def message(
        self, name: str, message: descriptor_pb2.DescriptorProto, path: tuple[int, ...]
    ) -> None:
        self.note(name, path)
        for i, field in enumerate(message.field):
            self.note(f"{name}.{field.name}", (*path, _MESSAGE_FIELD, i))
        for i, nested in enumerate(message.nested_type):
            self.message(f"{name}.{nested.name}", nested, (*path, _MESSAGE_NESTED, i))
        for i, nested_enum in enumerate(message.enum_type):
            self.enum(f"{name}.{nested_enum.name}", nested_enum, (*path, _MESSAGE_ENUM, i))


def _clean(comment: str) -> str:
    """Proto comment lines joined into paragraphs."""
    paragraphs = [
        " ".join(line.strip() for line in block.splitlines() if line.strip())
        for block in comment.strip().split("\n\n")
    ]
    return "\n\n".join(p for p in paragraphs if p)


# -- schemas ------------------------------------------------------------------------


def _ref(name: str, kind: str = "schemas") -> Json:
    return {"$ref": f"#/components/{kind}/{name}"}


def reachable(messages: Iterable[Descriptor]) -> frozenset[str]:
    """Full names of ``messages`` and of every message their fields hold, at any depth."""
    seen: set[str] = set()
    pending = list(messages)
    while pending:
        descriptor = pending.pop()
        if descriptor.full_name not in seen:
            seen.add(descriptor.full_name)
            pending.extend(f.message_type for f in descriptor.fields if f.message_type)
    return frozenset(seen)


@functools.cache
def real_oneofs(descriptor: Descriptor) -> tuple[OneofDescriptor, ...]:
    """The message's declared oneofs, without the one-field ones of proto3 ``optional``."""
    proto = descriptor_pb2.DescriptorProto()
    descriptor.CopyToProto(proto)
    declared = {f.oneof_index for f in proto.field if f.HasField("oneof_index")}
    synthetic = {f.oneof_index for f in proto.field if f.proto3_optional}
    return tuple(descriptor.oneofs[i] for i in sorted(declared - synthetic))


class SchemaBuilder:
    """Message schemas as requests carry them (``output=False``) or responses do.

    ``outputs`` are the full names of the messages responses hold (``reachable``):
    their request forms are named with ``INPUT_SUFFIX``.
    """

    def __init__(self, notes: Mapping[str, str], outputs: frozenset[str]) -> None:
        self.notes = notes
        self.outputs = outputs
        self.schemas: Json = {}

    def message(self, descriptor: Descriptor, output: bool) -> Json:
        """A ``$ref`` to the message's schema, adding it (and what it uses) on first sight."""
        name = descriptor.full_name
        if not output and name in self.outputs:
            name += INPUT_SUFFIX
        if name not in self.schemas:
            self.schemas[name] = {}  # placeholder: recursive messages stop here
            schema: Json = {
                "type": "object",
                "properties": {f.json_name: self.field(f, output) for f in descriptor.fields},
            }
            fields = descriptor.fields
            if output and (required := [f.json_name for f in fields if _required_in(f)]):
                schema["required"] = required
            schema["additionalProperties"] = False
            choices = [self._oneof(oneof, output) for oneof in real_oneofs(descriptor)]
            if len(choices) == 1:
                schema["oneOf"] = choices[0]
            elif choices:
                schema["allOf"] = [{"oneOf": choice} for choice in choices]
            notes = [self.notes[descriptor.full_name]] if descriptor.full_name in self.notes else []
            if name != descriptor.full_name:
                notes.append(
                    f"The request form of `{descriptor.full_name}`: every field may be left "
                    "out (it takes its proto3 default)."
                )
            if notes:
                schema["description"] = "\n\n".join(notes)
            self.schemas[name] = schema
        return _ref(name)

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
                "type": "string",
                "enum": [value.name for value in descriptor.values],
                "description": f"{heading}\n\n{values}" if heading else values,
            }
        return _ref(name)

    def field(self, field: FieldDescriptor, output: bool) -> Json:
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
        notes = [self.notes[field.full_name]] if field.full_name in self.notes else []
        if (oneof := _declared_oneof(field)) is not None:
            always = output and oneof.full_name in SET_IN_EVERY_RESPONSE
            notes.append(
                f"One of `{oneof.name}`: {'exactly' if always else 'at most'} one of these "
                "fields is set."
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


def _declared_oneof(field: FieldDescriptor) -> OneofDescriptor | None:
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


def _status_schemas() -> Json:
    return {
        STATUS: {
            "type": "object",
            "description": "A refusal (design section 5): `code` is the google.rpc.Code, "
            "`details` hold exactly one google.rpc.ErrorInfo (domain `cardrules`, a stable "
            "`reason`, dynamic values in `metadata`) and, for malformed input, a "
            "google.rpc.BadRequest whose `fieldViolations` name the fields.",
            "properties": {
                "code": {**_INT32, "description": "The google.rpc.Code, e.g. 3 INVALID_ARGUMENT."},
                "message": {"type": "string", "description": "For developers, in English."},
                "details": {"type": "array", "items": _ref(ANY)},
            },
            "required": ["code", "details"],
            "additionalProperties": False,
        },
        ANY: {
            "type": "object",
            "description": "A message of the type named by `@type`, with its fields beside it: "
            "`type.googleapis.com/google.rpc.ErrorInfo` (`reason`, `domain`, `metadata`) or "
            "`type.googleapis.com/google.rpc.BadRequest` (`fieldViolations` of `field` and "
            "`description`).",
            "properties": {"@type": {"type": "string"}},
            "required": ["@type"],
            "additionalProperties": True,
        },
    }


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
    operation["requestBody"] = {
        "required": True,
        "content": {JSON_TYPE: {"schema": builder.message(request, output=False)}},
    }
    responses: Json = {
        "200": {
            "description": "OK",
            "headers": {"X-Request-Id": _ref("X-Request-Id", "headers")},
            "content": {JSON_TYPE: {"schema": builder.message(response, output=True)}},
        }
    }
    for status, name, _ in ERROR_RESPONSES:
        responses[status] = _ref(name, "responses")
    operation["responses"] = responses
    return operation


def build_document(
    services: Sequence[ServiceDescriptor] = SERVICES, notes: Mapping[str, str] | None = None
) -> Json:
    """The whole document; ``notes`` are the proto comments (see ``comments``)."""
    responses_of = [
        message_descriptor(route.response_class)
        for service in services
        for route in routes(service)
    ]
    builder = SchemaBuilder(notes or {}, reachable(responses_of))
    paths: Json = {}
    tags: list[Json] = []
    for service in services:
        tag: Json = {"name": service.name}
        if service.full_name in builder.notes:
            tag["description"] = builder.notes[service.full_name]
        tags.append(tag)
        for route in routes(service):
            request = message_descriptor(route.request_class)
            response = message_descriptor(route.response_class)
            operation = _operation(builder, service, route.method, request, response)
            paths.setdefault(route.path, {})[route.http_method.lower()] = operation
    paths["/openapi.json"] = {
        "get": {
            "operationId": "OpenApi_Get",
            "summary": "This document",
            "tags": ["OpenApi"],
            "responses": {
                "200": {
                    "description": "The OpenAPI document of this service.",
                    "content": {JSON_TYPE: {"schema": {"type": "object"}}},
                },
                "405": _ref("MethodNotAllowed", "responses"),
            },
        }
    }
    error_headers = {"X-Request-Id": _ref("X-Request-Id", "headers")}
    responses: Json = {}
    for status, name, text in ERROR_RESPONSES:
        headers = dict(error_headers)
        if status == "405":
            headers["Allow"] = {
                "description": "The methods this path allows.",
                "schema": {"type": "string"},
            }
        responses[name] = {
            "description": text,
            "headers": headers,
            "content": {JSON_TYPE: {"schema": _ref(STATUS)}},
        }
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "cardrules",
            "version": API_VERSION,
            "description": "Stateless card-game rules over HTTP/JSON, generated from the "
            "proto API by scripts/generate_openapi.py: the same RPCs as gRPC, in the proto3 "
            "JSON mapping. The service keeps nothing between calls: every call is safe to retry.",
        },
        "tags": [*tags, {"name": "OpenApi", "description": "This document."}],
        "paths": paths,
        "components": {
            "schemas": {**builder.schemas, **_status_schemas()},
            "responses": responses,
            "headers": {
                "X-Request-Id": {
                    "description": "The request id of the log line: the caller's "
                    "X-Request-Id when usable, else a new one.",
                    "schema": {"type": "string"},
                }
            },
        },
    }


def render(document: Json) -> bytes:
    """The committed form: two-space indents, a final newline."""
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode()


def served_document() -> bytes:
    """The committed document (package data, so an installed server has it too)."""
    return COMMITTED.read_bytes()
