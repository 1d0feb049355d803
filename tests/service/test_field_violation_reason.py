"""Each ``BadRequest.FieldViolation`` carries the refusal's reason, over both transports.

google.rpc's ``FieldViolation.reason`` (UPPER_SNAKE, unique within the ErrorInfo's domain)
lets a client that walks the violations, to mark form fields say, branch without going back
to the ErrorInfo; the service gives every violation of a refusal the ErrorInfo's reason
(``service.errors.ServiceError.to_status``; docs/api.md, "Errors"). Against a real server
on loopback.
"""

from __future__ import annotations

import json
from typing import Any, cast

import google.rpc.error_details_pb2 as error_details_pb2
import grpc
import pytest
from cardrules.client import KrypkasinoClient, error_info, field_violations
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from grpc_status import rpc_status

from tests.service.grpc_helpers import connect
from tests.service.http_helpers import exchange
from tests.service.server_process import ServerProcess

# Requests refused with field violations: (HTTP route, JSON body, reason).
REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("newGame", {"config": {"players": 9}}, "CONFIG_INVALID"),
    ("newGame", {"config": {"players": 2, "teams": 99}}, "FIELD_INVALID"),
    ("newGame", {"config": {"players": 2}, "draw": {"cards": []}}, "DRAW_WITHOUT_DRAW_FOR_DEAL"),
    ("score", {}, "STATE_MISSING"),
    ("score", {"state": "AAAA"}, "TOKEN_MALFORMED"),
]
GRPC_REQUESTS: dict[str, type[Any]] = {"newGame": pb.NewGameRequest, "score": pb.ScoreRequest}


def http_violations(server: ServerProcess, route: str, body: Any) -> tuple[str, list[Any]]:
    """The ErrorInfo reason and the field violations of a refusal over HTTP/JSON."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    status, _, value = exchange(f"{server.http_url}/v1/krypkasino:{route}", data)
    assert status == 400, value
    (info,) = [d for d in value["details"] if d["@type"].endswith("google.rpc.ErrorInfo")]
    (bad,) = [d for d in value["details"] if d["@type"].endswith("google.rpc.BadRequest")]
    return info["reason"], bad["fieldViolations"]


@pytest.mark.parametrize(("route", "body", "reason"), REFUSED)
def test_every_http_field_violation_names_the_refusals_reason(
    server: ServerProcess, route: str, body: dict[str, Any], reason: str
) -> None:
    sent, violations = http_violations(server, route, body)
    assert sent == reason
    assert violations and all(v["reason"] == reason for v in violations), violations


def test_a_json_refusal_of_the_gateway_names_its_reason_too(server: ServerProcess) -> None:
    """JSON_INVALID comes from the gateway's parser, before any RPC: the same Status."""
    reason, violations = http_violations(server, "score", b"{")
    assert reason == "JSON_INVALID"
    assert [v["reason"] for v in violations] == ["JSON_INVALID"]


@pytest.mark.parametrize(("route", "body", "reason"), REFUSED)
def test_every_grpc_field_violation_names_the_refusals_reason(
    grpc_target: str, route: str, body: dict[str, Any], reason: str
) -> None:
    request = GRPC_REQUESTS[route]()
    if "config" in body:
        request.config.players = body["config"]["players"]
        request.config.teams = body["config"].get("teams", 0)
    if "draw" in body:
        request.draw.SetInParent()
    if "state" in body:
        request.state = b"\0\0\0"
    with connect(grpc_target) as stub:
        method = stub.NewGame if route == "newGame" else stub.Score
        with pytest.raises(grpc.RpcError) as raised:
            method(request, timeout=10)
    status = rpc_status.from_call(cast(grpc.Call, raised.value))  # a stub's error is its call
    assert status is not None
    packed = [d for d in status.details if d.TypeName() == "google.rpc.BadRequest"]
    (bad,) = packed
    bad_request = error_details_pb2.BadRequest()
    bad.Unpack(bad_request)
    reasons = [v.reason for v in bad_request.field_violations]
    assert reasons and set(reasons) == {reason}, bad_request


def test_the_client_gives_every_field_violation_of_a_refusal(grpc_target: str) -> None:
    """A refusal that names two fields carries two violations, and the Python client's
    ``field_violations`` gives both, in the service's order (clients/python/README.md,
    "Errors"): draw_for_deal with a first dealer (K4.2) is the fault of either field."""
    config = pb.GameConfig(players=2, draw_for_deal=True, first_dealer=1)
    with KrypkasinoClient(grpc_target) as client, pytest.raises(grpc.RpcError) as raised:
        client.new_game(config=config)
    info = error_info(raised.value)
    assert info is not None and info.reason == "CONFIG_INVALID"
    why = "with draw_for_deal the draw decides the first dealer (K4.2): leave first_dealer 0"
    assert field_violations(raised.value) == [
        ("config.first_dealer", why),
        ("config.draw_for_deal", why),
    ]
