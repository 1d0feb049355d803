"""The soak benchmark's tables (``bench/soak_configs.py``) are ones ``NewGame`` accepts,
and cover the mix docs/benchmarks.md, "Soak", describes.

A refused table is a failure of the soak, which a smoke run of a few matches would
meet only by luck; so 2,000 seeded tables of each kind are started here by the
service's own ``NewGame`` (``KrypkasinoApi.new_game``, which both servicers call).
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from bench.soak_configs import FREE_FLAGS, MAX_SOAK_DEALS, random_config
from service.calls import CallInfo
from service.krypkasino_api import KrypkasinoApi
from service.tokens import KeyRing, SeatTokens, StateSealer

DRAWN = 2_000


def _drawn(one_deal: bool) -> list[pb.GameConfig]:
    rng = random.Random(f"soak configs {one_deal}")
    return [random_config(rng, one_deal=one_deal) for _ in range(DRAWN)]


@pytest.mark.parametrize("one_deal", [False, True], ids=["whole_matches", "one_deal"])
def test_every_soak_table_is_one_new_game_accepts(one_deal: bool) -> None:
    api = KrypkasinoApi(
        StateSealer(KeyRing.ephemeral(), game="krypkasino"), SeatTokens(KeyRing.ephemeral())
    )
    for seed, config in enumerate(_drawn(one_deal)):
        # A refusal raises the ServiceError the servicers answer with.
        started = api.new_game(pb.NewGameRequest(config=config, seed=seed), CallInfo())
        assert len(started.seat_tokens) == config.players


@pytest.mark.parametrize("one_deal", [False, True], ids=["whole_matches", "one_deal"])
def test_the_soak_tables_cover_the_documented_mix(one_deal: bool) -> None:
    """2 to 6 players, pairs and trios, six K16 flags each in about a quarter of the games,
    the three removals, one deck with and without four_four, two_player_five_six, a draw
    for the deal, both tie rules; one-deal matches only with ``one_deal``, else one deal,
    one per player, rounds of the table up to 12 deals, or a target score."""
    configs = _drawn(one_deal)
    assert {c.players for c in configs} == {2, 3, 4, 5, 6}
    assert {c.teams for c in configs} == {
        pb.TEAM_MODE_INDIVIDUAL,
        pb.TEAM_MODE_PAIRS,
        pb.TEAM_MODE_TRIOS,
    }
    assert {c.rules.removal for c in configs} == {
        pb.REMOVAL_COURTS,
        pb.REMOVAL_SPADES,
        pb.REMOVAL_NONE,
    }
    for flag in FREE_FLAGS:
        share = sum(getattr(c.rules, flag) for c in configs) / DRAWN
        assert 0.2 < share < 0.3, (flag, share)
    decks = Counter((c.rules.single_deck, c.rules.four_four) for c in configs)
    assert set(decks) == {(False, False), (True, False), (True, True), (False, True)}
    assert any(c.rules.two_player_five_six for c in configs)
    assert any(c.draw_for_deal for c in configs)
    assert {c.tie_rule for c in configs} == {pb.TIE_RULE_SHARED, pb.TIE_RULE_TIEBREAK_DEAL}
    lengths = {c.match_deals for c in configs}
    if one_deal:
        assert lengths == {1} and all(c.target_score for c in configs)
    else:
        assert max(lengths) == MAX_SOAK_DEALS and 0 in lengths  # 0: one deal per player
        assert any(c.target_score for c in configs) and not all(c.target_score for c in configs)
