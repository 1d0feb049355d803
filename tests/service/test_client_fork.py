"""A process forked while an ``AsyncKrypkasinoClient`` existed in its parent refuses to make
or call one, with what to do, rather than hang past the call's deadline or abort (grpc.aio
keeps a polling thread while an aio channel lives and then skips its fork handlers); once
the parent's clients are closed and dropped, a forked child makes and calls its own
(clients/python/src/cardrules/client/aio.py; clients/python/README.md, "One client for the
whole process").
Each case forks in a Python process of its own, away from this one's grpc state; the child
has an alarm as a safety net, and every wait a timeout."""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
import asyncio
import gc
import os
import signal
import sys
import weakref

from cardrules.client import AsyncKrypkasinoClient

case, target = sys.argv[1:]
signal.alarm(20)  # the parent's safety net, should the child never end


async def made_and_called(client=None, close=True):
    client = client or AsyncKrypkasinoClient(target, timeout=2)
    game = await client.new_game(players=2)
    if close:
        await client.close()
    return game.view.move_number


async def made_and_closed():
    client = AsyncKrypkasinoClient(target, timeout=2)
    await client.close()
    return client


def show(what, run):
    try:
        print(what, "OK", run(), flush=True)
    except Exception as error:
        print(what, f"{type(error).__name__}: {error}", flush=True)


if case == "module-level client never called":
    kept = AsyncKrypkasinoClient(target, timeout=2)
elif case == "client closed in an earlier asyncio.run and kept":
    kept = asyncio.run(made_and_closed())
elif case == "client closed in an earlier asyncio.run and dropped":
    dropped = weakref.ref(asyncio.run(made_and_closed()))
    gc.collect()  # the client and its channel gone, with grpc's polling thread
    print("freed", dropped() is None, flush=True)
    kept = None
pid = os.fork()
if pid == 0:
    signal.alarm(8)  # a hang ends the child with SIGALRM, which the parent reports
    show("new", lambda: asyncio.run(made_and_called()))
    if kept is not None:
        show("inherited", lambda: asyncio.run(made_and_called(kept, close=False)))
    os._exit(0)  # not through grpc's exit handlers, after a fork they may not survive
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status), "parent", os.getpid(), flush=True)
"""

ADVICE = (
    "while an AsyncKrypkasinoClient existed there, and grpc.aio cannot run after such a "
    "fork (its calls hang past their deadline or abort the process): start worker "
    "processes with the forkserver or spawn start method, or make every "
    "AsyncKrypkasinoClient only after the fork, or close and drop every "
    "AsyncKrypkasinoClient before forking"
)


def run_case(case: str, target: str) -> list[str]:
    ran = subprocess.run(
        [sys.executable, "-c", SCRIPT, case, target],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "Traceback" not in ran.stderr, ran.stderr
    return ran.stdout.splitlines()


@pytest.mark.parametrize(
    "case",
    ["module-level client never called", "client closed in an earlier asyncio.run and kept"],
)
def test_a_child_forked_while_an_asyncio_client_existed_refuses_to_make_or_call_one(
    case: str,
) -> None:
    """Before the guard, the child's new client hung past its 2 s deadline (its alarm
    killed it) or the child died of SIGABRT or SIGSEGV. The parent's target does not
    matter: its clients need never have called."""
    lines = run_case(case, "127.0.0.1:1")
    *child, end = lines
    words, exit_code, _, parent = end.split()
    assert (words, exit_code) == ("child", "0"), lines
    refused = f"RuntimeError: this process was forked from process {parent} {ADVICE}"
    assert child == [f"new {refused}", f"inherited {refused}"], lines


def test_a_child_forked_after_every_asyncio_client_was_dropped_makes_and_calls_its_own(
    grpc_target: str,
) -> None:
    """The parent's client was closed and let go: the client's set of live clients, which
    holds them weakly, kept none of it alive, and the child's own client calls the real
    server. (The parent makes no call: children forked just after a client that had made
    calls was closed hung now and then, whatever the guard, README.)"""
    lines = run_case("client closed in an earlier asyncio.run and dropped", grpc_target)
    assert lines[:2] == ["freed True", "new OK 0"], lines
    assert lines[2].startswith("child 0 parent "), lines
    assert len(lines) == 3, lines
