"""Cards in the specs' notation (Krypkasino K1.1): ``10D`` = 10 of diamonds, ``AS`` = ace of spades.

>>> card("10D")
rank: RANK_TEN
suit: SUIT_DIAMONDS
<BLANKLINE>
>>> card_code(card("as")), cards_code(cards("QH, 2c"))
('AS', 'QH 2C')
>>> rank_code(cards_pb2.RANK_SIX), rank_code(cards_pb2.RANK_QUEEN)
('6', 'Q')
"""

from __future__ import annotations

from collections.abc import Iterable

from google.protobuf.message import Message

from cardrules.cards.v1 import cards_pb2

RANK_CODES = ("A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K")
SUIT_CODES = ("S", "H", "D", "C")

# Enum values follow the code order from 1 (0 is _UNSPECIFIED in cards.proto).
_RANKS = {code: cards_pb2.Rank.ValueType(i) for i, code in enumerate(RANK_CODES, 1)}
_SUITS = {code: cards_pb2.Suit.ValueType(i) for i, code in enumerate(SUIT_CODES, 1)}


def card(code: str) -> cards_pb2.Card:
    """The ``Card`` message of a code such as ``"10D"`` or ``"AS"`` (case-insensitive).

    Raises ``ValueError`` for a string that is not rank ``A 2-10 J Q K`` plus suit
    ``S H D C``, ``TypeError`` for anything but a string.
    """
    if not isinstance(code, str):
        raise TypeError(f"expected a card code such as '10D' or 'AS', got {type(code).__name__}")
    text = code.strip().upper()
    rank, suit = _RANKS.get(text[:-1]), _SUITS.get(text[-1:])
    if rank is None or suit is None:
        raise ValueError(
            f"malformed card {code!r}: expected rank A,2-10,J,Q,K and suit S,H,D,C, e.g. 10D or AS"
        )
    return cards_pb2.Card(rank=rank, suit=suit)


def cards(codes: str | Iterable[str]) -> list[cards_pb2.Card]:
    """Several cards from codes separated by spaces or commas, or from a list of codes."""
    if isinstance(codes, str):
        return [card(word) for word in codes.replace(",", " ").split()]
    if isinstance(codes, bytes | Message) or not isinstance(codes, Iterable):
        raise TypeError(
            f"expected card codes such as '10D AS' or ['10D', 'AS'], got {type(codes).__name__}"
        )
    return [card(word) for word in codes]


def card_code(message: cards_pb2.Card) -> str:
    """The code of a ``Card`` message, e.g. ``"10D"``; ``ValueError`` if rank or suit is
    unset or unknown, ``TypeError`` for anything but a ``Card``."""
    if not isinstance(message, cards_pb2.Card):
        raise TypeError(
            f"expected a Card message (card('AS') builds one), got {type(message).__name__}"
        )
    if not (1 <= message.rank <= len(RANK_CODES) and 1 <= message.suit <= len(SUIT_CODES)):
        raise ValueError(f"card without a valid rank and suit: {_described(message)}")
    return RANK_CODES[message.rank - 1] + SUIT_CODES[message.suit - 1]


def rank_code(rank: int) -> str:
    """The code of a ``Rank`` value, e.g. ``"6"`` for ``RANK_SIX``: the ranks a
    ``View.sweep_ranks`` or a ``LegalMove.sweep_ranks_after`` holds (K14.1).

    ``ValueError`` for ``RANK_UNSPECIFIED`` or a number the enum does not name,
    ``TypeError`` for anything but an int.
    """
    if not isinstance(rank, int) or isinstance(rank, bool):
        raise TypeError(f"expected a Rank value such as RANK_SIX, got {type(rank).__name__}")
    if not 1 <= rank <= len(RANK_CODES):
        raise ValueError(f"not a rank: {rank} (RANK_ACE = 1 to RANK_KING = 13)")
    return RANK_CODES[rank - 1]


def cards_code(messages: Iterable[cards_pb2.Card]) -> str:
    """Codes of several cards separated by spaces, in the order given."""
    if isinstance(messages, str | bytes | Message) or not isinstance(messages, Iterable):
        raise TypeError(
            f"expected Card messages (cards('AS KD') builds a list), got {type(messages).__name__}"
        )
    return " ".join(card_code(message) for message in messages)


def _described(message: cards_pb2.Card) -> str:
    """``rank 99, suit SUIT_SPADES``: on one line, unlike protobuf's text format, which
    also leaves an unset field out; a number the enum does not name as the number."""
    rank, suit = message.rank, message.suit
    rank_name = cards_pb2.Rank.Name(rank) if rank in cards_pb2.Rank.values() else str(rank)
    suit_name = cards_pb2.Suit.Name(suit) if suit in cards_pb2.Suit.values() else str(suit)
    return f"rank {rank_name}, suit {suit_name}"
