"""Request messages from keyword arguments, shared by the sync and asyncio clients.

Every client method takes either a whole request message or its fields as
keywords, never both (a mix would leave it unclear which value wins).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from google.protobuf.message import Message

from cardrules.cards.v1 import cards_pb2
from cardrules.client.tokens import TokenBytes
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

_Request = TypeVar("_Request", bound=Message)


def _build(
    request: _Request | None, message_type: type[_Request], fields: dict[str, object]
) -> _Request:
    given = {name: _token(name, value) for name, value in fields.items() if value is not None}
    if request is None:
        try:
            return message_type(**given)
        except TypeError:
            for name, value in given.items():  # protobuf's message names no field
                try:
                    message_type(**{name: value})
                except TypeError as error:
                    raise TypeError(f"{name}: {error}") from None
            raise
    if not isinstance(request, message_type):
        raise TypeError(
            f"expected a {message_type.DESCRIPTOR.full_name}, got {type(request).__name__}"
        )
    if given:
        raise _request_and_fields(given)
    return request


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
        merged = pb.GameConfig()
        if config is not None:
            merged.CopyFrom(config)
        merged.players = players
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
