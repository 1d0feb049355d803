"""The Python client's refusals of its arguments (clients/python/README.md, "Teams,
house rules and match length").

Every argument protobuf would refuse is refused before the call, naming the
argument (its path inside a dict the caller gave, ``config.players``) and what
it takes, with protobuf's exception type: ``TypeError`` for a wrong type,
``ValueError`` for a value out of range. The card helpers raise ``TypeError``
for anything that is not what they convert. No server is needed: nothing here
reaches the channel.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cardrules.cards.v1 import cards_pb2
from cardrules.client import (
    AsyncKrypkasinoClient,
    KrypkasinoClient,
    card,
    card_code,
    cards,
    cards_code,
    messages,
)
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

INT32 = "an int32 (-2147483648 to 2147483647)"
UINT64 = "a uint64 (0 to 18446744073709551615)"
MOVE = (
    "a Move message (krypkasino_pb2.Move(card=card('AS'), captures=cards('...')) builds one, "
    "or pass a LegalMove from legal_moves)"
)
DECK = "Deck message (cards_pb2.Deck(cards=cards('AS KD ...')) builds one)"
DECKS = "Deck messages (cards_pb2.Deck(cards=cards('AS KD ...')) builds one)"
CARD = "a Card message (card('AS') builds one)"
RANKS = (
    "a Rank (RANK_UNSPECIFIED, RANK_ACE, RANK_TWO, RANK_THREE, RANK_FOUR, RANK_FIVE, "
    "RANK_SIX, RANK_SEVEN, RANK_EIGHT, RANK_NINE, RANK_TEN, RANK_JACK, RANK_QUEEN, "
    "RANK_KING, or its number)"
)

Call = Callable[[KrypkasinoClient], object]


@pytest.fixture(scope="module")
def client() -> Iterator[KrypkasinoClient]:
    with KrypkasinoClient("127.0.0.1:1") as made:  # never dialled: every call is refused first
        yield made


def refusal(client: KrypkasinoClient, call: Call) -> tuple[type[BaseException], str]:
    with pytest.raises((TypeError, ValueError)) as refused:
        call(client)
    return refused.type, str(refused.value)


# Each call's keywords are Any: these are the arguments a type checker would refuse.
OUT_OF_RANGE: list[tuple[Call, str]] = [
    (lambda c: c.new_game(players=2, seed=-1), f"seed: must be {UINT64}, not -1"),
    (lambda c: c.new_game(seed=2**64), f"seed: must be {UINT64}, not {2**64}"),
    (
        lambda c: c.legal_moves(state=b"x", seat=2**31),
        f"seat: must be {INT32}, not 2147483648",
    ),
    (lambda c: c.new_game(players=2**31), f"players: must be {INT32}, not 2147483648"),
    (
        lambda c: c.new_game(config=_any({"players": -(2**31) - 1})),
        f"config.players: must be {INT32}, not -2147483649",
    ),
    (
        lambda c: c.new_game(config=_any({"players": 2**40}), players=2),
        f"config.players: must be {INT32}, not {2**40}",
    ),
    (
        lambda c: c.new_game(decks=_any([{"cards": [{"rank": "X"}]}])),
        f"decks[0].cards[0].rank: must be {RANKS}, not 'X'",
    ),
    # No field of that name inside a dict: protobuf's words, after the path.
    (
        lambda c: c.new_game(config=_any({"playerz": 2})),
        'config.playerz: Protocol message GameConfig has no "playerz" field.',
    ),
]


def _any(value: object) -> Any:
    return value


@pytest.mark.parametrize(("call", "message"), OUT_OF_RANGE)
def test_a_value_out_of_range_is_a_value_error_naming_the_argument(
    client: KrypkasinoClient, call: Call, message: str
) -> None:
    assert refusal(client, call) == (ValueError, message)


WRONG_TYPE: list[tuple[Call, str]] = [
    (lambda c: c.new_game(players=_any("2")), f"players: expected {INT32}, got str"),
    (lambda c: c.new_game(players=_any(True)), f"players: expected {INT32}, got bool"),
    (lambda c: c.new_game(seed=_any("7")), f"seed: expected {UINT64}, got str"),
    (lambda c: c.get_view(state=b"x", seat=_any(1.0)), f"seat: expected {INT32}, got float"),
    (
        lambda c: c.new_game(config=_any({"players": "2"})),
        f"config.players: expected {INT32}, got str",
    ),
    (
        lambda c: c.new_game(config=_any({"rules": {"single_deck": "yes"}})),
        "config.rules.single_deck: expected a bool, got str",
    ),
    (
        lambda c: c.new_game(config=_any("4 players"), players=2),
        "config: expected a GameConfig message "
        "(krypkasino_pb2.GameConfig(players=2) builds one), got str",
    ),
    (
        lambda c: c.play(state=b"x", seat=0, seat_token=b"t", move=_any("AS")),
        f"move: expected {MOVE}, got str",
    ),
    (lambda c: c.play(move=_any(card("AS"))), f"move: expected {MOVE}, got Card"),
    (lambda c: c.play(move=_any({"card": "AS"})), f"move.card: expected {CARD}, got str"),
    (lambda c: c.new_game(decks=_any(["AS KD"])), f"decks[0]: expected a {DECK}, got str"),
    (lambda c: c.new_game(decks=_any("AS KD")), f"decks: expected a list of {DECKS}, got str"),
    (
        lambda c: c.new_game(decks=_any({"cards": cards("AS")})),
        f"decks: expected a list of {DECKS}, got dict",
    ),
    (
        lambda c: c.new_game(decks=_any(cards_pb2.Deck())),
        f"decks: expected a list of {DECKS}, got Deck",
    ),
    (
        lambda c: c.new_game(decks=_any(deck for deck in [cards_pb2.Deck(), "AS"])),
        f"decks[1]: expected a {DECK}, got str",
    ),
    (
        lambda c: c.new_game(decks=_any([{"cards": ["AS"]}])),
        f"decks[0].cards[0]: expected {CARD}, got str",
    ),
    (lambda c: c.new_game(draw=_any("AS KD")), f"draw: expected a {DECK}, got str"),
    (
        lambda c: c.play(_any(pb.ScoreRequest())),
        "request: expected a cardrules.krypkasino.v1.PlayRequest, got ScoreRequest",
    ),
]


@pytest.mark.parametrize(("call", "message"), WRONG_TYPE)
def test_a_wrong_type_is_a_type_error_naming_the_argument_and_what_it_takes(
    client: KrypkasinoClient, call: Call, message: str
) -> None:
    assert refusal(client, call) == (TypeError, message)


def test_the_async_client_names_the_argument_too() -> None:
    async def refused() -> str:
        async with AsyncKrypkasinoClient("127.0.0.1:1") as client:
            with pytest.raises(ValueError) as error:
                await client.new_game(players=2, seed=-1)
            return str(error.value)

    assert asyncio.run(refused()) == f"seed: must be {UINT64}, not -1"


def test_players_overrides_a_config_given_as_a_dict() -> None:
    """protobuf takes a dict for a message field; ``players`` overrides it as it does a
    ``GameConfig``, keeping the config's other fields."""
    config: Any = {"players": 3, "match_deals": 6}
    request = messages.new_game(None, config, 2, None, None, None)
    assert request.config == pb.GameConfig(players=2, match_deals=6)


def test_decks_from_a_generator_still_build_the_request() -> None:
    """The generator is listed once, so protobuf and a refusal both see every deck."""
    decks = (cards_pb2.Deck(cards=cards(codes)) for codes in ["AS KD", "10D"])
    request = messages.new_game(None, None, 2, None, decks, None)
    assert [cards_code(deck.cards) for deck in request.decks] == ["AS KD", "10D"]


# -- card helpers ----------------------------------------------------------------

CARD_CODE = "a card code such as '10D' or 'AS'"
CARD_CODES = "card codes such as '10D AS' or ['10D', 'AS']"
CARD_MESSAGES = "Card messages (cards('AS KD') builds a list)"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: card(_any(None)), f"expected {CARD_CODE}, got NoneType"),
        (lambda: card(_any(b"AS")), f"expected {CARD_CODE}, got bytes"),
        (lambda: cards(_any(None)), f"expected {CARD_CODES}, got NoneType"),
        (lambda: cards(_any(b"AS KD")), f"expected {CARD_CODES}, got bytes"),
        (lambda: cards(_any(["AS", 10])), f"expected {CARD_CODE}, got int"),
        (lambda: card_code(_any("AS")), f"expected {CARD}, got str"),
        (lambda: card_code(_any(pb.Move(card=card("AS")))), f"expected {CARD}, got Move"),
        (lambda: cards_code(_any("AS")), f"expected {CARD_MESSAGES}, got str"),
        (lambda: cards_code(_any(card("AS"))), f"expected {CARD_MESSAGES}, got Card"),
        (lambda: cards_code(_any(None)), f"expected {CARD_MESSAGES}, got NoneType"),
        (lambda: cards_code(_any([card("AS"), "KD"])), f"expected {CARD}, got str"),
    ],
)
def test_the_card_helpers_raise_type_error_naming_what_they_take(
    call: Callable[[], object], message: str
) -> None:
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        call()


@pytest.mark.parametrize(
    ("message", "described"),
    [
        (
            cards_pb2.Card(rank=cards_pb2.Rank.ValueType(99), suit=cards_pb2.SUIT_SPADES),
            "rank 99, suit SUIT_SPADES",
        ),
        (cards_pb2.Card(), "rank RANK_UNSPECIFIED, suit SUIT_UNSPECIFIED"),
        (
            cards_pb2.Card(rank=cards_pb2.RANK_KING, suit=cards_pb2.Suit.ValueType(-1)),
            "rank RANK_KING, suit -1",
        ),
    ],
)
def test_card_code_describes_an_invalid_card_on_one_line(
    message: cards_pb2.Card, described: str
) -> None:
    with pytest.raises(ValueError) as refused:
        card_code(message)
    assert str(refused.value) == f"card without a valid rank and suit: {described}"
