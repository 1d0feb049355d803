"""``simulate --server`` prints grpc's details of a failed call on one line of printable
characters (service/remote_simulate.py): with IPv6 switched off, grpc's details held
a NUL and other control bytes after "Address family not supported by protocol",
which went to the terminal as they were. A real gRPC server on loopback answers
every call with such details, through ``main``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from service.cli import main
from service.remote_simulate import printable
from tests.service.grpc_helpers import loopback_server

DETAILS = "Address family not supported by protocol\x00\x07\x1b[2J\nnext\tline\x7f\u200b"
SHOWN = r"Address family not supported by protocol\x00\x07\x1b[2J next line\x7f\u200b"


class _Failing(grpc.GenericRpcHandler):
    """Every method fails INTERNAL (not retried) with ``DETAILS``."""

    def service(self, handler_call_details: Any) -> grpc.RpcMethodHandler[bytes, bytes]:
        def fail(request: bytes, context: grpc.ServicerContext) -> bytes:
            context.abort(grpc.StatusCode.INTERNAL, DETAILS)

        return grpc.unary_unary_rpc_method_handler(fail)


@pytest.fixture
def failing_server() -> Iterator[int]:
    with loopback_server(lambda server: server.add_generic_rpc_handlers((_Failing(),))) as port:
        yield port


def test_details_with_control_characters_are_printed_escaped_on_one_line(
    failing_server: int, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(
        ["simulate", "krypkasino", "--players", "2", "--server", f"127.0.0.1:{failing_server}"]
    )
    out, err = capsys.readouterr()
    assert (status, out) == (1, "")
    assert f"INTERNAL: {SHOWN}" in err
    assert err.count("\n") == 1 and err.endswith("\n") and err[:-1].isprintable(), repr(err)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain words: [::1]:50051", "plain words: [::1]:50051"),
        ("nul\x00", r"nul\x00"),
        ("two\nlines\r\n", "two lines  "),
        ("a\u2028b", r"a\u2028b"),
    ],
    ids=["printable", "nul", "newlines", "line-separator"],
)
def test_printable(text: str, shown: str) -> None:
    assert printable(text) == shown
