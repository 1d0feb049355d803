"""service/standard_services.py: what it refuses to register, and that a reflection
answer leaves no task behind. What it serves is tested against a real server
(test_grpc_hostile_clients.py, test_serving.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health

from service.standard_services import (
    DrainingReflection,
    add_health_and_reflection,
    until_stopped,
)


def test_a_servicer_whose_methods_are_not_async_is_refused_at_start() -> None:
    """Requests are parsed inside coroutines; a synchronous servicer (grpc.aio runs its
    methods in a thread pool) would never be called with the parsed request."""

    async def register() -> None:
        server = grpc.aio.server()
        synchronous: Any = health.HealthServicer()
        with pytest.raises(TypeError, match=r"/grpc\.health\.v1\.Health/Check"):
            add_health_and_reflection(server, synchronous, DrainingReflection(()))

    asyncio.run(register())


def test_each_answer_or_stop_leaves_no_task_waiting() -> None:
    """A reflection stream waits for each answer with ``until_stopped``: a task left
    waiting for the stop after every answer would pile up for as long as a tool stays
    connected."""

    async def answers_then_a_stop() -> list[tuple[object, int]]:
        """Each answer (None once stopped) and the tasks left beside this one then."""
        stopping = asyncio.Event()
        seen = []
        for number in range(3):
            done = await until_stopped(stopping, asyncio.sleep(0, number))
            await asyncio.sleep(0)  # the cancelled tasks end
            seen.append((None if done is None else done.result(), len(asyncio.all_tasks())))
        stopping.set()
        stopped = await until_stopped(stopping, asyncio.sleep(3600))
        await asyncio.sleep(0)
        return [*seen, (stopped, len(asyncio.all_tasks()))]

    assert asyncio.run(answers_then_a_stop()) == [(0, 1), (1, 1), (2, 1), (None, 1)]
