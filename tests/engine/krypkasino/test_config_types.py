"""``Config.validate`` refuses a setting of the wrong type, naming it (K16), as a library
caller may pass one: a dataclass does not check its annotations. Before, the text of an
enum played another game (``removal="courts"`` set the spades aside, ``teams="pairs"``
played as individuals and passed K3.2 with 3 players, ``tie_rule="tiebreak_deal"``
shared the win) and a float, bool or None for a number failed deep inside or counted."""

from __future__ import annotations

from typing import Any

import pytest

from engine.cards import SPADES, parse_cards, suit_of
from engine.krypkasino import Config, ConfigError, Removal, Rules, Teams, TieRule, new_game
from engine.krypkasino.dealing import split_removal


def refusal(config: Config) -> ConfigError:
    with pytest.raises(ConfigError) as error:
        config.validate()
    return error.value


def loose(**settings: Any) -> Config:
    """A config of settings the annotations do not allow, as an untyped caller makes it."""
    return Config(**settings)


def loose_rules(**flags: Any) -> Rules:
    return Rules(**flags)


@pytest.mark.parametrize(
    ("config", "flag", "rule", "then"),
    [
        (loose(players=3, teams="pairs"), "teams", "K3.2", "Teams('pairs') reads the text"),
        (loose(players=4, teams="pairs"), "teams", "K3.2", "Teams('pairs') reads the text"),
        (loose(players=4, teams=2), "teams", "K3.2", ""),
        (
            loose(players=2, tie_rule="tiebreak_deal"),
            "tie_rule",
            "K13.2",
            "TieRule('tiebreak_deal') reads the text",
        ),
        (
            Config(2, rules=loose_rules(removal="courts")),
            "removal",
            "K16.5",
            "Removal('courts') reads the text",
        ),
        (Config(2, rules=loose_rules(removal="hearts")), "removal", "K16.5", ""),
        (Config(2, rules=loose_rules(removal=[])), "removal", "K16.5", ""),
        (loose(players=2, rules={"single_deck": True}), "rules", "K16", ""),
        (Config(2, rules=loose_rules(single_deck="no")), "single_deck", "K16", ""),
        (Config(2, rules=loose_rules(bordstabbe=1)), "bordstabbe", "K16", ""),
        (loose(players=2, draw_for_deal="yes"), "draw_for_deal", "K4.2", ""),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_a_setting_of_another_type_is_refused_by_name(
    config: Config, flag: str, rule: str, then: str
) -> None:
    error = refusal(config)
    assert (error.flag, error.rule) == (flag, rule)
    assert error.reason.endswith(f"({rule}): {then}" if then else f"({rule})")


def test_an_enum_s_refusal_names_its_members() -> None:
    error = refusal(loose(players=4, teams="pairs"))
    assert str(error) == (
        "teams: must be one of Teams.INDIVIDUAL, Teams.PAIRS, Teams.TRIOS, not 'pairs' "
        "(K3.2): Teams('pairs') reads the text"
    )


@pytest.mark.parametrize(
    ("settings", "flag", "rule"),
    [
        ({"players": 2.0}, "players", "K3.1"),
        ({"players": True}, "players", "K3.1"),
        ({"players": None}, "players", "K3.1"),
        ({"players": "4"}, "players", "K3.1"),
        ({"players": 4, "first_dealer": None}, "first_dealer", "K4.2"),
        ({"players": 4, "first_dealer": 1.0}, "first_dealer", "K4.2"),
        ({"players": 4, "first_dealer": True}, "first_dealer", "K4.2"),
        ({"players": 2, "match_deals": 2.0}, "match_deals", "K13.2"),
        ({"players": 2, "match_deals": True}, "match_deals", "K13.2"),
        ({"players": 2, "target_score": 100.5}, "target_score", "K13.2"),
        ({"players": 2, "target_score": "100"}, "target_score", "K13.2"),
    ],
    ids=repr,
)
def test_a_number_that_is_no_int_is_refused_by_name(
    settings: dict[str, Any], flag: str, rule: str
) -> None:
    error = refusal(loose(**settings))
    assert (error.flag, error.rule) == (flag, rule)
    assert error.reason.startswith(f"must be a whole number (int), not {settings[flag]!r}")


def test_new_game_refuses_the_text_of_removal_that_played_spades() -> None:
    with pytest.raises(ConfigError, match=r"^removal: "):
        new_game(Config(2, rules=loose_rules(removal="courts")), seed=1)


@pytest.mark.parametrize(
    "config",
    [
        Config(4, Teams.PAIRS, Rules(removal=Removal.SPADES), 3, True, 8, 100, TieRule.SHARED),
        Config(6, Teams.TRIOS, tie_rule=TieRule.TIEBREAK_DEAL, match_deals=None),
        Config(2, match_deals=None, target_score=None),
    ],
)
def test_every_setting_of_its_type_passes(config: Config) -> None:
    assert config.validate() is config


def test_split_removal_sets_aside_spades_only_for_removal_spades() -> None:
    """K6.1 / K16.5: each value its own branch; a value outside the enum is no spades."""
    table = tuple(parse_cards("AS JH 5C QS"))
    assert split_removal(table, Removal.SPADES) == (
        tuple(parse_cards("JH 5C")),
        tuple(c for c in table if suit_of(c) == SPADES),
    )
    assert split_removal(table, Removal.COURTS) == (
        tuple(parse_cards("AS 5C")),
        tuple(parse_cards("JH QS")),
    )
    assert split_removal(table, Removal.NONE) == (table, ())
    text: Any = "courts"
    with pytest.raises(AssertionError):
        split_removal(table, text)
