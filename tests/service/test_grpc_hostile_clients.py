"""gRPC clients that misbehave at the HTTP/2 level, against a real server on loopback.

What such a client causes is the client's, not the server's: nothing it does may put an
error line (with a traceback) in the log, which anyone could repeat to flood the log and
trip error alerts (docs/api.md, as for aiohttp's refusals of malformed HTTP). The frames
are written by hand, as no HTTP/2 library that would let a client misbehave so is a
dependency of the project.
"""

from __future__ import annotations

import socket
import struct

from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from grpc_reflection.v1alpha import reflection_pb2

from tests.service.grpc_helpers import connect
from tests.service.server_process import failure_lines, running

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_DATA, _HEADERS, _SETTINGS = 0x0, 0x1, 0x4
_END_STREAM, _END_HEADERS = 0x1, 0x4
_SETTINGS_INITIAL_WINDOW_SIZE = 0x4


def frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return (
        struct.pack(">I", len(payload))[1:]
        + bytes((kind, flags))
        + struct.pack(">I", stream)
        + payload
    )


def _literal(name: bytes, value: bytes) -> bytes:
    """An HPACK literal header field without indexing, new name, no Huffman coding."""
    assert len(name) < 127 and len(value) < 127
    return b"\x00" + bytes((len(name),)) + name + bytes((len(value),)) + value


def unary_call(stream: int, path: str, message: bytes, request_id: str) -> bytes:
    """The HEADERS and DATA frames of one whole gRPC call on ``stream``."""
    block = b"".join(
        _literal(name, value)
        for name, value in (
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b":path", path.encode()),
            (b":authority", b"test"),
            (b"content-type", b"application/grpc"),
            (b"te", b"trailers"),
            (b"x-request-id", request_id.encode()),
        )
    )
    grpc_message = b"\x00" + struct.pack(">I", len(message)) + message
    return frame(_HEADERS, _END_HEADERS, stream, block) + frame(
        _DATA, _END_STREAM, stream, grpc_message
    )


def never_reading_client(port: int, calls: bytes) -> socket.socket:
    """A connection whose client grants no flow-control window: the server can send
    no answer's message on it."""
    connection = socket.create_connection(("127.0.0.1", port), timeout=10)
    no_window = struct.pack(">HI", _SETTINGS_INITIAL_WINDOW_SIZE, 0)
    connection.sendall(PREFACE + frame(_SETTINGS, 0, 0, no_window) + calls)
    return connection


def test_a_client_that_goes_while_its_answers_wait_leaves_no_error_in_the_log():
    """The answers wait for a window that never comes; the client then closes the
    connection. grpc.aio logged each answer it could not send as an error with a
    traceback (``ExecuteBatchError raised in core by servicer method``), whoever's
    method it was: the service's, reflection's. The calls are handled and logged as
    usual; what follows is debug-level."""
    new_game = pb.NewGameRequest(config=pb.GameConfig(players=2)).SerializeToString()
    list_services = reflection_pb2.ServerReflectionRequest(list_services="").SerializeToString()
    with running() as server:
        for number in range(3):
            calls = unary_call(
                1,
                "/cardrules.krypkasino.v1.KrypkasinoService/NewGame",
                new_game,
                f"unread-answer-{number}",
            ) + unary_call(
                3,
                "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                list_services,
                f"unread-reflection-{number}",
            )
            with never_reading_client(server.grpc_port, calls):
                (line,) = server.request_lines(f"unread-answer-{number}")
                assert line["code"] == "OK"
        # The server goes on serving; its log is complete once it has stopped.
        with connect(server.target) as stub:
            stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2)), timeout=10)
    assert failure_lines(server) == []
