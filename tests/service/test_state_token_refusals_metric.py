"""``cardrules_state_tokens_refused_total``: state tokens refused, by reason (design section
6). An SRE review found that a replica with the wrong state key made every call that
crossed replicas fail ``TOKEN_UNKNOWN_KEY`` (6,602 games in 8 minutes) while no metric
told that refusal from any other ``InvalidArgument``, so nothing alerted."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any, get_args

import grpc
import pytest
from cardrules.client import KrypkasinoClient
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from google.protobuf.message import Message
from prometheus_client import CollectorRegistry

from service.calls import CallRunner, Handler, within_deadline
from service.config import ServerConfig
from service.krypkasino_api import GAME, SERVICE_NAME, KrypkasinoApi
from service.metrics import STATE_TOKEN_REFUSALS, ServiceMetrics
from service.server import SCHEMA_VERSION, build_api, new_metrics
from service.tokens import PLAIN_FLAG, KeyRing, StateSealer, TokenReason
from tests.service.http_helpers import exchange
from tests.service.metrics_helpers import by_reason, counted_by_reason, metric_samples
from tests.service.server_process import TEST_KEY, free_port, running

REFUSED = "cardrules_state_tokens_refused_total"
OTHER_KEY = KeyRing.generate_key_text()


def sealer(keys: str, version: int = SCHEMA_VERSION) -> StateSealer:
    return StateSealer(KeyRing.parse(keys), game=GAME, schema_version=version)


def run(runner: CallRunner, method: str, handler: Handler, request: Message) -> Any:
    """The outcome of one call of ``handler`` as the transports run it."""
    return runner.run(SERVICE_NAME, method, "grpc", "t", handler, request)


def a_game(api: KrypkasinoApi, runner: CallRunner) -> pb.NewGameResponse:
    request = pb.NewGameRequest(config=pb.GameConfig(players=2), seed=1)
    outcome = run(runner, "NewGame", api.new_game, request)
    assert outcome.error is None
    assert isinstance(outcome.response, pb.NewGameResponse)
    return outcome.response


def test_each_reason_is_a_series_at_zero_from_the_start():
    """Pre-created, as the other domain counters are, so that ``rate()`` sees a pod's
    first refusal; a reason the sealer may give is never missing."""
    registry = CollectorRegistry()
    ServiceMetrics(registry, {})
    assert counted_by_reason(registry, REFUSED) == {reason: 0 for reason in STATE_TOKEN_REFUSALS}
    assert set(STATE_TOKEN_REFUSALS) == {*get_args(TokenReason), "STATE_INVALID"}


def test_a_reason_outside_the_bounded_set_is_refused():
    metrics = ServiceMetrics(CollectorRegistry(), {})
    with pytest.raises(ValueError, match="STATE_MISSING"):
        metrics.state_token_refused(GAME, "STATE_MISSING")


def tokens_refused_for_each_reason(payload: bytes) -> dict[str, bytes]:
    """A token the API under TEST_KEY (sealing) refuses with each reason, from ``payload``,
    a real game's state."""
    ours = sealer(TEST_KEY)
    sealed = ours.seal(payload)
    unknown_field = b"\xc0\x3e\x01"  # field 1000, varint 1: only a newer release writes it
    return {
        "TOKEN_MALFORMED": b"\x01short",
        "TOKEN_FROM_NEWER_RELEASE": sealer(TEST_KEY, SCHEMA_VERSION + 1).seal(payload),
        "TOKEN_UNKNOWN_KEY": sealer(OTHER_KEY).seal(payload),
        "TOKEN_INVALID": sealed[:-1] + bytes([sealed[-1] ^ 1]),
        "TOKEN_PLAIN_DISABLED": bytes([PLAIN_FLAG | SCHEMA_VERSION]) + payload,
        "STATE_INVALID": ours.seal(b"\xff\xff\xff"),
        # A game state this release cannot read whole: refused UNAVAILABLE as a newer
        # release's, so counted under that reason.
        "newer content": ours.seal(payload + unknown_field),
    }


def test_every_refusal_of_a_state_token_counts_under_its_reason():
    registry = CollectorRegistry()
    metrics = new_metrics(registry)
    api = build_api(ServerConfig(), KeyRing.parse(TEST_KEY), metrics)
    runner = CallRunner(metrics)
    game = a_game(api, runner)
    payload = sealer(TEST_KEY).open(game.state)
    expected = dict.fromkeys(STATE_TOKEN_REFUSALS, 0.0)
    for sent, token in tokens_refused_for_each_reason(payload).items():
        request = pb.ScoreRequest(state=token)
        error = run(runner, "Score", api.score, request).error
        assert error is not None
        expected[error.reason] += 1
        assert error.reason == sent or sent == "newer content", (sent, error.reason)
    assert expected["TOKEN_FROM_NEWER_RELEASE"] == 2
    # Not a refusal of a token: none was sent.
    assert run(runner, "Score", api.score, pb.ScoreRequest()).error
    assert counted_by_reason(registry, REFUSED) == expected


def test_calls_that_open_their_token_and_refusals_nobody_received_count_nothing():
    """A call whose token opens counts no refusal, even when it is refused for another
    reason; a refusal ready only after the call's deadline is not sent (``CallInfo``)."""
    registry = CollectorRegistry()
    metrics = new_metrics(registry)
    api = build_api(ServerConfig(), KeyRing.parse(TEST_KEY), metrics)
    runner = CallRunner(metrics)
    game = a_game(api, runner)
    seat = game.view.turn

    def reason(handler: Handler, request: Message) -> str | None:
        error = run(runner, "LegalMoves", handler, request).error
        return None if error is None else error.reason

    ours = pb.LegalMovesRequest(state=game.state, seat=seat, seat_token=game.seat_tokens[seat])
    assert reason(api.legal_moves, ours) is None
    wrong_seat = pb.LegalMovesRequest(state=game.state, seat=seat, seat_token=b"x" * 20)
    assert reason(api.legal_moves, wrong_seat) == "SEAT_TOKEN_INVALID"
    late: Callable[[Any, Any], Any] = within_deadline(api.legal_moves, iter((1.0, 0)).__next__)
    unknown = pb.LegalMovesRequest(state=sealer(OTHER_KEY).seal(b""), seat=seat)
    assert reason(late, unknown) == "DEADLINE_EXCEEDED"
    assert counted_by_reason(registry, REFUSED) == dict.fromkeys(STATE_TOKEN_REFUSALS, 0)
    assert reason(api.legal_moves, unknown) == "TOKEN_UNKNOWN_KEY"
    assert counted_by_reason(registry, REFUSED)["TOKEN_UNKNOWN_KEY"] == 1


def test_a_server_with_workers_counts_the_refusals_of_both_transports():
    """The SRE review's case: a replica whose key list lacks the key that sealed the
    game. Calls over gRPC and HTTP, on connections of their own so that both workers
    take some, add up in the one scrape."""
    other = build_api(ServerConfig(), KeyRing.parse(OTHER_KEY), None)
    runner = CallRunner(None)
    game = a_game(other, runner)
    seat = game.view.turn
    args = ("--metrics-port", str(free_port()), "--workers", "2", "--grpc-port", str(free_port()))
    calls = 12
    with running(args) as server:
        server.wait_for_logs("metrics")
        before = by_reason(metric_samples(server.metrics_url), REFUSED)
        for _ in range(calls):
            with KrypkasinoClient(server.target) as client, pytest.raises(grpc.RpcError) as error:
                client.legal_moves(state=game.state, seat=seat, seat_token=game.seat_tokens[seat])
            assert error.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        body = b'{"state": "%s"}' % base64.b64encode(game.state)
        for _ in range(calls):
            status, _, _ = exchange(f"{server.http_url}/v1/krypkasino:score", body)
            assert status == 400
        after = by_reason(metric_samples(server.metrics_url), REFUSED)
    assert before == dict.fromkeys(STATE_TOKEN_REFUSALS, 0)
    assert after == {**before, "TOKEN_UNKNOWN_KEY": 2 * calls}
