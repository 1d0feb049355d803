"""The acceptance examples of spec K18, one test per example ID (KA ... KX33).

Legal sets are compared as lists against the sorted expectation, which checks
the exact set, the absence of duplicates (K7.5) and the canonical order (K1.6).
Tables are multisets (K1.2) and are compared sorted.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import pytest

from engine.cards import JACK, SPADES, Card, full_deck, rank_of, suit_of
from engine.krypkasino import (
    Config,
    ConfigError,
    DealResult,
    Move,
    Removal,
    Rules,
    SeatScore,
    State,
    SweepKind,
    Teams,
    TieRule,
    legal_moves,
    new_game,
    open_game,
    play,
    score,
    score_deal,
    sweep_kind,
    sweep_ranks,
    view,
)
from engine.krypkasino.events import (
    Bordstabbe,
    Captured,
    CardsSetAside,
    DealEnded,
    DealerDrawn,
    DistributionDealt,
    Event,
    MatchEnded,
    TiebreakDeal,
)
from engine.krypkasino.invariants import check_opening, check_state, check_transition
from engine.krypkasino.scoring import match_outcome, match_totals
from tests.engine.krypkasino.helpers import (
    cards,
    dealer_last_card,
    finish_deal,
    legal,
    moves,
    only,
    piles_from_events,
    play_text,
    position,
    ranks,
    rest_of_deck,
    stacked_deck,
    sweep_parts,
    with_hand,
)

FOUR_FIRST = ((3, 2), (2, 2))  # K5.1, n = 4
SIX_FIRST = ((3, 2), (2, 0))  # K5.1, n = 6
LATER = ((2, 0), (2, 0))  # K5.1, every later distribution


def same(actual: tuple[Card, ...] | list[Card], text: str) -> bool:
    """Multiset equality with cards in spec notation (K1.2)."""
    return sorted(actual) == sorted(cards(text))


def ranks_of(table: str, rules: Rules | None = None) -> set[int]:
    return set(sweep_ranks(cards(table), rules or Rules()))


def play_move(state: State, seat: int, text: str) -> tuple[State, list[Event]]:
    """Play through the validated entry point, checking the K15 transition invariants."""
    move = Move.parse(text)
    after, events = play(state, seat, move)
    check_transition(state, move, after, events)
    return after, events


def captured(events: list[Event]) -> Captured:
    return only(events, Captured)


# --- Pagat's worked examples -------------------------------------------------------------


def test_ka_crawl_or_capture():
    assert legal("8H 9C JH", "8D 6C") == moves("6C", "8D>8H")
    state = position("8H 9C JH", {1: "8D 6C"})
    after, events = play_move(state, 1, "8D>8H")
    assert same(after.table, "9C JH")
    assert same(after.piles[1], "8D 8H")
    assert after.markers[1] == ()
    assert captured(events).sweep is SweepKind.NONE
    assert captured(events).conceded_by is None  # no sweep, so nobody pays (K9.1)
    assert after.last_capturer == 1


def test_kb_all_disjoint_groups_at_once():
    assert legal("AH 2H 6C 7D 8H 9C JH", "8D 6D") == moves("6D>6C", "8D>AH+2H+6C+7D+8H")
    state = position("AH 2H 6C 7D 8H 9C JH", {1: "8D 6D"})
    after, events = play_move(state, 1, "8D>AH+2H+6C+7D+8H")
    assert same(after.table, "9C JH")
    assert len(after.piles[1]) == 6
    assert same(after.piles[1], "8D AH 2H 6C 7D 8H")
    assert after.markers[1] == ()
    assert captured(events).sweep is SweepKind.NONE


def test_kc_overlapping_groups_choose_one():
    table = "2H 3C 4D 5H 8C 10C"
    expected = {"AH>4D+10C": "2H 3C 5H 8C", "AH>2H+4D+8C": "3C 5H 10C", "AH>2H+3C+4D+5H": "8C 10C"}
    assert legal(table, "AH") == moves(*expected)
    for move, left in expected.items():
        after, _ = play_move(position(table, {1: "AH"}), 1, move)
        assert same(after.table, left), move


def test_kc2_ace_from_hand_never_takes_a_lone_table_ace():
    assert legal("AC", "AH") == moves("AH")
    after, _ = play_move(position("AC", {1: "AH"}), 1, "AH")
    assert same(after.table, "AC AH")


def test_kd1_crawling_an_ace():
    table = "AH 4C 6D QH"
    assert legal(table, "AC 7H JD") == moves("AC", "7H>AH+6D", "JD>AH+4C+6D")
    after, _ = play_move(position(table, {1: "AC 7H JD"}), 1, "AC")
    assert same(after.table, "AH 4C 6D QH AC")
    assert set(sweep_ranks(after.table, Rules())) == ranks("Q")


def test_kd1b_forced_sweep():
    table = "AH AC 4C 6D QH"
    assert legal(table, "QD 2C") == moves("QD>AH+AC+4C+6D+QH")
    after, events = play_move(position(table, {1: "QD 2C"}), 1, "QD>AH+AC+4C+6D+QH")
    assert captured(events).sweep is SweepKind.SWEEP
    assert after.table == ()
    assert after.markers[1] == cards("QD")
    assert sweep_parts(after) == [-5, 5, 0, 0]


def test_kd2_sweep_for_an_ace():
    state = position("AH 8C", {1: "5D", 2: "AD 9H"})
    assert legal_moves(state, 1) == moves("5D")
    state, _ = play_move(state, 1, "5D")
    assert same(state.table, "AH 8C 5D")
    assert set(sweep_ranks(state.table, Rules())) == ranks("A")
    assert legal_moves(state, 2) == moves("AD>AH+8C+5D")
    state, events = play_move(state, 2, "AD>AH+8C+5D")
    assert captured(events).sweep is SweepKind.SWEEP
    assert captured(events).conceded_by == 1
    assert sweep_parts(state) == [0, -5, 5, 0]


def test_ke_crawl_changes_the_sweep_card():
    table = "2H 6C 5D"
    assert legal(table, "KC 3H") == moves("KC>2H+5D+6C")
    assert legal(table, "3H 9C") == moves("3H", "9C")
    state = position(table, {1: "3H 9C", 2: "8D KC"})
    state, _ = play_move(state, 1, "3H")
    assert same(state.table, "2H 6C 5D 3H")
    assert set(sweep_ranks(state.table, Rules())) == ranks("8")
    assert legal_moves(state, 2) == moves("8D>2H+3H+5D+6C")
    state, events = play_move(state, 2, "8D>2H+3H+5D+6C")
    assert captured(events).sweep is SweepKind.SWEEP
    assert sweep_parts(state) == [0, -5, 5, 0]


def test_kf_capturing_to_set_up_a_sweep():
    table, hand = "3H 5C 9D", "3C 5D 8C 9H QD AD"
    expected = {
        "3C>3H": ("5C 9D", "A"),
        "5D>5C": ("3H 9D", "Q"),
        "8C>3H+5C": ("9D", "9"),
        "9H>9D": ("3H 5C", "8"),
        "QD>3H+9D": ("5C", "5"),
        "AD>5C+9D": ("3H", "3"),
    }
    assert legal(table, hand) == moves(*expected)
    for move, (left, sweep_for) in expected.items():
        after, _ = play_move(position(table, {1: hand}), 1, move)
        assert same(after.table, left), move
        assert set(sweep_ranks(after.table, Rules())) == ranks(sweep_for), move


def test_kg_sweep_for_two_ranks():
    assert legal("JH 6C 4D 2H", "JC") == moves("JC>JH")
    state = position("JH 6C 4D 2H", {1: "JC", 2: "6H QC 4H"})
    state, _ = play_move(state, 1, "JC>JH")
    assert same(state.table, "6C 4D 2H")
    assert set(sweep_ranks(state.table, Rules())) == ranks("6 Q")
    assert legal_moves(state, 2) == moves("6H>2H+4D+6C", "QC>2H+4D+6C")
    assert Move.parse("4H>4D") not in legal_moves(state, 2)


def test_kh_forced_double_sweep_or_the_other_suit():
    assert legal("3H 5S", "3C 4D") == moves("3C>3H", "4D")
    state = position("3H 5S", {1: "3C 4D", 2: "5S 9H"})
    state, _ = play_move(state, 1, "3C>3H")
    assert same(state.table, "5S")
    # (a) the twin is forced and scores a double sweep against the 3C player.
    assert legal_moves(state, 2) == moves("5S>5S")
    after, events = play_move(state, 2, "5S>5S")
    assert captured(events).sweep is SweepKind.DOUBLE
    assert captured(events).conceded_by == 1
    assert after.markers[2] == cards("5S 5S")
    assert sweep_parts(after) == [0, -10, 10, 0]
    points = score_deal(after.config, after.piles, after.markers, 2, None)
    assert points[2].other_spades == 2
    assert points[2].card_points == 2
    # (b) with another 5 the player may choose the ordinary sweep.
    other = with_hand(state, 2, "5S 5D")
    assert legal_moves(other, 2) == moves("5S>5S", "5D>5S")
    assert sweep_kind(other.table, Move.parse("5S>5S")) is SweepKind.DOUBLE
    assert sweep_kind(other.table, Move.parse("5D>5S")) is SweepKind.SWEEP
    after, _ = play_move(other, 2, "5D>5S")
    assert after.markers[2] == cards("5D")
    assert sweep_parts(after) == [0, -5, 5, 0]


@pytest.mark.parametrize("table", ["4C 7S JD", "JD 4C 7S", "7S JD 4C"])
def test_ki1_identical_card_but_not_alone(table):
    """Wherever the twin lies on the table, sweeping it with other cards is ordinary."""
    assert legal(table, "JD") == moves("JD>4C+7S+JD")
    after, events = play_move(position(table, {1: "JD"}), 1, "JD>4C+7S+JD")
    assert captured(events).sweep is SweepKind.SWEEP
    assert after.markers[1] == cards("JD")
    assert sweep_parts(after) == [-5, 5, 0, 0]
    assert score_deal(after.config, after.piles, after.markers, 1, None)[1].card_points == 1


def test_ki2_removal_creates_a_sweep():
    """K6.4: removal leaves a table the first player must sweep (K7.6), at the dealer's cost."""
    config = Config(players=4, first_dealer=3)  # next(d) = 0 wraps around
    placed = cards("4D 6H 10C JH KC")
    # K5.3: in a later distribution next(d) takes stock cards 0-1 and 8-9.
    stock = stacked_deck(LATER, 4, 3, {0: "10H 7C 2C 3C"}, used=placed)[:80]
    state = dealer_last_card(config, "4D", "6H 10C JH KC", stock=stock, last_capturer=1, rest_to=1)
    check_state(state)
    assert not state.last_distribution
    assert legal_moves(state, 3) == moves("4D")
    state, events = play_move(state, 3, "4D")
    dealt = only(events, DistributionDealt)
    assert dealt.distribution == 2
    assert sorted(only(events, CardsSetAside).cards) == sorted(cards("JH KC"))
    assert same(state.table, "6H 10C 4D")
    assert set(sweep_ranks(state.table, Rules())) == ranks("10")
    assert same(state.hands[0], "10H 7C 2C 3C")
    assert state.turn == 0
    assert legal_moves(state, 0) == moves("10H>6H+10C+4D")
    state, events = play_move(state, 0, "10H>6H+10C+4D")
    assert captured(events).sweep is SweepKind.SWEEP
    assert captured(events).conceded_by == 3
    assert sweep_parts(state) == [5, 0, 0, -5]


def test_kj_five_player_sweep_scoring():
    markers = [cards("7H"), cards("4C 9D 5H"), cards("8C"), (), ()]
    points = [
        "10D 10D 2S 2S",
        "AS AS 3S 4S 5S 6S 7S 8S 9S",
        "10S 10S JS JS QS QS KS KS",
        "3S 4S 5S 6S 7S 8S 9S AH AH",
        "AD AD AC AC",
    ]
    piles = [cards(p) + m for p, m in zip(points, markers, strict=True)]
    scores = score_deal(Config(players=5), piles, markers, 0, None)
    assert [s.card_points for s in scores] == [10, 11, 8, 9, 4]
    parts = [s.sweeps_made + s.sweeps_conceded for s in scores]
    assert parts == [-10, 10, 5, 0, -5]
    assert sum(parts) == 0
    assert [s.total for s in scores] == [0, 21, 13, 9, -1]
    assert sum(s.total for s in scores) == 42


def test_kk_tactical_example():
    assert legal("2H 6C QS", "7D 8S JD KC") == moves("7D", "8S>2H+6C", "JD", "KC")
    state = position("2H 6C QS", {1: "7D 8S JD KC", 2: "QH QS"})
    state, _ = play_move(state, 1, "8S>2H+6C")
    assert same(state.table, "QS")
    assert legal_moves(state, 2) == moves("QH>QS", "QS>QS")
    after, events = play_move(state, 2, "QH>QS")
    assert captured(events).sweep is SweepKind.SWEEP
    assert sweep_parts(after) == [0, -5, 5, 0]
    forced = with_hand(state, 2, "QS 7D")
    assert legal_moves(forced, 2) == moves("QS>QS")
    after, events = play_move(forced, 2, "QS>QS")
    assert captured(events).sweep is SweepKind.DOUBLE
    assert sweep_parts(after) == [0, -10, 10, 0]


def ks_piles(copies: int) -> tuple[list[tuple[Card, ...]], list[tuple[Card, ...]]]:
    """Every card of the deck in a pile, with markers from their owners' piles (K8.4):
    seat 0 swept with 7H and 9D, seat 2 double-swept with 8C (two decks; one deck has
    no twin, so 8C sweeps once), seat 3 swept with 4C. Seats 2 and 3 hold only their
    markers, all worth no card points, so seat 0's pile holds every card point."""
    markers = [cards("7H 9D"), (), cards("8C 8C" if copies == 2 else "8C"), cards("4C")]
    others = [card for seat_markers in markers[1:] for card in seat_markers]
    piles = [tuple(rest_of_deck(others, copies)), *markers[1:]]
    return piles, markers


def test_ks_score_summary():
    piles, markers = ks_piles(2)
    scores = score_deal(Config(players=4), piles, markers, 0, None)
    first = scores[0]
    assert (first.storan, first.lillan, first.ace_of_spades) == (6, 4, 4)
    assert (first.other_spades, first.other_aces, first.card_points) == (22, 6, 42)
    assert [s.sweeps_made for s in scores] == [10, 0, 10, 5]
    assert [s.sweeps_conceded for s in scores] == [0, -10, -5, -10]
    assert sum(s.total for s in scores) == 42
    variants = {
        Rules(single_deck=True): 21,
        Rules(nordic_scoring=True): 34,
        Rules(single_deck=True, nordic_scoring=True): 17,
    }
    for rules, total in variants.items():
        config = Config(players=4, rules=rules)
        piles, markers = ks_piles(config.copies)
        scores = score_deal(config, piles, markers, 0, None)
        assert scores[0].card_points == total, rules
        assert sum(s.sweeps_made + s.sweeps_conceded for s in scores) == 0, rules
        assert sum(s.total for s in scores) == total, rules


# --- Further cases -----------------------------------------------------------------------


def test_kx1_three_groups_for_a_queen():
    assert legal("AH JC QD 2C 10H", "QH") == moves("QH>AH+JC+QD+2C+10H")
    assert sweep_kind(cards("AH JC QD 2C 10H"), Move.parse("QH>AH+JC+QD+2C+10H")) is (
        SweepKind.SWEEP
    )


def test_kx2_sweep_for_a_jack():
    assert legal("7S", "4C") == moves("4C")
    after, _ = play_move(position("7S", {1: "4C"}), 1, "4C")
    assert same(after.table, "7S 4C")
    assert set(sweep_ranks(after.table, Rules())) == ranks("J")


def test_kx3_jack_sweeps():
    assert legal("7S 4C", "JH") == moves("JH>7S+4C")
    after, events = play_move(position("7S 4C", {1: "JH"}), 1, "JH>7S+4C")
    assert captured(events).sweep is SweepKind.SWEEP
    assert sweep_parts(after) == [-5, 5, 0, 0]


def test_kx4_capture_leaves_a_card():
    assert legal("4H 5C 6D", "9H") == moves("9H>4H+5C")
    after, _ = play_move(position("4H 5C 6D", {1: "9H"}), 1, "9H>4H+5C")
    assert same(after.table, "6D")


def test_kx5_two_takes_two_aces():
    assert legal("AH AC", "2H") == moves("2H>AH+AC")
    after, events = play_move(position("AH AC", {1: "2H"}), 1, "2H>AH+AC")
    assert captured(events).sweep is SweepKind.SWEEP
    assert after.markers[1] == cards("2H")


def test_kx6_ace_takes_ace_and_king():
    assert legal("AH KC", "AD") == moves("AD>AH+KC")
    assert sweep_kind(cards("AH KC"), Move.parse("AD>AH+KC")) is SweepKind.SWEEP
    assert legal("AH KC", "AD", Rules(court_cards_rank_only=True)) == moves("AD")


def test_kx7_sweep_ranks_and_no_forced_sweep():
    table = "AH AC 2H 2C 3H 3C"
    assert legal(table, "4D") == moves("4D>AH+AC+2H+2C+3H+3C")
    assert ranks_of(table) == ranks("3 4 6 Q")
    assert legal(table, "4D", Rules(no_forced_sweep=True)) == moves(
        "4D>AH+AC+2H+2C+3H+3C", "4D>AH+AC+2H", "4D>AH+AC+2C"
    )


def test_kx8_forced_sweep_hides_other_cards():
    table = "AH AC 2H 2C 3H 3C"
    assert legal(table, "4D 9H") == moves("4D>AH+AC+2H+2C+3H+3C")
    free = legal(table, "4D 9H", Rules(no_forced_sweep=True))
    assert len(free) == 9
    assert free == moves(
        "4D>AH+AC+2H+2C+3H+3C",
        "4D>AH+AC+2H",
        "4D>AH+AC+2C",
        "9H>AH+AC+2H+2C+3H",
        "9H>AH+AC+2H+2C+3C",
        "9H>AH+2H+3H+3C",
        "9H>AH+2C+3H+3C",
        "9H>AC+2H+3H+3C",
        "9H>AC+2C+3H+3C",
    )


def test_kx9_jack_sum_or_rank_only():
    assert legal("5H 6C", "JD") == moves("JD>5H+6C")
    assert sweep_kind(cards("5H 6C"), Move.parse("JD>5H+6C")) is SweepKind.SWEEP
    assert legal("5H 6C", "JD", Rules(court_cards_rank_only=True)) == moves("JD")


def test_kx10_king_takes_jack_and_two():
    assert legal("JH 2C 9D", "KD") == moves("KD>JH+2C")
    after, _ = play_move(position("JH 2C 9D", {1: "KD"}), 1, "KD>JH+2C")
    assert same(after.table, "9D")
    assert legal("JH 2C 9D", "KD", Rules(court_cards_rank_only=True)) == moves("KD")


def test_kx11_removal_empties_the_table():
    """K6.3 at the first distribution: an emptied table is no sweep, every card crawls."""
    deck = stacked_deck(FOUR_FIRST, 4, 0, table="JH QC KS KD")
    state, events = open_game(Config(players=4), decks=[deck])
    assert state.table == ()
    assert same(state.set_aside, "JH QC KS KD")
    assert not any(isinstance(e, Captured) for e in events)
    assert all(m == () for m in state.markers)
    assert sweep_ranks(state.table, Rules()) == ()
    assert state.turn == 1
    assert legal_moves(state, 1) == sorted(Move(c) for c in set(state.hands[1]))
    state, deal_events = finish_deal(state)
    end = only(deal_events, DealEnded)
    assert not Counter(cards("JH QC KS KD")) - Counter(end.collected)
    recipient = end.recipient
    pile = piles_from_events(deal_events, 4)[recipient]
    plain_spades = [c for c in pile if suit_of(c) == SPADES and c not in cards("2S AS")]
    assert cards("KS")[0] in plain_spades
    assert end.result.scores[recipient].other_spades == len(plain_spades)


def test_kx12_last_capture_takes_the_leftovers():
    config = Config(players=4, first_dealer=2)
    courts = [c for c in full_deck(2) if rank_of(c) >= JACK]
    state = dealer_last_card(config, "9C", "4H 5D 2C", set_aside=courts, last_capturer=0, rest_to=0)
    check_state(state)
    assert state.last_distribution
    assert legal_moves(state, 2) == moves("9C>4H+5D")
    state, events = play_move(state, 2, "9C>4H+5D")
    assert captured(events).sweep is SweepKind.NONE
    end = only(events, DealEnded)
    assert end.recipient == 2
    assert sorted(end.collected) == sorted(cards("2C") + tuple(courts))
    result = state.results[0]
    assert all(s.sweeps_made == s.sweeps_conceded == 0 for s in result.scores)
    # The dealer's pile: 9C 4H 5D, 2C and the 24 courts, whose six spades are 1 point each.
    assert result.scores[2].card_points == 6
    assert sum(s.total for s in result.scores) == 42


def test_kx13_dealer_sweeps_with_the_last_card():
    config = Config(players=4, first_dealer=2)
    state = dealer_last_card(config, "9C", "4H 5D", last_capturer=0, rest_to=0)
    check_state(state)
    assert legal_moves(state, 2) == moves("9C>4H+5D")
    state, events = play_move(state, 2, "9C>4H+5D")
    assert captured(events).sweep is SweepKind.SWEEP
    result = state.results[0]
    parts = [s.sweeps_made + s.sweeps_conceded for s in result.scores]
    assert parts == [0, -5, 5, 0]


def test_kx14_recipient_takes_set_aside_without_marker():
    config = Config(players=4)
    state = dealer_last_card(
        config,
        "3S",
        "",
        set_aside="JS QS KH",
        last_capturer=2,
        piles={2: "4H 5H 6H"},
        rest_to=1,
    )
    check_state(state)
    state, events = play_move(state, 0, "3S")
    end = only(events, DealEnded)
    assert end.recipient == 2
    assert sorted(end.collected) == sorted(cards("3S JS QS KH"))
    assert same(piles_from_events(events, 4)[2], "3S JS QS KH")
    seat = state.results[0].scores[2]
    assert seat.card_points == 3
    assert seat.sweeps_made == 0


@pytest.mark.parametrize("players", [2, 3, 4, 5, 6])
@pytest.mark.parametrize(("last_point", "total"), [(False, 42), (True, 43)])
def test_kx15_deal_totals(players, last_point, total):
    config = Config(players=players, rules=Rules(last_capture_point=last_point))
    state = new_game(config, seed=players)
    state, events = finish_deal(state)
    result = only(events, DealEnded).result
    assert sum(s.total for s in result.scores) == total
    assert sum(s.last_capture for s in result.scores) == int(last_point)


@pytest.mark.parametrize(
    ("players", "hand", "table", "stock", "distributions"),
    [(2, 6, 4, 88, 12), (3, 5, 5, 84, 8), (4, 5, 4, 80, 6), (5, 4, 4, 80, 5), (6, 5, 2, 72, 4)],
)
def test_kx16_first_distribution_sizes(players, hand, table, stock, distributions):
    state, events = open_game(Config(players=players), seed=16)
    assert [len(h) for h in state.hands] == [hand] * players
    assert len(only(events, DistributionDealt).table) == table
    assert len(state.table) + len(state.set_aside) == table
    assert len(state.stock) == stock
    state, deal_events = finish_deal(state)
    dealt = [e for e in deal_events if isinstance(e, DistributionDealt) and e.deal == 1]
    assert 1 + len(dealt) == distributions
    assert [e.last for e in dealt] == [False] * (distributions - 2) + [True]


def test_kx17_maximality_against_remainder():
    table = "2H 2H 2C 2C 2D 8H 8C 4D 9C"
    found = legal(table, "10C")
    assert found == moves("10C>2H+2H+2C+2C+2D", "10C>2H+2H+2C+2C+2D+8H+8C+4D")
    assert all(len(m.captures) < 9 for m in found)
    assert ranks("10").isdisjoint(ranks_of(table))


def test_kx18_identical_copies():
    found = legal("4H 4H 6C", "10D 10D 7S")
    assert found == moves("10D>4H+6C", "7S")
    assert len(found) == 2


def test_kx19_must_capture_if_able():
    assert legal("8H 9C JH", "8D 6C", Rules(must_capture_if_able=True)) == moves("8D>8H")


def test_kx20_no_forced_sweep():
    rules = Rules(no_forced_sweep=True)
    table = "AH AC 4C 6D QH"
    assert legal(table, "QD 2C", rules) == moves("QD>AH+AC+4C+6D+QH", "2C>AH+AC")
    state = position(table, {1: "QD 2C"}, rules=rules)
    after, events = play_move(state, 1, "QD>AH+AC+4C+6D+QH")
    assert captured(events).sweep is SweepKind.SWEEP
    assert sweep_parts(after) == [-5, 5, 0, 0]


def test_kx21_rank_only_courts():
    assert legal("JH 5C 6D", "JC") == moves("JC>JH+5C+6D")
    rules = Rules(court_cards_rank_only=True)
    assert legal("JH 5C 6D", "JC", rules) == moves("JC>JH")
    after, events = play_move(position("JH 5C 6D", {1: "JC"}, rules=rules), 1, "JC>JH")
    assert same(after.table, "5C 6D")
    assert captured(events).sweep is SweepKind.NONE


@pytest.mark.parametrize(
    ("removal", "table", "set_aside"),
    [
        (Removal.COURTS, "3S 7D", "KH QS"),
        (Removal.SPADES, "KH 7D", "3S QS"),
        (Removal.NONE, "3S KH 7D QS", ""),
    ],
)
def test_kx22_removal_settings(removal, table, set_aside):
    """K6.1 / K16.5 at the first distribution, for each removal setting."""
    deck = stacked_deck(FOUR_FIRST, 4, 0, table="3S KH 7D QS")
    state = new_game(Config(players=4, rules=Rules(removal=removal)), decks=[deck])
    assert same(state.table, table)
    assert same(state.set_aside, set_aside)


def test_kx23_bordstabbe():
    rules = Rules(bordstabbe=True)
    deck = stacked_deck(FOUR_FIRST, 4, 0, {1: "5S 8H 9H 10H 2H"}, table="5H JS 5C 5D")
    state, events = open_game(Config(players=4, rules=rules), decks=[deck])
    assert same(state.table, "5H 5C 5D")
    assert only(events, Bordstabbe).seat == 1
    assert legal_moves(state, 1) == moves("5S>5H+5C+5D")
    state, deal_events = finish_deal(state)
    result = only(deal_events, DealEnded).result
    assert [s.bordstabbe for s in result.scores] == [0, -5, 0, 0]
    assert sum(s.total for s in result.scores) == 37

    deck = stacked_deck(SIX_FIRST, 6, 0, table="7H QD")
    state, events = open_game(Config(players=6, rules=rules), decks=[deck])
    assert same(state.table, "7H")
    assert only(events, Bordstabbe).seat == 1
    state, deal_events = finish_deal(state)
    assert sum(s.total for s in only(deal_events, DealEnded).result.scores) == 37

    # K16.10: 38 with last_capture_point, the same deal.
    last_point = Rules(bordstabbe=True, last_capture_point=True)
    state, events = open_game(Config(players=6, rules=last_point), decks=[deck])
    assert only(events, Bordstabbe).seat == 1
    state, deal_events = finish_deal(state)
    assert sum(s.total for s in only(deal_events, DealEnded).result.scores) == 38

    deck = stacked_deck(FOUR_FIRST, 4, 0, table="5H 5C 6D KH")
    state, events = open_game(Config(players=4, rules=rules), decks=[deck])
    assert same(state.table, "5H 5C 6D")
    assert not any(isinstance(e, Bordstabbe) for e in events)
    assert state.bordstabbe_seat is None
    state, deal_events = finish_deal(state)
    result = only(deal_events, DealEnded).result
    assert all(s.bordstabbe == 0 for s in result.scores)
    assert sum(s.total for s in result.scores) == 42


def test_kx24_nordic_scoring():
    pile = cards("10D 2S AS AH 7S 5H")
    for rules, points in [(Rules(), 9), (Rules(nordic_scoring=True), 5)]:
        scores = score_deal(Config(players=2, rules=rules), [pile, ()], [(), ()], 0, None)
        assert scores[0].card_points == points
    nordic = score_deal(
        Config(players=2, rules=Rules(nordic_scoring=True)), [pile, ()], [(), ()], 0, None
    )[0]
    assert (nordic.storan, nordic.lillan, nordic.ace_of_spades) == (0, 1, 2)
    assert (nordic.other_spades, nordic.other_aces) == (1, 1)


def test_kx25_last_capture_point():
    config = Config(players=4, rules=Rules(last_capture_point=True))
    state = dealer_last_card(config, "3H", "", last_capturer=1, rest_to=1)
    state, events = play_move(state, 0, "3H")
    assert only(events, DealEnded).recipient == 1
    result = state.results[0]
    assert [s.last_capture for s in result.scores] == [0, 1, 0, 0]
    assert sum(s.total for s in result.scores) == 43


def test_kx25_nobody_captured_dealer_receives():
    """K11.1 / K11.3: with no capture in the whole deal the dealer is R and scores the +1."""
    # With every card on the table, only a rank-only court (K16.7) can still crawl, so
    # the position "nobody captured in the whole deal" needs that flag to be reachable.
    rules = Rules(last_capture_point=True, court_cards_rank_only=True)
    config = Config(players=4, first_dealer=3, rules=rules)
    courts = [c for c in full_deck(2) if rank_of(c) >= JACK]
    plain = [c for c in full_deck(2) if rank_of(c) < JACK]
    set_aside = list(courts)
    set_aside.remove(cards("KH")[0])
    state = dealer_last_card(
        config, "KH", plain, set_aside=set_aside, last_capturer=None, rest_to=0
    )
    check_state(state)
    assert legal_moves(state, 3) == moves("KH")
    state, events = play_move(state, 3, "KH")
    end = only(events, DealEnded)
    assert end.recipient == 3
    assert sorted(end.collected) == sorted(full_deck(2))
    result = state.results[0]
    assert [s.last_capture for s in result.scores] == [0, 0, 0, 1]
    assert result.scores[3].total == 43
    assert sum(s.total for s in result.scores) == 43


@pytest.mark.parametrize(
    ("config", "flag"),
    [
        (Config(players=2, rules=Rules(four_four=True)), "four_four"),
        (Config(players=5, rules=Rules(single_deck=True)), "single_deck"),
        (Config(players=3, rules=Rules(two_player_five_six=True)), "two_player_five_six"),
        (Config(players=5, teams=Teams.PAIRS), "teams"),
        (Config(players=4, teams=Teams.TRIOS), "teams"),
        (Config(players=4, match_deals=6), "match_deals"),
    ],
)
def test_kx26_rejected_configurations(config, flag):
    with pytest.raises(ConfigError) as error:
        config.validate()
    assert error.value.flag == flag
    with pytest.raises(ConfigError):
        new_game(config)


# --- KX27 / KX30: the golden deal --------------------------------------------------------

GOLDEN_DECK = """
3C AS KD 3S 2H 2S JD AD 7S AS AH 4C JD 4H KS 4H 10S QH JS 7H 6S 6S KC 6H 6C 2H
6C KC 7C 6H QD 2D 3D QH 9D 7S KD 5H 6D 3H 2S 7H KH JC 8H JC QS QD JH 9H 8D 6D
AD 7C 3D QC 10D 5C 9S JH 10S 5C 9S 7D 3C 5D 2C 4D 5D 10H 9C 3H 3S 10C 2C 8S 10C 4S
AC 9D KS 5S 5H 9C AH QC 4D 4S 8H 10D 10H 5S 8C 2D KH 7D AC 8D 4C 9H 8C JS QS 8S
"""

GOLDEN_MOVES = """
D1: 3:AS 0:10S>4H+6H 1:7S 2:4C 3:3C 0:2H 1:JD>3C+7S+AS 2:6S>2H+4C* 3:KS 0:2S 1:JS 2:6S
    3:KD>2S+JS+KS 0:3S 1:7H 2:AH 3:4H>3S+AH 0:QH 1:AD 2:AS>6S+7H+AD
D2: 3:6C 0:6C>6C** 1:6H 2:6D>6H* 3:2H 0:7S 1:5H 2:2D>2H 3:QH>5H+7S* 0:9D 1:KD 2:QD
    3:3D 0:KC>KD 1:7C 2:3H>3D
D3: 3:JH 0:6D 1:8H 2:QC 3:2S 0:8D>2S+6D+8H 1:AD 2:QS>AD+JH+QC 3:7H>7C 0:KH 1:JC 2:QD
    3:9H>9D 0:JC>JC 1:7C 2:3D
D4: 3:10D>3D+7C* 0:JH 1:10S 2:9S 3:3C 0:2C 1:5D>2C+3C 2:9C>9S 3:5D 0:4D 1:10H>10S 2:7D
    3:5C>5D 0:9S 1:5C 2:3H
D5: 3:3S>3H 0:8S 1:AH>5C+9S 2:9D 3:KS>4D+9D 0:5H 1:QC>5H+7D 2:4D 3:10C 0:2C 1:4S>4D
    2:4S 3:5S 0:9C>4S+5S 1:10C>10C+2C+8S* 2:AC
D6: 3:AC 0:4C 1:JS 2:7D 3:10D 0:10H>10D 1:8C>7D+AC 2:8S 3:8H>8S 0:5S>4C+AC 1:2D
    2:KH>2D+JS* 3:8D 0:9H 1:8C>8D 2:QS
"""

# K18 KX30: table after removal / cards set aside at that removal, per distribution.
GOLDEN_CHECKPOINTS = [
    ("4H 6H", "JD KC"),
    ("", "QH"),
    ("9D 7C", "QD"),
    ("7C 3D", "KH QD"),
    ("4D 7D 9S 5C 3H", "JH"),
    ("AC", ""),
]


def golden_distributions() -> list[list[str]]:
    """The KX30 transcript split into distributions of ``seat:move`` items."""
    distributions: list[list[str]] = []
    for token in GOLDEN_MOVES.split():
        if token.startswith("D") and token.endswith(":"):
            distributions.append([])
        else:
            distributions[-1].append(token)
    return distributions


def checkpoint(state: State, events: list[Event]) -> tuple[tuple[Card, ...], tuple[Card, ...]]:
    aside = [e.cards for e in events if isinstance(e, CardsSetAside)]
    return state.table, aside[0] if aside else ()


def run_golden(config: Config) -> tuple[State, list[Event], State]:
    """Play KX30 through ``play``, checking every K18 claim about single moves on the way.

    Returns the state after the deal, all events, and the state before the last move.
    """
    state, events = open_game(config, decks=[cards(GOLDEN_DECK)])
    check_opening(state, events)
    all_events = list(events)
    before = state
    for number, distribution in enumerate(golden_distributions()):
        table, aside = checkpoint(state, events)
        expected_table, expected_aside = GOLDEN_CHECKPOINTS[number]
        assert same(table, expected_table), f"D{number + 1} table"
        assert same(aside, expected_aside), f"D{number + 1} set aside"
        assert state.distribution == number + 1
        assert len(distribution) == (20 if number == 0 else 16)  # K5.1, n = 4: 5 then 4 each
        for item in distribution:
            seat = int(item.partition(":")[0])
            assert state.turn == seat, item
            assert Move.parse(item.partition(":")[2]) in legal_moves(state, seat), item
            before = state
            state, events = play_text(state, item)
            check_transition(before, Move.parse(item.partition(":")[2]), state, events)
            all_events += events
            stars = item.count("*")
            kinds = [e.sweep for e in events if isinstance(e, Captured)]
            expected_kind = [SweepKind.NONE, SweepKind.SWEEP, SweepKind.DOUBLE][stars]
            assert kinds == ([] if ">" not in item else [expected_kind]), item
    return state, all_events, before


def test_kx27_canonical_dealing():
    state, events = open_game(Config(players=4, first_dealer=2), decks=[cards(GOLDEN_DECK)])
    dealt = only(events, DistributionDealt)
    assert dealt.table == cards("JD 4H KC 6H")
    assert same(state.hands[3], "3C AS KD KS 4H")
    assert same(state.hands[0], "3S 2H 2S 10S QH")
    assert same(state.hands[1], "JD AD 7S JS 7H")
    assert same(state.hands[2], "AS AH 4C 6S 6S")
    assert state.table == cards("4H 6H")
    assert same(state.set_aside, "JD KC")
    assert len(state.stock) == 80
    assert state.stock[:2] == cards("6C 2H")
    assert state.turn == 3
    for item in golden_distributions()[0]:
        state, events = play_text(state, item)
    assert only(events, DistributionDealt).distribution == 2
    assert same(state.hands[3], "6C 2H 3D QH")
    assert same(state.hands[0], "6C KC 9D 7S")
    assert same(state.hands[1], "7C 6H KD 5H")
    assert same(state.hands[2], "QD 2D 6D 3H")


def test_kx30_golden_game_moves_and_checkpoints():
    state, events, before = run_golden(Config(players=4, first_dealer=2))
    captures = [e for e in events if isinstance(e, Captured)]
    double = [e for e in captures if e.sweep is SweepKind.DOUBLE]
    assert [(e.seat, e.conceded_by) for e in double] == [(0, 3)]
    first_turn = next(e for e in captures if e.card == cards("10D")[0])
    assert (first_turn.seat, first_turn.sweep, first_turn.conceded_by) == (3, SweepKind.SWEEP, 2)
    assert before.last_capturer == 1
    # The set-aside pile and the collection keep the order the cards came in
    # (docs/krypkasino-decisions.md, "Table order"), as K18 lists them.
    assert before.set_aside == cards("JD KC QH QD KH QD JH")
    end = only(events, DealEnded)
    assert end.recipient == 1
    assert end.collected == cards("9H QS JD KC QH QD KH QD JH")
    assert state.deal == 2  # the match goes on with the next dealer (K4.3)
    assert state.dealer == 3


def test_kx30_golden_game_markers_and_piles():
    _, events, before = run_golden(Config(players=4, first_dealer=2))
    expected_markers = ["6C 6C", "10C", "6S 6D KH", "QH 10D"]
    for seat, text in enumerate(expected_markers):
        assert same(before.markers[seat], text), seat
    piles = piles_from_events(events, 4)
    assert [len(p) for p in piles] == [21, 35, 22, 26]
    end = only(events, DealEnded)
    engine_piles = [list(p) for p in before.piles]
    engine_piles[end.recipient] += end.collected
    assert [sorted(p) for p in engine_piles] == [sorted(p) for p in piles]
    assert sum(len(p) for p in piles) == 104


def test_kx30_markers_keep_the_order_the_sweeps_were_made_in():
    """K8.3 / KX30 as listed: seat 3's markers are ``QH 10D`` (sweeps of D2, then D4), not
    in K1.6 order (docs/krypkasino-decisions.md, "Table order")."""
    _, _, before = run_golden(Config(players=4, first_dealer=2))
    assert before.markers == tuple(cards(text) for text in ("6C 6C", "10C", "6S 6D KH", "QH 10D"))


def test_kx30_golden_game_score_table():
    _, events, _ = run_golden(Config(players=4, first_dealer=2))
    result = only(events, DealEnded).result
    expected = [
        # storan, lillan, ace of spades, other spades, other aces, card pts, made, conceded, total
        (3, 2, 0, 4, 1, 10, 10, -5, 15),
        (0, 0, 2, 6, 2, 10, 5, -15, 0),
        (0, 0, 2, 5, 2, 9, 15, -10, 14),
        (3, 2, 0, 7, 1, 13, 10, -10, 13),
    ]
    for s, row in zip(result.scores, expected, strict=True):
        got = (
            s.storan,
            s.lillan,
            s.ace_of_spades,
            s.other_spades,
            s.other_aces,
            s.card_points,
            s.sweeps_made,
            s.sweeps_conceded,
            s.total,
        )
        assert got == row, s.seat
        assert s.last_capture == s.bordstabbe == 0
    assert sum(s.total for s in result.scores) == 42
    assert result.team_totals == (15, 0, 14, 13)


def test_kx30_golden_game_pairs():
    _, events, _ = run_golden(Config(players=4, first_dealer=2, teams=Teams.PAIRS))
    result = only(events, DealEnded).result
    assert result.team_totals == (29, 13)
    assert [s.total for s in result.scores] == [15, 0, 14, 13]


# --- KX28 / KX29: match play and the draw for deal ---------------------------------------


def deal_result(number: int, dealer: int, totals: list[int]) -> DealResult:
    scores = tuple(SeatScore(seat=s, total=t) for s, t in enumerate(totals))
    return DealResult(number, dealer, dealer, scores, tuple(totals))


def test_kx28_match_totals_and_shared_win():
    config = Config(players=3, first_dealer=1, match_deals=3)
    deals = [[10, 20, 12], [15, -3, 30], [5, 13, 24]]
    dealers = [(config.first_dealer + k) % 3 for k in range(3)]
    results = [
        deal_result(k + 1, d, t) for k, (d, t) in enumerate(zip(dealers, deals, strict=True))
    ]
    assert match_totals(config, results) == (30, 30, 66)
    assert match_outcome(config, results[:2], ()) == (False, (), ())
    assert match_outcome(config, results, ()) == (True, (0, 1), ())


def test_kx28_dealer_rotation_by_play():
    state = new_game(Config(players=3, first_dealer=1, match_deals=3), seed=28)
    while not state.over:
        state, _ = finish_deal(state)
    assert [r.dealer for r in state.results] == [1, 2, 0]
    sheet = score(state)
    assert sheet.over
    assert sheet.totals == tuple(sum(r.scores[s].total for r in state.results) for s in range(3))
    best = min(sheet.totals)
    assert sheet.winners == tuple(s for s in range(3) if sheet.totals[s] == best)


def tied_before_the_last_card(config: Config) -> tuple[State, Move]:
    """Seed 2028's match of three deals, one card before its end, with deals 1-2 rewritten
    so that the last card leaves seats 0 and 1 tied at 30 (seat 2 at 66)."""
    state = new_game(config, seed=2028)
    while state.deal < 3:
        state, _ = finish_deal(state)
    while sum(len(h) for h in state.hands) > 1 or state.stock:
        state, _ = play(state, state.turn, legal_moves(state, state.turn)[0])
    last = legal_moves(state, state.turn)[0]
    _, events = play(state, state.turn, last)  # a probe: the real deal-3 totals
    third = [s.total for s in only(events, DealEnded).result.scores]
    second = [t - a - b for t, a, b in zip([30, 30, 66], [10, 20, 12], third, strict=True)]
    rigged = replace(state, results=(deal_result(1, 1, [10, 20, 12]), deal_result(2, 2, second)))
    return rigged, last


def test_kx28_shared_win_by_play():
    """KX28 / K13.3 by play: deals 1-2 are rewritten so that seats 0 and 1 tie at 30 after
    deal 3; the last card of deal 3 ends the match, and the MatchEnded event, the state
    and the score sheet all name both seats; before it the sheet says the match is on."""
    config = Config(players=3, first_dealer=1, match_deals=3)
    rigged, last = tied_before_the_last_card(config)
    before = score(rigged)
    assert (before.over, before.winners) == (False, ())
    state, events = play(rigged, rigged.turn, last)
    assert only(events, MatchEnded) == MatchEnded((30, 30, 66), (0, 1))
    assert (state.over, state.winners) == (True, (0, 1))
    sheet = score(state)
    assert (sheet.over, sheet.totals, sheet.winners) == (True, (30, 30, 66), (0, 1))


def test_kx28_tiebreak_deal():
    config = Config(players=3, first_dealer=1, match_deals=3, tie_rule=TieRule.TIEBREAK_DEAL)
    deals = [[10, 20, 12], [15, -3, 30], [5, 13, 24]]
    results = [deal_result(k + 1, (1 + k) % 3, t) for k, t in enumerate(deals)]
    assert match_outcome(config, results, ()) == (False, (), (0, 1))
    results.append(deal_result(4, 1, [12, 9, 21]))
    assert match_totals(config, results)[:2] == (42, 39)
    assert match_outcome(config, results, (0, 1)) == (True, (1,), ())


def test_kx28_tiebreak_deal_by_play():
    """The tie after deal 3 is forced by rewriting deals 1-2; deal 4 is then really played."""
    config = Config(players=3, first_dealer=1, match_deals=3, tie_rule=TieRule.TIEBREAK_DEAL)
    rigged, last = tied_before_the_last_card(config)
    state, events = play(rigged, rigged.turn, last)
    assert only(events, TiebreakDeal).teams == (0, 1)
    assert not state.over
    assert (state.deal, state.dealer) == (4, 1)
    state, events = finish_deal(state)
    assert state.over
    ended = only(events, MatchEnded)
    # The event names the tied teams too, as the view does (a mutation review).
    assert ended.tiebreak == (0, 1)
    totals = ended.totals
    assert totals[:2] == tuple(30 + s.total for s in state.results[3].scores[:2])
    best = min(totals[:2])
    assert state.winners == tuple(s for s in (0, 1) if totals[s] == best)
    # The final view still names the tied teams, which alone could win (a UI review).
    assert view(state).tiebreak == (0, 1)
    assert view(state, 2).tiebreak == (0, 1)


@pytest.mark.parametrize(
    ("moves_seed", "case"),
    [(4, "the seat not tied ends lowest"), (63, "the tied seats are tied again")],
)
def test_kx28_only_the_tied_seats_can_win_the_tiebreak_deal_and_it_is_the_last(
    moves_seed: int, case: str
) -> None:
    """K13.3 by play: after the one extra deal only the seats tied before it can win, and
    a tie between them again is shared, with no further deal. Deals 1-3 are rewritten to
    leave seats 0 and 1 tied at 0 and seat 2 at 1, and deal 4 is played with random
    moves chosen for each case (a mutation review: a play that forgot the tied seats let
    seat 2 win, or dealt a fifth deal)."""
    config = Config(players=3, first_dealer=1, match_deals=3, tie_rule=TieRule.TIEBREAK_DEAL)
    rigged, last = tied_before_the_last_card(config)
    state, _ = play(rigged, rigged.turn, last)
    earlier = (deal_result(1, 1, [0, 0, 1]), deal_result(2, 2, [0] * 3), deal_result(3, 0, [0] * 3))
    state = replace(state, results=earlier)
    assert (state.deal, state.tiebreak) == (4, (0, 1))
    choose = random.Random(moves_seed)
    played: list[Event] = []
    while not state.over:
        state, events = play(state, state.turn, choose.choice(legal_moves(state, state.turn)))
        played += events
    assert state.deal == 4  # the one extra deal only
    totals = match_totals(config, state.results)
    if case == "the seat not tied ends lowest":
        assert totals[2] < min(totals[:2]), totals
    else:
        assert totals[0] == totals[1] < totals[2], totals
    winners = tuple(seat for seat in (0, 1) if totals[seat] == min(totals[:2]))
    assert state.winners == winners
    assert not [event for event in played if isinstance(event, TiebreakDeal)]
    assert only(played, MatchEnded) == MatchEnded(totals, winners, (0, 1))


def test_kx28_the_final_view_names_no_tiebreak_after_an_ordinary_last_deal():
    config = Config(players=3, first_dealer=1, match_deals=3)
    rigged, last = tied_before_the_last_card(config)
    state, events = play(rigged, rigged.turn, last)
    assert state.over and state.winners == (0, 1)
    assert only(events, MatchEnded).tiebreak == ()
    assert view(state).tiebreak == ()


def test_kx28_target_score():
    config = Config(players=4, target_score=100)
    deals = [[10, 20, 2, 8], [10, 20, 2, 8], [10, 20, 2, 8], [10, 20, 2, 8], [20, 21, 2, 7]]
    results = [deal_result(k + 1, k % 4, t) for k, t in enumerate(deals)]
    assert match_totals(config, results) == (60, 101, 10, 39)
    assert match_outcome(config, results[:4], ())[0] is False
    assert match_outcome(config, results, ()) == (True, (2,), ())


def test_kx29_draw_for_deal():
    draw = cards("9H KC KS 4D AH 2C 3C")
    state, events = open_game(Config(players=3, draw_for_deal=True), draw=draw)
    expected = tuple(zip([0, 1, 2, 1, 2], cards("9H KC KS 4D AH"), strict=True))
    assert state.dealer_draw == expected
    assert only(events, DealerDrawn) == DealerDrawn(expected, 2)
    assert state.dealer == 2
    assert state.turn == 0


# --- KX31-KX33 ---------------------------------------------------------------------------


def test_kx31_sweep_ranks():
    assert ranks_of("6C 4D 2H") == ranks("6 Q")
    assert ranks_of("AH AC 2H 2C 3H 3C") == ranks("3 4 6 Q")
    assert ranks_of("") == set()
    assert ranks_of("5H 6C", Rules(court_cards_rank_only=True)) == set()


def test_kx32_double_sweeps_and_their_points():
    assert legal("10D", "10D") == moves("10D>10D")
    after, events = play_move(position("10D", {1: "10D"}), 1, "10D>10D")
    assert captured(events).sweep is SweepKind.DOUBLE
    assert after.markers[1] == cards("10D 10D")
    scores = score_deal(after.config, after.piles, after.markers, 1, None)
    assert (scores[1].sweeps_made, scores[1].card_points, scores[1].storan) == (10, 6, 6)
    assert scores[0].sweeps_conceded == -10
    assert legal("JD", "JD 4C") == moves("JD>JD")
    assert sweep_kind(cards("JD"), Move.parse("JD>JD")) is SweepKind.DOUBLE
    assert legal("AH", "AH 5C") == moves("AH", "5C")


def test_kx33_two_players():
    """K12.2: the sweep part is 5 x (own markers - opponent's markers)."""
    markers = [cards("7H 8H"), cards("9H 4C 5D")]
    scores = score_deal(Config(players=2), markers, markers, 0, None)
    assert [s.sweeps_made + s.sweeps_conceded for s in scores] == [-5, 5]


@pytest.mark.parametrize("table", ["5H 5C", "5C 5H"])
def test_k8_3_a_twin_swept_with_another_card_is_an_ordinary_sweep(table):
    """K8.3: only a lone identical card makes a double sweep; 5H taking 5H and 5C is a
    sweep of two cards, one marker and +-5 (K9.1)."""
    after, events = play_move(position(table, {1: "5H"}), 1, "5H>5C+5H")
    assert captured(events).sweep is SweepKind.SWEEP
    assert after.markers[1] == cards("5H")
    assert sweep_parts(after) == [-5, 5, 0, 0]
