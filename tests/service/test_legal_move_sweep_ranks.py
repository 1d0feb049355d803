"""``LegalMove.sweep_ranks_after`` (K14.1): the ranks that would sweep the table a legal
move leaves the next seat, so a bot can leave it a forced sweep (K7.6, K9.1) without
card values of its own.

Within a deal it must be exactly what the view shows once the move is played: over a
real server, every candidate move of many positions is played from the same state
token (tokens are stateless, so one position branches into all its moves) and the
answer's ``sweep_ranks`` compared. Hand-built positions from the spec pin what sweeps
a lone card, aces, courts under ``court_cards_rank_only``, and the removal (K6) and
deal end (K11) that come between the last card of a distribution and the next seat.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence

import cardrules.client
import pytest
from cardrules.cards.v1 import cards_pb2
from cardrules.client import rank_code
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from engine.krypkasino import Config, Removal, Rules, State
from service import state_codec
from service.calls import CallInfo
from service.config import ServerConfig
from service.server import build_api, build_sealer
from service.tokens import KeyRing, SeatTokens
from tests.engine.krypkasino.helpers import cards, dealer_last_card, position, rest_of_deck
from tests.service.grpc_helpers import TIMEOUT, Stub

REMOVALS = (pb.REMOVAL_COURTS, pb.REMOVAL_SPADES, pb.REMOVAL_NONE)


def codes(ranks: Sequence[int]) -> list[str]:
    return [rank_code(rank) for rank in ranks]


# -- over a real server: every candidate move played --------------------------------


def check_position(
    stub: Stub, state: bytes, tokens: Sequence[bytes], before: pb.View, seen: Counter[str]
) -> list[pb.PlayResponse]:
    """Play every legal move of the seat to move in ``state`` (whose view is ``before``);
    each must leave the view's ``sweep_ranks`` it announced, or none if the deal ends."""
    seat = before.turn
    moves = stub.LegalMoves(
        pb.LegalMovesRequest(state=state, seat=seat, seat_token=tokens[seat]), timeout=TIMEOUT
    ).moves
    assert moves
    answers = []
    for legal in moves:
        played = stub.Play(
            pb.PlayRequest(state=state, seat=seat, seat_token=tokens[seat], move=legal.move),
            timeout=TIMEOUT,
        )
        after, ranks = played.view, list(legal.sweep_ranks_after)
        if after.game_over or after.deal_number != before.deal_number:
            assert ranks == [], "the deal ended: nobody plays to its table (K11.2)"
            seen["deal end"] += 1
        else:
            assert ranks == list(after.sweep_ranks), (codes(ranks), after.table)
            if after.distribution != before.distribution:
                seen["distribution end"] += 1
                seen["removal"] += any(e.HasField("cards_set_aside") for e in played.events)
            seen["sweepable" if ranks else "unsweepable"] += 1
        answers.append(played)
    return answers


@pytest.mark.parametrize("rank_only", [False, True], ids=["plain", "rank-only"])
@pytest.mark.parametrize("players", [2, 3, 4, 5, 6])
def test_every_move_announces_the_sweep_ranks_its_view_shows(
    stub: Stub, players: int, rank_only: bool
) -> None:
    """Each position of a whole first deal, its distribution ends (with each removal
    setting, K6) and its end included; one random move of each is played on."""
    seen: Counter[str] = Counter()
    for seed in (1, 2):
        rng = random.Random(seed * 10 + players)
        removal = REMOVALS[(seed + players) % len(REMOVALS)]
        rules = pb.Rules(court_cards_rank_only=rank_only, removal=removal)
        started = stub.NewGame(
            pb.NewGameRequest(config=pb.GameConfig(players=players, rules=rules), seed=seed),
            timeout=TIMEOUT,
        )
        state, tokens, view = started.state, list(started.seat_tokens), started.view
        while not view.game_over and view.deal_number == 1:
            chosen = rng.choice(check_position(stub, state, tokens, view, seen))
            state, view = chosen.state, chosen.view
    assert seen["deal end"] >= 2 and seen["distribution end"] >= 2, seen
    assert seen["removal"] >= 1, seen
    assert seen["sweepable"] >= 10 and seen["unsweepable"] >= 10, seen


# -- in-process: hand-built positions from the spec ----------------------------------

KEYS = KeyRing.parse(KeyRing.generate_key_text())
API = build_api(ServerConfig(), KEYS, None)
SEALER = build_sealer(KEYS, plain=ServerConfig().plain_state)
GAME_ID = "hand-built"


def announced(state: State) -> dict[str, list[str]]:
    """The mover's legal moves (``8S>5D+3H``) and their ``sweep_ranks_after`` as codes,
    from the in-process API given a sealed token of ``state``."""
    payload = state_codec.state_to_proto(state, GAME_ID).SerializeToString(deterministic=True)
    seat = state.turn
    answer = API.legal_moves(
        pb.LegalMovesRequest(
            state=SEALER.seal(payload),
            seat=seat,
            seat_token=SeatTokens(KEYS).issue(GAME_ID, seat),
        ),
        CallInfo(),
    )
    return {_move_text(legal.move): codes(legal.sweep_ranks_after) for legal in answer.moves}


def _move_text(move: pb.Move) -> str:
    def code(card: cards_pb2.Card) -> str:
        return rank_code(card.rank) + "SHDC"[card.suit - 1]

    captures = "+".join(code(card) for card in move.captures)
    return code(move.card) + (f">{captures}" if captures else "")


RANK_ONLY = Rules(court_cards_rank_only=True)


@pytest.mark.parametrize(
    ("table", "hand", "rules", "expected"),
    [
        # A capture leaving a lone 6: only a 6 sweeps it (K7.2, hand value = table value).
        ("6C 5D 3H", "8S", None, {"8S>3H+5D": ["6"]}),
        # A lone 10D left: its twin would double-sweep it (K8.3), a 10 of any suit sweep it.
        ("10D 3C", "3H", None, {"3H>3C": ["10"]}),
        # A lone ace left: no card has hand value 1 (an ace is 14 in hand, K7.9, KX32).
        ("AH 7C", "7D", None, {"7D>7C": []}),
        # Two aces left: a 2 takes both (K7.9).
        ("AH AC 5D", "5S", None, {"5S>5D": ["2"]}),
        # A crawl making KX31's first table: swept by a 6 (6C, 4D+2H) or a Q (all three).
        ("6C 4D", "2H", None, {"2H": ["6", "Q"]}),
        # A crawl making 5H 6C: a J takes 5+6 (KX9), unless courts take only courts (K16.7).
        ("5H", "6C", None, {"6C": ["J"]}),
        ("5H", "6C", RANK_ONLY, {"6C": []}),
        # A lone J left: a J sweeps it under either rule.
        ("JH 4C", "4S", RANK_ONLY, {"4S>4C": ["J"]}),
        # An ace and a king: the ace takes both (A = 14 = 1 + 13, K7.9), but not under
        # K16.7, where table courts are in no sum and a court takes only its rank.
        ("AH KC 9D", "9S", None, {"9S>9D": ["A"]}),
        ("AH KC 9D", "9S", RANK_ONLY, {"9S>9D": []}),
        # A sweep leaves an empty table: nothing sweeps it (K14.1, KX31).
        ("4H 5D", "9C", None, {"9C>4H+5D": []}),
    ],
)
def test_a_hand_built_move_announces_the_ranks_of_the_spec(
    table: str, hand: str, rules: Rules | None, expected: dict[str, list[str]]
) -> None:
    # Every hand holds as many cards as the mover's, which is first to play this round
    # (K15.3), so the distribution goes on after the move.
    state = position(table, {1: hand}, rules=rules, filler=len(cards(hand)))
    assert announced(state) == expected


def test_the_last_card_of_a_distribution_announces_the_table_after_removal() -> None:
    """K10.1, K6: the next distribution is dealt and KD set aside before the next seat
    plays, so 5H 6C is what it faces (J sweeps), not 5H KD 6C (nothing sweeps)."""
    config = Config(players=4)
    stock = rest_of_deck(cards("6C 5H KD"))[: config.later_distribution_size]
    for removal, ranks in ((Removal.COURTS, ["J"]), (Removal.NONE, [])):
        rules = Rules(removal=removal)
        last = dealer_last_card(
            Config(players=4, rules=rules), "6C", "5H KD", last_capturer=1, rest_to=1, stock=stock
        )
        assert announced(last) == {"6C": ranks}, removal


def test_the_last_card_of_a_deal_announces_nothing() -> None:
    """K11.2: the table goes to the last capturer and nobody plays to it; 5H 6C would
    be swept by a J within the deal."""
    last = dealer_last_card(Config(players=4), "6C", "5H", last_capturer=1, rest_to=1)
    assert announced(last) == {"6C": []}


# -- the client's rank codes ----------------------------------------------------------


def test_the_client_exports_rank_code_for_every_rank() -> None:
    assert "rank_code" in cardrules.client.__all__
    named = [rank_code(rank) for rank in cards_pb2.Rank.values() if rank]
    assert named == ["A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K"]
    assert rank_code(cards_pb2.RANK_SIX) == "6"


@pytest.mark.parametrize("rank", [cards_pb2.RANK_UNSPECIFIED, 14, -1])
def test_rank_code_refuses_a_number_no_rank_has(rank: int) -> None:
    with pytest.raises(ValueError, match="not a rank"):
        rank_code(rank)


@pytest.mark.parametrize("rank", ["6", 6.0, True, None])
def test_rank_code_refuses_anything_but_an_int(rank: object) -> None:
    with pytest.raises(TypeError, match="expected a Rank value"):
        rank_code(rank)  # type: ignore[arg-type]
