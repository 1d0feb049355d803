"""Request ids (design section 6): cheap per call, yet unique across calls,
threads, forked workers and processes; the caller's id when usable."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import google.rpc.code_pb2 as code_pb2
import google.rpc.error_details_pb2 as error_details_pb2
import pytest

from service.calls import (
    CallInfo,
    CallRunner,
    new_request_id,
    request_id_from,
    within_deadline,
)
from service.logs import configure_logging

ROOT = Path(__file__).resolve().parents[2]
ID_FORM = re.compile(r"[0-9a-f]{32}")


def test_new_ids_have_the_uuid_hex_form_and_never_repeat():
    ids = [new_request_id() for _ in range(20_000)]
    assert all(ID_FORM.fullmatch(request_id) for request_id in ids)
    assert len(set(ids)) == len(ids)


def test_ids_made_by_concurrent_threads_never_repeat():
    made: list[list[str]] = [[] for _ in range(4)]

    def make(into: list[str]) -> None:
        into.extend(request_id_from(None) for _ in range(5_000))

    threads = [threading.Thread(target=make, args=(into,)) for into in made]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [request_id for into in made for request_id in into]
    assert len(set(every)) == len(every) == 20_000


def test_a_forked_worker_draws_its_own_prefix():
    """Workers fork from one supervisor (design section 6): their ids must differ."""
    before = new_request_id()
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report one id and leave without running pytest's teardown
        try:
            os.write(writer, new_request_id().encode())
        finally:
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        child = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    after = new_request_id()
    assert ID_FORM.fullmatch(child)
    assert child[:16] != before[:16]
    assert after[:16] == before[:16]  # the parent keeps its prefix and counter
    assert child not in (before, after)


def test_two_processes_have_different_prefixes():
    script = "from service.calls import new_request_id; print(new_request_id())"
    prefixes = {
        subprocess.run(
            [sys.executable, "-c", script],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.strip()[:16]
        for _ in range(2)
    }
    assert len(prefixes) == 2


@pytest.mark.parametrize("supplied", ["abc-123", "x" * 128, "7", "x~", "with spaces:{}~!"])
def test_a_usable_caller_id_is_kept(supplied):
    assert request_id_from(supplied) == supplied


@pytest.mark.parametrize(
    "supplied",
    [None, "", "x" * 129, "line\nbreak", "tab\there", "é", "ünïcode", " padded", "padded "],
)
def test_an_unusable_caller_id_is_replaced(supplied):
    """gRPC metadata and HTTP headers carry printable ASCII, the ends not blank."""
    assert ID_FORM.fullmatch(request_id_from(supplied))


def test_the_outcome_carries_the_response_or_the_error():
    runner = CallRunner(None)
    outcome = runner.run("s.S", "M", "grpc", "rid", lambda request, info: request * 2, 21)
    assert (outcome.response, outcome.error) == (42, None)

    def broken(request: int, info: CallInfo) -> int:
        raise RuntimeError("a bug")

    failed = runner.run("s.S", "M", "grpc", "rid-2", broken, 0)
    assert failed.response is None and failed.error is not None
    assert failed.error.code.name == "INTERNAL"


def test_a_bug_is_refused_as_docs_api_md_says_without_its_details():
    """docs/api.md, "Errors": ``INTERNAL`` with the reason ``INTERNAL``, the details in
    the server log only: neither the exception's type nor its text reach the caller."""
    secret = "a bug holding 8D>AH+7C+8S"

    def broken(request: int, info: CallInfo) -> int:
        raise KeyError(secret)

    failed = CallRunner(None).run("s.S", "M", "http", "rid-3", broken, 0)
    assert failed.error is not None
    status = failed.error.to_status()
    assert (status.code, status.message) == (code_pb2.INTERNAL, "internal error")
    [packed] = status.details
    info = error_details_pb2.ErrorInfo()
    assert packed.Unpack(info)
    assert (info.reason, info.domain, dict(info.metadata)) == ("INTERNAL", "cardrules", {})
    wire = status.SerializeToString()
    assert secret.encode() not in wire and b"KeyError" not in wire


def test_a_state_its_caller_never_got_is_not_on_the_request_line(capsys):
    """docs/operations.md, "Log lines": ``state_id`` is absent on a refused call. A call
    whose deadline passed while its handler sealed the next state is refused
    DEADLINE_EXCEEDED: that state reached no one, so its line must not read as a move
    delivered (the same state id twice reads as one move sent twice)."""
    configure_logging("json")
    remaining = iter([1.0, 0.0])  # time left before the handler runs, then after it

    def sealing(request: int, info: CallInfo) -> int:
        info.state_id = "f25bec360fa1c769"
        return request

    handler = within_deadline(sealing, lambda: next(remaining))
    outcome = CallRunner(None).run("s.S", "Play", "http", "rid-late", handler, 1)
    assert outcome.error is not None and outcome.error.reason == "DEADLINE_EXCEEDED"
    [line] = [json.loads(text) for text in capsys.readouterr().out.splitlines()]
    assert (line["event"], line["code"]) == ("request", "DeadlineExceeded")
    assert "state_id" not in line
