"""The target forms the clients take get through to a real server, from both clients
(clients/python/src/cardrules/client/channel.py, ``check_target``; client README): the
refusals of forms grpc would fail (test_client.py) leave these alone."""

from __future__ import annotations

import asyncio

import pytest
from cardrules.client import AsyncKrypkasinoClient, KrypkasinoClient

from tests.service.server_process import ServerProcess

# {port} is the server's; every form names 127.0.0.1 (the server listens there only).
SERVED = [
    "127.0.0.1:{port}",
    "dns:///127.0.0.1:{port}",
    "DNS:///127.0.0.1:{port}",
    "dns:127.0.0.1:{port}",
    "ipv4:127.0.0.1:{port}",
    "IPV4:///127.0.0.1:{port}",
    "ipv4:127.0.0.1:{port},127.0.0.1:{port}",
    "ipv4:127.0.0.1:{port}/",  # an ipv4: address list ignores a slash and a path
    "ipv4:127.0.0.1:{port}/cardrules",
    "127.0.0.1:{port}?x=/y",
    "127.0.0.1:{port}#frag/x",
    "127.0.0.1%3A{port}",
]


@pytest.mark.parametrize("form", SERVED)
def test_every_target_form_the_clients_take_is_served(server: ServerProcess, form: str) -> None:
    target = form.format(port=server.grpc_port)
    with KrypkasinoClient(target, timeout=10) as client:
        assert len(client.new_game(players=2, seed=1).seat_tokens) == 2

    async def call() -> int:
        async with AsyncKrypkasinoClient(target, timeout=10) as client:
            return len((await client.new_game(players=2, seed=1)).seat_tokens)

    assert asyncio.run(call()) == 2
