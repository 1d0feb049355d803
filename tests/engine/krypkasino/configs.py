"""The configurations random play covers: every player count and team mode, every
variant flag alone (K16) and flags that act on each other, with match settings (K4, K13);
and ``random_config``, which draws any valid combination of all of them.
"""

from __future__ import annotations

import random
from typing import Any

from engine.krypkasino import Config, ConfigError, Removal, Rules, Teams, TieRule


def config_of(players: int, teams: str = "individual", **settings: Any) -> Config:
    """A Config from flag names; ``Config.validate`` keeps invalid combinations out."""
    match_fields = ("first_dealer", "draw_for_deal", "match_deals", "target_score", "tie_rule")
    match = {k: settings.pop(k) for k in match_fields if k in settings}
    if "tie_rule" in match:
        match["tie_rule"] = TieRule(match["tie_rule"])
    if "removal" in settings:
        settings["removal"] = Removal(settings["removal"])
    config = Config(players, Teams(teams), Rules(**settings), **match)
    return config.validate()


BASE = [
    config_of(2),
    config_of(3),
    config_of(4),
    config_of(4, "pairs"),
    config_of(5),
    config_of(6),
    config_of(6, "pairs"),
    config_of(6, "trios"),
]

# Every flag on its own (player counts rotate so each one meets several table sizes).
SINGLE = [
    config_of(2, two_player_five_six=True),
    config_of(5, four_four=True),
    config_of(2, single_deck=True),
    config_of(3, single_deck=True),
    config_of(4, "pairs", single_deck=True),
    config_of(6, single_deck=True),
    config_of(3, last_capture_point=True),
    config_of(4, removal="spades"),
    config_of(5, removal="none"),
    config_of(2, no_forced_sweep=True),
    config_of(3, court_cards_rank_only=True),
    config_of(4, "pairs", must_capture_if_able=True),
    config_of(5, nordic_scoring=True),
    config_of(6, bordstabbe=True),
    config_of(4, draw_for_deal=True),
    config_of(5, first_dealer=3),
    config_of(3, target_score=30, tie_rule="tiebreak_deal"),
    config_of(4, "pairs", target_score=45, tie_rule="tiebreak_deal"),
    config_of(2, tie_rule="tiebreak_deal"),
    config_of(2, match_deals=4),
    config_of(3, target_score=80, match_deals=2),
]

# Flags that act on each other.
PAIRS = [
    config_of(4, single_deck=True, nordic_scoring=True),
    config_of(3, four_four=True, single_deck=True),
    config_of(2, no_forced_sweep=True, must_capture_if_able=True),
    config_of(5, court_cards_rank_only=True, no_forced_sweep=True),
    config_of(6, "pairs", court_cards_rank_only=True, must_capture_if_able=True),
    config_of(4, "pairs", bordstabbe=True, last_capture_point=True),
    config_of(3, removal="spades", court_cards_rank_only=True),
    config_of(6, "trios", removal="none", bordstabbe=True),
    config_of(2, two_player_five_six=True, last_capture_point=True),
    config_of(4, removal="none", court_cards_rank_only=True, must_capture_if_able=True),
    config_of(2, single_deck=True, bordstabbe=True, nordic_scoring=True),
    config_of(6, removal="none", no_forced_sweep=True, draw_for_deal=True),
]

CONFIGS = BASE + SINGLE + PAIRS


def config_label(config: Config) -> str:
    """A short test id: the player count and every setting that differs from its default."""
    parts = [f"n{config.players}", *config.rules.enabled()]
    if config.teams is not Teams.INDIVIDUAL:
        parts.append(config.teams.value)
    for name in ("first_dealer", "match_deals", "target_score"):
        value = getattr(config, name)
        if value:
            parts.append(f"{name}={value}")
    if config.draw_for_deal:
        parts.append("draw_for_deal")
    if config.tie_rule is not TieRule.SHARED:
        parts.append(config.tie_rule.value)
    return "-".join(parts)


# K3.2: the team modes each player count allows.
_TEAM_MODES = {
    2: (Teams.INDIVIDUAL,),
    3: (Teams.INDIVIDUAL,),
    4: (Teams.INDIVIDUAL, Teams.PAIRS),
    5: (Teams.INDIVIDUAL,),
    6: (Teams.INDIVIDUAL, Teams.PAIRS, Teams.TRIOS),
}


def random_config(seed: int) -> Config:
    """A valid configuration drawn from ``seed``: any player count and team mode, any
    combination of the K16 flags and removal, a fixed or drawn first dealer (K4.2) and a
    match setting (K13.2), so that random play also meets the combinations the lists
    above leave out. A draw ``Config.validate`` refuses is drawn again."""
    rng = random.Random(f"config-{seed}")
    while True:
        try:
            return _draw_config(rng).validate()
        except ConfigError:
            continue


def _draw_config(rng: random.Random) -> Config:
    """One draw of ``random_config``; may be invalid (K5.2, K16.1-K16.3)."""
    players = rng.randint(2, 6)
    # A flag is on one time in three, so most draws combine two to four of them.
    flags = {name: rng.random() < 1 / 3 for name in Rules.flag_names()}
    rules = Rules(removal=rng.choice(list(Removal)), **flags)
    target, deals = _match_length(rng, players)
    return Config(
        players,
        rng.choice(_TEAM_MODES[players]),
        rules,
        first_dealer=rng.randrange(players),
        draw_for_deal=rng.random() < 1 / 4,
        match_deals=deals,
        target_score=target,
        tie_rule=rng.choice(list(TieRule)),
    )


def _match_length(rng: random.Random, players: int) -> tuple[int | None, int | None]:
    """K13.2 ``(target_score, match_deals)``: the default, twice the default, or a target
    (1 ends after the first deal) with or without a cap of deals that need not be a
    multiple of the players. Kept about as long as a default match, for CI's time."""
    kind = rng.randrange(4)
    if kind == 0:
        return None, None
    if kind == 1:
        return None, players * rng.randint(1, 2)
    target = rng.randint(1, 60)
    return target, (rng.randint(1, players) if kind == 2 else None)
