"""The Python client as a user's type checker sees it: ``mypy --strict`` on user code.

The package is typed (``py.typed``) and its README promises that with the
``typing`` extra (the stubs of grpcio and protobuf, which the development
environment has too) a type checker knows the messages and catches mistakes.
This runs mypy, as a user would, on the README's examples and on a subclass
of each client, with a configuration of its own rather than the repository's.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
from pathlib import Path
from typing import Any

import pytest
from cardrules.client import AsyncKrypkasinoClient, KrypkasinoClient
from mypy import api

from tests.service.test_client import readme_blocks

# A backend's own client: helpers on top of the typed client, used through ``with``.
SUBCLASSES = """
import asyncio

from cardrules.client import DEFAULT, AsyncKrypkasinoClient, KrypkasinoClient, Metadata, Timeout


class GameClient(KrypkasinoClient):
    def first_game_id(self) -> str:
        return self.new_game(players=2).game_id

    def totals(
        self, state: bytes, timeout: Timeout = DEFAULT, metadata: Metadata | None = None
    ) -> list[int]:
        # A typed wrapper passes the deadline and metadata on as the client takes them.
        return list(self.score(state=state, timeout=timeout, metadata=metadata).totals)


class AsyncGameClient(AsyncKrypkasinoClient):
    async def first_game_id(self) -> str:
        return (await self.new_game(players=2)).game_id


def sync_use() -> str:
    with GameClient("localhost:50051") as client:
        return client.first_game_id()


async def async_use() -> str:
    async with AsyncGameClient("localhost:50051") as client:
        return await client.first_game_id()


print(sync_use(), asyncio.run(async_use()))
"""

# Tokens as a database driver gives them back, which the clients take as they come.
STORED_TOKENS = """
import asyncio

from cardrules.client import (
    AsyncKrypkasinoClient,
    KrypkasinoClient,
    TokenBytes,
    seat_token_to_keep,
    state_to_keep,
)


def from_database(state: memoryview, seat_token: bytearray) -> tuple[bytes, bytes]:
    with KrypkasinoClient("localhost:50051") as client:
        view = client.get_view(state=state, seat=0, seat_token=seat_token)
        client.legal_moves(state=state, seat=0, seat_token=seat_token)
        client.score(state=state)
        return state_to_keep(view, state), seat_token_to_keep(view, seat_token)


async def from_database_async(state: TokenBytes, seat_token: TokenBytes) -> bytes:
    async with AsyncKrypkasinoClient("localhost:50051") as client:
        view = await client.get_view(state=state, seat=0, seat_token=seat_token)
        await client.score(state=state)
        return state_to_keep(view, state)


print(from_database(memoryview(b""), bytearray()), asyncio.run(from_database_async(b"", b"")))
"""

# A mistake the types must catch: a misspelt keyword and a token as text.
MISTAKES = """
from cardrules.client import KrypkasinoClient

with KrypkasinoClient("localhost:50051") as client:
    client.new_game(player=2)
    client.score(state="not bytes")
"""


def strict_mypy(tmp_path: Path, sources: dict[str, str]) -> tuple[str, int]:
    """mypy's report and exit status for ``sources`` (module name: text) under ``--strict``."""
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nstrict = True\n")
    paths = []
    for name, text in sources.items():
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        paths.append(str(path))
    limit = sys.getrecursionlimit()
    try:
        report, errors, status = api.run(
            [
                *("--config-file", str(config)),
                *("--cache-dir", str(tmp_path / "cache")),
                "--no-error-summary",
                *paths,
            ]
        )
    finally:
        # mypy raises it to 16,384 for good: the tests after this one in the same
        # process would run with it (one that walks every depth to it took a minute).
        sys.setrecursionlimit(limit)
    assert not errors, errors
    return report, status


def test_the_readme_examples_and_subclasses_of_the_clients_type_check(tmp_path: Path) -> None:
    """Before ``__enter__`` and ``__aenter__`` returned ``Self``, ``with GameClient(...) as
    client`` gave a ``KrypkasinoClient``, and mypy refused ``client.first_game_id()``; before
    the token arguments were typed ``TokenBytes``, a ``memoryview`` token was refused.

    The mistakes are the control, in the same run (mypy takes seconds): the rest passes
    because its types are checked, not skipped."""
    sources = {f"readme_{i}": block for i, block in enumerate(readme_blocks())}
    sources["subclasses"] = SUBCLASSES
    sources["stored_tokens"] = STORED_TOKENS
    sources["mistakes"] = MISTAKES
    report, status = strict_mypy(tmp_path, sources)
    errors = [line for line in report.splitlines() if ": error: " in line]
    assert status == 1
    assert [Path(line.split(":")[0]).name for line in errors] == ["mistakes.py"] * 2, report
    misspelt, text_token = errors
    assert 'Unexpected keyword argument "player" for overloaded function "new_game"' in misspelt
    assert 'No overload variant of "score" of "KrypkasinoClient" matches argument type "str"' in (
        text_token
    )


@pytest.mark.parametrize("client_class", [KrypkasinoClient, AsyncKrypkasinoClient])
def test_every_public_attribute_of_a_client_class_is_annotated(client_class: type) -> None:
    """A class attribute without an annotation is one pyright (``--verifytypes``, and strict
    mode) infers for itself: it read ``KrypkasinoClient.timeout``, the default deadline, as
    ``DefaultTimeout | float | None`` while mypy read ``DefaultTimeout``."""
    annotated = inspect.get_annotations(client_class)
    unannotated = [
        name
        for name, value in vars(client_class).items()
        if not name.startswith("_") and not callable(value) and name not in annotated
    ]
    assert unannotated == []


# Calls of each form the clients take, and calls that always raise TypeError (each line
# ending in "# wrong"): a request message with field keywords, no target nor channel or
# both, and channel settings beside a given channel. A request or target may be None
# (as when omitted), and so may a field keyword or channel beside it. The lines ending in
# "# limit" run when the request (the target or the channel) is None and raise when it is
# not: typed X | None, it may be an X, so no overloads can take them without taking the
# wrong calls too (README, typing paragraph).
CALLS = """
import grpc

from cardrules.client import AsyncKrypkasinoClient, KrypkasinoClient, channel_options
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb


def sync_calls(
    channel: grpc.Channel,
    state: bytes,
    token: bytes,
    maybe: pb.ScoreRequest | None,
    target: str | None,
    maybe_channel: grpc.Channel | None,
) -> None:
    client = KrypkasinoClient("localhost:50051", timeout=2, load_balancing="round_robin")
    KrypkasinoClient(target="localhost:50051", options=channel_options(), credentials=None)
    KrypkasinoClient("localhost:50051", credentials=grpc.ssl_channel_credentials())
    KrypkasinoClient(channel=channel, timeout=None)
    KrypkasinoClient(channel=channel, options=None)
    KrypkasinoClient("localhost:50051", channel=None)
    KrypkasinoClient(None, channel=channel)
    KrypkasinoClient(target=None, channel=channel, credentials=None)
    client.new_game(None, players=2, seed=1)
    client.new_game(None)
    client.new_game(pb.NewGameRequest(), players=None, seed=None, timeout=1)
    client.legal_moves(None, state=state, seat=0, seat_token=token)
    client.play(None, move=pb.Move())
    client.score(maybe)
    client.score(maybe, state=None, metadata=[])
    client.get_view(pb.GetViewRequest(), seat_token=None)
    client.new_game()
    client.new_game(players=2, seed=1, timeout=3, metadata=[("k", "v")], wait_for_ready=True)
    client.new_game(pb.NewGameRequest(), timeout=None, metadata=None, wait_for_ready=False)
    client.legal_moves(state=state, seat=0, seat_token=token)
    client.legal_moves(pb.LegalMovesRequest(), timeout=1)
    client.play(state=state, seat=0, seat_token=token, move=pb.Move())
    client.play(pb.PlayRequest())
    client.score(state=state)
    client.score(pb.ScoreRequest(), metadata=[])
    client.get_view(state=state)
    client.get_view(pb.GetViewRequest(), wait_for_ready=True)
    client.new_game(pb.NewGameRequest(), players=2)  # wrong
    client.legal_moves(pb.LegalMovesRequest(), seat=0)  # wrong
    client.play(pb.PlayRequest(), move=pb.Move())  # wrong
    client.score(pb.ScoreRequest(), state=state)  # wrong
    client.get_view(pb.GetViewRequest(), seat=1)  # wrong
    KrypkasinoClient()  # wrong
    KrypkasinoClient("localhost:50051", channel=channel)  # wrong
    KrypkasinoClient(channel=channel, options=[("grpc.enable_retries", 0)])  # wrong
    KrypkasinoClient(channel=channel, load_balancing="round_robin")  # wrong
    KrypkasinoClient(channel=channel, credentials=grpc.ssl_channel_credentials())  # wrong
    client.score(maybe, state=state)  # limit
    KrypkasinoClient(target, channel=maybe_channel)  # limit


async def async_calls(
    channel: grpc.aio.Channel,
    state: bytes,
    token: bytes,
    maybe: pb.PlayRequest | None,
    target: str | None,
    maybe_channel: grpc.aio.Channel | None,
) -> None:
    client = AsyncKrypkasinoClient("localhost:50051", timeout=2, load_balancing="round_robin")
    AsyncKrypkasinoClient(target="localhost:50051", options=channel_options(), credentials=None)
    AsyncKrypkasinoClient("localhost:50051", credentials=grpc.ssl_channel_credentials())
    AsyncKrypkasinoClient(channel=channel, timeout=None)
    AsyncKrypkasinoClient(channel=channel, options=None)
    AsyncKrypkasinoClient("localhost:50051", channel=None)
    AsyncKrypkasinoClient(None, channel=channel)
    AsyncKrypkasinoClient(target=None, channel=channel, load_balancing=None)
    await client.new_game(None, players=2, seed=1)
    await client.new_game(None)
    await client.new_game(pb.NewGameRequest(), draw=None, wait_for_ready=True)
    await client.legal_moves(None, state=state, seat=0, seat_token=token)
    await client.play(maybe)
    await client.play(maybe, state=None, move=None, timeout=1)
    await client.score(None, state=state)
    await client.get_view(None, state=state, seat=1, seat_token=token)
    await client.new_game()
    await client.new_game(players=2, seed=1, timeout=3, metadata=[("k", "v")])
    await client.new_game(pb.NewGameRequest(), timeout=None, metadata=None, wait_for_ready=False)
    await client.legal_moves(state=state, seat=0, seat_token=token)
    await client.legal_moves(pb.LegalMovesRequest(), timeout=1)
    await client.play(state=state, seat=0, seat_token=token, move=pb.Move())
    await client.play(pb.PlayRequest())
    await client.score(state=state)
    await client.score(pb.ScoreRequest(), metadata=[])
    await client.get_view(state=state)
    await client.get_view(pb.GetViewRequest(), wait_for_ready=True)
    await client.new_game(pb.NewGameRequest(), players=2)  # wrong
    await client.legal_moves(pb.LegalMovesRequest(), seat=0)  # wrong
    await client.play(pb.PlayRequest(), move=pb.Move())  # wrong
    await client.score(pb.ScoreRequest(), state=state)  # wrong
    await client.get_view(pb.GetViewRequest(), seat=1)  # wrong
    AsyncKrypkasinoClient()  # wrong
    AsyncKrypkasinoClient("localhost:50051", channel=channel)  # wrong
    AsyncKrypkasinoClient(channel=channel, options=[("grpc.enable_retries", 0)])  # wrong
    AsyncKrypkasinoClient(channel=channel, load_balancing="round_robin")  # wrong
    AsyncKrypkasinoClient(channel=channel, credentials=grpc.ssl_channel_credentials())  # wrong
    await client.play(maybe, move=pb.Move())  # limit
    AsyncKrypkasinoClient(target, channel=maybe_channel)  # limit
"""


def test_the_types_refuse_exactly_the_calls_that_always_raise_type_error(tmp_path: Path) -> None:
    """Each method takes a request message or field keywords, never both, and a client a
    target or a channel, never both nor neither, and no channel settings with a channel:
    every such call raises TypeError (test_client.py), and before the overloads mypy passed
    them all. The calls each form takes pass."""
    report, status = strict_mypy(tmp_path, {"calls": CALLS})
    lines = CALLS.splitlines()
    wrong = [number for number, line in enumerate(lines, 1) if line.endswith("# wrong")]
    limit = [number for number, line in enumerate(lines, 1) if line.endswith("# limit")]
    errors = [line for line in report.splitlines() if ": error: " in line]
    # mypy reports a limit call's two arguments apart, as arg-type errors.
    reported = sorted({int(line.split(":")[1]) for line in errors})
    assert reported == sorted(wrong + limit), report
    assert (len(wrong), len(limit)) == (20, 4)
    assert all("[call-overload]" in line for line in errors if int(line.split(":")[1]) in wrong), (
        report
    )
    assert status == 1


# The None forms the overloads take, as a caller writes them: type-checked, then run.
NONE_FORMS = """
import grpc

from cardrules.client import AsyncKrypkasinoClient, KrypkasinoClient
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb


def optional(request: pb.ScoreRequest) -> pb.ScoreRequest | None:
    return request


def sync_calls(target: str) -> list[int]:
    with grpc.insecure_channel(target) as channel:
        given = KrypkasinoClient(None, channel=channel, timeout=10)
        game = given.new_game(None, players=2, seed=1)
    with KrypkasinoClient(target, channel=None, timeout=10) as client:
        seat = game.view.turn
        token = game.seat_tokens[seat]
        moves = client.legal_moves(None, state=game.state, seat=seat, seat_token=token)
        request = pb.PlayRequest(state=game.state, seat=seat, seat_token=token)
        request.move.CopyFrom(moves.moves[0].move)
        played = client.play(request, state=None, seat=None, move=None)
        view = client.get_view(None, state=played.state)
        sheet = client.score(optional(pb.ScoreRequest(state=played.state)), state=None)
        return [game.view.move_number, view.view.move_number, len(sheet.totals)]


async def async_calls(target: str) -> list[int]:
    async with grpc.aio.insecure_channel(target) as channel:
        given = AsyncKrypkasinoClient(None, channel=channel, timeout=10)
        game = await given.new_game(None, players=2, seed=1)
    async with AsyncKrypkasinoClient(target, channel=None, timeout=10) as client:
        view = await client.get_view(pb.GetViewRequest(state=game.state), seat=None)
        sheet = await client.score(optional(pb.ScoreRequest(state=game.state)))
        return [view.view.move_number, len(sheet.totals)]
"""


def test_a_request_or_target_of_none_type_checks_and_runs(tmp_path: Path, grpc_target: str) -> None:
    """``client.new_game(None, players=2)``, a request typed ``X | None`` with no field (or
    fields of None), and ``KrypkasinoClient(None, channel=...)`` run, and the overloads
    refused them: the request was an ``X`` in one and absent in the other."""
    report, status = strict_mypy(tmp_path, {"none_forms": NONE_FORMS})
    assert status == 0, report
    forms: dict[str, Any] = {}
    exec(compile(NONE_FORMS, "none_forms.py", "exec"), forms)
    assert forms["sync_calls"](grpc_target) == [0, 1, 2]
    assert asyncio.run(forms["async_calls"](grpc_target)) == [0, 2]
