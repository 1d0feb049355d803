"""The engine's legal move set against the naive reference (spec K7.1-K7.7, K14.1, K1.6).

The reference is first pinned to the spec's own acceptance examples (K18), so
that agreement with it means agreement with the spec, then compared with the
engine on random hands and tables of at most 9 cards, full of small cards and
twins. Tables of 10 to 18 cards, reached by legal play, are compared in
``test_reference_big_tables.py``.
"""

from __future__ import annotations

import re
from itertools import combinations, product
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.cards import Card, parse_cards
from engine.krypkasino import (
    IllegalMoveError,
    Move,
    Reason,
    Rules,
    play,
    sweep_ranks,
    table_moves,
)
from engine.krypkasino.moves import is_legal
from tests.engine.krypkasino import reference
from tests.engine.krypkasino.helpers import position as game_position
from tests.sizes import fuzz_examples

FLAG_NAMES = ("no_forced_sweep", "must_capture_if_able", "court_cards_rank_only")
FLAG_COMBOS = [
    dict(zip(FLAG_NAMES, bits, strict=True)) for bits in product((False, True), repeat=3)
]


def _ids(flags: dict[str, bool]) -> str:
    return "+".join(name for name, on in flags.items() if on) or "defaults"


def _moves(text: str) -> list[Move]:
    return [Move.parse(word) for word in text.split()]


# (hand, table, flags, the exact legal set as written in K18); order inside is free.
SPEC_EXAMPLES = [
    ("KA", "8D 6C", "8H 9C JH", "", "6C 8D>8H"),
    ("KB", "8D 6D", "AH 2H 6C 7D 8H 9C JH", "", "6D>6C 8D>AH+2H+6C+7D+8H"),
    ("KC", "AH", "2H 3C 4D 5H 8C 10C", "", "AH>4D+10C AH>2H+4D+8C AH>2H+3C+4D+5H"),
    ("KC2", "AH", "AC", "", "AH"),
    ("KD1", "AC 7H JD", "AH 4C 6D QH", "", "AC 7H>AH+6D JD>AH+4C+6D"),
    ("KD1b", "QD 2C", "AH AC 4C 6D QH", "", "QD>AH+AC+4C+6D+QH"),
    ("KD2", "AD 9H", "AH 8C 5D", "", "AD>AH+8C+5D"),
    ("KE", "KC 3H", "2H 6C 5D", "", "KC>2H+5D+6C"),
    ("KE2", "3H 9C", "2H 6C 5D", "", "3H 9C"),
    ("KE3", "8D KC", "2H 6C 5D 3H", "", "8D>2H+3H+5D+6C"),
    ("KF", "3C 5D 8C 9H QD AD", "3H 5C 9D", "", "3C>3H 5D>5C 8C>3H+5C 9H>9D QD>3H+9D AD>5C+9D"),
    ("KG", "JC", "JH 6C 4D 2H", "", "JC>JH"),
    ("KG2", "6H QC 4H", "6C 4D 2H", "", "6H>2H+4D+6C QC>2H+4D+6C"),
    ("KH", "3C 4D", "3H 5S", "", "3C>3H 4D"),
    ("KHa", "5S 9H", "5S", "", "5S>5S"),
    ("KHb", "5S 5D", "5S", "", "5S>5S 5D>5S"),
    ("KI1", "JD", "4C 7S JD", "", "JD>4C+7S+JD"),
    ("KK", "7D 8S JD KC", "2H 6C QS", "", "7D 8S>2H+6C JD KC"),
    ("KK2", "QH QS", "QS", "", "QH>QS QS>QS"),
    ("KK3", "QS 7D", "QS", "", "QS>QS"),
    ("KX1", "QH", "AH JC QD 2C 10H", "", "QH>AH+JC+QD+2C+10H"),
    ("KX2", "4C", "7S", "", "4C"),
    ("KX3", "JH", "7S 4C", "", "JH>7S+4C"),
    ("KX4", "9H", "4H 5C 6D", "", "9H>4H+5C"),
    ("KX5", "2H", "AH AC", "", "2H>AH+AC"),
    ("KX6", "AD", "AH KC", "", "AD>AH+KC"),
    ("KX6r", "AD", "AH KC", "court_cards_rank_only", "AD"),
    ("KX7", "4D", "AH AC 2H 2C 3H 3C", "", "4D>AH+AC+2H+2C+3H+3C"),
    (
        "KX7n",
        "4D",
        "AH AC 2H 2C 3H 3C",
        "no_forced_sweep",
        "4D>AH+AC+2H+2C+3H+3C 4D>AH+AC+2H 4D>AH+AC+2C",
    ),
    ("KX8", "4D 9H", "AH AC 2H 2C 3H 3C", "", "4D>AH+AC+2H+2C+3H+3C"),
    (
        "KX8n",
        "4D 9H",
        "AH AC 2H 2C 3H 3C",
        "no_forced_sweep",
        "4D>AH+AC+2H+2C+3H+3C 4D>AH+AC+2H 4D>AH+AC+2C 9H>AH+AC+2H+2C+3H 9H>AH+AC+2H+2C+3C "
        "9H>AH+2H+3H+3C 9H>AH+2C+3H+3C 9H>AC+2H+3H+3C 9H>AC+2C+3H+3C",
    ),
    ("KX9", "JD", "5H 6C", "", "JD>5H+6C"),
    ("KX9r", "JD", "5H 6C", "court_cards_rank_only", "JD"),
    ("KX10", "KD", "JH 2C 9D", "", "KD>JH+2C"),
    ("KX10r", "KD", "JH 2C 9D", "court_cards_rank_only", "KD"),
    ("KX12", "9C", "4H 5D 2C", "", "9C>4H+5D"),
    (
        "KX17",
        "10C",
        "2H 2H 2C 2C 2D 8H 8C 4D 9C",
        "",
        "10C>2H+2H+2C+2C+2D 10C>2H+2H+2C+2C+2D+8H+8C+4D",
    ),
    ("KX18", "10D 10D 7S", "4H 4H 6C", "", "10D>4H+6C 7S"),
    ("KX19", "8D 6C", "8H 9C JH", "must_capture_if_able", "8D>8H"),
    ("KX20", "QD 2C", "AH AC 4C 6D QH", "no_forced_sweep", "QD>AH+AC+4C+6D+QH 2C>AH+AC"),
    ("KX21", "JC", "JH 5C 6D", "", "JC>JH+5C+6D"),
    ("KX21r", "JC", "JH 5C 6D", "court_cards_rank_only", "JC>JH"),
    ("KX32", "10D", "10D", "", "10D>10D"),
    ("KX32b", "JD 4C", "JD", "", "JD>JD"),
    ("KX32c", "AH 5C", "AH", "", "AH 5C"),
    ("empty", "7H 7H AS", "", "must_capture_if_able", "AS 7H"),
]


def _rules(flags: str) -> Rules:
    on: dict[str, Any] = {name: True for name in flags.split()}
    return Rules(**on)


@pytest.mark.parametrize(
    ("hand", "table", "flags", "expected"),
    [pytest.param(*case[1:], id=case[0]) for case in SPEC_EXAMPLES],
)
def test_reference_matches_spec_examples(hand, table, flags, expected):
    """K18: the reference reproduces every legal set the spec spells out."""
    got = reference.legal_moves(parse_cards(hand), parse_cards(table), _rules(flags))
    assert sorted(got) == sorted(_moves(expected))


# K14.1 / KX31 and the sweep ranks named in KD1, KD2, KE, KF, KG, KX2, KI2.
SPEC_SWEEP_RANKS = [
    ("6C 4D 2H", "", "6 Q"),
    ("AH AC 2H 2C 3H 3C", "", "3 4 6 Q"),
    ("", "", ""),
    ("5H 6C", "court_cards_rank_only", ""),
    ("AH 4C 6D QH AC", "", "Q"),
    ("AH 8C 5D", "", "A"),
    ("2H 6C 5D 3H", "", "8"),
    ("5C 9D", "", "A"),
    ("3H 9D", "", "Q"),
    ("9D", "", "9"),
    ("3H 5C", "", "8"),
    ("5C", "", "5"),
    ("3H", "", "3"),
    ("7S 4C", "", "J"),
    ("6H 10C 4D", "", "10"),
]
_RANKS = ("A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K")


@pytest.mark.parametrize(("table", "flags", "expected"), SPEC_SWEEP_RANKS)
def test_reference_sweep_ranks_match_spec_examples(table, flags, expected):
    """K14.1: the reference names exactly the spec's sweep ranks."""
    ranks = reference.sweep_ranks(parse_cards(table), _rules(flags))
    assert [_RANKS[r] for r in ranks] == expected.split()


# Small ranks make sums, and so captures, likely; the rest keeps courts and
# big cards in play. Suits lean towards two so that twins turn up often.
_rank = st.one_of(st.integers(0, 5), st.integers(0, 5), st.integers(0, 12))
_suit = st.one_of(st.integers(0, 1), st.integers(0, 3))
_card = st.builds(lambda rank, suit: Card(rank * 4 + suit), _rank, _suit)


@st.composite
def positions(draw: st.DrawFn) -> tuple[list[Card], list[Card]]:
    """A hand of 1-6 cards and a table of 0-9, no code more than twice in all (K1.2)."""
    hand = draw(st.lists(_card, min_size=1, max_size=6))
    table = draw(st.lists(_card, max_size=9))
    kept_hand: list[Card] = []
    for card in hand:
        if kept_hand.count(card) < 2:
            kept_hand.append(card)
    kept_table: list[Card] = []
    for card in table:
        if kept_hand.count(card) + kept_table.count(card) < 2:
            kept_table.append(card)
    return kept_hand, kept_table


@pytest.mark.parametrize("flags", FLAG_COMBOS, ids=_ids)
@settings(max_examples=fuzz_examples(300), deadline=None)
@given(position=positions())
def test_table_moves_equal_reference(flags, position):
    """K7.7: the engine's legal set is the reference's, in canonical order, once each."""
    hand, table = position
    rules = Rules(**flags)
    got = table_moves(hand, table, rules)
    assert got == reference.legal_moves(hand, table, rules)
    assert got == sorted(set(got)), "K1.6/K7.5: canonical order without duplicates"
    assert got, "K7.8: never empty while the mover holds a card"


@pytest.mark.parametrize("rank_only", [False, True], ids=["defaults", "court_cards_rank_only"])
@settings(max_examples=fuzz_examples(200), deadline=None)
@given(position=positions())
def test_sweep_ranks_equal_reference(rank_only, position):
    """K14.1: the engine's sweep ranks are the reference's."""
    hand, table = position
    rules = Rules(court_cards_rank_only=rank_only)
    # Hand and table together make a second, larger table of up to 11 cards.
    for cards in (table, (hand + table)[:11]):
        assert sweep_ranks(cards, rules) == reference.sweep_ranks(cards, rules)


def _candidates(hand: list[Card], table: list[Card]) -> list[Move]:
    """Every card of the hand (and one that is not in it) with every sub-multiset of the
    table, plus captures naming a card the table lacks or holds too few copies of."""
    played = [*sorted(set(hand)), Card(next(c for c in range(52) if c not in hand))]
    takes = {taken for size in range(len(table) + 1) for taken in combinations(sorted(table), size)}
    absent = Card(next(c for c in range(52) if c not in table))
    takes.add((absent,))
    if table:
        takes.add(tuple(sorted((*table, absent))))
        takes.add((table[0],) * (table.count(table[0]) + 1))
    return [Move(card, taken) for card in played for taken in sorted(takes)]


def _accepted(hand: list[Card], table: list[Card], rules: Rules) -> set[Move]:
    """The candidates ``is_legal`` accepts, checking that capture order never matters (K7.5)."""
    accepted = set()
    for move in _candidates(hand, table):
        verdict = is_legal(hand, table, rules, move)
        assert is_legal(hand, table, rules, Move(move.card, move.captures[::-1])) == verdict
        if verdict:
            accepted.add(move)
    return accepted


@pytest.mark.parametrize(
    ("hand", "table", "flags", "expected"),
    [pytest.param(*case[1:], id=case[0]) for case in SPEC_EXAMPLES],
)
def test_is_legal_accepts_exactly_the_spec_examples(hand, table, flags, expected):
    """K18 / K7.8: play's validation accepts the spec's legal set and nothing else."""
    got = _accepted(parse_cards(hand), parse_cards(table), _rules(flags))
    assert got == set(_moves(expected))


@pytest.mark.parametrize("flags", FLAG_COMBOS, ids=_ids)
@settings(max_examples=fuzz_examples(100), deadline=None)
@given(position=positions())
def test_is_legal_decides_membership_of_the_legal_set(flags, position):
    """K7.8: ``is_legal`` (play's validation) accepts exactly the moves of ``table_moves``."""
    hand, table = position
    rules = Rules(**flags)
    assert _accepted(hand, table, rules) == set(table_moves(hand, table, rules))


_GROUP_LEFT = re.compile(r", but (\S+) left on the table also makes? (\d+) and must be taken too")


@pytest.mark.parametrize("flags", FLAG_COMBOS, ids=_ids)
@settings(max_examples=fuzz_examples(100), deadline=None)
@given(position=positions())
def test_a_capture_that_is_not_maximal_names_a_group_it_leaves(flags, position):
    """K7.3: every capture that splits into groups (by the reference) and is not legal is
    refused for a group it leaves (or, K7.6, for a sweep); the group named is one of the
    reference's groups (K7.1, K7.2, with the flags' values) among the cards left, of
    fewest cards."""
    hand, table = position
    rules = Rules(**flags)
    state = game_position(table, {1: hand}, rules=rules)
    legal = set(table_moves(hand, table, rules))
    for card in sorted(set(hand)):
        options = reference._Options(card, table, rules)
        for vector in options.subsets:
            move = Move(card, options.cards(vector))
            if move in legal or not options.decomposable(vector):
                continue
            with pytest.raises(IllegalMoveError) as refused:
                play(state, 1, move)
            error = refused.value
            if error.reason is Reason.MUST_SWEEP:
                assert not rules.no_forced_sweep
                continue
            assert (error.reason, error.rule) == (Reason.CAPTURE_NOT_MAXIMAL, "K7.3"), error
            named = _GROUP_LEFT.search(error.message)
            assert named is not None, error.message
            assert int(named.group(2)) == reference.hand_value(card)
            group = tuple(parse_cards(named.group(1).replace("+", " ")))
            left = list(table)
            for taken in move.captures:
                left.remove(taken)
            remaining = reference._Options(card, left, rules)
            groups = [remaining.cards(g) for g in remaining.groups]
            assert group in groups, (error.message, groups)
            assert len(group) == min(map(len, groups))
            assert error.group_left == group  # what the message names, for callers


@pytest.mark.parametrize("flags", FLAG_COMBOS, ids=_ids)
@settings(max_examples=fuzz_examples(100), deadline=None)
@given(position=positions())
def test_a_capture_of_an_ineligible_card_is_refused_for_the_variant(flags, position):
    """K7.1, K16.7: a capture refused as CAPTURE_NOT_VALID cites K16.7, naming a captured
    card the played card may not take, exactly when some captured card is not eligible
    by the reference's E(c); otherwise K7.2, with no captured card named."""
    hand, table = position
    rules = Rules(**flags)
    state = game_position(table, {1: hand}, rules=rules)
    for move in _candidates(hand, table):
        try:
            play(state, 1, move)
        except IllegalMoveError as error:
            if error.reason is not Reason.CAPTURE_NOT_VALID:
                continue
            eligible = reference.eligible(move.card, move.captures, rules)
            if len(eligible) < len(move.captures):
                assert error.rule == "K16.7", error
                assert error.captured in move.captures
                assert error.captured not in eligible
            else:
                assert (error.rule, error.captured) == ("K7.2", None), error
