"""The games of the conformance suite: scripted positions and seeded random matches.

``transcript(driver, scenario)`` plays one scenario through one driver and
records everything the driver answers: the set-up, and at every step the
public view, the mover's legal moves and view, the move's events and view,
refusals of deliberately illegal attempts (out of turn, a card not in hand,
a capture with one card more or less), score sheets, and a move after the end.
The random choices come from a seeded ``Random`` fed only with the driver's
own answers, so equal drivers give equal transcripts and any difference shows
as the first step where they part.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass, field
from typing import Any

from cardrules.cards.v1 import cards_pb2
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from google.protobuf import json_format

from engine.krypkasino import Config, Rules, State, play_unchecked
from engine.krypkasino.config import MAX_MATCH_DEALS
from engine.krypkasino.policies import Situation, random_policy
from tests.conformance.drivers import Driver, EngineDriver, Plain, Played, Refused
from tests.engine.krypkasino.helpers import first_distribution_deck
from tests.service.grpc_helpers import deck_proto, move_of

# Positions of the rule tests (design section 5), dealt to seat 1, who moves first.
CAPTURE_TABLE = "AH 7C 8S 10D"
CAPTURE_HAND = "3H 4S 5H 8D 9C JD"
SWEEP_TABLE = "2H 3C 4D 5S"
SWEEP_HAND = "6D 7C 8S 9H 10H KH"
OPPONENT_HAND = "6C 6H 6S 7D 7H 7S"
PROBE_EVERY = 4


@dataclass(frozen=True)
class Scenario:
    """A game: its ``NewGame`` request, scripted moves, then seeded random moves."""

    name: str
    request: pb.NewGameRequest
    script: tuple[str, ...] = ()
    """``"seat:move"`` in the transcript notation (``1:8D>AH+7C``), legal or not."""
    seed: int = 0
    max_moves: int | None = None
    """Random moves after the script; ``None`` plays to the end of the match."""
    expected_reasons: tuple[str, ...] = field(default=())
    """The reasons the script's refusals must have, in order (checked on the engine)."""
    resume_at_deal: int = 0
    """Unless 0, the match is played in process, by seeded random moves, up to the last
    distribution of this deal (K5.4) and handed to each driver from there (``Driver.resume``)."""

    @functools.cached_property
    def resumed_state(self) -> State:
        """The match at the last distribution of deal ``resume_at_deal``, the same for every
        driver."""
        state: State = EngineDriver().new_game(self.request).handle
        choose = random.Random(self.seed)
        while len(state.results) < self.resume_at_deal - 1 or not state.last_distribution:
            state, _ = play_unchecked(state, random_policy(Situation.of(state), choose))
        return state


def config(players: int, **settings: object) -> pb.GameConfig:
    return json_format.ParseDict({"players": players, **settings}, pb.GameConfig())


def stacked(hand: str, table: str, rules: dict[str, Any] | None = None) -> pb.NewGameRequest:
    """Seat 1 holds ``hand`` and moves first on ``table``; ``rules`` by their proto names."""
    engine_rules = Rules(**(rules or {}))
    deck = first_distribution_deck(
        Config(players=2, rules=engine_rules), {1: hand, 0: OPPONENT_HAND}, table
    )
    return pb.NewGameRequest(config=config(2, rules=rules or {}), seed=3, decks=[deck_proto(deck)])


SCENARIOS = (
    Scenario(
        "capture-position",
        stacked(CAPTURE_HAND, CAPTURE_TABLE),
        script=(
            "0:6C",
            "1:6H",
            "1:8D>8H",
            "1:8D>AH+8S",
            "1:8D>AH+7C",
            "1:8D",
            "1:8D>7C+8S+AH",
        ),
        seed=10,
        max_moves=30,
        expected_reasons=(
            "NOT_YOUR_TURN",
            "CARD_NOT_IN_HAND",
            "CAPTURE_NOT_ON_TABLE",
            "CAPTURE_NOT_VALID",
            "CAPTURE_NOT_MAXIMAL",
            "MUST_CAPTURE",
        ),
    ),
    Scenario(
        "forced-sweep",
        stacked(SWEEP_HAND, SWEEP_TABLE),
        script=("1:KH", "1:9H>4D+5S", "1:7C>2H+3C+4D+5S"),
        seed=11,
        max_moves=30,
        expected_reasons=("MUST_SWEEP", "MUST_SWEEP"),
    ),
    Scenario(
        "must-capture-variant",
        stacked(CAPTURE_HAND, CAPTURE_TABLE, {"must_capture_if_able": True}),
        script=("1:3H", "1:9C>AH+8S"),
        seed=12,
        max_moves=20,
        expected_reasons=("MUST_CAPTURE",),
    ),
    Scenario("two-players-whole-match", pb.NewGameRequest(config=config(2), seed=1), seed=1),
    Scenario(
        "three-players-nordic-draw-for-deal",
        pb.NewGameRequest(
            config=config(
                3,
                drawForDeal=True,
                targetScore=1,
                rules={"mustCaptureIfAble": True, "nordicScoring": True, "lastCapturePoint": True},
            ),
            seed=2,
        ),
        seed=2,
    ),
    Scenario(
        "four-players-pairs-single-deck",
        pb.NewGameRequest(
            config=config(4, teams="TEAM_MODE_PAIRS", targetScore=1, rules={"singleDeck": True}),
            seed=3,
        ),
        seed=3,
    ),
    Scenario(
        "six-players-trios-bordstabbe-spades",
        pb.NewGameRequest(
            config=config(
                6,
                teams="TEAM_MODE_TRIOS",
                targetScore=1,
                rules={"bordstabbe": True, "removal": "REMOVAL_SPADES"},
            ),
            seed=5,
        ),
        seed=5,
    ),
    Scenario(
        "two-players-five-six-courts-no-forced-sweep",
        pb.NewGameRequest(
            config=config(
                2,
                targetScore=1,
                rules={
                    "twoPlayerFiveSix": True,
                    "courtCardsRankOnly": True,
                    "noForcedSweep": True,
                    "removal": "REMOVAL_NONE",
                },
            ),
            seed=6,
        ),
        seed=6,
    ),
    # The longest match the service allows, with the rules that make its deals' scores
    # largest: its token, score sheets and views are the largest of any game (about 15 KB
    # sealed; docs/krypkasino-decisions.md, "Match length").
    Scenario(
        "six-players-last-of-240-deals",
        pb.NewGameRequest(
            config=config(
                6, matchDeals=MAX_MATCH_DEALS, rules={"bordstabbe": True, "lastCapturePoint": True}
            ),
            seed=7,
        ),
        seed=7,
        resume_at_deal=MAX_MATCH_DEALS,
    ),
)


def _move(value: Plain) -> pb.Move:
    return json_format.ParseDict(value, pb.Move())


def _card(text: str) -> Plain:
    return json_format.MessageToDict(move_of(text).card, preserving_proto_field_name=True)


def _perturbed(move: Plain, table: list[Plain], hand: list[Plain], choose: random.Random) -> Plain:
    """An attempt near a legal move: a card not in hand, or one capture more or fewer."""
    kind = choose.randrange(3)
    captures = list(move.get("captures", []))
    if kind == 0:
        missing = [c for c in [*table, _card("KS"), _card("2D")] if c not in hand]
        return {"card": choose.choice(missing), "captures": captures}
    if kind == 1 and captures:
        captures.pop(choose.randrange(len(captures)))
    else:
        captures.append(choose.choice(table) if table else _card("AS"))
    return {"card": move["card"], "captures": captures}


def transcript(driver: Driver, scenario: Scenario) -> list[tuple[str, Plain]]:
    """Everything ``driver`` answers while playing ``scenario``."""
    if scenario.resume_at_deal:
        handle = driver.resume(scenario.resumed_state)
        seats = scenario.request.config.players
        record: list[tuple[str, Plain]] = [("resumed", driver.view(handle, None))]
    else:
        started = driver.new_game(scenario.request)
        handle, seats = started.handle, started.seats
        record = [("new game", started.result)]
    for step in scenario.script:
        seat, move = step.split(":")
        outcome = driver.play(handle, int(seat), move_of(move))
        record.append((f"play {step}", outcome if isinstance(outcome, Refused) else outcome.result))
        if isinstance(outcome, Played):
            handle = outcome.handle
    choose = random.Random(scenario.seed)
    moves = 0
    while scenario.max_moves is None or moves < scenario.max_moves:
        public = driver.view(handle, None)
        record.append(("public view", public))
        turn = public.get("turn")
        if turn is None:
            break
        legal = driver.legal_moves(handle, turn)
        own = driver.view(handle, turn)
        record += [(f"legal moves {turn}", legal), (f"view {turn}", own)]
        chosen = choose.choice(legal)["move"]
        if moves % PROBE_EVERY == 0:
            other = (turn + 1) % seats
            attempt = _perturbed(chosen, public["table"], own["hand"], choose)
            record += [
                (f"legal moves {other}", driver.legal_moves(handle, other)),
                (f"out of turn {other}", _outcome(driver.play(handle, other, _move(chosen)))),
                (f"attempt {attempt}", _outcome(driver.play(handle, turn, _move(attempt)))),
            ]
        played = driver.play(handle, turn, _move(chosen))
        assert isinstance(played, Played), (driver.name, played)
        record.append((f"play {turn} {chosen}", played.result))
        handle = played.handle
        moves += 1
        if any("deal_ended" in event for event in played.result["events"]):
            record.append(("score", driver.score(handle)))
    record.append(("final score", driver.score(handle)))
    if driver.view(handle, None).get("game_over"):
        some_card = pb.Move(
            card=cards_pb2.Card(rank=cards_pb2.RANK_ACE, suit=cards_pb2.SUIT_SPADES)
        )
        record.append(("after the end", _outcome(driver.play(handle, 0, some_card))))
    return record


def _outcome(outcome: Played | Refused) -> Plain:
    return outcome if isinstance(outcome, Refused) else outcome.result


def refusals(record: list[tuple[str, Plain]]) -> list[Refused]:
    return [value for _, value in record if isinstance(value, Refused)]
