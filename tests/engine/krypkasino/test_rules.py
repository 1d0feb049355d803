"""Unit tests per rule area of the Krypkasino spec, beyond the K18 examples.

Covers K16 configuration validity, the K5.1 schedule and K5.3 dealing for every
player count and variant, K6 / K16.5 removal, K2.4 / K16.9 / K16.4 scoring totals,
K11.3 / K12.2 / K12.3 scoring, the K7 values and move identity, K8.2 / K8.5 moves,
K9.2 / K9.3 sweep accounting, the K11.1 recipient, K14.2 last cards, K4.2 draw for
deal, K3.2 teams, K13 match ends, the reasons of ``IllegalMoveError``, and that
``play`` never mutates its input.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import random
import re
import typing
from collections import Counter
from dataclasses import replace

import pytest

from engine.cards import (
    HEARTS,
    KING,
    RANK_NAMES,
    Card,
    CardError,
    card_str,
    cards_str,
    check_deck,
    full_deck,
    make_card,
    parse_card,
    parse_cards,
    rank_of,
    seeded_rng,
    shuffled,
    suit_of,
)
from engine.krypkasino import (
    Config,
    ConfigError,
    DealResult,
    DrawExhaustedError,
    IllegalMoveError,
    Move,
    Reason,
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
    table_moves,
    view,
)
from engine.krypkasino.dealing import _draw_sequence
from engine.krypkasino.events import (
    Bordstabbe,
    Captured,
    CardsSetAside,
    Crawled,
    DealEnded,
    DistributionDealt,
    Event,
)
from engine.krypkasino.invariants import check_state
from engine.krypkasino.moves import is_court, is_legal
from engine.krypkasino.scoring import match_outcome, match_totals, team_totals
from engine.krypkasino.state import remove_cards
from tests.engine.krypkasino.helpers import (
    cards,
    dealer_last_card,
    deck_starting_with,
    finish_deal,
    legal,
    moves,
    only,
    play_text,
    position,
    ranks,
    rest_of_deck,
    stacked_deck,
    sweep_parts,
)

PLAYERS = [2, 3, 4, 5, 6]
# Every setting valid with any player count; a new flag that is joins it (README,
# "Contributing").
ANY_FLAG = [
    Rules(last_capture_point=True),
    Rules(removal=Removal.SPADES),
    Rules(removal=Removal.NONE),
    Rules(no_forced_sweep=True),
    Rules(court_cards_rank_only=True),
    Rules(must_capture_if_able=True),
    Rules(nordic_scoring=True),
    Rules(bordstabbe=True),
]


def rejection(config: Config) -> ConfigError:
    with pytest.raises(ConfigError) as error:
        config.validate()
    return error.value


def rejected_flag(config: Config) -> str:
    return rejection(config).flag


@pytest.mark.parametrize(
    ("config", "rule"),
    [
        (Config(players=7), "K3.1"),
        (Config(players=3, rules=Rules(two_player_five_six=True)), "K16.1"),
        (Config(players=2, rules=Rules(two_player_five_six=True, four_four=True)), "K16.1"),
        (Config(players=3, rules=Rules(four_four=True)), "K16.2"),
        (Config(players=5, rules=Rules(single_deck=True)), "K16.3"),
        (Config(players=5, teams=Teams.PAIRS), "K3.2"),
        (Config(players=4, teams=Teams.TRIOS), "K3.2"),
        (Config(players=4, first_dealer=4), "K4.2"),
        (Config(players=2, match_deals=0), "K13.2"),
        (Config(players=2, match_deals=242), "K13.2"),
        (Config(players=4, match_deals=5), "K13.2"),
        (Config(players=2, target_score=0), "K13.2"),
        (Config(players=2, target_score=481), "K13.2"),
    ],
)
def test_a_refused_config_gives_the_rule_its_message_cites(config, rule):
    """Every ``ConfigError`` carries in ``rule`` the rule ID its message cites, as an
    ``IllegalMoveError`` does, so that a caller need not read it from the text."""
    error = rejection(config)
    assert error.rule == rule
    # A spec rule (K16.2) or a house variant's (HV1.2, docs/krypkasino-decisions.md).
    cited = re.findall(r"\b(?:K|HV)\d+\.\d+\b", error.reason.rsplit("(", 1)[1])
    assert cited[0] == rule


# --- K16 / K3.2 / K13.2 / K4.2: configuration validity ------------------------------------


@pytest.mark.parametrize("players", [0, 1, 7, 8])
def test_k3_1_player_count(players):
    assert rejected_flag(Config(players=players)) == "players"


@pytest.mark.parametrize("players", PLAYERS)
def test_k16_defaults_are_valid(players):
    config = Config(players=players)
    assert config.validate() is config


@pytest.mark.parametrize("players", PLAYERS)
@pytest.mark.parametrize("rules", ANY_FLAG, ids=lambda r: ",".join(r.enabled()))
def test_k16_flags_valid_for_any_player_count(players, rules):
    Config(players=players, rules=rules).validate()


@pytest.mark.parametrize("players", PLAYERS)
def test_k16_1_two_player_five_six_only_for_two(players):
    config = Config(players=players, rules=Rules(two_player_five_six=True))
    if players == 2:
        config.validate()
    else:
        assert rejected_flag(config) == "two_player_five_six"


@pytest.mark.parametrize(
    "rules",
    [
        Rules(two_player_five_six=True, four_four=True),
        Rules(two_player_five_six=True, single_deck=True),
    ],
)
def test_k16_1_two_player_five_six_excludes_other_schedules(rules):
    """Each flag is valid for 2 players alone: the error names both (K16 "flag(s)")."""
    other = "four_four" if rules.four_four else "single_deck"
    with pytest.raises(ConfigError) as error:
        Config(players=2, rules=rules).validate()
    assert error.value.flags == ("two_player_five_six", other)
    assert error.value.flag == f"two_player_five_six,{other}"


def test_k16_1_with_both_other_schedules_every_excluded_flag_is_named():
    """Naming only the first made a caller fix one flag and be refused for the next."""
    rules = Rules(two_player_five_six=True, four_four=True, single_deck=True)
    with pytest.raises(ConfigError) as error:
        Config(players=2, rules=rules).validate()
    assert error.value.flags == ("two_player_five_six", "four_four", "single_deck")
    assert error.value.reason == (
        "two_player_five_six cannot be combined with four_four or single_deck (K16.1)"
    )


def test_k16_1_for_other_player_counts_the_excluded_flags_are_named_too():
    """Naming only the player count made a caller with 3 players and ``four_four`` fix
    ``two_player_five_six`` and be refused again for ``four_four`` (a rules review)."""
    rules = Rules(two_player_five_six=True, four_four=True)
    with pytest.raises(ConfigError) as error:
        Config(players=3, rules=rules).validate()
    assert error.value.flags == ("two_player_five_six", "four_four")
    assert error.value.reason == (
        "only for 2 players, not 3, and cannot be combined with four_four (K16.1)"
    )
    alone = rejection(Config(players=3, rules=Rules(two_player_five_six=True)))
    assert (alone.flags, alone.reason) == (
        ("two_player_five_six",),
        "only for 2 players, not 3 (K16.1)",
    )


@pytest.mark.parametrize("players", PLAYERS)
def test_k16_2_four_four_only_where_it_divides(players):
    config = Config(players=players, rules=Rules(four_four=True))
    if players == 5:  # (104 - 20 - 4) / 20 = 4
        config.validate()
    else:
        error = rejection(config)
        assert (error.flag, error.reason[-7:]) == ("four_four", "(K16.2)")


@pytest.mark.parametrize("players", PLAYERS)
@pytest.mark.parametrize("four_four", [False, True])
def test_k16_3_single_deck_player_counts(players, four_four):
    config = Config(players=players, rules=Rules(single_deck=True, four_four=four_four))
    if players in (2, 3, 4, 6):
        config.validate()
    else:
        error = rejection(config)
        assert (error.flag, error.reason[-7:]) == ("single_deck", "(K16.3)")


@pytest.mark.parametrize("players", PLAYERS)
def test_k3_2_pairs_need_four_or_six(players):
    config = Config(players=players, teams=Teams.PAIRS)
    if players in (4, 6):
        config.validate()
    else:
        assert rejected_flag(config) == "teams"


@pytest.mark.parametrize("players", PLAYERS)
def test_k3_2_trios_need_six(players):
    config = Config(players=players, teams=Teams.TRIOS)
    if players == 6:
        config.validate()
    else:
        assert rejected_flag(config) == "teams"


@pytest.mark.parametrize("players", PLAYERS)
def test_k13_2_match_deals_without_target(players):
    for deals in (players, 2 * players, 3 * players):
        Config(players=players, match_deals=deals).validate()
    for deals in (players + 1, 2 * players - 1, 0, -players):
        assert rejected_flag(Config(players=players, match_deals=deals)) == "match_deals"


@pytest.mark.parametrize("deals", [1, 3, 5, 7])
def test_k13_2_match_deals_with_target_any_positive(deals):
    Config(players=4, target_score=100, match_deals=deals).validate()
    Config(players=4, target_score=100).validate()
    assert rejected_flag(Config(players=4, target_score=100, match_deals=0)) == "match_deals"


@pytest.mark.parametrize("target", [0, -1])
def test_k13_2_target_score_must_be_positive(target):
    """docs/krypkasino-decisions.md, "Match length": a target of 0 or less is refused."""
    Config(players=4, target_score=1).validate()
    assert rejected_flag(Config(players=4, target_score=target)) == "target_score"


@pytest.mark.parametrize("players", PLAYERS)
def test_k4_2_first_dealer_is_a_seat(players):
    for seat in range(players):
        Config(players=players, first_dealer=seat).validate()
    for seat in (-1, players, players + 3):
        assert rejected_flag(Config(players=players, first_dealer=seat)) == "first_dealer"
        # The draw decides the dealer, but first_dealer is still checked (decisions doc).
        drawn = Config(players=players, first_dealer=seat, draw_for_deal=True)
        assert rejected_flag(drawn) == "first_dealer"


def test_k16_new_game_validates():
    with pytest.raises(ConfigError) as error:
        new_game(Config(players=4, teams=Teams.TRIOS))
    assert error.value.flag == "teams"


def test_k16_flag_names_are_the_boolean_flags_in_the_spec_order():
    """K16: every flag but ``removal`` (K16.5, not a boolean), in the spec table's order,
    then the house flags (docs/krypkasino-decisions.md, "House variants") as added."""
    assert Rules.flag_names() == (
        "two_player_five_six",
        "four_four",
        "single_deck",
        "last_capture_point",
        "no_forced_sweep",
        "court_cards_rank_only",
        "must_capture_if_able",
        "nordic_scoring",
        "bordstabbe",
    )


@pytest.mark.parametrize(
    ("rules", "enabled"),
    [
        (Rules(), ()),
        (Rules(removal=Removal.COURTS), ()),
        (Rules(removal=Removal.SPADES), ("removal=spades",)),
        (
            Rules(bordstabbe=True, four_four=True, removal=Removal.NONE),
            ("four_four", "bordstabbe", "removal=none"),
        ),
    ],
)
def test_k16_enabled_names_the_flags_that_differ_from_their_default(rules, enabled):
    """K16: only non-default flags, in the spec's order, ``removal`` (K16.5) by its value."""
    assert rules.enabled() == enabled


# --- K5.1 / K5.2 / K5.3 / K15.2: schedules and dealing ------------------------------------

# (players, rules, first rounds, hand, table, distributions), straight from K5.1 and K16.
SCHEDULES = [
    (2, Rules(), ((3, 2), (3, 2)), 6, 4, 12),
    (3, Rules(), ((3, 3), (2, 2)), 5, 5, 8),
    (4, Rules(), ((3, 2), (2, 2)), 5, 4, 6),
    (5, Rules(), ((2, 2), (2, 2)), 4, 4, 5),
    (6, Rules(), ((3, 2), (2, 0)), 5, 2, 4),
    (2, Rules(two_player_five_six=True), ((3, 3), (2, 3)), 5, 6, 12),
    (5, Rules(four_four=True), ((2, 0), (2, 4)), 4, 4, 5),
    (2, Rules(single_deck=True), ((2, 0), (2, 4)), 4, 4, 6),
    (3, Rules(single_deck=True), ((2, 0), (2, 4)), 4, 4, 4),
    (4, Rules(single_deck=True), ((2, 0), (2, 4)), 4, 4, 3),
    (6, Rules(single_deck=True), ((2, 0), (2, 4)), 4, 4, 2),
    (4, Rules(single_deck=True, four_four=True), ((2, 0), (2, 4)), 4, 4, 3),
]
SCHEDULE_IDS = [f"{n}p-{','.join(r.enabled()) or 'default'}" for n, r, *_ in SCHEDULES]


def spec_deal(
    deck: list[Card], rounds: tuple[tuple[int, int], ...], players: int, dealer: int
) -> tuple[list[list[Card]], list[Card], list[Card]]:
    """The K5.3 pseudo-code, transcribed: ``(hands, table in dealing order, stock)``."""
    hands: list[list[Card]] = [[] for _ in range(players)]
    table: list[Card] = []
    top = 0
    for h, t in rounds:
        for i in range(1, players + 1):
            hands[(dealer + i) % players] += deck[top : top + h]
            top += h
        table += deck[top : top + t]
        top += t
    return hands, table, deck[top:]


@pytest.mark.parametrize(
    ("players", "rules", "rounds", "hand", "table", "count"), SCHEDULES, ids=SCHEDULE_IDS
)
def test_k5_1_schedule_table(players, rules, rounds, hand, table, count):
    config = Config(players=players, rules=rules)
    schedule = config.schedule
    assert schedule.first_rounds == rounds
    assert schedule.later_rounds == ((2, 0), (2, 0))
    assert (schedule.first_hand, schedule.first_table) == (hand, table)
    assert config.distributions == count
    # K5.2
    assert count == 1 + (config.deck_size - players * hand - table) // (4 * players)
    # K5.1 / K8: the first distribution deals n*h1 hand cards, each later one 4n more, so
    # the whole deal plays every card but the first table's.
    assert config.hand_cards_dealt(1) == players * hand
    assert config.hand_cards_dealt(2) == players * (hand + 4)
    assert config.hand_cards_dealt(count) == config.deck_size - table


@pytest.mark.parametrize(
    ("players", "rules", "rounds", "hand", "table", "count"), SCHEDULES, ids=SCHEDULE_IDS
)
def test_k5_3_dealing_follows_the_pseudo_code(players, rules, rounds, hand, table, count):
    config = Config(players=players, rules=replace(rules, removal=Removal.NONE))
    dealer = players - 1
    config = replace(config, first_dealer=dealer)
    deck = list(shuffled(full_deck(config.copies), random.Random(players * 100 + count)))
    state, events = open_game(config, decks=[deck])
    hands, dealt_table, stock = spec_deal(deck, rounds, players, dealer)
    assert [sorted(h) for h in state.hands] == [sorted(h) for h in hands]
    assert [len(h) for h in hands] == [hand] * players
    assert list(state.table) == dealt_table
    assert len(dealt_table) == table
    assert only(events, DistributionDealt).table == tuple(dealt_table)
    assert list(state.stock) == stock
    assert state.turn == (dealer + 1) % players  # K4.4


@pytest.mark.parametrize(
    ("players", "rules", "rounds", "hand", "table", "count"), SCHEDULES, ids=SCHEDULE_IDS
)
def test_k15_2_later_distributions_and_sistan(players, rules, rounds, hand, table, count):
    config = Config(players=players, rules=rules)
    state = new_game(config, seed=count)
    stock = [len(state.stock)]
    assert stock[0] == config.deck_size - players * hand - table
    deal = state.deal
    while state.deal == deal:
        before = state.stock
        state, events = play(state, state.turn, legal_moves(state, state.turn)[0])
        for event in events:
            if isinstance(event, DistributionDealt) and event.deal == deal:
                # K5.3: a later distribution takes the top 4n cards of the stock.
                assert state.stock == before[4 * players :]
                assert all(len(h) == 4 for h in state.hands)
                assert state.turn == (state.dealer + 1) % players  # K10.1
                assert event.last == (not state.stock)  # K5.4
                stock.append(len(state.stock))
    assert len(stock) == count
    assert stock[-1] == 0
    assert all(a - b == 4 * players for a, b in itertools.pairwise(stock))


# --- K6 / K16.5: removal after each distribution -----------------------------------------


def dealer_crawls_into_distribution_2(rules: Rules, card: str, table: str) -> State:
    """Four players, dealer 0 about to crawl ``card`` onto ``table`` as the last card of
    distribution 1 (K4.4); the stock holds the 80 cards of the later distributions."""
    config = Config(players=4, rules=rules)
    stock = rest_of_deck(cards(f"{card} {table}"))[:80]
    state = dealer_last_card(config, card, table, stock=stock, last_capturer=1, rest_to=1)
    check_state(state)
    assert legal_moves(state, 0) == moves(card)
    return state


@pytest.mark.parametrize(
    ("removal", "table", "set_aside"),
    [
        (Removal.COURTS, "3S 7D", "KH QS JD"),
        (Removal.SPADES, "KH 7D JD", "3S QS"),
        (Removal.NONE, "3S KH 7D QS JD", ""),
    ],
)
def test_k6_1_removal_follows_a_later_distribution_too(
    removal: Removal, table: str, set_aside: str
) -> None:
    """K6.1 / K16.5: once distribution 2 is dealt, before anyone plays, the table loses
    what the setting selects: courts; spades (non-spade courts stay); nothing. The first
    distribution's removal is KX22."""
    state = dealer_crawls_into_distribution_2(Rules(removal=removal), "JD", "3S KH 7D QS")
    state, events = play(state, 0, Move.parse("JD"))
    assert only(events, DistributionDealt).distribution == 2
    assert state.table == cards(table)
    assert state.set_aside == cards(set_aside)
    set_aside_events = [e.cards for e in events if isinstance(e, CardsSetAside)]
    assert set_aside_events == ([cards(set_aside)] if set_aside else [])
    assert [len(hand) for hand in state.hands] == [4, 4, 4, 4]
    assert state.turn == 1


def test_k6_2_a_crawled_court_stays_until_the_next_removal() -> None:
    """K6.2: a court crawled during a distribution is not set aside by the move; it stays
    on the table and is captured like any other card, here in a sum (KC = AH + QD)."""
    state = position("AH 9C", {1: "QD 5S", 2: "KC 3D"}, filler=2)
    state, _ = play(state, 1, Move.parse("QD"))
    assert state.table == cards("AH 9C QD")
    assert state.set_aside == ()
    assert legal_moves(state, 2) == moves("3D", "KC>AH+QD")
    state, _ = play(state, 2, Move.parse("KC>AH+QD"))
    assert state.table == cards("9C")
    assert state.piles[2] == cards("KC AH QD")


@pytest.mark.parametrize(
    ("removal", "card", "table"),
    [(Removal.COURTS, "KC", "JH QS"), (Removal.SPADES, "KS", "3S 9S")],
)
def test_k6_3_removal_that_empties_the_table_is_no_sweep(
    removal: Removal, card: str, table: str
) -> None:
    """K6.3: removal after distribution 2 takes the whole table: no capture, no marker,
    no sweep points, the last capturer unchanged; every card of the first player crawls.
    The first distribution's case is KX11."""
    state = dealer_crawls_into_distribution_2(Rules(removal=removal), card, table)
    state, events = play(state, 0, Move.parse(card))
    assert state.table == ()
    assert state.set_aside == cards(f"{table} {card}")
    assert not any(isinstance(e, Captured) for e in events)
    assert state.markers == ((), (), (), ())
    assert sweep_parts(state) == [0, 0, 0, 0]
    assert state.last_capturer == 1
    assert state.turn == 1
    assert legal_moves(state, 1) == sorted(Move(c) for c in set(state.hands[1]))


def test_k16_5_set_aside_spades_go_to_the_recipient() -> None:
    """K16.5 ``spades``: a non-spade court stays on the table, and the set-aside spades go
    to the recipient at the end of the deal like the court pile does (KX14)."""
    config = Config(players=4, rules=Rules(removal=Removal.SPADES))
    state = dealer_last_card(
        config,
        "9C",
        "KH 4D",
        set_aside="3S QS 9S",
        last_capturer=2,
        piles={2: "9H 4H 5H"},
        rest_to=1,
    )
    check_state(state)
    assert legal_moves(state, 0) == moves("9C")
    state, events = play(state, 0, Move.parse("9C"))
    end = only(events, DealEnded)
    assert end.recipient == 2
    assert end.collected == cards("KH 4D 9C 3S QS 9S")
    assert end.result.scores[2].other_spades == 3


def test_k16_5_without_removal_nothing_is_ever_set_aside() -> None:
    """K16.5 ``none``: the dealt courts stay on the table, and no distribution of the
    deal sets a card aside."""
    config = Config(players=4, rules=Rules(removal=Removal.NONE))
    deck = stacked_deck(config.schedule.first_rounds, 4, 0, table="3S KH 7D QS")
    state, events = open_game(config, decks=[deck])
    assert state.table == cards("3S KH 7D QS")
    while state.deal == 1:
        assert state.set_aside == ()
        state, new = play(state, state.turn, legal_moves(state, state.turn)[0])
        events += new
    dealt = [e for e in events if isinstance(e, DistributionDealt) and e.deal == 1]
    assert len(dealt) == config.distributions
    assert not any(isinstance(e, CardsSetAside) for e in events)


# --- K2.4 / K12 / K15.7 / K16.4 / K16.9: scoring totals ----------------------------------


def test_k2_4_card_point_items():
    pile = cards("2S 2S AS 10D KS 3S AH AD AC 9H")
    s = score_deal(Config(players=2), [pile, ()], [(), ()], 0, None)[0]
    assert (s.storan, s.lillan, s.ace_of_spades, s.other_spades, s.other_aces) == (3, 4, 2, 2, 3)
    assert s.card_points == 14


def test_k16_9_nordic_items():
    config = Config(players=2, rules=Rules(nordic_scoring=True))
    pile = cards("2S 2S AS 10D 10D KS 3S AH AD AC 9H")
    s = score_deal(config, [pile, ()], [(), ()], 0, None)[0]
    assert (s.storan, s.lillan, s.ace_of_spades, s.other_spades, s.other_aces) == (0, 2, 2, 2, 3)
    assert s.card_points == 9


# (rules, players, expected deal total) per K15.7
TOTALS = [
    (Rules(), 4, 42),
    (Rules(single_deck=True), 3, 21),
    (Rules(nordic_scoring=True), 4, 34),
    (Rules(nordic_scoring=True, single_deck=True), 2, 17),
    (Rules(last_capture_point=True), 5, 43),
    (Rules(last_capture_point=True, nordic_scoring=True), 3, 35),
    (Rules(last_capture_point=True, single_deck=True), 6, 22),
    (Rules(removal=Removal.SPADES, last_capture_point=True), 4, 43),
]


@pytest.mark.parametrize(("rules", "players", "total"), TOTALS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_k15_7_deal_totals(rules, players, total, seed):
    state = new_game(Config(players=players, rules=rules), seed=seed)
    deal = state.deal
    _, events = finish_deal(state)
    end = only(events, DealEnded)
    assert end.deal == deal
    scores = end.result.scores
    assert sum(s.total for s in scores) == total
    assert sum(s.sweeps_made + s.sweeps_conceded for s in scores) == 0
    point = [s.last_capture for s in scores]
    if rules.last_capture_point:
        assert point == [int(seat == end.recipient) for seat in range(players)]
    else:
        assert point == [0] * players
    for s in scores:
        items = s.card_points + s.sweeps_made + s.sweeps_conceded + s.last_capture + s.bordstabbe
        assert s.total == items


def test_k12_1_sweeps_conceded_by_the_previous_seat():
    markers = [cards("7H"), (), cards("8C 8C"), ()]
    scores = score_deal(Config(players=4), markers, markers, 0, None)
    assert [s.sweeps_made for s in scores] == [5, 0, 10, 0]
    assert [s.sweeps_conceded for s in scores] == [0, -10, 0, -5]


@pytest.mark.parametrize("recipient", range(4))
def test_k11_3_last_capture_point_goes_to_the_recipient(recipient: int) -> None:
    """K11.3 / K16.4: with ``last_capture_point`` R scores +1 and nobody else does;
    without it nobody does."""
    piles = [cards("AH"), cards("2S"), cards("10D"), ()]
    markers = [(), (), (), ()]
    flagged = Config(players=4, rules=Rules(last_capture_point=True))
    with_point = score_deal(flagged, piles, markers, recipient, None)
    without = score_deal(Config(players=4), piles, markers, recipient, None)
    assert [s.last_capture for s in with_point] == [int(s == recipient) for s in range(4)]
    assert [s.last_capture for s in without] == [0, 0, 0, 0]
    assert [s.total for s in without] == [1, 2, 3, 0]
    assert [s.total for s in with_point] == [
        t + int(s == recipient) for s, t in enumerate([1, 2, 3, 0])
    ]


def test_k12_2_two_players_sweep_part_is_the_marker_difference() -> None:
    """K12.2: with two players, each seat's sweep part is 5 x (own - opponent's markers),
    a double sweep counting its two markers."""
    for own, other in itertools.product(range(4), repeat=2):
        markers = [cards("7H 8H 9H")[:own], cards("5S 5S 9C")[:other]]
        scores = score_deal(Config(players=2), markers, markers, 0, None)
        parts = [s.sweeps_made + s.sweeps_conceded for s in scores]
        assert parts == [5 * (own - other), 5 * (other - own)], (own, other)


def test_k12_3_negative_scores_stay_negative() -> None:
    """K12.3: a seat's deal score, a team's (K3.3) and a match total go below zero, and the
    lowest total wins (K13.3)."""
    config = Config(players=4, teams=Teams.PAIRS)
    piles = [cards("9H"), cards("7H 8H 10D"), (), ()]
    markers = [(), cards("7H 8H"), (), ()]
    scores = score_deal(config, piles, markers, 1, None)
    assert [s.total for s in scores] == [-10, 13, 0, 0]
    deal = DealResult(1, 0, 1, scores, team_totals(config, scores))
    assert deal.team_totals == (-10, 13)
    results = [replace(deal, number=k + 1, dealer=k) for k in range(4)]
    assert match_totals(config, results) == (-40, 52)
    assert match_outcome(config, results, ()) == (True, (0,), ())


# --- K2 / K7: values, groups, move identity ----------------------------------------------


@pytest.mark.parametrize(
    ("table", "hand", "expected"),
    [
        ("AH AC 9D", "2S", ["2S>AH+AC"]),  # a 2 takes two table aces
        ("AH KC 5D", "AS", ["AS>AH+KC"]),  # an ace (14) takes A + K
        ("5H 6C 9D", "JS", ["JS>5H+6C"]),  # J = 5 + 6
        ("4D 7S 9H", "JC", ["JC>4D+7S"]),  # J = 4 + 7
        ("6H 4C 2D 9S", "QH", ["QH>2D+4C+6H"]),  # Q = 6 + 4 + 2
        ("JH AC 5D", "QS", ["QS>AC+JH"]),  # Q = J + A
        ("JH 2C 9D", "KD", ["KD>2C+JH"]),  # K = J + 2
        ("AC 5D", "AH", ["AH"]),  # 14 never takes a lone table ace
        ("AC AD 3H", "4C", ["4C>AC+3H", "4C>AD+3H"]),  # K7.5: suits make moves differ
    ],
)
def test_k7_9_value_consequences(table, hand, expected):
    assert legal(table, hand) == moves(*expected)


@pytest.mark.parametrize("rank", RANK_NAMES)
def test_k7_9_everything_crawls_on_an_empty_table(rank):
    hand = cards(f"{rank}S {rank}H")
    assert table_moves(hand, (), Rules()) == moves(f"{rank}S", f"{rank}H")
    assert table_moves(hand, (), Rules(must_capture_if_able=True)) == moves(f"{rank}S", f"{rank}H")


def test_k7_6_every_sweeping_card_is_offered():
    assert legal("5H 5C", "5D 10S 3C") == moves("5D>5H+5C", "10S>5H+5C")


def test_k7_7_must_capture_only_when_some_card_captures():
    rules = Rules(must_capture_if_able=True)
    assert legal("9C JH", "8D 6C", rules) == moves("6C", "8D")


def test_k16_7_rank_only_courts():
    rules = Rules(court_cards_rank_only=True)
    assert legal("JH JC 5C 6D", "JD", rules) == moves("JD>JC+JH")
    assert legal("2H JC", "KS", rules) == moves("KS")
    assert legal("2H JC", "KS") == moves("KS>2H+JC")
    # Table courts are never part of a sum, so this 2 leaves the table non-empty.
    assert legal("AH AC JH", "2C", rules) == moves("2C>AC+AH")
    assert set(sweep_ranks(cards("JH JC"), rules)) == ranks("J")
    assert sweep_ranks(cards("JH 5C 6D"), rules) == ()
    assert set(sweep_ranks(cards("JH 5C 6D"), Rules())) == ranks("J")
    # No sum reaches a table court, so a plain card never sweeps a table holding one: the
    # 5 takes both fives and leaves the king, and nothing forces it over a crawl (K7.6).
    assert sweep_ranks(cards("5H 5C KD"), rules) == ()
    assert Move.parse("2S") in legal("5H 5C KD", "5D 2S", rules)
    assert is_legal(cards("5D 2S"), cards("5H 5C KD"), rules, Move.parse("2S"))


def test_k8_3_sweep_kinds():
    assert sweep_kind(cards("7H"), Move.parse("7H")) is SweepKind.NONE
    assert sweep_kind(cards("7H 3C"), Move.parse("7D>7H")) is SweepKind.NONE
    assert sweep_kind(cards("7H"), Move.parse("7D>7H")) is SweepKind.SWEEP
    assert sweep_kind(cards("7H"), Move.parse("7H>7H")) is SweepKind.DOUBLE
    assert sweep_kind(cards("KS"), Move.parse("KS>KS")) is SweepKind.DOUBLE
    assert sweep_kind(cards("AS AS"), Move.parse("2S>AS+AS")) is SweepKind.SWEEP
    # K8.3 excludes aces from double sweeps; the move itself can never be legal (K7.9).
    assert sweep_kind(cards("AH"), Move.parse("AH>AH")) is not SweepKind.DOUBLE


# --- K8 / K9: executing a move and sweep accounting --------------------------------------


def test_k8_2_a_crawl_adds_the_card_to_the_table() -> None:
    """K8.2: the crawled card joins the table (appended, docs/krypkasino-decisions.md
    "Table order"), here an ace beside its twin; nothing is captured."""
    state = position("AH 9C", {1: "AH 6D"}, filler=2)
    after, events = play(state, 1, Move.parse("AH"))
    assert after.table == cards("AH 9C AH")
    assert after.hands[1] == cards("6D")
    assert (after.piles, after.markers, after.last_capturer) == (
        state.piles,
        state.markers,
        state.last_capturer,
    )
    assert events == [Crawled(1, cards("AH")[0])]


@pytest.mark.parametrize(
    ("table", "hand", "move"),
    [("9C JH", "6C", "6C"), ("8H 9C", "8D", "8D>8H"), ("4H 5D", "9C", "9C>4H+5D")],
    ids=["crawl", "capture", "sweep"],
)
def test_k8_every_move_counts_once_and_is_the_last_move(table: str, hand: str, move: str) -> None:
    """K8 (K8.2, K8.3): every executed move, crawl or capture, advances ``move_number`` by
    one and becomes the state's ``last_move``, the event that ``play`` reported."""
    state = position(table, {1: hand}, filler=1)
    state = replace(state, move_number=7)
    after, events = play(state, 1, Move.parse(move))
    assert after.move_number == 8
    assert after.last_move == events[0]


@pytest.mark.parametrize(
    ("table", "hand", "move"),
    [
        ("9C JH", "6C", "6C"),
        ("8H 9C", "8D", "8D>8H"),
        ("4H 5D", "9C", "9C>4H+5D"),
        ("5S", "5S", "5S>5S"),
    ],
    ids=["crawl", "capture", "sweep", "double-sweep"],
)
@pytest.mark.parametrize(("players", "seat"), [(2, 1), (4, 1), (4, 3), (5, 4), (6, 2)])
def test_k8_5_the_turn_passes_to_the_left(
    table: str, hand: str, move: str, players: int, seat: int
) -> None:
    """K8.5: whatever the move does, next(p) plays next, from the last seat back to 0."""
    state = position(table, {seat: hand}, players=players, filler=1)
    assert legal_moves(state, seat) == moves(move)
    after, _ = play(state, seat, Move.parse(move))
    assert after.turn == (seat + 1) % players


def test_k9_2_first_turn_sweeps_are_paid_by_the_dealer() -> None:
    """K9.2: a table swept as dealt costs the dealer, here one that removal left sweepable
    (K6.4 at a first distribution); the dealer's own sweep costs prev(dealer), seat 3."""
    config = Config(players=4)
    deck = stacked_deck(
        config.schedule.first_rounds, 4, 0, {1: "10H 8C 8H 9C 9H"}, table="AH KD 4S 5D"
    )
    state = new_game(config, decks=[deck])
    assert (state.table, state.turn) == (cards("AH 4S 5D"), 1)
    assert legal_moves(state, 1) == moves("10H>AH+4S+5D")
    state, events = play(state, 1, Move.parse("10H>AH+4S+5D"))
    sweep = only(events, Captured)
    assert (sweep.sweep, sweep.conceded_by) == (SweepKind.SWEEP, 0)
    assert sweep_parts(state) == [-5, 5, 0, 0]

    dealer_sweeps = position("4H 5D", {0: "9C 2D"}, filler=1)
    assert legal_moves(dealer_sweeps, 0) == moves("9C>4H+5D")
    state, events = play(dealer_sweeps, 0, Move.parse("9C>4H+5D"))
    assert only(events, Captured).conceded_by == 3
    assert sweep_parts(state) == [5, 0, 0, -5]


@pytest.mark.parametrize(
    ("table", "move", "left", "sweep_points"),
    [
        ("4H 6D", "9C", "4H 6D 9C", [0, 0, 0, 0]),
        ("4H 5D 2C", "9C>4H+5D", "2C", [0, 0, 0, 0]),
        ("4H 5D", "9C>4H+5D", "", [5, 0, 0, -5]),
    ],
    ids=["crawl", "capture", "sweep"],
)
def test_k9_3_only_a_capture_of_the_whole_table_makes_a_marker(
    table: str, move: str, left: str, sweep_points: list[int]
) -> None:
    """K9.3: the dealer's last card of the deal sweeps only by taking the whole table; the
    end-of-deal collection of what is left and of the set-aside courts is never a sweep."""
    courts = tuple(c for c in full_deck(2) if is_court(c))
    state = dealer_last_card(
        Config(players=4), "9C", table, set_aside=courts, last_capturer=1, rest_to=1
    )
    check_state(state)
    assert legal_moves(state, 0) == moves(move)
    state, events = play(state, 0, Move.parse(move))
    assert only(events, DealEnded).collected == cards(left) + courts
    scores = state.results[0].scores
    assert [s.sweeps_made + s.sweeps_conceded for s in scores] == sweep_points


# --- K11 / K14.2: the end of a deal and its last cards ------------------------------------


@pytest.mark.parametrize(
    ("capturer_before", "hand_1", "final_moves"),
    [
        (1, "7H 9H JH KH", "1:7H 0:8H 1:9H 0:10H 1:JH 0:QH 1:KH 0:AH"),
        (0, "7H 9H 7C KH", "1:7H 0:8H 1:9H 0:10H 1:7C>7H 0:QH 1:KH 0:AH"),
    ],
    ids=["in-an-earlier-distribution", "most-recent-of-two"],
)
def test_k11_1_the_recipient_is_the_last_capturer_of_the_deal(
    capturer_before: int, hand_1: str, final_moves: str
) -> None:
    """K11.1: R is whoever captured last anywhere in the deal, here seat 1, not the dealer:
    a capture before the final distribution counts when nothing is captured in it, and a
    later capture replaces an earlier one. Nobody capturing at all is KX25."""
    config = Config(players=2)
    hands = {1: hand_1, 0: "8H 10H QH AH"}
    stock = stacked_deck(config.schedule.later_rounds, 2, 0, hands, used="KC")[:8]
    state = dealer_last_card(
        config, "KC", "", stock=stock, last_capturer=capturer_before, rest_to=1
    )
    check_state(state)
    state, _ = play(state, 0, Move.parse("KC"))
    assert state.last_distribution
    assert state.table == ()
    for item in final_moves.split():
        state, events = play_text(state, item)
    assert only(events, DealEnded).recipient == 1


def test_k11_1_a_new_deal_starts_without_a_last_capturer() -> None:
    """K11.1: R is the last capturer *of the deal*: the first deal's goes to its own last
    capturer, and the next deal starts with none, so a capture of the previous deal
    cannot count (a deal nobody captures in goes to its dealer: KX25's test)."""
    state, events = finish_deal(new_game(Config(players=4), seed=111))
    captures = [event.seat for event in events if isinstance(event, Captured)]
    assert captures and only(events, DealEnded).recipient == captures[-1]
    assert (state.deal, state.dealer) == (2, 1)
    assert state.last_capturer is None


@pytest.mark.parametrize(
    ("removal", "table"),
    [(Removal.COURTS, "JH QC KS KD"), (Removal.SPADES, "3S 5S 9S 5S")],
)
def test_k16_10_no_bordstabbe_when_removal_empties_the_table(removal: Removal, table: str) -> None:
    """K16.10 triggers only "if the table is non-empty": a first table that removal takes
    whole (K6.3, KX11) leaves nothing of one value, so nobody scores -5 and the deal
    total stays 42 (K15.7)."""
    config = Config(players=4, rules=Rules(bordstabbe=True, removal=removal))
    deck = stacked_deck(config.schedule.first_rounds, 4, 0, table=table)
    state, events = open_game(config, decks=[deck])
    assert state.table == ()
    assert not any(isinstance(e, Bordstabbe) for e in events)
    assert state.bordstabbe_seat is None
    state, deal_events = finish_deal(state)
    result = only(deal_events, DealEnded).result
    assert [s.bordstabbe for s in result.scores] == [0, 0, 0, 0]
    assert sum(s.total for s in result.scores) == 42


@pytest.mark.parametrize(
    "config",
    [Config(players=2), Config(players=6), Config(players=6, rules=Rules(single_deck=True))],
    ids=["n2", "n6", "n6-single_deck"],
)
def test_k14_2_views_tell_the_last_distribution(config: Config) -> None:
    """K14.2 / K5.4: every view says "last cards" from the dealing of the distribution
    that empties the stock to the end of the deal, and in no earlier distribution."""
    state = new_game(config, seed=14)
    seen = set()
    while state.deal == 1:
        for seat in (None, state.turn):
            seen.add((state.distribution, view(state, seat).last_distribution))
        state, _ = play(state, state.turn, legal_moves(state, state.turn)[0])
    last = config.distributions
    assert seen == {(d, d == last) for d in range(1, last + 1)}


# --- K4.2 / K4.3 / K3.2 / K13: dealers, teams and match ends ------------------------------


def test_k1_1_card_codes_are_read_in_any_case_and_written_as_in_the_spec():
    """K1.1: ``10D``, ``AS``, ``QH``; reading ignores case and surrounding blanks, and a
    list of codes may be separated by blanks or commas or given as separate words."""
    assert parse_card(" 10d ") == make_card(9, 2) and card_str(parse_card("qh")) == "QH"
    assert suit_of(parse_card("2H")) == HEARTS and rank_of(parse_card("KC")) == KING
    expected = [parse_card("QH"), parse_card("AS"), parse_card("2C")]
    assert parse_cards("qh, AS,2c") == parse_cards(["QH", "as", "2C"]) == expected
    assert cards_str(expected) == "QH AS 2C"
    for malformed in ("1S", "11H", "AX", "10", ""):
        with pytest.raises(CardError, match="malformed card"):
            parse_card(malformed)


def test_k2_1_a_deck_with_every_card_and_one_more_is_refused():
    """K2.1: a deck holds each code exactly twice; an extra card is refused although none
    is missing."""
    with pytest.raises(CardError) as refused:
        check_deck((*full_deck(2), parse_card("7S")), 2)
    assert str(refused.value).endswith("got 105; extra 7S")


def test_k2_1_an_empty_deck_is_refused_without_listing_every_code():
    with pytest.raises(CardError) as refused:
        check_deck((), 2)
    assert str(refused.value) == "a deck must hold 104 cards, each code twice; got none"


def test_k4_1_the_seeded_shuffle_reaches_every_order():
    """K4.1 chance: the deck order comes from a Fisher-Yates shuffle, so every order of
    three cards appears from some seed, none of them more than twice as often as fair."""
    three = cards("AS 2H 3D")
    seen = Counter(shuffled(three, random.Random(seed)) for seed in range(600))
    assert set(seen) == set(itertools.permutations(three))
    assert all(50 <= count <= 200 for count in seen.values()), seen


def test_k2_1_a_deck_check_counts_each_code_missing_or_too_many():
    deck = [card for card in full_deck(2) if card_str(card) != "AS"] + list(cards("KH KH 2C"))
    with pytest.raises(CardError) as refused:
        check_deck(deck, 2)
    assert str(refused.value).endswith("got 105; missing AS x2; extra 2C, KH x2")


def test_k4_2_draw_for_deal_repeated_ties():
    draw = cards("KH KS KD 5C 9C 9D 2H AC 3D")
    state = new_game(Config(players=3, draw_for_deal=True), draw=draw)
    expected = tuple(zip([0, 1, 2, 0, 1, 2, 1, 2], draw[:8], strict=True))
    assert state.dealer_draw == expected
    assert (state.first_dealer, state.dealer) == (2, 2)
    check_state(state)  # K4.2: the drawn cards go back, the deal uses a full deck


def test_k4_2_draw_for_deal_ace_high():
    state = new_game(Config(players=4, draw_for_deal=True), draw=cards("KH AD 2C QS"))
    assert state.dealer == 1
    assert len(state.dealer_draw) == 4


def test_k4_2_a_draw_that_runs_out_while_seats_tie_is_refused():
    with pytest.raises(DrawExhaustedError, match="ran out before a dealer"):
        new_game(Config(players=3, draw_for_deal=True), draw=cards("KH KS KD 5C 9C"))


def test_k4_2_a_seeded_draw_goes_on_past_one_deck():
    """docs/krypkasino-decisions.md, "Draw for deal that runs out": a shuffled draw never
    runs dry; the k-th deck it draws from is the shuffle of stream ("draw", k)."""
    config = Config(players=2, draw_for_deal=True, rules=Rules(single_deck=True))
    drawn = list(itertools.islice(_draw_sequence(config, 9), 3 * 52))
    for k in range(3):
        deck = shuffled(full_deck(1), seeded_rng(9, "draw", k))
        assert tuple(drawn[52 * k : 52 * (k + 1)]) == deck


def test_an_explicit_deck_must_be_the_games_cards():
    """The engine checks the decks it is given itself, whoever calls it (K1.1, K4.3)."""
    deck = full_deck(2)
    for wrong, message in [
        (deck[:-1], "got 103; missing"),
        ((*deck[:-1], deck[0]), "got 104; missing"),
    ]:
        with pytest.raises(CardError) as refused:
            new_game(Config(players=2), decks=[wrong])
        assert message in str(refused.value)
    assert new_game(Config(players=2), decks=[deck]).deal == 1


def test_k4_2_a_draw_is_taken_from_one_deck_and_only_with_draw_for_deal():
    """No shuffled deck of two copies holds a third ace of spades; a draw without
    draw_for_deal would be ignored, so it is refused as the mistake it is."""
    refusals = [
        (Config(players=2, draw_for_deal=True), "AS AS AS 2C 3C", "at most twice; extra AS"),
        (
            Config(players=2, draw_for_deal=True, rules=Rules(single_deck=True)),
            "KC KC",
            "at most once; extra KC",
        ),
        (Config(players=2), "KC 2C", "a draw sequence needs config.draw_for_deal"),
    ]
    for config, draw, message in refusals:
        with pytest.raises(CardError) as refused:
            new_game(config, draw=cards(draw))
        assert str(refused.value).endswith(message), draw
    # Two copies of a card are one two-deck deck's: a tie, then 3C against 2C.
    drawn = new_game(Config(players=2, draw_for_deal=True), draw=cards("AS AS 3C 2C")).dealer_draw
    assert tuple(card for _, card in drawn) == cards("AS AS 3C 2C")


@pytest.mark.parametrize("players", PLAYERS)
def test_k4_3_dealer_rotation(players):
    first = players // 2
    config = Config(players=players, first_dealer=first)
    state, events = open_game(config, seed=43)
    dealt = []
    while True:
        dealt += [e for e in events if isinstance(e, DistributionDealt)]
        if state.over:
            break
        state, events = finish_deal(state)
    assert len(state.results) == players  # K13.2: match_deals defaults to n
    dealers = [(first + k) % players for k in range(players)]
    assert [r.dealer for r in state.results] == dealers
    # Every distribution's event names its deal and that deal's dealer (only the
    # goldens caught a wrong dealer in the event, a mutation review found).
    assert [(e.deal, e.distribution, e.dealer) for e in dealt] == [
        (deal, distribution, dealers[deal - 1])
        for deal in range(1, players + 1)
        for distribution in range(1, config.distributions + 1)
    ]


@pytest.mark.parametrize(
    ("players", "teams", "members"),
    [
        (4, Teams.PAIRS, [(0, 2), (1, 3)]),
        (6, Teams.PAIRS, [(0, 3), (1, 4), (2, 5)]),
        (6, Teams.TRIOS, [(0, 2, 4), (1, 3, 5)]),
        (5, Teams.INDIVIDUAL, [(0,), (1,), (2,), (3,), (4,)]),
    ],
)
def test_k3_2_team_seating(players, teams, members):
    config = Config(players=players, teams=teams)
    assert [config.team_seats(t) for t in range(config.team_count)] == members
    for seat in range(players):
        assert seat in members[config.team_of(seat)]
        if teams is not Teams.INDIVIDUAL:
            assert config.team_of(seat) != config.team_of((seat + 1) % players)  # K3.3


def test_k3_3_team_totals_are_member_sums():
    config = Config(players=6, teams=Teams.TRIOS)
    _, events = finish_deal(new_game(config, seed=33))
    result = only(events, DealEnded).result
    totals = [s.total for s in result.scores]
    assert result.team_totals == (
        totals[0] + totals[2] + totals[4],
        totals[1] + totals[3] + totals[5],
    )


def result_of(number: int, totals: list[int]) -> DealResult:
    scores = tuple(SeatScore(seat=s, total=t) for s, t in enumerate(totals))
    return DealResult(number, 0, 0, scores, tuple(totals))


def test_k13_2_target_score_and_cap():
    config = Config(players=3, target_score=50, match_deals=2)
    first = [result_of(1, [10, 20, 12])]
    assert match_outcome(config, first, ()) == (False, (), ())
    capped = [*first, result_of(2, [5, 5, 30])]  # nobody reached 50: the cap ends it
    assert match_outcome(config, capped, ()) == (True, (0,), ())
    reached = Config(players=3, target_score=30)
    assert match_outcome(reached, [result_of(1, [30, 10, 10])], ()) == (True, (1, 2), ())


def test_k13_3_a_single_lowest_total_needs_no_tiebreak_deal():
    """With ``tiebreak_deal`` a match whose lowest total is one team's ends at its limit
    as any match does: the extra deal is for a tie alone."""
    config = Config(players=4, tie_rule=TieRule.TIEBREAK_DEAL)
    results = [result_of(k + 1, [10, 11, 11, 12]) for k in range(4)]
    assert match_outcome(config, results, ()) == (True, (0,), ())


def test_k3_2_the_score_sheet_names_each_seats_team():
    """K3.2: the totals are by team, and the sheet says whose: partners sit apart."""
    sheet = score(new_game(Config(players=4, teams=Teams.PAIRS), seed=1))
    assert sheet.team_of_seat == (0, 1, 0, 1)
    assert score(new_game(Config(players=3), seed=1)).team_of_seat == (0, 1, 2)


def test_k13_3_tiebreak_still_tied_is_shared():
    config = Config(players=4, tie_rule=TieRule.TIEBREAK_DEAL)
    results = [result_of(k + 1, [10, 10, 11, 11]) for k in range(4)]
    assert match_outcome(config, results, ()) == (False, (), (0, 1))
    results.append(result_of(5, [3, 3, -20, 56]))
    # Seat 2 is now lowest but was no candidate (K13.3).
    assert match_outcome(config, results, (0, 1)) == (True, (0, 1), ())


def test_k13_3_every_team_tied_for_lowest_is_a_tiebreak_candidate():
    """K13.3: with ``tiebreak_deal`` all the teams tied for the lowest total play on as
    candidates, not just two of them; the extra deal decides among all of them."""
    config = Config(players=4, tie_rule=TieRule.TIEBREAK_DEAL)
    results = [result_of(k + 1, [10, 10, 10, 11]) for k in range(4)]
    assert match_outcome(config, results, ()) == (False, (), (0, 1, 2))
    results.append(result_of(5, [4, 3, 2, -20]))
    # Seat 2, the third candidate, wins the tie-break deal; seat 3 was no candidate.
    assert match_outcome(config, results, (0, 1, 2)) == (True, (2,), ())


# --- IllegalMoveError: reasons and rule IDs (K7.8) -----------------------------------------


def refused(state, seat: int, text: str) -> IllegalMoveError:
    snapshot = copy.deepcopy(state)
    with pytest.raises(IllegalMoveError) as error:
        play(state, seat, Move.parse(text))
    assert state == snapshot
    return error.value


@pytest.mark.parametrize(
    ("table", "hand", "seat", "move", "rules", "reason", "rule"),
    [
        ("8H 9C JH", "8D 6C", 2, "6C", Rules(), Reason.NOT_YOUR_TURN, "K4.4"),
        ("8H 9C JH", "8D 6C", 1, "9D", Rules(), Reason.CARD_NOT_IN_HAND, "K8.1"),
        ("8H 9C JH", "8D 6C", 1, "8D>8C", Rules(), Reason.CAPTURE_NOT_ON_TABLE, "K7.3"),
        ("8H 9C JH", "8D 6C", 1, "8D>9C", Rules(), Reason.CAPTURE_NOT_VALID, "K7.2"),
        ("8H 9C JH", "8D 6C", 1, "6C>9C", Rules(), Reason.CAPTURE_NOT_VALID, "K7.2"),
        ("8H 9C JH", "8D 6C", 1, "8D", Rules(), Reason.MUST_CAPTURE, "K7.4"),
        (
            "8H 9C JH",
            "8D 6C",
            1,
            "6C",
            Rules(must_capture_if_able=True),
            Reason.MUST_CAPTURE,
            "K16.8",
        ),
        (
            "AH 2H 6C 7D 8H 9C JH",
            "8D 6D",
            1,
            "8D>8H",
            Rules(),
            Reason.CAPTURE_NOT_MAXIMAL,
            "K7.3",
        ),
        ("AH AC 4C 6D QH", "QD 2C", 1, "2C>AH+AC", Rules(), Reason.MUST_SWEEP, "K7.6"),
        ("AH AC 4C 6D QH", "QD 2C", 1, "2C", Rules(), Reason.MUST_SWEEP, "K7.6"),
        # K7.1 with K16.7: a court takes only its rank, whatever the sum (the reason is
        # stable; the rule is the variant's).
        (
            "JH AC 5D",
            "QS 9C",
            1,
            "QS>AC+JH",
            Rules(court_cards_rank_only=True),
            Reason.CAPTURE_NOT_VALID,
            "K16.7",
        ),
        # K7.1 with K16.7: a plain card may not take a court, even in a group of its value.
        (
            "AH KC 5D",
            "AD 9C",
            1,
            "AD>AH+KC",
            Rules(court_cards_rank_only=True),
            Reason.CAPTURE_NOT_VALID,
            "K16.7",
        ),
        # K16.6: 4S would sweep, but sweeping is optional, so a crawl of 6H is refused
        # because 6H captures (K7.4), not because a sweep is forced.
        (
            "2H 2C 4D",
            "4S 6H",
            1,
            "6H",
            Rules(no_forced_sweep=True),
            Reason.MUST_CAPTURE,
            "K7.4",
        ),
        # A card of the mover's own hand is not on the table either.
        ("8H 9C JH", "8D 6C", 1, "8D>6C", Rules(), Reason.CAPTURE_NOT_ON_TABLE, "K7.3"),
        ("8H 9C JH", "8D 6C", 1, "8D>8D", Rules(), Reason.CAPTURE_NOT_ON_TABLE, "K7.3"),
        # K1.4: a capture naming the one 4H of the table twice names a card not there.
        ("4H 4C 9C", "8D 6C", 1, "8D>4H+4H", Rules(), Reason.CAPTURE_NOT_ON_TABLE, "K7.3"),
        # Two reasons apply (AS is not on the table; QD must sweep): the first of
        # docs/krypkasino-decisions.md's order is reported.
        ("AH AC 4C 6D QH", "QD 2C", 1, "2C>AH+AS", Rules(), Reason.CAPTURE_NOT_ON_TABLE, "K7.3"),
        # Two reasons apply (9D is not in hand; 8C is not on the table): K8.1 comes first.
        ("8H 9C JH", "8D 6C", 1, "9D>8C", Rules(), Reason.CARD_NOT_IN_HAND, "K8.1"),
    ],
)
def test_k7_8_illegal_move_reasons(table, hand, seat, move, rules, reason, rule):
    state = position(table, {1: hand}, rules=rules)
    error = refused(state, seat, move)
    assert error.reason is reason
    assert error.rule == rule
    # The card the rule is about: none for a turn, the card played, or the card in hand
    # that must sweep (capture under K16.8) instead.
    if reason is Reason.NOT_YOUR_TURN:
        assert error.card is None
    elif reason is Reason.MUST_SWEEP:
        assert error.card == parse_card("QD")
    elif rule == "K16.8":
        assert error.card == parse_card("8D")
    else:
        assert error.card == Move.parse(move).card
    # Only a capture of a card not on the table (K7.3), or of one the variant makes
    # ineligible (K16.7), names a captured card; only one not maximal a group left.
    names_captured = reason is Reason.CAPTURE_NOT_ON_TABLE or rule == "K16.7"
    assert (error.captured is not None) == names_captured
    # Only a capture of a card not on the table counts its copies there (K7.3, K1.4).
    assert (error.table_count is not None) == (reason is Reason.CAPTURE_NOT_ON_TABLE)
    assert not error.in_hand or reason is Reason.CAPTURE_NOT_ON_TABLE
    assert bool(error.group_left) == (reason is Reason.CAPTURE_NOT_MAXIMAL)
    # Only a forced sweep (K7.6) or capture (K16.8) lists the cards of which one must be played.
    assert bool(error.alternatives) == (reason is Reason.MUST_SWEEP or rule == "K16.8")


@pytest.mark.parametrize(
    ("table", "move", "message", "captured"),
    [
        # QS+2D make 14, an ace's value: only K7.1 keeps the queen out of its groups.
        (
            "5C 5H 9H 9D QS 2D",
            "AC>QS+2D",
            "under court_cards_rank_only QS can be taken only by a queen, not by AC",
            "QS",
        ),
        # QS+AC make 13, a king's value; the first captured card of another rank is named.
        (
            "5C 5H 9H 9D QS AC",
            "KH>QS+AC",
            "under court_cards_rank_only KH takes only kings, not AC",
            "AC",
        ),
        (
            "5C 5H 9H 9D QS JD",
            "KH>JD",
            "under court_cards_rank_only KH takes only kings, not JD",
            "JD",
        ),
        (
            "5C 5H 9H 9D QS JD",
            "JC>JD+QS",
            "under court_cards_rank_only JC takes only jacks, not QS",
            "QS",
        ),
    ],
)
def test_k16_7_a_capture_of_a_card_the_variant_makes_ineligible_says_so(
    table, move, message, captured
):
    """K7.1, K16.7: under court_cards_rank_only a court takes only table cards of its
    rank and a plain card no court. Such a capture may add up (the K7.2 message said it
    did not split into groups): the refusal says what the variant forbids, and
    ``captured`` is the captured card it names; the reason stays CAPTURE_NOT_VALID."""
    rules = Rules(court_cards_rank_only=True)
    played = Move.parse(move).card
    error = refused(position(table, {1: f"{card_str(played)} 2C"}, rules=rules), 1, move)
    assert (error.reason, error.rule, error.message) == (
        Reason.CAPTURE_NOT_VALID,
        "K16.7",
        message,
    )
    assert (error.card, error.captured) == (played, parse_card(captured))
    assert str(error) == f"{message} (K16.7)"


def test_k7_2_a_capture_of_eligible_cards_that_do_not_add_up_keeps_its_message():
    """K7.2 under court_cards_rank_only too: eligible cards that make no groups."""
    rules = Rules(court_cards_rank_only=True)
    error = refused(position("5C 5H 9H 9D QS 2D", {1: "AC 2C"}, rules=rules), 1, "AC>5C+2D")
    assert (error.reason, error.rule, error.message) == (
        Reason.CAPTURE_NOT_VALID,
        "K7.2",
        "the captured cards do not split into groups worth 14",
    )
    assert error.captured is None


@pytest.mark.parametrize(
    ("table", "move", "rules", "left"),
    [
        ("KC 5D 8D 9H", "KH>KC", Rules(), "5D 8D"),
        ("KC 5D 8D 9H", "KH>5D+8D", Rules(), "KC"),
        # K16.7: a played court's group is a single card of its rank.
        ("KC KS 5D 8D", "KH>KC", Rules(court_cards_rank_only=True), "KS"),
    ],
)
def test_k7_3_a_capture_that_is_not_maximal_gives_the_group_it_leaves(table, move, rules, left):
    """K7.3: ``group_left`` is the group the message names, in its order, so that a
    caller can show it without reading the message."""
    error = refused(position(table, {1: "KH 2C"}, rules=rules), 1, move)
    assert error.reason is Reason.CAPTURE_NOT_MAXIMAL
    assert error.group_left == tuple(parse_cards(left))
    joined = "+".join(card_str(card) for card in error.group_left)
    assert f", but {joined} left on the table also" in error.message


@pytest.mark.parametrize("code", [-1, 52, 60])
def test_k7_8_a_number_that_is_no_card_code_is_refused_as_not_in_hand(code: int) -> None:
    """K7.8: ``play`` refuses any move outside the legal set with ``IllegalMoveError``;
    a played number outside the deck's codes (K1.1) is not in hand (K8.1), and the
    message names that number, not a crash (52 and up) nor another card (-1 read as KC)."""
    state = position("8H 9C JH", {1: "8D 6C"})
    with pytest.raises(IllegalMoveError) as error:
        play(state, 1, Move(Card(code)))
    assert error.value.reason is Reason.CARD_NOT_IN_HAND
    assert error.value.rule == "K8.1"
    assert error.value.message == f"card code {code} is not in seat 1's hand"


@pytest.mark.parametrize(
    ("move", "rules", "message"),
    [
        ("8D", Rules(), "8D must capture"),
        # 6C has no capture: the refusal names the card that has one.
        (
            "6C",
            Rules(must_capture_if_able=True),
            "8D can capture, and under must_capture_if_able no card may crawl",
        ),
    ],
)
def test_k7_4_and_k16_8_refusals_name_a_card_that_captures(move, rules, message):
    error = refused(position("8H 9C JH", {1: "8D 6C"}, rules=rules), 1, move)
    assert error.message == message
    # Engine callers log the exception itself: its text is the message and the rule.
    assert str(error) == f"{message} ({error.rule})"


@pytest.mark.parametrize(
    ("table", "hand", "move", "rules", "reason", "named", "message"),
    [
        # K7.6: JH and JC each take AS+3D+7H (11); KS (13) and 4S do not.
        (
            "AS 3D 7H",
            "4S JH JC KS",
            "4S",
            Rules(),
            Reason.MUST_SWEEP,
            "JH JC",
            "JH or JC in hand sweeps the table, so one must",
        ),
        # Two decks (K1.2): the two JH are one code, named once.
        (
            "AS 3D 7H",
            "JH JH JC 2C",
            "2C",
            Rules(),
            Reason.MUST_SWEEP,
            "JH JC",
            "JH or JC in hand sweeps the table, so one must",
        ),
        # K7.2: 2S and 2D take 2H and 2C as two groups, 4S as one; in K1.6's order.
        (
            "2H 2C",
            "4S 9C 2D 2S",
            "9C",
            Rules(),
            Reason.MUST_SWEEP,
            "2S 2D 4S",
            "2S, 2D or 4S in hand sweeps the table, so one must",
        ),
        # One card sweeps: the message is as it always was.
        (
            "AS 3D 7H",
            "2S 4S 8C JH",
            "2S",
            Rules(),
            Reason.MUST_SWEEP,
            "JH",
            "JH in hand sweeps the table, so it must",
        ),
        # K16.8: 8D, 9C and JD capture; 3H crawls. The first is ``card``, as before.
        (
            "AH 7C 8S 10D",
            "3H 8D 9C JD",
            "3H",
            Rules(must_capture_if_able=True),
            Reason.MUST_CAPTURE,
            "8D 9C JD",
            "8D, 9C or JD can capture, and under must_capture_if_able no card may crawl",
        ),
        (
            "8H 9C JH",
            "8D 8D 6C",
            "6C",
            Rules(must_capture_if_able=True),
            Reason.MUST_CAPTURE,
            "8D",
            "8D can capture, and under must_capture_if_able no card may crawl",
        ),
        # One card with two captures (K7.5: 4D or 4H with 10C) is named once.
        (
            "10C 4D 4H",
            "AH 2C",
            "2C",
            Rules(must_capture_if_able=True),
            Reason.MUST_CAPTURE,
            "AH",
            "AH can capture, and under must_capture_if_able no card may crawl",
        ),
    ],
)
def test_k7_6_and_k16_8_refusals_list_every_card_of_which_one_must_be_played(
    table, hand, move, rules, reason, named, message
):
    """K7.6, K16.8: ``alternatives`` is every card in hand that sweeps (under K16.8
    captures), each code once, in canonical order (K1.6), so that a caller can say
    "sweep with JH or JC" without asking for the legal moves; ``card`` stays the first.
    They are the cards the legal moves play, and the message names them all."""
    state = position(table, {1: hand}, rules=rules)
    error = refused(state, 1, move)
    assert error.reason is reason
    assert error.alternatives == tuple(parse_cards(named))
    assert error.card == error.alternatives[0]
    assert error.alternatives == tuple(dict.fromkeys(m.card for m in legal_moves(state, 1)))
    assert error.message == message


def test_k7_4_a_crawl_of_a_card_that_captures_lists_no_alternatives():
    """K7.4: the crawled card itself must capture; other cards may still crawl, so the
    refusal names only ``card``, the card played, and no ``alternatives``."""
    error = refused(position("8H 9C JH", {1: "8D 6C"}), 1, "8D")
    assert (error.reason, error.rule, error.card) == (Reason.MUST_CAPTURE, "K7.4", parse_card("8D"))
    assert error.alternatives == ()


@pytest.mark.parametrize(
    ("move", "message"),
    [
        ("8D>8C", "8C is not on the table"),
        ("8D>6C", "6C is in seat 1's hand, not on the table"),
        # K1.4: every card named is on the table, one of them twice.
        ("8D>4H+4H", "the capture names 4H 2 times, but the table holds 1"),
        ("8D>AH+4H+AH+2C", "the capture names AH 2 times, but the table holds 1"),
        # The card named too often, however many times; of two, the first in the
        # move's order (K7.5 sorts the captures: 7C before 8C).
        ("8D>AH+4H+4H", "the capture names 4H 2 times, but the table holds 1"),
        ("8D>4H+4H+4H", "the capture names 4H 3 times, but the table holds 1"),
        ("8D>8C+7C", "7C is not on the table"),
    ],
)
def test_k7_3_a_capture_of_cards_not_on_the_table_names_the_card(move, message):
    """K7.3, K1.4: the message names the card the table does not hold (as often as the
    capture names it), and ``captured`` is that card, for callers that show it without
    reading the message; ``card`` stays the card played."""
    error = refused(position("4H AH 2C 9C", {1: "8D 6C"}), 1, move)
    assert error.reason is Reason.CAPTURE_NOT_ON_TABLE
    assert error.message == message
    named = message.removeprefix("the capture names ").split(" ", 1)[0]
    assert (error.captured, error.card) == (parse_card(named), parse_card("8D"))


@pytest.mark.parametrize(
    ("table", "hand", "move", "table_count", "in_hand"),
    [
        ("4H AH 2C 9C", "8D 6C", "8D>8C", 0, False),
        ("4H AH 2C 9C", "8D 6C", "8D>6C", 0, True),
        ("4H AH 2C 9C", "8D 6C", "8D>8D", 0, True),  # the card played is in hand too
        # K1.4: the table holds one 4H, the hand the other: the message names only the
        # count, and in_hand still says so.
        ("4H AH 2C 9C", "8D 4H", "8D>4H+4H", 1, True),
        ("4H 4H AH 9C", "8D 6C", "8D>4H+4H+4H", 2, False),
    ],
)
def test_k7_3_a_capture_of_cards_not_on_the_table_counts_them_there(
    table, hand, move, table_count, in_hand
):
    """K7.3, K1.4: ``table_count`` is how many copies of ``captured`` the table holds and
    ``in_hand`` whether the seat's hand holds it, what the message says in English: the
    table travels sealed, so a caller with a stale view could not count them itself."""
    error = refused(position(table, {1: hand}), 1, move)
    assert error.reason is Reason.CAPTURE_NOT_ON_TABLE
    assert (error.table_count, error.in_hand) == (table_count, in_hand)
    if table_count:
        assert error.message.endswith(f"but the table holds {table_count}")
    else:
        assert ("hand, not on the table" in error.message) == in_hand


@pytest.mark.parametrize(
    ("table", "hand", "move", "rules", "message"),
    [
        # The group left is named in card codes (K1.1), in canonical order (K7.5).
        (
            "4H 4C 5S 3D 9C",
            "8D 6C",
            "8D>4H+4C",
            Rules(),
            "8D captures 4H+4C, but 3D+5S left on the table also make 8",
        ),
        # Of the groups left (8H, AH+7D), one of fewest cards.
        (
            "AH 2H 6C 7D 8H 9C JH 6D",
            "8D 3S",
            "8D>2H+6D",
            Rules(),
            "8D captures 2H+6D, but 8H left on the table also makes 8",
        ),
        # K2.2, K2.3: a played ace is worth 14 and takes a table ace (1) with a king (13).
        (
            "KH AC 9S 5D 10C 4H 2C",
            "AD 3S",
            "AD>10C+4H",
            Rules(removal=Removal.NONE),
            "AD captures 4H+10C, but AC+KH left on the table also make 14",
        ),
        # K7.1, K16.7: under court_cards_rank_only the king is no part of a plain card's
        # group, so the group left is 5D+9S, not AC+KH.
        (
            "KH AC 9S 5D 10C 4H 2C",
            "AD 3S",
            "AD>10C+4H",
            Rules(court_cards_rank_only=True),
            "AD captures 4H+10C, but 5D+9S left on the table also make 14",
        ),
        # K7.2, K16.7: a played court's groups are the single table cards of its rank,
        # so JS+AC (11 + 1 = 12) is none: QC is the group left, JS+AC the default's.
        (
            "QH QC JS AC 5D",
            "QD 3S",
            "QD>QH+JS+AC",
            Rules(),
            "QD captures AC+JS+QH, but QC left on the table also makes 12",
        ),
        (
            "QH QC JS AC 5D",
            "QD 3S",
            "QD>QH",
            Rules(court_cards_rank_only=True),
            "QD captures QH, but QC left on the table also makes 12",
        ),
        (
            "QH JS AC 5D 6C",
            "QD 3S",
            "QD>QH",
            Rules(),
            "QD captures QH, but AC+JS left on the table also make 12",
        ),
        # K16.6: sweeping is optional (8D would take AH+AC+2H+4D), capturing all not.
        (
            "AH AC 2H 4D 6C 2C",
            "8D 3S",
            "8D>2H+6C",
            Rules(no_forced_sweep=True),
            "8D captures 2H+6C, but AH+AC+2C+4D left on the table also make 8",
        ),
    ],
)
def test_k7_3_a_capture_that_is_not_maximal_names_a_group_left(table, hand, move, rules, message):
    """K7.3: a capture whose remainder still holds a group names one such group and the
    played card's value, so that a player sees what else the card must take."""
    error = refused(position(table, {1: hand}, rules=rules), 1, move)
    assert (error.reason, error.rule) == (Reason.CAPTURE_NOT_MAXIMAL, "K7.3")
    assert error.message == f"{message} and must be taken too"
    assert str(error) == f"{message} and must be taken too (K7.3)"


def test_k7_8_game_over():
    state = new_game(Config(players=2), seed=5)
    while not state.over:
        state, _ = finish_deal(state)
    assert legal_moves(state, state.turn) == []
    error = refused(state, state.turn, "2C")
    assert (error.reason, error.rule, error.card) == (Reason.GAME_OVER, "K13.2", None)


@pytest.mark.parametrize(
    ("table", "captures"),
    [("AH 2H 6C 7D 8H 9C JH", "8H 7D AH 6C 2H"), ("AH 7D 9C", "7D AH")],
)
def test_k7_5_capture_order_does_not_matter(table: str, captures: str) -> None:
    state = position(table, {1: "8D 6D"})
    unsorted = Move(cards("8D")[0], cards(captures))
    after, events = play(state, 1, unsorted)
    assert sorted(after.table) == sorted(remove_cards(state.table, cards(captures)))
    # The same move as its canonical form: same next state, same events (captures sorted).
    assert (after, events) == play(state, 1, Move.of(unsorted.card, unsorted.captures))
    assert only(events, Captured).captures == tuple(sorted(unsorted.captures))


def test_k7_5_captures_given_as_a_list_make_the_same_move() -> None:
    """K7.5: a move is the pair (card, captured multiset), however its captures are held;
    a one-card capture in a list plays exactly like the canonical move, tuple in its event."""
    state = position("8H 9C JH", {1: "8D 6C"})
    listed = Move(cards("8D")[0], list(cards("8H")))  # type: ignore[arg-type]
    after, events = play(state, 1, listed)
    assert (after, events) == play(state, 1, Move.parse("8D>8H"))
    assert only(events, Captured).captures == cards("8H")


def test_k7_7_only_the_mover_has_legal_moves():
    state = position("8H 9C JH", {1: "8D 6C", 2: "8S 9S"})
    assert legal_moves(state, 2) == []
    assert legal_moves(state, 1) == moves("6C", "8D>8H")


# --- Purity: play never mutates its input (design section 2) -----------------------------


def test_play_never_mutates_its_input():
    rng = random.Random(7)
    state = new_game(Config(players=3, rules=Rules(bordstabbe=True)), seed=11)
    seen = 0
    while not state.over and seen < 400:
        snapshot = copy.deepcopy(state)
        move = rng.choice(legal_moves(state, state.turn))
        after, events = play(state, state.turn, move)
        assert state == snapshot
        replay, replay_events = play(state, state.turn, move)
        assert (replay, replay_events) == (after, events)  # and it is deterministic
        state = after
        seen += 1
    assert seen > 0


def test_states_are_frozen_however_they_are_made():
    """K4.1: a State is never mutated; the one ``new_game`` makes and the one ``play``
    derives from it (through ``evolve``) both refuse an assignment."""
    state = new_game(Config(players=2), seed=3)
    after, _ = play(state, state.turn, legal_moves(state, state.turn)[0])
    for each in (state, after):
        with pytest.raises(dataclasses.FrozenInstanceError):
            each.turn = 0  # type: ignore[misc]


def test_new_game_is_deterministic():
    assert open_game(Config(players=5), seed=99) == open_game(Config(players=5), seed=99)
    assert new_game(Config(players=5), seed=99) != new_game(Config(players=5), seed=98)
    # K5.3: with dealer 0 of two, seat 1 takes the top three cards.
    deck = deck_starting_with("10D 2S AS")
    hands = [new_game(Config(players=2), decks=[deck]).hands[1] for _ in range(2)]
    assert hands[0] == hands[1]
    assert not Counter(cards("10D 2S AS")) - Counter(hands[0])


def test_events_are_frozen_and_hashable() -> None:
    """README.md, "Using the engine in-process": events are frozen dataclasses, so a
    caller may keep or share them (``View.last_move`` is one) and put them in sets."""
    kinds = typing.get_args(Event)
    assert len(kinds) == 9
    for kind in kinds:
        assert dataclasses.is_dataclass(kind) and kind.__dict__["__dataclass_params__"].frozen, kind
    state = new_game(Config(players=2), seed=1)
    seen: dict[type, object] = {}
    while len(seen) < 3:
        state, events = play(state, state.turn, legal_moves(state, state.turn)[0])
        seen.update((type(event), event) for event in events)
    for event in seen.values():
        hash(event)
        first = dataclasses.fields(event)[0].name  # type: ignore[arg-type]
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(event, first, 0)
