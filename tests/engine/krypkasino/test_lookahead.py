"""The table the next seat plays to (``engine/krypkasino/lookahead.py``; K8, K10.1, K6, K11.2).

``next_table`` and ``sweep_ranks_after`` are what ``LegalMoves`` announces with each
move (``sweep_ranks_after``, K14.1). Ordinary play rarely puts the three cases side
by side, so each is pinned here on a position dealt through the engine, and held to
what ``play`` then does: mid-distribution the table the move leaves (K8); at the
distribution's last card with stock left, that table less K6 removal (K10.1); at
the deal's last card, nothing, for the table goes to the recipient (K11.2).
"""

from __future__ import annotations

import random

import pytest

from engine.krypkasino import Config, Move, Rules, legal_moves, new_game, play, sweep_ranks
from engine.krypkasino.invariants import check_state
from engine.krypkasino.lookahead import next_table, sweep_ranks_after, table_after
from engine.krypkasino.state import State
from tests.engine.krypkasino.helpers import cards, dealer_last_card, position, stacked_deck

CONFIG = Config(players=2)
# The dealer's last card crawls (no 5 or sum of 5 on the table), so the table it leaves
# keeps a court that K6 removal sets aside (K6.1, the default ``courts``).
LAST_CARD, TABLE = "5H", "2C QD"
CRAWL = Move.parse(LAST_CARD)


def _last_card(stock_left: bool) -> State:
    """The dealer about to play ``LAST_CARD`` to ``TABLE``, with a later distribution's
    worth of stock left or none (the deal's last distribution)."""
    used = f"{LAST_CARD} {TABLE}"
    later = stacked_deck(CONFIG.schedule.later_rounds, 2, CONFIG.first_dealer, used=used)
    stock = later[: CONFIG.later_distribution_size] if stock_left else []
    state = dealer_last_card(CONFIG, LAST_CARD, TABLE, stock=stock, last_capturer=1, rest_to=1)
    check_state(state)
    assert legal_moves(state, state.turn) == [CRAWL]
    return state


def test_k8_mid_distribution_the_next_seat_plays_to_the_table_the_move_leaves() -> None:
    """K8.2: a crawl adds its card, and the next seat plays to that table as it is
    (no removal mid-distribution, K6.2)."""
    state = position("2C QD", {1: "5H 9S"}, players=2)
    after, _ = play(state, 1, CRAWL)
    assert next_table(state, CRAWL) == table_after(state.table, CRAWL) == after.table
    assert after.table == cards("2C QD 5H")
    assert sweep_ranks_after(state, [CRAWL]) == [sweep_ranks(after.table, CONFIG.rules)]


def test_k10_1_after_a_distributions_last_card_removal_comes_before_the_next_seat() -> None:
    """K10.1, K6.1: stock is left, so the same dealer deals again and removal sets the
    court aside before ``next(dealer)`` plays."""
    state = _last_card(stock_left=True)
    after, _ = play(state, state.turn, CRAWL)
    assert not after.over and after.deal == state.deal
    assert next_table(state, CRAWL) == after.table == cards("2C 5H")
    assert sweep_ranks_after(state, [CRAWL]) == [sweep_ranks(after.table, CONFIG.rules)]


def test_k11_2_the_deals_last_card_leaves_no_table_to_play_to() -> None:
    """K10.1, K11.2: the stock is empty, so the dealer's last card ends the deal; the
    table it leaves (non-empty, and not emptied by removal) goes to the recipient,
    and nobody plays to it: no next table, and so no sweep ranks to announce."""
    state = _last_card(stock_left=False)
    assert table_after(state.table, CRAWL) == cards("2C QD 5H")
    after, _ = play(state, state.turn, CRAWL)
    assert after.deal == state.deal + 1  # the deal ended; a new one is dealt
    assert next_table(state, CRAWL) == ()
    assert sweep_ranks_after(state, [CRAWL]) == [()]


@pytest.mark.parametrize(
    ("table", "hand", "move"),
    [("5H 5C", "10D 4C", "10D>5H+5C"), ("JH", "JD 4C", "JD>JH")],
    ids=["plain_sweep", "court_double_sweep"],
)
def test_k14_1_k16_7_a_sweep_leaves_no_sweep_ranks_with_rank_only_courts(
    table: str, hand: str, move: str
) -> None:
    """K14.1: an empty table has no sweep ranks, also under K16.7
    ``court_cards_rank_only``, whose courts match by rank (they would "sweep" an empty
    table by rank if the empty case were not its own)."""
    rules = Rules(court_cards_rank_only=True)
    state = position(table, {1: hand}, rules=rules)
    sweep = Move.parse(move)
    assert sweep in legal_moves(state, 1)
    after, _ = play(state, 1, sweep)
    assert after.table == ()
    assert sweep_ranks_after(state, [sweep]) == [sweep_ranks(after.table, rules)] == [()]


# Seeds whose deals include a distribution's last card with moves that leave different
# tables (3 and 4 players), where the announcements' order shows.
@pytest.mark.parametrize(("players", "seed"), [(2, 2), (3, 4), (4, 10), (6, 6)])
def test_every_move_announces_the_sweep_ranks_of_the_table_it_leaves(
    players: int, seed: int
) -> None:
    """Through a whole first deal of random play: each legal move's announced sweep
    ranks, in the order of the moves, are those of the table ``play`` then leaves
    (after a capture, a distribution's last card and removal), or none once the move
    ends the deal. The service test of LegalMoves checks the same over the wire; this
    keeps the engine's own suite from passing without it."""
    chooser = random.Random(seed)
    state = new_game(Config(players=players), seed=seed)
    rules = state.config.rules
    while state.deal == 1:
        moves = legal_moves(state, state.turn)
        expected = []
        for move in moves:
            after, _ = play(state, state.turn, move)
            expected.append(() if after.deal != state.deal else sweep_ranks(after.table, rules))
        assert sweep_ranks_after(state, moves) == expected, state
        state, _ = play(state, state.turn, chooser.choice(moves))
