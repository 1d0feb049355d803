"""Cards in the specs' notation (Krypkasino K1.1): ``10D`` = 10 of diamonds, ``AS`` = ace of spades.

>>> card("10D")
rank: RANK_TEN
suit: SUIT_DIAMONDS
<BLANKLINE>
>>> card_code(card("as")), cards_code(cards("QH, 2c"))
('AS', 'QH 2C')
"""

from __future__ import annotations

from collections.abc import Iterable

from cardrules.cards.v1 import cards_pb2

RANK_CODES = ("A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K")
SUIT_CODES = ("S", "H", "D", "C")

# Enum values follow the code order from 1 (0 is _UNSPECIFIED in cards.proto).
_RANKS = {code: cards_pb2.Rank.ValueType(i) for i, code in enumerate(RANK_CODES, 1)}
_SUITS = {code: cards_pb2.Suit.ValueType(i) for i, code in enumerate(SUIT_CODES, 1)}


def card(code: str) -> cards_pb2.Card:
    """The ``Card`` message of a code such as ``"10D"`` or ``"AS"`` (case-insensitive).

    Raises ``ValueError`` for anything that is not rank ``A 2-10 J Q K`` plus suit ``S H D C``.
    """
    text = code.strip().upper()
    rank, suit = _RANKS.get(text[:-1]), _SUITS.get(text[-1:])
    if rank is None or suit is None:
        raise ValueError(
            f"malformed card {code!r}: expected rank A,2-10,J,Q,K and suit S,H,D,C, e.g. 10D or AS"
        )
    return cards_pb2.Card(rank=rank, suit=suit)


def cards(codes: str | Iterable[str]) -> list[cards_pb2.Card]:
    """Several cards from codes separated by spaces or commas, or from a list of codes."""
    words = codes.replace(",", " ").split() if isinstance(codes, str) else codes
    return [card(word) for word in words]


def card_code(message: cards_pb2.Card) -> str:
    """The code of a ``Card`` message, e.g. ``"10D"``; ``ValueError`` if rank or suit is unset."""
    if not (1 <= message.rank <= len(RANK_CODES) and 1 <= message.suit <= len(SUIT_CODES)):
        raise ValueError(f"card without a valid rank and suit: {message!r}")
    return RANK_CODES[message.rank - 1] + SUIT_CODES[message.suit - 1]


def cards_code(messages: Iterable[cards_pb2.Card]) -> str:
    """Codes of several cards separated by spaces, in the order given."""
    return " ".join(card_code(message) for message in messages)
