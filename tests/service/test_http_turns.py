"""HTTP calls share the event loop in small turns (docs/operations.md, "Overload").

Hundreds of HTTP calls in flight must not hold up a health check: the server
runs a few of them per turn of its event loop (``service.turn_budget``) and the
gRPC health check, which needs a few turns, is answered while most of them
still wait. Before, one turn ran every call that had arrived, and a probe
waited for all of them (the kubelet's 2 s timed out under 800).
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections import Counter
from typing import Any

import aiohttp
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.service.http_helpers import rpc
from tests.service.metrics_helpers import handled
from tests.service.server_process import ServerProcess, free_port, running

IN_FLIGHT = 300


def legal_moves_body(server: ServerProcess) -> str:
    """A LegalMoves request of the seat on turn in a new 4-player game, as JSON."""
    game = rpc(server, "newGame", {"config": {"players": 4}, "seed": "5"})
    seat = game["view"]["turn"]
    return json.dumps({"state": game["state"], "seat": seat, "seatToken": game["seatTokens"][seat]})


async def answered_before_health(server: ServerProcess, body: str) -> tuple[int, int]:
    """(HTTP answers received when the health check's came, HTTP calls sent)."""
    url = f"{server.http_url}/v1/krypkasino:legalMoves"
    answered = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        # Every connection open and idle first, so that all the calls reach the server
        # together instead of as their connections are accepted.
        await asyncio.gather(
            *(_status(session, "GET", f"{server.http_url}/healthz") for _ in range(IN_FLIGHT))
        )
        first = asyncio.Event()

        async def call() -> None:
            nonlocal answered
            assert await _status(session, "POST", url, body) == 200
            answered += 1
            first.set()

        calls = [asyncio.create_task(call()) for _ in range(IN_FLIGHT)]
        await first.wait()  # the server is busy with the calls
        async with grpc.aio.insecure_channel(server.target) as channel:
            stub: Any = health_pb2_grpc.HealthStub(channel)  # its type stubs lack Check
            reply = await stub.Check(health_pb2.HealthCheckRequest(service="liveness"))
        at_health = answered
        await asyncio.gather(*calls)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    return at_health, answered


async def _status(
    session: aiohttp.ClientSession, method: str, url: str, body: str | None = None
) -> int:
    headers = {} if body is None else {"Content-Type": "application/json"}
    async with session.request(method, url, data=body, headers=headers) as response:
        await response.read()
        return response.status


def test_a_health_check_is_answered_while_most_http_calls_in_flight_still_wait():
    with running() as server:
        body = legal_moves_body(server)
        at_health, sent = asyncio.run(answered_before_health(server, body))
    assert sent == IN_FLIGHT
    assert at_health < IN_FLIGHT // 2, f"{at_health} of {sent} HTTP calls answered first"


def test_a_call_whose_client_left_while_it_waited_is_not_served():
    """Its work would go to an answer nobody reads: it is logged and counted as
    ``Canceled``, ``CLIENT_GONE``, and the calls still wanted are served."""
    with running(("--metrics-port", str(free_port()))) as server:
        body = legal_moves_body(server).encode()
        request = (
            f"POST /v1/krypkasino:legalMoves HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        connections = [
            socket.create_connection(("127.0.0.1", server.http_port)) for _ in range(IN_FLIGHT)
        ]
        for connection in connections:
            connection.sendall(request)
        # The first answer: the server is working through the calls, most still queued.
        first = connections[0].recv(65536)
        assert first.startswith(b"HTTP/1.1 200"), first[:80]
        for connection in connections[1:]:
            connection.close()
        connections[0].close()
        # The NewGame's line and each LegalMoves': the metric counts a call just before its
        # line is written, so wait for every line before comparing the two.
        lines = server.wait_for_logs("request", 1 + IN_FLIGHT)
        calls = [line for line in lines if str(line["method"]).endswith("/LegalMoves")]
        assert len(calls) == IN_FLIGHT
        gone = [line for line in calls if line["code"] == "Canceled"]
        assert handled(server.metrics_url, "LegalMoves", "Canceled") == len(gone)
    assert gone, f"every call was served: {Counter(line['code'] for line in calls)}"
    assert {line["reason"] for line in gone} == {"CLIENT_GONE"}
    # Whose calls they were, though their connections are gone by the time they are logged.
    assert all(str(line.get("peer")).startswith("ipv4:127.0.0.1:") for line in gone)
    assert {line["code"] for line in calls} == {"OK", "Canceled"}
    assert not [line for line in server.logs if line.get("level") == "error"]
