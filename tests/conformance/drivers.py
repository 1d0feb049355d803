"""Three ways into one game: the engine in process, the gRPC server, the HTTP gateway.

Every driver answers in plain comparable Python values: messages become the
dicts of ``json_format.MessageToDict`` (proto field names, every field), and
refusals become ``Refused(code, reason, metadata)``. The engine's values go
through the service codec, since the proto is the contract all three share;
views lose their ``game_id`` and ``state_id``, which name different games on
different drivers. Handles are opaque: each driver keeps its own kind of
state (an engine ``State``, a sealed token as bytes, a sealed token as base64).
A game can also be resumed from an engine ``State``: the servers get it as the
conformance server would have sealed it (the test key), so long matches need
not be played move by move over the wire.
"""

from __future__ import annotations

import base64
import http.client
import json
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpc
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from cardrules.krypkasino.v1 import krypkasino_pb2_grpc
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import status_pb2

from engine.cards import card_str
from engine.krypkasino import IllegalMoveError, Reason, legal_moves, open_game, play, score, view
from engine.krypkasino.state import State
from service import codec, state_codec, view_codec
from service.errors import HTTP_STATUS
from service.tokens import KeyRing, SeatTokens
from tests.service.grpc_helpers import Refusal, refusal_of, seal, status_refusal
from tests.service.server_process import TEST_KEY

Plain = Any
"""JSON-like values: dicts, lists, strings, numbers, booleans."""

_IDS = ("game_id", "state_id")
RESUMED_GAME_ID = "0123456789abcdef0123456789abcdef"


@dataclass(frozen=True)
class Refused:
    """A refusal as every driver must report it (design section 5)."""

    code: str
    reason: str
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Started:
    handle: Any
    seats: int
    result: Plain


@dataclass(frozen=True)
class Played:
    handle: Any
    result: Plain


class Driver(Protocol):
    """The five RPCs, driver-neutral."""

    name: str

    def new_game(self, request: pb.NewGameRequest) -> Started: ...

    def resume(self, state: State) -> Any: ...

    def legal_moves(self, handle: Any, seat: int) -> Plain: ...

    def play(self, handle: Any, seat: int, move: pb.Move) -> Played | Refused: ...

    def score(self, handle: Any) -> Plain: ...

    def view(self, handle: Any, seat: int | None) -> Plain: ...


def plain(message: Message) -> Plain:
    """A message as comparable values; a view loses the ids that differ per game."""
    value = json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    return _drop_ids(value)


def _drop_ids(value: Plain) -> Plain:
    if isinstance(value, dict):
        return {k: _drop_ids(v) for k, v in value.items() if k not in _IDS}
    if isinstance(value, list):
        return [_drop_ids(v) for v in value]
    return value


def _refused(refusal: Refusal) -> Refused:
    """A checked refusal (``status_refusal``) as the drivers compare it."""
    return Refused(refusal.code.name, refusal.reason, refusal.metadata)


# -- the engine ------------------------------------------------------------------------


class EngineDriver:
    """The rules in process: the reference the other two must match."""

    name = "engine"

    def new_game(self, request: pb.NewGameRequest) -> Started:
        config = codec.config_from_proto(request.config).validate()
        decks = [codec.deck_from_proto(deck, "decks") for deck in request.decks]
        draw = codec.deck_from_proto(request.draw, "draw") if request.HasField("draw") else None
        state, events = open_game(config, seed=request.seed, decks=decks, draw=draw)
        result = {
            "view": plain(view_codec.view_to_proto(view(state, None), "", "")),
            "events": [plain(e) for e in codec.events_to_proto(events)],
        }
        return Started(state, config.players, result)

    def resume(self, state: State) -> State:
        return state

    def legal_moves(self, handle: State, seat: int) -> Plain:
        return [plain(m) for m in codec.legal_moves_to_proto(handle, legal_moves(handle, seat))]

    def play(self, handle: State, seat: int, move: pb.Move) -> Played | Refused:
        engine_move = codec.move_from_proto(move)
        try:
            state, events = play(handle, seat, engine_move)
        except IllegalMoveError as error:
            # The service's mapping of an illegal move (design section 5, docs/api.md),
            # written out here so that the servers are checked against it.
            metadata = {"rule": error.rule, "seat": str(seat)}
            if error.reason is Reason.NOT_YOUR_TURN:
                metadata["turn"] = str(handle.turn)
            if error.card is not None:
                metadata["card"] = card_str(error.card)
            if error.captured is not None:
                metadata["captured_card"] = card_str(error.captured)
            if error.table_count is not None:
                metadata["table_count"] = str(error.table_count)
            if error.in_hand:
                metadata["in_hand"] = "true"
            if error.group_left:
                metadata["group_left"] = ",".join(card_str(c) for c in error.group_left)
            if error.reason is Reason.MUST_SWEEP:
                metadata["sweeping_cards"] = ",".join(card_str(c) for c in error.alternatives)
            elif error.rule == "K16.8":
                metadata["capturing_cards"] = ",".join(card_str(c) for c in error.alternatives)
            return Refused("FAILED_PRECONDITION", error.reason.value, metadata)
        result = {
            "events": [plain(e) for e in codec.events_to_proto(events)],
            "view": plain(view_codec.view_to_proto(view(state, seat), "", "")),
        }
        return Played(state, result)

    def score(self, handle: State) -> Plain:
        return plain(codec.score_to_proto(score(handle)))

    def view(self, handle: State, seat: int | None) -> Plain:
        return plain(view_codec.view_to_proto(view(handle, seat), "", ""))


# -- gRPC --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Tokens:
    state: Any
    seats: list[Any]


def sealed(state: State) -> _Tokens:
    """``state``'s state token and seat tokens as the conformance server seals them."""
    message = state_codec.state_to_proto(state, RESUMED_GAME_ID)
    token = seal(message.SerializeToString(), TEST_KEY)
    seats = SeatTokens(KeyRing.parse(TEST_KEY))
    return _Tokens(token, [seats.issue(RESUMED_GAME_ID, s) for s in range(state.config.players)])


class GrpcDriver:
    """The gRPC server: state and seat tokens as bytes."""

    name = "grpc"

    def __init__(self, target: str) -> None:
        self._channel = grpc.insecure_channel(target)
        self._stub = krypkasino_pb2_grpc.KrypkasinoServiceStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def new_game(self, request: pb.NewGameRequest) -> Started:
        response = self._stub.NewGame(request, timeout=10)
        result = {"view": plain(response.view), "events": [plain(e) for e in response.events]}
        return Started(
            _Tokens(response.state, list(response.seat_tokens)), len(response.seat_tokens), result
        )

    def resume(self, state: State) -> _Tokens:
        return sealed(state)

    def legal_moves(self, handle: _Tokens, seat: int) -> Plain:
        request = pb.LegalMovesRequest(state=handle.state, seat=seat, seat_token=handle.seats[seat])
        return [plain(m) for m in self._stub.LegalMoves(request, timeout=10).moves]

    def play(self, handle: _Tokens, seat: int, move: pb.Move) -> Played | Refused:
        request = pb.PlayRequest(
            state=handle.state, seat=seat, seat_token=handle.seats[seat], move=move
        )
        try:
            response = self._stub.Play(request, timeout=10)
        except grpc.RpcError as error:
            return _refused(refusal_of(error))
        result = {"events": [plain(e) for e in response.events], "view": plain(response.view)}
        return Played(_Tokens(response.state, handle.seats), result)

    def score(self, handle: _Tokens) -> Plain:
        return plain(self._stub.Score(pb.ScoreRequest(state=handle.state), timeout=10))

    def view(self, handle: _Tokens, seat: int | None) -> Plain:
        request = pb.GetViewRequest(state=handle.state)
        if seat is not None:
            request.seat = seat
            request.seat_token = handle.seats[seat]
        return plain(self._stub.GetView(request, timeout=10).view)


# -- HTTP/JSON ---------------------------------------------------------------------------


class HttpError(Exception):
    """A refusal over HTTP: the status and the ``google.rpc.Status`` JSON body."""

    def __init__(self, status: int, body: Plain) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


class JsonClient:
    """POSTs proto3 JSON on one keep-alive connection."""

    def __init__(self, base_url: str) -> None:
        host_port = base_url.removeprefix("http://")
        host, _, port = host_port.partition(":")
        self._connection = http.client.HTTPConnection(host, int(port), timeout=10)

    def close(self) -> None:
        self._connection.close()

    def post(self, path: str, body: Plain) -> Plain:
        self._connection.request(
            "POST", path, json.dumps(body), {"Content-Type": "application/json"}
        )
        response = self._connection.getresponse()
        data = response.read()
        assert response.getheader("Content-Type", "").startswith("application/json")
        value = json.loads(data)
        if response.status != 200:
            raise HttpError(response.status, value)
        return value


class HttpDriver:
    """The HTTP gateway: tokens as base64 strings, messages as proto3 JSON."""

    name = "http"

    def __init__(self, base_url: str) -> None:
        self._client = JsonClient(base_url)

    def close(self) -> None:
        self._client.close()

    def _call(self, rpc: str, body: Plain, response_class: type[Message]) -> Message:
        value = self._client.post(f"/v1/krypkasino:{rpc}", body)
        return json_format.ParseDict(value, response_class())  # strict: no unknown fields

    def new_game(self, request: pb.NewGameRequest) -> Started:
        body = json_format.MessageToDict(request)
        response = self._call("newGame", body, pb.NewGameResponse)
        assert isinstance(response, pb.NewGameResponse)
        tokens = json_format.MessageToDict(response)["seatTokens"]
        result = {"view": plain(response.view), "events": [plain(e) for e in response.events]}
        return Started(
            _Tokens(json_format.MessageToDict(response)["state"], tokens), len(tokens), result
        )

    def resume(self, state: State) -> _Tokens:
        tokens = sealed(state)
        return _Tokens(_base64(tokens.state), [_base64(seat) for seat in tokens.seats])

    def legal_moves(self, handle: _Tokens, seat: int) -> Plain:
        body = {"state": handle.state, "seat": seat, "seatToken": handle.seats[seat]}
        response = self._call("legalMoves", body, pb.LegalMovesResponse)
        assert isinstance(response, pb.LegalMovesResponse)
        return [plain(m) for m in response.moves]

    def play(self, handle: _Tokens, seat: int, move: pb.Move) -> Played | Refused:
        body = {
            "state": handle.state,
            "seat": seat,
            "seatToken": handle.seats[seat],
            "move": json_format.MessageToDict(move),
        }
        try:
            response = self._call("play", body, pb.PlayResponse)
        except HttpError as error:
            status = json_format.ParseDict(error.body, status_pb2.Status())
            assert error.status == HTTP_STATUS[status.code], (error.status, status)  # type: ignore[index]
            return _refused(status_refusal(status))
        assert isinstance(response, pb.PlayResponse)
        result = {"events": [plain(e) for e in response.events], "view": plain(response.view)}
        state = json_format.MessageToDict(response)["state"]
        return Played(_Tokens(state, handle.seats), result)

    def score(self, handle: _Tokens) -> Plain:
        return plain(self._call("score", {"state": handle.state}, pb.ScoreResponse))

    def view(self, handle: _Tokens, seat: int | None) -> Plain:
        body: dict[str, Any] = {"state": handle.state}
        if seat is not None:
            body |= {"seat": seat, "seatToken": handle.seats[seat]}
        response = self._call("getView", body, pb.GetViewResponse)
        assert isinstance(response, pb.GetViewResponse)
        return plain(response.view)


def _base64(token: bytes) -> str:
    """A token as proto3 JSON writes ``bytes``."""
    return base64.b64encode(token).decode()
