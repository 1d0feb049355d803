"""A call of the Python client that raises leaves no token in the locals of the client's
frames, and keeps its traceback and the caller's exception chain.

Error reporters capture every frame's locals by default (Sentry, structlog's
``dict_tracebacks``, rich and better_exceptions with locals): a routine refusal
(``NOT_YOUR_TURN``, ``SEAT_TOKEN_INVALID``), a call cut by ``asyncio.wait_for`` or
``asyncio.timeout``, or a bad ``timeout`` must not carry the state token or the seat
token along in the frames of ``cardrules.client`` (its public methods and ``_invoke``)
or of grpc (``_channel.__call__`` holds the request). The frames themselves stay listed,
so a bug in the client can still be traced. The tests read the traceback as those
reporters do, with a real server on loopback (or a silent socket), for both clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import traceback
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import cardrules.client
import grpc
import pytest
from cardrules.client import AsyncKrypkasinoClient, KrypkasinoClient, error_info, request_id
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from google.protobuf import text_encoding

#: The folders whose frames must hold no token: the client's and grpc's.
_GUARDED = (Path(cardrules.client.__file__).parent, Path(grpc.__file__).parent)
_QUOTES = frozenset(b"'\"\\")
#: Call metadata a backend may send along (a credential of its own proxy, say).
_API_KEY = "S3CRETAPIKEY"
_METADATA = (("authorization", f"Bearer {_API_KEY}"),)
#: The loopback ports a silent socket may take (this test's range).
_SILENT_PORTS = range(44000, 44050)


def _secret_forms(token: bytes) -> set[str]:
    """Every 6-byte piece of ``token`` as ``repr(bytes)`` and protobuf's text repr
    (``CEscape``) write it. Pieces with a quote or a backslash are left out: how
    those are escaped depends on the rest of the string, and the others are plenty."""
    forms = set()
    for start in range(len(token) - 5):
        piece = token[start : start + 6]
        if _QUOTES.isdisjoint(piece):
            forms.add(repr(piece)[2:-1])
            forms.add(text_encoding.CEscape(piece, as_utf8=False))
    return forms


def _frames(error: BaseException) -> Iterator[traceback.FrameSummary]:
    """Every frame of ``error``'s traceback and of the errors chained to it, with its
    locals as reporters capture them."""
    seen: set[int] = set()
    pending = [traceback.TracebackException.from_exception(error, capture_locals=True)]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield from current.stack
        pending += [chained for chained in (current.__cause__, current.__context__) if chained]


def _leaks(error: BaseException, tokens: tuple[bytes, ...], *called: str) -> list[str]:
    """``function:local`` of every local, in a client or grpc frame, that shows a piece of
    a token or the call's API key; checked first that the frames of the client's functions
    ``called`` are still in the traceback (kept for debugging, only their locals cleared)."""
    forms = set().union(*map(_secret_forms, tokens))
    assert len(forms) > 100, "too few pieces to look for"
    forms.add(_API_KEY)
    found = []
    guarded = 0
    for frame in _frames(error):
        if not any(Path(frame.filename).is_relative_to(folder) for folder in _GUARDED):
            continue
        guarded += 1
        for name, shown in (frame.locals or {}).items():
            if any(form in shown for form in forms):
                found.append(f"{frame.name}:{name}")
    # The client's method that was called is still in the traceback (so the test looks).
    assert guarded, "no frame of the client in the traceback"
    listed = {frame.name for frame in _frames(error)}
    assert listed >= set(called), f"{called} not all in the traceback: {sorted(listed)}"
    return found


# The refused calls, by name: each takes the client and a new game and is refused by
# the server (SEAT_TOKEN_INVALID, NOT_YOUR_TURN, or a cut state token).
_Game = pb.NewGameResponse


def _waiting(client: KrypkasinoClient, game: _Game) -> tuple[int, bytes, pb.Move]:
    """The seat not to move, its token and a card of its hand: a move out of turn."""
    seat = 1 - game.view.turn
    token = game.seat_tokens[seat]
    hand = client.get_view(state=game.state, seat=seat, seat_token=token).view.hand
    return seat, token, pb.Move(card=hand[0])


def _calls(sync: KrypkasinoClient | None = None) -> dict[str, Callable[[Any, _Game], Any]]:
    """Each refused call, made with the client given (sync or asyncio, the same
    methods); ``sync``, or else that client, looks up the hand a move out of turn plays."""
    return {
        "legal_moves": lambda client, game: client.legal_moves(
            state=game.state, seat=0, seat_token=game.seat_tokens[1], metadata=_METADATA
        ),
        "legal_moves-request": lambda client, game: client.legal_moves(
            pb.LegalMovesRequest(state=game.state, seat=0, seat_token=game.seat_tokens[1])
        ),
        "play": lambda client, game: client.play(
            state=game.state,
            seat=(moved := _waiting(sync or client, game))[0],
            seat_token=moved[1],
            move=moved[2],
        ),
        "get_view": lambda client, game: client.get_view(
            state=game.state, seat=1, seat_token=game.seat_tokens[0]
        ),
        "score": lambda client, game: client.score(state=game.state[:-1]),
    }


_CALLS = sorted(_calls())


@pytest.mark.parametrize("call", _CALLS)
def test_a_refused_sync_call_leaves_no_token_in_client_or_grpc_frames(
    grpc_target: str, call: str
) -> None:
    with KrypkasinoClient(grpc_target) as client:
        game = client.new_game(players=2, seed=1)
        with pytest.raises(grpc.RpcError) as raised:
            _calls()[call](client, game)
    assert raised.value.code() != grpc.StatusCode.UNAVAILABLE, raised.value
    leaks = _leaks(raised.value, (game.state, *game.seat_tokens), "_invoke")
    assert not leaks, leaks


@pytest.mark.parametrize("call", _CALLS)
def test_a_refused_async_call_leaves_no_token_in_client_or_grpc_frames(
    grpc_target: str, call: str
) -> None:
    with KrypkasinoClient(grpc_target) as sync:
        game = sync.new_game(players=2, seed=1)

        async def run() -> grpc.RpcError:
            async with AsyncKrypkasinoClient(grpc_target) as client:
                with pytest.raises(grpc.RpcError) as raised:
                    await _calls(sync)[call](client, game)
                return raised.value

        error = asyncio.run(run())
    assert error.code() != grpc.StatusCode.UNAVAILABLE, error
    leaks = _leaks(error, (game.state, *game.seat_tokens), "_invoke")
    assert not leaks, leaks


@contextlib.contextmanager
def _silent_server() -> Iterator[str]:
    """A TCP socket on loopback that accepts connections and never answers: a call to it
    waits (grpc's handshake never ends) until its deadline or until it is cancelled."""
    with socket.socket() as listener:
        for port in _SILENT_PORTS:
            try:
                listener.bind(("127.0.0.1", port))
            except OSError:
                continue
            break
        else:
            pytest.fail(f"no free port in {_SILENT_PORTS}")
        listener.listen(8)
        yield f"127.0.0.1:{port}"


async def _cut_by_wait_for(call: Awaitable[object]) -> None:
    await asyncio.wait_for(call, 0.5)


async def _cut_by_timeout(call: Awaitable[object]) -> None:
    async with asyncio.timeout(0.5):
        await call


@pytest.mark.parametrize("cut", [_cut_by_wait_for, _cut_by_timeout], ids=["wait_for", "timeout"])
def test_an_async_call_cut_by_a_timeout_leaves_no_token_in_client_or_grpc_frames(
    grpc_target: str, cut: Callable[[Awaitable[object]], Awaitable[None]]
) -> None:
    """asyncio cancels the call (``CancelledError`` through ``play`` and ``_invoke``) and
    raises ``TimeoutError`` from it: no ``RpcError`` ever reaches the client's methods."""
    with KrypkasinoClient(grpc_target) as sync:
        game = sync.new_game(players=2, seed=1)
        seat, token, move = _waiting(sync, game)

    async def run(target: str) -> TimeoutError:
        async with AsyncKrypkasinoClient(target) as client:
            with pytest.raises(TimeoutError) as raised:
                await cut(
                    client.play(
                        state=game.state,
                        seat=seat,
                        seat_token=token,
                        move=move,
                        metadata=_METADATA,
                        wait_for_ready=True,
                    )
                )
            return raised.value

    with _silent_server() as target:
        error = asyncio.run(run(target))
    assert isinstance(error.__context__, asyncio.CancelledError), repr(error.__context__)
    leaks = _leaks(error, (game.state, *game.seat_tokens), "play", "_invoke")
    assert not leaks, leaks


def test_a_sync_call_with_a_bad_timeout_leaves_no_token_in_client_frames(
    grpc_target: str,
) -> None:
    """``_invoke`` refuses the deadline (``ValueError``) with the request in its locals."""
    with KrypkasinoClient(grpc_target) as client:
        game = client.new_game(players=2, seed=1)
        with pytest.raises(ValueError, match="timeout must be over 0") as raised:
            client.play(state=game.state, seat=0, seat_token=game.seat_tokens[0], timeout=0)
    leaks = _leaks(raised.value, (game.state, *game.seat_tokens), "play", "_invoke")
    assert not leaks, leaks


def test_an_async_call_from_another_loop_leaves_no_token_in_client_frames(
    grpc_target: str,
) -> None:
    """``_invoke`` refuses a call from another event loop (``RuntimeError``)."""
    with KrypkasinoClient(grpc_target) as sync:
        game = sync.new_game(players=2, seed=1)

    async def make() -> AsyncKrypkasinoClient:
        return AsyncKrypkasinoClient(grpc_target)

    client = asyncio.run(make())

    async def call() -> object:
        return await client.score(state=game.state, metadata=_METADATA)

    with pytest.raises(RuntimeError, match="another event loop") as raised:
        asyncio.run(call())
    leaks = _leaks(raised.value, (game.state, *game.seat_tokens), "score", "_invoke")
    assert not leaks, leaks


def test_a_sync_call_in_an_except_block_keeps_the_callers_error_chained(
    grpc_target: str,
) -> None:
    """A call made while the caller handles an error of its own still shows it ("During
    handling of the above exception..."): the client re-raises, it does not chain
    ``from None``."""
    with KrypkasinoClient(grpc_target) as client:
        mine = KeyError("mine")
        with pytest.raises(grpc.RpcError) as raised:
            try:
                raise mine
            except KeyError:
                client.play(state=b"garbage", seat=0, seat_token=b"garbage", move=pb.Move())
    error = raised.value
    assert error.__context__ is mine and not error.__suppress_context__
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
    assert request_id(error) and error_info(error) is not None


def test_an_async_call_in_an_except_block_keeps_the_callers_error_chained(
    grpc_target: str,
) -> None:
    async def run() -> tuple[KeyError, grpc.RpcError]:
        async with AsyncKrypkasinoClient(grpc_target) as client:
            mine = KeyError("mine")
            with pytest.raises(grpc.RpcError) as raised:
                try:
                    raise mine
                except KeyError:
                    await client.play(
                        state=b"garbage", seat=0, seat_token=b"garbage", move=pb.Move()
                    )
            return mine, raised.value

    mine, error = asyncio.run(run())
    assert error.__context__ is mine and not error.__suppress_context__
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
    assert request_id(error) and error_info(error) is not None
