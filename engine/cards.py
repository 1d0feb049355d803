"""The shared card model: codes, decks and seeded shuffling (spec K1, K2.1).

A card is a small integer ``rank * 4 + suit`` so that sorting integers gives
the canonical order of K1.6 (rank ``A < 2 < ... < K``, then suit
``S < H < D < C``). Identical copies of a card share one code (K1.2).

>>> parse_card("10D"), card_str(parse_card("10D"))
(38, '10D')
>>> cards_str(sorted(parse_cards("QH AS 2C")))
'AS 2C QH'
"""

from __future__ import annotations

import hashlib
import operator
import random
from collections.abc import Iterable, Sequence
from typing import NewType, SupportsIndex, cast

Card = NewType("Card", int)

RANK_NAMES = ("A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K")
SUIT_NAMES = ("S", "H", "D", "C")
SPADES, HEARTS, DIAMONDS, CLUBS = range(4)
ACE, JACK, QUEEN, KING = 0, 10, 11, 12
CARDS_PER_DECK = 52

_BY_NAME = {
    rank + suit: Card(r * 4 + s)
    for r, rank in enumerate(RANK_NAMES)
    for s, suit in enumerate(SUIT_NAMES)
}
_NAMES = tuple(sorted(_BY_NAME, key=_BY_NAME.__getitem__))


class CardError(ValueError):
    """A card code or a deck that is not well formed."""


def make_card(rank: int, suit: int) -> Card:
    """The card of a rank index (0 = ace ... 12 = king) and a suit index."""
    return Card(rank * 4 + suit)


def rank_of(card: Card) -> int:
    """Rank index: 0 = ace, 1 = two, ..., 9 = ten, 10 = jack, 11 = queen, 12 = king."""
    return card >> 2


def suit_of(card: Card) -> int:
    """Suit index: 0 = spades, 1 = hearts, 2 = diamonds, 3 = clubs."""
    return card & 3


def parse_card(text: str) -> Card:
    """Read one card in the spec's notation (K1.1), case-insensitively."""
    card = _BY_NAME.get(text.strip().upper())
    if card is None:
        raise CardError(
            f"malformed card {text!r}: expected rank A,2-10,J,Q,K and suit S,H,D,C, e.g. 10D or AS"
        )
    return card


def parse_cards(text: str | Iterable[str]) -> list[Card]:
    """Read cards separated by white space or commas, or from a list of codes."""
    words = text.replace(",", " ").split() if isinstance(text, str) else list(text)
    return [parse_card(word) for word in words]


def card_str(card: Card) -> str:
    """The spec's code of a card (K1.1)."""
    return _NAMES[card]


def cards_str(cards: Iterable[Card]) -> str:
    """Codes of several cards, separated by spaces, in the order given."""
    return " ".join(_NAMES[c] for c in cards)


def full_deck(copies: int) -> tuple[Card, ...]:
    """Every card ``copies`` times, in canonical order (K2.1: two decks by default)."""
    return tuple(Card(c) for c in range(CARDS_PER_DECK) for _ in range(copies))


def holds_all(cards: Sequence[Card], part: Sequence[Card]) -> bool:
    """Multiset inclusion (K1.4): ``cards`` has every card of ``part``, copies counted."""
    return all(part.count(card) <= cards.count(card) for card in part)


def check_deck(deck: Sequence[Card], copies: int) -> None:
    """Raise CardError unless ``deck`` holds every card exactly ``copies`` times (and
    nothing that is no card code)."""
    counts = _card_counts(deck)
    missing = {c: copies - n for c, n in enumerate(counts) if n < copies}
    extra = {c: n - copies for c, n in enumerate(counts) if n > copies}
    if not missing and not extra:
        return
    parts = [f"a deck must hold {copies * CARDS_PER_DECK} cards, each code {_times(copies)}"]
    parts.append(f"got {len(deck) or 'none'}")
    if missing and deck:  # of an empty deck, every code: no news
        parts.append("missing " + _tally(missing))
    if extra:
        parts.append("extra " + _tally(extra))
    raise CardError("; ".join(parts))


def check_cards_of_one_deck(cards: Sequence[Card], copies: int) -> None:
    """Raise CardError unless ``cards`` could all come from one deck of ``copies`` copies.

    A draw for deal is taken from one shuffled full deck (K4.2), so no code may
    appear more than ``copies`` times.
    """
    counts = _card_counts(cards)
    extra = {c: n - copies for c, n in enumerate(counts) if n > copies}
    if extra:
        raise CardError(
            f"the cards must come from one deck, each code at most {_times(copies)}; "
            f"extra {_tally(extra)}"
        )


def _times(copies: int) -> str:
    return {1: "once", 2: "twice"}.get(copies, f"{copies} times")


def _tally(copies_by_code: dict[int, int]) -> str:
    """``AS x2, 2C``: each code once with how many copies, so the text stays short (at
    most 52 codes) however many cards a request sends; it travels in a refusal's trailers."""
    return ", ".join(
        _NAMES[code] + (f" x{count}" if count > 1 else "") for code, count in copies_by_code.items()
    )


def _card_counts(cards: Sequence[Card]) -> list[int]:
    """How often each card code appears in ``cards``; CardError for an item that is no
    card code (``_check_codes``)."""
    _check_codes(cards)
    counts = [0] * CARDS_PER_DECK
    for card in cards:
        counts[card] += 1
    return counts


def _check_codes(cards: Sequence[Card]) -> None:
    """Raise CardError unless every item is a card code, an int from 0 to 51 (K1.1).

    A deck or a draw comes from outside (a library caller's list): counted as list
    indices, -1 passed as KC, and 52 failed with a bare IndexError. Plain ints, the
    usual case, are checked by ``min`` and ``max``; an item of another type (a bool,
    which Python counts as an int, a float, or numpy's integers, which pass) sends the
    search for the first bad one.
    """
    if not cards:
        return
    if set(map(type, cards)) == {int} and min(cards) >= 0 and max(cards) < CARDS_PER_DECK:
        return
    for card in cards:
        if not _is_code(card):
            raise CardError(f"{card!r} is no card code: a card is an int from 0 (AS) to 51 (KC)")


def _is_code(card: object) -> bool:
    """An integer from 0 to 51: an int, or any integer type (numpy's, an IntEnum), but
    not a bool, which Python counts as one."""
    return (code := whole_number(card)) is not None and 0 <= code < CARDS_PER_DECK


def whole_number(value: object) -> int | None:
    """``value`` as an int if it is an integer of any type (``operator.index`` takes it:
    an int, numpy's integers, an IntEnum) other than a bool; else None."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(cast(SupportsIndex, value))
    except TypeError:
        return None


def seeded_rng(seed: int, *stream: str | int) -> random.Random:
    """A generator for one named stream of chance derived from the game seed.

    Each stream (a deal's deck, the draw for deal) gets its own generator so
    that the state only has to remember the seed, not a generator state.
    """
    material = ":".join(str(part) for part in (seed, *stream)).encode()
    return random.Random(int.from_bytes(hashlib.blake2b(material, digest_size=16).digest()))


def shuffled(cards: Sequence[Card], rng: random.Random) -> tuple[Card, ...]:
    """Fisher-Yates shuffle driven only by ``rng.random()``.

    ``random.shuffle`` may change between Python versions; ``random()`` from a
    given seed is guaranteed stable, so sealed games replay identically after
    an upgrade.
    """
    order = list(cards)
    for i in range(len(order) - 1, 0, -1):
        j = int(rng.random() * (i + 1))
        order[i], order[j] = order[j], order[i]
    return tuple(order)
