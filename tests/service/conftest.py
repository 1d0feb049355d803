"""Fixtures with a real server on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.service.server_process import ServerProcess, start_server


@pytest.fixture(scope="session")
def server() -> Iterator[ServerProcess]:
    """One real ``cardrules serve`` per test process, sealed with the test key."""
    running = start_server()
    yield running
    assert running.terminate() == 0


@pytest.fixture(scope="session")
def grpc_target(server: ServerProcess) -> str:
    return server.target
