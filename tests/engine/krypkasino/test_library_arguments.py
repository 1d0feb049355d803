"""Arguments a library caller passes ``view`` and ``play`` are checked, with an error
that says what was expected: before, ``view(state, -1)`` showed seat n - 1's hand as
seat -1's and ``view(state, True)`` seat 1's (list indices), ``view(state, 9)`` raised a
bare IndexError; ``play`` with a plain tuple failed with an AttributeError and
``Move(None)`` with a TypeError from inside the refusal's message."""

from __future__ import annotations

import functools
import operator
import re
from typing import Any, SupportsIndex, cast

import pytest

from engine.cards import Card, whole_number
from engine.krypkasino import (
    Config,
    IllegalMoveError,
    Move,
    Reason,
    legal_moves,
    new_game,
    open_game,
    view,
)
from engine.krypkasino import play as play_move
from engine.krypkasino.events import DealerDrawn
from engine.krypkasino.policies import Situation


@pytest.mark.parametrize("seat", [-1, -4, 4, 9, True, False, 1.0, "0"], ids=repr)
def test_view_refuses_a_seat_that_is_none_of_the_state_s(seat: Any) -> None:
    state = new_game(Config(4), seed=1)
    message = f"seat must be None or a seat from 0 to 3, not {seat!r}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        view(state, seat)


def test_view_shows_each_seat_its_own_hand() -> None:
    state = new_game(Config(4), seed=1)
    for seat in range(4):
        assert view(state, seat).hand == state.hands[seat]
    assert view(state).hand == () and view(state, None).seat is None


NOT_A_MOVE = re.escape(
    "play takes a Move of a card code and a tuple of card codes "
    "(Move(card, captures), Move.parse('8D>8H')), not "
)


@pytest.mark.parametrize(
    "move",
    [
        "plain-tuple",
        "plain-tuple-captures",
        "text",
        "none",
        "none-card",
        "text-card",
        "bool-card",
        "none-captured",
        "unsortable-captures",
        "captures-no-sequence",
    ],
)
def test_play_refuses_what_is_no_move_with_a_type_error_naming_move(move: str) -> None:
    state = new_game(Config(2), seed=1)
    seat = state.turn
    card = state.hands[seat][0]
    unheld = next(b for b in (False, True) if int(b) not in state.hands[seat])
    given: Any = {
        "plain-tuple": (card, ()),
        "plain-tuple-captures": (card, (state.table[0],)),
        "text": str(Move(card)),
        "none": None,
        "none-card": Move(None),  # type: ignore[arg-type]
        "text-card": Move("8D"),  # type: ignore[arg-type]
        "bool-card": Move(unheld),  # type: ignore[arg-type]
        "none-captured": Move(card, (None,)),  # type: ignore[arg-type]
        "unsortable-captures": Move(card, (state.table[0], None)),  # type: ignore[arg-type]
        "captures-no-sequence": Move(card, 5),  # type: ignore[arg-type]
    }[move]
    with pytest.raises(TypeError, match=f"^{NOT_A_MOVE}{re.escape(repr(given))}$"):
        play_move(state, seat, given)


@pytest.mark.parametrize("code", [-1, 52])
def test_an_int_that_is_no_card_code_is_still_refused_as_not_in_hand(code: int) -> None:
    """K8.1: the check on a refused move's types leaves numbers to the rules."""
    state = new_game(Config(2), seed=1)
    with pytest.raises(IllegalMoveError) as error:
        play_move(state, state.turn, Move(Card(code)))
    assert error.value.reason is Reason.CARD_NOT_IN_HAND


def test_a_move_of_more_captures_or_a_list_still_plays() -> None:
    """The slow path of ``_canonical`` (captures to sort) still makes a Move of a Move."""
    state = new_game(Config(2), seed=1)
    seat = state.turn
    for move in legal_moves(state, seat):
        reordered = Move(move.card, list(reversed(move.captures)))  # type: ignore[arg-type]
        after, _ = play_move(state, seat, reordered)
        assert after == play_move(state, seat, move)[0]


@functools.total_ordering
class Integer:
    """An integer type other than int, as numpy's ``int64`` is: ``operator.index`` takes
    it, it compares with ints, and it is no int subclass."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value

    def __eq__(self, other: object) -> bool:
        return self.value == operator.index(cast(SupportsIndex, other))

    def __lt__(self, other: object) -> bool:
        return self.value < operator.index(cast(SupportsIndex, other))

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"Integer({self.value})"


def test_integers_of_other_types_are_taken_as_ints() -> None:
    """A notebook that shuffles with numpy passes numpy's integers: they were taken
    before these checks came (a card of one was refused as "no card code"), and still
    are; the state holds ints."""
    assert [whole_number(n) for n in (Integer(4), 4, True, 4.0, "4", None)] == [4, 4] + [None] * 4
    deck = [Integer(code % 52) for code in range(104)]
    state = new_game(Config(players=2), seed=1, decks=[deck])  # type: ignore[list-item]
    assert state == new_game(Config(players=2), seed=1, decks=[[Card(c % 52) for c in range(104)]])
    assert {type(card) for hand in state.hands for card in hand} == {int}
    seat = state.turn
    assert view(state, Integer(seat)).hand == state.hands[seat]  # type: ignore[arg-type]
    move = legal_moves(state, seat)[0]
    given = Move(Integer(move.card), tuple(map(Integer, move.captures)))  # type: ignore[arg-type]
    after, events = play_move(state, seat, given)
    assert (after, events) == play_move(state, seat, move)
    drawn, dealt = open_game(
        Config(players=2, draw_for_deal=True),
        seed=1,
        draw=[Integer(1), Integer(40)],  # type: ignore[list-item]
    )
    assert {type(card) for _, card in drawn.dealer_draw} == {int}
    assert dealt[0] == DealerDrawn(draws=drawn.dealer_draw, dealer=drawn.dealer_draw[0][0])
    assert {type(card) for _, card in dealt[0].draws} == {int}


def test_a_bool_card_held_as_its_int_is_refused() -> None:
    """``Move(True)`` equals ``Move(1)``: it was played as the card 1, the table then
    holding ``True``."""
    state = next(
        game
        for seed in range(100)
        if 1 in (game := new_game(Config(2), seed=seed)).hands[game.turn]
    )
    with pytest.raises(TypeError, match=f"^{NOT_A_MOVE}"):
        play_move(state, state.turn, Move(True))  # type: ignore[arg-type]


def test_a_policy_s_situation_of_a_finished_match_says_the_match_is_over() -> None:
    """``Situation.of`` a finished match, where nobody has a move, is refused as such: a
    policy handed an empty list of moves failed with an IndexError (``random_policy``)
    or min() of an empty sequence (``greedy_policy``), which a bot author could not read
    (a mutation review found the check untested)."""
    state = new_game(Config(players=2, match_deals=2), seed=1)
    while not state.over:
        state, _ = play_move(state, state.turn, legal_moves(state, state.turn)[0])
    with pytest.raises(ValueError, match=r"^no move to choose: the match is over$"):
        Situation.of(state)
