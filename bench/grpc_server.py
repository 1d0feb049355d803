"""A benchmark server: the real Krypkasino servicer and an echo service in one grpc.aio server.

Both services share the process, the port, the server options and the
logging set-up, so ``bench.grpc`` can compare ``Play`` with a call that does
no work at all but move a payload of the same size. Run as
``python -m bench.grpc_server PORT_FILE ECHO_BYTES REQUESTS_FILE`` (the
``Play`` requests of the load, for ``PlayFloor``); stops on SIGTERM.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from google.protobuf.message import Message
from prometheus_client import CollectorRegistry

from bench.grpc_load import read_requests
from bench.server import BENCH_KEY
from service import codec
from service.calls import CallInfo, CallRunner, Handler
from service.config import ServerConfig
from service.grpc_service import KrypkasinoServicer, parsing, serve_call
from service.logs import configure_logging
from service.metrics import ServiceMetrics
from service.server import build_api, build_sealer, grpc_server_options, new_metrics
from service.state_codec import state_id
from service.tokens import KeyRing, SeatTokens

ECHO_SERVICE = "cardrules.bench.v1.EchoService"
ECHO_METHOD = f"/{ECHO_SERVICE}/Echo"
INSTRUMENTED_ECHO_METHOD = f"/{ECHO_SERVICE}/InstrumentedEcho"
PLAY_FLOOR_METHOD = f"/{ECHO_SERVICE}/PlayFloor"


def echo_handlers(
    payload: bytes, runner: CallRunner
) -> dict[str, grpc.RpcMethodHandler[bytes, bytes]]:
    """``Echo`` moves the payload and nothing else; ``InstrumentedEcho`` takes the
    path of every RPC of the real service (``serve_call``: request id, metrics,
    the request log line)."""

    async def echo(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        return payload

    async def instrumented(
        request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]
    ) -> bytes:
        return await serve_call(
            runner, ECHO_SERVICE, "InstrumentedEcho", lambda _r, _i: payload, request, context
        )

    return {
        "Echo": grpc.unary_unary_rpc_method_handler(echo),
        "InstrumentedEcho": grpc.unary_unary_rpc_method_handler(instrumented),
    }


def play_floor(
    config: ServerConfig, keys: KeyRing, metrics: ServiceMetrics | None, requests: list[bytes]
) -> Handler:
    """``PlayFloor``'s handler of the request bytes: a ``Play`` whose rules cost nothing, the
    most any engine could reach (docs/benchmarks.md, "gRPC").

    It takes ``Play``'s whole path but the rules work: the request parsed and
    checked, the state token opened, its ``GameState`` parsed, the seat token
    checked, the move parsed, the same state serialized again, sealed and hashed
    for its state id, the seat token's renewal looked for, and the
    ``PlayResponse`` the real engine made for the request (computed before
    serving) serialized as the answer. Its request line carries what ``Play``'s
    does (seat, move number, state id), and it queues the move's count that
    ``Play`` queued for the request. What ``Play`` costs beyond it is the Python
    rules work: decoding into the engine's state, judging and playing the move,
    encoding, events and the view.
    """
    api = build_api(config, keys, metrics)
    answers: dict[bytes, tuple[pb.PlayResponse, list[Callable[[], None]]]] = {}
    for raw in requests:
        request = pb.PlayRequest.FromString(raw)
        played = CallInfo()
        # ``played.counts``: the move's count (none without metrics), run as ``Play``'s is,
        # once the floor's answer stands. No renewal's: the requests' seat tokens are
        # under the first key of ``keys``, which issued them (``bench.grpc.play_stream``).
        answers[request.state] = (api.play(request, played), played.counts)
    sealer = build_sealer(keys, plain=config.plain_state)
    seat_tokens = SeatTokens(keys)

    def floor(request: pb.PlayRequest, info: CallInfo) -> pb.PlayResponse:
        info.seat = request.seat
        payload = sealer.open(request.state)
        state = pb.GameState.FromString(payload)
        info.game_id = state.game_id
        info.move_number = state.move_number
        seat_tokens.verify(state.game_id, request.seat, request.seat_token, state.config.players)
        codec.move_from_proto(request.move)
        answer, counts = answers[request.state]
        info.counts.extend(counts)
        payload = state.SerializeToString(deterministic=True)
        sealer.seal(payload)
        info.state_id = state_id(payload)
        # The service's own step: with one key it renews nothing, as in ``Play``.
        api._renew(answer, info, state.game_id, request.seat, request.seat_token)
        return answer

    return parsing(pb.PlayRequest, floor, config.max_request_bytes)


def play_floor_handler(
    runner: CallRunner, handle: Handler
) -> grpc.RpcMethodHandler[bytes, Message]:
    """``PlayFloor`` (``play_floor``) served as every RPC is (``serve_call``)."""

    async def served(request: bytes, context: grpc.aio.ServicerContext[bytes, Message]) -> Message:
        return await serve_call(runner, ECHO_SERVICE, "PlayFloor", handle, request, context)

    return grpc.unary_unary_rpc_method_handler(
        served, response_serializer=pb.PlayResponse.SerializeToString
    )


async def serve(port_file: Path, echo_bytes: int, requests: list[bytes]) -> None:
    config = ServerConfig(host="127.0.0.1", grpc_port=0, metrics_port=0, log_format="json")
    configure_logging(config.log_format, config.log_level)
    server = grpc.aio.server(options=grpc_server_options(config))
    metrics = new_metrics(CollectorRegistry())
    keys = KeyRing.parse(BENCH_KEY)
    api = build_api(config, keys, metrics)
    runner = CallRunner(metrics)
    server.add_generic_rpc_handlers(
        (KrypkasinoServicer(api, runner, config.max_request_bytes).rpc_handler(),)
    )
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
        **echo_handlers(b"\x01" * echo_bytes, runner),
        "PlayFloor": play_floor_handler(runner, play_floor(config, keys, metrics, requests)),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(ECHO_SERVICE, handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    port_file.write_text(str(port))
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await server.stop(1)


if __name__ == "__main__":
    asyncio.run(serve(Path(sys.argv[1]), int(sys.argv[2]), read_requests(Path(sys.argv[3]))))
