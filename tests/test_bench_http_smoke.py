"""The HTTP benchmark counts what it should (a real server; timings are never asserted)."""

from __future__ import annotations

import asyncio

import aiohttp

from bench import http as http_bench
from bench.common import Json
from bench.server import cardrules_serve

CALLS = 20
JSON = {"Content-Type": "application/json"}


def test_calls_answered_with_an_error_are_not_counted_as_throughput() -> None:
    """requests/s counts the answered ``Play``s only: a round of calls the gateway refused
    read as fast as the refusals came back."""

    async def refused_round(port: int) -> Json:
        url = f"http://127.0.0.1:{port}/v1/krypkasino:play"
        async with aiohttp.ClientSession() as session:

            async def refused(index: int) -> bool:
                # A Play without a state token: refused with a 400.
                async with session.post(url, data=b"{}", headers=JSON) as response:
                    await response.read()
                    return response.status == 200

            return await http_bench._load([refused, refused], CALLS)

    with cardrules_serve() as ports:
        figures = asyncio.run(refused_round(ports.http))
    assert figures["requests"] == figures["failures"] == CALLS, figures
    assert figures["rps"] == 0, figures
