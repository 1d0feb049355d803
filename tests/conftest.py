"""Shared test settings: the size knob of the long random-play runs."""

import os

import pytest


def random_games() -> int:
    """``CARDRULES_RANDOM_GAMES``: how many random games the harness plays (small in CI)."""
    return int(os.environ.get("CARDRULES_RANDOM_GAMES", "300"))


@pytest.fixture
def game_budget() -> int:
    return random_games()
