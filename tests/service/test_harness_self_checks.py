"""The shared test helpers' own tests: each guard must see what it is there to see, so
that a helper broken to see nothing fails here rather than letting every test pass (a
mutation review of the harness found ten such breaks unnoticed)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import google.rpc.error_details_pb2 as error_details_pb2
import google.rpc.status_pb2 as status_pb2
import pytest
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from tests.process_groups import group_alive
from tests.service.grpc_helpers import names_its_field, refused, status_refusal
from tests.service.server_process import (
    ServerProcess,
    cannot_listen_line,
    events,
    failure_lines,
    loaded_at_start,
    running,
)


def test_failure_lines_sees_every_kind_of_failure() -> None:
    bad: list[dict[str, object]] = [
        {"event": "raw", "text": "Traceback (most recent call last):"},
        {"event": "x", "level": "error"},
        {"event": "x", "level": "critical"},
        {"event": "unhandled error"},
        {"event": "worker crashed"},
        {"event": "server crashed"},
        {"event": "request", "code": "Internal"},
    ]
    good: list[dict[str, object]] = [
        {"event": "request", "code": "OK", "level": "info"},
        {"event": "listening"},
    ]
    server = ServerProcess(process=None, grpc_port=0, logs=[*good, *bad])  # type: ignore[arg-type]
    assert failure_lines(server) == bad


def test_running_fails_a_test_whose_server_wrote_a_raw_line(tmp_path: Path) -> None:
    path = loaded_at_start(tmp_path, "import sys\nprint('not a JSON line', file=sys.stderr)\n")
    with pytest.raises(AssertionError), running(env={"PYTHONPATH": path}) as server:
        pass
    assert {"event": "raw", "text": "not a JSON line"} in server.logs


def test_events_fails_on_a_line_that_is_not_json() -> None:
    assert events('{"event": "a"}\n') == [{"event": "a"}]
    with pytest.raises(ValueError):
        events('{"event": "a"}\nTraceback (most recent call last):\n')


def test_cannot_listen_line_checks_the_setting_it_names() -> None:
    line = {"event": "cannot listen", "listener": "grpc", "setting": "--host"}
    done = subprocess.CompletedProcess([], 1, json.dumps(line) + "\n", "")
    assert cannot_listen_line(done, "--host") == line
    with pytest.raises(AssertionError):
        cannot_listen_line(done)  # the port's setting was expected


def test_names_its_field_sees_a_description_that_starts_with_its_field() -> None:
    assert names_its_field("seat", "seat must be 0 to 3")
    assert names_its_field("seat", "seat: out of range")
    assert names_its_field("seat", "seat is out of range")
    assert not names_its_field("state", "state token is too short")
    assert not names_its_field("", "anything")


def test_status_refusal_rejects_a_violation_that_names_its_field() -> None:
    info = error_details_pb2.ErrorInfo(domain="cardrules", reason="FIELD_INVALID")
    bad = error_details_pb2.BadRequest(
        field_violations=[
            error_details_pb2.BadRequest.FieldViolation(
                field="seat", description="seat must be 0 to 3", reason="FIELD_INVALID"
            )
        ]
    )
    status = status_pb2.Status(code=3, message="bad")
    status.details.add().Pack(info)
    status.details.add().Pack(bad)
    with pytest.raises(AssertionError):
        status_refusal(status)


def test_group_alive_sees_a_live_group_and_not_a_gone_one() -> None:
    assert group_alive(os.getpgrp())
    child = subprocess.Popen(["true"], start_new_session=True)
    child.wait()
    assert not group_alive(child.pid)


def test_refused_fails_when_the_call_is_accepted() -> None:
    def accepts(request: object, **_: object) -> object:
        return request

    with pytest.raises(AssertionError, match="was accepted"):
        refused(accepts, pb.GetViewRequest())  # type: ignore[arg-type]
