"""A naive reference for the legal move set (spec K7.1-K7.7, K14.1), for tests only.

Written straight from the definitions and sharing no logic with the engine's
capture search: every sub-multiset of the eligible table cards is enumerated,
the groups are the ones with the right sum, a set is decomposable when some
group can be split off and the rest is empty or decomposable again, and an
option is a decomposable set whose remainder holds no group. Exponential in
the distinct codes of the table: milliseconds up to 9 cards, up to about a
second a position at 16 (``test_reference_big_tables`` compares a bounded
number of those).

Multisets are count vectors over the distinct codes of the eligible cards
(``codes[i]`` occurs ``vector[i]`` times), which keeps the brute force fast
enough without changing what it enumerates.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import product

from engine.cards import Card
from engine.krypkasino import Move, Rules

Vector = tuple[int, ...]

_ACE, _JACK = 0, 10


def table_value(card: Card) -> int:
    """K2.2: 2-10 face value, J 11, Q 12, K 13, A 1."""
    return card // 4 + 1


def hand_value(card: Card) -> int:
    """K2.3: as the table value, except that an ace played from hand is 14."""
    return 14 if card // 4 == _ACE else card // 4 + 1


def is_court(card: Card) -> bool:
    return card // 4 >= _JACK


def eligible(card: Card, table: Iterable[Card], rules: Rules) -> list[Card]:
    """K7.1: ``E(c)``, the whole table unless ``court_cards_rank_only``."""
    if not rules.court_cards_rank_only:
        return list(table)
    if is_court(card):
        return [t for t in table if t // 4 == card // 4]
    return [t for t in table if not is_court(t)]


def _fits(small: Vector, big: Vector) -> bool:
    """``small ⊑ big`` (K1.4)."""
    return all(s <= b for s, b in zip(small, big, strict=True))


def _minus(big: Vector, small: Vector) -> Vector:
    return tuple(b - s for b, s in zip(big, small, strict=True))


class _Options:
    """``G(c)`` and ``C(c)`` of one played card against one table (K7.2, K7.3)."""

    def __init__(self, card: Card, table: Sequence[Card], rules: Rules) -> None:
        counts = Counter(eligible(card, table, rules))
        self.codes = sorted(counts)
        self.full: Vector = tuple(counts[c] for c in self.codes)
        values = [table_value(c) for c in self.codes]
        target = hand_value(card)
        # Every sub-multiset of E(c), as a vector of counts.
        self.subsets = [tuple(v) for v in product(*(range(n + 1) for n in self.full))]
        self.groups = [
            g
            for g in self.subsets
            if any(g) and sum(n * v for n, v in zip(g, values, strict=True)) == target
        ]
        # Some group of every partition of ``s`` holds the first code present in
        # ``s``, and a group inside ``s`` holds no earlier code: so only the groups
        # whose first code is that one need trying.
        self.groups_from: list[list[Vector]] = [[] for _ in self.codes]
        for g in self.groups:
            self.groups_from[next(i for i, n in enumerate(g) if n)].append(g)
        self.values = values
        self.target = target
        self._memo: dict[Vector, bool] = {}

    def decomposable(self, s: Vector) -> bool:
        """K7.3: ``s = G1 ⊎ ... ⊎ Gk`` with ``k >= 1`` groups, by trying every split."""
        if not any(s):
            return False
        known = self._memo.get(s)
        if known is None:
            known = False
            first = next(i for i, n in enumerate(s) if n)
            total = sum(n * v for n, v in zip(s, self.values, strict=True))
            # Every group sums to the target, so a multiple of it is necessary.
            candidates = self.groups_from[first] if total % self.target == 0 else []
            for g in candidates:
                if _fits(g, s):
                    rest = _minus(s, g)
                    if not any(rest) or self.decomposable(rest):
                        known = True
                        break
            self._memo[s] = known
        return known

    def captures(self) -> list[Vector]:
        """K7.3: decomposable ``S`` whose remainder ``T ⊖ S`` contains no group.

        The remainder is taken within ``E(c)``: cards outside it can never be
        part of a group, so they cannot make a remainder hold one.
        """
        found = []
        for s in self.subsets:
            if self.decomposable(s):
                remainder = _minus(self.full, s)
                if not any(_fits(g, remainder) for g in self.groups):
                    found.append(s)
        return found

    def cards(self, vector: Vector) -> tuple[Card, ...]:
        """The sorted multiset of codes a count vector stands for."""
        return tuple(c for c, n in zip(self.codes, vector, strict=True) for _ in range(n))


def capture_options(card: Card, table: Sequence[Card], rules: Rules) -> list[tuple[Card, ...]]:
    """K7.3: ``C(c)`` as sorted multisets of codes, in canonical order."""
    opts = _Options(card, table, rules)
    return sorted(opts.cards(v) for v in opts.captures())


def sweeps(card: Card, table: Sequence[Card], rules: Rules) -> bool:
    """K7.6 in its second form: ``T ≠ ∅`` and ``T`` is decomposable for ``c``.

    ``legal_moves`` uses the first form (``T ∈ C(c)``); the tests compare both
    with the engine, so each form checks the other.
    """
    if not table or len(eligible(card, table, rules)) != len(table):
        return False  # a card outside E(c) belongs to no group (K7.1)
    if sum(map(table_value, table)) % hand_value(card):
        return False  # every group sums to hv(c) (K7.2), so their union to a multiple of it
    opts = _Options(card, table, rules)
    return opts.decomposable(opts.full)


def legal_moves(hand: Sequence[Card], table: Sequence[Card], rules: Rules) -> list[Move]:
    """K7.7, deduplicated (K7.5) and in canonical order (K1.6)."""
    cards = sorted(set(hand))
    whole = tuple(sorted(table))
    options = {c: capture_options(c, table, rules) for c in cards}
    forced = [c for c in cards if table and whole in options[c]]
    if forced and not rules.no_forced_sweep:
        return [Move(c, whole) for c in forced]
    every = [Move(c, s) for c in cards for s in options[c]]
    every += [Move(c, ()) for c in cards if not options[c]]
    if rules.must_capture_if_able and any(m.captures for m in every):
        every = [m for m in every if m.captures]
    return _canonical(every)


def _canonical(moves: Iterable[Move]) -> list[Move]:
    """K1.6: by card, crawl before captures, then captures lexicographically."""
    return sorted(set(moves), key=lambda m: (m.card, len(m.captures) > 0, m.captures))


def sweep_ranks(table: Sequence[Card], rules: Rules) -> tuple[int, ...]:
    """K14.1: rank indices (0 = ace) of a card that would have ``T ∈ C``; none for ``∅``."""
    if not table:
        return ()
    # Suits play no part in K7.1-K7.3, so the spade of each rank stands for all four.
    return tuple(rank for rank in range(13) if sweeps(Card(rank * 4), table, rules))
