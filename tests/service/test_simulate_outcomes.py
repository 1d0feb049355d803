"""Simulate's move counts (service/simulate.py ``count_outcomes``) name each move once, by
its kind as ``cardrules_moves_total`` labels it (K8.3): a crawl, a capture that is no
sweep, a sweep or a double sweep. A capture was counted as ``capture`` and again by its
sweep, ``none`` for an ordinary one, so the counts added up to more than the moves."""

from __future__ import annotations

from collections import Counter

import pytest

from engine.krypkasino import Config, Teams
from engine.krypkasino.events import Captured, Crawled
from service.metrics import MOVE_KINDS
from service.simulate import SimulationRequest, play_game

CONFIGS = (
    Config(players=2),
    Config(players=4, teams=Teams.PAIRS),
    Config(players=6, teams=Teams.TRIOS),
)


@pytest.mark.parametrize("seed", [3, 17, 40])
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.players}-{c.teams.value}")
def test_each_move_is_counted_once_by_the_metric_kind(config: Config, seed: int) -> None:
    record = play_game(SimulationRequest(config, seed=seed))
    assert set(record.outcomes) <= set(MOVE_KINDS), record.outcomes
    assert sum(record.outcomes[kind] for kind in MOVE_KINDS) == record.moves
    # Counted again from the events the turns played, independently of count_outcomes.
    played = Counter(
        "crawl"
        if isinstance(event, Crawled)
        else {"none": "capture"}.get(event.sweep.value, event.sweep.value)
        for turn in record.turns
        for event in turn.events
        if isinstance(event, Crawled | Captured)
    )
    assert record.outcomes == played
    assert record.outcomes["crawl"] > 0 and record.outcomes["capture"] > 0
