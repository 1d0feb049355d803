"""A client's retries as the server sees them: gRPC's retry policy sends each retry of a
call with ``grpc-previous-rpc-attempts``; the request log line gives it as ``attempt`` and
``cardrules_retry_attempts_total`` counts it (docs/operations.md, "Metrics and alerts")."""

from __future__ import annotations

import re

import grpc
import pytest
from cardrules.client import KrypkasinoClient, error_info, request_id

from service.grpc_service import call_headers
from tests.service.grpc_helpers import game_state, seal
from tests.service.metrics_helpers import rpc_sample
from tests.service.server_process import TEST_KEY, free_port, running


def test_the_python_clients_retries_are_logged_and_counted() -> None:
    """A token sealed by a newer release is UNAVAILABLE, which the client retries: four
    attempts of one call under one request id, the last three logged with their attempt
    and counted."""
    with running(("--metrics-port", str(free_port()))) as server:
        server.wait_for_logs("metrics")
        with KrypkasinoClient(server.target) as client:
            game = client.new_game(players=2, metadata=(("x-request-id", "retries-new-game"),))
            newer = seal(game_state(game.state, TEST_KEY).SerializeToString(), TEST_KEY, version=2)
            with pytest.raises(grpc.RpcError) as refused:
                # A deadline that leaves every attempt its turn, however busy the machine.
                client.get_view(state=newer, timeout=30)
        assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
        info = error_info(refused.value)
        assert info is not None and info.reason == "TOKEN_FROM_NEWER_RELEASE"
        # The client's own request id, sent with every attempt.
        given = request_id(refused.value)
        assert given is not None and re.fullmatch("[0-9a-f]{32}", given)
        lines = server.wait_for_logs("request", 5)  # the NewGame and four attempts
        attempts = [line for line in lines if line["request_id"] == given]
        assert [line.get("attempt") for line in attempts] == [None, 2, 3, 4]
        assert {line["code"] for line in attempts} == {"Unavailable"}
        (first,) = [line for line in lines if line["request_id"] == "retries-new-game"]
        assert first["code"] == "OK" and "attempt" not in first
        retried = {
            method: rpc_sample(server.metrics_url, "cardrules_retry_attempts_total", method)
            for method in ("GetView", "NewGame")
        }
        assert retried == {"GetView": 3, "NewGame": 0}


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ((), (None, 1)),
        ((("x-request-id", "a"), ("x-request-id", "b")), ("a", 1)),
        ((("grpc-previous-rpc-attempts", "1"),), (None, 2)),
        ((("x-request-id", "r"), ("grpc-previous-rpc-attempts", "4")), ("r", 5)),
        # gRPC makes at most 5 attempts; anything else is no retry of ours.
        ((("grpc-previous-rpc-attempts", "0"),), (None, 1)),
        ((("grpc-previous-rpc-attempts", "5"),), (None, 1)),
        ((("grpc-previous-rpc-attempts", " 2"),), (None, 1)),
        ((("grpc-previous-rpc-attempts", "two"),), (None, 1)),
    ],
)
def test_the_request_id_and_attempt_are_read_from_the_metadata(
    metadata: tuple[tuple[str, str], ...], expected: tuple[str | None, int]
) -> None:
    assert call_headers(metadata) == expected
