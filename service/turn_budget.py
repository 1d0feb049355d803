"""At most a few HTTP calls' work per turn of the event loop (docs/operations.md, "Overload").

aiohttp runs every connection whose request has arrived in the same turn of the
loop, one after the other. With hundreds of HTTP calls in flight a turn would
take the rules work of all of them, and whatever needs a few turns (a gRPC
health check: accept, read, answer) would wait that long for each: the probes
timed out at 2 s under 800 HTTP calls in flight. The budget admits a few calls
per turn and queues the rest in arrival order, to be admitted in the turns
after, so a turn stays short whatever the load; the queued calls cost one
future each, and the calls' own total work is the same.
"""

from __future__ import annotations

import asyncio
from collections import deque


class TurnBudget:
    """Admits ``per_turn`` calls per turn of the running event loop, first come first served.

    While calls queue, every turn runs at most ``per_turn`` of them. A turn that calls
    find no queue in may run up to twice as many: asyncio offers no hook at the start of
    a turn, so the budget is renewed early in each turn rather than at its start.
    """

    def __init__(self, per_turn: int) -> None:
        if per_turn < 1:
            raise ValueError(f"per_turn must be at least 1, not {per_turn}")
        self._per_turn = per_turn
        self._left = per_turn
        self._waiting: deque[asyncio.Future[None]] = deque()
        # Waiters the last refill resolved: they run in the turn after it, as part of its budget.
        self._resolved = 0
        self._refill_scheduled = False

    async def take(self) -> None:
        """Return once the call may run: at once while this turn has room and nobody waits."""
        if self._left and not self._waiting:
            self._left -= 1
            self._schedule_refill()
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        await waiter

    def _schedule_refill(self) -> None:
        # call_soon runs the refill early in the next turn: after the waiters the last
        # refill resolved (queued before it), before the calls that arrive in that turn.
        if not self._refill_scheduled:
            self._refill_scheduled = True
            asyncio.get_running_loop().call_soon(self._refill)

    def _refill(self) -> None:
        """A new turn: its budget less the waiters already run in it, and the next turn's
        waiters resolved (a resolved future resumes its task one turn later)."""
        self._refill_scheduled = False
        self._left = self._per_turn - self._resolved
        self._resolved = 0
        while self._resolved < self._per_turn and self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():  # done: its request was cancelled while it waited
                waiter.set_result(None)
                self._resolved += 1
        if self._resolved or self._left < self._per_turn:
            self._schedule_refill()
