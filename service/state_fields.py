"""Which state tokens a release reads: a fingerprint of the structure of ``GameState``.

A release refuses a token whose ``GameState`` holds a field or an enum value it lacks
(``TOKEN_FROM_NEWER_RELEASE``, service/krypkasino_api.py ``_unseal``), so a rollback
or a mixed fleet needs releases whose state message is the same.
``cardrules --version`` prints this fingerprint and the server's ``listening`` log
line carries it (``state_fields``): two releases with the same fingerprint (and the
same schema version byte) refuse none of each other's tokens as
``TOKEN_FROM_NEWER_RELEASE``. That is necessary, not sufficient: a check on a state's
values that one release adds refuses tokens (``STATE_INVALID``) whatever the
fingerprint, and docs/api.md, "Upgrades", lists those checks (README.md, "The
service").

The fingerprint covers ``GameState`` and every message and enum reachable from it
through its fields, nested and imported types included: each type's full name, each
field's number, name, type, label and the full name of its message or enum type,
each enum value's name and number. It is taken of a canonical text, sorted, so the
order of declaration, comments, options and anything outside that closure (the RPC
requests and responses, the services) leave it unchanged.
"""

from __future__ import annotations

import hashlib

from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor
from google.protobuf.descriptor_pb2 import FieldDescriptorProto

FINGERPRINT_HEX_DIGITS = 8


def state_fields(state: Descriptor = pb.GameState.DESCRIPTOR) -> str:
    """8 lowercase hex digits of SHA-256 of ``structure(state)``: equal for releases
    whose state messages are the same, whatever their protos say besides."""
    digest = hashlib.sha256(structure(state).encode("utf-8")).hexdigest()
    return digest[:FINGERPRINT_HEX_DIGITS]


def structure(state: Descriptor = pb.GameState.DESCRIPTOR) -> str:
    """The canonical text that ``state_fields`` hashes: one line per message, field,
    enum and enum value of ``state``'s closure, types sorted by full name, fields by
    number, enum values by number then name (aliases share a number)."""
    messages, enums = _closure(state)
    lines: list[str] = []
    for name in sorted(messages):
        lines.append(f"message {name}")
        fields = sorted(messages[name].fields, key=lambda field: field.number)
        lines.extend(f"  field {_field(field)}" for field in fields)
    for name in sorted(enums):
        lines.append(f"enum {name}")
        values = sorted(enums[name].values, key=lambda value: (value.number, value.name))
        lines.extend(f"  value {value.number} {value.name}" for value in values)
    return "".join(f"{line}\n" for line in lines)


def _field(field: FieldDescriptor) -> str:
    """``25 last_move TYPE_MESSAGE LABEL_OPTIONAL cardrules.krypkasino.v1.PlayedMove``.

    The names are descriptor.proto's, the same in every protobuf runtime (recent ones
    dropped ``FieldDescriptor.label``, so it is read from ``is_repeated``)."""
    kind = FieldDescriptorProto.Type.Name(FieldDescriptorProto.Type.ValueType(field.type))
    words = [str(field.number), field.name, kind, _label(field)]
    target = field.message_type or field.enum_type
    if target is not None:
        words.append(target.full_name)
    return " ".join(words)


def _label(field: FieldDescriptor) -> str:
    if field.is_repeated:
        return "LABEL_REPEATED"
    return "LABEL_REQUIRED" if field.is_required else "LABEL_OPTIONAL"


def _closure(state: Descriptor) -> tuple[dict[str, Descriptor], dict[str, EnumDescriptor]]:
    """Every message and enum reachable from ``state`` through fields, by full name."""
    messages: dict[str, Descriptor] = {}
    enums: dict[str, EnumDescriptor] = {}
    todo = [state]
    while todo:
        message = todo.pop()
        if message.full_name in messages:
            continue  # a recursive or shared type is visited once
        messages[message.full_name] = message
        for field in message.fields:
            if field.message_type is not None:
                todo.append(field.message_type)
            if field.enum_type is not None:
                enums[field.enum_type.full_name] = field.enum_type
    return messages, enums
