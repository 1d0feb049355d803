"""service/standard_services.py: what it refuses to register. What it serves is tested
against a real server (test_grpc_hostile_clients.py, test_serving.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health

from service.standard_services import DrainingReflection, add_health_and_reflection


def test_a_servicer_whose_methods_are_not_async_is_refused_at_start() -> None:
    """Requests are parsed inside coroutines; a synchronous servicer (grpc.aio runs its
    methods in a thread pool) would never be called with the parsed request."""

    async def register() -> None:
        server = grpc.aio.server()
        synchronous: Any = health.HealthServicer()
        with pytest.raises(TypeError, match=r"/grpc\.health\.v1\.Health/Check"):
            add_health_and_reflection(server, synchronous, DrainingReflection(()))

    asyncio.run(register())
