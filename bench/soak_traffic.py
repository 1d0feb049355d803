"""The traffic of ``bench soak``: clients that play whole matches against a real server.

Each client has a connection of its own and plays match after match: ``NewGame``
with a random table (``bench.soak_configs``), then ``LegalMoves`` and ``Play``
until the match is over, with ``GetView`` (a seat's or the public view) and
``Score`` now and then, and ``Score`` at the end. gRPC clients go through the
project's own asyncio client (``cardrules.client``); HTTP clients post the proto3
JSON of the same messages with aiohttp, as ``bench http`` does.

About one turn in ``BAD_SHARE`` also sends a bad request: a tampered state token, a
seat token that is none or another seat's, a move the rules forbid (docs/api.md,
"Errors"). Their refusals are expected, and counted apart. Any other error is a
failure: a refusal of a good request, a bad one accepted or refused with another
code, ``INTERNAL``, a deadline, a transport failure.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, cast

import aiohttp
import grpc
from cardrules.cards.v1 import cards_pb2
from cardrules.client import AsyncKrypkasinoClient, error_info
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2

from bench.soak_configs import random_config

# Shares of the turns that also send a bad request, ask for a view, ask for the score
# at a deal's end.
BAD_SHARE = 0.02
VIEW_SHARE = 0.05
SCORE_SHARE = 0.5
# Each gRPC client its own connection, so SO_REUSEPORT spreads them over the workers.
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]
HTTP_TIMEOUT_SECONDS = 10.0
JSON_HEADERS = {"Content-Type": "application/json"}
STATUS_NAMES = {code.value[0]: code.name for code in grpc.StatusCode}

# Each bad request and the code whose refusal is expected of it.
EXPECTED_CODES = {
    "tampered_state": "INVALID_ARGUMENT",  # TOKEN_INVALID
    "forged_seat_token": "PERMISSION_DENIED",  # SEAT_TOKEN_INVALID
    "other_seats_token": "PERMISSION_DENIED",  # SEAT_TOKEN_INVALID, with token_seat
    "not_your_turn": "FAILED_PRECONDITION",  # K4.4
    "capture_not_on_table": "FAILED_PRECONDITION",  # K7.5
    "after_game_over": "FAILED_PRECONDITION",  # GAME_OVER
}
EVERY_CARD = [
    cards_pb2.Card(rank=rank, suit=suit)
    for suit in cards_pb2.Suit.values()[1:]  # past the UNSPECIFIED zero
    for rank in cards_pb2.Rank.values()[1:]
]

# Those a turn in progress can make.
TURN_MISTAKES = [kind for kind in EXPECTED_CODES if kind != "after_game_over"]

ResponseT = TypeVar("ResponseT", bound=Message)


@dataclass(frozen=True)
class Rpc(Generic[ResponseT]):
    """One RPC: the client's method name, the HTTP route's verb, the response type."""

    method: str
    route: str
    response: type[ResponseT]


NEW_GAME = Rpc("new_game", "newGame", pb.NewGameResponse)
LEGAL_MOVES = Rpc("legal_moves", "legalMoves", pb.LegalMovesResponse)
PLAY = Rpc("play", "play", pb.PlayResponse)
SCORE = Rpc("score", "score", pb.ScoreResponse)
GET_VIEW = Rpc("get_view", "getView", pb.GetViewResponse)


class CallError(Exception):
    """A call not answered: its status code's name (``TRANSPORT`` when no status came back)
    and the ``ErrorInfo`` reason (or what went wrong)."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(f"{code} {reason}")
        self.code = code
        self.reason = reason


class Transport(Protocol):
    name: str

    async def call(self, rpc: Rpc[ResponseT], request: Message) -> ResponseT: ...

    async def close(self) -> None: ...


class GrpcTransport:
    """The project's asyncio client on a connection of its own (created in the running loop)."""

    name = "grpc"

    def __init__(self, port: int) -> None:
        self.client = AsyncKrypkasinoClient(f"127.0.0.1:{port}", options=OWN_CONNECTION)

    async def call(self, rpc: Rpc[ResponseT], request: Message) -> ResponseT:
        method: Any = getattr(self.client, rpc.method)
        try:
            return cast(ResponseT, await method(request))
        except grpc.aio.AioRpcError as error:
            info = error_info(error)  # None for what grpc ended itself: a deadline, a transport
            raise CallError(error.code().name, info.reason if info else "no ErrorInfo") from error

    async def close(self) -> None:
        await self.client.close()


class HttpTransport:
    """Proto3 JSON over one aiohttp keep-alive connection (created in the running loop)."""

    name = "http"

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}/v1/krypkasino:"
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=1),
            timeout=aiohttp.ClientTimeout(total=HTTP_TIMEOUT_SECONDS),
        )

    async def call(self, rpc: Rpc[ResponseT], request: Message) -> ResponseT:
        body = json_format.MessageToJson(request, indent=None).encode()
        try:
            async with self.session.post(
                self.base + rpc.route, data=body, headers=JSON_HEADERS
            ) as response:
                text = await response.text()
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as error:
            raise CallError("TRANSPORT", type(error).__name__) from error
        if status == 200:
            return json_format.Parse(text, rpc.response())
        refusal = status_pb2.Status()
        info = error_details_pb2.ErrorInfo()
        try:
            json_format.Parse(text, refusal)
        except json_format.ParseError as error:
            raise CallError(f"HTTP_{status}", "no google.rpc.Status body") from error
        if refusal.code not in STATUS_NAMES or not any(d.Unpack(info) for d in refusal.details):
            raise CallError(f"HTTP_{status}", "no google.rpc.Status body")
        raise CallError(STATUS_NAMES[refusal.code], info.reason)

    async def close(self) -> None:
        await self.session.close()


@dataclass
class Tally:
    """What every client did so far; the sampler reads it between calls."""

    calls: Counter[str] = field(default_factory=Counter)  # answered as expected, per transport
    games: Counter[str] = field(default_factory=Counter)  # whole matches played, per transport
    refusals: Counter[str] = field(default_factory=Counter)  # expected, per bad request kind
    failures: Counter[str] = field(default_factory=Counter)  # per "transport rpc code reason"

    def as_json(self) -> dict[str, Any]:
        return {
            "calls": dict(self.calls),
            "games": dict(self.games),
            "refusals": dict(self.refusals),
            "failures": dict(self.failures),
        }


@dataclass
class Player:
    """One client playing match after match until ``deadline`` (``time.monotonic()``)."""

    transport: Transport
    rng: random.Random
    tally: Tally
    deadline: float
    one_deal: bool

    async def run(self) -> None:
        try:
            while time.monotonic() < self.deadline:
                await self.play_match()
        finally:
            await self.transport.close()

    async def call(self, rpc: Rpc[ResponseT], request: Message) -> ResponseT | None:
        """The answer of a good request, or None once its failure is counted."""
        try:
            response = await self.transport.call(rpc, request)
        except CallError as error:
            self.tally.failures[f"{self.transport.name} {rpc.method} {error}"] += 1
            return None
        self.tally.calls[self.transport.name] += 1
        return response

    async def refused(self, kind: str, rpc: Rpc[ResponseT], request: Message) -> None:
        """Send a bad request whose refusal with ``EXPECTED_CODES[kind]`` is expected."""
        name = self.transport.name
        try:
            await self.transport.call(rpc, request)
        except CallError as error:
            if error.code == EXPECTED_CODES[kind]:
                self.tally.refusals[kind] += 1
                self.tally.calls[name] += 1
            else:
                self.tally.failures[f"{name} {rpc.method} {kind}: {error}"] += 1
            return
        self.tally.failures[f"{name} {rpc.method} {kind}: accepted"] += 1

    async def play_match(self) -> None:
        """One match from NewGame to its Score; abandoned at a failure or at the deadline."""
        request = pb.NewGameRequest(
            config=random_config(self.rng, one_deal=self.one_deal), seed=self.rng.getrandbits(64)
        )
        started = await self.call(NEW_GAME, request)
        if started is None:
            return
        state, tokens, view = started.state, list(started.seat_tokens), started.view
        move = pb.Move()
        while not view.game_over:
            if time.monotonic() >= self.deadline:
                return
            if self.rng.random() < VIEW_SHARE and await self.look(state, tokens) is None:
                return
            seat = view.turn
            legal = await self.call(
                LEGAL_MOVES, pb.LegalMovesRequest(state=state, seat=seat, seat_token=tokens[seat])
            )
            if legal is None:
                return
            move = self.rng.choice(legal.moves).move
            if self.rng.random() < BAD_SHARE:
                await self.bad_request(self.rng.choice(TURN_MISTAKES), state, tokens, view, move)
            play = pb.PlayRequest(state=state, seat=seat, seat_token=tokens[seat], move=move)
            played = await self.call(PLAY, play)
            if played is None:
                return
            deal_ended = played.view.deal_number != view.deal_number or played.view.game_over
            state, view = played.state, played.view
            score = deal_ended and self.rng.random() < SCORE_SHARE
            if score and await self.call(SCORE, pb.ScoreRequest(state=state)) is None:
                return
        if self.rng.random() < BAD_SHARE * 10:
            await self.bad_request("after_game_over", state, tokens, view, move)
        if await self.call(SCORE, pb.ScoreRequest(state=state)) is not None:
            self.tally.games[self.transport.name] += 1

    async def look(self, state: bytes, tokens: list[bytes]) -> pb.GetViewResponse | None:
        """A random seat's view, or the public one."""
        seat = self.rng.randrange(-1, len(tokens))
        if seat < 0:
            return await self.call(GET_VIEW, pb.GetViewRequest(state=state))
        request = pb.GetViewRequest(state=state, seat=seat, seat_token=tokens[seat])
        return await self.call(GET_VIEW, request)

    async def bad_request(
        self, kind: str, state: bytes, tokens: list[bytes], view: pb.View, move: pb.Move
    ) -> None:
        """A bad request of ``kind`` (an ``EXPECTED_CODES`` key) made from a turn's state,
        view and good move (``after_game_over``: a finished match's, and its last move)."""
        seat = view.turn  # 0 once the match is over
        other = (seat + 1) % len(tokens)
        if kind == "after_game_over":
            late = pb.PlayRequest(state=state, seat=seat, seat_token=tokens[seat], move=move)
            await self.refused(kind, PLAY, late)
        elif kind == "tampered_state":
            # A byte of the sealed part (past the version and key id): the AEAD tag fails.
            index = self.rng.randrange(len(state) // 2, len(state))
            tampered = state[:index] + bytes([state[index] ^ 0x5A]) + state[index + 1 :]
            request = pb.LegalMovesRequest(state=tampered, seat=seat, seat_token=tokens[seat])
            await self.refused(kind, LEGAL_MOVES, request)
        elif kind == "forged_seat_token":
            forged = self.rng.randbytes(len(tokens[seat]))
            request = pb.LegalMovesRequest(state=state, seat=seat, seat_token=forged)
            await self.refused(kind, LEGAL_MOVES, request)
        elif kind == "other_seats_token":
            play = pb.PlayRequest(state=state, seat=seat, seat_token=tokens[other], move=move)
            await self.refused(kind, PLAY, play)
        elif kind == "not_your_turn":
            play = pb.PlayRequest(state=state, seat=other, seat_token=tokens[other], move=move)
            await self.refused(kind, PLAY, play)
        elif kind == "capture_not_on_table":
            absent = self.rng.choice([c for c in EVERY_CARD if c not in view.table])
            wrong = pb.Move(card=move.card, captures=[absent])
            play = pb.PlayRequest(state=state, seat=seat, seat_token=tokens[seat], move=wrong)
            await self.refused(kind, PLAY, play)
        else:
            raise ValueError(f"no bad request of kind {kind!r}")


async def play_until(
    ports: tuple[int, int], clients: tuple[int, int], seed: int, deadline: float, one_deal: bool
) -> tuple[Tally, list[asyncio.Task[None]]]:
    """Start ``clients`` (gRPC, HTTP) players on ``ports`` (gRPC, HTTP); their tasks end
    at ``deadline``."""
    tally = Tally()
    rng = random.Random(seed)
    transports: list[Transport] = [GrpcTransport(ports[0]) for _ in range(clients[0])]
    transports += [HttpTransport(ports[1]) for _ in range(clients[1])]
    tasks = [
        asyncio.create_task(
            Player(transport, random.Random(rng.getrandbits(64)), tally, deadline, one_deal).run()
        )
        for transport in transports
    ]
    return tally, tasks
