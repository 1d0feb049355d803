"""An ``AsyncKrypkasinoClient`` called from an event loop other than the one it was made in
refuses the call with the same advice as one made outside any loop, before grpc makes the
call's task on the wrong loop (clients/python/src/cardrules/client/aio.py;
clients/python/README.md, "Asyncio"). Each case runs in a process of its own, whose stderr shows what asyncio
reports of a task left pending."""

from __future__ import annotations

import subprocess
import sys

import pytest

# What both scripts call a client with, and how each prints a call's outcome: "OK", or the
# type and words of what the call raised.
CALL_AND_SHOW = """
async def call(client: AsyncKrypkasinoClient) -> None:
    await client.new_game(players=2)


def show(run) -> None:
    try:
        run()
        print("OK")
    except Exception as error:
        print(f"{type(error).__name__}: {error}")
"""

# Each case prints one line per call.
SCRIPT = (
    """
import asyncio
import sys

from cardrules.client import AsyncKrypkasinoClient

case, target = sys.argv[1:]
"""
    + CALL_AND_SHOW
    + """

async def made(call: bool) -> AsyncKrypkasinoClient:
    client = AsyncKrypkasinoClient(target, timeout=10)
    if call:
        await client.new_game(players=2)
    return client


if case in ("made in an earlier asyncio.run", "called in an earlier asyncio.run"):
    client = asyncio.run(made(case.startswith("called")))
    show(lambda: asyncio.run(call(client)))
elif case == "made outside any coroutine":
    client = AsyncKrypkasinoClient(target, timeout=10)  # grpc binds it to a loop of its own
    show(lambda: asyncio.run(call(client)))
elif case == "made in a loop still open":
    first = asyncio.new_event_loop()
    client = first.run_until_complete(made(True))
    show(lambda: asyncio.run(call(client)))
    show(lambda: first.run_until_complete(call(client)))  # its own loop still serves it
    first.close()
"""
)

# The words of the error a client made outside any loop raises (test_client.py).
ADVICE = "create the AsyncKrypkasinoClient inside the event loop that will use it"
REFUSED = f"RuntimeError: this AsyncKrypkasinoClient was made in another event loop: {ADVICE}"
# A client given a channel: where the client is made does not matter, the channel's loop does.
GIVEN_ADVICE = (
    "make the channel in the event loop that calls it, in a coroutine (such as the one "
    "asyncio.run runs), and give it to a client there: a grpc.aio channel belongs to the "
    "loop it is made in"
)
GIVEN_REFUSED = (
    "RuntimeError: the channel given to this AsyncKrypkasinoClient belongs to another event "
    f"loop: {GIVEN_ADVICE}"
)


def run_python(
    script: str, *argv: str, warnings_are_errors: bool = True, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """``script`` run by a Python process of its own with ``argv``, by default under
    ``-W error``."""
    flags = ("-W", "error") if warnings_are_errors else ()
    return subprocess.run(
        [sys.executable, *flags, "-c", script, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=check,
    )


def run_case(case: str, target: str) -> subprocess.CompletedProcess[str]:
    return run_python(SCRIPT, case, target, warnings_are_errors=False)


@pytest.mark.parametrize(
    "case",
    [
        "made in an earlier asyncio.run",
        "called in an earlier asyncio.run",
        "made outside any coroutine",
        "made in a loop still open",
    ],
)
def test_a_call_from_another_event_loop_is_refused_with_where_to_make_the_client(
    grpc_target: str, case: str
) -> None:
    """Not grpc's "Event loop is closed" or "Task ... got Future ... attached to a
    different loop", with a call's coroutine never awaited or its task left pending."""
    ran = run_case(case, grpc_target)
    lines = ran.stdout.splitlines()
    assert lines[0].startswith(REFUSED), ran.stdout
    assert lines[1:] == (["OK"] if case == "made in a loop still open" else []), ran.stdout
    assert "Task was destroyed" not in ran.stderr
    assert "never awaited" not in ran.stderr
    assert "Traceback" not in ran.stderr, ran.stderr


def test_a_client_made_outside_a_coroutine_serves_the_loop_it_was_made_for(
    grpc_target: str,
) -> None:
    """The check compares with the loop grpc bound the channel to, which, outside a
    coroutine, is the thread's current loop: the pre-asyncio.run way of running one."""
    script = f"""
import asyncio
from cardrules.client import AsyncKrypkasinoClient

loop = asyncio.new_event_loop()
asyncio.set_event_loop(loop)
client = AsyncKrypkasinoClient({grpc_target!r}, timeout=10)
game = loop.run_until_complete(client.new_game(players=2, seed=3))
loop.run_until_complete(client.close())
print(game.view.move_number, len(game.seat_tokens))
"""
    ran = run_python(script)
    assert ran.stdout.split() == ["0", "2"]


# A channel made in one loop, given to clients made in others and outside any loop.
GIVEN_CHANNEL = (
    """
import asyncio
import sys

import grpc

from cardrules.client import AsyncKrypkasinoClient, channel_options

target = sys.argv[1]
"""
    + CALL_AND_SHOW
    + """

async def open_channel() -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(target, channel_options())


async def given(channel: grpc.aio.Channel) -> AsyncKrypkasinoClient:
    return AsyncKrypkasinoClient(channel=channel, timeout=10)


first = asyncio.new_event_loop()
channel = first.run_until_complete(open_channel())
client = asyncio.run(given(channel))  # made in a loop that is not the channel's
show(lambda: first.run_until_complete(call(client)))
show(lambda: asyncio.run(call(client)))
show(lambda: first.run_until_complete(call(AsyncKrypkasinoClient(channel=channel))))


async def made_here() -> None:
    await call(await given(channel))  # made in the loop that calls it: the channel is not


show(lambda: asyncio.run(made_here()))
first.run_until_complete(channel.close())
first.close()
show(lambda: AsyncKrypkasinoClient(channel=channel))
"""
)


def test_a_client_given_a_channel_belongs_to_the_channels_event_loop(grpc_target: str) -> None:
    """Wherever the client is made: in another loop, or outside any loop after an earlier
    asyncio.run (where asyncio has no current loop). It was bound to the loop it was made
    in, so the channel's own loop was refused and another loop met grpc's "attached to a
    different loop"; made outside a loop it was refused at once. A call from another loop,
    even the one the client was made in, and a channel whose loop is closed are refused
    with advice about the channel: making the client elsewhere cannot help."""
    ran = run_python(GIVEN_CHANNEL, grpc_target)
    lines = ran.stdout.splitlines()
    assert len(lines) == 5, ran.stdout
    assert lines[0] == "OK", ran.stdout
    assert lines[1] == GIVEN_REFUSED, ran.stdout
    assert lines[2] == "OK", ran.stdout
    assert lines[3] == GIVEN_REFUSED, ran.stdout
    assert lines[4] == (
        "RuntimeError: the event loop of the channel given to this AsyncKrypkasinoClient is "
        f"closed: {GIVEN_ADVICE}"
    ), ran.stdout
    assert "Traceback" not in ran.stderr, ran.stderr


def test_a_client_made_outside_a_coroutine_takes_the_thread_loop_of_its_channel(
    grpc_target: str,
) -> None:
    """The client's loop is the very loop grpc bound its channel to, which becomes the
    thread's current loop where the thread had none: on Python 3.12 and later grpc makes a
    loop it does not set, and the client took asyncio.get_event_loop()'s, another one."""
    script = f"""
import asyncio
from cardrules.client import AsyncKrypkasinoClient

client = AsyncKrypkasinoClient({grpc_target!r}, timeout=10)
loop = asyncio.get_event_loop()
print(client._loop is client.channel._loop, loop is client.channel._loop)
game = loop.run_until_complete(client.new_game(players=2, seed=3))
loop.run_until_complete(client.close())
print(game.view.move_number)
"""
    ran = run_python(script)
    assert ran.stdout.split() == ["True", "True", "0"], ran.stdout + ran.stderr


# Python 3.12 and 3.13 in Python 3.11: asyncio.get_event_loop() in the main thread with no
# current loop warns (DeprecationWarning) before it makes and sets one. grpc.aio asks with
# the warning as an error and, refused, makes a loop it does not set; so does the client.
PYTHON_3_12_LOOPS = """
import asyncio
import sys
import threading
import warnings

from cardrules.client import AsyncKrypkasinoClient


class Python312Policy(asyncio.DefaultEventLoopPolicy):
    def get_event_loop(self) -> asyncio.AbstractEventLoop:
        local = self._local
        if (
            local._loop is None
            and not local._set_called
            and threading.current_thread() is threading.main_thread()
        ):
            warnings.warn("There is no current event loop", DeprecationWarning, stacklevel=2)
        return super().get_event_loop()


if sys.version_info < (3, 12):
    asyncio.set_event_loop_policy(Python312Policy())
client = AsyncKrypkasinoClient(sys.argv[1], timeout=10)
loop = asyncio.get_event_loop()
game = loop.run_until_complete(client.new_game(players=2, seed=3))
loop.run_until_complete(client.close())
print(game.view.move_number, len(game.seat_tokens), loop is client.channel._loop)
"""


def test_a_client_made_outside_a_coroutine_makes_its_loop_current_as_python_3_12_needs(
    grpc_target: str,
) -> None:
    """On Python 3.12 and later grpc.aio binds a channel made outside a coroutine, in a
    thread with no current loop, to a new loop it does not set: the client makes that loop
    the thread's current one, so asyncio.get_event_loop() returns it, without a warning,
    and run_until_complete(client.new_game(...)) runs in it. The test runs 3.12's asyncio
    on 3.11 too (CI's Python), where without that the script's get_event_loop() warned,
    an error under -W error."""
    ran = run_python(PYTHON_3_12_LOOPS, grpc_target, check=False)
    assert (ran.returncode, ran.stdout.split()) == (0, ["0", "2", "True"]), ran.stderr
