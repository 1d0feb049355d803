"""The K15 checker itself: each invariant it asserts is reported when a state or a step breaks it.

Every case starts from a real, valid step (which the checker passes) and
corrupts one thing, so a check that stopped looking would fail here.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.krypkasino import Config, Move, Rules, State, open_game, play
from engine.krypkasino.config import Removal
from engine.krypkasino.events import Captured, DealEnded, DistributionDealt, Event
from engine.krypkasino.invariants import (
    InvariantError,
    check_deal_result,
    check_opening,
    check_state,
    check_transition,
)
from engine.krypkasino.scoring import DealResult
from tests.engine.krypkasino.helpers import cards, dealer_last_card, only, position

Step = tuple[State, Move, State, list[Event]]


def step(state: State, text: str) -> Step:
    """A real move of the seat on turn, already passed by the checker."""
    move = Move.parse(text)
    after, events = play(state, state.turn, move)
    check_transition(state, move, after, events)
    return state, move, after, events


def with_markers(state: State, seat: int, markers: str) -> State:
    return replace(
        state,
        markers=tuple(cards(markers) if s == seat else m for s, m in enumerate(state.markers)),
    )


def last_sweep_of_deal() -> Step:
    """KX13: the dealer sweeps with the deal's last card; the next deal has begun after it."""
    config = Config(players=4, first_dealer=2)
    return step(dealer_last_card(config, "9C", "4H 5D", last_capturer=0, rest_to=0), "9C>4H+5D")


def with_seat_sweeps(events: list[Event], seat: int, sweeps_made: int) -> list[Event]:
    end = only(events, DealEnded)
    scores = list(end.result.scores)
    scores[seat] = replace(scores[seat], sweeps_made=sweeps_made)
    result = replace(end.result, scores=tuple(scores))
    return [replace(end, result=result) if e is end else e for e in events]


def test_a_sweep_without_its_marker_is_reported() -> None:
    before, move, after, events = step(position("4H 5D", {1: "9C"}), "9C>4H+5D")
    assert after.markers[1] == cards("9C")
    with pytest.raises(InvariantError, match=r"^K15\.5: 0 markers for a sweep"):
        check_transition(before, move, with_markers(after, 1, ""), events)


def test_a_capture_that_is_no_sweep_must_add_no_marker() -> None:
    before, move, after, events = step(position("4H 5D 7S", {1: "9C"}), "9C>4H+5D")
    with pytest.raises(InvariantError, match=r"^K15\.5: 1 markers for a none"):
        check_transition(before, move, with_markers(after, 1, "9C"), events)


def test_both_markers_of_a_double_sweep_are_the_capturing_card() -> None:
    before, move, after, events = step(position("10D", {1: "10D"}), "10D>10D")
    assert after.markers[1] == cards("10D 10D")
    with pytest.raises(InvariantError, match=r"^K15\.5: a marker is not the capturing card"):
        check_transition(before, move, with_markers(after, 1, "10D 10H"), events)


def test_the_marker_of_a_sweep_that_ends_the_deal_is_checked_in_its_score() -> None:
    before, move, after, events = last_sweep_of_deal()
    assert after.deal == 2 and after.markers == ((),) * 4
    with pytest.raises(InvariantError, match=r"^K15\.5: 0 markers for a sweep"):
        check_transition(before, move, after, with_seat_sweeps(events, 2, 0))


def test_a_deal_may_end_only_when_every_card_is_played() -> None:
    before, move, after, events = last_sweep_of_deal()
    unfinished = replace(before, stock=cards("2C"))
    with pytest.raises(InvariantError, match=r"^K15\.8: the deal ended with 1 cards"):
        check_transition(unfinished, move, after, events)


def test_k15_8_a_collection_that_drops_a_card_is_reported() -> None:
    """K11.2 / K15.8: the set-aside pile goes to R; losing a card of no points (KH) there
    keeps every score, so only conservation over the deal's final piles (K15.1) sees it."""
    config = Config(players=4, first_dealer=2)
    before = dealer_last_card(
        config, "9C", "4H 5D 2C", set_aside="KH QD", last_capturer=0, rest_to=0
    )
    before, move, after, events = step(before, "9C>4H+5D")
    end = only(events, DealEnded)
    assert sorted(end.collected) == sorted(cards("2C KH QD"))
    dropped = replace(end, collected=cards("2C QD"))
    with pytest.raises(InvariantError, match=r"^K15\.1: the piles at the deal's end"):
        check_transition(before, move, after, [dropped if e is end else e for e in events])


def test_k11_1_a_deal_collected_by_another_seat_is_reported() -> None:
    """K11.1: the dealer who captures with the deal's last card is R, not the earlier
    last capturer."""
    before, move, after, events = last_sweep_of_deal()
    end = only(events, DealEnded)
    assert end.recipient == 2 and before.last_capturer == 0
    wrong = replace(end, recipient=0)
    with pytest.raises(InvariantError, match=r"^K11\.1: seat 0 is not R"):
        check_transition(before, move, after, [wrong if e is end else e for e in events])


def later_distribution(rules: Rules) -> Step:
    """The dealer's last card before the deal's last distribution (16 cards left in the stock)."""
    config = Config(players=4, first_dealer=0, rules=rules)
    stock = cards("2H 2D 2C 3H 3D 3C 4S 4D 4C 5S 5H 5C 6S 6H 6D 6C")
    state = dealer_last_card(config, "9C", "4H 8D", last_capturer=1, rest_to=1, stock=stock)
    return step(state, "9C")


def test_a_distribution_that_deals_the_wrong_number_of_cards_is_reported() -> None:
    before, move, after, events = later_distribution(Rules())
    assert after.stock == () and only(events, DistributionDealt).last
    with pytest.raises(InvariantError, match=r"^K15\.2: stock 1 != 0"):
        check_transition(before, move, replace(after, stock=cards("7H")), events)


@pytest.mark.parametrize(
    ("removal", "card", "message"),
    [(Removal.COURTS, "QH", "a court stayed"), (Removal.SPADES, "7S", "a spade stayed")],
)
def test_a_card_that_removal_should_have_set_aside_is_reported(
    removal: Removal, card: str, message: str
) -> None:
    before, move, after, events = later_distribution(Rules(removal=removal))
    corrupted = replace(after, table=(*after.table, *cards(card)))
    with pytest.raises(InvariantError, match=rf"^K15\.4: {message}"):
        check_transition(before, move, corrupted, events)


def finished_deal() -> tuple[State, DealResult]:
    before, _, _, events = last_sweep_of_deal()
    return before, only(events, DealEnded).result


def test_unbalanced_sweep_points_are_reported() -> None:
    state, result = finished_deal()
    check_deal_result(state, result)
    scores = list(result.scores)
    scores[1] = replace(scores[1], sweeps_conceded=0)
    with pytest.raises(InvariantError, match=r"^K15\.6: sweep points sum to 5"):
        check_deal_result(state, replace(result, scores=tuple(scores)))


def test_a_deal_total_off_the_deck_total_is_reported() -> None:
    state, result = finished_deal()
    scores = list(result.scores)
    scores[1] = replace(scores[1], total=scores[1].total + 1)
    with pytest.raises(InvariantError, match=r"^K15\.7: deal total 43 != 42"):
        check_deal_result(state, replace(result, scores=tuple(scores)))


def test_a_lost_or_copied_card_breaks_conservation() -> None:
    state = position("4H 5D", {1: "9C"}, filler=1)
    check_state(state)
    with pytest.raises(InvariantError, match=r"^K15\.1"):
        check_state(replace(state, table=(*state.table, *cards("AS"))))
    with pytest.raises(InvariantError, match=r"^K15\.1"):
        check_state(replace(state, table=state.table[1:]))


def test_uneven_hands_are_reported() -> None:
    state = position("4H 5D", {1: "9C 8C", 2: "7C"}, filler=2)
    check_state(state)
    hands = list(state.hands)
    hands[1], hands[2] = hands[2], hands[1]  # the mover now holds fewer cards than seat 2
    with pytest.raises(InvariantError, match=r"^K15\.3: hand sizes"):
        check_state(replace(state, hands=tuple(hands)))


def test_a_hand_two_cards_short_of_the_movers_is_reported() -> None:
    """K15.3: every other seat holds as many cards as the mover or one fewer."""
    one_short = position("4H 5D", {1: "9C 8C 7C", 2: "6C 5C"}, filler=2)
    check_state(one_short)
    two_short = position("4H 5D", {1: "9C 8C 7C", 2: "6C"}, filler=2)
    with pytest.raises(InvariantError, match=r"^K15\.3: hand sizes \[2, 3, 1, 2\]"):
        check_state(two_short)


def test_a_marker_must_lie_in_its_pile() -> None:
    state = position("4H 5D", {1: "9C"}, filler=1)
    check_state(state)
    with pytest.raises(InvariantError, match=r"^K8\.4"):
        check_state(with_markers(state, 1, "9C"))


def test_a_mover_without_a_card_is_reported() -> None:
    state = position("4H 5D", {1: "9C"}, filler=1)
    check_state(state)
    hands = list(state.hands)
    hands[1] = ()
    emptied = replace(state, hands=tuple(hands), table=(*state.table, *cards("9C")))
    with pytest.raises(InvariantError, match=r"^K7\.8: the mover holds no card"):
        check_state(emptied)


@pytest.mark.parametrize(
    ("what", "reported"),
    [
        ("seat", r"^K4\.4: wrong mover"),
        ("card", r"^K8\.3: the capture is not of the card played"),
    ],
)
def test_a_capture_credited_to_another_seat_or_card_is_reported(what: str, reported: str) -> None:
    """K4.4: the seat on turn moves; K8.3: the capture is of the card it played."""
    before, move, after, events = step(position("4H 5D 7S", {1: "9C"}), "9C>4H+5D")
    captured = only(events, Captured)
    wrong = replace(captured, seat=2) if what == "seat" else replace(captured, card=cards("9D")[0])
    with pytest.raises(InvariantError, match=reported):
        check_transition(before, move, after, [wrong if e is captured else e for e in events])


def test_k15_3_uneven_hands_at_the_start_of_a_distribution_are_reported() -> None:
    """K15.3: all hands are equal at the start of a distribution. A card of seat 2 dealt to
    the table instead keeps the stock count (K15.2), conservation (K15.1) and the mover's
    lead of at most one card, so only this check sees it."""
    before, move, after, events = later_distribution(Rules())
    assert [len(hand) for hand in after.hands] == [4] * 4
    hands = list(after.hands)
    card, hands[2] = hands[2][0], hands[2][1:]
    corrupted = replace(after, hands=tuple(hands), table=(*after.table, card))
    check_state(corrupted)
    with pytest.raises(InvariantError, match=r"^K15\.3: hand sizes \[4, 4, 3, 4\]"):
        check_transition(before, move, corrupted, events)


def test_a_distribution_that_misstates_whether_it_is_the_last_is_reported() -> None:
    before, move, after, events = later_distribution(Rules())
    dealt = only(events, DistributionDealt)
    assert dealt.last
    wrong = [replace(dealt, last=False) if e is dealt else e for e in events]
    with pytest.raises(InvariantError, match=r"^K15\.2: sistan"):
        check_transition(before, move, after, wrong)


def with_result(events: list[Event], result: DealResult) -> list[Event]:
    end = only(events, DealEnded)
    return [replace(end, result=result) if e is end else e for e in events]


def test_a_step_that_ends_a_deal_checks_its_result() -> None:
    """check_transition runs the deal-end checks on the step's own DealEnded."""
    before, move, after, events = last_sweep_of_deal()
    result = only(events, DealEnded).result
    scores = list(result.scores)
    scores[1] = replace(scores[1], sweeps_conceded=0)  # the dealer's sweep, unpaid
    with pytest.raises(InvariantError, match=r"^K15\.6: sweep points sum to 5"):
        check_transition(
            before, move, after, with_result(events, replace(result, scores=tuple(scores)))
        )


def test_team_totals_that_do_not_add_up_are_reported() -> None:
    state, result = finished_deal()
    totals = (result.team_totals[0] + 1, *result.team_totals[1:])
    with pytest.raises(InvariantError, match=r"^K3\.3: team totals do not add up"):
        check_deal_result(state, replace(result, team_totals=totals))


# -- the match's first distribution, dealt before any move ----------------------------------


def opening(rules: Rules | None = None) -> tuple[State, list[Event]]:
    """A real opening of a 4-player match, already passed by the checker."""
    state, events = open_game(Config(players=4, rules=rules or Rules()), seed=3)
    check_opening(state, events)
    return state, events


def test_an_opening_with_a_card_short_in_the_stock_is_reported() -> None:
    state, events = opening()
    with pytest.raises(InvariantError, match=r"^K15\.2: stock"):
        check_opening(replace(state, stock=state.stock[1:]), events)


def test_an_opening_with_uneven_hands_is_reported() -> None:
    state, events = opening()
    hands = (state.hands[0][1:], *state.hands[1:])
    with pytest.raises(InvariantError, match=r"^K15\.3: hand sizes"):
        check_opening(replace(state, hands=hands, table=(*state.table, state.hands[0][0])), events)


def test_an_opening_that_kept_a_removed_card_on_the_table_is_reported() -> None:
    state, events = opening(Rules(removal=Removal.COURTS))
    king = cards("KH")[0]
    assert king not in state.table
    with pytest.raises(InvariantError, match=r"^K15\.4: a court stayed"):
        check_opening(replace(state, table=(*state.table, king)), events)


@pytest.mark.parametrize(
    ("table", "wrong"),
    [("5H 5C 5D", None), ("5H 5C 6D", 1), ("", 1)],
    ids=["missed", "not-one-value", "empty-table"],
)
def test_k16_10_a_wrong_bordstabbe_is_reported(table: str, wrong: int | None) -> None:
    """K16.10: the first table after removal decides bordstabbe, so K15.7's -5 term is
    checked against the table, not taken from the result being checked."""
    state, events = opening(Rules(bordstabbe=True))
    state = replace(state, table=cards(table), bordstabbe_seat=None if wrong else 1)
    check_opening(state, events)
    with pytest.raises(InvariantError, match=r"^K16\.10: bordstabbe seat"):
        check_opening(replace(state, bordstabbe_seat=wrong), events)
