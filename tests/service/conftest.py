"""Fixtures with a real server on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.service.grpc_helpers import Stub, connect
from tests.service.http_helpers import rpc
from tests.service.server_process import ServerProcess, start_server, stop_and_check


@pytest.fixture(scope="session")
def server() -> Iterator[ServerProcess]:
    """One real ``cardrules serve`` per test process, sealed with the test key."""
    running = start_server()
    yield running
    stop_and_check(running)


@pytest.fixture(scope="session")
def grpc_target(server: ServerProcess) -> str:
    return server.target


@pytest.fixture(scope="module")
def stub(grpc_target: str) -> Iterator[Stub]:
    """A stub on a channel of its own to the shared server."""
    with connect(grpc_target) as client:
        yield client


@pytest.fixture(scope="module")
def json_game(server: ServerProcess) -> Any:
    """A 2-player game (seed 7) started over HTTP/JSON: the ``newGame`` answer."""
    return rpc(server, "newGame", {"config": {"players": 2}, "seed": "7"})
