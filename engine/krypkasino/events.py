"""Typed records of everything that happens in a game (spec K4-K13).

Events carry only public information: no hand and no stock ever appears in
one, so they can be shown to every seat as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.cards import Card
from engine.krypkasino.moves import SweepKind
from engine.krypkasino.scoring import DealResult


@dataclass(frozen=True, slots=True)
class DealerDrawn:
    """K4.2: the draw for deal, as ``(seat, card)`` in drawing order."""

    draws: tuple[tuple[int, Card], ...]
    dealer: int


@dataclass(frozen=True, slots=True)
class DistributionDealt:
    """K5.3: a distribution was dealt; ``table`` lists the cards dealt face up."""

    deal: int
    distribution: int
    dealer: int
    table: tuple[Card, ...]
    last: bool


@dataclass(frozen=True, slots=True)
class CardsSetAside:
    """K6.1: removal moved these table cards to the set-aside pile."""

    cards: tuple[Card, ...]


@dataclass(frozen=True, slots=True)
class Bordstabbe:
    """K16.10: the first player scores -5 for a dealt table of one value."""

    seat: int


@dataclass(frozen=True, slots=True)
class Crawled:
    """K8.2: the card stays on the table."""

    seat: int
    card: Card


@dataclass(frozen=True, slots=True)
class Captured:
    """K8.3: a capture, perhaps a sweep or a double sweep (±5 / ±10 against ``conceded_by``).

    ``conceded_by`` is the seat that pays a sweep (K9.1), None for a plain capture.
    """

    seat: int
    card: Card
    captures: tuple[Card, ...]
    sweep: SweepKind
    conceded_by: int | None

    @classmethod
    def of(
        cls, seat: int, card: Card, captures: tuple[Card, ...], sweep: SweepKind, players: int
    ) -> Captured:
        """The capture by ``seat``; a sweep is paid by the previous seat (K9.1)."""
        conceded_by = None if sweep is SweepKind.NONE else (seat - 1) % players
        return cls(seat, card, captures, sweep, conceded_by)


@dataclass(frozen=True, slots=True)
class DealEnded:
    """K11: the recipient took the table and the set-aside pile."""

    deal: int
    recipient: int
    collected: tuple[Card, ...]
    result: DealResult


@dataclass(frozen=True, slots=True)
class TiebreakDeal:
    """K13.3: the lowest totals tie, so one more deal is played."""

    teams: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class MatchEnded:
    """K13.3: the match is over; ``winners`` are team numbers (seats when individual).

    ``tiebreak`` names the teams the last deal broke a tie between when it was a
    tie-break deal, ``()`` otherwise: the winners are the lowest of these, not of all.
    """

    totals: tuple[int, ...]
    winners: tuple[int, ...]
    tiebreak: tuple[int, ...] = ()


Event = (
    DealerDrawn
    | DistributionDealt
    | CardsSetAside
    | Bordstabbe
    | Crawled
    | Captured
    | DealEnded
    | TiebreakDeal
    | MatchEnded
)
