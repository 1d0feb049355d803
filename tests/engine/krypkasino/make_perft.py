"""Regenerate ``perft.json``: golden legal-move counts (design section 7).

Run ``.venv/bin/python -m tests.engine.krypkasino.make_perft``. Every count is
computed twice, with the engine and with the naive reference of K7, and only
written when both agree; the script stops on any disagreement.

Single positions: a hand, a table and rule flags; ``legal`` = |Legal| (K7.7).
Whole-state positions: a configuration and seed, ``moves`` moves chosen by
``random.Random(seed).choice`` among the legal moves of whoever is to move,
then ``perft[d-1]`` = number of move sequences of depth ``d`` from there,
through ``play_unchecked`` (the mover's hand, the stock and every later
distribution are known to the count).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from engine.cards import Card, parse_cards
from engine.krypkasino import (
    Config,
    Move,
    Removal,
    Rules,
    State,
    Teams,
    legal_moves,
    new_game,
    play_unchecked,
    table_moves,
)
from tests.engine.krypkasino import reference

PATH = Path(__file__).with_name("perft.json")

MoveGen = Callable[[State], list[Move]]

# (id, note, rule flags, hand, table)
SINGLE: list[tuple[str, str, dict[str, Any], str, str]] = [
    (
        "twins-a5-12",
        "12 small cards with twins, sum 30: 10H and 6S must sweep",
        {},
        "7D 9C 10H 6S",
        "AS AS AH AH 2S 2H 3D 3D 4C 5H 5H 2C",
    ),
    (
        "twins-a5-12-nfs",
        "the same, no_forced_sweep",
        {"no_forced_sweep": True},
        "7D 9C 10H 6S",
        "AS AS AH AH 2S 2H 3D 3D 4C 5H 5H 2C",
    ),
    (
        "twins-a5-14",
        "14 small cards with twins",
        {},
        "8H 10C JD 4S 6C",
        "AS AH AD AC 2S 2S 2H 3C 3C 4D 4D 5S 5H 5C",
    ),
    (
        "twins-a5-16-nfs",
        "16 small cards, no_forced_sweep",
        {"no_forced_sweep": True},
        "9D 10S 6H KC AD",
        "AS AH AD AC 2S 2H 2D 2C 3S 3H 4D 4C 5S 5H 4D 3S",
    ),
    (
        "twins-a5-18",
        "18 small cards with twins, no sweep possible (sum 51)",
        {},
        "KC AD 9C 10D 7H",
        "AS AS AH AH 2S 2S 2H 2H 3D 3D 3C 4C 4C 5H 5H 4S 5D 3S",
    ),
    (
        "twins-a5-18-must",
        "the same 18 cards, must_capture_if_able: every card has a group, "
        "so the flag changes nothing",
        {"must_capture_if_able": True},
        "KC AD 9C 10D 7H",
        "AS AS AH AH 2S 2S 2H 2H 3D 3D 3C 4C 4C 5H 5H 4S 5D 3S",
    ),
    (
        "twins-a5-18-sweep",
        "18 small cards with twins, sum 54: 9C and 6D must sweep",
        {},
        "9C 6D 10D KC 7H",
        "4H AS AH AH 2S 2S 2H 2H 3D 3D 3C 4C 4C 5H 5H 4S 5D 3S",
    ),
    (
        "twins-a5-18-sweep-nfs",
        "the same, no_forced_sweep",
        {"no_forced_sweep": True},
        "9C 6D 10D KC 7H",
        "4H AS AH AH 2S 2S 2H 2H 3D 3D 3C 4C 4C 5H 5H 4S 5D 3S",
    ),
    (
        "twins-a5-18-sweep-nfs-must",
        "the same, no_forced_sweep and must_capture_if_able",
        {"no_forced_sweep": True, "must_capture_if_able": True},
        "9C 6D 10D KC 7H",
        "4H AS AH AH 2S 2S 2H 2H 3D 3D 3C 4C 4C 5H 5H 4S 5D 3S",
    ),
    (
        "forced-sweep-three-ways",
        "sum 30: 10H, 6D and 5C all sweep (K7.6)",
        {},
        "10H 6D 5C 9S 2C",
        "AS AH 2S 2H 3D 3C 4C 4H 5S 5D",
    ),
    (
        "forced-sweep-three-ways-nfs",
        "the same, no_forced_sweep",
        {"no_forced_sweep": True},
        "10H 6D 5C 9S 2C",
        "AS AH 2S 2H 3D 3C 4C 4H 5S 5D",
    ),
    (
        "forced-sweep-three-ways-must",
        "the same, must_capture_if_able (the sweep still rules)",
        {"must_capture_if_able": True},
        "10H 6D 5C 9S 2C",
        "AS AH 2S 2H 3D 3C 4C 4H 5S 5D",
    ),
    (
        "fives-and-tens",
        "sum 60 of 5s and 10s: both 10s sweep",
        {},
        "10S 10D 9C",
        "5S 5S 5H 5H 5D 5D 5C 5C 10H 10C",
    ),
    (
        "fives-and-tens-nfs",
        "the same, no_forced_sweep",
        {"no_forced_sweep": True},
        "10S 10D 9C",
        "5S 5S 5H 5H 5D 5D 5C 5C 10H 10C",
    ),
    (
        "fours-pairs",
        "eight 4s: 8s take pairs in every suit combination",
        {"no_forced_sweep": True},
        "8S 8H 9C",
        "4S 4S 4H 4H 4D 4D 4C 4C AH AD",
    ),
    (
        "courts-mixed",
        "courts summed by value (J 11, Q 12, K 13)",
        {},
        "JC QH KD AH 9S",
        "JH JH QS KD 5C 6D AS 4C 2H 10D",
    ),
    (
        "courts-mixed-rank-only",
        "the same, court_cards_rank_only",
        {"court_cards_rank_only": True},
        "JC QH KD AH 9S",
        "JH JH QS KD 5C 6D AS 4C 2H 10D",
    ),
    (
        "courts-many",
        "a table full of courts (as with removal=none)",
        {},
        "KD QS JC 3H",
        "JS JH QD QC KS KH AS 2H",
    ),
    (
        "courts-many-rank-only",
        "the same, court_cards_rank_only",
        {"court_cards_rank_only": True},
        "KD QS JC 3H",
        "JS JH QD QC KS KH AS 2H",
    ),
    (
        "courts-rank-only-must",
        "court_cards_rank_only with must_capture_if_able",
        {"court_cards_rank_only": True, "must_capture_if_able": True},
        "JD 4H 8C",
        "QS 7H 3C AD",
    ),
    (
        "courts-all-flags",
        "all three K7 flags",
        {"court_cards_rank_only": True, "must_capture_if_able": True, "no_forced_sweep": True},
        "JD KC 7C AS",
        "JS JH AH 10D 6C 5D KC 2S",
    ),
    (
        "must-some-crawl",
        "must_capture_if_able removes the crawls",
        {"must_capture_if_able": True},
        "KS QH 4C 6H 8D 2C",
        "AS 3S 9H 9D",
    ),
    (
        "must-some-crawl-default",
        "the same without the flag: 6H, 8D and 2C crawl",
        {},
        "KS QH 4C 6H 8D 2C",
        "AS 3S 9H 9D",
    ),
    (
        "aces-from-hand",
        "aces are 14 from hand against small twins",
        {},
        "AD AC 3C",
        "2S 2H 3S 3H 4S 4H 5S 5H 6S 6H 7S 8D",
    ),
    (
        "queen-options",
        "a queen against a mixed table",
        {},
        "QH KS 7D",
        "JS AH AS 6C 6D 4H 2C 10D QC",
    ),
    (
        "twos-many",
        "2s taking pairs of aces of four suits, twice each",
        {"no_forced_sweep": True},
        "2S 2H 3C",
        "AS AS AH AH AD AD AC AC 5H",
    ),
    (
        "tens-remainder",
        "KX17 style: maximality judged on the remainder",
        {},
        "10C 10S 8D 4H",
        "2H 2H 2C 2C 2D 2D 8H 8C 4D 4S 9C 6S 6H",
    ),
    ("double-sweep-choice", "lone 7C: its twin and the other 7 both sweep", {}, "7C 7D 9H", "7C"),
    (
        "lone-aces",
        "aces from hand (14) cannot take table aces (1); 2C must sweep both",
        {},
        "AD AS 2C 9H",
        "AH AC",
    ),
    (
        "empty-table",
        "empty table: every distinct card crawls once",
        {"must_capture_if_able": True},
        "3H 3H 7S 7S QD 2C",
        "",
    ),
    (
        "twins-a5-15-must-nfs",
        "15 small cards, must_capture_if_able and no_forced_sweep",
        {"must_capture_if_able": True, "no_forced_sweep": True},
        "6C 7S 9H KD 2D 10C",
        "AS AH AH 2S 2H 2C 3S 3H 3C 4S 4D 5H 5C 5D 3D",
    ),
]

# Small enough to count on paper from K7; their notes say so.
BY_HAND = {
    "fives-and-tens",
    "fives-and-tens-nfs",
    "courts-many",
    "courts-many-rank-only",
    "must-some-crawl",
    "must-some-crawl-default",
    "double-sweep-choice",
    "lone-aces",
    "empty-table",
}

# (id, note, config, seed, moves before the count, depth)
WHOLE: list[tuple[str, str, dict[str, Any], int, int, int]] = [
    ("n4-start", "4 players, defaults, the first position", {"players": 4}, 11, 0, 3),
    (
        "n2-nfs",
        "2 players, no_forced_sweep",
        {"players": 2, "rules": {"no_forced_sweep": True}},
        5,
        13,
        3,
    ),
    (
        "n3-rank-only",
        "3 players, court_cards_rank_only",
        {"players": 3, "rules": {"court_cards_rank_only": True}},
        7,
        31,
        3,
    ),
    (
        "n6-pairs-must",
        "6 players in pairs, must_capture_if_able",
        {"players": 6, "teams": "pairs", "rules": {"must_capture_if_able": True}},
        3,
        40,
        3,
    ),
    (
        "n5-four-four-boundary",
        "5 players, four_four, a new distribution inside the count",
        {"players": 5, "rules": {"four_four": True}},
        2,
        38,
        3,
    ),
    (
        "n2-single-deck-deal-end",
        "2 players, single_deck, the deal ends inside the count",
        {"players": 2, "rules": {"single_deck": True}},
        9,
        46,
        3,
    ),
    (
        "n4-removal-none",
        "4 players, removal=none, courts stay on the table",
        {"players": 4, "rules": {"removal": "none"}},
        21,
        57,
        3,
    ),
]


def make_config(spec: dict[str, Any]) -> Config:
    """A Config from its JSON form: players, teams, rules."""
    rules = dict(spec.get("rules", {}))
    if "removal" in rules:
        rules["removal"] = Removal(rules["removal"])
    return Config(
        spec["players"], Teams(spec.get("teams", "individual")), Rules(**rules)
    ).validate()


def reach(config: Config, seed: int, moves: int) -> State:
    """The position after ``moves`` seeded random legal moves from the seed's deal."""
    rng = random.Random(seed)
    state = new_game(config, seed=seed)
    for _ in range(moves):
        state, _ = play_unchecked(state, rng.choice(legal_moves(state, state.turn)))
    return state


def perft(state: State, depth: int, generate: MoveGen) -> int:
    """Move sequences of length ``depth`` from ``state``, whoever is to move."""
    if depth == 0:
        return 1
    moves = generate(state)
    if depth == 1:
        return len(moves)
    return sum(perft(play_unchecked(state, m)[0], depth - 1, generate) for m in moves)


def engine_moves(state: State) -> list[Move]:
    return legal_moves(state, state.turn)


def reference_moves(state: State) -> list[Move]:
    if state.over:
        return []
    return reference.legal_moves(state.hands[state.turn], state.table, state.config.rules)


def _check_copies(hand: Sequence[Card], table: Sequence[Card]) -> None:
    extra = [c for c, n in Counter([*hand, *table]).items() if n > 2]
    if extra:
        raise SystemExit(f"more than two copies of {extra}")


def build() -> dict[str, Any]:
    singles = []
    for ident, note, flags, hand_text, table_text in SINGLE:
        hand, table = parse_cards(hand_text), parse_cards(table_text)
        _check_copies(hand, table)
        rules = Rules(**flags)
        got = len(table_moves(hand, table, rules))
        expected = len(reference.legal_moves(hand, table, rules))
        if got != expected:
            raise SystemExit(f"{ident}: engine {got} != reference {expected}")
        singles.append(
            {
                "id": ident,
                "note": f"{note}; cross-checked: engine and reference"
                + (", and counted by hand" if ident in BY_HAND else ""),
                "rules": flags,
                "hand": hand_text,
                "table": table_text,
                "legal": got,
            }
        )
    wholes = []
    for ident, note, spec, seed, moves, depth in WHOLE:
        state = reach(make_config(spec), seed, moves)
        counts = [perft(state, d, engine_moves) for d in range(1, depth + 1)]
        checked = [perft(state, d, reference_moves) for d in range(1, depth + 1)]
        if counts != checked:
            raise SystemExit(f"{ident}: engine {counts} != reference {checked}")
        wholes.append(
            {
                "id": ident,
                "note": f"{note}; cross-checked: engine and reference move generation",
                "config": spec,
                "seed": seed,
                "moves": moves,
                "perft": counts,
            }
        )
    return {"positions": singles, "states": wholes}


def main() -> None:
    data = build()
    PATH.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {len(data['positions'])} positions and {len(data['states'])} states to {PATH}")


if __name__ == "__main__":
    main()
