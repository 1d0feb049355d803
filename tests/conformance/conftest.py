"""The three drivers of the conformance suite; the servers are real, on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conformance.drivers import EngineDriver, GrpcDriver, HttpDriver
from tests.service.server_process import ServerProcess, start_server, stop_and_check


@pytest.fixture(scope="session")
def conformance_server() -> Iterator[ServerProcess]:
    """One ``cardrules serve`` answering both gRPC and HTTP/JSON; its log must show no failure."""
    running = start_server()
    yield running
    stop_and_check(running)


@pytest.fixture
def engine_driver() -> EngineDriver:
    return EngineDriver()


@pytest.fixture
def grpc_driver(conformance_server: ServerProcess) -> Iterator[GrpcDriver]:
    driver = GrpcDriver(conformance_server.target)
    yield driver
    driver.close()


@pytest.fixture
def http_driver(conformance_server: ServerProcess) -> Iterator[HttpDriver]:
    driver = HttpDriver(conformance_server.http_url)
    yield driver
    driver.close()
