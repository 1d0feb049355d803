"""``TurnBudget`` (docs/operations.md, "Overload"): a few calls per turn of the event loop,
first come first served, none lost."""

from __future__ import annotations

import asyncio
import selectors
from collections import Counter
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from service.turn_budget import TurnBudget

T = TypeVar("T")
# Seconds a scenario may take: each takes milliseconds, and a call the budget never
# admits (a refill that stops or is never scheduled) fails it instead of hanging it.
BOUND = 5


async def bounded(scenario: Coroutine[Any, Any, T]) -> T:
    """``scenario`` awaited in the same task (no extra turn of the loop), for ``BOUND``
    seconds at most."""
    async with asyncio.timeout(BOUND):
        return await scenario


class TurnCounter:
    """Counts the turns of the running loop: a callback that queues itself again runs once
    per turn."""

    def __init__(self) -> None:
        self.turn = 0
        self._running = True
        asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        self.turn += 1
        if self._running:
            asyncio.get_running_loop().call_soon(self._tick)

    def stop(self) -> None:
        self._running = False


async def admitted(budget: TurnBudget, calls: int) -> list[tuple[int, int]]:
    """(call, turn) in the order ``calls`` callers, started in one turn, were admitted."""
    turns = TurnCounter()
    order: list[tuple[int, int]] = []

    async def call(number: int) -> None:
        await budget.take()
        order.append((number, turns.turn))

    await asyncio.gather(*(call(number) for number in range(calls)))
    turns.stop()
    return order


def test_calls_are_admitted_in_arrival_order_a_few_per_turn():
    order = asyncio.run(bounded(admitted(TurnBudget(4), 30)))
    assert [number for number, _ in order] == list(range(30))
    per_turn = Counter(turn for _, turn in order)
    assert max(per_turn.values()) == 4
    assert len(per_turn) == 8  # 30 calls, 4 a turn


def test_a_quiet_loop_admits_at_once():
    async def turns_waited() -> list[int]:
        budget = TurnBudget(1)
        turns = TurnCounter()
        waited = []
        for _ in range(5):
            before = turns.turn
            await budget.take()
            waited.append(turns.turn - before)
            await asyncio.sleep(0)  # the next turn: the budget is new
        turns.stop()
        return waited

    assert asyncio.run(bounded(turns_waited())) == [0] * 5


def test_a_budget_its_waiters_used_up_admits_a_later_call_at_once():
    """A refill renews the budget for a turn whose budget was used, though nobody waits
    any more: here the 2 queued calls take the whole of the turn they run in. A budget
    left used up would queue the next call with no refill to come, and every call after
    it, for good (docs/operations.md, "Overload": the queued calls are admitted in the
    turns after)."""

    async def turns_waited() -> int:
        budget = TurnBudget(2)
        await asyncio.gather(*(budget.take() for _ in range(4)))  # 2 now, 2 the next turn
        await asyncio.sleep(0.01)  # turns without a call, nobody waiting
        turns = TurnCounter()
        before = turns.turn
        await budget.take()
        waited = turns.turn - before
        turns.stop()
        return waited

    assert asyncio.run(bounded(turns_waited())) == 0


def test_waiters_run_within_the_budget_of_the_turn_they_run_in():
    """A refill resolves waiters for the next turn; calls that come in that turn get only
    what the waiters left of its budget."""

    async def scenario() -> Counter[int]:
        budget = TurnBudget(2)
        turns = TurnCounter()
        ran: Counter[int] = Counter()

        async def call() -> None:
            await budget.take()
            ran[turns.turn] += 1

        calls = [asyncio.create_task(call()) for _ in range(4)]  # 2 run, 2 wait
        await asyncio.sleep(0)
        await asyncio.sleep(0)  # the refill has resolved the 2 waiting
        calls += [asyncio.create_task(call()) for _ in range(2)]
        await asyncio.gather(*calls)
        turns.stop()
        return ran

    ran = asyncio.run(bounded(scenario()))
    assert sum(ran.values()) == 6
    assert max(ran.values()) == 2, ran


def test_a_caller_cancelled_while_waiting_gives_its_place_to_the_next():
    async def scenario() -> list[str]:
        budget = TurnBudget(1)
        order: list[str] = []

        async def call(name: str) -> None:
            await budget.take()
            order.append(name)

        first = asyncio.create_task(call("first"))
        gone = asyncio.create_task(call("gone"))
        last = asyncio.create_task(call("last"))
        await asyncio.sleep(0)  # all three have asked; "first" got this turn's place
        gone.cancel()
        await asyncio.gather(first, last)
        assert gone.cancelled()
        return order

    assert asyncio.run(bounded(scenario())) == ["first", "last"]


@pytest.mark.parametrize("turns_later", range(6))
def test_a_call_that_comes_while_others_wait_queues_behind_them(turns_later):
    """First come first served: a call that asks in a turn with room left, while earlier
    calls still wait, does not overtake them, whichever turn it comes in."""

    async def scenario() -> list[str]:
        budget = TurnBudget(2)
        order: list[str] = []

        async def call(name: str) -> None:
            await budget.take()
            order.append(name)

        calls = [asyncio.create_task(call(f"early {number}")) for number in range(8)]
        for _ in range(turns_later):
            await asyncio.sleep(0)
        calls.append(asyncio.create_task(call("late")))
        await asyncio.gather(*calls)
        return order

    assert asyncio.run(bounded(scenario())) == [*(f"early {number}" for number in range(8)), "late"]


def test_a_place_given_up_is_taken_in_the_same_turn():
    """The next caller runs in the turn the cancelled one would have: a cancelled waiter
    uses none of its turn's budget."""

    async def admitted_turns(cancelled: bool) -> dict[str, int]:
        budget = TurnBudget(1)
        turns = TurnCounter()
        ran: dict[str, int] = {}

        async def call(name: str) -> None:
            await budget.take()
            ran[name] = turns.turn

        calls = [asyncio.create_task(call("first"))]
        gone = asyncio.create_task(call("gone")) if cancelled else None
        calls.append(asyncio.create_task(call("last")))
        await asyncio.sleep(0)  # all have asked; "first" got this turn's place
        if gone is not None:
            gone.cancel()
        await asyncio.gather(*calls)
        turns.stop()
        return ran

    assert asyncio.run(bounded(admitted_turns(True))) == asyncio.run(bounded(admitted_turns(False)))


def test_callers_cancelled_among_the_waiting_hold_up_none_of_the_rest():
    """Requests cancelled while they wait (a client gone) stay in the queue until a refill
    reaches them: it skips them, and goes on admitting the calls queued after them, in
    arrival order, a few per turn. A refill that stopped at one (resolving a cancelled
    future raises) would leave every later call waiting for good, and the HTTP gateway
    with it (docs/operations.md, "Overload")."""

    async def scenario() -> tuple[list[str], list[int]]:
        budget = TurnBudget(3)
        turns = TurnCounter()
        order: list[str] = []
        ran: Counter[int] = Counter()

        async def call(name: str) -> None:
            await budget.take()
            order.append(name)
            ran[turns.turn] += 1

        calls = {
            f"call {number:02}": asyncio.create_task(call(f"call {number:02}"))
            for number in range(15)
        }
        await asyncio.sleep(0)  # all have asked; the first 3 got this turn's places
        # Waiting calls 3, 4, 7, 8, 11, 12 leave: each refill's 3 places are behind, between
        # and before cancelled ones.
        gone = [name for number, name in enumerate(calls) if number >= 3 and number % 4 in (0, 3)]
        for name in gone:
            calls[name].cancel()
        await asyncio.gather(*calls.values(), return_exceptions=True)
        assert all(calls[name].cancelled() for name in gone)
        turns.stop()
        return order, [ran[turn] for turn in sorted(ran)]

    order, per_turn = asyncio.run(bounded(scenario()))
    kept = [f"call {number:02}" for number in range(15) if number < 3 or number % 4 in (1, 2)]
    assert order == kept
    assert per_turn == [3, 3, 3]  # every refill's places go to calls still waiting


class CountingSelector(selectors.DefaultSelector):
    """The loop's own selector, counting its waits: one per turn of the loop."""

    def __init__(self) -> None:
        super().__init__()
        self.selects = 0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        self.selects += 1
        return super().select(timeout)


def test_the_budget_stops_renewing_itself_once_calls_stop():
    """With no call in a turn and none waiting there is nothing to renew: a refill that
    kept scheduling itself would spin an idle loop from turn to turn for good."""
    selector = CountingSelector()
    loop = asyncio.SelectorEventLoop(selector)

    async def turns_while_idle() -> int:
        budget = TurnBudget(2)
        await asyncio.gather(*(budget.take() for _ in range(5)))
        await asyncio.sleep(0.01)  # the last refills run
        before = selector.selects
        await asyncio.sleep(0.2)
        return selector.selects - before

    try:
        assert loop.run_until_complete(bounded(turns_while_idle())) <= 3
    finally:
        loop.close()


def test_a_budget_admits_at_least_one_call():
    with pytest.raises(ValueError, match="at least 1"):
        TurnBudget(0)
