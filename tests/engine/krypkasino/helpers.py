"""Shared helpers for the Krypkasino engine tests: cards, moves, stacked decks, positions.

Positions are built with ``dataclasses.replace`` on a real state so that every
move in a test still goes through the engine's ``play``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TypeVar

from engine.cards import RANK_NAMES, Card, full_deck, parse_cards
from engine.krypkasino import (
    Config,
    Event,
    Move,
    Rules,
    State,
    legal_moves,
    new_game,
    open_game,
    play,
    score_deal,
    table_moves,
)
from engine.krypkasino.events import Captured, DealEnded
from engine.krypkasino.state import replace_at

Cards = str | Sequence[Card]
E = TypeVar("E")


def cards(text: Cards) -> tuple[Card, ...]:
    """Cards in the spec's notation (K1.1), or a card sequence passed through."""
    return tuple(parse_cards(text)) if isinstance(text, str) else tuple(text)


def moves(*texts: str) -> list[Move]:
    """Moves in transcript notation (``6C`` crawl, ``8D>8H`` capture), in K1.6 order.

    Sorting the tuples gives the canonical order independently of the engine:
    by played card, crawl (empty captures) first, then captures lexicographically.
    """
    return sorted(Move.parse(text) for text in texts)


def ranks(text: str) -> set[int]:
    """Rank indices (0 = ace) of rank names such as ``"6 Q"``, as ``sweep_ranks`` reports them."""
    return {RANK_NAMES.index(name) for name in text.split()}


def rest_of_deck(used: Iterable[Card], copies: int = 2) -> list[Card]:
    """The full deck minus ``used`` (a multiset), in canonical order."""
    left = Counter(full_deck(copies))
    left.subtract(Counter(used))
    if any(count < 0 for count in left.values()):
        raise ValueError("more copies used than the deck holds")
    return sorted(left.elements())


def deck_starting_with(prefix: Cards, copies: int = 2) -> list[Card]:
    """A complete deck whose top cards are ``prefix``, the rest in canonical order."""
    top = list(cards(prefix))
    return top + rest_of_deck(top, copies)


def stacked_deck(
    rounds: Sequence[tuple[int, int]],
    players: int,
    dealer: int,
    hands: Mapping[int, Cards] | None = None,
    table: Cards = (),
    copies: int = 2,
    used: Cards = (),
) -> list[Card]:
    """The cards that the K5.3 loop deals as asked: ``hands`` and ``table`` of one
    distribution (the table in dealing order); unnamed places get filler cards.

    The result is the full deck minus ``used`` (cards already elsewhere), top first.
    """
    wanted = {seat: list(cards(text)) for seat, text in (hands or {}).items()}
    wanted_table = list(cards(table))
    named = [c for hand in wanted.values() for c in hand] + wanted_table + list(cards(used))
    filler = iter(rest_of_deck(named, copies))
    top: list[Card] = []
    for hand_cards, table_cards in rounds:
        for i in range(1, players + 1):
            own = wanted.get((dealer + i) % players, [])
            for _ in range(hand_cards):
                top.append(own.pop(0) if own else next(filler))
        for _ in range(table_cards):
            top.append(wanted_table.pop(0) if wanted_table else next(filler))
    if any(wanted.values()) or wanted_table:
        raise ValueError("more cards asked for than the rounds deal")
    return top + list(filler)


def first_distribution_deck(config: Config, hands: Mapping[int, Cards], table: Cards) -> list[Card]:
    """A full deck whose first distribution (K5.3) under ``config`` deals ``hands`` and
    ``table``: ``stacked_deck`` with the config's schedule, first dealer and copies,
    checked against the engine so that a wrong stacking fails loudly here."""
    deck = stacked_deck(
        config.schedule.first_rounds,
        config.players,
        config.first_dealer,
        hands,
        table,
        config.copies,
    )
    state = new_game(config, decks=[deck])
    for seat, text in hands.items():
        assert list(state.hands[seat]) == sorted(cards(text)), (seat, state.hands[seat])
    assert state.table == cards(table), state.table
    return deck


def position(
    table: Cards,
    hands: Mapping[int, Cards],
    *,
    players: int = 4,
    dealer: int = 0,
    turn: int | None = None,
    rules: Rules | None = None,
    filler: int = 4,
) -> State:
    """A mid-distribution position: ``turn`` (default: the first seat named) to move.

    Seats not named hold ``filler`` cards so the distribution does not end
    under the test; every card not placed stays in the stock.
    """
    config = Config(players=players, rules=rules or Rules(), first_dealer=dealer)
    placed = {seat: cards(text) for seat, text in hands.items()}
    on_table = cards(table)
    rest = rest_of_deck([*on_table, *(c for h in placed.values() for c in h)], config.copies)
    all_hands = []
    for seat in range(players):
        if seat in placed:
            all_hands.append(tuple(sorted(placed[seat])))
        else:
            all_hands.append(tuple(sorted(rest[:filler])))
            rest = rest[filler:]
    base = new_game(config)
    return replace(
        base,
        hands=tuple(all_hands),
        table=on_table,
        stock=tuple(rest),
        set_aside=(),
        turn=next(iter(placed)) if turn is None else turn,
    )


def dealer_last_card(
    config: Config,
    card: Cards,
    table: Cards,
    *,
    last_capturer: int | None,
    rest_to: int,
    set_aside: Cards = (),
    stock: Sequence[Card] = (),
    piles: Mapping[int, Cards] | None = None,
) -> State:
    """The dealer of deal 1 about to play the last card of a distribution (K4.4).

    An empty ``stock`` makes it the deal's last distribution. Every card not
    placed goes to ``rest_to``'s pile, so the position conserves cards (K15.1).
    """
    n = config.players
    dealer = config.first_dealer
    own_piles = {seat: cards(text) for seat, text in (piles or {}).items()}
    placed = [*cards(card), *cards(table), *cards(set_aside), *stock]
    placed += [c for pile in own_piles.values() for c in pile]
    rest = tuple(rest_of_deck(placed, config.copies))
    own_piles[rest_to] = own_piles.get(rest_to, ()) + rest
    dealt = config.stock_after(1) - len(stock)
    base = new_game(config)
    return replace(
        base,
        distribution=1 + dealt // config.later_distribution_size,
        stock=tuple(stock),
        hands=replace_at(((),) * n, dealer, cards(card)),
        table=cards(table),
        set_aside=cards(set_aside),
        piles=tuple(own_piles.get(seat, ()) for seat in range(n)),
        markers=((),) * n,
        turn=dealer,
        last_capturer=last_capturer,
    )


def legal(table: Cards, hand: Cards, rules: Rules | None = None) -> list[Move]:
    """K7.7 Legal for one hand, asserting that ``legal_moves`` and ``table_moves`` agree."""
    rules = rules or Rules()
    state = position(table, {1: hand}, rules=rules)
    found = legal_moves(state, 1)
    assert found == table_moves(cards(hand), cards(table), rules)
    return found


def with_hand(state: State, seat: int, hand: Cards) -> State:
    """The same state with one seat's hand replaced (to ask "given the next mover's H")."""
    return replace(state, hands=replace_at(state.hands, seat, tuple(sorted(cards(hand)))))


def sweep_parts(state: State) -> list[int]:
    """``sweeps_made + sweeps_conceded`` per seat for the markers made so far (K9, K12.1)."""
    scores = score_deal(state.config, state.piles, state.markers, 0, None)
    return [s.sweeps_made + s.sweeps_conceded for s in scores]


def play_text(state: State, text: str) -> tuple[State, list[Event]]:
    """Play ``seat:move`` (transcript notation, sweep stars ignored) through ``play``."""
    seat, _, move = text.partition(":")
    return play(state, int(seat), Move.parse(move))


def finish_deal(state: State) -> tuple[State, list[Event]]:
    """Play the current deal to its end, always the first legal move (validated by ``play``)."""
    deal = state.deal
    events: list[Event] = []
    while not state.over and state.deal == deal:
        move = legal_moves(state, state.turn)[0]
        state, new = play(state, state.turn, move)
        events.extend(new)
    return state, events


def distinct_states(matches: int = 32) -> list[State]:
    """Each deal's opening state and the final state of ``matches`` two-deal matches,
    each state with a config object of its own: three cache keys per match for the
    caches keyed by the config's identity (the thread tests)."""
    states = []
    for seed in range(matches):
        state, _ = open_game(Config(2, match_deals=2), seed=seed)
        states.append(state)
        while not state.over:
            state, _ = finish_deal(state)
            states.append(state)
    return [replace(state, config=replace(state.config)) for state in states]


def piles_from_events(events: Iterable[Event], players: int) -> list[list[Card]]:
    """Each seat's pile rebuilt from the events of one deal (K8.3, K11.2)."""
    piles: list[list[Card]] = [[] for _ in range(players)]
    for event in events:
        if isinstance(event, Captured):
            piles[event.seat] += [event.card, *event.captures]
        elif isinstance(event, DealEnded):
            piles[event.recipient] += event.collected
    return piles


def only(events: Iterable[Event], kind: type[E]) -> E:
    """The single event of a type."""
    found = [e for e in events if isinstance(e, kind)]
    assert len(found) == 1, found
    return found[0]
