"""Values a library caller hands the engine are checked where they come in: the card
codes of a deck or a draw (K1.1: an int from 0 to 51) and ``score_deal``'s seats.
Before, a deck holding -1 for a KC was dealt (counted as list index -1, code 51) until
``check_state`` called it an engine bug; 52 in a deck or 60 in a draw failed with a
bare IndexError; a short list of piles dropped its seats from the score sheet."""

from __future__ import annotations

import re
from typing import Any

import pytest

from engine.cards import (
    Card,
    CardError,
    check_cards_of_one_deck,
    check_deck,
    full_deck,
    parse_cards,
)
from engine.krypkasino import Config, new_game, score_deal
from tests.engine.krypkasino.helpers import cards

KC = 51


def deck_with(bad: Any, instead: int = KC) -> list[Any]:
    """Two decks with one copy of ``instead`` replaced by ``bad``."""
    deck: list[Any] = list(full_deck(2))
    deck[deck.index(instead)] = bad
    return deck


@pytest.mark.parametrize(
    ("bad", "instead"),
    [(-1, KC), (-52, 0), (52, KC), (1000, KC), (3.0, 3), (True, 1), (None, KC), ("AS", 0)],
    ids=repr,
)
def test_a_deck_with_an_item_that_is_no_card_code_is_refused(bad: Any, instead: int) -> None:
    message = f"{bad!r} is no card code: a card is an int from 0 (AS) to 51 (KC)"
    with pytest.raises(CardError, match=f"^{re.escape(message)}$"):
        new_game(Config(2), seed=1, decks=[deck_with(bad, instead)])
    with pytest.raises(CardError, match="is no card code"):
        check_deck(deck_with(bad, instead), 2)


@pytest.mark.parametrize("bad", [60, 52, -1, 2.5, False], ids=repr)
def test_a_draw_with_an_item_that_is_no_card_code_is_refused(bad: Any) -> None:
    draw: list[Any] = [*parse_cards("AS 2H"), bad]
    with pytest.raises(CardError, match=f"^{re.escape(repr(bad))} is no card code"):
        new_game(Config(2, draw_for_deal=True), seed=1, draw=draw)
    with pytest.raises(CardError, match="is no card code"):
        check_cards_of_one_deck(draw, 2)


def test_card_codes_of_every_kind_of_sequence_pass() -> None:
    """Plain ints in a list, a tuple or bytes (as the plain-state check passes them)."""
    deck = full_deck(2)
    for given in (list(deck), deck, bytes(deck)):
        check_deck(given, 2)  # type: ignore[arg-type]
    check_cards_of_one_deck([], 2)
    assert new_game(Config(2), seed=1, decks=[list(deck)]).deal == 1


PILES = (cards("10D AS"), cards("2S 5H"), (), ())
NO_MARKERS: tuple[tuple[Card, ...], ...] = ((), (), (), ())


@pytest.mark.parametrize(
    ("piles", "markers", "recipient", "bordstabbe_seat", "message"),
    [
        (PILES[:3], NO_MARKERS, 0, None, "piles: one per seat, 4, not 3"),
        ((*PILES, ()), NO_MARKERS, 0, None, "piles: one per seat, 4, not 5"),
        (PILES, NO_MARKERS[:2], 0, None, "markers: one per seat, 4, not 2"),
        (PILES, NO_MARKERS, 4, None, "recipient: must be a seat from 0 to 3, not 4"),
        (PILES, NO_MARKERS, -1, None, "recipient: must be a seat from 0 to 3, not -1"),
        (PILES, NO_MARKERS, True, None, "recipient: must be a seat from 0 to 3, not True"),
        (PILES, NO_MARKERS, None, None, "recipient: must be a seat from 0 to 3, not None"),
        (PILES, NO_MARKERS, 0, 9, "bordstabbe_seat: must be a seat from 0 to 3, not 9"),
        (PILES, NO_MARKERS, 0, -4, "bordstabbe_seat: must be a seat from 0 to 3, not -4"),
    ],
)
def test_score_deal_refuses_what_does_not_fit_the_seats(
    piles: Any, markers: Any, recipient: Any, bordstabbe_seat: Any, message: str
) -> None:
    with pytest.raises(ValueError) as error:
        score_deal(Config(4), piles, markers, recipient, bordstabbe_seat)
    assert str(error.value) == message


def test_score_deal_scores_what_fits() -> None:
    """K12.1 with K16.10's seat: the checks pass every seat from 0 to n - 1."""
    scores = score_deal(Config(4), PILES, NO_MARKERS, 3, 3)
    assert [s.total for s in scores] == [5, 2, 0, -5]


@pytest.mark.parametrize("codes", [["AS", ""], ["", "KD"], ["AS", " "]])
def test_an_empty_code_in_a_list_is_refused(codes: list[str]) -> None:
    """``parse_cards`` reads a list of codes too (README.md's decks): an empty one is
    a malformed card, never a card fewer."""
    with pytest.raises(CardError, match=r"^malformed card '\s*'"):
        parse_cards(codes)
    assert parse_cards(["AS", "kd "]) == parse_cards("AS KD")
