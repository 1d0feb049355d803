"""A client's retries as the server sees them: gRPC's retry policy sends each retry of a
call with ``grpc-previous-rpc-attempts``; the request log line gives it as ``attempt`` and
``cardrules_retry_attempts_total`` counts it (docs/operations.md, "Metrics and alerts")."""

from __future__ import annotations

import asyncio
import re

import grpc
import pytest
from cardrules.client import AsyncKrypkasinoClient, KrypkasinoClient, error_info, request_id

from service.grpc_service import call_headers
from tests.service.grpc_helpers import game_state, seal
from tests.service.metrics_helpers import rpc_sample
from tests.service.server_process import TEST_KEY, free_port, running


def refused_get_view(target: str, state: bytes, *, asynchronous: bool) -> grpc.RpcError:
    """The error that ends a ``GetView`` of the sync or the asyncio client. Its deadline
    leaves every attempt its turn, however busy the machine."""
    if asynchronous:

        async def call() -> grpc.RpcError:
            async with AsyncKrypkasinoClient(target) as client:
                with pytest.raises(grpc.RpcError) as raised:
                    await client.get_view(state=state, timeout=30)
                return raised.value

        return asyncio.run(call())
    with KrypkasinoClient(target) as client, pytest.raises(grpc.RpcError) as raised:
        client.get_view(state=state, timeout=30)
    return raised.value


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "asyncio"])
def test_the_python_clients_retries_are_logged_and_counted(asynchronous: bool) -> None:
    """A token sealed by a newer release is UNAVAILABLE, which the client retries: four
    attempts of one call under the request id the client sent, the last three logged with
    their attempt and counted, each one call started."""
    with running(("--metrics-port", str(free_port()))) as server:
        server.wait_for_logs("metrics")
        with KrypkasinoClient(server.target) as client:
            game = client.new_game(players=2, metadata=(("x-request-id", "retries-new-game"),))
        newer = seal(game_state(game.state, TEST_KEY).SerializeToString(), TEST_KEY, version=2)
        refused = refused_get_view(server.target, newer, asynchronous=asynchronous)
        assert refused.code() is grpc.StatusCode.UNAVAILABLE
        info = error_info(refused)
        assert info is not None and info.reason == "TOKEN_FROM_NEWER_RELEASE"
        # The client's own request id, sent with every attempt: ids the server made up
        # would differ from one attempt to the next.
        given = request_id(refused)
        assert given is not None and re.fullmatch("[0-9a-f]{32}", given)
        lines = server.wait_for_logs("request", 5)  # the NewGame and four attempts
        attempts = [line for line in lines if line["request_id"] == given]
        assert [line.get("attempt") for line in attempts] == [None, 2, 3, 4]
        assert {line["code"] for line in attempts} == {"Unavailable"}
        (first,) = [line for line in lines if line["request_id"] == "retries-new-game"]
        assert first["code"] == "OK" and "attempt" not in first
        methods = ("GetView", "NewGame")
        retried = {
            method: rpc_sample(server.metrics_url, "cardrules_retry_attempts_total", method)
            for method in methods
        }
        assert retried == {"GetView": 3, "NewGame": 0}
        started = {
            method: rpc_sample(server.metrics_url, "grpc_server_started_total", method)
            for method in methods
        }
        assert started == {"GetView": 4, "NewGame": 1}


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ((), (None, 1, None)),
        ((("x-request-id", "a"), ("x-request-id", "b")), ("a", 1, None)),
        ((("grpc-previous-rpc-attempts", "1"),), (None, 2, None)),
        ((("x-request-id", "r"), ("grpc-previous-rpc-attempts", "4")), ("r", 5, None)),
        # gRPC makes at most 5 attempts; anything else is no retry of ours.
        ((("grpc-previous-rpc-attempts", "0"),), (None, 1, None)),
        ((("grpc-previous-rpc-attempts", "5"),), (None, 1, None)),
        ((("grpc-previous-rpc-attempts", " 2"),), (None, 1, None)),
        ((("grpc-previous-rpc-attempts", "two"),), (None, 1, None)),
        # Only text is an id (request_id_from takes text); gRPC gives bytes only for -bin keys.
        ((("x-request-id", b"a"),), (None, 1, None)),
    ],
)
def test_the_request_id_and_attempt_are_read_from_the_metadata(
    metadata: tuple[tuple[str, str], ...], expected: tuple[str | None, int, str | None]
) -> None:
    assert call_headers(metadata) == expected
