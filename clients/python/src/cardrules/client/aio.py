"""The asyncio client (docs/api.md): the twin of :mod:`cardrules.client.sync` on ``grpc.aio``."""

from __future__ import annotations

import asyncio
import os
import warnings
import weakref
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import Any, NoReturn, Self, TypeVar, overload

import grpc
from grpc import aio

from cardrules.cards.v1 import cards_pb2
from cardrules.client import messages
from cardrules.client.channel import (
    DEFAULT,
    DEFAULT_TIMEOUT,
    DefaultTimeout,
    Metadata,
    Timeout,
    UseDefault,
    call_metadata,
    channel_options,
    check_channel_arguments,
    checked_timeout,
    clear_call_frames,
    not_picklable,
)
from cardrules.client.errors import note_sent_request_id
from cardrules.client.tokens import TokenBytes
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from cardrules.krypkasino.v1 import krypkasino_pb2_grpc

_Request = TypeVar("_Request")
_Response = TypeVar("_Response")

_MAKE_IT_IN_THE_LOOP = (
    "create the AsyncKrypkasinoClient inside the event loop that will use it, in a "
    "coroutine (such as the one asyncio.run runs): its channel belongs to the loop it "
    "is made in"
)


_MAKE_THE_CHANNEL_IN_THE_LOOP = (
    "make the channel in the event loop that calls it, in a coroutine (such as the one "
    "asyncio.run runs), and give it to a client there: a grpc.aio channel belongs to the "
    "loop it is made in"
)


# Every AsyncKrypkasinoClient of this process, held weakly so that dropping a client still
# frees it (and its channel). grpc.aio keeps a polling thread while an aio channel lives and
# skips its fork handlers then ("Other threads are currently calling into gRPC, skipping
# fork() handlers"): in a child forked while a client existed, a new client's calls hang past
# their deadline or abort the process (Check failed, or a segfault), as reviews saw.
_LIVE_CLIENTS: weakref.WeakSet[AsyncKrypkasinoClient] = weakref.WeakSet()
# This process's id, kept by the fork hook below: in a child it is still the parent's id
# when the hook runs.
_pid = os.getpid()
# The process that forked this one (or one of its forebears) while it had an
# AsyncKrypkasinoClient; None if no such fork led here.
_forked_from: int | None = None


def _after_fork_in_child() -> None:
    """Note, in a child of ``os.fork()``, whether the parent had an AsyncKrypkasinoClient;
    the child's set starts empty (the parent's clients are not the child's to use)."""
    global _pid, _forked_from
    parent, _pid = _pid, os.getpid()
    if _LIVE_CLIENTS:
        _forked_from = parent
    _LIVE_CLIENTS.clear()


# Python has no os.register_at_fork (nor os.fork) on Windows, where grpcio and this client
# run too: no process comes of another by fork there, so there is nothing to note.
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _refuse_after_a_fork() -> None:
    """Raise ``RuntimeError`` if this process came by ``os.fork()`` from one that had an
    AsyncKrypkasinoClient (README, "One client for the whole process"), before grpc.aio
    is asked for anything: its calls there would hang or abort the process."""
    if _forked_from is None:
        return
    forked = (
        f"this process was forked from process {_forked_from}"
        if _forked_from == os.getppid()
        else f"this process descends by fork from process {_forked_from}, forked"
    )
    raise RuntimeError(
        f"{forked} while an AsyncKrypkasinoClient existed there, and grpc.aio cannot run "
        "after such a fork (its calls hang past their deadline or abort the process): start "
        "worker processes with the forkserver or spawn start method, or make every "
        "AsyncKrypkasinoClient only after the fork, or close and drop every "
        "AsyncKrypkasinoClient before forking"
    )


def _outside_its_loop(problem: object) -> RuntimeError:
    """The error of a client made or used outside its event loop (README, "Asyncio"):
    ``problem``, grpc's or asyncio's words or the client's own, and what to do."""
    return RuntimeError(f"{_clause(problem)}: {_MAKE_IT_IN_THE_LOOP}")


def _given_channel_outside_its_loop(problem: object) -> RuntimeError:
    """The error of a client given a channel of another event loop, or of a closed one:
    making the client elsewhere cannot help, as its loop is the channel's."""
    return RuntimeError(f"{_clause(problem)}: {_MAKE_THE_CHANNEL_IN_THE_LOOP}")


def _clause(problem: object) -> str:
    """``problem`` as the clause before the advice: grpc's and asyncio's words end in a
    full stop ("There is no current event loop in thread 'MainThread'.")."""
    return str(problem).rstrip(".")


def _channel_loop(channel: aio.Channel) -> asyncio.AbstractEventLoop | None:
    """The event loop grpc.aio bound ``channel`` to as it was made (grpc keeps it as the
    channel's ``_loop``), or else the running loop, or ``None``."""
    loop = getattr(channel, "_loop", None)
    if isinstance(loop, asyncio.AbstractEventLoop):
        return loop
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _make_current(loop: asyncio.AbstractEventLoop) -> None:
    """Make ``loop`` the thread's current event loop if the thread has none, as
    ``asyncio.get_event_loop()`` did, and grpc.aio with it, before Python 3.12: so
    ``asyncio.get_event_loop().run_until_complete(client.new_game(...))`` after a client
    made outside a coroutine runs in the loop of its channel, not in another one.

    The thread's current loop is asked for with its DeprecationWarning as an error, as
    grpc.aio asks: where ``get_event_loop()`` would warn and make a loop, it makes none.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        try:
            current: asyncio.AbstractEventLoop | None = asyncio.get_event_loop()
        except (RuntimeError, DeprecationWarning):
            current = None
    if current is None:
        asyncio.set_event_loop(loop)


class AsyncKrypkasinoClient:
    """An asyncio client of ``cardrules.krypkasino.v1.KrypkasinoService`` (``grpc.aio``).

    Give a ``target`` (``"localhost:50051"``, ``"dns:///cardrules.games:50051"``)
    and the client opens a channel with the retry policy of
    :mod:`cardrules.client.channel` (plain text unless ``credentials`` are
    given), or give a ready ``channel``, which the client then does not close. A
    target grpc would dial elsewhere or not at all (a port outside 1 to 65535, an
    ``http://`` URL, an empty one) raises ``ValueError``, as do a ``timeout`` of 0
    or less or over 1e9 seconds (here or when ``timeout`` is set later) and a
    ``load_balancing`` policy other than ``pick_first``, ``round_robin`` and
    ``weighted_round_robin``; a ``timeout`` or policy of another type raises
    ``TypeError``. ``options`` are grpc channel options (``None``, like
    omitting it, for none), which override the client's own.

    The service keeps no state, so every method is safe to retry: the channel
    retries ``UNAVAILABLE`` and ``CANCELLED`` up to 4 attempts within the
    call's deadline. Each call has a deadline of ``timeout`` seconds (5 s by
    default, ``None`` for none), which any call may override; a deadline under
    2.1 s ends the retries of a call to a server that is down with
    ``DEADLINE_EXCEEDED``, not ``UNAVAILABLE``. Failures raise
    ``grpc.RpcError``; :func:`cardrules.client.error_info` reads its reason.

    One client serves a whole process: call it from many tasks at once.
    Use it as an async context manager, or await :meth:`close`. Create it
    inside the event loop that will use it (a given ``channel``, whose loop is
    the client's wherever the client is made): a call from another loop raises
    ``RuntimeError``. It cannot be pickled: a worker process makes its own. In a
    process forked while an ``AsyncKrypkasinoClient`` existed in its parent, making or
    calling one raises ``RuntimeError``: grpc.aio cannot run there.
    """

    #: The default deadline of every call, in seconds (``None``: no deadline); checked
    #: whenever it is set.
    timeout: DefaultTimeout = DefaultTimeout()

    @overload
    def __init__(
        self,
        target: str,
        *,
        channel: None = ...,  # None, as when omitted: the client makes the channel
        credentials: grpc.ChannelCredentials | None = ...,
        timeout: float | None = ...,
        load_balancing: str | None = ...,
        options: Sequence[tuple[str, Any]] | None = ...,
    ) -> None: ...

    @overload
    def __init__(
        self,
        target: None = ...,
        *,
        channel: aio.Channel,
        timeout: float | None = ...,
        # None, as when omitted: a given channel takes no settings of the client's.
        credentials: None = ...,
        load_balancing: None = ...,
        options: None = ...,
    ) -> None: ...

    def __init__(
        self,
        target: str | None = None,
        *,
        channel: aio.Channel | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        load_balancing: str | None = None,
        options: Sequence[tuple[str, Any]] | None = None,
    ) -> None:
        _refuse_after_a_fork()
        check_channel_arguments(
            target,
            channel,
            bool(credentials or load_balancing is not None or options is not None),
            asynchronous=True,
        )
        self.timeout = timeout
        self._owns_channel = channel is None
        if channel is None:
            assert target is not None
            settings = channel_options(load_balancing, options)
            try:
                channel = (
                    aio.insecure_channel(target, settings)
                    if credentials is None
                    else aio.secure_channel(target, credentials, settings)
                )
            except RuntimeError as error:  # grpc's words come from deep inside its Cython
                raise _outside_its_loop(error) from error
        self.channel = channel
        # The loop the channel belongs to: the running one, or outside a coroutine the
        # thread's current one, or (Python 3.12 on, with none current) a new one grpc.aio
        # made, which asyncio.get_event_loop() would not return. Not asyncio's current
        # loop: a given channel may belong to another, and get_event_loop() outside a
        # coroutine warns, or makes yet another loop.
        loop = _channel_loop(channel)
        if loop is None or loop.is_closed():
            if not self._owns_channel:
                raise _given_channel_outside_its_loop(
                    "the channel given to this AsyncKrypkasinoClient belongs to no event loop"
                    if loop is None
                    else "the event loop of the channel given to this AsyncKrypkasinoClient "
                    "is closed"
                )
            raise _outside_its_loop(
                "the channel belongs to no event loop"
                if loop is None
                else "the event loop of the channel is closed"
            )
        if self._owns_channel and not loop.is_running():
            _make_current(loop)
        self._loop = loop
        self._stub: krypkasino_pb2_grpc.KrypkasinoServiceAsyncStub = (
            krypkasino_pb2_grpc.KrypkasinoServiceStub(channel)
        )
        _LIVE_CLIENTS.add(self)

    def __reduce__(self) -> NoReturn:
        """Refused, with what to do instead (README, "One client for the whole process")."""
        raise not_picklable(self)

    async def close(self, grace: float | None = None) -> None:
        """Close the channel if the client opened it; calls after that raise
        ``grpc.aio.UsageError``, not an ``RpcError``.

        Calls still in flight are cancelled (their tasks get ``CancelledError``) at
        once, or after ``grace`` seconds if they have not finished by then.
        """
        if self._owns_channel:
            await self.channel.close(grace)

    async def aclose(self) -> None:
        """``close()``, under the name ``contextlib.aclosing`` calls."""
        await self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def _invoke(
        self,
        method: aio.UnaryUnaryMultiCallable[_Request, _Response],
        request: _Request,
        timeout: Timeout,
        metadata: Metadata | None,
        wait_for_ready: bool | None,
    ) -> _Response:
        """Call ``method`` with the call's deadline and metadata (with a request id), in
        the client's event loop and not after a fork.

        How each public method keeps the request out of an exception's frames: as in
        :meth:`cardrules.client.sync.KrypkasinoClient._invoke`.
        """
        _refuse_after_a_fork()  # a client inherited from the parent, as well as a new one
        # Before grpc makes the call's task, which another loop would refuse only with
        # "got Future ... attached to a different loop" (or "Event loop is closed") and
        # leave pending.
        if asyncio.get_running_loop() is not self._loop:
            if not self._owns_channel:
                raise _given_channel_outside_its_loop(
                    "the channel given to this AsyncKrypkasinoClient belongs to another event loop"
                )
            raise _outside_its_loop("this AsyncKrypkasinoClient was made in another event loop")
        seconds = self.timeout if isinstance(timeout, UseDefault) else checked_timeout(timeout)
        sent = call_metadata(metadata)
        try:
            return await method(
                request, timeout=seconds, metadata=sent, wait_for_ready=wait_for_ready
            )
        except grpc.RpcError as error:
            # A call past its deadline gets no trailers, so no request id from the server
            # (errors.request_id).
            note_sent_request_id(error, sent)
            raise

    @overload
    async def new_game(
        self,
        request: pb.NewGameRequest | None,
        /,
        *,
        # None, as when omitted: a request takes no field keywords.
        config: None = ...,
        players: None = ...,
        seed: None = ...,
        decks: None = ...,
        draw: None = ...,
        timeout: Timeout = ...,
        metadata: Metadata | None = ...,
        wait_for_ready: bool | None = ...,
    ) -> pb.NewGameResponse: ...

    @overload
    async def new_game(
        self,
        request: None = ...,
        /,
        *,
        config: pb.GameConfig | None = ...,
        players: int | None = ...,
        seed: int | None = ...,
        decks: Iterable[cards_pb2.Deck] | None = ...,
        draw: cards_pb2.Deck | None = ...,
        timeout: Timeout = ...,
        metadata: Metadata | None = ...,
        wait_for_ready: bool | None = ...,
    ) -> pb.NewGameResponse: ...

    async def new_game(
        self,
        request: pb.NewGameRequest | None = None,
        /,
        *,
        config: pb.GameConfig | None = None,
        players: int | None = None,
        seed: int | None = None,
        decks: Iterable[cards_pb2.Deck] | None = None,
        draw: cards_pb2.Deck | None = None,
        timeout: Timeout = DEFAULT,
        metadata: Metadata | None = None,
        wait_for_ready: bool | None = None,
    ) -> pb.NewGameResponse:
        """Start a match: sealed state, one seat token per seat, public view (``NewGame``).

        ``players`` sets ``config.players``. Safe to retry: a retry starts another
        game, with a new game id (and the same cards when a ``seed`` is given).
        """
        message = messages.new_game(request, config, players, seed, decks, draw)
        try:
            return await self._invoke(
                self._stub.NewGame, message, timeout, metadata, wait_for_ready
            )
        except BaseException as error:
            # Nothing of the request in what an error reporter captures (_invoke).
            del request, config, players, seed, decks, draw, message, metadata
            clear_call_frames(error)
            raise

    @overload
    async def legal_moves(
        self,
        request: pb.LegalMovesRequest | None,
        /,
        *,
        # None, as when omitted: a request takes no field keywords.
        state: None = ...,
        seat: None = ...,
        seat_token: None = ...,
        timeout: Timeout = ...,
        metadata: Metadata | None = ...,
        wait_for_ready: bool | None = ...,
    ) -> pb.LegalMovesResponse: ...

    @overload
    async def legal_moves(
        self,
        request: None = ...,
        /,
        *,
        state: TokenBytes | None = ...,
        seat: int | None = ...,
        seat_token: TokenBytes | None = ...,
        timeout: Timeout = ...,
        metadata: Metadata | None = ...,
        wait_for_ready: bool | None = ...,
    ) -> pb.LegalMovesResponse: ...

    async def legal_moves(
        self,
        request: pb.LegalMovesRequest | None = None,
        /,
        *,
        state: TokenBytes | None = None,
        seat: int | None = None,
        seat_token: TokenBytes | None = None,
        timeout: Timeout = DEFAULT,
        metadata: Metadata | None = None,
        wait_for_ready: bool | None = None,
    ) -> pb.LegalMovesResponse:
        """The seat's legal moves in canonical order (``LegalMoves``, K7.7). Pure, safe to retry."""
        message = messages.legal_moves(request, state, seat, seat_token)
        try:
            return await self._invoke(
                self._stub.LegalMoves, message, timeout, metadata, wait_for_ready
            )
        except BaseException as error:
            # Nothing of the request in what an error reporter captures (_invoke).
            del request, state, seat, seat_token, message, metadata
            clear_call_frames(error)
            raise

    @overload
    async def play(
        self,
        request: pb.PlayRequest | None,
        /,
        *,
        # None, as when omitted: a request takes no field keywords.
        state: None = ...,
        seat: None = ...,
        seat_token: None = ...,
        move: None = ...,
        timeout: Timeout = ...,
        metadata: Metadata | None = ...,
        wait_for_ready: bool | None = ...,
    ) -> pb.PlayResponse: ...

    @overload
    async def play(
        self,
        request: None = ...,
        /,
        *,
        state: TokenBytes | None = ...,
        seat: int | None = ...,
        seat_token: TokenBytes | None = ...,
        move: pb.Move | pb.LegalMove | None = ...,
        timeout: Timeout = ...,
        metadata: Metadata | None = ...,
        wait_for_ready: bool | None = ...,
    ) -> pb.PlayResponse: ...

    async def play(
        self,
        request: pb.PlayRequest | None = None,
        /,
        *,
        state: TokenBytes | None = None,
        seat: int | None = None,
        seat_token: TokenBytes | None = None,
        move: pb.Move | pb.LegalMove | None = None,
        timeout: Timeout = DEFAULT,
        metadata: Metadata | None = None,
        wait_for_ready: bool | None = None,
    ) -> pb.PlayResponse:
        """Play a move: next state, events, the seat's view (``Play``).

        Pure and safe to retry: the server keeps nothing, so a retried ``Play``
        returns the same next state (the same ``state_id``; the token's bytes differ, as
        each seal takes a fresh nonce) and never plays the move twice.
        """
        message = messages.play(request, state, seat, seat_token, move)
        try:
            return await self._invoke(self._stub.Play, message, timeout, metadata, wait_for_ready)
        except BaseException as error:
            # Nothing of the request in what an error reporter captures (_invoke).
            del request, state, seat, seat_token, move, message, metadata
            clear_call_frames(error)
            raise

    @overload
    async def score(
        self,
        request: pb.ScoreRequest | None,
        /,
        *,
        # None, as when omitted: a request takes no field keywords.
        state: None = ...,
        timeout: Timeout = ...,
        metadata: Metadata | None = ...,
        wait_for_ready: bool | None = ...,
    ) -> pb.ScoreResponse: ...

    @overload
    async def score(
        self,
        request: None = ...,
        /,
        *,
        state: TokenBytes | None = ...,
        timeout: Timeout = ...,
        metadata: Metadata | None = ...,
        wait_for_ready: bool | None = ...,
    ) -> pb.ScoreResponse: ...

    async def score(
        self,
        request: pb.ScoreRequest | None = None,
        /,
        *,
        state: TokenBytes | None = None,
        timeout: Timeout = DEFAULT,
        metadata: Metadata | None = None,
        wait_for_ready: bool | None = None,
    ) -> pb.ScoreResponse:
        """The itemised score sheets, totals and winners (``Score``). Pure, safe to retry."""
        message = messages.score(request, state)
        try:
            return await self._invoke(self._stub.Score, message, timeout, metadata, wait_for_ready)
        except BaseException as error:
            # Nothing of the request in what an error reporter captures (_invoke).
            del request, state, message, metadata
            clear_call_frames(error)
            raise

    @overload
    async def get_view(
        self,
        request: pb.GetViewRequest | None,
        /,
        *,
        # None, as when omitted: a request takes no field keywords.
        state: None = ...,
        seat: None = ...,
        seat_token: None = ...,
        timeout: Timeout = ...,
        metadata: Metadata | None = ...,
        wait_for_ready: bool | None = ...,
    ) -> pb.GetViewResponse: ...

    @overload
    async def get_view(
        self,
        request: None = ...,
        /,
        *,
        state: TokenBytes | None = ...,
        seat: int | None = ...,
        seat_token: TokenBytes | None = ...,
        timeout: Timeout = ...,
        metadata: Metadata | None = ...,
        wait_for_ready: bool | None = ...,
    ) -> pb.GetViewResponse: ...

    async def get_view(
        self,
        request: pb.GetViewRequest | None = None,
        /,
        *,
        state: TokenBytes | None = None,
        seat: int | None = None,
        seat_token: TokenBytes | None = None,
        timeout: Timeout = DEFAULT,
        metadata: Metadata | None = None,
        wait_for_ready: bool | None = None,
    ) -> pb.GetViewResponse:
        """A seat's view, or the public view without ``seat`` (``GetView``). Pure, safe to retry."""
        message = messages.get_view(request, state, seat, seat_token)
        try:
            return await self._invoke(
                self._stub.GetView, message, timeout, metadata, wait_for_ready
            )
        except BaseException as error:
            # Nothing of the request in what an error reporter captures (_invoke).
            del request, state, seat, seat_token, message, metadata
            clear_call_frames(error)
            raise
