"""Request messages from keyword arguments, shared by the sync and asyncio clients.

Every client method takes either a whole request message or its fields as
keywords, never both (a mix would leave it unclear which value wins).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TypeVar, cast

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from cardrules.cards.v1 import cards_pb2
from cardrules.client.tokens import TokenBytes
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

_Request = TypeVar("_Request", bound=Message)


def _build(
    request: _Request | None, message_type: type[_Request], fields: dict[str, object]
) -> _Request:
    given = {
        name: _listed(_token(name, value)) for name, value in fields.items() if value is not None
    }
    if request is None:
        try:
            return message_type(**given)
        except (TypeError, ValueError) as error:
            raise _refusal(message_type, given, "") or error from None
    if not isinstance(request, message_type):
        raise TypeError(
            f"request: expected a {message_type.DESCRIPTOR.full_name}, got {type(request).__name__}"
        )
    if given:
        raise _request_and_fields(given)
    return request


# What builds each message a caller is likeliest to pass as something else.
_HOW_TO_BUILD = {
    "cardrules.cards.v1.Card": "card('AS') builds one",
    "cardrules.cards.v1.Deck": "cards_pb2.Deck(cards=cards('AS KD ...')) builds one",
    "cardrules.krypkasino.v1.GameConfig": "krypkasino_pb2.GameConfig(players=2) builds one",
    "cardrules.krypkasino.v1.Move": (
        "krypkasino_pb2.Move(card=card('AS'), captures=cards('...')) builds one, "
        "or pass a LegalMove from legal_moves"
    ),
}

# What a scalar field takes, as its refusal states it: an integer's range too.
_SCALARS = {
    FieldDescriptor.CPPTYPE_BOOL: "a bool",
    # Ranges in decimal, as the HTTP gateway and the command line say them.
    FieldDescriptor.CPPTYPE_INT32: f"an int32 ({-(2**31)} to {2**31 - 1})",
    FieldDescriptor.CPPTYPE_INT64: f"an int64 ({-(2**63)} to {2**63 - 1})",
    FieldDescriptor.CPPTYPE_UINT32: f"a uint32 (0 to {2**32 - 1})",
    FieldDescriptor.CPPTYPE_UINT64: f"a uint64 (0 to {2**64 - 1})",
}

_Refusal = TypeError | ValueError


def _refusal(message: type[Message], fields: Mapping[str, object], prefix: str) -> _Refusal | None:
    """The first of ``fields`` protobuf refuses, as an error of the same type naming its
    path (``config.players``, ``decks[0]``): protobuf's own message names no field."""
    for name, value in fields.items():
        try:
            message(**{name: value})
        except (TypeError, ValueError) as error:
            field = _descriptor(message).fields_by_name.get(name) if isinstance(name, str) else None
            return _field_refusal(field, f"{prefix}{name}", value, error)
    return None


def _field_refusal(
    field: FieldDescriptor | None, path: str, value: object, error: _Refusal
) -> _Refusal:
    """``error``, which protobuf raised for ``value`` at ``path``, saying what the field takes."""
    found = None
    if field is not None and field.message_type is not None:
        message = GetMessageClass(field.message_type)
        found = (
            _repeated_message_refusal(message, path, value)
            if field.is_repeated
            else _message_refusal(message, path, value)
        )
    elif field is not None and not field.is_repeated:
        found = _scalar_refusal(field, path, value, error)
    return found or type(error)(f"{path}: {error}")


def _scalar_refusal(
    field: FieldDescriptor, path: str, value: object, error: _Refusal
) -> _Refusal | None:
    if field.enum_type is not None:
        names = ", ".join(v.name for v in field.enum_type.values)
        kind: str | None = f"a {field.enum_type.name} ({names}, or its number)"
    else:
        kind = _SCALARS.get(field.cpp_type)
    if kind is None:
        return None
    if isinstance(error, ValueError):  # an integer out of range, an unknown enum name
        return ValueError(f"{path}: must be {kind}, not {value!r}")
    return TypeError(f"{path}: expected {kind}, got {type(value).__name__}")


def _message_refusal(message: type[Message], path: str, value: object) -> _Refusal | None:
    if isinstance(value, Mapping):  # protobuf takes a dict for a message: look inside
        return _refusal(message, value, f"{path}.")
    if isinstance(value, message):
        return None
    return TypeError(f"{path}: expected a {_message_name(message)}, got {type(value).__name__}")


def _repeated_message_refusal(message: type[Message], path: str, value: object) -> _Refusal | None:
    if isinstance(value, str | bytes | Mapping | Message) or not isinstance(value, Iterable):
        return TypeError(
            f"{path}: expected a list of {_message_name(message, 's')}, got {type(value).__name__}"
        )
    for index, item in enumerate(value):  # an iterator in a dict is spent: protobuf's words then
        found = _message_refusal(message, f"{path}[{index}]", item)
        if found is not None:
            return found
    return None


def _message_name(message: type[Message], plural: str = "") -> str:
    how = _HOW_TO_BUILD.get(message.DESCRIPTOR.full_name)
    return f"{message.DESCRIPTOR.name} message{plural}" + (f" ({how})" if how else "")


def _descriptor(message: type[Message]) -> Descriptor:
    # The stubs type DESCRIPTOR as the pure-Python or the upb class; both have
    # the attributes read here.
    return cast(Descriptor, message.DESCRIPTOR)


def _listed(value: object) -> object:
    """An iterator (a generator of decks) as a list, so that a refusal can look
    through what protobuf already consumed."""
    return list(value) if isinstance(value, Iterator) else value


_TOKENS = frozenset({"state", "seat_token"})


def _token(name: str, value: object) -> object:
    """A token as a database driver may give it back (psycopg2's ``memoryview`` of a
    ``bytea``, a ``bytearray``) as ``bytes``, which protobuf alone takes; a ``str`` is
    refused naming the field, never quoting the token."""
    if name not in _TOKENS or isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    hint = ": a token in text (base64) is decoded first" if isinstance(value, str) else ""
    raise TypeError(f"{name}: expected the token's bytes, got {type(value).__name__}{hint}")


def _request_and_fields(names: Iterable[str]) -> TypeError:
    return TypeError(f"give either a request or its fields, not both: {sorted(names)}")


def new_game(
    request: pb.NewGameRequest | None,
    config: pb.GameConfig | None,
    players: int | None,
    seed: int | None,
    decks: Iterable[cards_pb2.Deck] | None,
    draw: cards_pb2.Deck | None,
) -> pb.NewGameRequest:
    """``players`` is a shortcut that sets (or overrides) ``config.players``."""
    if players is not None and request is not None:
        raise _request_and_fields(["players"])
    if players is not None:
        # The config goes through _build and players through _field_refusal, so either
        # refused is named like any other field (CopyFrom and setattr name neither).
        merged = _build(None, pb.NewGameRequest, {"config": config}).config
        try:
            merged.players = players
        except (TypeError, ValueError) as error:
            field = pb.GameConfig.DESCRIPTOR.fields_by_name["players"]
            raise _field_refusal(field, "players", players, error) from None
        config = merged
    return _build(
        request,
        pb.NewGameRequest,
        {"config": config, "seed": seed, "decks": decks, "draw": draw},
    )


def legal_moves(
    request: pb.LegalMovesRequest | None,
    state: TokenBytes | None,
    seat: int | None,
    seat_token: TokenBytes | None,
) -> pb.LegalMovesRequest:
    return _build(
        request, pb.LegalMovesRequest, {"state": state, "seat": seat, "seat_token": seat_token}
    )


def play(
    request: pb.PlayRequest | None,
    state: TokenBytes | None,
    seat: int | None,
    seat_token: TokenBytes | None,
    move: pb.Move | pb.LegalMove | None,
) -> pb.PlayRequest:
    """``move`` may be a ``LegalMove`` straight from ``legal_moves``."""
    if isinstance(move, pb.LegalMove):
        move = move.move
    return _build(
        request,
        pb.PlayRequest,
        {"state": state, "seat": seat, "seat_token": seat_token, "move": move},
    )


def score(request: pb.ScoreRequest | None, state: TokenBytes | None) -> pb.ScoreRequest:
    return _build(request, pb.ScoreRequest, {"state": state})


def get_view(
    request: pb.GetViewRequest | None,
    state: TokenBytes | None,
    seat: int | None,
    seat_token: TokenBytes | None,
) -> pb.GetViewRequest:
    """Without ``seat`` the request asks for the public view."""
    return _build(
        request, pb.GetViewRequest, {"state": state, "seat": seat, "seat_token": seat_token}
    )
