"""Fixtures with a real server on loopback."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.service.grpc_helpers import Stub, connect
from tests.service.server_process import ServerProcess, start_server

# Events that only a bug logs: an exception a handler let through, a worker that died.
FAILURE_EVENTS = frozenset({"unhandled error", "worker crashed"})


def failure_lines(server: ServerProcess) -> list[dict[str, object]]:
    """The log lines of ``server`` that show a bug: anything at level error or critical,
    an unhandled error or crashed worker, a call answered ``Internal``, or a raw line.

    The server logs JSON only (``server_environment``), so a line that is no JSON object
    was written past the logger: a traceback, or an error of gRPC's core.
    """
    return [
        line
        for line in list(server.logs)
        if line.get("level") in ("error", "critical")
        or line.get("event") in FAILURE_EVENTS | {"raw"}
        or (line.get("event") == "request" and line.get("code") == "Internal")
    ]


def stop_and_check(server: ServerProcess) -> None:
    """Stop a shared server at the end of its fixture: it must exit 0, and its whole log
    (complete once ``terminate`` has joined the log reader) must show no failure, whatever
    the tests that used it did."""
    assert server.terminate() == 0
    assert failure_lines(server) == []


@pytest.fixture(scope="session")
def stop_cleanly() -> Callable[[ServerProcess], None]:
    """``stop_and_check``, for the teardown of module fixtures that start their own server."""
    return stop_and_check


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
