"""Bounds of ``match_deals`` and ``target_score`` (K13.2 sets none; see the decisions).

Every finished deal travels in the state token, so ``Config.validate`` refuses
matches that could outgrow it, naming the flag. The target bound, which only
applies without ``match_deals`` as a cap, must end every allowed match within
the deal bound (K15.7).
"""

from __future__ import annotations

import itertools
import math

import pytest

from engine.krypkasino import Config, ConfigError, Rules, Teams, TieRule
from engine.krypkasino.config import MAX_MATCH_DEALS, MAX_TARGET_SCORE
from engine.krypkasino.scoring import card_point_total


def refused_flag(config: Config) -> str:
    with pytest.raises(ConfigError) as raised:
        config.validate()
    return raised.value.flag


def test_the_bounds_are_240_deals_and_a_target_of_480() -> None:
    assert (MAX_MATCH_DEALS, MAX_TARGET_SCORE) == (240, 480)


@pytest.mark.parametrize("players", range(2, 7))
def test_the_largest_match_deals_is_accepted_for_every_player_count(players: int) -> None:
    """240 is a multiple of 2 to 6, so every player count can use the bound without a target."""
    Config(players, match_deals=MAX_MATCH_DEALS).validate()
    Config(players, match_deals=MAX_MATCH_DEALS, target_score=MAX_TARGET_SCORE).validate()
    Config(players, match_deals=MAX_MATCH_DEALS - 1, target_score=1).validate()


@pytest.mark.parametrize(
    "config",
    [
        Config(2, match_deals=MAX_MATCH_DEALS + 2),
        Config(6, match_deals=MAX_MATCH_DEALS + 6),
        Config(4, match_deals=MAX_MATCH_DEALS + 1, target_score=50),
        Config(3, match_deals=2**31 - 1, target_score=100),
        Config(2, match_deals=2**63),
    ],
    ids=["2-players", "6-players", "with-target", "int32-max", "huge"],
)
def test_too_many_match_deals_are_refused_naming_match_deals(config: Config) -> None:
    assert refused_flag(config) == "match_deals"


@pytest.mark.parametrize(
    "config",
    [
        Config(2, target_score=MAX_TARGET_SCORE + 1),
        Config(4, target_score=2**31 - 1),
        Config(6, teams=Teams.PAIRS, target_score=10_000, tie_rule=TieRule.TIEBREAK_DEAL),
    ],
    ids=["just-over", "int32-max", "pairs"],
)
def test_a_too_high_target_score_is_refused_naming_target_score(config: Config) -> None:
    assert refused_flag(config) == "target_score"


@pytest.mark.parametrize("deals", [1, 3, MAX_MATCH_DEALS])
def test_match_deals_caps_a_match_with_any_target(deals: int) -> None:
    """K13.2: the match ends at whichever comes first, so the cap bounds its length."""
    Config(4, match_deals=deals, target_score=MAX_TARGET_SCORE + 1).validate()
    Config(3, match_deals=deals, target_score=2**31 - 1).validate()


def test_the_refusals_give_the_bound() -> None:
    with pytest.raises(ConfigError, match=r"at most 240 deals, not 241"):
        Config(3, match_deals=241, target_score=10).validate()
    with pytest.raises(ConfigError, match=r"at most 480 without match_deals, not 481"):
        Config(3, target_score=481).validate()


@pytest.mark.parametrize(
    ("config", "flag", "limit"),
    [
        # 244 is a multiple of 4: only the bound refuses it.
        (Config(4, match_deals=MAX_MATCH_DEALS + 4), "match_deals", MAX_MATCH_DEALS),
        (Config(2, target_score=MAX_TARGET_SCORE + 1), "target_score", MAX_TARGET_SCORE),
        # K13.2's own refusals, and the decision that a target be positive: no bound.
        (Config(4, match_deals=6), "match_deals", None),
        (Config(4, match_deals=0), "match_deals", None),
        (Config(2, target_score=0), "target_score", None),
    ],
)
def test_only_the_bounds_carry_their_limit(config: Config, flag: str, limit: int | None) -> None:
    """``ConfigError.limit`` is the bound passed, for the two bounds alone, which cite
    K13.2 as the flag's other refusals do: it tells them apart without the text."""
    with pytest.raises(ConfigError) as raised:
        config.validate()
    assert (raised.value.flag, raised.value.rule, raised.value.limit) == (flag, "K13.2", limit)


@pytest.mark.parametrize(
    ("players", "teams", "deals"),
    [(4, Teams.PAIRS, 6), (6, Teams.TRIOS, 4), (6, Teams.PAIRS, 9), (4, Teams.PAIRS, 8)],
)
def test_with_teams_the_deals_are_still_a_multiple_of_the_players(
    players: int, teams: Teams, deals: int
) -> None:
    """K13.2: every player deals equally often, whatever the teams, so a multiple of the
    teams' count is not enough (a mutation review: the refusal was tested without teams
    alone, and ``% team_count`` passed every test)."""
    config = Config(players, teams, match_deals=deals)
    if deals % players == 0:
        config.validate()
        return
    with pytest.raises(ConfigError, match=f"multiple of {players}, not {deals} ") as raised:
        config.validate()
    assert (raised.value.flag, raised.value.rule, raised.value.limit) == (
        "match_deals",
        "K13.2",
        None,
    )


def valid_configs() -> list[Config]:
    configs = []
    for players, teams, single, nordic, bordstabbe, last in itertools.product(
        range(2, 7), Teams, (False, True), (False, True), (False, True), (False, True)
    ):
        rules = Rules(
            single_deck=single,
            nordic_scoring=nordic,
            bordstabbe=bordstabbe,
            last_capture_point=last,
        )
        config = Config(players, teams=teams, rules=rules, target_score=MAX_TARGET_SCORE)
        try:
            configs.append(config.validate())
        except ConfigError:
            continue
    return configs


def test_the_highest_target_ends_every_match_within_the_deal_bound() -> None:
    """K15.7: a deal adds ``P + last_capture - 5 * bordstabbe`` points to the teams'
    totals, so the highest total gains at least that over the team count a deal; the
    match ends after the first deal at which it reaches the target (K13.2)."""
    configs = valid_configs()
    assert any(c.players == 6 and c.rules.single_deck and c.rules.nordic_scoring for c in configs)
    worst = 0
    for config in configs:
        least_per_deal = card_point_total(config) - (5 if config.rules.bordstabbe else 0)
        assert least_per_deal > 0
        deals = math.ceil(MAX_TARGET_SCORE * config.team_count / least_per_deal)
        assert deals <= MAX_MATCH_DEALS, config
        worst = max(worst, deals)
    assert worst == MAX_MATCH_DEALS  # 6 seats, 17 - 5 points a deal: 2 a deal for the leader
