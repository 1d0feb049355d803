"""Views (design section 3, K14): fields, immutability and the fields derived per game."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.krypkasino import Config, Move, Rules, State, legal_moves, open_game, play, view
from engine.krypkasino import views as views_module
from engine.krypkasino.scoring import match_totals
from engine.krypkasino.views import View
from tests.engine.krypkasino.helpers import cards, finish_deal, position, ranks


def deal_starts(config: Config, seed: int) -> list[State]:
    """The opening state of every deal of a seeded match, and its final state."""
    state, _ = open_game(config, seed=seed)
    starts = [state]
    while not state.over:
        state, _ = finish_deal(state)
        starts.append(state)
    return starts


def test_a_view_is_immutable_and_names_its_fields() -> None:
    state, _ = open_game(Config(2), seed=1)
    v = view(state, 0)
    with pytest.raises(AttributeError):
        v.seat = 1  # type: ignore[misc]
    assert v.hand == state.hands[0] and v._replace(seat=None).seat is None
    assert view(state, None).hand == () and repr(v).startswith("View(config=Config(")
    assert View._fields[:3] == ("config", "seat", "hand")


@pytest.mark.parametrize("limit", [1024, 1], ids=["cache", "evicting"])
def test_interleaved_games_views_derive_their_own_totals_and_distributions(
    limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``distributions`` (K5.2) and ``totals`` (K13.1) are kept per config and
    results object: games with a shared config, an equal config and another
    config, interleaved deal by deal, each get their own."""
    monkeypatch.setattr(views_module, "_DERIVED_LIMIT", limit)
    monkeypatch.setattr(views_module, "_DERIVED", {})
    config = Config(2, match_deals=4)
    other = Config(2, match_deals=4, rules=Rules(single_deck=True))
    runs = [
        deal_starts(config, 1),
        deal_starts(config, 2),
        deal_starts(replace(config), 3),
        deal_starts(other, 4),
    ]
    assert config.distributions != other.distributions
    for deal in range(max(len(run) for run in runs)):
        for run in runs:
            state = run[min(deal, len(run) - 1)]
            for seat in (None, 0, 1):
                v = view(state, seat)
                assert v.distributions == state.config.distributions
                assert v.totals == match_totals(state.config, state.results)
                assert v.results is state.results
    assert all(any(state.results[-1].team_totals) for state in (run[-1] for run in runs))
    assert len(views_module._DERIVED) <= limit


def test_the_view_cache_keeps_every_default_match_with_a_tiebreak_deal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The longest default match (K13.2: one deal per player, 6 players) and its
    tie-break deal (K13.3), 7 finished deals, keep their derived view fields cached."""
    monkeypatch.setattr(views_module, "_DERIVED", {})
    final = deal_starts(Config(6), 6)[-1]
    assert len(final.results) == 6
    longest = replace(final, results=(*final.results, final.results[0]))
    view(longest, None)
    assert (id(longest.config), id(longest.results)) in views_module._DERIVED


def test_a_view_reports_the_state_it_was_made_of() -> None:
    state, _ = open_game(Config(3), seed=5)
    state, _ = play(state, state.turn, legal_moves(state, state.turn)[0])
    v = view(state, 1)
    assert (v.dealer, v.turn, v.deal, v.distribution) == (
        state.dealer,
        state.turn,
        state.deal,
        state.distribution,
    )
    assert v.hand_sizes == tuple(len(h) for h in state.hands)
    assert v.pile_sizes == tuple(len(p) for p in state.piles)
    assert (v.stock_size, v.last_distribution) == (len(state.stock), not state.stock)
    assert (v.table, v.markers, v.set_aside) == (state.table, state.markers, state.set_aside)
    assert (v.last_capturer, v.bordstabbe_seat) == (state.last_capturer, state.bordstabbe_seat)
    assert (v.tiebreak, v.over, v.winners, v.move_number) == (
        state.tiebreak,
        state.over,
        state.winners,
        state.move_number,
    )


def test_a_finished_matchs_view_has_no_turn() -> None:
    """K13: nobody moves once the match is over, whatever seat the state last gave the turn."""
    state, _ = open_game(Config(2), seed=3)
    while not state.over:
        state, _ = play(state, state.turn, legal_moves(state, state.turn)[0])
    assert [view(state, seat).turn for seat in (None, 0, 1)] == [None, None, None]


def test_a_view_counts_a_sweep_marker_once_in_its_pile() -> None:
    """K8.4: a sweep's marker lies in the sweeper's pile, so it counts once in its size."""
    state = position("7S 4C", {1: "JH 2C"})
    state, _ = play(state, 1, Move.parse("JH>7S+4C"))  # KX3: a sweep, marked by JH
    assert state.markers[1] == cards("JH")
    for seat in (None, 1, 2):
        assert view(state, seat).pile_sizes == (0, 3, 0, 0)


def test_a_view_offers_no_sweep_by_a_court_when_courts_take_by_rank_only() -> None:
    """K14.1 with K16.7: a jack sweeps JH 5C 6D by sums, but not when courts go by rank."""
    table = "JH 5C 6D"
    assert set(view(position(table, {1: "2C 3C"}), None).sweep_ranks) == ranks("J")
    rank_only = position(table, {1: "2C 3C"}, rules=Rules(court_cards_rank_only=True))
    for seat in (None, 1):
        assert view(rank_only, seat).sweep_ranks == ()
