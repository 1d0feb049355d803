"""The target forms the clients take get through to a real server, from both clients
(clients/python/src/cardrules/client/channel.py, ``check_target``; client README): the
refusals of forms grpc would fail (test_client.py) leave these alone."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from cardrules.client import AsyncKrypkasinoClient, KrypkasinoClient

from service.listen import ipv6_available
from tests.service.server_process import ServerProcess, start_server, stop_and_check

# {port} is the server's; every form names 127.0.0.1 (the server listens there only).
SERVED = [
    "127.0.0.1:{port}",
    "dns:///127.0.0.1:{port}",
    "DNS:///127.0.0.1:{port}",
    "dns:127.0.0.1:{port}",
    "ipv4:127.0.0.1:{port}",
    "IPV4:///127.0.0.1:{port}",
    "ipv4:127.0.0.1:{port},127.0.0.1:{port}",
    # grpc skips the empty elements of an ipv4: or ipv6: list.
    "ipv4:127.0.0.1:{port},",
    "ipv4:127.0.0.1:{port},,127.0.0.1:{port}",
    "ipv4:,127.0.0.1:{port}",
    "ipv4:127.0.0.1:{port}/",  # an ipv4: address list ignores a slash and a path
    "ipv4:127.0.0.1:{port}/cardrules",
    "127.0.0.1:{port}?x=/y",
    "127.0.0.1:{port}#frag/x",
    "127.0.0.1%3A{port}",
]


def served_by_both_clients(target: str) -> None:
    with KrypkasinoClient(target, timeout=10) as client:
        assert len(client.new_game(players=2, seed=1).seat_tokens) == 2

    async def call() -> int:
        async with AsyncKrypkasinoClient(target, timeout=10) as client:
            return len((await client.new_game(players=2, seed=1)).seat_tokens)

    assert asyncio.run(call()) == 2


@pytest.mark.parametrize("form", SERVED)
def test_every_target_form_the_clients_take_is_served(server: ServerProcess, form: str) -> None:
    served_by_both_clients(form.format(port=server.grpc_port))


# The forms of ipv6: lists, served by a server on ::1 where this machine has IPv6.
SERVED_IPV6 = [
    "ipv6:[::1]:{port}",
    "ipv6:[::1]:{port},",
    "ipv6:///[::1]:{port},,[::1]:{port}",
]

HAS_IPV6 = ipv6_available()


@pytest.fixture(scope="module")
def ipv6_server() -> Iterator[ServerProcess | None]:
    """A server on ::1, or None on a machine without IPv6."""
    if not HAS_IPV6:
        yield None
        return
    running = start_server(["--host", "::1"])
    yield running
    stop_and_check(running)


@pytest.mark.parametrize("form", SERVED_IPV6)
def test_every_ipv6_list_form_the_clients_take_is_served(
    ipv6_server: ServerProcess | None, form: str
) -> None:
    """Without IPv6 no server can listen on ::1: then both clients are only made."""
    if ipv6_server is not None:
        served_by_both_clients(form.format(port=ipv6_server.grpc_port))
        return
    target = form.format(port=50051)
    KrypkasinoClient(target).close()

    async def make() -> None:
        await AsyncKrypkasinoClient(target).close()

    asyncio.run(make())
