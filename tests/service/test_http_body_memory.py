"""The memory of an HTTP request body is freed when its request ends (a resource review).

A client that sent most of a megabyte body (or the kilobyte of gzip it inflates
from) and then closed its connection left the body read so far in a reference
cycle: aiohttp keeps the error it raised on the request's stream, the error's
traceback holds the gateway's reading frame, and that frame the request and
the body. Only Python's full collection freed it, and waves of such uploads
took a worker from 71 to 308 MiB. A body refused once read whole (malformed
JSON) was held so too, by the refusal's traceback. Here the cyclic collector is
off while the gateway serves such requests over loopback; what it then finds
unreachable must hold no request, none of the gateway's frames and no body.
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
import pytest
import structlog.testing
from aiohttp import web

import service
from service.config import ServerConfig
from tests.service.http_helpers import krypkasino_gateway, run

_SERVICE_DIR = str(Path(service.__file__).parent)
# Under the body limit of the default --max-request-bytes (16 times 64 KiB).
_JSON = b'{"config":{"players":2},' + b" " * 1_000_000 + b'"seed":"1"}'
_MALFORMED = _JSON.replace(b'"seed":"1"', b'"seed":1x')
_UPLOADS = 3


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
    requests = [type(o).__name__ for o in garbage if isinstance(o, web.BaseRequest)]
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
        for done in range(1, _UPLOADS + 1):
            await _upload(url, body, coding, drop=drop)
            # Each request ends (its line logged) before the next begins.
            async with asyncio.timeout(10):
                while len([e for e in logs if e["event"] == "request"]) < done:
                    await asyncio.sleep(0.005)

    with cyclic_garbage() as garbage, structlog.testing.capture_logs() as logs:
        run(gateway, scenario)
    assert [e.get("reason") for e in logs if e["event"] == "request"] == [reason] * _UPLOADS
    assert _held(garbage) == ([], [], 0)
