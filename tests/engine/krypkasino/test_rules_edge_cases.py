"""Rule edge cases that the other engine tests reach only by chance, or not at all.

Each pins one rule where a plausible slip goes unnoticed in ordinary play: seat 0
as the last capturer (K11.1) or as the first player (K16.10), a bordstabbe that
must not outlive its deal, a crawl that ``no_forced_sweep`` allows (K16.6), and
the default match length of team games with and without a tie-break deal (K13.2,
K13.3). Positions are dealt from explicit decks so that every move goes through
``play``.
"""

from __future__ import annotations

import pytest

from engine.cards import Card
from engine.krypkasino import (
    Config,
    DealResult,
    Move,
    Rules,
    SeatScore,
    SweepKind,
    Teams,
    TieRule,
    new_game,
    open_game,
    play,
    sweep_kind,
    table_moves,
)
from engine.krypkasino.events import Bordstabbe, DealEnded
from engine.krypkasino.invariants import check_state
from engine.krypkasino.moves import is_legal
from engine.krypkasino.scoring import match_outcome
from tests.engine.krypkasino.helpers import (
    cards,
    dealer_last_card,
    finish_deal,
    legal,
    moves,
    only,
    play_text,
    stacked_deck,
)

TEAM_SEATINGS = [(4, Teams.PAIRS), (6, Teams.PAIRS), (6, Teams.TRIOS)]

# --- K13.2 / K13.3: how many deals a match has ---------------------------------------------


@pytest.mark.parametrize(("players", "teams"), TEAM_SEATINGS)
def test_k13_2_a_team_match_has_one_deal_per_player(players: int, teams: Teams) -> None:
    """K13.2: without ``match_deals`` or ``target_score`` every player deals once, in
    teams too: n deals, not one per team, with dealers 0 to n-1 (K4.3)."""
    config = Config(players=players, teams=teams)
    assert config.deal_limit == players
    state = new_game(config, seed=3)
    while not state.over:
        state, _ = finish_deal(state)
    assert [r.dealer for r in state.results] == list(range(players))


def tied_result(number: int, teams: int) -> DealResult:
    """A deal that leaves teams 0 and 1 tied for the lowest total (K13.3)."""
    totals = [10, 10, *[11] * (teams - 2)]
    scores = tuple(SeatScore(seat=s, total=t) for s, t in enumerate(totals))
    return DealResult(number, 0, 0, scores, tuple(totals))


@pytest.mark.parametrize(
    ("config", "limit"),
    [
        (Config(players=2, tie_rule=TieRule.TIEBREAK_DEAL), 2),
        (Config(players=4, teams=Teams.PAIRS, tie_rule=TieRule.TIEBREAK_DEAL), 4),
        (Config(players=3, match_deals=6, tie_rule=TieRule.TIEBREAK_DEAL), 6),
    ],
    ids=["n2", "n4-pairs", "match_deals-6"],
)
def test_k13_3_the_most_deals_count_the_tiebreak_deal(config: Config, limit: int) -> None:
    """K13.3: with ``tiebreak_deal`` a match tied at its deal limit plays one deal more,
    so ``most_deals`` is the limit + 1; and ``match_outcome`` ends a tied match after
    exactly that many deals. With shared ties it is the limit."""
    teams = config.team_count
    assert config.deal_limit == limit
    assert config.most_deals == limit + 1
    results = [tied_result(k + 1, teams) for k in range(limit)]
    assert match_outcome(config, results, ()) == (False, (), (0, 1))
    results.append(tied_result(limit + 1, teams))
    assert match_outcome(config, results, (0, 1))[0]
    assert len(results) == config.most_deals
    shared = Config(players=config.players, teams=config.teams, match_deals=config.match_deals)
    assert shared.most_deals == limit
    assert Config(players=2, target_score=50, tie_rule=TieRule.TIEBREAK_DEAL).most_deals is None


# --- K11.1: the recipient ------------------------------------------------------------------


def test_k11_1_seat_0_as_the_last_capturer_is_the_recipient() -> None:
    """K11.1: seat 0 captures last (8C>8H) in a deal dealt by seat 1, so seat 0, not the
    dealer, takes the table left over and the set-aside court (KC, K6.1)."""
    config = Config(players=2, first_dealer=1)
    hands = {0: "7H 8C 9H JH", 1: "8H 10H QH AH"}
    stock = stacked_deck(config.schedule.later_rounds, 2, 1, hands, used="KC")[:8]
    state = dealer_last_card(config, "KC", "", stock=stock, last_capturer=1, rest_to=1)
    check_state(state)
    state, _ = play(state, 1, Move.parse("KC"))
    assert state.last_distribution
    assert (state.table, state.set_aside) == ((), cards("KC"))
    for item in ["0:7H", "1:8H", "0:8C>8H", "1:10H", "0:9H", "1:QH", "0:JH", "1:AH"]:
        state, events = play_text(state, item)
    end = only(events, DealEnded)
    assert (end.recipient, end.result.recipient) == (0, 0)
    assert end.collected == cards("7H 10H 9H QH JH AH KC")
    assert state.results[0].scores[0].card_points == 1  # the pile's AH (K2.4)


# --- K16.6: no forced sweep ----------------------------------------------------------------


def test_k16_6_without_a_forced_sweep_a_card_beside_a_sweeping_one_may_crawl() -> None:
    """K16.6: 10S sweeps 4H + 6C, but with ``no_forced_sweep`` 9D may crawl instead;
    ``is_legal`` and the legal set agree. Without the flag K7.6 forbids that crawl."""
    table, hand, crawl = cards("4H 6C"), cards("10S 9D"), Move.parse("9D")
    free = Rules(no_forced_sweep=True)
    assert is_legal(hand, table, free, crawl)
    assert legal("4H 6C", "10S 9D", free) == moves("9D", "10S>4H+6C")
    assert crawl in table_moves(hand, table, free)
    assert not is_legal(hand, table, Rules(), crawl)
    assert legal("4H 6C", "10S 9D") == moves("10S>4H+6C")


def test_k7_8_is_legal_refuses_each_crawl_the_rules_forbid_whatever_the_hands_order() -> None:
    """``is_legal`` judges a crawl alone, without the legal set: each rule that forbids
    one, with the card that forbids it anywhere in the hand (the last one too)."""
    table = cards("4H 6C")
    for hand in (cards("10S 9D"), cards("9D 10S")):
        assert not is_legal(hand, table, Rules(), Move.parse("9D"))  # K7.6: 10S sweeps
    assert not is_legal(cards("9D 5S"), cards("5H 3C"), Rules(), Move.parse("5S"))  # K7.4
    must = Rules(must_capture_if_able=True)
    for hand in (cards("5S 9D"), cards("9D 5S")):
        assert not is_legal(hand, cards("5H 3C"), must, Move.parse("9D"))  # K16.8: 5S takes
        assert is_legal(hand, cards("5H 3C"), Rules(), Move.parse("9D"))


# --- K16.10: bordstabbe --------------------------------------------------------------------


def bordstabbe_deck(config: Config, dealer: int, table: str) -> list[Card]:
    """A full deck whose first distribution (K5.3) deals ``table`` to the table."""
    return stacked_deck(config.schedule.first_rounds, config.players, dealer, table=table)


def test_k16_10_seat_0_as_the_first_player_pays_bordstabbe() -> None:
    """K16.10: dealer 3 makes seat 0 the first player; a first table of four fives gives
    seat 0, and nobody else, -5 in the deal's score."""
    config = Config(players=4, first_dealer=3, rules=Rules(bordstabbe=True))
    state, events = open_game(config, decks=[bordstabbe_deck(config, 3, "5H 5C 5D 5S")])
    assert state.table == cards("5H 5C 5D 5S")
    assert only(events, Bordstabbe).seat == 0
    assert state.bordstabbe_seat == 0
    state, deal_events = finish_deal(state)
    result = only(deal_events, DealEnded).result
    assert [s.bordstabbe for s in result.scores] == [-5, 0, 0, 0]


def test_k16_10_bordstabbe_belongs_to_its_own_deal() -> None:
    """K16.10: deal 1's first table (four sevens) costs seat 1 -5; deal 2's is of
    several values, so deal 2's score has no bordstabbe at all."""
    config = Config(players=2, rules=Rules(bordstabbe=True))
    decks = [bordstabbe_deck(config, 0, "7H 7C 7D 7S"), bordstabbe_deck(config, 1, "7H 9C 2D 3S")]
    state, events = open_game(config, decks=decks)
    assert only(events, Bordstabbe).seat == 1
    state, first_events = finish_deal(state)
    assert [s.bordstabbe for s in only(first_events, DealEnded).result.scores] == [0, -5]
    assert (state.deal, state.table) == (2, cards("7H 9C 2D 3S"))
    assert state.bordstabbe_seat is None
    state, second_events = finish_deal(state)
    assert not any(isinstance(e, Bordstabbe) for e in second_events)
    assert [s.bordstabbe for s in only(second_events, DealEnded).result.scores] == [0, 0]
    assert state.over


@pytest.mark.parametrize("text", ["6C", "8D>8H", "9D>4H+5C", "QS>2H+4D+6C"])
def test_a_move_is_written_in_the_transcript_notation(text: str) -> None:
    """``card>taken+taken``, as transcripts and error messages show a move and
    docs/krypkasino-decisions.md writes one (``10S>4H+6C``)."""
    assert str(Move.parse(text)) == text


def test_k8_2_a_crawl_is_never_a_sweep() -> None:
    """K8.3: only a capture sweeps; a crawl onto an empty table takes nothing."""
    assert sweep_kind((), Move.parse("7H")) is SweepKind.NONE
    assert sweep_kind(cards("5H"), Move.parse("9C")) is SweepKind.NONE
