"""``simulate --server`` given something else than a gRPC HOST:PORT says what to give
(service/remote_simulate.py, service/cli.py): a port where a server speaking no
HTTP/2 answers (the metrics port, any HTTP/1 server) gave only grpc's ``Failed
parsing HTTP/2 (... got frame type 79)``, and an IPv6 address without brackets only
``has no port``. Real servers on loopback, through ``main``."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from service.cli import _server_target, main
from tests.service.server_process import free_port, running

SIMULATE = ["simulate", "krypkasino", "--players", "2", "--server"]
NOT_GRPC = (
    "(a server that is no gRPC server answered: --server takes the gRPC port, "
    "not the metrics port or another server's)"
)


class _Quiet(http.server.BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass  # the command's stderr is what the test reads


@pytest.fixture
def http1_server() -> Iterator[int]:
    """Python's own HTTP/1 server on a free loopback port: its port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def _refusal(target: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = main([*SIMULATE, target])
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    return status, err


def test_an_http1_server_that_answers_without_a_status_line_is_said_to_be_no_grpc_server(
    http1_server: int, capsys: pytest.CaptureFixture[str]
) -> None:
    status, err = _refusal(f"127.0.0.1:{http1_server}", capsys)
    assert status == 1
    assert "Failed parsing HTTP/2" in err
    assert f"{NOT_GRPC}; the game of seed 0 was not started\n" in err


def test_the_metrics_port_given_for_the_grpc_one_is_said_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    metrics_port = free_port()
    with running(args=("--metrics-port", str(metrics_port))) as server:
        assert server.metrics_port == metrics_port
        status, err = _refusal(f"127.0.0.1:{metrics_port}", capsys)
    assert status == 1
    assert f"{NOT_GRPC}; the game of seed 0 was not started\n" in err


@pytest.mark.parametrize(
    ("target", "meant"),
    [
        ("::1:52401", "[::1]:52401"),
        ("2001:db8::7:50051", "[2001:db8::7]:50051"),
        ("::1", "[::1]:PORT, e.g. [::1]:50051"),
        # grpc's ipv6: scheme takes brackets and a port too (ipv6:::1:52401 is "invalid
        # ipv6 address" to it, ipv6:::1 "no port given"), and so does dns:.
        ("ipv6:::1:52401", "ipv6:[::1]:52401"),
        ("IPv6:::1", "IPv6:[::1]:PORT, e.g. IPv6:[::1]:50051"),
        ("ipv6:///2001:db8::7:50051", "ipv6:///[2001:db8::7]:50051"),
        ("ipv6:[::1]:52401,::2:52402", "ipv6:[::1]:52401,[::2]:52402"),
        ("dns:///::1:52401", "dns:///[::1]:52401"),
        # A last group of hex letters is part of the address, not a port.
        ("fe80::1:beef", "[fe80::1:beef]:PORT, e.g. [fe80::1:beef]:50051"),
    ],
)
def test_an_ipv6_address_without_brackets_is_told_to_take_them(
    capsys: pytest.CaptureFixture[str], target: str, meant: str
) -> None:
    status, err = _refusal(target, capsys)
    assert status == 2
    assert err == (
        f"cardrules: error: --server: {target!r} has no port: an IPv6 address takes "
        f"brackets before its port: give {meant} (see cardrules simulate --help)\n"
    )


#: 43 letters of base64, as a state key reads: a socket may be named so.
KEY_LIKE = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ"


@pytest.mark.parametrize(
    "target",
    [
        f"unix:/tmp/{KEY_LIKE}",
        f"unix-abstract:{KEY_LIKE}",
        # Schemes are read in any case, as grpc reads them.
        f"UNIX-ABSTRACT:{KEY_LIKE}",
        "DNS:///localhost:50051",
        "Unix:///tmp/cardrules.sock",
    ],
)
def test_a_socket_named_like_a_key_and_a_scheme_in_capitals_are_taken(target: str) -> None:
    assert _server_target(target) == target


@pytest.mark.parametrize("form", ["[::1]:{}", "ipv6:[::1]:{}", "dns:///[::1]:{}"])
def test_a_bracketed_ipv6_address_is_dialled(capsys: pytest.CaptureFixture[str], form: str) -> None:
    """The hint's forms are ones ``--server`` takes: they dial, rather than being refused."""
    status, err = _refusal(form.format(free_port()), capsys)
    assert status == 1
    assert "UNAVAILABLE" in err and "has no port" not in err
