"""The engine called from several threads at once (README, "Using the engine
in-process"): views equal the serial ones and the view cache keeps its limit."""

from __future__ import annotations

import pytest

from engine.krypkasino import view
from engine.krypkasino import views as views_module
from engine.krypkasino.views import View
from tests.engine.krypkasino.helpers import distinct_states
from tests.thread_hammer import hammer

LIMIT = 32


def test_views_from_threads_equal_the_serial_ones_and_the_cache_keeps_its_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Evicting from the derived-fields cache (``_DERIVED``) while other threads
    insert raised RuntimeError out of ``view`` and grew the cache past its limit."""
    monkeypatch.setattr(views_module, "_DERIVED_LIMIT", LIMIT)
    monkeypatch.setattr(views_module, "_DERIVED", {})
    states = distinct_states()
    seats = (None, 0, 1)
    serial: list[tuple[View, ...]] = [
        tuple(view(state, seat) for seat in seats) for state in states
    ]
    assert len({v[0].totals for v in serial}) > 10  # the finished deals differ

    def one_view(thread: int, i: int) -> None:
        n = (thread * 7 + i) % len(states)
        seat = seats[i % len(seats)]
        assert view(states[n], seat) == serial[n][i % len(seats)]
        size = len(views_module._DERIVED)
        assert size <= LIMIT

    assert hammer(one_view, seconds=1.5) == {}
    assert len(views_module._DERIVED) <= LIMIT
