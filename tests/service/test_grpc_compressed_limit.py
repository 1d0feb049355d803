"""grpc's own bound on a compressed request, against a real server on loopback (design
section 6: a limit on the maximum request size).

grpc inflates a compressed message whole before it checks its size against the server's
``grpc.max_receive_message_length``, so about 120 bytes of gzip cost the
server what it inflates to. That bound is 5/4 of ``--max-request-bytes`` (docs/api.md,
"Errors", ``REQUEST_TOO_LARGE``): a message just over it is refused by grpc itself,
without an ``ErrorInfo``; one at it reaches the service, which refuses it with its own.
At four times the limit, a connection of 450 such calls took a server past 200 MiB
(docs/operations.md, "Sizing", Memory).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager, suppress

import grpc
from cardrules.client import error_info, request_id
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from tests.service.grpc_helpers import TIMEOUT, Stub, state_of_request_size
from tests.service.metrics_helpers import handled, rpc_sample
from tests.service.server_process import ServerProcess, free_port, running

LIMIT = 64 * 1024  # the default --max-request-bytes
# What the client may send for one call of a message inflating to about 80 KiB: the
# HTTP/2 preface, settings and headers, and the gzip data of the zeros (about 120 bytes).
# Uncompressed, the message alone would be 80 KiB.
MOST_BYTES_SENT = 4096


def transport_bound(limit: int) -> int:
    """grpc's bound on a received message, decompressed: 5/4 of ``limit``, rounded down.
    Written out here rather than taken from service.server, as docs/api.md states it."""
    return limit * 5 // 4


class CountingRelay:
    """A loopback TCP relay to ``target`` that counts the bytes its clients send: proof
    that the client compressed what it sent."""

    def __init__(self, target: tuple[str, int]) -> None:
        self._target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._lock = threading.Lock()
        self.sent = 0
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> str:
        host, port = self._listener.getsockname()[:2]
        return f"{host}:{port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed: the relay is done
                return
            try:
                upstream = socket.create_connection(self._target)
            except OSError:  # the server is gone: the client's call fails UNAVAILABLE
                client.close()
                continue
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, counted: bool) -> None:
        """Copy ``source`` to ``sink`` until either ends, then close both."""
        with closing(source), closing(sink):
            with suppress(OSError):  # the other pump closed the sockets
                while data := source.recv(65536):
                    if counted:
                        with self._lock:
                            self.sent += len(data)
                    sink.sendall(data)
            for end in (source, sink):
                with suppress(OSError):  # already closed or reset
                    end.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._listener.close()


@contextmanager
def counting_relay(server: ServerProcess) -> Iterator[CountingRelay]:
    relay = CountingRelay(("127.0.0.1", server.grpc_port))
    try:
        yield relay
    finally:
        relay.close()


def gzip_refusal(server: ServerProcess, size: int) -> tuple[grpc.RpcError, int]:
    """The refusal of a gzip-compressed GetViewRequest of ``size`` bytes (no state token of
    ours), sent on a channel of its own through a relay, and the bytes the client sent."""
    request = pb.GetViewRequest(state=state_of_request_size(size))
    with counting_relay(server) as relay, grpc.insecure_channel(relay.address) as channel:
        try:
            Stub(channel).GetView(request, timeout=TIMEOUT, compression=grpc.Compression.Gzip)
        except grpc.RpcError as error:
            return error, relay.sent
    raise AssertionError(f"a GetViewRequest of {size} bytes was accepted")


def test_a_gzip_message_over_the_transport_bound_is_refused_by_grpc(server):
    """docs/api.md, REQUEST_TOO_LARGE: over 5/4 of the limit, once inflated, grpc refuses
    the message itself, so without an ErrorInfo, however few bytes it took to send."""
    error, sent = gzip_refusal(server, transport_bound(LIMIT) + 1)
    assert sent < MOST_BYTES_SENT  # it was compressed: an 80 KiB message in a few KB
    assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error_info(error) is None
    assert "larger than max" in (error.details() or "")


def test_a_gzip_message_at_the_transport_bound_gets_the_services_refusal(server):
    """Up to 5/4 of the limit, once inflated, the service refuses the message itself:
    REQUEST_TOO_LARGE with its ErrorInfo and the limit."""
    error, sent = gzip_refusal(server, transport_bound(LIMIT))
    assert sent < MOST_BYTES_SENT
    assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error_info(error) == ("REQUEST_TOO_LARGE", {"limit": str(LIMIT)})


def test_a_message_grpc_refuses_is_neither_logged_nor_counted():
    """docs/operations.md, "Metrics and alerts": a message over 5/4 of the limit never
    reaches the service, so no request line has it and no metric counts it (only the
    client's errors show it), where one at the bound is logged and counted as refused."""
    with running(("--metrics-port", str(free_port()))) as server:
        gzip_refusal(server, transport_bound(LIMIT) + 1)
        error, _ = gzip_refusal(server, transport_bound(LIMIT))
        [line] = server.request_lines(str(request_id(error)))
        assert [entry["request_id"] for entry in server.log_events("request")] == [
            request_id(error)
        ]
        assert line["code"] == "ResourceExhausted"
        assert rpc_sample(server.metrics_url, "grpc_server_started_total", "GetView") == 1
        assert handled(server.metrics_url, "GetView", "ResourceExhausted") == 1
