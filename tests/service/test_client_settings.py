"""The Python client's load-balancing setting, against a real server."""

from __future__ import annotations

import asyncio
import json

import grpc
import pytest
from cardrules.client import (
    LOAD_BALANCING_POLICIES,
    AsyncKrypkasinoClient,
    KrypkasinoClient,
    channel_options,
    service_config,
)


@pytest.mark.parametrize("policy", LOAD_BALANCING_POLICIES)
def test_every_policy_the_client_takes_is_one_grpc_runs(grpc_target: str, policy: str) -> None:
    """A policy grpc did not know would fail the call with INVALID_ARGUMENT."""
    with KrypkasinoClient(f"dns:///{grpc_target}", load_balancing=policy) as client:
        assert client.new_game(players=2, seed=4).state


@pytest.mark.parametrize(
    ("policy", "error", "match"),
    [
        ("roundrobin", ValueError, r"not 'roundrobin': did you mean 'round_robin'\?"),
        ("ring_hash", ValueError, r"one of pick_first, round_robin, weighted_round_robin or None"),
        ("", ValueError, "not ''$"),
        (7, TypeError, "must be a policy name or None, not 7"),
    ],
)
def test_a_policy_grpc_would_refuse_at_every_call_is_refused_at_once(
    grpc_target: str, policy: object, error: type[Exception], match: str
) -> None:
    """grpc takes the name and fails every call with INVALID_ARGUMENT, the code of a bad
    request, as if the service had refused it."""
    with pytest.raises(error, match=match):
        KrypkasinoClient(grpc_target, load_balancing=policy)  # type: ignore[call-overload]
    with pytest.raises(error, match=match):
        channel_options(policy)  # type: ignore[arg-type]
    with pytest.raises(error, match=match):
        service_config(policy)  # type: ignore[arg-type]

    async def make() -> None:
        AsyncKrypkasinoClient(grpc_target, load_balancing=policy)  # type: ignore[call-overload]

    with pytest.raises(error, match=match):
        asyncio.run(make())


def test_grpc_itself_fails_every_call_under_an_unknown_policy(grpc_target: str) -> None:
    """Why the client checks: a channel built around the check gets INVALID_ARGUMENT."""
    config = service_config("round_robin")
    config["loadBalancingConfig"] = [{"roundrobin": {}}]
    options = [("grpc.service_config", json.dumps(config))]
    with grpc.insecure_channel(grpc_target, options) as channel:
        client = KrypkasinoClient(channel=channel)
        with pytest.raises(grpc.RpcError) as raised:
            client.new_game(players=2)
    assert raised.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "No known policies in list: roundrobin" in str(raised.value.details())
