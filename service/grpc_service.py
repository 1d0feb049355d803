"""The gRPC face of the Krypkasino API (design section 3): a thin grpc.aio servicer.

Each RPC hands its request to the shared ``CallRunner`` and the transport-free
``KrypkasinoApi``; a refusal becomes the rich ``google.rpc.Status`` in the
trailing metadata (``grpc-status-details-bin``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import grpc
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from cardrules.krypkasino.v1 import krypkasino_pb2_grpc
from grpc_status import rpc_status

from service.calls import REQUEST_ID_HEADER, CallInfo, CallRunner, request_id_from
from service.krypkasino_api import SERVICE_NAME, KrypkasinoApi

RequestT = TypeVar("RequestT")
ResponseT = TypeVar("ResponseT")


class KrypkasinoServicer(krypkasino_pb2_grpc.KrypkasinoServiceServicer):
    """Serves ``cardrules.krypkasino.v1.KrypkasinoService`` over gRPC."""

    def __init__(self, api: KrypkasinoApi, runner: CallRunner) -> None:
        self._api = api
        self._runner = runner

    async def NewGame(  # noqa: N802 - names fixed by the generated base class
        self,
        request: pb.NewGameRequest,
        context: grpc.aio.ServicerContext[pb.NewGameRequest, pb.NewGameResponse],
    ) -> pb.NewGameResponse:
        return await self._call("NewGame", self._api.new_game, request, context)

    async def LegalMoves(  # noqa: N802
        self,
        request: pb.LegalMovesRequest,
        context: grpc.aio.ServicerContext[pb.LegalMovesRequest, pb.LegalMovesResponse],
    ) -> pb.LegalMovesResponse:
        return await self._call("LegalMoves", self._api.legal_moves, request, context)

    async def Play(  # noqa: N802
        self,
        request: pb.PlayRequest,
        context: grpc.aio.ServicerContext[pb.PlayRequest, pb.PlayResponse],
    ) -> pb.PlayResponse:
        return await self._call("Play", self._api.play, request, context)

    async def Score(  # noqa: N802
        self,
        request: pb.ScoreRequest,
        context: grpc.aio.ServicerContext[pb.ScoreRequest, pb.ScoreResponse],
    ) -> pb.ScoreResponse:
        return await self._call("Score", self._api.score, request, context)

    async def GetView(  # noqa: N802
        self,
        request: pb.GetViewRequest,
        context: grpc.aio.ServicerContext[pb.GetViewRequest, pb.GetViewResponse],
    ) -> pb.GetViewResponse:
        return await self._call("GetView", self._api.get_view, request, context)

    async def _call(
        self,
        method: str,
        handler: Callable[[RequestT, CallInfo], ResponseT],
        request: RequestT,
        context: grpc.aio.ServicerContext[RequestT, ResponseT],
    ) -> ResponseT:
        return await serve_call(self._runner, SERVICE_NAME, method, handler, request, context)


async def serve_call(
    runner: CallRunner,
    service: str,
    method: str,
    handler: Callable[[RequestT, CallInfo], ResponseT],
    request: RequestT,
    context: grpc.aio.ServicerContext[RequestT, ResponseT],
) -> ResponseT:
    """One gRPC call through ``runner``: the caller's request id, metrics, the log line,
    and a refusal aborted as the rich ``google.rpc.Status``. Every RPC takes this path."""
    metadata = dict(context.invocation_metadata() or ())
    supplied = metadata.get(REQUEST_ID_HEADER)
    request_id = request_id_from(supplied if isinstance(supplied, str) else None)
    outcome = runner.run(service, method, "grpc", request_id, handler, request, context.peer())
    if outcome.error is not None:
        status = rpc_status.to_status(outcome.error.to_status())
        await context.abort(
            status.code,
            status.details,
            (*status.trailing_metadata, (REQUEST_ID_HEADER, request_id)),
        )
    assert outcome.response is not None
    return outcome.response
