"""Combinations of rules the acceptance examples state only separately
(K8.3 with K9.3 and K11, K3.3 with K13.2 and K13.3, K16.10 in later deals and with K16.5,
K4.2 with K4.3, K16.6 with K16.8 and K8.3, K16.7 with K8.3, K13.2's target with K13.3)."""

from __future__ import annotations

import pytest

from engine.krypkasino import (
    Config,
    DealResult,
    Removal,
    Rules,
    SeatScore,
    SweepKind,
    Teams,
    TieRule,
    legal_moves,
    new_game,
    open_game,
    play,
)
from engine.krypkasino.events import Bordstabbe, Captured, DealEnded
from engine.krypkasino.moves import Move
from engine.krypkasino.scoring import match_outcome, match_totals
from tests.engine.krypkasino.helpers import (
    cards,
    dealer_last_card,
    finish_deal,
    moves,
    only,
    position,
    stacked_deck,
    sweep_parts,
)


def test_k8_3_k9_3_a_double_sweep_with_the_last_card_of_the_deal() -> None:
    """K9.3: the dealer's last card sweeps by a normal capture, here of a lone twin (K8.3):
    two markers, +10 to the dealer, -10 to prev(dealer); K11.2: he then receives the
    set-aside pile, which makes no marker."""
    config = Config(players=4, first_dealer=2)
    state = dealer_last_card(config, "7H", "7H", set_aside="JS QS", last_capturer=0, rest_to=0)
    assert legal_moves(state, 2) == moves("7H>7H")
    state, events = play(state, 2, Move.parse("7H>7H"))
    assert only(events, Captured).sweep is SweepKind.DOUBLE
    end = only(events, DealEnded)
    assert end.recipient == 2
    assert sorted(end.collected) == sorted(cards("JS QS"))
    scores = state.results[0].scores
    assert [s.sweeps_made + s.sweeps_conceded for s in scores] == [0, -10, 10, 0]
    assert scores[2].card_points == 2  # JS QS from the set-aside pile
    assert sum(s.total for s in scores) == 42


def deal(number: int, totals: list[int], config: Config) -> DealResult:
    scores = tuple(SeatScore(seat=s, total=t) for s, t in enumerate(totals))
    teams = [0] * config.team_count
    for s, t in enumerate(totals):
        teams[config.team_of(s)] += t
    return DealResult(number, 0, 0, scores, tuple(teams))


def test_k3_3_k13_2_a_team_reaches_the_target_that_no_member_reaches() -> None:
    config = Config(players=4, teams=Teams.PAIRS, target_score=100)
    results = [deal(1, [60, 0, 50, -68], config)]  # team {0,2} = 110, no seat >= 100
    assert match_outcome(config, results, ()) == (True, (1,), ())


def test_k3_3_k13_3_tied_teams_play_one_tiebreak_deal() -> None:
    config = Config(players=6, teams=Teams.TRIOS, tie_rule=TieRule.TIEBREAK_DEAL)
    per_deal = [7, 7, 7, 7, 7, 7]  # both trios 21 a deal
    results = [deal(k + 1, per_deal, config) for k in range(6)]
    assert match_outcome(config, results, ()) == (False, (), (0, 1))
    results.append(deal(7, [10, 0, 10, 0, 10, 12], config))  # 30 against 12
    assert match_outcome(config, results, (0, 1)) == (True, (1,), ())


def test_k16_10_bordstabbe_in_a_later_deal_goes_to_that_deals_first_player() -> None:
    """K16.10 applies after the first distribution of *a deal*: in deal 2 (dealer 1,
    K4.3) seat 2 scores the -5, and nobody scores it in deal 1."""
    rules = Rules(bordstabbe=True)
    config = Config(players=4, rules=rules)
    first = stacked_deck(((3, 2), (2, 2)), 4, 0, table="5H 6C 7D 8S")
    second = stacked_deck(((3, 2), (2, 2)), 4, 1, table="9H QD 9C KS")
    state = new_game(config, decks=[first, second])
    assert state.bordstabbe_seat is None
    state, events = finish_deal(state)
    assert state.deal == 2 and state.dealer == 1
    assert only(events, Bordstabbe).seat == 2
    assert state.bordstabbe_seat == 2
    state, events = finish_deal(state)
    result = state.results[1]
    assert [s.bordstabbe for s in result.scores] == [0, 0, -5, 0]
    assert [s.bordstabbe for s in state.results[0].scores] == [0, 0, 0, 0]
    assert sum(s.total for s in result.scores) == 37


def test_k4_2_k4_3_the_drawn_dealer_starts_the_rotation() -> None:
    config = Config(players=3, draw_for_deal=True, match_deals=3)
    state, _ = open_game(config, draw=cards("2H 9C 5D"))
    assert (state.dealer, state.turn) == (1, 2)
    while not state.over:
        state, _ = finish_deal(state)
    assert [r.dealer for r in state.results] == [1, 2, 0]


def test_k4_2_the_draw_overrides_first_dealer() -> None:
    """K4.2 offers first_dealer and draw_for_deal as alternatives: with both (which only
    a game sealed by an earlier release holds: NewGame refuses them now), the draw
    decides (here seat 1's ace) and first_dealer is ignored, and the rotation of K4.3
    goes on from the drawn seat (docs/krypkasino-decisions.md, "Draw for deal and
    first_dealer")."""
    config = Config(players=4, first_dealer=2, draw_for_deal=True)
    state, _ = open_game(config, draw=cards("KH AD 2C QS"))
    assert (state.first_dealer, state.dealer, state.turn) == (1, 1, 2)
    state, _ = finish_deal(state)
    assert (state.deal, state.dealer) == (2, 2)


@pytest.mark.parametrize(
    ("removal", "players", "dealt", "left", "triggered"),
    [
        (Removal.NONE, 4, "QH QD QC QS", "QH QD QC QS", True),
        (Removal.NONE, 6, "7H QD", "7H QD", False),
        (Removal.SPADES, 6, "5S 7H", "7H", True),
        (Removal.SPADES, 4, "3S KH KD KC", "KH KD KC", True),
        (Removal.SPADES, 4, "5S 5H 5C JD", "5H 5C JD", False),
    ],
)
def test_k16_10_bordstabbe_reads_the_table_the_removal_setting_leaves(
    removal: Removal, players: int, dealt: str, left: str, triggered: bool
) -> None:
    """K16.10 looks at the table "after removal", which is the game's own K16.5 removal:
    without removal a table of one court rank triggers it (and KX23's 6-player ``7H QD``
    does not), with ``spades`` the spades are gone first and the courts that stay count
    like any rank (docs/krypkasino-decisions.md, "Bordstabbe")."""
    config = Config(players=players, rules=Rules(bordstabbe=True, removal=removal))
    deck = stacked_deck(config.schedule.first_rounds, players, 0, table=dealt)
    state, events = open_game(config, decks=[deck])
    assert state.table == cards(left)
    expected = 1 if triggered else None
    assert state.bordstabbe_seat == expected
    assert [e.seat for e in events if isinstance(e, Bordstabbe)] == ([1] if triggered else [])


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        (Rules(), ["10S>4H+6C"]),
        (Rules(must_capture_if_able=True), ["10S>4H+6C"]),
        (Rules(no_forced_sweep=True), ["2C", "4D>4H", "10S>4H+6C"]),
        (Rules(no_forced_sweep=True, must_capture_if_able=True), ["4D>4H", "10S>4H+6C"]),
    ],
    ids=["default", "must_capture_if_able", "no_forced_sweep", "both"],
)
def test_k16_6_k16_8_without_the_forced_sweep_a_sweep_is_one_capture_among_others(
    rules: Rules, expected: list[str]
) -> None:
    """K7.7 with both K16.6 and K16.8: step 1 is skipped and step 2 applies, so the sweep
    is offered beside the other captures and the crawl is refused; the sweep still
    scores (K16.6)."""
    state = position("4H 6C", {1: "10S 4D 2C"}, rules=rules)
    assert legal_moves(state, 1) == moves(*expected)
    after, events = play(state, 1, Move.parse("10S>4H+6C"))
    assert only(events, Captured).sweep is SweepKind.SWEEP
    assert sweep_parts(after) == [-5, 5, 0, 0]


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        (Rules(), ["5S>5S"]),
        (Rules(no_forced_sweep=True), ["5S>5S", "9H"]),
        (Rules(must_capture_if_able=True), ["5S>5S"]),
    ],
    ids=["default", "no_forced_sweep", "must_capture_if_able"],
)
def test_k16_6_k8_3_a_twin_may_be_held_back_but_never_crawls(
    rules: Rules, expected: list[str]
) -> None:
    """K16.6 with K8.3: without the forced sweep another card may crawl beside a lone
    table card, but its twin can only take it (K7.4), as a double sweep worth 10."""
    state = position("5S", {1: "5S 9H"}, rules=rules)
    assert legal_moves(state, 1) == moves(*expected)
    after, events = play(state, 1, Move.parse("5S>5S"))
    assert only(events, Captured).sweep is SweepKind.DOUBLE
    assert sweep_parts(after) == [-10, 10, 0, 0]


@pytest.mark.parametrize("removal", [Removal.COURTS, Removal.NONE])
def test_k16_7_k8_3_a_court_double_sweeps_its_twin_by_rank(removal: Removal) -> None:
    """K16.7 with K8.3: a lone court is one same-rank group of its twin, so taking it is
    a double sweep as by default (KX32); two courts of one rank (crawled, K6.2, or kept
    by ``removal=none``) are a table the third must sweep (K7.6), an ordinary sweep."""
    rules = Rules(court_cards_rank_only=True, removal=removal)
    state = position("JD", {1: "JD 4C"}, rules=rules)
    assert legal_moves(state, 1) == moves("JD>JD")
    _, events = play(state, 1, Move.parse("JD>JD"))
    assert only(events, Captured).sweep is SweepKind.DOUBLE
    state = position("QH QD", {1: "QC 5D"}, rules=rules)
    assert legal_moves(state, 1) == moves("QC>QD+QH")
    _, events = play(state, 1, Move.parse("QC>QD+QH"))
    assert only(events, Captured).sweep is SweepKind.SWEEP


@pytest.mark.parametrize(
    ("target", "match_deals", "reached"),
    [(50, None, True), (80, 2, False)],
    ids=["target", "cap"],
)
def test_k13_2_k13_3_a_tie_when_a_target_match_ends_plays_one_tiebreak_deal(
    target: int, match_deals: int | None, reached: bool
) -> None:
    """K13.3 with K13.2's target_score: a tie for lowest when the target is reached, or
    when match_deals caps the match first, is broken by one extra deal, as without a
    target (docs/krypkasino-decisions.md, "Tie-break deal"); with ``shared`` it is
    shared at once."""
    config = Config(
        players=3, target_score=target, match_deals=match_deals, tie_rule=TieRule.TIEBREAK_DEAL
    )
    results = [deal(1, [10, 10, 22], config)]
    assert match_outcome(config, results, ()) == (False, (), ())
    results.append(deal(2, [10, 10, 30], config))  # 20, 20, 52
    assert (max(match_totals(config, results)) >= target) is reached
    assert match_outcome(config, results, ()) == (False, (), (0, 1))
    shared = Config(players=3, target_score=target, match_deals=match_deals)
    assert match_outcome(shared, results, ()) == (True, (0, 1), ())
    results.append(deal(3, [5, 0, 37], config))  # seat 2, far over the target, plays too
    assert match_outcome(config, results, (0, 1)) == (True, (1,), ())
