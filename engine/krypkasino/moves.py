"""Moves and the legal move set (spec K7).

>>> from engine.cards import parse_cards
>>> from engine.krypkasino.config import Rules
>>> [str(m) for m in table_moves(parse_cards("8D 6C"), parse_cards("8H 9C JH"), Rules())]
['6C', '8D>8H']
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import combinations, product
from typing import NamedTuple

from engine.cards import (
    ACE,
    CARDS_PER_DECK,
    JACK,
    KING,
    Card,
    card_str,
    holds_all,
    make_card,
    parse_card,
    parse_cards,
)
from engine.krypkasino.captures import groups, sweeps, value_options
from engine.krypkasino.config import Rules


class Move(NamedTuple):
    """A played card and the multiset of table cards it captures, sorted (K7.5).

    Empty ``captures`` is a crawl. Tuple order is the canonical move order of
    K1.6: by card, crawl first, then captures lexicographically.
    """

    card: Card
    captures: tuple[Card, ...] = ()

    @property
    def is_crawl(self) -> bool:
        return not self.captures

    @classmethod
    def parse(cls, text: str) -> Move:
        """Read ``8D`` (a crawl) or ``8D>AH+7D`` (a capture), the transcript notation."""
        card, _, taken = text.strip().rstrip("*").partition(">")
        captures = parse_cards(taken.replace("+", " ")) if taken else []
        return cls.of(parse_card(card), captures)

    @classmethod
    def of(cls, card: Card, captures: Sequence[Card] = ()) -> Move:
        """A move with its captures put in canonical order."""
        return cls(card, tuple(sorted(captures)))

    def __str__(self) -> str:
        if not self.captures:
            return card_str(self.card)
        return card_str(self.card) + ">" + "+".join(card_str(c) for c in self.captures)


class SweepKind(enum.Enum):
    """What a capture does to the table (K8.3)."""

    NONE = "none"
    SWEEP = "sweep"
    DOUBLE = "double_sweep"

    @property
    def markers(self) -> int:
        """The face-up markers the capture leaves in the mover's pile (K8.3)."""
        return _MARKERS[self]


_MARKERS = {SweepKind.NONE: 0, SweepKind.SWEEP: 1, SweepKind.DOUBLE: 2}


def hand_value(card: Card) -> int:
    """K2.3: the capture value of a played card; an ace is 14."""
    rank = card >> 2
    return 14 if rank == ACE else rank + 1


def is_court(card: Card) -> bool:
    """J, Q or K: the cards K6.1 sets aside and K16.7 restricts."""
    return card >> 2 >= JACK


def sweep_kind(table: Sequence[Card], move: Move) -> SweepKind:
    """K8.3: a capture of the whole table is a sweep; a lone non-ace twin a double sweep."""
    if not move.captures or len(move.captures) != len(table):
        return SweepKind.NONE
    if len(table) == 1 and table[0] == move.card and move.card >> 2 != ACE:
        return SweepKind.DOUBLE
    return SweepKind.SWEEP


_COURT_FIELDS = sum(15 << (4 * rank) for rank in range(JACK, KING + 1))
# Fields of the table values a played value can reach: higher cards never join a group.
_REACH = tuple((1 << (4 * min(target, 13))) - 1 for target in range(15))


class _TableIndex:
    """The table's value vector, shared by every card of one hand; cards by rank on demand."""

    __slots__ = ("_by_rank", "choices", "packed", "table")

    def __init__(self, table: Sequence[Card]) -> None:
        self.table = table
        self.packed = _packed(table)
        self._by_rank: list[list[Card]] | None = None
        self.choices: dict[tuple[int, int], list[tuple[Card, ...]]] = {}

    def cards_of(self, packed: int) -> list[tuple[Card, ...]]:
        """Every distinct card multiset with the given value vector (K7.5), sorted."""
        by_rank = self._by_rank
        if by_rank is None:
            by_rank = [[] for _ in range(13)]
            for card in sorted(self.table):
                by_rank[card >> 2].append(card)
            self._by_rank = by_rank
        per_rank: list[list[tuple[Card, ...]]] = []
        rank = 0
        while packed:
            count = packed & 15
            if count:
                key = (rank, count)
                options = self.choices.get(key)
                if options is None:
                    options = sorted(set(combinations(by_rank[rank], count)))
                    self.choices[key] = options
                per_rank.append(options)
            packed >>= 4
            rank += 1
        if len(per_rank) == 1:
            return per_rank[0]
        return [sum(parts, ()) for parts in product(*per_rank)]


# Per card code: its unit in a value vector (four bits per rank, ace lowest; see
# ``captures``) and its hand value (K2.3, from ``hand_value``); a lookup is cheaper
# than the shifts.
_UNIT = tuple(1 << ((card >> 2) << 2) for card in range(CARDS_PER_DECK))
_HAND_VALUE = tuple(hand_value(Card(card)) for card in range(CARDS_PER_DECK))


def _packed(cards: Iterable[Card]) -> int:
    """The value vector of some cards."""
    return sum(map(_UNIT.__getitem__, cards))


def _options(card: Card, table: int, rank_only: bool) -> tuple[int, ...]:
    """Legal captured value vectors of one card against a table value vector (K7.1-K7.3).

    Only the table values the card can reach take part, so tables that differ
    only in unreachable cards share one cached search. The card sweeps (K7.6)
    exactly when the last, largest option is the whole (non-empty) table.
    """
    rank = card >> 2
    if rank_only:
        if rank >= JACK:
            # K7.1/K7.2 with court_cards_rank_only: each same-rank card is a group.
            vector = table & (15 << (rank << 2))
            return (vector,) if vector else ()
        table &= ~_COURT_FIELDS
    value = _HAND_VALUE[card]
    return value_options(table & _REACH[value], value)


def table_moves(hand: Sequence[Card], table: Sequence[Card], rules: Rules) -> list[Move]:
    """K7.7: the legal moves of a hand against a table, in canonical order (K1.6)."""
    if not hand:
        return []
    index = _TableIndex(table)
    packed = index.packed
    rank_only = rules.court_cards_rank_only
    per_card = [(card, _options(card, packed, rank_only)) for card in sorted(set(hand))]
    if not rules.no_forced_sweep:
        whole = tuple(sorted(table))
        forced = [Move(card, whole) for card, options in per_card if _takes_all(options, packed)]
        if forced:
            return forced
    crawl_allowed = not (rules.must_capture_if_able and any(opts for _, opts in per_card))
    moves: list[Move] = []
    for card, options in per_card:
        if not options:
            if crawl_allowed:
                moves.append(Move(card))
            continue
        captures: list[tuple[Card, ...]] = []
        for vector in options:
            captures.extend(index.cards_of(vector))
        captures.sort()
        moves.extend(Move(card, taken) for taken in captures)
    return moves


def _takes_all(options: tuple[int, ...], table: int) -> bool:
    """K7.6: the whole table is an option; it is the largest vector, so it can only be last."""
    return bool(options) and options[-1] == table


def is_legal(hand: Sequence[Card], table: Sequence[Card], rules: Rules, move: Move) -> bool:
    """K7.8: whether ``Move.of(*move)`` is in ``table_moves(hand, table, rules)``.

    Decides on the one move without generating the others: a capture is legal
    exactly when its cards lie on the table and their value vector is one of
    the card's options (K7.3; K7.5 makes every such multiset a move of its
    own). The rest of the hand matters only through K7.6 (a sweep is forced)
    and, for a crawl, K16.8 (a capture is forced).
    """
    card, captures = move
    if card not in hand:
        return False
    packed = 0
    for placed in table:
        packed += _UNIT[placed]
    rank_only = rules.court_cards_rank_only
    if captures:
        if not (captures[0] in table if len(captures) == 1 else holds_all(table, captures)):
            return False
        taken = 0
        for taken_card in captures:
            taken += _UNIT[taken_card]
        if taken not in _options(card, packed, rank_only):
            return False
        # A legal capture of the whole table is itself the sweep K7.6 asks for.
        return taken == packed or rules.no_forced_sweep or not _sweep_in(hand, packed, rank_only)
    if _options(card, packed, rank_only):
        return False  # K7.4: a card that can capture may not crawl
    if not rules.no_forced_sweep and _sweep_in(hand, packed, rank_only):
        return False
    return not (
        rules.must_capture_if_able and any(_options(held, packed, rank_only) for held in hand)
    )


def _sweep_in(hand: Sequence[Card], packed: int, rank_only: bool) -> bool:
    """K7.6 (K16.7): some card of the hand takes the whole table, of value vector ``packed``.

    The table's sweep ranks are usually cached already: the view of the move
    that left this table asked for them (K14.1).
    """
    if not packed or not (ranks := _sweep_ranks(packed, rank_only)):
        return False  # the usual case: no card at all sweeps this table
    return any(card >> 2 in ranks for card in hand)


def splits_into_groups(card: Card, cards: Sequence[Card], rules: Rules) -> bool:
    """K7.2 (K16.7): ``cards`` split into groups each worth ``card``'s hand value, so the
    card would sweep a table holding just them."""
    return bool(cards) and card >> 2 in _sweep_ranks(_packed(cards), rules.court_cards_rank_only)


def groups_among(card: Card, cards: Sequence[Card]) -> list[tuple[int, ...]]:
    """K7.2: every group of ``cards`` worth ``card``'s hand value, each as its table
    values (K2.2), highest first; the caller leaves out the cards K7.1 does not let count."""
    return groups(_packed(cards), _HAND_VALUE[card])


def sweep_ranks(table: Sequence[Card], rules: Rules) -> tuple[int, ...]:
    """K14.1: rank indices (0 = ace) of the cards that would sweep this table."""
    if not table:
        return ()
    return _sweep_ranks(_packed(table), rules.court_cards_rank_only)


def sweep_ranks_left(
    table: Sequence[Card], moves: Iterable[Move], rules: Rules
) -> list[tuple[int, ...]]:
    """K14.1 ``sweep_ranks`` of the table each move leaves (K8.2 crawl, K8.3 capture).

    From value vectors, the table's plus the crawled card or less the captured
    ones: a LegalMoves answer pays one memo lookup per move, not a table copy.
    """
    packed = _packed(table)
    rank_only = rules.court_cards_rank_only
    ranks = []
    for card, captures in moves:
        left = packed - _packed(captures) if captures else packed + _UNIT[card]
        ranks.append(_sweep_ranks(left, rank_only) if left else ())
    return ranks


@lru_cache(maxsize=1 << 14)
def _sweep_ranks(packed: int, rank_only: bool) -> tuple[int, ...]:
    """K14.1 on the table's value vector: ``T`` is decomposable for the rank's value (K7.6)."""
    plain = packed & ~_COURT_FIELDS
    ranks = []
    for rank in range(13):
        value = hand_value(make_card(rank, 0))
        if rank_only and rank >= JACK:
            # K16.7: a court sweeps only a table of its own rank.
            sweeps_all = packed == packed & (15 << (4 * rank))
        elif rank_only:
            sweeps_all = plain == packed and sweeps(plain, value)
        else:
            sweeps_all = sweeps(packed, value)
        if sweeps_all:
            ranks.append(rank)
    return tuple(ranks)
