"""The invariants of spec K15, checked by tests and the simulator, never on the hot path."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from engine.cards import SPADES, full_deck, rank_of, suit_of
from engine.krypkasino.config import Removal
from engine.krypkasino.events import Captured, DealEnded, DistributionDealt, Event
from engine.krypkasino.moves import Move, is_court
from engine.krypkasino.scoring import (
    BORDSTABBE_POINTS,
    SWEEP_POINTS,
    DealResult,
    card_point_total,
)
from engine.krypkasino.state import State

_FULL_DECKS = {copies: Counter(full_deck(copies)) for copies in (1, 2)}


class InvariantError(AssertionError):
    """A K15 invariant does not hold: always an engine bug."""


def _require(condition: bool, rule: str, message: str) -> None:
    if not condition:
        raise InvariantError(f"{rule}: {message}")


def check_state(state: State) -> None:
    """K15.1 conservation, K8.4 markers in their piles, K7.8 a mover with a card to play
    and K15.3 hand sizes, at any moment between moves."""
    cards: Counter[int] = Counter(state.stock)
    cards.update(state.table)
    cards.update(state.set_aside)
    for hand in state.hands:
        cards.update(hand)
    for pile in state.piles:
        cards.update(pile)
    _require(cards == _FULL_DECKS[state.config.copies], "K15.1", "cards are not conserved")
    for seat, markers in enumerate(state.markers):
        _require(
            not Counter(markers) - Counter(state.piles[seat]),
            "K8.4",
            "markers lie outside the pile",
        )
    if state.over:
        return
    sizes = [len(hand) for hand in state.hands]
    mover = sizes[state.turn]
    _require(mover > 0, "K7.8", "the mover holds no card")
    _require(all(mover >= s >= mover - 1 for s in sizes), "K15.3", f"hand sizes {sizes}")


def check_transition(before: State, move: Move, after: State, events: Sequence[Event]) -> None:
    """K4.4 and K8.3 (a capture is the mover's, of the card played), K15.2, K15.3 at a
    distribution's start, K15.4, K15.5, K15.8, K11.1 and the deal-end invariants (K15.1
    over the final piles, K15.6, K15.7) for one executed move; the match's first
    distribution is ``check_opening``'s."""
    ended = next((e for e in events if isinstance(e, DealEnded)), None)
    for event in events:
        if isinstance(event, Captured):
            _require(event.seat == before.turn, "K4.4", "wrong mover")
            _require(event.card == move.card, "K8.3", "the capture is not of the card played")
            _check_markers(before, after, event, ended)
        elif isinstance(event, DistributionDealt) and event.deal == after.deal:
            _check_distribution(after, event)
        elif isinstance(event, DealEnded):
            # A deal ends only when the stock and every hand are empty (K10.1).
            left = len(before.stock) + sum(len(hand) for hand in before.hands) - 1
            _require(left == 0, "K15.8", f"the deal ended with {left} cards to deal or play")
            _check_collection(before, move, event)
            check_deal_result(before, event.result)


def check_opening(state: State, events: Sequence[Event]) -> None:
    """K15.2, K15.3 and K15.4 for the match's first distribution, which ``open_game`` deals
    before any move (``check_transition`` checks every later one)."""
    for event in events:
        if isinstance(event, DistributionDealt):
            _check_distribution(state, event)


def _check_distribution(after: State, event: DistributionDealt) -> None:
    """K15.2 stock, K15.3 (with K5.1) equal hands, K15.4 removal and K16.10 bordstabbe, just
    after a distribution."""
    config = after.config
    left = config.stock_after(event.distribution)
    _require(len(after.stock) == left, "K15.2", f"stock {len(after.stock)} != {left}")
    _require(event.last == (event.distribution == config.distributions), "K15.2", "sistan")
    # K15.3 (with K5.1): every hand is dealt the same number of cards, none played yet.
    schedule = config.schedule
    dealt = schedule.first_hand if event.distribution == 1 else schedule.later_hand
    sizes = [len(hand) for hand in after.hands]
    _require(
        sizes == [dealt] * config.players,
        "K15.3",
        f"hand sizes {sizes} at the start of distribution {event.distribution}",
    )
    if event.distribution == 1 and config.rules.bordstabbe:
        # K16.10, so that K15.7's bordstabbe term is not taken on the result's word.
        one_value = bool(after.table) and len(set(map(rank_of, after.table))) == 1
        expected = (after.dealer + 1) % config.players if one_value else None
        _require(
            after.bordstabbe_seat == expected,
            "K16.10",
            f"bordstabbe seat {after.bordstabbe_seat}, the first table asks for {expected}",
        )
    removal = config.rules.removal
    if removal is Removal.COURTS:
        _require(not any(map(is_court, after.table)), "K15.4", "a court stayed")
    elif removal is Removal.SPADES:
        _require(SPADES not in map(suit_of, after.table), "K15.4", "a spade stayed")


def _check_collection(before: State, move: Move, ended: DealEnded) -> None:
    """K11.1 recipient, and K15.1 at the deal's end: with the table and the set-aside pile
    collected (K11.2, K15.8) every card of the deck lies in a pile."""
    mover = before.turn
    last_capturer = mover if move.captures else before.last_capturer
    recipient = before.dealer if last_capturer is None else last_capturer
    _require(ended.recipient == recipient, "K11.1", f"seat {ended.recipient} is not R")
    cards: Counter[int] = Counter(ended.collected)
    for pile in before.piles:
        cards.update(pile)
    if move.captures:
        cards.update((move.card, *move.captures))
    _require(
        cards == _FULL_DECKS[before.config.copies],
        "K15.1",
        "the piles at the deal's end are not the deck (K11.2: table and set-aside pile go to R)",
    )


def _check_markers(before: State, after: State, event: Captured, ended: DealEnded | None) -> None:
    """K15.5: a capture adds one marker per sweep, both of a double sweep the capturing card."""
    had = len(before.markers[event.seat])
    if ended is None:
        added = after.markers[event.seat][had:]
        count = len(added)
        _require(all(c == event.card for c in added), "K15.5", "a marker is not the capturing card")
    else:
        # The next deal has begun; the finished deal's markers live on in its score (K12.1).
        count = ended.result.scores[event.seat].sweeps_made // SWEEP_POINTS - had
    expected = event.sweep.markers
    _require(count == expected, "K15.5", f"{count} markers for a {event.sweep.name.lower()}")


def check_deal_result(state: State, result: DealResult) -> None:
    """K15.6 sweep balance and K15.7 deal total of a finished deal."""
    config = state.config
    balance = sum(s.sweeps_made + s.sweeps_conceded for s in result.scores)
    _require(balance == 0, "K15.6", f"sweep points sum to {balance}")
    bordstabbe = any(s.bordstabbe for s in result.scores)
    expected = (
        card_point_total(config)
        + int(config.rules.last_capture_point)
        + BORDSTABBE_POINTS * int(bordstabbe)
    )
    total = sum(s.total for s in result.scores)
    _require(total == expected, "K15.7", f"deal total {total} != {expected}")
    _require(sum(result.team_totals) == total, "K3.3", "team totals do not add up")
