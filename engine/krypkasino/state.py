"""The immutable game state of a Krypkasino match (spec K4.1)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

from engine.cards import Card
from engine.krypkasino.config import Config
from engine.krypkasino.events import Captured, Crawled
from engine.krypkasino.scoring import DealResult

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class State:
    """Everything about a match at one moment; never mutated.

    ``hands`` are sorted, ``table`` keeps the order cards were placed in,
    ``stock`` is top first. ``piles`` hold every card a seat has taken this
    deal, markers included; ``markers`` lists the face-up sweep cards (K8.3).
    Chance comes from ``seed`` (and the explicit ``decks``), so the state
    alone determines the rest of the match. ``last_move`` is the event of the
    match's last move, kept only for views: no rule reads it.
    """

    config: Config
    seed: int
    decks: tuple[tuple[Card, ...], ...]
    first_dealer: int
    dealer_draw: tuple[tuple[int, Card], ...]
    deal: int
    dealer: int
    distribution: int
    stock: tuple[Card, ...]
    hands: tuple[tuple[Card, ...], ...]
    table: tuple[Card, ...]
    set_aside: tuple[Card, ...]
    piles: tuple[tuple[Card, ...], ...]
    markers: tuple[tuple[Card, ...], ...]
    turn: int
    last_capturer: int | None
    bordstabbe_seat: int | None
    results: tuple[DealResult, ...]
    tiebreak: tuple[int, ...]
    winners: tuple[int, ...]
    over: bool
    move_number: int
    last_move: Crawled | Captured | None

    @property
    def players(self) -> int:
        return self.config.players

    @property
    def last_distribution(self) -> bool:
        """K5.4: the stock is empty, so this is the deal's last distribution."""
        return not self.stock


def remove_cards(cards: tuple[Card, ...], taken: Iterable[Card]) -> tuple[Card, ...]:
    """Multiset difference (K1.4); every taken card must be present."""
    rest = list(cards)
    for card in taken:
        rest.remove(card)
    return tuple(rest)


def replace_at(items: tuple[T, ...], index: int, value: T) -> tuple[T, ...]:
    return (*items[:index], value, *items[index + 1 :])


_SLOTS = tuple(
    (name, State.__dict__[name].__get__, State.__dict__[name].__set__) for name in State.__slots__
)


def evolve(state: State, **changes: object) -> State:
    """``dataclasses.replace`` without re-running ``__init__``: half the cost on the hot path.

    The new object is built through the slot descriptors, so the original
    stays untouched and the result is as frozen as any other State.
    """
    new = object.__new__(State)
    for name, get, set_ in _SLOTS:
        set_(new, changes[name] if name in changes else get(state))
    return new
