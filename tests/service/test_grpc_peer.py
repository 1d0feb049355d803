"""The request line's ``peer`` spells an IPv6 client alike for gRPC and HTTP,
``ipv6:[::1]:40312`` (docs/operations.md, "Log lines"). A real server on
``::1``, as ``test_process_lifecycle`` runs one.
"""

from __future__ import annotations

import urllib.error
import urllib.request

import grpc
import pytest
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from tests.service.grpc_helpers import TIMEOUT, connect
from tests.service.server_process import running


def test_an_ipv6_grpc_peer_is_logged_as_http_logs_it() -> None:
    """grpc's ``context.peer()`` percent-encodes the brackets (``ipv6:%5B::1%5D:43996``),
    which the request line carried as such: a search for ``ipv6:[::1]`` missed gRPC's."""
    args = ("--host", "::1", "--grpc-port", "0", "--http-port", "0", "--metrics-port", "0")
    with running(args, loopback_flags=False) as server:
        # STATE_MISSING, but logged
        with connect(f"[::1]:{server.grpc_port}") as stub, pytest.raises(grpc.RpcError):
            stub.Score(pb.ScoreRequest(), timeout=TIMEOUT)
        score = urllib.request.Request(
            f"http://[::1]:{server.http_port}/v1/krypkasino:score",
            data=b"{}",
            headers={"Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(score, timeout=TIMEOUT)
        lines = server.wait_for_logs("request", 2)
    assert [line["transport"] for line in lines] == ["grpc", "http"]
    assert [str(line["peer"])[: len("ipv6:[::1]:")] for line in lines] == ["ipv6:[::1]:"] * 2
