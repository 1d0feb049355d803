"""A client made with the defaults drops a connection the network swallowed, and calls get
through as soon as the network is back (clients/python/README.md, "Deadlines, retries, load
balancing"; docs/operations.md, "Keepalive").

A real ``cardrules serve``, real clients (blocking and asyncio), and between them a TCP
forwarder that can turn into a blackhole: it stops relaying bytes both ways but keeps every
socket open, as a network partition does, and holds the connections made meanwhile until it
relays again. Its kernel acknowledges what the client sends, so the client's TCP never times
out: only the client's keepalive ping, unanswered, can tell it the connection is dead.
Without pings the client keeps the dead connection and every call waits out its deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from cardrules.client import AsyncKrypkasinoClient, KrypkasinoClient, channel_options
from cardrules.client.channel import DEFAULT_TIMEOUT, KEEPALIVE_OPTIONS

from tests.service.server_process import running

ROOT = Path(__file__).resolve().parents[2]
DOCS = (ROOT / "clients" / "python" / "README.md", ROOT / "docs" / "operations.md")

#: How long a client may take to drop a blackholed connection: the channel pings every
#: ``grpc.keepalive_time_ms`` (10 s) while a call is open and closes the connection when a
#: ping goes unanswered for ``grpc.http2.ping_timeout_ms`` (5 s), so 5 to 15 s (5.0 to
#: 5.8 s or 15.0 s measured here, with calls back to back). On a machine loaded past its
#: two cores the asyncio client's ping once came two cycles late (35.0 s, one run in
#: about forty), which failed a bound of 25 s; the rest is slack for that. Without pings
#: (grpc's defaults) both connections were still open after this.
DROP_BOUND_SECONDS = 60.0

#: What the clients' calls and the forwarder's threads get to end once it relays again.
WIND_DOWN_SECONDS = 3 * DEFAULT_TIMEOUT


@dataclass
class Link:
    """One client connection through the forwarder, and the server connection it feeds."""

    client: socket.socket
    server: socket.socket | None = None
    relayed: bool = False
    blackholed: bool = False
    #: Why a direction stopped forwarding early, for a failure's message.
    broken: list[str] = field(default_factory=list)
    client_gone_at: float | None = None
    client_gone: threading.Event = field(default_factory=threading.Event)


class Forwarder:
    """A TCP forwarder on a free loopback port to ``upstream`` that can blackhole.

    ``blackhole()`` drops every byte of the connections it relays (reading them, so that it
    sees a client close) and holds new connections unread, and those accepted but not yet
    relaying; ``relay()`` relays the held ones and new ones (a dropped connection stays
    dropped: its bytes are gone).
    """

    def __init__(self, upstream: tuple[str, int]) -> None:
        self._upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._relaying = threading.Event()
        self._relaying.set()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self.links: list[Link] = []
        self._threads: list[threading.Thread] = []
        self._spawn(self._accept)

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self._listener.getsockname()[1]}"

    def blackhole(self) -> list[Link]:
        """Stop relaying; the links relaying now, which stay dropped."""
        with self._lock:
            self._relaying.clear()
            dropped = [link for link in self.links if link.relayed]
            for link in dropped:
                link.blackholed = True
        return dropped

    def relay(self) -> None:
        self._relaying.set()

    def close(self) -> None:
        self._stopping.set()
        self._relaying.set()
        # Closing a listening socket leaves accept() waiting in another thread; shutting it
        # down wakes it (Linux).
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            links = list(self.links)
        for link in links:
            for end in (link.client, link.server):
                if end is not None:
                    with contextlib.suppress(OSError):
                        end.shutdown(socket.SHUT_RDWR)
                    end.close()
        for thread in self._threads:
            thread.join(WIND_DOWN_SECONDS)

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            link = Link(client)
            with self._lock:
                self.links.append(link)
            self._spawn(self._serve, link)

    def _serve(self, link: Link) -> None:
        # Under the lock, so that a link is either dropped by blackhole() or held by it,
        # never relayed through the blackhole.
        while True:
            self._relaying.wait()
            if self._stopping.is_set():
                return
            with self._lock:
                if self._relaying.is_set():
                    link.relayed = True
                    break
        try:
            link.server = socket.create_connection(self._upstream)
        except OSError:
            link.client.close()
            return
        server = link.server
        if self._stopping.is_set():  # close() may have missed the new socket
            server.close()
            return
        self._spawn(self._pump, server, link.client, link, False)
        self._pump(link.client, server, link, True)

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket, link: Link, from_client: bool) -> None:
        """Copy ``source`` to ``sink`` until the end of ``source``; drop the bytes of a
        blackholed link, and keep its other end open.

        ``source`` is read to its end even once ``sink`` is gone, as a network delivers a
        close after the peer reset: else a client's close goes unseen."""
        sink_gone = False
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            if not data:
                if from_client:
                    link.client_gone_at = time.monotonic()
                    link.client_gone.set()
                if not link.blackholed:
                    with contextlib.suppress(OSError):
                        sink.shutdown(socket.SHUT_WR)
                return
            if link.blackholed or sink_gone:
                continue
            try:
                sink.sendall(data)
            except OSError as error:
                sink_gone = True
                link.broken.append(f"{'server' if from_client else 'client'} send: {error!r}")


@contextmanager
def forwarding(upstream: tuple[str, int]) -> Iterator[Forwarder]:
    forwarder = Forwarder(upstream)
    try:
        yield forwarder
    finally:
        forwarder.close()


@dataclass
class Phases:
    """What the main thread and a calling client tell each other."""

    connected: threading.Event = field(default_factory=threading.Event)
    relaying_again: threading.Event = field(default_factory=threading.Event)


def blocking_client_calls(target: str, phases: Phases) -> float:
    """Call through the outage with a default client, then the seconds a call took once the
    network was back (it raises if that call fails)."""
    with KrypkasinoClient(target) as client:
        client.new_game(players=2)
        phases.connected.set()
        while not phases.relaying_again.is_set():
            with contextlib.suppress(grpc.RpcError):
                client.new_game(players=2)
        started = time.monotonic()
        client.new_game(players=2)
        return time.monotonic() - started


async def asyncio_client_calls(target: str, phases: Phases) -> float:
    """``blocking_client_calls`` with the asyncio client."""
    async with AsyncKrypkasinoClient(target) as client:
        await client.new_game(players=2)
        phases.connected.set()
        while not phases.relaying_again.is_set():
            with contextlib.suppress(grpc.RpcError):
                await client.new_game(players=2)
        started = time.monotonic()
        await client.new_game(players=2)
        return time.monotonic() - started


def test_keepalive_is_a_default_channel_option() -> None:
    """The pings come with every channel the clients make (``channel_options``), and a
    caller's own value of an option wins, as for the other defaults."""
    options = channel_options()
    for option in KEEPALIVE_OPTIONS:
        assert option in options
    never = 2**31 - 1  # grpc core reads INT_MAX as "never"
    overridden = channel_options(extra=[("grpc.keepalive_time_ms", never)])
    assert [value for name, value in overridden if name == "grpc.keepalive_time_ms"] == [never]
    assert "grpc.keepalive_permit_without_calls" not in dict(options)


def test_the_docs_give_the_keepalive_defaults_and_how_to_turn_them_off() -> None:
    for doc in DOCS:
        text = " ".join(doc.read_text().split())
        for name, value in KEEPALIVE_OPTIONS:
            assert f"`{name}` {value}" in text, (doc.name, name)
        assert '("grpc.keepalive_time_ms", 2**31 - 1)' in text, doc.name
        assert "GOAWAY `too_many_pings`" in text, doc.name


def test_default_clients_drop_a_blackholed_connection_and_recover_when_it_heals() -> None:
    """Both clients notice within about 15 s that their connection is dead, and a call
    made once the network relays again gets through within its deadline."""
    with (
        running() as server,
        forwarding(("127.0.0.1", server.grpc_port)) as blocking_path,
        forwarding(("127.0.0.1", server.grpc_port)) as asyncio_path,
        ThreadPoolExecutor(max_workers=2) as pool,
    ):
        paths = [blocking_path, asyncio_path]
        phases = [Phases(), Phases()]
        calls: list[Future[float]] = [
            pool.submit(blocking_client_calls, blocking_path.target, phases[0]),
            pool.submit(asyncio.run, asyncio_client_calls(asyncio_path.target, phases[1])),
        ]
        try:
            for phase, call in zip(phases, calls, strict=True):
                if not phase.connected.wait(DEFAULT_TIMEOUT * 2):
                    if call.done():
                        call.result()  # its error
                    raise AssertionError("a client did not connect")
            dropped = [path.blackhole() for path in paths]
            went_dark = time.monotonic()
            for links in dropped:
                assert links, "the client made no connection through the forwarder"
                for link in links:
                    link.client_gone.wait(
                        max(0.0, went_dark + DROP_BOUND_SECONDS - time.monotonic())
                    )
            # Each client's links still open, as why each stopped forwarding early.
            kept = {
                kind: [link.broken for link in links if not link.client_gone.is_set()]
                for kind, links in zip(("blocking", "asyncio"), dropped, strict=True)
            }
            assert not any(kept.values()), (
                f"still open {DROP_BOUND_SECONDS} s into the blackhole: {kept}"
            )
        finally:
            for path, phase in zip(paths, phases, strict=True):
                path.relay()
                phase.relaying_again.set()
        for call in calls:
            assert call.result(WIND_DOWN_SECONDS) < DEFAULT_TIMEOUT
