"""The ``/metrics`` endpoint (design section 6): served, stopped, and bounded in time
and connections, on real sockets."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
import structlog.testing
from prometheus_client import CollectorRegistry, Counter, Metric
from prometheus_client.registry import Collector

from service.listen import ipv6_available
from service.metrics_http import (
    DEADLINE_SECONDS,
    MAX_CONNECTIONS,
    MetricsHTTP,
    _QuietHandler,
    _ThreadRefusals,
    start_metrics_http,
)
from tests.service.metrics_helpers import samples
from tests.service.test_metrics_thread_limit import REFUSED, pids_cgroup, settled


@pytest.fixture
def registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Counter("scraped_things", "A counter to find in the exposition.", registry=registry).inc(3)
    return registry


@contextlib.contextmanager
def serving(
    registry: CollectorRegistry,
    *,
    deadline_seconds: float = DEADLINE_SECONDS,
    max_connections: int = MAX_CONNECTIONS,
) -> Iterator[MetricsHTTP]:
    server = start_metrics_http(
        0,
        registry,
        "127.0.0.1",
        deadline_seconds=deadline_seconds,
        max_connections=max_connections,
    )
    try:
        yield server
    finally:
        server()


def scrape(port: int, host: str = "127.0.0.1") -> float:
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        return samples(response.read().decode())[("scraped_things_total", frozenset())]


def connect(port: int) -> socket.socket:
    connection = socket.create_connection(("127.0.0.1", port), timeout=10)
    connection.settimeout(10)
    return connection


def closed_by_server(connection: socket.socket) -> bool:
    """Whether the server closed ``connection`` without answering."""
    try:
        return connection.recv(1) == b""
    except ConnectionResetError:
        return True


def connection_threads() -> int:
    """Threads serving a connection (ThreadingMixIn names them by their target), so
    that threads other tests of this process start or end do not count."""
    return sum("process_request_thread" in thread.name for thread in threading.enumerate())


def wait_for_connection_threads(count: int) -> None:
    deadline = time.monotonic() + 10
    while connection_threads() != count:
        assert time.monotonic() < deadline, (connection_threads(), count)
        time.sleep(0.01)


def test_metrics_are_served_over_http_until_stopped(registry):
    server = start_metrics_http(0, registry, host="127.0.0.1")
    try:
        assert server.port > 0
        assert scrape(server.port) == 3
    finally:
        server()
    server()  # a second shutdown is harmless
    with pytest.raises(urllib.error.URLError):
        scrape(server.port)


def test_the_metrics_endpoint_listens_on_every_address_by_default(registry):
    """Without a host it listens on 0.0.0.0, as ``--host`` defaults to: reachable on
    any of the machine's IPv4 addresses, here loopback's 127.0.0.2, and on IPv6 too
    when the machine has it, as gRPC (the IPv4 fallback: test_dual_stack.py)."""
    server = start_metrics_http(0, registry)
    try:
        assert scrape(server.port, "127.0.0.2") == 3
        if ipv6_available():
            assert scrape(server.port, "[::1]") == 3
    finally:
        server()


def test_a_loopback_host_is_served_on_that_address_alone(registry):
    """A named address is not widened to the wildcard: 127.0.0.1 is not 127.0.0.2."""
    with serving(registry) as server:
        assert scrape(server.port) == 3
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.2", server.port), timeout=10).close()


def test_a_connection_that_sends_nothing_is_closed_at_the_deadline(registry, capfd):
    """prometheus_client's own server kept such a connection, and its thread, for good."""
    with serving(registry, deadline_seconds=0.3) as server:
        idle = connect(server.port)
        started = time.monotonic()
        with idle:
            assert closed_by_server(idle)
        assert time.monotonic() - started >= 0.25
        assert scrape(server.port) == 3
    assert capfd.readouterr().err == ""  # no traceback for a client that went quiet


def test_a_connection_that_trickles_its_request_is_closed_at_the_deadline(registry, capfd):
    """A byte every 0.1 s renewed a per-read timeout for good: 16 such connections kept
    every scrape refused. The deadline counts from the connection's start."""
    with serving(registry, deadline_seconds=0.5) as server:
        trickling = connect(server.port)
        started = time.monotonic()
        with trickling:
            with contextlib.suppress(OSError):  # sending after the close may be refused
                for byte in b"GET /metrics HTTP/1.0\r\nX-Slow: " + b"a" * 100:
                    trickling.sendall(bytes((byte,)))
                    time.sleep(0.1)
                    if time.monotonic() - started > 5:
                        break
            assert closed_by_server(trickling)
        assert 0.45 <= time.monotonic() - started < 3
        assert scrape(server.port) == 3
    assert capfd.readouterr().err == ""


def deadline_timers() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if isinstance(thread, threading.Timer)}


def test_a_served_connection_ends_its_deadline_timer(registry):
    """A scrape's timer ends with its connection, not at the deadline: else every scrape
    would leave a thread behind for as long. Timers that ran before it (another test's)
    are not counted."""
    with serving(registry, deadline_seconds=60) as server:
        before = deadline_timers()
        assert scrape(server.port) == 3
        deadline = time.monotonic() + 3
        while left := deadline_timers() - before:
            assert time.monotonic() < deadline, left
            time.sleep(0.01)


def test_a_client_that_resets_its_connection_leaves_no_traceback(registry, capfd):
    """A read cut by the client's reset is the client gone, not an error to print."""
    with serving(registry) as server:
        before = connection_threads()
        connection = connect(server.port)
        connection.sendall(b"GET /metrics HTTP/1.0\r\n")
        wait_for_connection_threads(before + 1)
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        connection.close()  # with no linger: a reset
        wait_for_connection_threads(before)
        assert scrape(server.port) == 3
    # Nor is it logged: the service's log lines go to stdout.
    assert capfd.readouterr() == ("", "")


def test_the_bounds_are_those_docs_operations_states():
    operations = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    text = " ".join(operations.split())
    stated = re.search(r"a connection is closed (\d+) s .* at most (\d+) connections", text)
    assert stated is not None
    assert (float(stated[1]), int(stated[2])) == (DEADLINE_SECONDS, MAX_CONNECTIONS)


def test_a_held_connection_does_not_hold_the_process_at_exit(registry):
    """The deadline's timer is a daemon thread, as the connection's thread that starts it:
    a process ending while a scrape is under way ends at once, not at the deadline."""
    program = (
        "import socket, time\n"
        "from prometheus_client import CollectorRegistry\n"
        "from service.metrics_http import start_metrics_http\n"
        "server = start_metrics_http(0, CollectorRegistry(), '127.0.0.1', deadline_seconds=60)\n"
        "held = socket.create_connection(('127.0.0.1', server.port))\n"
        "held.sendall(b'GET /metrics HTTP/1.0\\r\\n')\n"
        "time.sleep(0.5)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], timeout=30, capture_output=True)
    assert done.returncode == 0, done.stderr


class HeldCollector(Collector):
    """Collects nothing until ``release`` is set; ``entered`` once a scrape is under way."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def collect(self) -> Iterable[Metric]:
        self.entered.set()
        self.release.wait(30)
        return []


def test_a_stop_lets_the_scrape_under_way_finish(registry):
    """A supervisor removes its workers' files of values once its metrics server has
    stopped: a scrape still reading them failed, and logged them gone for good."""
    held = HeldCollector()
    registry.register(held)
    server = start_metrics_http(0, registry, "127.0.0.1")
    answered: list[float] = []
    scraper = threading.Thread(target=lambda: answered.append(scrape(server.port)))
    scraper.start()
    assert held.entered.wait(10)
    stopper = threading.Thread(target=server)
    stopper.start()
    stopper.join(1.0)  # past shutdown's poll (0.5 s), short of STOP_WAIT_SECONDS
    assert stopper.is_alive()
    held.release.set()
    stopper.join(10)
    scraper.join(10)
    assert not stopper.is_alive() and answered == [3.0]


class FailingCollector(Collector):
    def collect(self) -> Iterable[Metric]:
        raise RuntimeError("the values cannot be read")


def test_a_failing_collection_answers_503_with_the_reason_and_logs_it(registry, capfd):
    """wsgiref answered 500 and printed a traceback to stderr, outside the JSON log."""
    registry.register(FailingCollector())
    with serving(registry) as server, structlog.testing.capture_logs() as logs:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=10)
        with refused.value:
            assert refused.value.code == 503
            assert refused.value.headers["Content-Type"] == "text/plain; charset=utf-8"
            assert refused.value.read() == b"the values cannot be read\n"
    assert logs == [
        {"event": "metrics unavailable", "error": "the values cannot be read", "log_level": "error"}
    ]
    assert capfd.readouterr().err == ""


def test_connections_beyond_the_cap_are_closed_at_once_and_threads_stay_bounded(registry):
    with serving(registry, max_connections=2) as server:
        before = connection_threads()
        held = [connect(server.port) for _ in range(2)]
        for connection in held:  # a request line and no end of headers: its thread waits
            connection.sendall(b"GET /metrics HTTP/1.0\r\n")
        wait_for_connection_threads(before + 2)

        flood = [connect(server.port) for _ in range(40)]
        for connection in flood:
            with connection:
                assert closed_by_server(connection)
        assert connection_threads() == before + 2

        held[0].sendall(b"\r\n")  # the held connections are still served
        assert held[0].recv(64).startswith(b"HTTP/1.0 200")
        for connection in held:
            connection.close()
        wait_for_connection_threads(before)
        assert scrape(server.port) == 3  # and their slots are free again


def test_an_unexpected_failure_of_a_connection_is_one_json_error_line(registry, capfd, monkeypatch):
    """socketserver printed such a failure as a traceback on stderr, outside the JSON
    log. No request reaches one today, so one is injected where the request is parsed."""

    def fail(_handler: object) -> bool:
        raise ValueError("unexpected")

    monkeypatch.setattr(_QuietHandler, "parse_request", fail)
    with serving(registry) as server, structlog.testing.capture_logs() as logs:
        with connect(server.port) as connection:
            connection.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            assert closed_by_server(connection)
        deadline = time.monotonic() + 10
        while not logs:  # logged by the connection's thread, after it closed
            assert time.monotonic() < deadline
            time.sleep(0.01)
    assert logs == [{"event": "metrics connection failed", "exc_info": True, "log_level": "error"}]
    assert capfd.readouterr().err == ""


def test_connections_closed_for_want_of_a_thread_are_reported_once_per_window():
    """A flood against a pids limit would write a line per connection: the first is
    reported at once, the rest in the window counted in the next line."""
    now = [100.0]
    refusals = _ThreadRefusals(window=10.0, clock=lambda: now[0])
    error = RuntimeError("can't start new thread")
    with structlog.testing.capture_logs() as logs:
        for moment in (100.0, 101.0, 109.0, 110.0, 125.0):
            now[0] = moment
            refusals.report(error)
    line = {
        "event": "metrics connections closed: no thread could be started",
        "error": "can't start new thread",
        "log_level": "error",
    }
    assert logs == [
        {**line, "connections_closed": 1},
        {**line, "connections_closed": 3},
        {**line, "connections_closed": 1},
    ]


# A metrics server with ``max_connections`` (its argument), serving until stdin closes.
THREAD_LIMITED_SCRIPT = """
import sys
from prometheus_client import CollectorRegistry, Counter
from service.logs import configure_logging
from service.metrics_http import start_metrics_http
configure_logging("json")
registry = CollectorRegistry()
Counter("scraped_things", "A counter to find in the exposition.", registry=registry).inc(3)
server = start_metrics_http(0, registry, "127.0.0.1", max_connections=int(sys.argv[1]))
print(server.port, flush=True)
sys.stdin.read()
server()
"""


def test_connections_refused_a_thread_give_their_slots_back():
    """A connection whose thread could not be started (a container's pids limit) gives
    its slot back: else, once ``max_connections`` had been refused, every scrape was
    closed at once for good, threads or not. A real server process in a pids cgroup
    that lets it start no thread (as test_metrics_thread_limit.py's: run as root)
    refuses more connections than it has slots, then is allowed threads again."""
    max_connections = 2
    with pids_cgroup() as cgroup:
        server = subprocess.Popen(
            [sys.executable, "-c", THREAD_LIMITED_SCRIPT, str(max_connections)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None
            port = int(server.stdout.readline())
            (cgroup / "cgroup.procs").write_text(str(server.pid))  # with all its threads
            threads = settled(lambda: int((cgroup / "pids.current").read_text()))
            (cgroup / "pids.max").write_text(str(threads))  # not one thread more
            for _ in range(max_connections + 1):
                with connect(port) as connection:
                    connection.settimeout(DEADLINE_SECONDS / 2)  # a thread would hold it
                    assert closed_by_server(connection)
            (cgroup / "pids.max").write_text("max")
            assert scrape(port) == 3
        finally:
            try:
                out, _ = server.communicate(timeout=30)  # closes stdin: the server stops
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
                raise
    lines = [json.loads(line) for line in out.splitlines()]  # the lines after the port
    assert [(line["event"], line["connections_closed"]) for line in lines] == [(REFUSED, 1)]
