"""A benchmark server: the real Krypkasino servicer and an echo service in one grpc.aio server.

Both services share the process, the port, the server options and the
logging set-up, so ``bench.grpc`` can compare ``Play`` with a call that does
no work at all but move a payload of the same size. Run as
``python -m bench.grpc_server PORT_FILE ECHO_BYTES``; stops on SIGTERM.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import grpc
from prometheus_client import CollectorRegistry

from bench.server import BENCH_KEY
from service.calls import CallRunner
from service.config import ServerConfig
from service.grpc_service import KrypkasinoServicer, serve_call
from service.logs import configure_logging
from service.server import build_api, grpc_server_options, new_metrics
from service.tokens import KeyRing

ECHO_SERVICE = "cardrules.bench.v1.EchoService"
ECHO_METHOD = f"/{ECHO_SERVICE}/Echo"
INSTRUMENTED_ECHO_METHOD = f"/{ECHO_SERVICE}/InstrumentedEcho"


def echo_handler(payload: bytes, runner: CallRunner) -> grpc.GenericRpcHandler:
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

    return grpc.method_handlers_generic_handler(
        ECHO_SERVICE,
        {
            "Echo": grpc.unary_unary_rpc_method_handler(echo),
            "InstrumentedEcho": grpc.unary_unary_rpc_method_handler(instrumented),
        },
    )


async def serve(port_file: Path, echo_bytes: int) -> None:
    config = ServerConfig(host="127.0.0.1", grpc_port=0, metrics_port=0, log_format="json")
    configure_logging(config.log_format, config.log_level)
    server = grpc.aio.server(options=grpc_server_options(config))
    metrics = new_metrics(CollectorRegistry())
    api = build_api(config, KeyRing.parse(BENCH_KEY), metrics)
    runner = CallRunner(metrics)
    server.add_generic_rpc_handlers(
        (KrypkasinoServicer(api, runner, config.max_request_bytes).rpc_handler(),)
    )
    server.add_generic_rpc_handlers((echo_handler(b"\x01" * echo_bytes, runner),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    port_file.write_text(str(port))
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await server.stop(1)


if __name__ == "__main__":
    asyncio.run(serve(Path(sys.argv[1]), int(sys.argv[2])))
