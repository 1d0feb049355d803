"""Helpers for tests that talk to a real ``cardrules serve`` over gRPC (design sections 5, 7).

They build requests from engine cards without going through ``service.codec``
(the code under test) and decode refusals from the wire: the
``google.rpc.Status`` in the ``grpc-status-details-bin`` trailer (or, for the
conformance suite, one parsed from an HTTP/JSON body).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from collections.abc import Callable, Iterable, Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import google.rpc.error_details_pb2 as error_details_pb2
import google.rpc.status_pb2 as status_pb2
import grpc
from cardrules.cards.v1 import cards_pb2
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from cardrules.krypkasino.v1 import krypkasino_pb2_grpc
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from grpc_health.v1 import health_pb2_grpc
from grpc_health.v1.health import HealthServicer
from grpc_status import rpc_status

from engine.cards import Card
from engine.krypkasino import Move

DOMAIN = "cardrules"
TIMEOUT = 10.0
_UPPER_SNAKE = re.compile(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)*")
#: Refusals of a gRPC request as a whole: its one field violation names no field.
WHOLE_REQUEST_REASONS = frozenset({"REQUEST_MALFORMED", "FIELD_UNKNOWN"})
_CODES = {code.value[0]: code for code in grpc.StatusCode}

Stub = krypkasino_pb2_grpc.KrypkasinoServiceStub
RequestT = TypeVar("RequestT")
ResponseT = TypeVar("ResponseT")


@contextmanager
def loopback_server(register: Callable[[grpc.Server], object]) -> Iterator[int]:
    """A real synchronous gRPC server on a free loopback port, serving what ``register``
    adds to it: its port. Stopped at the end."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    register(server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield port
    finally:
        server.stop(None)


@contextmanager
def health_server(
    service: str, status: int, servicer: HealthServicer | None = None
) -> Iterator[int]:
    """``loopback_server`` with grpcio-health-checking's servicer (or ``servicer``, one of
    its subclasses), ``service`` answering ``status`` (``health_pb2.HealthCheckResponse``'s):
    its port."""
    servicer = servicer or HealthServicer()
    servicer.set(service, status)
    with loopback_server(
        lambda server: health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    ) as port:
        yield port


@contextmanager
def connect(target: str) -> Iterator[Stub]:
    """A stub on a fresh insecure channel to ``target``, closed afterwards."""
    with grpc.insecure_channel(target) as channel:
        yield Stub(channel)


def health(channel: grpc.Channel) -> Any:
    """The Health stub (its type stubs lack the methods)."""
    return health_pb2_grpc.HealthStub(channel)


# -- cards ------------------------------------------------------------------------


def dealt(view: pb.View) -> pb.View:
    """The view without what names one particular game (its id, and the state id that hashes it)."""
    copy = pb.View()
    copy.CopyFrom(view)
    copy.ClearField("game_id")
    copy.ClearField("state_id")
    return copy


def card_proto(card: Card) -> cards_pb2.Card:
    """The API card of an engine card code (rank and suit enums start at 1, K1.1)."""
    return cards_pb2.Card(
        rank=cards_pb2.Rank.ValueType(card // 4 + 1), suit=cards_pb2.Suit.ValueType(card % 4 + 1)
    )


def card_code(card: cards_pb2.Card) -> Card:
    """The engine card code of a well-formed API card."""
    assert 1 <= card.rank <= 13 and 1 <= card.suit <= 4, card
    return Card((card.rank - 1) * 4 + card.suit - 1)


def move_proto(move: Move) -> pb.Move:
    return pb.Move(card=card_proto(move.card), captures=[card_proto(c) for c in move.captures])


def move_of(text: str) -> pb.Move:
    """A request move in the transcript notation: ``8D`` crawls, ``8D>AH+7C`` captures."""
    return move_proto(Move.parse(text))


def deck_proto(cards: Iterable[Card]) -> cards_pb2.Deck:
    return cards_pb2.Deck(cards=[card_proto(c) for c in cards])


# -- refusals ---------------------------------------------------------------------


@dataclass(frozen=True)
class Refusal:
    """A refused call as the wire carries it: code, ErrorInfo and field violations."""

    code: grpc.StatusCode
    message: str
    reason: str
    metadata: dict[str, str]
    violations: dict[str, str]  # field path -> description
    has_bad_request: bool


def status_refusal(status: status_pb2.Status) -> Refusal:
    """Decode and check the rich status of a refusal (design section 5), whichever
    transport carried it.

    Exactly one ``ErrorInfo`` in domain ``cardrules`` with an UPPER_SNAKE
    reason, at most one ``BadRequest``, nothing else; never INTERNAL or UNKNOWN.
    """
    code = _CODES[status.code]
    assert code not in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN), status
    infos = [d for d in status.details if d.TypeName() == "google.rpc.ErrorInfo"]
    bad_requests = [d for d in status.details if d.TypeName() == "google.rpc.BadRequest"]
    assert len(infos) == 1, status
    assert len(bad_requests) <= 1, status
    assert len(status.details) == len(infos) + len(bad_requests), status
    info = error_details_pb2.ErrorInfo()
    infos[0].Unpack(info)
    assert info.domain == DOMAIN, info
    assert _UPPER_SNAKE.fullmatch(info.reason), info.reason
    violations: dict[str, str] = {}
    for packed in bad_requests:
        bad_request = error_details_pb2.BadRequest()
        packed.Unpack(bad_request)
        assert bad_request.field_violations, bad_request
        for violation in bad_request.field_violations:
            # Only a request that is no request message of this release names no field.
            assert violation.description, violation
            assert violation.field or info.reason in WHOLE_REQUEST_REASONS, violation
            assert not names_its_field(violation.field, violation.description), violation
            # Each violation's reason is the ErrorInfo's (docs/api.md, "Errors").
            assert violation.reason == info.reason, violation
            violations[violation.field] = violation.description
    if code is grpc.StatusCode.INVALID_ARGUMENT:
        assert violations, f"malformed input without a field violation: {status}"
    return Refusal(
        code, status.message, info.reason, dict(info.metadata), violations, bool(bad_requests)
    )


def names_its_field(field: str, description: str) -> bool:
    """Whether a violation's description starts with its own field as its subject
    (``seat must be ...``, ``seat: ...``), which docs/api.md, "Errors", says it does not:
    the violation names the field, its description says only why, and a UI printing
    ``field: description`` would repeat it. A sentence about a thing the field holds
    (``state token is too short``) is a why."""
    return bool(field) and description.startswith((f"{field} must ", f"{field} is ", f"{field}: "))


def refusal_of(error: grpc.RpcError) -> Refusal:
    """Decode and check the rich status of a failed call: the ``google.rpc.Status`` in
    its trailer, with the call's own code (``status_refusal``)."""
    call = cast(grpc.Call, error)  # every error a stub raises is also the call
    code = call.code()
    status = rpc_status.from_call(call)
    assert status is not None, f"{code} without a google.rpc.Status: {call.details()}"
    assert status.code == code.value[0]
    return status_refusal(status)


def refused(
    rpc: grpc.UnaryUnaryMultiCallable[RequestT, ResponseT],
    request: RequestT,
    metadata: tuple[tuple[str, str], ...] = (),
) -> Refusal:
    """Call ``rpc`` expecting a refusal, and decode it."""
    try:
        rpc(request, timeout=TIMEOUT, metadata=metadata)
    except grpc.RpcError as error:
        return refusal_of(error)
    raise AssertionError(f"{type(request).__name__} was accepted")


def outcome(call: Callable[[], object]) -> Refusal | None:
    """``None`` when ``call`` succeeds, else its checked refusal."""
    try:
        call()
    except grpc.RpcError as error:
        return refusal_of(error)
    return None


# -- tokens (design section 4), built from the documented format ----------------

KEY_ID_BYTES = 4
NONCE_BYTES = 12
SEALED_OVERHEAD = 1 + KEY_ID_BYTES + NONCE_BYTES + 16  # version, key id, nonce, GCM tag
PLAIN_FLAG = 0x80


def key_id(key_text: str) -> bytes:
    return hashlib.sha256(base64.b64decode(key_text)).digest()[:KEY_ID_BYTES]


def _associated(game: str, version: int) -> bytes:
    return b"cardrules/" + game.encode() + b"/" + bytes([version])


def seal(payload: bytes, key_text: str, game: str = "krypkasino", version: int = 1) -> bytes:
    """``version | key id | nonce | AES-256-GCM(payload)``, as a server with that key seals."""
    nonce = os.urandom(NONCE_BYTES)
    aead = AESGCM(base64.b64decode(key_text))
    sealed = aead.encrypt(nonce, payload, _associated(game, version))
    return bytes([version]) + key_id(key_text) + nonce + sealed


def unseal(token: bytes, key_text: str, game: str = "krypkasino") -> bytes:
    """The payload of a sealed token (the test shares the server's key)."""
    assert token[1 : 1 + KEY_ID_BYTES] == key_id(key_text)
    nonce_end = 1 + KEY_ID_BYTES + NONCE_BYTES
    aead = AESGCM(base64.b64decode(key_text))
    return aead.decrypt(
        token[1 + KEY_ID_BYTES : nonce_end], token[nonce_end:], _associated(game, token[0])
    )


def game_state(token: bytes, key_text: str) -> pb.GameState:
    return pb.GameState.FromString(unseal(token, key_text))


def state_of_request_size(size: int) -> bytes:
    """A state token (no token of ours) whose GetViewRequest is exactly ``size`` bytes."""
    state = b"\x01" + bytes(size - 4)
    while len(pb.GetViewRequest(state=state).SerializeToString()) > size:
        state = state[:-1]
    assert len(pb.GetViewRequest(state=state).SerializeToString()) == size
    return state
