"""grpc.aio's output when a call is cancelled before its handler task first runs (design
section 6: the log is JSON lines, and a client's doing is never an error line).

grpc.aio cancels a call's task when core reports the call cancelled: the client gave
up, or the server's stop cancelled it. If that lands before the task's first step, the
``CancelledError`` escapes grpc's own handling (``_schedule_rpc_coro``): grpc logs
``Exception not handled by _handle_exceptions in servicer method [...]`` with the
traceback, prints the traceback again on stderr, and the handler coroutine it never
started warns ``coroutine '_handle_rpc' was never awaited``. Any client can cause it by
cancelling at the wrong moment, so it must not raise error alerts nor break the JSON
log: ``service.logs`` turns the record into a debug line, and ``quiet_early_cancels``
removes the two raw copies on stderr.
"""

from __future__ import annotations

import asyncio
import sys
import traceback
import warnings
from types import ModuleType
from typing import Any

from grpc._cython import cygrpc


class _TracebackWithoutCancels(ModuleType):
    """The ``traceback`` module as grpc's extension sees it, but ``print_exc`` prints
    nothing while a ``CancelledError`` is being handled (the log record has it)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(traceback, name)

    def print_exc(self, *args: Any, **kwargs: Any) -> None:
        if not isinstance(sys.exception(), asyncio.CancelledError):
            traceback.print_exc(*args, **kwargs)


def quiet_early_cancels() -> None:
    """Keep grpc.aio's raw copies of an early cancel off stderr (the module docstring).

    grpc's extension looks its ``traceback`` global up at each use, so replacing it
    changes only what grpc prints; a test reproduces the cancel against the real server.
    """
    cygrpc.traceback = _TracebackWithoutCancels("traceback")
    warnings.filterwarnings(
        "ignore", message="coroutine '_handle_rpc' was never awaited", category=RuntimeWarning
    )
