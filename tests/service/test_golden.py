"""Golden playthroughs (design section 7): committed ``cardrules simulate --json`` transcripts.

Each transcript must (1) come out byte-identical when its command is run again
and (2) replay move by move through the validated engine (``play``), with the
same mover, hand, table and legal moves at every turn and the same scores.
Regenerate deliberately with ``tests/golden/krypkasino/regenerate.py``.
"""

import contextlib
import io
import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from engine.cards import card_str, parse_card, parse_cards
from engine.krypkasino import (
    Config,
    Move,
    Removal,
    Rules,
    Teams,
    TieRule,
    legal_moves,
    open_game,
    play,
)
from engine.krypkasino.invariants import check_opening, check_state, check_transition
from service.cli import main

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "krypkasino"
INDEX = json.loads((GOLDEN / "index.json").read_text())["transcripts"]
IDS = [entry["file"].removesuffix(".json") for entry in INDEX]


def load(entry: dict[str, Any]) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((GOLDEN / entry["file"]).read_text())
    return document


def config_of(doc: dict[str, Any]) -> Config:
    """The engine config named by a transcript's ``config`` block."""
    c = doc["config"]
    flags = {name: c["rules"][name] for name in Rules.flag_names()}
    return Config(
        players=c["players"],
        teams=Teams(c["teams"]),
        rules=Rules(removal=Removal(c["rules"]["removal"]), **flags),
        first_dealer=c["first_dealer"],
        draw_for_deal=c["draw_for_deal"],
        match_deals=c["match_deals"],
        target_score=c["target_score"],
        tie_rule=TieRule(c["tie_rule"]),
    )


def move_of(data: dict[str, Any]) -> Move:
    return Move.of(parse_card(data["card"]), parse_cards(data["captures"]))


def codes(cards) -> list[str]:
    return [card_str(c) for c in cards]


@pytest.mark.parametrize("entry", INDEX, ids=IDS)
def test_command_line_is_recorded_exactly(entry):
    assert entry["argv"][:2] == ["simulate", "krypkasino"] and "--json" in entry["argv"]
    assert entry["command"] == shlex.join(["cardrules", *entry["argv"]])


REGENERATE = ".venv/bin/python tests/golden/krypkasino/regenerate.py"


def mismatch(file: str, committed: str, fresh: str) -> str:
    """What a stale transcript's failure says: the first line that differs, both ways, and
    the command that rewrites every transcript (after a deliberate change only)."""
    # keepends: a transcript that differs only in its final newline shows where.
    old, new = committed.splitlines(keepends=True), fresh.splitlines(keepends=True)
    number = next(
        (i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b),
        min(len(old), len(new)),
    )
    shown = [
        f"  committed: {old[number]!r}" if number < len(old) else "  committed: (ended)",
        f"  fresh run: {new[number]!r}" if number < len(new) else "  fresh run: (ended)",
    ]
    return "\n".join(
        [
            f"{file} differs from a fresh run at line {number + 1} of {len(old)}:",
            *shown,
            f"if the change is deliberate, run `{REGENERATE}` from the repository root and "
            "review the diff (a new flag should only add itself, false, to each config)",
        ]
    )


def test_a_mismatch_in_the_final_newline_alone_shows_the_last_line_both_ways():
    message = mismatch("t.json", "a\nb", "a\nb\n")
    assert "t.json differs from a fresh run at line 2 of 2" in message
    assert "committed: 'b'" in message and "fresh run: 'b\\n'" in message


def test_a_mismatch_names_the_first_differing_line_and_the_command():
    message = mismatch("t.json", "a\nb\nc\n", "a\nB\nc\n")
    assert "t.json differs from a fresh run at line 2 of 3" in message
    assert "committed: 'b\\n'" in message and "fresh run: 'B\\n'" in message
    assert REGENERATE in message
    shorter = mismatch("t.json", "a\nb\n", "a\n")
    assert "line 2 of 2" in shorter and "fresh run: (ended)" in shorter


def test_the_regenerate_command_names_the_script():
    script = REGENERATE.split()[-1]
    assert (GOLDEN.parents[2] / script).resolve() == GOLDEN / "regenerate.py"


@pytest.mark.parametrize("entry", INDEX, ids=IDS)
def test_regenerates_byte_identical(entry):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(entry["argv"]) == 0
    committed = (GOLDEN / entry["file"]).read_text()
    assert out.getvalue() == committed, mismatch(entry["file"], committed, out.getvalue())


@pytest.mark.parametrize("entry", INDEX, ids=IDS)
def test_replays_through_the_validated_engine(entry):
    doc = load(entry)
    config = config_of(doc)
    decks = [parse_cards(deck) for deck in doc["config"]["decks"]]
    state, setup = open_game(config, seed=doc["config"]["seed"], decks=decks)
    assert [type(e).__name__ for e in setup] == [_type_name(e) for e in doc["setup_events"]]
    check_state(state)
    check_opening(state, setup)
    for number, turn in enumerate(doc["turns"]):
        where = f"turn {number}"
        assert not state.over, where
        assert (state.deal, state.distribution, state.turn) == (
            turn["deal"],
            turn["distribution"],
            turn["seat"],
        ), where
        assert codes(state.hands[state.turn]) == turn["hand"], where
        assert codes(state.table) == turn["table"], where
        legal = legal_moves(state, state.turn)
        assert [move_of(m) for m in turn["legal_moves"]] == legal, where
        before, move = state, move_of(turn["move"])
        state, events = play(before, turn["seat"], move)
        assert [type(e).__name__ for e in events] == [_type_name(e) for e in turn["events"]]
        check_state(state)  # K15, as docs/krypkasino-decisions.md says the replays do
        check_transition(before, move, state, events)
    assert state.over
    assert len(state.results) == len(doc["deals"])
    for result, deal in zip(state.results, doc["deals"], strict=True):
        assert (result.number, result.dealer, result.recipient) == (
            deal["deal"],
            deal["dealer"],
            deal["recipient"],
        )
        for score, data in zip(result.scores, deal["scores"], strict=True):
            assert {k: getattr(score, k) for k in data} == data
        assert list(result.team_totals) == deal["team_totals"]
    assert list(state.winners) == doc["result"]["winners"]


def _type_name(event: dict[str, Any]) -> str:
    """``captured`` -> ``Captured``, ``cards_set_aside`` -> ``CardsSetAside``."""
    return "".join(part.capitalize() for part in event["type"].split("_"))


def test_goldens_cover_counts_teams_variants_policies_and_a_deck():
    docs = [load(entry) for entry in INDEX]
    configs = [doc["config"] for doc in docs]
    assert {c["players"] for c in configs} == {2, 3, 4, 5, 6}
    assert {c["teams"] for c in configs} == {"individual", "pairs", "trios"}
    assert {c["policy"] for c in configs} == {"random", "greedy"}
    flags = {name for c in configs for name, on in c["rules"].items() if on is True}
    assert len(flags) >= 2
    # KX30's deck for 4 players, dealer 2 (spec K18).
    kx30 = [c for c in configs if c["decks"]]
    assert any(c["players"] == 4 and c["first_dealer"] == 2 for c in kx30)
    events = {e["type"] for doc in docs for e in doc["setup_events"]}
    for doc in docs:
        events.update(e.get("sweep", e["type"]) for t in doc["turns"] for e in t["events"])
    assert {"sweep", "double_sweep", "bordstabbe", "tiebreak_deal", "match_ended"} <= events
