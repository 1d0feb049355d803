"""A call cancelled before grpc.aio first runs its handler task leaves no error line and
nothing on stderr (docs/operations.md, "Log lines").

grpc.aio cancels a call's task when core reports the call cancelled (the client gave up,
or the server's stop cancelled it). If that lands before the task's first step, the
``CancelledError`` escapes grpc's own handling: it logged ``Exception not handled by
_handle_exceptions in servicer method`` at error level, printed the traceback again on
stderr, and the never-started handler coroutine left a ``RuntimeWarning`` there too.
Rare (it failed a SIGTERM-under-load test about once in fifty runs), and the client's
doing or the stop's, never a bug.
"""

from __future__ import annotations

import asyncio
import time
import traceback
import warnings
from pathlib import Path

import grpc
import pytest
from grpc._cython import cygrpc
from grpc_health.v1 import health_pb2

from service.early_cancels import quiet_early_cancels
from tests.service.grpc_helpers import health
from tests.service.server_process import failure_lines, loaded_at_start, running

# Test-only fault, loaded by the server's interpreter at start (``sitecustomize`` on
# PYTHONPATH): the task grpc.aio makes for each Health/Check call does not start for
# seconds, so the client's cancel reaches the task before its first step, as it does
# by chance under load. ``close`` ends the coroutine as a cancel before its first step
# does, without running it. Each delayed task adds a line to the file named by
# ``DELAYED_TASKS``, so the test cancels once the server holds the call.
DELAYED_FIRST_STEP = """
import asyncio
import asyncio.base_events
import os

_create_task = asyncio.base_events.BaseEventLoop.create_task


async def _started_late(coro):
    try:
        await asyncio.sleep(5)
    except asyncio.CancelledError:
        coro.close()
        raise
    return await coro


def create_task(self, coro, *, name=None, context=None):
    if name == "HandleExceptions[/grpc.health.v1.Health/Check]":
        coro = _started_late(coro)
        with open(os.environ["DELAYED_TASKS"], "a") as delayed:
            delayed.write("delayed\\n")
    return _create_task(self, coro, name=name, context=context)


asyncio.base_events.BaseEventLoop.create_task = create_task
"""

GRPC_RECORD = (
    "Exception not handled by _handle_exceptions in servicer method [/grpc.health.v1.Health/Check]"
)


def test_a_call_cancelled_before_its_handler_started_is_a_debug_line_only(tmp_path: Path):
    path = loaded_at_start(tmp_path, DELAYED_FIRST_STEP)
    delayed = tmp_path / "delayed"
    delayed.touch()
    env = {"PYTHONPATH": path, "DELAYED_TASKS": str(delayed)}
    with running(("--log-level", "debug"), env=env, failures_expected=True) as server:
        with grpc.insecure_channel(server.target) as channel:
            check = health(channel).Check
            for calls in (1, 2):
                call = check.future(health_pb2.HealthCheckRequest(service=""), timeout=30)
                _wait_for_lines(delayed, calls)
                assert call.cancel()  # the server has the call, its task not yet started
        records = server.wait_for_logs(GRPC_RECORD, count=2)
    # The record stays, at debug level (with its traceback), for whoever chases it.
    assert [(line["level"], line["logger"]) for line in records] == [
        ("debug", "grpc._cython.cygrpc")
    ] * 2
    assert [line["exception"][0]["exc_type"] for line in records] == ["CancelledError"] * 2  # type: ignore[index]
    assert failure_lines(server) == []  # no error line, no raw stderr line (a traceback)


def test_only_an_early_cancels_traceback_is_kept_off_stderr(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    """grpc prints on stderr the traceback of whatever escapes a handler; the server
    keeps off stderr only the copy of an early cancel (docs/operations.md, "the server
    keeps both off stderr"), so a real bug's traceback is still printed there."""
    monkeypatch.setattr(cygrpc, "traceback", cygrpc.traceback)  # restored after the test
    with warnings.catch_warnings():  # and the warning filter it adds
        quiet_early_cancels()  # as the server does at start
    try:
        raise ValueError("a real bug")
    except ValueError:
        cygrpc.traceback.print_exc()
    assert capsys.readouterr().err.splitlines()[-1] == "ValueError: a real bug"
    try:
        raise asyncio.CancelledError
    except asyncio.CancelledError:
        cygrpc.traceback.print_exc()
    assert capsys.readouterr().err == ""


def test_the_replaced_traceback_module_passes_everything_else_through(
    monkeypatch: pytest.MonkeyPatch,
):
    """grpc's extension names format_exception beside print_exc: each works as the
    standard module's, so only an early cancel's printed copy changes."""
    monkeypatch.setattr(cygrpc, "traceback", cygrpc.traceback)  # restored after the test
    with warnings.catch_warnings():
        quiet_early_cancels()
    try:
        raise ValueError("a real bug")
    except ValueError as error:
        assert cygrpc.traceback.format_exc() == traceback.format_exc()
        assert cygrpc.traceback.format_exception(error) == traceback.format_exception(error)


def _wait_for_lines(path: Path, count: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while len(path.read_text().splitlines()) < count:
        assert time.monotonic() < deadline, "the server never delayed the call's task"
        time.sleep(0.01)
