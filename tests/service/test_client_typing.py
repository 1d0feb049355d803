"""The Python client as a user's type checker sees it: ``mypy --strict`` on user code.

The package is typed (``py.typed``) and its README promises that with the
``typing`` extra (the stubs of grpcio and protobuf, which the development
environment has too) a type checker knows the messages and catches mistakes.
This runs mypy, as a user would, on the README's examples and on a subclass
of each client, with a configuration of its own rather than the repository's.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

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
# both, and channel settings beside a given channel.
CALLS = """
import grpc

from cardrules.client import AsyncKrypkasinoClient, KrypkasinoClient, channel_options
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb


def sync_calls(channel: grpc.Channel, state: bytes, token: bytes) -> None:
    client = KrypkasinoClient("localhost:50051", timeout=2, load_balancing="round_robin")
    KrypkasinoClient(target="localhost:50051", options=channel_options(), credentials=None)
    KrypkasinoClient("localhost:50051", credentials=grpc.ssl_channel_credentials())
    KrypkasinoClient(channel=channel, timeout=None)
    KrypkasinoClient(channel=channel, options=None)
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


async def async_calls(channel: grpc.aio.Channel, state: bytes, token: bytes) -> None:
    client = AsyncKrypkasinoClient("localhost:50051", timeout=2, load_balancing="round_robin")
    AsyncKrypkasinoClient(target="localhost:50051", options=channel_options(), credentials=None)
    AsyncKrypkasinoClient("localhost:50051", credentials=grpc.ssl_channel_credentials())
    AsyncKrypkasinoClient(channel=channel, timeout=None)
    AsyncKrypkasinoClient(channel=channel, options=None)
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
"""


def test_the_types_refuse_exactly_the_calls_that_always_raise_type_error(tmp_path: Path) -> None:
    """Each method takes a request message or field keywords, never both, and a client a
    target or a channel, never both nor neither, and no channel settings with a channel:
    every such call raises TypeError (test_client.py), and before the overloads mypy passed
    them all. The calls each form takes pass."""
    report, status = strict_mypy(tmp_path, {"calls": CALLS})
    wrong = [
        number for number, line in enumerate(CALLS.splitlines(), 1) if line.endswith("# wrong")
    ]
    errors = [line for line in report.splitlines() if ": error: " in line]
    assert [int(line.split(":")[1]) for line in errors] == wrong, report
    assert len(wrong) == 20
    assert all("[call-overload]" in line for line in errors), report
    assert status == 1
