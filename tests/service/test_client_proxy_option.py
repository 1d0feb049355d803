"""The client's ``options=[("grpc.enable_http_proxy", 0)]`` reaches the server past a
proxy that the environment names (clients/python/README.md, "Behind an egress proxy";
docs/operations.md, "Behind an egress proxy"). Real clients in a process of their
own, whose ``http_proxy`` points at a loopback port where nothing listens, and the
shared real server."""

from __future__ import annotations

import subprocess
import sys

from tests.service.server_process import ServerProcess, free_port, server_environment

#: Both clients, with and without the option: what each call ended in.
CLIENTS = """
import asyncio, sys, grpc
from cardrules.client import AsyncKrypkasinoClient, KrypkasinoClient

NO_PROXY = [("grpc.enable_http_proxy", 0)]


def blocking(options):
    with KrypkasinoClient(sys.argv[1], options=options, timeout=10) as client:
        try:
            return "OK" if client.new_game(players=2).state else "EMPTY"
        except grpc.RpcError as error:
            return error.code().name


async def asynchronous(options):
    async with AsyncKrypkasinoClient(sys.argv[1], options=options, timeout=10) as client:
        try:
            return "OK" if (await client.new_game(players=2)).state else "EMPTY"
        except grpc.RpcError as error:
            return error.code().name


print(blocking(None), blocking(NO_PROXY))
print(asyncio.run(asynchronous(None)), asyncio.run(asynchronous(NO_PROXY)))
"""


def test_the_channel_option_turns_the_environments_proxy_off(server: ServerProcess) -> None:
    proxy = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    done = subprocess.run(
        [sys.executable, "-c", CLIENTS, server.target],
        env=server_environment({"http_proxy": proxy, "no_proxy": ".svc,.cluster.local"}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    # Without the option grpc went to the proxy; with it, to the server.
    assert done.stdout == "UNAVAILABLE OK\nUNAVAILABLE OK\n"
