"""schemathesis against the live HTTP gateway: no 5xx, every response as documented.

The schema is the one the server serves at ``/openapi.json``. Every operation
gets a bounded number of generated requests in three modes, and every
response must be a documented status with a documented content type and a
body valid under the document's schema:

- ``positive`` and ``negative``: schemathesis' own valid and invalid bodies
  (nearly all refused: random tokens do not open);
- ``real-games``: valid bodies carrying real state and seat tokens (and, for
  ``Play``, often a legal move) from games played at set-up, so successful
  responses with views, events and score sheets are checked too.

(schemathesis' pytest plugin does not run under this pytest, so the
operations are parametrized here and each drives schemathesis' hypothesis
strategy itself.)
"""

from __future__ import annotations

import json
import random
import urllib.request
from dataclasses import dataclass
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from service.grpc_timeout import GRPC_TIMEOUT_HEADER, timeout_seconds
from service.http_routes import OPENAPI_PATH
from service.openapi import COMMITTED
from tests.service.server_process import ServerProcess
from tests.sizes import fuzz_examples

# The longest Grpc-Timeout whose 504 DEADLINE_EXCEEDED is the caller's doing, not the
# server's: a call takes milliseconds, and this leaves room for a loaded test machine.
SHORT_DEADLINE_SECONDS = 1.0


@schemathesis.check
def no_server_error_but_a_short_deadline(ctx: Any, response: Any, case: Any) -> bool | None:
    """``not_a_server_error``, but for a 504 to a call whose ``Grpc-Timeout`` (which
    schemathesis fills in from the document) gave it less than a second: its caller's
    deadline passed, as it asked."""
    timeout = (case.headers or {}).get(GRPC_TIMEOUT_HEADER)
    # A malformed value is refused 400: reading one here after a 504 fails the test.
    if (
        response.status_code == 504
        and timeout is not None
        and timeout_seconds(timeout) < SHORT_DEADLINE_SECONDS
    ):
        return None
    result: bool | None = not_a_server_error(ctx, response, case)
    return result


CHECKS = [
    no_server_error_but_a_short_deadline,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
EXAMPLES_PER_OPERATION = fuzz_examples(30)
# schemathesis leaves out the operation that serves the schema it loaded (/openapi.json).
OPERATIONS = [
    f"{method.upper()} {path}"
    for path, item in json.loads(COMMITTED.read_text())["paths"].items()
    for method in item
    if path != OPENAPI_PATH
]
MODES = ["positive", "negative", "real-games"]


@dataclass(frozen=True)
class Position:
    """A real game position: its tokens, and one legal move of the seat to move."""

    state: str
    seat_tokens: list[str]
    turn: int
    move: dict[str, Any]


def post(base: str, rpc: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{base}/v1/krypkasino:{rpc}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        result: dict[str, Any] = json.load(response)
        return result


def play_some(base: str, config: dict[str, Any], seed: int, moves: int) -> list[Position]:
    """Positions along a seeded random game played over HTTP."""
    choose = random.Random(seed)
    game = post(base, "newGame", {"config": config, "seed": str(seed)})
    state, tokens = game["state"], game["seatTokens"]
    positions = []
    for _ in range(moves):
        turn = post(base, "getView", {"state": state})["view"]["turn"]
        legal = post(base, "legalMoves", {"state": state, "seat": turn, "seatToken": tokens[turn]})
        move = choose.choice(legal["moves"])["move"]
        positions.append(Position(state, tokens, turn, move))
        played = {"state": state, "seat": turn, "seatToken": tokens[turn], "move": move}
        state = post(base, "play", played)["state"]
    return positions


@pytest.fixture(scope="module")
def served_schema(server: ServerProcess) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(f"{server.http_url}/openapi.json")


@pytest.fixture(scope="module")
def positions(server: ServerProcess) -> list[Position]:
    return [
        *play_some(server.http_url, {"players": 2}, 1, 8),
        *play_some(server.http_url, {"players": 4, "teams": "TEAM_MODE_PAIRS"}, 2, 8),
        *play_some(server.http_url, {"players": 6, "rules": {"removal": "REMOVAL_SPADES"}}, 3, 8),
    ]


def with_real_game(case: Any, position: Position, seat: int, legal: bool) -> None:
    """Put real tokens (and maybe a legal move) into a generated valid body."""
    body = case.body
    if not isinstance(body, dict):
        return
    if case.operation.path.endswith(":newGame"):
        config = body.get("config")
        if isinstance(config, dict):
            players = config.get("players", 0)
            config["players"] = 2 + abs(players if isinstance(players, int) else 0) % 5
        body.pop("decks", None)  # a random explicit deck is never a real deck
        body.pop("draw", None)
        return
    body["state"] = position.state
    if "seat" in body or "seatToken" in body or case.operation.path.endswith(":play"):
        seat = position.turn if legal else seat % len(position.seat_tokens)
        body["seat"] = seat
        body["seatToken"] = position.seat_tokens[seat]
        if legal and case.operation.path.endswith(":play"):
            body["move"] = position.move


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("label", OPERATIONS)
def test_every_response_is_documented_and_no_server_error(
    served_schema, positions, server, label, mode
):
    operations = [result.ok() for result in served_schema.get_all_operations()]
    (operation,) = [op for op in operations if op.label == label]
    generation = schemathesis.GenerationMode.NEGATIVE if mode == "negative" else None
    strategy = operation.as_strategy(generation or schemathesis.GenerationMode.POSITIVE)
    statuses: list[int] = []

    @given(
        case=strategy,
        position=st.sampled_from(positions),
        seat=st.integers(0, 5),
        legal=st.booleans(),
    )
    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    def check(case: Any, position: Position, seat: int, legal: bool) -> None:
        if mode == "real-games":
            with_real_game(case, position, seat, legal)
            # Answers, not deadlines, are what this mode is for.
            (case.headers or {}).pop(GRPC_TIMEOUT_HEADER, None)
        response = case.call_and_validate(base_url=server.http_url, checks=CHECKS)
        statuses.append(response.status_code)

    check()
    assert statuses, "no request was made"
    if mode == "real-games":
        assert 200 in statuses, f"{label}: no real game position was accepted: {statuses}"
