"""The checks of a plain token's GameState (``service.plain_state``) against positions no
game reaches: piles and sweep markers of moves not played (K8.3, K15.5), a table that
removal has not cleared (K6.1, K15.4), and a deal's first table not as dealt (K5.3,
K16.10); and, as a property, that every state random games reach passes them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.cards import SPADES, Card, card_str, suit_of
from engine.krypkasino import Config, Removal, Rules, State, TieRule, open_game
from engine.krypkasino.moves import is_court
from service.calls import CallInfo
from service.codec import CodecError
from service.config import ServerConfig
from service.errors import ServiceError
from service.plain_state import check_plain_state
from service.server import build_api
from service.state_codec import state_from_proto, state_to_proto
from service.tokens import PLAIN_FLAG, KeyRing
from tests.engine.krypkasino.configs import config_label, random_config
from tests.service.test_codec import GAME_ID, bordstabbe_deck, games, shuffled_decks
from tests.sizes import fuzz_examples

# --- helpers -----------------------------------------------------------------


def moves_this_deal(state: State) -> int:
    """K5.1: the cards dealt to the hands so far in the deal less those still held."""
    dealt = state.config.hand_cards_dealt(state.distribution)
    return dealt - sum(len(hand) for hand in state.hands)


def first_state(
    config: Config, wanted: Callable[[State], bool], seeds: range = range(1, 200)
) -> State:
    """The first state of the seeded random games of ``config`` that ``wanted`` holds for."""
    for seed in seeds:
        for state, _ in games(config, seed):
            if wanted(state):
                return state
    raise AssertionError(f"no state wanted in seeds {seeds}")


def refusal(msg: pb.GameState) -> str:
    """The whole message of the CodecError a plain token of ``msg`` is refused with."""
    with pytest.raises(CodecError) as raised:
        state_from_proto(pb.GameState.FromString(msg.SerializeToString()))
    assert raised.value.field == "state"
    return str(raised.value)


def swap(data: bytes, at: int, card: int) -> bytes:
    return data[:at] + bytes([card]) + data[at + 1 :]


# --- every reachable state passes ----------------------------------------------


def check_every_state(config: Config, seed: int, decks: int) -> Iterator[State]:
    """Each state of a seeded random game passes the plain checks and decodes to itself."""
    for state, _ in games(config, seed, shuffled_decks(decks, config.copies, seed)):
        msg = state_to_proto(state, GAME_ID)
        check_plain_state(msg)
        assert state_from_proto(msg)[0] == state, config_label(config)
        yield state


@settings(
    max_examples=fuzz_examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    config_seed=st.integers(0, 2**32),
    seed=st.integers(1, 2**63 - 1),
    decks=st.integers(0, 3),
)
def test_every_state_of_random_games_over_random_configs_passes_the_plain_checks(
    config_seed: int, seed: int, decks: int
) -> None:
    """Any valid config (``random_config``), seeded or with explicit decks for the first
    deals: no state of the match is refused, the openings of its deals and the starts of
    its distributions (where the new checks are exact) included."""
    config = random_config(config_seed)
    starts = deals = 0
    for state in check_every_state(config, seed, decks):
        if not state.over and moves_this_deal(state) == 0:
            deals += 1
        if not state.over and all(len(hand) == len(state.hands[0]) for hand in state.hands):
            starts += 1
    assert state.over and deals == len(state.results) and starts >= deals


@pytest.mark.parametrize(
    "config",
    [
        Config(2, rules=Rules(two_player_five_six=True, bordstabbe=True)),
        Config(5, rules=Rules(four_four=True, removal=Removal.SPADES)),
        Config(3, rules=Rules(single_deck=True, removal=Removal.NONE, bordstabbe=True)),
        Config(4, match_deals=4, draw_for_deal=True, rules=Rules(bordstabbe=True)),
        Config(6, match_deals=6, first_dealer=5, rules=Rules(removal=Removal.SPADES)),
    ],
    ids=config_label,
)
def test_dealing_variants_with_explicit_decks_pass(config: Config) -> None:
    """K16.1-K16.3 deal their first tables otherwise, K16.5 removes otherwise and K16.10
    looks at what removal left: the openings of deals from explicit decks are the
    engine's own."""
    states = list(check_every_state(config, seed=3, decks=config.players))
    assert states[-1].over


def test_a_tiebreak_deal_dealt_from_an_explicit_deck_passes() -> None:
    """K13.3: the tie-break deal is dealt like any other, from its deck when one is given."""
    config = Config(2, tie_rule=TieRule.TIEBREAK_DEAL, target_score=1)
    for seed in range(1, 400):
        states = list(check_every_state(config, seed, decks=2))
        if any(state.tiebreak for state in states):
            break
    else:
        raise AssertionError("no seed gave a tie-break deal")
    assert states[-1].over and len(states[-1].results) == 2


# --- piles and markers of moves not played (K8.3, K15.5) -------------------------


def test_the_reviewers_forged_opening_is_state_invalid_through_the_api() -> None:
    """The first table moved to the pile of seat 1, which never moved, as its capture
    and sweep: LegalMoves and GetView of a plain-mode server refuse it."""
    api = build_api(ServerConfig(plain_state=True), KeyRing.ephemeral(), None)
    game = api.new_game(pb.NewGameRequest(config=pb.GameConfig(players=2), seed=11), CallInfo())
    msg = pb.GameState.FromString(game.state[1:])
    assert msg.move_number == 0 and len(msg.table) == 4
    msg.piles[1], msg.table, msg.last_capturer = msg.table, b"", 1
    msg.markers[1] = msg.piles[1][:1]
    token = bytes([PLAIN_FLAG | 1]) + msg.SerializeToString()
    calls: list[Callable[[], object]] = [
        lambda: api.legal_moves(
            pb.LegalMovesRequest(state=token, seat=msg.turn, seat_token=game.seat_tokens[msg.turn]),
            CallInfo(),
        ),
        lambda: api.get_view(pb.GetViewRequest(state=token), CallInfo()),
    ]
    for call in calls:
        with pytest.raises(ServiceError) as raised:
            call()
        assert raised.value.reason == "STATE_INVALID"
        assert (
            "state: piles[1] holds 4 cards, but seat 1 has not moved in deal 1 "
            "(K8.3: only its captures fill a pile)"
        ) in str(raised.value)


def test_a_state_whose_config_combines_refused_rules_names_them_as_new_game_does() -> None:
    """The fields of a refused combination are joined by "and" in the state's refusal,
    as in NewGame's (docs/api.md, "Errors"), not by a comma (a review)."""
    api = build_api(ServerConfig(plain_state=True), KeyRing.ephemeral(), None)
    game = api.new_game(pb.NewGameRequest(config=pb.GameConfig(players=2), seed=11), CallInfo())
    msg = pb.GameState.FromString(game.state[1:])
    msg.config.rules.two_player_five_six = msg.config.rules.four_four = True
    token = bytes([PLAIN_FLAG | 1]) + msg.SerializeToString()
    with pytest.raises(ServiceError) as state_refused:
        api.get_view(pb.GetViewRequest(state=token), CallInfo())
    with pytest.raises(ServiceError) as new_game_refused:
        api.new_game(pb.NewGameRequest(config=msg.config), CallInfo())
    fields = "config.rules.two_player_five_six and config.rules.four_four"
    assert new_game_refused.value.message.startswith(f"{fields}: ")
    assert state_refused.value.reason == "STATE_INVALID"
    assert state_refused.value.message == f"state: {new_game_refused.value.message}"


def test_a_pile_of_a_seat_that_has_not_moved_this_deal_is_refused() -> None:
    """Three players, one move into deal 2: the seat after the next has not moved, so no
    table card is in its pile, nor is it the last capturer."""
    config = Config(3)
    state = first_state(config, lambda s: s.deal == 2 and moves_this_deal(s) == 1 and bool(s.table))
    idle = (state.dealer + 3) % 3  # the first player moved, then comes its neighbour
    msg = state_to_proto(state, GAME_ID)
    msg.piles[idle] += msg.table[-1:]
    msg.table = msg.table[:-1]
    msg.last_capturer = idle
    assert refusal(msg) == (
        f"state: piles[{idle}] holds 1 card, but seat {idle} has not moved in deal 2 "
        "(K8.3: only its captures fill a pile)"
    )


@pytest.mark.parametrize(("copies", "most"), [(2, 2), (1, 1)])
def test_more_sweep_markers_than_a_seats_moves_can_leave_are_refused(
    copies: int, most: int
) -> None:
    """One move leaves one marker, two for a double sweep (K8.3), which one deck cannot
    make (K16.3): a seat that has captured once holds no more, though its pile would."""
    config = Config(2, rules=Rules(single_deck=copies == 1))

    def one_big_capture(s: State) -> bool:
        moved = moves_this_deal(s)
        return 1 <= moved <= 2 and len(s.piles[(s.dealer + 1) % 2]) > most

    state = first_state(config, one_big_capture)
    seat = (state.dealer + 1) % 2
    msg = state_to_proto(state, GAME_ID)
    msg.markers[seat] = msg.piles[seat][: most + 1]
    assert refusal(msg) == (
        f"state: markers[{seat}] hold {most + 1} sweep markers, more than the {most} that "
        f"seat {seat}'s 1 move in deal {state.deal} can leave (at most {most} each, K8.3, "
        "K15.5)"
    )


# --- a table removal has not cleared (K6.1, K15.4) --------------------------------


def test_a_court_on_a_freshly_dealt_table_is_refused() -> None:
    """The reviewer's second case: default removal sets every court aside after the
    first distribution (K6.1), so none lies on the table before the first move."""
    state = open_game(Config(2), seed=11)[0]
    msg = state_to_proto(state, GAME_ID)
    at = next(i for i, card in enumerate(msg.stock) if is_court(Card(card)))
    court = msg.stock[at]
    msg.stock = swap(msg.stock, at, msg.table[0])
    msg.table = msg.table[1:] + bytes([court])
    assert refusal(msg).startswith(
        f"state: the table holds {card_str(Card(court))}, which removal courts sets aside after every "
        "distribution, and no move has been played in deal 1 yet (K6.1, K15.4)"
    )


def test_a_spade_on_the_table_at_the_start_of_a_later_distribution_is_refused() -> None:
    """K15.4 after every distribution, not only the first: under removal of spades a
    crawled spade goes when the next distribution is dealt."""
    config = Config(2, rules=Rules(removal=Removal.SPADES))
    state = first_state(
        config,
        lambda s: moves_this_deal(s) == config.hand_cards_dealt(1) and any(s.piles),
    )
    msg = state_to_proto(state, GAME_ID)
    seat = next(s for s, pile in enumerate(msg.piles) if pile)
    at = next(i for i, card in enumerate(msg.stock) if suit_of(Card(card)) == SPADES)
    spade, taken = msg.stock[at], msg.piles[seat][0]
    msg.stock = swap(msg.stock, at, taken)
    msg.piles[seat] = msg.piles[seat][1:]
    msg.markers[seat] = b""
    msg.table += bytes([spade])
    assert refusal(msg).startswith(
        f"state: the table holds {card_str(Card(spade))}, which removal spades sets aside after every "
        "distribution, and no move has been played in distribution 2 yet (K6.1, K15.4)"
    )


# --- a deal's first table as dealt (K5.3, K16.10) -------------------------------


@pytest.mark.parametrize("change", ["a hand card for a table card", "the table reordered"])
def test_an_opening_not_dealt_from_its_explicit_deck_is_refused(change: str) -> None:
    """With the deck given, the opening is the engine's deal of it (K5.3), card by card."""
    decks = shuffled_decks(2, 2, 5)
    state = next(s for s, _ in games(Config(2), 5, decks) if s.deal == 2)
    assert moves_this_deal(state) == 0 and len(state.table) > 1
    msg = state_to_proto(state, GAME_ID)
    if change == "the table reordered":
        msg.table = msg.table[::-1]
    else:
        hand = msg.hands[0]
        given = next(c for c in hand if c >> 2 not in {t >> 2 for t in msg.table})
        msg.hands[0] = bytes(sorted(hand.replace(bytes([given]), msg.table[:1], 1)))
        msg.table = bytes([given]) + msg.table[1:]
    assert refusal(msg) == (
        f"state: the hands, table and set-aside pile are not what seat {state.dealer} dealt "
        "from decks[1], and no move has been played in deal 2 yet (K5.3, K6.1)"
    )


def test_a_bordstabbe_the_first_table_makes_cannot_be_left_out() -> None:
    """K16.10: two players, dealer 1: ``bordstabbe_deck`` deals four fives, so seat 0,
    the first player, pays before play."""
    config = Config(2, first_dealer=1, match_deals=2, rules=Rules(bordstabbe=True))
    state = open_game(config, decks=[bordstabbe_deck()] * 2)[0]
    assert state.bordstabbe_seat == 0
    msg = state_to_proto(state, GAME_ID)
    msg.ClearField("bordstabbe_seat")
    assert refusal(msg) == (
        "state: bordstabbe_seat None, but deal 1's first table 5S 5H 5D 5C makes it 0 (K16.10)"
    )


def test_a_bordstabbe_of_a_first_table_of_several_values_is_refused() -> None:
    """K16.10 asks for one table value: seed 11's first table has several."""
    config = Config(2, rules=Rules(bordstabbe=True))
    state = open_game(config, seed=11)[0]
    assert state.bordstabbe_seat is None and len({c >> 2 for c in state.table}) > 1
    msg = state_to_proto(state, GAME_ID)
    msg.bordstabbe_seat = (state.dealer + 1) % 2
    assert refusal(msg).startswith(
        f"state: bordstabbe_seat {msg.bordstabbe_seat}, but deal 1's first table "
    )
    assert refusal(msg).endswith("makes it None (K16.10)")
