"""The ``/metrics`` endpoint (design section 6): prometheus_client's WSGI app on a bounded server.

prometheus_client's ``start_http_server`` starts a thread for every connection
and never times one out, so each idle connection held a thread and a file
descriptor of the serving process for good: with one worker, the very process
whose descriptors gRPC needs to accept calls. This server serves the same app
(``make_wsgi_app``) on the standard library's WSGI server with two bounds:

- a connection is closed ``deadline_seconds`` after it was accepted, whatever it
  sends (Prometheus sends its request as soon as it connects and gives up on a
  scrape after as long), so that one that trickles its request a byte at a time
  cannot hold its slot for good;
- at most ``max_connections`` are served at once; one more is closed at once,
  so a flood costs the scrapes, never the calls.

A collection that fails (``metrics.MetricsFolderGoneError``: the workers' values
were deleted) answers 503 with the reason and logs it, so that Prometheus marks
the target down (``up`` is 0) instead of recording an empty scrape, and no
traceback reaches stderr.

A connection takes two threads, its own and its deadline's. One for which either
cannot be started (a container's pids limit, ``RLIMIT_NPROC``) is closed, its slot
given back, and reported in one JSON line at most every
``THREAD_REFUSALS_WINDOW_SECONDS``; any other failure while serving a connection
is one JSON error line too, never socketserver's traceback on stderr, which is
not the JSON log (docs/operations.md, "Sizing").
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from prometheus_client import CollectorRegistry, make_wsgi_app

from service.listen import (
    IPV6_WILDCARD,
    Address,
    listen_hosts,
    on_port,
    one_port,
    resolved_addresses,
    served_hosts,
)
from service.logs import OncePerWindow, get_logger

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

#: Prometheus' default scrape timeout: a scrape never waits longer than this on us.
DEADLINE_SECONDS = 10.0
#: Prometheus servers (an HA pair), a person with curl, and room to spare.
MAX_CONNECTIONS = 16
#: How long a stop waits for the scrapes under way: a supervisor removes the workers'
#: files of values once it has stopped, and a scrape reading them then failed, logging
#: that they were gone "until the server is restarted".
STOP_WAIT_SECONDS = 2.0
#: At most one line this often says that connections were closed for want of a thread:
#: a flood of connections against a pids limit would otherwise write a line each.
THREAD_REFUSALS_WINDOW_SECONDS = 10.0


_log = get_logger("cardrules.server")


def _failing_loudly(app: WSGIApplication) -> WSGIApplication:
    """``app``, answering 503 and logging why when a collection fails."""

    def serve(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        try:
            return app(environ, start_response)
        except Exception as error:  # any collector's failure, reported alike
            _log.error("metrics unavailable", error=str(error))
            start_response(
                "503 Service Unavailable", [("Content-Type", "text/plain; charset=utf-8")]
            )
            return [f"{error}\n".encode()]

    return serve


class _ThreadRefusals:
    """Connections closed because no thread could be started for them, reported at
    most once per ``window`` seconds with how many there were since the last line,
    as ``service.open_files.AcceptErrorsOncePerWindow`` reports descriptors running
    out. Called from the accepting thread and the connections' threads alike."""

    def __init__(
        self,
        window: float = THREAD_REFUSALS_WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reports = OncePerWindow(window, clock)
        self._lock = threading.Lock()
        self._unreported = 0

    def report(self, error: BaseException) -> None:
        with self._lock:
            self._unreported += 1
            if not self._reports.due():
                return
            closed, self._unreported = self._unreported, 0
        _log.error(
            "metrics connections closed: no thread could be started",
            error=str(error),
            connections_closed=closed,  # since the previous such line, this one included
        )


class _QuietHandler(WSGIRequestHandler):
    """One request per connection, ended at the server's deadline, and no access log."""

    server: _BoundedServer

    def handle(self) -> None:
        # Not a socket timeout, which bounds each read and write but not the whole: a
        # client sending a byte at a time would renew it. Shutting the socket down ends
        # the read or write under way.
        deadline = threading.Timer(self.server.deadline_seconds, self._end_connection)
        try:
            deadline.start()
        except RuntimeError as error:  # no thread left: unbounded, the connection could stay
            self.server.thread_refusals.report(error)
            return  # process_request_thread closes it and gives its slot back
        try:
            super().handle()
        except OSError:  # the client went away, or the deadline cut a write
            return
        finally:
            deadline.cancel()

    def _end_connection(self) -> None:
        with contextlib.suppress(OSError):  # the handler closed it just then
            self.connection.shutdown(socket.SHUT_RDWR)

    def log_message(self, format: str, *args: Any) -> None:
        """No access log: Prometheus scrapes every 15 s."""


class _Connections:
    """The connections served at once, at most ``max_connections`` of them across every
    socket of the metrics port (one per address its host resolves to)."""

    def __init__(self, max_connections: int) -> None:
        self.max_connections = max_connections
        self.slots = threading.BoundedSemaphore(max_connections)
        self.thread_refusals = _ThreadRefusals()

    def wait(self, timeout: float) -> None:
        """Wait, at most ``timeout`` seconds, until no connection is served (every slot
        is free); for after ``shutdown``, when no new one can take a slot."""
        deadline = time.monotonic() + timeout
        taken = 0
        try:
            while taken < self.max_connections and self.slots.acquire(
                timeout=max(0.0, deadline - time.monotonic())
            ):
                taken += 1
        finally:
            for _ in range(taken):
                self.slots.release()


class _BoundedServer(ThreadingMixIn, WSGIServer):
    """A thread per connection, at most ``connections.max_connections`` of them, each
    connection closed ``deadline_seconds`` after it was accepted."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[Any, ...],
        handler: type[WSGIRequestHandler],
        *,
        family: socket.AddressFamily,
        dual_stack: bool,
        deadline_seconds: float,
        connections: _Connections,
    ) -> None:
        self.address_family = family  # read by TCPServer.__init__ when it makes the socket
        self._dual_stack = dual_stack
        self.deadline_seconds = deadline_seconds
        self._slots = connections.slots
        self.thread_refusals = connections.thread_refusals
        super().__init__(address, handler)

    def server_bind(self) -> None:
        if self._dual_stack:
            # Explicitly: the system default (net.ipv6.bindv6only) may be IPv6 alone.
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except RuntimeError as error:  # the connection's thread could not be started
            self._slots.release()  # no thread to give it back
            self.shutdown_request(request)
            self.thread_refusals.report(error)
        except BaseException:  # no thread started: it would never give the slot back
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection's unexpected failure (called in its ``except``): one JSON error
        line with the traceback, where socketserver printed lines of its own to stderr."""
        _log.exception("metrics connection failed")


class MetricsHTTP:
    """A running ``/metrics`` HTTP server, on one socket or more (one per address its
    host resolves to); call it to shut it down."""

    def __init__(
        self, servers: list[_BoundedServer], connections: _Connections, hosts: list[str]
    ) -> None:
        #: The numeric hosts served (``listen.served_hosts``), for the log line.
        self.hosts = hosts
        self._servers = servers
        self._connections = connections
        self._threads = [
            threading.Thread(target=server.serve_forever, name="metrics", daemon=True)
            for server in servers
        ]
        for thread in self._threads:
            thread.start()
        self._lock = threading.Lock()
        self._stopped = False

    @property
    def port(self) -> int:
        """The bound port, every socket's (useful when started on port 0)."""
        return int(self._servers[0].server_port)

    def __call__(self) -> None:
        """Stop serving and release the port, then let the scrapes under way finish
        (``STOP_WAIT_SECONDS`` at most); safe to call more than once."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        for server in self._servers:
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join()
        self._connections.wait(STOP_WAIT_SECONDS)


def start_metrics_http(
    port: int,
    registry: CollectorRegistry,
    host: str = "0.0.0.0",
    *,
    deadline_seconds: float = DEADLINE_SECONDS,
    max_connections: int = MAX_CONNECTIONS,
) -> MetricsHTTP:
    """Serve ``registry`` on ``http://host:port/metrics`` (default port 9464) in daemon threads.

    A wildcard host is served on IPv4 and IPv6 alike, on one dual-stack socket as gRPC
    serves it, or on IPv4 alone on a machine without IPv6 (``service.listen``). A name
    is served on every address it resolves to (``localhost``: ``::1`` and
    ``127.0.0.1``), one socket each, all on one port: with port 0, one free on each
    (``listen.one_port``). Each address is bound as resolved, an IPv6 scope id with it
    (``fe80::1%eth0``).
    Start it after any fork: a thread does not survive ``fork``.
    """
    hosts = listen_hosts(host)  # "::" on a machine without IPv6: 0.0.0.0 alone
    dual = len(hosts) > 1
    addresses: list[Address]
    if dual:  # both families on one socket, as gRPC serves a wildcard
        addresses = [(socket.AF_INET6, (IPV6_WILDCARD, port))]
    else:
        addresses = resolved_addresses(hosts[0], port)
        port = one_port(addresses, port)
    connections = _Connections(max_connections)
    servers: list[_BoundedServer] = []
    try:
        for family, address in addresses:
            server = _BoundedServer(
                on_port(address, port),
                _QuietHandler,
                family=family,
                dual_stack=dual,
                deadline_seconds=deadline_seconds,
                connections=connections,
            )
            server.set_app(_failing_loudly(make_wsgi_app(registry)))
            servers.append(server)
            port = server.server_port  # port 0 at a single address
    except BaseException:
        for server in servers:
            server.server_close()
        raise
    return MetricsHTTP(servers, connections, served_hosts(host, addresses))
