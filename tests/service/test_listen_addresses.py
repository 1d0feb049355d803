"""A ``--host`` name is served on every address it resolves to, by the HTTP gateway
and the metrics port alike, on one port (docs/operations.md, "Configuration").

No name resolves to two loopback addresses on every machine (``localhost`` gives
``::1`` and ``127.0.0.1`` on some, ``127.0.0.1`` alone on others), so a made-up
name, ``dualname``, is resolved to two by a patched ``socket.getaddrinfo``: the
resolver is the only stand-in, the sockets and connections are real, on loopback.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import threading
import urllib.error
import urllib.request
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from service.http_gateway import start_http
from service.listen import bind_error, ipv6_available
from service.metrics_http import start_metrics_http
from tests.service.http_helpers import krypkasino_gateway

NAME = "dualname"
#: Both loopbacks where this machine has IPv6, else two IPv4 loopback addresses (all of
#: 127.0.0.0/8 is loopback on Linux): two sockets of the same port either way.
ADDRESSES = ("::1", "127.0.0.1") if ipv6_available() else ("127.0.0.1", "127.0.0.2")
#: A link-local address with its interface (a scope id): no address at all without it.
SCOPED = "fe80::1234%lo"

_real_getaddrinfo = socket.getaddrinfo


def _getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
    if host != NAME:
        return _real_getaddrinfo(host, port, *args, **kwargs)
    return [
        info for address in ADDRESSES for info in _real_getaddrinfo(address, port, *args, **kwargs)
    ]


@pytest.fixture
def dualname(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(socket, "getaddrinfo", _getaddrinfo)
    return NAME


def url(address: str, port: int, path: str) -> str:
    return f"http://{f'[{address}]' if ':' in address else address}:{port}{path}"


def status(address: str, port: int, path: str) -> int | str:
    """The status ``path`` answers at ``address``, or why no connection was made."""
    try:
        with urllib.request.urlopen(url(address, port, path), timeout=10) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as error:
        return error.code
    except urllib.error.URLError as error:
        return str(error.reason)


def test_metrics_serve_every_address_of_a_name_on_one_port(dualname: str) -> None:
    server = start_metrics_http(0, CollectorRegistry(), dualname)
    try:
        assert [status(a, server.port, "/metrics") for a in ADDRESSES] == [200, 200]
    finally:
        server()
    # Stopped: every address is released, not the first alone.
    assert [bind_error(_family(a), (a, server.port)) for a in ADDRESSES] == [None, None]


def test_metrics_that_cannot_bind_every_address_release_the_ones_they_bound(
    dualname: str,
) -> None:
    """The second address taken: the first, already bound, is closed before the error
    reaches the caller, not left listening for as long as the error is kept."""
    with socket.socket(_family(ADDRESSES[1])) as taken:
        taken.bind((ADDRESSES[1], 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert bind_error(_family(ADDRESSES[0]), (ADDRESSES[0], port)) is None
        with pytest.raises(OSError) as refused:
            start_metrics_http(port, CollectorRegistry(), dualname)
        assert refused.value.errno == errno.EADDRINUSE
        assert bind_error(_family(ADDRESSES[0]), (ADDRESSES[0], port)) is None


def test_http_serves_every_address_of_a_name_on_one_port(dualname: str) -> None:
    async def main() -> list[int | str]:
        server = await start_http(
            krypkasino_gateway(), dualname, 0, reuse_port=False, grace_seconds=1
        )
        try:
            return [await asyncio.to_thread(status, a, server.port, "/healthz") for a in ADDRESSES]
        finally:
            await server.stop()

    assert asyncio.run(main()) == [200, 200]


def _no_thread_starts(self: threading.Thread) -> None:
    raise RuntimeError("can't start new thread")


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "0.0.0.0"])
def test_http_starts_where_no_thread_can_be_started(
    host: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gateway resolves its host on the event loop, as the port check and gRPC did
    just before: resolved in the loop's executor, a server on the default host, which
    needed no thread, crashed where no thread could be started (a review, with a pids
    limit), and held one more idle thread for its whole life everywhere else."""

    async def main() -> int:
        server = await start_http(krypkasino_gateway(), host, 0, reuse_port=False, grace_seconds=1)
        await server.stop()
        return server.port

    monkeypatch.setattr(threading.Thread, "start", _no_thread_starts)
    assert asyncio.run(main()) > 0


def _family(address: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def _scoped_bind_error() -> OSError | None:
    """What a socket bound to what ``SCOPED`` resolves to, scope id and all, meets."""
    ((family, _, _, _, address),) = socket.getaddrinfo(
        SCOPED, 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )
    return bind_error(family, address)


def test_metrics_keep_an_ipv6_scope_id() -> None:
    """Without its scope id a link-local address is refused with EINVAL whatever the
    machine; with it, metrics meet what any socket bound there meets (here most often
    EADDRNOTAVAIL: no such address on ``lo``)."""
    expected = _scoped_bind_error()
    if expected is None:  # a machine with that address on lo
        start_metrics_http(0, CollectorRegistry(), SCOPED)()
        return
    with pytest.raises(OSError) as refused:
        start_metrics_http(0, CollectorRegistry(), SCOPED)
    assert refused.value.errno == expected.errno


def test_http_keeps_an_ipv6_scope_id() -> None:
    expected = _scoped_bind_error()

    async def main() -> None:
        server = await start_http(
            krypkasino_gateway(), SCOPED, 0, reuse_port=False, grace_seconds=1
        )
        await server.stop()

    if expected is None:
        asyncio.run(main())
        return
    with pytest.raises(OSError) as refused:
        asyncio.run(main())
    assert refused.value.errno == expected.errno
