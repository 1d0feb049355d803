"""Perft-style golden counts (design section 7), replayed from ``perft.json``.

Every count was computed by both the engine and the naive reference of K7
(see ``make_perft.py``), so a change in either the legal move set (K7.7) or
the course of play (K8, K10, K11) shows up here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.cards import parse_cards
from engine.krypkasino import Rules, table_moves
from tests.engine.krypkasino import reference
from tests.engine.krypkasino.make_perft import engine_moves, make_config, perft, reach

DATA: dict[str, Any] = json.loads(Path(__file__).with_name("perft.json").read_text())
POSITIONS: list[dict[str, Any]] = DATA["positions"]
STATES: list[dict[str, Any]] = DATA["states"]


def test_golden_data_is_complete():
    """At least 25 single positions and 5 whole-state positions, all distinct."""
    assert len(POSITIONS) >= 25 and len(STATES) >= 5
    ids = [p["id"] for p in POSITIONS + STATES]
    assert len(ids) == len(set(ids))
    assert all("cross-checked" in p["note"] for p in POSITIONS + STATES)


@pytest.mark.parametrize("position", POSITIONS, ids=[p["id"] for p in POSITIONS])
def test_legal_move_count(position):
    """K7.7: the number of distinct legal moves of a hand against a table."""
    rules = Rules(**position["rules"])
    moves = table_moves(parse_cards(position["hand"]), parse_cards(position["table"]), rules)
    assert moves == sorted(set(moves))
    assert len(moves) == position["legal"]


#: Tables the naive reference enumerates in well under a second (beyond 13 cards it takes
#: seconds per position; those were cross-checked when ``perft.json`` was made).
REFERENCE_TABLE_LIMIT = 13


@pytest.mark.parametrize(
    "position",
    [p for p in POSITIONS if len(parse_cards(p["table"])) <= REFERENCE_TABLE_LIMIT],
    ids=lambda p: p["id"],
)
def test_legal_move_count_of_the_reference(position):
    """K7: the golden count is the naive reference's too, not only the engine's."""
    hand, table = parse_cards(position["hand"]), parse_cards(position["table"])
    assert len(reference.legal_moves(hand, table, Rules(**position["rules"]))) == position["legal"]


@pytest.mark.parametrize("position", STATES, ids=[p["id"] for p in STATES])
def test_perft(position):
    """Move sequences of depth 1, 2, 3 from a seeded position, through dealing and deal ends."""
    state = reach(make_config(position["config"]), position["seed"], position["moves"])
    counts = [perft(state, depth, engine_moves) for depth in range(1, len(position["perft"]) + 1)]
    assert counts == position["perft"]
