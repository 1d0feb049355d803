"""README.md's tables of the single-game ``--json`` transcript ("The simulator") name
every key and every event type the code writes, with their fields in order; and the
seed deals the same cards whatever the policy and the teams, as it says."""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path
from typing import Any

import pytest

from engine.krypkasino import Config, Event, Removal, Rules, Teams, TieRule
from engine.krypkasino.moves import SweepKind
from engine.krypkasino.scoring import DealResult
from service.simulate import SimulationRequest, play_game, transcript
from service.transcript import event_json

README = (Path(__file__).parents[2] / "README.md").read_text()
SECTION = README[README.index("## The simulator") : README.index("## The service")]


def _table(head: str) -> dict[str, list[str]]:
    """The rows of the README table headed ``head``: its first cell's name -> the names
    in its last cell, in order."""
    start = SECTION.index(head)
    end = SECTION.find("\n\n", start)
    rows: dict[str, list[str]] = {}
    for line in SECTION[start:end].splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = re.findall(r"`(\w+)`", cells[-1])
    return rows


KEYS = _table("| Key | What | Fields |")
EVENTS = _table("| `type` | When, and what its fields say | Fields |")

# A value of each type an event's field is declared with, to build one of every event.
_SAMPLE: dict[str, Any] = {
    "int": 0,
    "int | None": None,
    "bool": False,
    "Card": 0,
    "SweepKind": SweepKind.NONE,
    "DealResult": DealResult(1, 0, 0, (), ()),
}


def _every_event() -> list[dict[str, Any]]:
    """``event_json`` of one event of each class the engine's ``Event`` union holds."""
    documents = []
    for kind in typing.get_args(Event):
        values = [
            () if str(f.type).startswith("tuple[") else _SAMPLE[str(f.type)]
            for f in dataclasses.fields(kind)
        ]
        documents.append(event_json(kind(*values)))
    return documents


def test_the_event_table_names_every_event_type_with_its_fields_in_order():
    written = {doc["type"]: [key for key in doc if key != "type"] for doc in _every_event()}
    assert len(written) == len(typing.get_args(Event)) == 9
    assert written == EVENTS


@pytest.mark.parametrize(
    "config",
    [
        Config(players=4, teams=Teams.PAIRS),
        Config(
            players=3,
            draw_for_deal=True,
            target_score=20,
            tie_rule=TieRule.TIEBREAK_DEAL,
            rules=Rules(bordstabbe=True, removal=Removal.SPADES),
        ),
    ],
)
def test_the_key_table_names_every_key_with_its_fields_in_order(config):
    document = transcript(play_game(SimulationRequest(config, seed=2)))
    assert list(KEYS) == list(document)
    assert KEYS["config"] == list(document["config"])
    assert KEYS["result"] == list(document["result"])
    turns, deals = document["turns"], document["deals"]
    assert all(list(turn) == KEYS["turns"] for turn in turns)
    assert all(list(deal) == KEYS["deals"] for deal in deals)
    # The score sheet's items, named in the row's description.
    keys = SECTION[SECTION.index("| Key | What | Fields |") :]
    items = keys[keys.index("| `deals` |") :].split("\n", 1)[0]
    sheet = list(deals[0]["scores"][0])
    assert re.search(r"\(" + ", ".join(f"`{key}`" for key in sheet) + r"\)", items)
    kinds = {event["type"] for turn in turns for event in turn["events"]}
    kinds |= {event["type"] for event in document["setup_events"]}
    assert kinds <= set(EVENTS)


def _dealt(document: dict[str, Any]) -> dict[tuple[int, int, int], list[str]]:
    """The cards each distribution dealt: ``(deal, distribution, -1)`` its table, and
    ``(deal, distribution, seat)`` the seat's hand at its first turn in it, before the
    seat played any of them."""
    dealt: dict[tuple[int, int, int], list[str]] = {}
    events = [*document["setup_events"]]
    for turn in document["turns"]:
        dealt.setdefault((turn["deal"], turn["distribution"], turn["seat"]), turn["hand"])
        events += turn["events"]
    for event in events:
        if event["type"] == "distribution_dealt":
            dealt[(event["deal"], event["distribution"], -1)] = event["table"]
    return dealt


@pytest.mark.parametrize(
    ("players", "teams"), [(4, Teams.PAIRS), (6, Teams.PAIRS), (6, Teams.TRIOS)]
)
def test_the_seed_deals_the_same_cards_whatever_the_policy_and_the_teams(players, teams):
    """README: variants can be compared on common random numbers, seed by seed."""
    for seed in range(3):
        deals = [
            _dealt(transcript(play_game(SimulationRequest(config, seed, policy=policy))))
            for config in (Config(players=players), Config(players=players, teams=teams))
            for policy in ("random", "greedy")
        ]
        first, *others = deals
        assert len(first) > players * 4
        for other in others:
            assert other == first
