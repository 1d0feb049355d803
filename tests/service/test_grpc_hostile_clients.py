"""gRPC clients that misbehave at the HTTP/2 level, against a real server on loopback.

What such a client causes is the client's, not the server's: nothing it does may put an
error line (with a traceback) in the log, which anyone could repeat to flood the log and
trip error alerts (docs/api.md, as for aiohttp's refusals of malformed HTTP). The client
is h2's protocol machine over a plain socket, which lets it misbehave as grpc's would not.
"""

from __future__ import annotations

import functools
import socket
import struct

import grpc
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.settings import SettingCodes, Settings

from tests.service.grpc_helpers import connect, health, outcome
from tests.service.server_process import failure_lines, running


def never_reading_client(port: int, calls: list[tuple[str, bytes, str]]) -> socket.socket:
    """A connection that sends whole unary calls ``(path, message, request id)`` but grants
    no flow-control window, so the server can send none of their answers' messages."""
    client = H2Connection(H2Configuration(client_side=True, header_encoding="ascii"))
    # Set before the preamble, so that its first SETTINGS frame carries the window of 0.
    client.local_settings = Settings(
        client=True, initial_values={SettingCodes.INITIAL_WINDOW_SIZE: 0}
    )
    client.initiate_connection()
    for path, message, request_id in calls:
        stream = client.get_next_available_stream_id()
        client.send_headers(
            stream,
            [
                (":method", "POST"),
                (":scheme", "http"),
                (":path", path),
                (":authority", "test"),
                ("content-type", "application/grpc"),
                ("te", "trailers"),
                ("x-request-id", request_id),
            ],
        )
        # gRPC's length-prefixed message: not compressed, then its length.
        client.send_data(
            stream, b"\x00" + struct.pack(">I", len(message)) + message, end_stream=True
        )
    connection = socket.create_connection(("127.0.0.1", port), timeout=10)
    connection.sendall(client.data_to_send())
    return connection


def test_a_client_that_goes_while_its_answers_wait_leaves_no_error_in_the_log() -> None:
    """The answers wait for a window that never comes; the client then closes the
    connection. grpc.aio logged each answer it could not send as an error with a
    traceback (``ExecuteBatchError raised in core by servicer method``), whoever's
    method it was: the service's, reflection's. The calls are handled and logged as
    usual; what follows is debug-level."""
    new_game = pb.NewGameRequest(config=pb.GameConfig(players=2)).SerializeToString()
    list_services = reflection_pb2.ServerReflectionRequest(list_services="").SerializeToString()
    with running() as server:
        for number in range(3):
            calls = [
                (
                    "/cardrules.krypkasino.v1.KrypkasinoService/NewGame",
                    new_game,
                    f"unread-answer-{number}",
                ),
                (
                    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                    list_services,
                    f"unread-reflection-{number}",
                ),
            ]
            with never_reading_client(server.grpc_port, calls):
                (line,) = server.request_lines(f"unread-answer-{number}")
                assert line["code"] == "OK"
        # The server goes on serving; its log is complete once it has stopped.
        with connect(server.target) as stub:
            stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2)), timeout=10)
    assert failure_lines(server) == []


# What grpc.aio parses itself for the standard services' handlers: it answered UNKNOWN
# and logged each DecodeError with a traceback at error level.
UNDECODABLE = [
    ("/grpc.health.v1.Health/Check", "unary"),
    ("/grpc.health.v1.Health/List", "unary"),
    ("/grpc.health.v1.Health/Watch", "stream"),
    ("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", "both"),
]


def send(channel: grpc.Channel, path: str, kind: str, message: bytes) -> None:
    """``message`` as the request bytes of the method at ``path``, every answer read."""
    if kind == "unary":
        unary: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(path)
        unary(message, timeout=10)
    elif kind == "stream":
        stream: grpc.UnaryStreamMultiCallable[bytes, bytes] = channel.unary_stream(path)
        list(stream(message, timeout=10))
    else:
        both: grpc.StreamStreamMultiCallable[bytes, bytes] = channel.stream_stream(path)
        list(both(iter([message]), timeout=10))


def test_bytes_that_are_no_health_or_reflection_request_are_malformed_and_leave_no_error():
    with running() as server, grpc.insecure_channel(server.target) as channel:
        for path, kind in UNDECODABLE:
            for garbage in (b"\x0a\x05ab", b"\xff\xff"):
                refusal = outcome(functools.partial(send, channel, path, kind, garbage))
                assert refusal is not None, path
                assert (refusal.code, refusal.reason) == (
                    grpc.StatusCode.INVALID_ARGUMENT,
                    "REQUEST_MALFORMED",
                ), path
                assert path in refusal.message
        # The same services still answer requests that parse.
        answer = health(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
    assert failure_lines(server) == []
