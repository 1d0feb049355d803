"""What a stopping ``cardrules serve`` answers, and says in its log, about the calls it
cuts (docs/operations.md, "Termination"; docs/api.md, "Errors").

A body still arriving when the grace period ends is refused so that its client resends
it to another replica. (A body too slow without a stop stays 400 ``BODY_TIMEOUT``:
test_http_gateway's ``test_a_body_that_does_not_arrive_in_time_is_refused...``.)
"""

from __future__ import annotations

import http.client
import json
import signal
import socket
import threading
import time
from collections.abc import Iterator

import grpc
import pytest
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from tests.service.grpc_helpers import Stub, connect
from tests.service.server_process import running
from tests.service.test_http_server import wait_until_read

# 39 bytes announced, 5 sent: the body is still arriving when the stop comes.
PARTIAL_NEW_GAME = (
    b"POST /v1/krypkasino:newGame HTTP/1.1\r\nHost: test\r\n"
    b"Content-Type: application/json\r\nContent-Length: 39\r\n\r\n"
    b'{"con'
)
UNAVAILABLE = 14  # google.rpc.Code


def test_a_body_the_stop_cut_is_a_503_server_stopping_that_clients_retry():
    """It was a 400 ``BODY_TIMEOUT``, which no retry helper retries (docs/api.md's
    urllib3 ``Retry(status_forcelist=[502, 503, 504])`` among them), and was logged and
    counted as the client's mistake; over gRPC the same cut ends ``UNAVAILABLE``."""
    args = ("--drain-delay-seconds", "0", "--grace-seconds", "1")
    with (
        running(args) as server,
        socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as connection,
    ):
        connection.sendall(PARTIAL_NEW_GAME)
        wait_until_read(connection)
        server.process.send_signal(signal.SIGTERM)
        answer = http.client.HTTPResponse(connection)
        answer.begin()
        status = json.loads(answer.read())
    assert (answer.status, answer.getheader("Retry-After")) == (503, "1")
    assert answer.getheader("Connection") == "close"
    assert status["code"] == UNAVAILABLE
    assert status["message"] == (
        "the server is stopping, and the body did not arrive in time: send the request again"
    )
    assert [(detail["reason"], detail["domain"]) for detail in status["details"]] == [
        ("SERVER_STOPPING", "cardrules")
    ]
    [line] = server.log_events("request")
    assert (line["code"], line["reason"]) == ("Unavailable", "SERVER_STOPPING")
    [warning] = server.log_events(GRACE_RAN_OUT)
    assert warning["transports"] == ["http"]
    assert [line["grace_expired"] for line in server.log_events("stopped")] == [True]


PLAY = "/cardrules.krypkasino.v1.KrypkasinoService/Play"
GRACE_RAN_OUT = "grace period ran out: calls still in flight were cut"


def test_a_grpc_call_that_outlasts_the_grace_period_is_said_to_have_been_cut():
    """A call to Play whose request never comes (a client stream that sends nothing) held
    the stop for the whole grace period, and the log said nothing of it: ``stopped`` came
    that much later, as after a clean stop."""
    args = ("--drain-delay-seconds", "0.5", "--grace-seconds", "1")
    sends = threading.Event()

    def nothing() -> Iterator[pb.PlayRequest]:
        sends.wait(30)
        yield from ()

    with running(args) as server, grpc.insecure_channel(server.target) as channel:
        # A call first, so that the connection is up when the stream starts.
        Stub(channel).NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2)), timeout=10)
        play = channel.stream_unary(
            PLAY,
            request_serializer=pb.PlayRequest.SerializeToString,
            response_deserializer=pb.PlayResponse.FromString,
        )
        call = play.future(nothing())
        server.process.send_signal(signal.SIGTERM)  # the stream starts within the delay
        assert server.process.wait(30) == 0
        assert call.exception(10) is not None  # cut by the stop
        sends.set()
    [warning] = server.log_events(GRACE_RAN_OUT)
    assert (warning["level"], warning["grace_seconds"], warning["transports"]) == (
        "warning",
        1.0,
        ["grpc"],
    )
    [stopped] = server.log_events("stopped")
    assert stopped["grace_expired"] is True


@pytest.mark.parametrize("grace", ["1", "0"])
def test_a_clean_stop_says_no_call_was_cut_and_the_whole_drain_delay_served(grace: str):
    """A grace of 0 cuts calls in flight by design (docs/operations.md, "Termination"):
    with none in flight its stop is clean too, not a grace period run out."""
    args = ("--drain-delay-seconds", "0.2", "--grace-seconds", grace)
    with running(args) as server, connect(server.target) as stub:
        stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2)), timeout=10)
    assert not server.log_events(GRACE_RAN_OUT)
    [stopped] = server.log_events("stopped")
    assert stopped["grace_expired"] is False
    [stopping] = server.log_events("stopping")
    assert stopping["drain_cut_by"] is None
    assert 0.2 <= float(str(stopping["drain_delay_served_seconds"])) < 3


def test_a_sigint_that_cuts_the_drain_delay_short_is_named_on_the_stopping_line():
    """``draining`` said ``drain_delay_seconds`` 3, and ``stopping`` came 0.4 s later
    with nothing to say why."""
    with running(("--drain-delay-seconds", "3", "--grace-seconds", "1")) as server:
        server.process.send_signal(signal.SIGTERM)
        server.wait_for_logs("draining")
        time.sleep(0.4)
        server.process.send_signal(signal.SIGINT)
        assert server.process.wait(30) == 0
    [draining] = server.log_events("draining")
    assert (draining["signal"], draining["drain_delay_seconds"]) == ("SIGTERM", 3.0)
    [stopping] = server.log_events("stopping")
    assert stopping["drain_cut_by"] == "SIGINT"
    assert 0.3 <= float(str(stopping["drain_delay_served_seconds"])) < 2.5
