"""Proto3 canonical JSON in and out of the HTTP gateway (design sections 3 and 5).

Requests are parsed by ``google.protobuf.json_format`` exactly as the proto3
JSON mapping says (lowerCamelCase or the proto field names, enum names or
numbers, 64-bit integers as strings or numbers, bytes as base64), and unknown
fields are refused. A refusal is ``INVALID_ARGUMENT`` with reason
``JSON_INVALID`` and a ``BadRequest`` naming the offending field by its proto
path (``decks[0].cards[3].rank``), like every other field violation.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from service.errors import ServiceError, invalid_argument
from service.http_routes import message_descriptor

MessageT = TypeVar("MessageT", bound=Message)

JSON_INVALID = "JSON_INVALID"
_NESTED_PREFIX = re.compile(r"Failed to parse \w+ field: ")
# A UTF-8 body can only hold a surrogate as a \uD800-\uDFFF escape.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


class _DuplicateKeyError(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """RFC 8259 leaves duplicate names undefined; refusing them keeps one meaning."""
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKeyError(key)
        result[key] = value
    return result


def parse_request(body: bytes, message_class: type[MessageT]) -> MessageT:
    """The request message of a JSON body; raises ``JSON_INVALID`` naming the field."""
    if not body.strip():
        return message_class()  # an empty body is the empty request, as in grpc-gateway
    try:
        value = json.loads(body.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except UnicodeDecodeError as error:
        raise _json_invalid("", f"the body is not UTF-8: {error.reason}") from None
    except _DuplicateKeyError as error:
        raise _json_invalid(str(error), f"the name {error} appears twice") from None
    except ValueError as error:
        raise _json_invalid("", f"malformed JSON: {error}") from None
    except RecursionError:
        raise _json_invalid("", "the JSON nests too deeply") from None
    if not isinstance(value, dict):
        raise _json_invalid("", f"the body must be a JSON object, not {type(value).__name__}")
    if _SURROGATE_ESCAPE.search(body) and _holds_lone_surrogate(value):
        # json_format fails on these with SystemError, not ParseError.
        raise _json_invalid("", "a string holds an unpaired UTF-16 surrogate escape")
    message = message_class()
    try:
        json_format.ParseDict(value, message)
    except json_format.ParseError as error:
        field = offending_field(value, message_descriptor(message_class))
        raise _json_invalid(field, _innermost(str(error))) from None
    return message


def _holds_lone_surrogate(value: object) -> bool:
    """Whether a name or string of the parsed JSON is not valid Unicode text."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _json_invalid(field: str, description: str) -> ServiceError:
    """``field`` is "" for the whole body."""
    return invalid_argument(JSON_INVALID, description, field)


def _innermost(text: str) -> str:
    """json_format nests "Failed to parse x field: " per level; the last part says why."""
    return _NESTED_PREFIX.split(text.split("\n", 1)[0])[-1]


def offending_field(value: object, descriptor: Descriptor, path: str = "") -> str:
    """The proto path of the deepest field of ``value`` that json_format refuses.

    Each name is tried alone, so the first refused one is found whatever
    json_format's own iteration order; ``path`` itself when nothing narrower fails.
    """
    if not isinstance(value, dict):
        return path
    fields: dict[str, FieldDescriptor] = {}
    for declared in descriptor.fields:
        fields[declared.name] = declared
        fields[declared.json_name] = declared
    message_class = GetMessageClass(descriptor)
    for key, item in value.items():
        field = fields.get(key)
        name = f"{path}.{key if field is None else field.name}".lstrip(".")
        if field is None:
            return name
        if _parses({key: item}, message_class):
            continue
        nested = field.message_type
        if nested is None or nested.GetOptions().map_entry:
            return name
        if not field.is_repeated:
            return offending_field(item, nested, name)
        if not isinstance(item, list):
            return name
        for index, element in enumerate(item):
            if not _parses({key: [element]}, message_class):
                return offending_field(element, nested, f"{name}[{index}]")
        return name
    return path


def _parses(value: dict[str, Any], message_class: type[Message]) -> bool:
    try:
        json_format.ParseDict(value, message_class())
    except json_format.ParseError:
        return False
    return True


def message_json(message: Message) -> bytes:
    """Canonical proto3 JSON; fields without presence are printed even when zero or empty.

    Printing them spares browser clients a table of defaults (``"handSizes": []``,
    ``"seat": 0``); fields with presence (``optional``, messages) appear only when set.
    """
    value = json_format.MessageToDict(message, always_print_fields_with_no_presence=True)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def status_json(error: ServiceError) -> bytes:
    """The ``google.rpc.Status`` of a refusal as JSON, details with their ``@type``."""
    value = json_format.MessageToDict(error.to_status())
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
