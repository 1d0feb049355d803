"""The memory of a request is freed when its call ends, also when it is refused (a
resource review).

A client that sent most of a megabyte body (or the kilobyte of gzip it inflates
from) and then closed its connection left the body read so far in a reference
cycle: aiohttp keeps the error it raised on the request's stream, the error's
traceback holds the gateway's reading frame, and that frame the request and
the body. Only Python's full collection freed it, and waves of such uploads
took a worker from 71 to 308 MiB. A body refused once read whole (malformed
JSON) was held so too, by the refusal's traceback. Here the cyclic collector is
off while the gateway serves such requests over loopback; what it then finds
unreachable must hold no request, none of the gateway's frames and no body.

The refusal's traceback held its request over gRPC too: it holds the frame of
``CallRunner.run``, whose locals hold the refusal, and by the frame chain the
servicer's, with the request's bytes and message, up to ``--max-request-bytes``
per refused call. So did grpc's AbortError of the refusal, which grpc keeps on
the call: its traceback held the serving frames, which hold the call, with the
request's bytes. A real grpc.aio server on loopback refuses such calls here,
with the cyclic collector off as well: what it then finds must hold no request,
none of the service's frames and no request bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import gzip
import re
import types
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import grpc
import pytest
import structlog.testing
from aiohttp import web
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from google.protobuf.message import Message

import service
from service.calls import CallRunner
from service.config import ServerConfig
from service.grpc_service import KrypkasinoServicer
from service.server import build_api
from service.tokens import KeyRing
from tests.service.http_helpers import krypkasino_gateway, run
from tests.service.server_process import TEST_KEY

_SERVICE_DIR = str(Path(service.__file__).parent)
# Under the body limit of the default --max-request-bytes (16 times 64 KiB).
_JSON = b'{"config":{"players":2},' + b" " * 1_000_000 + b'"seed":"1"}'
_MALFORMED = _JSON.replace(b'"seed":"1"', b'"seed":1x')
_REQUESTS = 3


@contextlib.contextmanager
def cyclic_garbage() -> Iterator[list[object]]:
    """A list that, once the block has run with the cyclic collector off, holds what the
    collector then finds unreachable: what reference counting alone did not free."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    found: list[object] = []
    try:
        yield found
        gc.collect()
        found.extend(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()


def _head(length: int, coding: str | None) -> bytes:
    encoding = b"" if coding is None else f"Content-Encoding: {coding}\r\n".encode()
    return (
        b"POST /v1/krypkasino:newGame HTTP/1.1\r\nHost: test\r\n"
        b"Content-Type: application/json\r\nExpect: 100-continue\r\n"
        + encoding
        + f"Content-Length: {length}\r\n\r\n".encode()
    )


async def _upload(url: str, body: bytes, coding: str | None, *, drop: bool) -> None:
    """Sends ``body`` once the gateway has asked for it (100 Continue: its handler has
    begun), so that it reads what comes; with ``drop``, all but its last 8 bytes, then
    closes the connection; else all of it, and reads the answer."""
    port = int(url.rpartition(":")[2])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(_head(len(body), coding))
        assert (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)).startswith(
            b"HTTP/1.1 100 "
        )
        writer.write(body[:-8] if drop else body)
        await writer.drain()
        if not drop:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            length = re.search(rb"Content-Length: (\d+)", head)
            assert head.startswith(b"HTTP/1.1 400 ") and length is not None
            await asyncio.wait_for(reader.readexactly(int(length[1])), 10)
    finally:
        writer.close()


def _held(garbage: list[object]) -> tuple[list[str], list[str], int]:
    """In ``garbage``: the requests, the frames of the service's code, and the bytes of
    the strings and byte strings of a kilobyte or more that its objects hold."""
    requests = [type(o).__name__ for o in garbage if isinstance(o, (web.BaseRequest, Message))]
    frames = [
        o.f_code.co_name
        for o in garbage
        if isinstance(o, types.FrameType) and o.f_code.co_filename.startswith(_SERVICE_DIR)
    ]
    sizes = (
        len(r)
        for o in garbage
        for r in gc.get_referents(o)
        if isinstance(r, (bytes, bytearray, str)) and len(r) >= 1024
    )
    return requests, frames, sum(sizes)


@pytest.mark.parametrize(
    ("body", "coding", "drop", "reason"),
    [
        (gzip.compress(_JSON), "gzip", True, "CLIENT_GONE"),
        (_JSON, None, True, "CLIENT_GONE"),
        (gzip.compress(_MALFORMED), "gzip", False, "JSON_INVALID"),
    ],
    ids=["gzip_dropped", "plain_dropped", "malformed_whole"],
)
def test_a_body_is_freed_when_its_request_ends_without_the_cyclic_collector(
    body, coding, drop, reason
):
    gateway = krypkasino_gateway(limit=ServerConfig().max_request_bytes)

    async def scenario(_: aiohttp.ClientSession, url: str) -> None:
        for done in range(1, _REQUESTS + 1):
            await _upload(url, body, coding, drop=drop)
            # Each request ends (its line logged) before the next begins.
            async with asyncio.timeout(10):
                while len([e for e in logs if e["event"] == "request"]) < done:
                    await asyncio.sleep(0.005)

    with cyclic_garbage() as garbage, structlog.testing.capture_logs() as logs:
        run(gateway, scenario)
    assert [e.get("reason") for e in logs if e["event"] == "request"] == [reason] * _REQUESTS
    assert _held(garbage) == ([], [], 0)


PLAY = "/cardrules.krypkasino.v1.KrypkasinoService/Play"
# A forged state token that fills a request near the default --max-request-bytes: parsed,
# then refused by the state's check, as any forged or corrupted token is.
_FORGED_PLAY = pb.PlayRequest(
    state=b"\x01" * (ServerConfig().max_request_bytes - 4096),
    seat=0,
    seat_token=b"\x02" * 32,
).SerializeToString()


async def _refused_plays(count: int) -> list[tuple[grpc.StatusCode, str]]:
    """Serves the Krypkasino service on a real grpc.aio server on loopback, as
    ``cardrules serve`` does, and sends it ``count`` forged Plays, one after the other:
    each one's code and request id."""
    limit = ServerConfig().max_request_bytes
    api = build_api(ServerConfig(), KeyRing.parse(TEST_KEY), None)
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        (KrypkasinoServicer(api, CallRunner(None), limit).rpc_handler(),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    answers: list[tuple[grpc.StatusCode, str]] = []
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            # Bytes in and out: the only request message in the process is the server's.
            play: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(PLAY)
            for _ in range(count):
                try:
                    await play(_FORGED_PLAY, timeout=10)
                except grpc.aio.AioRpcError as error:
                    trailers = dict(error.trailing_metadata() or ())
                    answers.append((error.code(), str(trailers.get("x-request-id"))))
    finally:
        await server.stop(None)
    return answers


def test_a_refused_grpc_request_is_freed_when_its_call_ends_without_the_cyclic_collector():
    with cyclic_garbage() as garbage, structlog.testing.capture_logs() as logs:
        answers = asyncio.run(_refused_plays(_REQUESTS))
    lines = [e for e in logs if e["event"] == "request"]
    assert [code for code, _ in answers] == [grpc.StatusCode.INVALID_ARGUMENT] * _REQUESTS
    assert [(e["transport"], e["reason"]) for e in lines] == [
        ("grpc", "TOKEN_UNKNOWN_KEY")
    ] * _REQUESTS
    assert [e["request_id"] for e in lines] == [request_id for _, request_id in answers]
    assert _held(garbage) == ([], [], 0)
