"""Krypkasino, the Swedish "reverse Cassino" (spec krypkasino.md).

>>> from engine.krypkasino import Config, new_game, legal_moves, play
>>> state = new_game(Config(players=2), seed=1)
>>> while not state.over:
...     state, events = play(state, state.turn, legal_moves(state, state.turn)[0])
>>> sum(r.scores[0].total + r.scores[1].total for r in state.results) == 42 * 2
True
"""

from engine.krypkasino.config import Config, ConfigError, Removal, Rules, Teams, TieRule
from engine.krypkasino.dealing import DrawExhaustedError, new_game, open_game
from engine.krypkasino.events import Event
from engine.krypkasino.moves import Move, SweepKind, sweep_kind, sweep_ranks, table_moves
from engine.krypkasino.play import (
    IllegalMoveError,
    Reason,
    legal_moves,
    play,
    play_unchecked,
    score,
)
from engine.krypkasino.scoring import DealResult, ScoreSheet, SeatScore, score_deal
from engine.krypkasino.state import State
from engine.krypkasino.views import View, view

__all__ = [
    "Config",
    "ConfigError",
    "DealResult",
    "DrawExhaustedError",
    "Event",
    "IllegalMoveError",
    "Move",
    "Reason",
    "Removal",
    "Rules",
    "ScoreSheet",
    "SeatScore",
    "State",
    "SweepKind",
    "Teams",
    "TieRule",
    "View",
    "legal_moves",
    "new_game",
    "open_game",
    "play",
    "play_unchecked",
    "score",
    "score_deal",
    "sweep_kind",
    "sweep_ranks",
    "table_moves",
    "view",
]
