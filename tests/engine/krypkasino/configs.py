"""The configurations random play covers: every player count and team mode, every
variant flag alone (K16) and flags that act on each other, with match settings (K4, K13).
"""

from __future__ import annotations

from typing import Any

from engine.krypkasino import Config, Removal, Rules, Teams, TieRule


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
