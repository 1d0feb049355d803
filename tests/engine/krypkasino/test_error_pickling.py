"""The engine's refusals survive pickling, as a process pool sends a worker's exception
back: ``IllegalMoveError`` and ``ConfigError`` take more than the message text that
``Exception``'s own reduce passes, so without their ``__reduce__`` unpickling raised
TypeError and a pool running the engine broke (BrokenProcessPool)."""

from __future__ import annotations

import pickle
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import TypeVar

import pytest

from engine.cards import parse_card
from engine.krypkasino import (
    Config,
    ConfigError,
    IllegalMoveError,
    Reason,
    legal_moves,
    new_game,
    play,
)

ILLEGAL_MOVE_FIELDS = (
    "reason",
    "rule",
    "message",
    "card",
    "captured",
    "group_left",
    "alternatives",
    "table_count",
    "in_hand",
)
CONFIG_ERROR_FIELDS = ("flags", "flag", "reason", "rule", "limit")
E = TypeVar("E", bound=BaseException)


def _round_trip(error: E) -> E:
    copy: E = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error) and copy.args == error.args
    return copy


@pytest.mark.parametrize(
    "error",
    [
        IllegalMoveError(Reason.NOT_YOUR_TURN, "K4.4", "it is seat 1's turn, not seat 0's"),
        IllegalMoveError(
            Reason.CAPTURE_NOT_ON_TABLE,
            "K7.3",
            "9H is in seat 0's hand, not on the table",
            parse_card("8D"),
            parse_card("9H"),
            table_count=0,
            in_hand=True,
        ),
        IllegalMoveError(
            Reason.MUST_SWEEP,
            "K7.6",
            "4S or JH in hand sweeps the table, so one must",
            parse_card("4S"),
            group_left=(parse_card("2C"), parse_card("3D")),
            alternatives=(parse_card("4S"), parse_card("JH")),
        ),
    ],
    ids=["bare", "not-on-table", "every-tuple"],
)
def test_an_illegal_move_error_keeps_every_field(error: IllegalMoveError) -> None:
    copy = _round_trip(error)
    for name in ILLEGAL_MOVE_FIELDS:
        assert getattr(copy, name) == getattr(error, name), name


@pytest.mark.parametrize(
    "error",
    [
        ConfigError("players", "Krypkasino needs 2 to 6 players, not 7", "K3.1"),
        ConfigError(("two_player_five_six", "four_four"), "only for 2 players", "K16.1"),
        ConfigError(
            "target_score",
            "at most 480 without match_deals, not 481",
            "K13.2",
            aside="why",
            also="K15.7",
            then="set match_deals too",
            limit=480,
        ),
    ],
    ids=["one-flag", "two-flags", "every-part"],
)
def test_a_config_error_keeps_every_field(error: ConfigError) -> None:
    copy = _round_trip(error)
    for name in CONFIG_ERROR_FIELDS:
        assert getattr(copy, name) == getattr(error, name), name


def _refuse(kind: str) -> None:
    """Raise one of the engine's refusals in a worker process, as the engine makes it."""
    if kind == "config":
        Config(7).validate()
    state = new_game(Config(2), seed=1)
    other = 1 - state.turn
    play(state, other, legal_moves(state, state.turn)[0])


@pytest.mark.parametrize("kind", ["config", "move"])
def test_a_process_pool_worker_s_refusal_reaches_the_caller(kind: str) -> None:
    """The error a worker raises arrives as itself, not as BrokenProcessPool."""
    expected: type[Exception] = ConfigError if kind == "config" else IllegalMoveError
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        future = pool.submit(_refuse, kind)
        with pytest.raises(expected) as raised:
            future.result(timeout=60)
    if isinstance(raised.value, IllegalMoveError):
        assert raised.value.reason is Reason.NOT_YOUR_TURN and raised.value.rule == "K4.4"
    else:
        assert isinstance(raised.value, ConfigError)
        assert raised.value.flag == "players" and raised.value.rule == "K3.1"
