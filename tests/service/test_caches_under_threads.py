"""The service's caches called from several threads at once, as in-process users of
the service API (a bot, an evaluator with a thread pool) call them: no errors, the
results of serial calls, and never more entries than the limit."""

from __future__ import annotations

import pytest

from engine.krypkasino import view
from service import view_codec
from service.identity_memo import IdentityMemo
from service.view_codec import view_to_proto
from tests.engine.krypkasino.helpers import distinct_states
from tests.thread_hammer import hammer

LIMIT = 32


def test_an_identity_memo_from_threads_returns_each_keys_value_and_keeps_its_limit() -> None:
    """Two threads evicting the same oldest entry made one raise KeyError; a thread
    changing the entries under another's ``iter``, RuntimeError."""
    keys = [[n] for n in range(4 * LIMIT)]  # distinct objects, each its own entry
    memo: IdentityMemo[list[int], int] = IdentityMemo(lambda key: key[0] * 2, LIMIT)

    def one_call(thread: int, i: int) -> None:
        key = keys[(thread * 5 + i) % len(keys)]
        assert memo(key) == key[0] * 2
        size = len(memo)
        assert size <= LIMIT

    assert hammer(one_call, seconds=1.0) == {}
    assert len(memo) <= LIMIT


def test_api_views_from_threads_equal_the_serial_ones_and_the_templates_keep_their_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``view_to_proto`` keeps a template per config and finished deals (``_TEMPLATES``);
    unlocked, its eviction raised RuntimeError and let it grow past its limit."""
    monkeypatch.setattr(view_codec, "_TEMPLATE_LIMIT", LIMIT)
    monkeypatch.setattr(view_codec, "_TEMPLATES", {})
    # A config object per state: as many template keys as states, three times the limit.
    views = [view(state) for state in distinct_states()]
    serial = [view_to_proto(v, "g", "s").SerializeToString(deterministic=True) for v in views]
    assert len(set(serial)) == len(views)

    def one_view(thread: int, i: int) -> None:
        n = (thread * 7 + i) % len(views)
        assert view_to_proto(views[n], "g", "s").SerializeToString(deterministic=True) == serial[n]
        size = len(view_codec._TEMPLATES)
        assert size <= LIMIT

    assert hammer(one_view, seconds=1.5) == {}
    assert len(view_codec._TEMPLATES) <= LIMIT
