"""The OpenAPI 3.1 document of the HTTP gateway, built from the proto descriptors.

Paths come from the same ``service.http_routes`` the gateway serves, schemas
from the messages under the proto3 JSON mapping (lowerCamelCase names, 64-bit
integers as strings, bytes as base64, enums by name), error responses are the
``google.rpc.Status`` of design section 5. Descriptions are the proto comments,
which only a descriptor set made with ``--include_source_info`` carries:
``scripts/generate_openapi.py`` makes one and writes the committed
``service/cardrules.openapi.json``, which ships inside the package and is
what the server serves at ``/openapi.json``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cardrules.krypkasino.v1 import krypkasino_pb2
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import (
    Descriptor,
    EnumDescriptor,
    FieldDescriptor,
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


class _Builder:
    def __init__(self, notes: Mapping[str, str]) -> None:
        self.notes = notes
        self.schemas: Json = {}

    def _described(self, schema: Json, name: str) -> Json:
        if name in self.notes:
            schema["description"] = self.notes[name]
        return schema

    def message(self, descriptor: Descriptor) -> Json:
        """A ``$ref`` to the message's schema, adding it (and what it uses) on first sight."""
        name = descriptor.full_name
        if name not in self.schemas:
            self.schemas[name] = {}  # placeholder: recursive messages stop here
            properties = {field.json_name: self.field(field) for field in descriptor.fields}
            self.schemas[name] = self._described(
                {"type": "object", "properties": properties, "additionalProperties": False},
                name,
            )
        return _ref(name)

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

    def field(self, field: FieldDescriptor) -> Json:
        message = field.message_type
        if message is not None and message.GetOptions().map_entry:
            key, value = message.fields_by_name["key"], message.fields_by_name["value"]
            schema: Json = {"type": "object", "additionalProperties": self._value(value)}
            if key.type != FieldDescriptor.TYPE_STRING:
                schema["propertyNames"] = {"pattern": "^-?[0-9]+$|^true$|^false$"}
        elif field.is_repeated:
            schema = {"type": "array", "items": self._value(field)}
        else:
            schema = dict(self._value(field))
        notes = [self.notes[field.full_name]] if field.full_name in self.notes else []
        oneof = field.containing_oneof
        if message is None and field.has_presence:
            notes.append("Optional: absent when not set.")
        elif oneof is not None and len(oneof.fields) > 1:
            notes.append(f"One of `{oneof.name}`: at most one of these fields is set.")
        if notes:
            schema["description"] = "\n\n".join(notes)
        return schema

    def _value(self, field: FieldDescriptor) -> Json:
        if field.message_type is not None:
            return self.message(field.message_type)
        if field.enum_type is not None:
            return self.enum(field.enum_type)
        return dict(_SCALARS[field.type])


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
    builder: _Builder,
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
        "content": {JSON_TYPE: {"schema": builder.message(request)}},
    }
    responses: Json = {
        "200": {
            "description": "OK",
            "headers": {"X-Request-Id": _ref("X-Request-Id", "headers")},
            "content": {JSON_TYPE: {"schema": builder.message(response)}},
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
    builder = _Builder(notes or {})
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
