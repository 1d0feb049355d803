"""The match configurations ``bench soak`` starts: every player count, teams, house rules
and match lengths, as a game backend's mixed tables would ask for them.

Each is one ``NewGame`` accepts (docs/api.md, "Configurations NewGame refuses"): a
refusal of one counts as a failure of the soak, not as an expected refusal.
"""

from __future__ import annotations

import random

from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

# The K16 flags that combine with any table; the deck-shaping ones are chosen apart.
FREE_FLAGS = (
    "last_capture_point",  # K16.4
    "no_forced_sweep",  # K16.6
    "court_cards_rank_only",  # K16.7
    "must_capture_if_able",  # K16.8
    "nordic_scoring",  # K16.9
    "bordstabbe",  # K16.10
)
FLAG_SHARE = 0.25
# Matches longer than engine CACHED_MATCH_DEALS (8) take the service's uncached path.
MAX_SOAK_DEALS = 12
TARGET_SCORES = (20, 40, 80)


def random_config(rng: random.Random, *, one_deal: bool) -> pb.GameConfig:
    """A random valid table; ``one_deal`` keeps every match to one deal (a smoke run's
    games must end within seconds)."""
    players = rng.randint(2, 6)
    config = pb.GameConfig(players=players, teams=_teams(rng, players), rules=_rules(rng, players))
    if rng.random() < 0.2:
        config.draw_for_deal = True  # K4.2: first_dealer must stay 0
    else:
        config.first_dealer = rng.randrange(players)
    config.tie_rule = rng.choice((pb.TIE_RULE_SHARED, pb.TIE_RULE_TIEBREAK_DEAL))
    _length(rng, config, one_deal)
    return config


def _teams(rng: random.Random, players: int) -> pb.TeamMode.ValueType:
    """K3.2: pairs need 4 or 6 players, trios 6."""
    choices = [pb.TEAM_MODE_INDIVIDUAL]
    if players in (4, 6):
        choices.append(pb.TEAM_MODE_PAIRS)
    if players == 6:
        choices.append(pb.TEAM_MODE_TRIOS)
    return rng.choice(choices)


def _rules(rng: random.Random, players: int) -> pb.Rules:
    rules = pb.Rules(removal=rng.choice((pb.REMOVAL_COURTS, pb.REMOVAL_SPADES, pb.REMOVAL_NONE)))
    for flag in FREE_FLAGS:
        setattr(rules, flag, rng.random() < FLAG_SHARE)
    deck = rng.random()
    if deck < 0.3 and players != 5:  # K16.3 refuses 5 players
        rules.single_deck = True
        rules.four_four = rng.random() < 0.5  # K16.2 with one deck: 2, 3, 4 or 6 players
    elif deck < 0.45 and players == 5:
        rules.four_four = True  # with two decks only 5 players divide the cards
    elif deck < 0.6 and players == 2:
        rules.two_player_five_six = True  # K16.1: two decks, no four_four
    return rules


def _length(rng: random.Random, config: pb.GameConfig, one_deal: bool) -> None:
    """One deal, one per player (the default), several rounds of the table, or up to a
    target score (K13.2: without a target, a multiple of the players)."""
    players = config.players
    kind = "one" if one_deal else rng.choice(("one", "default", "rounds", "target"))
    if kind == "one":
        config.target_score = rng.choice(TARGET_SCORES)
        config.match_deals = 1
    elif kind == "rounds":
        config.match_deals = players * rng.randint(1, MAX_SOAK_DEALS // players)
    elif kind == "target":
        config.target_score = rng.choice(TARGET_SCORES)
        config.match_deals = rng.randint(1, MAX_SOAK_DEALS)
