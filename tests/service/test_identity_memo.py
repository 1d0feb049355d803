"""``IdentityMemo``: values kept per object, for the finished deals of long matches."""

from __future__ import annotations

import itertools
import random

import pytest

from engine.krypkasino import Config, new_game
from engine.krypkasino.play import play_unchecked
from engine.krypkasino.policies import Situation, random_policy
from service import codec, state_codec
from service.identity_memo import IdentityMemo


class Box:
    """Equal to any other Box: the memo must tell them apart by identity, not equality."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Box)

    def __hash__(self) -> int:
        return 0


def counting_memo(limit: int) -> tuple[IdentityMemo[Box, int], list[Box]]:
    """A memo whose value is how many computations it had made, and the boxes it computed."""
    computed: list[Box] = []

    def compute(box: Box) -> int:
        computed.append(box)
        return len(computed)

    return IdentityMemo(compute, limit), computed


def test_a_value_is_computed_once_per_object_not_per_equal_object() -> None:
    memo, computed = counting_memo(limit=8)
    first, second = Box(), Box()
    assert [memo(first), memo(first), memo(second), memo(first)] == [1, 1, 2, 1]
    assert list(map(id, computed)) == [id(first), id(second)]
    assert len(memo) == 2


def test_the_oldest_entry_goes_beyond_the_limit() -> None:
    memo, computed = counting_memo(limit=2)
    boxes = [Box() for _ in range(3)]
    for box in boxes:
        memo(box)
    assert len(memo) == 2
    assert memo(boxes[2]) == 3  # the newest is still kept
    assert memo(boxes[0]) == 4  # the oldest was dropped: computed again
    assert list(map(id, computed)) == [id(boxes[i]) for i in (0, 1, 2, 0)]


@pytest.mark.parametrize("limit", [0, -1])
def test_a_memo_that_could_hold_nothing_is_refused_when_made(limit: int) -> None:
    """Made with no room, it raised StopIteration at its first call, far from the cause."""
    with pytest.raises(ValueError, match=f"at least one entry, not {limit}$"):
        counting_memo(limit=limit)
    assert len(counting_memo(limit=1)[0]) == 0


def test_a_match_converts_each_finished_deal_once_for_its_tokens_and_views() -> None:
    """Each finished deal of a match is converted once (service.identity_memo): again
    and again its token and view forms are the very messages made the first time."""
    state = new_game(Config(players=3, match_deals=9), seed=3)
    rng = random.Random(5)
    while len(state.results) < 7:
        state, _ = play_unchecked(state, random_policy(Situation.of(state), rng))
    for convert in (state_codec._compact_result, codec.deal_result_to_proto):
        made = [convert(result) for result in state.results]
        assert all(convert(r) is message for r, message in zip(state.results, made, strict=True))
    encoded = state_codec.state_to_proto(state, "game").results
    assert list(encoded) == [state_codec._compact_result(r) for r in state.results]


def test_an_object_gone_never_lends_its_value_to_a_new_one_at_its_address() -> None:
    """Each entry keeps its object alive, so no new object can take its id: the finished
    deals of a match that ended are never mistaken for another match's deals."""
    count = itertools.count(1)
    memo: IdentityMemo[Box, int] = IdentityMemo(lambda box: next(count), limit=1000)
    values = [memo(Box()) for _ in range(200)]  # each Box is dropped by the caller at once
    assert values == list(range(1, 201))
