"""``cardrules_seat_tokens_refused_total``: seat tokens refused, by reason (design section 6).

An SRE drill retired a key (rotation step 3) while a backend still held seat tokens
under it: 50 of 50 old games failed ``PERMISSION_DENIED SEAT_TOKEN_INVALID`` with every
``*_refused_total`` at 0, and pods with different key lists refused every call of a
seat that had not played since, unseen: no metric counted refused seat tokens. A seat
token under a key the server lacks counts as ``TOKEN_UNKNOWN_KEY``, as a state token
under one does, though its caller sees ``SEAT_TOKEN_INVALID`` (with its ``key_id``)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any, get_args

import grpc
import pytest
from cardrules.client import KrypkasinoClient, error_info
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from google.protobuf.message import Message
from prometheus_client import CollectorRegistry

from service.calls import CallRunner, Handler, within_deadline
from service.config import ServerConfig
from service.krypkasino_api import GAME
from service.metrics import SEAT_TOKEN_REFUSALS, STATE_TOKEN_REFUSALS, ServiceMetrics
from service.server import build_api, new_metrics
from service.tokens import KeyRing, SeatTokenReason
from tests.service.http_helpers import exchange
from tests.service.metrics_helpers import by_reason, counted_by_reason, metric_samples
from tests.service.server_process import TEST_KEY, free_ports, running
from tests.service.test_state_token_refusals_metric import a_game, run

REFUSED = "cardrules_seat_tokens_refused_total"
OLD_KEY = KeyRing.generate_key_text()


def test_each_reason_is_a_series_at_zero_from_the_start():
    """Pre-created, as the state tokens' refusals are, so that ``rate()`` sees a pod's
    first refusal."""
    registry = CollectorRegistry()
    ServiceMetrics(registry, {})
    assert counted_by_reason(registry, REFUSED) == {reason: 0 for reason in SEAT_TOKEN_REFUSALS}
    assert set(SEAT_TOKEN_REFUSALS) == {*get_args(SeatTokenReason), "TOKEN_UNKNOWN_KEY"}


def test_a_reason_outside_the_bounded_set_is_refused():
    metrics = ServiceMetrics(CollectorRegistry(), {})
    with pytest.raises(ValueError, match="SEAT_MISSING"):
        metrics.seat_token_refused(GAME, "SEAT_MISSING")


def test_every_refusal_of_a_seat_token_counts_under_its_reason_on_each_method():
    """Missing, wrong (another seat's, junk of the wrong length, one of this server's key
    for no seat of the game) and under a key the server lacks, on each method that
    takes a seat token; nothing else counts: a seat out of range, GetView's token without
    a seat, a refused state token, a call that is served."""
    registry = CollectorRegistry()
    metrics = new_metrics(registry)
    api = build_api(ServerConfig(), KeyRing.parse(TEST_KEY), metrics)
    runner = CallRunner(metrics)
    game = a_game(api, runner)
    seat = game.view.turn
    other_seat = 1 - seat
    retired = a_game(build_api(ServerConfig(), KeyRing.parse(OLD_KEY), None), CallRunner(None))
    tokens = {
        "SEAT_TOKEN_MISSING": b"",
        "another seat's": game.seat_tokens[other_seat],
        "junk": b"x" * 7,
        "TOKEN_UNKNOWN_KEY": retired.seat_tokens[seat],
    }
    # A seat token of this server's key under which no seat of the game has it.
    tokens["no seat's"] = game.seat_tokens[seat][:4] + bytes(16)
    move = (
        run(
            runner,
            "LegalMoves",
            api.legal_moves,
            pb.LegalMovesRequest(state=game.state, seat=seat, seat_token=game.seat_tokens[seat]),
        )
        .response.moves[0]
        .move
    )
    calls: list[tuple[str, Handler, Callable[[bytes], Message]]] = [
        (
            "LegalMoves",
            api.legal_moves,
            lambda t: pb.LegalMovesRequest(state=game.state, seat=seat, seat_token=t),
        ),
        (
            "Play",
            api.play,
            lambda t: pb.PlayRequest(state=game.state, seat=seat, seat_token=t, move=move),
        ),
        (
            "GetView",
            api.get_view,
            lambda t: pb.GetViewRequest(state=game.state, seat=seat, seat_token=t),
        ),
    ]
    expected = dict.fromkeys(SEAT_TOKEN_REFUSALS, 0.0)
    for method, handler, request in calls:
        for sent, token in tokens.items():
            error = run(runner, method, handler, request(token)).error
            assert error is not None and error.code is grpc.StatusCode.PERMISSION_DENIED
            # What the caller sees: SEAT_TOKEN_INVALID, naming the key id it lacks.
            if sent == "TOKEN_UNKNOWN_KEY":
                assert error.reason == "SEAT_TOKEN_INVALID"
                assert error.metadata["key_id"] == token[:4].hex()
                expected["TOKEN_UNKNOWN_KEY"] += 1
            else:
                assert "key_id" not in error.metadata
                expected[error.reason] += 1
    assert expected == {"SEAT_TOKEN_MISSING": 3, "SEAT_TOKEN_INVALID": 9, "TOKEN_UNKNOWN_KEY": 3}
    assert counted_by_reason(registry, REFUSED) == expected

    not_seat_tokens: list[tuple[str, Handler, Message]] = [
        ("LegalMoves", api.legal_moves, pb.LegalMovesRequest(state=game.state, seat=7)),
        (
            "GetView",
            api.get_view,
            pb.GetViewRequest(state=game.state, seat_token=game.seat_tokens[seat]),
        ),
        (
            "LegalMoves",
            api.legal_moves,
            pb.LegalMovesRequest(state=retired.state, seat=seat, seat_token=b""),
        ),
    ]
    for method, call, message in not_seat_tokens:
        assert run(runner, method, call, message).error is not None
    ours = pb.GetViewRequest(state=game.state, seat=seat, seat_token=game.seat_tokens[seat])
    assert run(runner, "GetView", api.get_view, ours).error is None
    assert counted_by_reason(registry, REFUSED) == expected
    assert counted_by_reason(registry, "cardrules_state_tokens_refused_total") == {
        **dict.fromkeys(STATE_TOKEN_REFUSALS, 0.0),
        "TOKEN_UNKNOWN_KEY": 1.0,
    }


def test_a_refusal_nobody_received_counts_nothing():
    """A refusal ready only after the call's deadline is not sent (``CallInfo``)."""
    registry = CollectorRegistry()
    metrics = new_metrics(registry)
    api = build_api(ServerConfig(), KeyRing.parse(TEST_KEY), metrics)
    runner = CallRunner(metrics)
    game = a_game(api, runner)
    late: Callable[[Any, Any], Any] = within_deadline(api.legal_moves, iter((1.0, 0)).__next__)
    request = pb.LegalMovesRequest(state=game.state, seat=game.view.turn)
    assert run(runner, "LegalMoves", late, request).error.reason == "DEADLINE_EXCEEDED"
    assert counted_by_reason(registry, REFUSED) == dict.fromkeys(SEAT_TOKEN_REFUSALS, 0)


def after_rotation() -> tuple[bytes, int, bytes]:
    """The drill's game: started under OLD, played once by a pod on ``NEW,OLD`` whose
    answer (the next state, under NEW) the backend kept, and the seat token under OLD
    that the next seat still holds: (state, seat, seat token)."""
    runner = CallRunner(None)
    game = a_game(build_api(ServerConfig(), KeyRing.parse(OLD_KEY), None), runner)
    step_2 = build_api(ServerConfig(), KeyRing.parse(f"{TEST_KEY},{OLD_KEY}"), None)
    seat = game.view.turn
    token = game.seat_tokens[seat]
    asked = pb.LegalMovesRequest(state=game.state, seat=seat, seat_token=token)
    move = run(runner, "LegalMoves", step_2.legal_moves, asked).response.moves[0].move
    request = pb.PlayRequest(state=game.state, seat=seat, seat_token=token, move=move)
    played = run(runner, "Play", step_2.play, request).response
    next_seat = played.view.turn
    assert next_seat != seat
    return played.state, next_seat, game.seat_tokens[next_seat]


def test_a_server_with_workers_counts_seat_tokens_under_a_retired_key_over_both_transports():
    """Step 3 on a server with TEST_KEY (NEW) alone: the state token opens, the seat
    token is under OLD. Calls over gRPC and HTTP, on connections of their own so that
    both workers take some, add up in the one scrape."""
    state, seat, token = after_rotation()
    metrics_port, grpc_port = free_ports(2)  # two draws of free_port() may be equal
    args = ("--metrics-port", str(metrics_port), "--workers", "2", "--grpc-port", str(grpc_port))
    calls = 12
    with running(args) as server:
        server.wait_for_logs("metrics")
        before = metric_samples(server.metrics_url)
        for _ in range(calls):
            with KrypkasinoClient(server.target) as client, pytest.raises(grpc.RpcError) as error:
                client.legal_moves(state=state, seat=seat, seat_token=token)
            assert error.value.code() is grpc.StatusCode.PERMISSION_DENIED
            info = error_info(error.value)
            assert info is not None and info.reason == "SEAT_TOKEN_INVALID"
        body = json.dumps(
            {
                "state": base64.b64encode(state).decode(),
                "seat": seat,
                "seatToken": base64.b64encode(token).decode(),
            }
        ).encode()
        for _ in range(calls):
            status, _, _ = exchange(f"{server.http_url}/v1/krypkasino:legalMoves", body)
            assert status == 403
        after = metric_samples(server.metrics_url)
    assert by_reason(before, REFUSED) == dict.fromkeys(SEAT_TOKEN_REFUSALS, 0)
    assert by_reason(after, REFUSED) == {
        **by_reason(before, REFUSED),
        "TOKEN_UNKNOWN_KEY": 2 * calls,
    }
    state_refusals = "cardrules_state_tokens_refused_total"
    assert by_reason(after, state_refusals) == dict.fromkeys(STATE_TOKEN_REFUSALS, 0)
