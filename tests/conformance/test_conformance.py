"""One suite, three ways in: engine, gRPC and HTTP give the same game (design section 7).

Each scenario of ``games.py`` is played through each driver; the transcripts
(set-up, views, legal moves, events, score sheets and every refusal with its
code, reason and rule) must be equal, step by step.
"""

from __future__ import annotations

import pytest

from engine.krypkasino.config import MAX_MATCH_DEALS
from tests.conformance.drivers import EngineDriver, GrpcDriver, HttpDriver, Refused, sealed
from tests.conformance.games import SCENARIOS, Scenario, refusals, transcript


def first_difference(left: list[tuple[str, object]], right: list[tuple[str, object]]) -> str:
    for index, (a, b) in enumerate(zip(left, right, strict=False)):
        if a != b:
            return f"step {index}: {a!r}\n  != {b!r}"
    return f"lengths {len(left)} != {len(right)}"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda scenario: scenario.name)
def test_engine_grpc_and_http_give_the_same_game(
    scenario: Scenario,
    engine_driver: EngineDriver,
    grpc_driver: GrpcDriver,
    http_driver: HttpDriver,
):
    reference = transcript(engine_driver, scenario)
    for driver in (grpc_driver, http_driver):
        record = transcript(driver, scenario)
        assert record == reference, f"{driver.name}: {first_difference(record, reference)}"


@pytest.mark.parametrize(
    "scenario", [s for s in SCENARIOS if s.script], ids=lambda scenario: scenario.name
)
def test_the_scripts_meet_the_refusals_they_are_written_for(scenario: Scenario, engine_driver):
    record = transcript(engine_driver, scenario)
    scripted = [value for label, value in record if label.startswith("play ") and ":" in label]
    reasons = [value.reason for value in scripted if isinstance(value, Refused)]
    assert reasons == list(scenario.expected_reasons)
    assert all(r.code == "FAILED_PRECONDITION" and r.metadata["rule"] for r in refusals(record))


def test_the_random_games_meet_every_kind_of_refusal_and_end(engine_driver):
    """The probes are not idle: together the games refuse in several ways, and matches end."""
    seen: set[str] = set()
    ended = 0
    for scenario in SCENARIOS:
        record = transcript(engine_driver, scenario)
        seen |= {r.reason for r in refusals(record)}
        ended += any(label == "after the end" for label, _ in record)
    assert {"NOT_YOUR_TURN", "CARD_NOT_IN_HAND", "GAME_OVER"} <= seen
    assert {"CAPTURE_NOT_ON_TABLE", "CAPTURE_NOT_VALID"} & seen
    assert ended >= 4


def test_the_servers_are_handed_the_longest_match_near_its_largest_token():
    """The resumed scenario is the last distribution of a 240-deal match: its token is near
    the 15,370 bytes of docs/krypkasino-decisions.md's finished match, and every server
    answer that carries the history (views, score sheets) carries 239 deals or more."""
    (scenario,) = [s for s in SCENARIOS if s.resume_at_deal]
    state = scenario.resumed_state
    assert len(state.results) == MAX_MATCH_DEALS - 1 and state.last_distribution
    assert len(sealed(state).state) > 15_000
