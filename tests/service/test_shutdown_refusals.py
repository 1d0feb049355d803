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
