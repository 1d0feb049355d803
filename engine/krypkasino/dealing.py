"""Starting a match and dealing (spec K4.2, K4.3, K5, K6, K16.10)."""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from typing import assert_never

from engine.cards import (
    ACE,
    SPADES,
    Card,
    CardError,
    check_cards_of_one_deck,
    check_deck,
    full_deck,
    rank_of,
    seeded_rng,
    shuffled,
    suit_of,
)
from engine.krypkasino.config import Config, Removal
from engine.krypkasino.events import (
    Bordstabbe,
    CardsSetAside,
    DealerDrawn,
    DistributionDealt,
    Event,
)
from engine.krypkasino.moves import is_court
from engine.krypkasino.state import State, evolve


def new_game(
    config: Config,
    *,
    seed: int = 0,
    decks: Sequence[Sequence[Card]] = (),
    draw: Sequence[Card] | None = None,
) -> State:
    """Start a match: draw for deal if asked, then deal the first distribution.

    ``decks`` gives the deck order (top first) of the first deals; later deals
    are shuffled from ``seed``. ``draw`` is the draw-for-deal sequence (K4.2);
    without it the draw comes from ``seed`` too.

    >>> from engine.krypkasino.config import Config
    >>> state = new_game(Config(players=4), seed=7)
    >>> [len(h) for h in state.hands], len(state.stock), state.turn
    ([5, 5, 5, 5], 80, 1)
    """
    return open_game(config, seed=seed, decks=decks, draw=draw)[0]


def open_game(
    config: Config,
    *,
    seed: int = 0,
    decks: Sequence[Sequence[Card]] = (),
    draw: Sequence[Card] | None = None,
) -> tuple[State, list[Event]]:
    """``new_game`` together with the events of the set-up (draw, first deal).

    Raises ``CardError`` for a deck that is not the game's cards, or a ``draw``
    that could not come from one deck or is given without ``draw_for_deal``.
    """
    config.validate()
    for deck in decks:
        check_deck(deck, config.copies)
    if draw is not None:
        if not config.draw_for_deal:
            raise CardError("a draw sequence needs config.draw_for_deal")
        check_cards_of_one_deck(draw, config.copies)
    events: list[Event] = []
    first_dealer = config.first_dealer
    draws: tuple[tuple[int, Card], ...] = ()
    if config.draw_for_deal:
        sequence = iter(_ints(draw)) if draw is not None else _draw_sequence(config, seed)
        first_dealer, draws = draw_for_deal(config.players, sequence)
        events.append(DealerDrawn(draws, first_dealer))
    state = _before_first_deal(config, seed, tuple(map(_ints, decks)), first_dealer, draws)
    return start_deal(state, events)


def _ints(cards: Sequence[Card]) -> tuple[Card, ...]:
    """Checked card codes as ints: numpy's integers, which a caller may shuffle with,
    are codes too, but the state holds ints."""
    return tuple(Card(operator.index(card)) for card in cards)


def first_distribution(config: Config, deck: Sequence[Card], dealer: int) -> State:
    """Deal 1 as ``dealer`` deals it from ``deck``, up to the first move (K5.3, K6.1,
    K16.10): what a plain token's freshly dealt table is checked against."""
    state = _before_first_deal(config, 0, (tuple(deck),), dealer, ())
    return start_deal(state, [])[0]


def _before_first_deal(
    config: Config,
    seed: int,
    decks: tuple[tuple[Card, ...], ...],
    first_dealer: int,
    draws: tuple[tuple[int, Card], ...],
) -> State:
    """A match whose dealer is chosen and whose first deal is not yet dealt."""
    n = config.players
    empty: tuple[Card, ...] = ()
    return State(
        config=config,
        seed=seed,
        decks=decks,
        first_dealer=first_dealer,
        dealer_draw=draws,
        deal=0,
        dealer=first_dealer,
        distribution=0,
        stock=empty,
        hands=(empty,) * n,
        table=empty,
        set_aside=empty,
        piles=(empty,) * n,
        markers=(empty,) * n,
        turn=first_dealer,
        last_capturer=None,
        bordstabbe_seat=None,
        results=(),
        tiebreak=(),
        winners=(),
        over=False,
        move_number=0,
        last_move=None,
    )


def _draw_sequence(config: Config, seed: int) -> Iterator[Card]:
    """Shuffled full decks, one after another, so a long run of ties never runs dry."""
    round_number = 0
    while True:
        yield from shuffled(full_deck(config.copies), seeded_rng(seed, "draw", round_number))
        round_number += 1


class DrawExhaustedError(ValueError):
    """K4.2: an explicit draw sequence ran out before one seat drew highest."""


def _draw_strength(card: Card) -> int:
    """K4.2: ace high, then K Q J 10 ... 2; suits do not count."""
    rank = rank_of(card)
    return 13 if rank == ACE else rank


def draw_for_deal(
    players: int, sequence: Iterator[Card]
) -> tuple[int, tuple[tuple[int, Card], ...]]:
    """K4.2: seats draw in order; the tied highest draw again until one is highest."""
    candidates = list(range(players))
    draws: list[tuple[int, Card]] = []
    while True:
        try:
            drawn = [(seat, next(sequence)) for seat in candidates]
        except StopIteration:
            raise DrawExhaustedError(
                "the draw-for-deal sequence ran out before a dealer was found"
            ) from None
        draws.extend(drawn)
        best = max(_draw_strength(card) for _, card in drawn)
        candidates = [seat for seat, card in drawn if _draw_strength(card) == best]
        if len(candidates) == 1:
            return candidates[0], tuple(draws)


def deck_for_deal(state: State, deal: int) -> tuple[Card, ...]:
    """The explicit deck of a deal if one was given, else a shuffle from the seed."""
    if deal <= len(state.decks):
        return state.decks[deal - 1]
    return shuffled(full_deck(state.config.copies), seeded_rng(state.seed, "deal", deal))


def start_deal(state: State, events: list[Event]) -> tuple[State, list[Event]]:
    """K4.3: the next deal, dealt by the next seat in rotation."""
    deal = state.deal + 1
    dealer = (state.first_dealer + deal - 1) % state.players
    n = state.players
    empty: tuple[Card, ...] = ()
    state = evolve(
        state,
        deal=deal,
        dealer=dealer,
        distribution=0,
        stock=deck_for_deal(state, deal),
        table=empty,
        set_aside=empty,
        piles=(empty,) * n,
        markers=(empty,) * n,
        last_capturer=None,
        bordstabbe_seat=None,
    )
    return distribute(state, events)


def distribute(state: State, events: list[Event]) -> tuple[State, list[Event]]:
    """K5.3 dealing from the top of the stock, then removal (K6) and bordstabbe (K16.10)."""
    config = state.config
    first = state.distribution == 0
    schedule = config.schedule
    rounds = schedule.first_rounds if first else schedule.later_rounds
    n = state.players
    stock = state.stock
    hands = [list(hand) for hand in state.hands]
    dealt_to_table: list[Card] = []
    top = 0
    for hand_cards, table_cards in rounds:
        for i in range(1, n + 1):
            hands[(state.dealer + i) % n].extend(stock[top : top + hand_cards])
            top += hand_cards
        dealt_to_table.extend(stock[top : top + table_cards])
        top += table_cards
    stock = stock[top:]
    table = state.table + tuple(dealt_to_table)
    kept, removed = split_removal(table, config.rules.removal)
    first_player = (state.dealer + 1) % n
    events.append(
        DistributionDealt(
            state.deal, state.distribution + 1, state.dealer, tuple(dealt_to_table), not stock
        )
    )
    if removed:
        events.append(CardsSetAside(removed))
    bordstabbe_seat = state.bordstabbe_seat
    if first and config.rules.bordstabbe and kept and len(set(map(rank_of, kept))) == 1:
        bordstabbe_seat = first_player
        events.append(Bordstabbe(first_player))
    state = evolve(
        state,
        distribution=state.distribution + 1,
        stock=stock,
        hands=tuple(tuple(sorted(hand)) for hand in hands),
        table=kept,
        set_aside=state.set_aside + removed,
        turn=first_player,
        bordstabbe_seat=bordstabbe_seat,
    )
    return state, events


def split_removal(
    table: tuple[Card, ...], removal: Removal
) -> tuple[tuple[Card, ...], tuple[Card, ...]]:
    """K6.1: ``(cards that stay, cards set aside)``."""
    if removal is Removal.NONE:
        return table, ()
    if removal is Removal.COURTS:
        removed = tuple(card for card in table if is_court(card))
    elif removal is Removal.SPADES:
        removed = tuple(card for card in table if suit_of(card) == SPADES)
    else:
        # Config.validate refuses any other value (the text "courts" played spades here).
        assert_never(removal)
    if not removed:
        return table, ()
    return tuple(card for card in table if card not in removed), removed
