"""The blocking client (docs/api.md): one method per RPC, deadline and retries built in."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import Any, NoReturn, Self, TypeVar, overload

import grpc

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


class KrypkasinoClient:
    """A blocking client of ``cardrules.krypkasino.v1.KrypkasinoService``.

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

    One client serves a whole process: call it from many threads at once.
    Use it as a context manager, or call :meth:`close`. It cannot be pickled:
    a worker process makes its own.
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
        channel: grpc.Channel,
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
        channel: grpc.Channel | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        load_balancing: str | None = None,
        options: Sequence[tuple[str, Any]] | None = None,
    ) -> None:
        check_channel_arguments(
            target,
            channel,
            bool(credentials or load_balancing is not None or options is not None),
            asynchronous=False,
        )
        self.timeout = timeout
        self._owns_channel = channel is None
        if channel is None:
            assert target is not None
            settings = channel_options(load_balancing, options)
            channel = (
                grpc.insecure_channel(target, settings)
                if credentials is None
                else grpc.secure_channel(target, credentials, settings)
            )
        self.channel = channel
        self._stub = krypkasino_pb2_grpc.KrypkasinoServiceStub(channel)

    def __reduce__(self) -> NoReturn:
        """Refused, with what to do instead (README, "One client for the whole process")."""
        raise not_picklable(self)

    def close(self) -> None:
        """Close the channel if the client opened it; calls after that raise grpc's
        ``ValueError``, not an ``RpcError``.

        Calls still in flight (in other threads) are cancelled at once: they raise a
        ``grpc.RpcError`` with ``CANCELLED`` ("Channel closed!").
        """
        if self._owns_channel:
            self.channel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _invoke(
        self,
        method: grpc.UnaryUnaryMultiCallable[_Request, _Response],
        request: _Request,
        timeout: Timeout,
        metadata: Metadata | None,
        wait_for_ready: bool | None,
    ) -> _Response:
        """Call ``method`` with the call's deadline and metadata (with a request id).

        Any exception leaves here (a refusal, a cancellation, ``KeyboardInterrupt``, a
        bad ``timeout``) with a traceback whose frames (this one's and grpc's) hold the
        request, tokens and all, in their locals, which error reporters capture by default
        (Sentry, structlog's ``dict_tracebacks``, rich's ``show_locals``). So each public
        method, on any exception, deletes its own locals made of the request (arguments,
        message, metadata), clears the locals of the frames below it
        (``channel.clear_call_frames``) and re-raises the same exception with a bare
        ``raise``: the traceback's frames (file, line, function), the exception's chain
        (a call made in the caller's ``except`` block shows the caller's error) and the
        error itself (code, details, trailers, request id) are kept, and a cancellation
        stays one.
        """
        seconds = self.timeout if isinstance(timeout, UseDefault) else checked_timeout(timeout)
        sent = call_metadata(metadata)
        try:
            return method(request, timeout=seconds, metadata=sent, wait_for_ready=wait_for_ready)
        except grpc.RpcError as error:
            # A call past its deadline gets no trailers, so no request id from the server
            # (errors.request_id).
            note_sent_request_id(error, sent)
            raise

    @overload
    def new_game(
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
    def new_game(
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

    def new_game(
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
            return self._invoke(self._stub.NewGame, message, timeout, metadata, wait_for_ready)
        except BaseException as error:
            # Nothing of the request in what an error reporter captures (_invoke).
            del request, config, players, seed, decks, draw, message, metadata
            clear_call_frames(error)
            raise

    @overload
    def legal_moves(
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
    def legal_moves(
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

    def legal_moves(
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
            return self._invoke(self._stub.LegalMoves, message, timeout, metadata, wait_for_ready)
        except BaseException as error:
            # Nothing of the request in what an error reporter captures (_invoke).
            del request, state, seat, seat_token, message, metadata
            clear_call_frames(error)
            raise

    @overload
    def play(
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
    def play(
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

    def play(
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
            return self._invoke(self._stub.Play, message, timeout, metadata, wait_for_ready)
        except BaseException as error:
            # Nothing of the request in what an error reporter captures (_invoke).
            del request, state, seat, seat_token, move, message, metadata
            clear_call_frames(error)
            raise

    @overload
    def score(
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
    def score(
        self,
        request: None = ...,
        /,
        *,
        state: TokenBytes | None = ...,
        timeout: Timeout = ...,
        metadata: Metadata | None = ...,
        wait_for_ready: bool | None = ...,
    ) -> pb.ScoreResponse: ...

    def score(
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
            return self._invoke(self._stub.Score, message, timeout, metadata, wait_for_ready)
        except BaseException as error:
            # Nothing of the request in what an error reporter captures (_invoke).
            del request, state, message, metadata
            clear_call_frames(error)
            raise

    @overload
    def get_view(
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
    def get_view(
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

    def get_view(
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
            return self._invoke(self._stub.GetView, message, timeout, metadata, wait_for_ready)
        except BaseException as error:
            # Nothing of the request in what an error reporter captures (_invoke).
            del request, state, seat, seat_token, message, metadata
            clear_call_frames(error)
            raise
