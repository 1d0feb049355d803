"""A server on protobuf's pure-Python runtime refuses what one on upb refuses.

``PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python``, PyPy, or a platform without a upb
wheel run the pure-Python runtime. Its messages cache their size, and
``DiscardUnknownFields`` leaves that cache stale: ``service.codec.unknown_field_bytes``
found no unknown field there, so a newer client's rule flag was silently ignored (a
game under other rules), a field sent as another type was served, and a state a newer
release sealed was played with its field dropped, or, with the field inside
``config.rules``, answered INTERNAL (the stale size wrote a wrong length prefix).

Each server records the runtime its own interpreter runs (``RECORDS_RUNTIME``), so these
tests fail should the variable stop taking effect; the upb server beside it gives the
answers the pure-Python one must give, and both are checked against the documented ones.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from tests.service.grpc_helpers import Refusal, Stub, connect, dealt, game_state, refused, seal
from tests.service.server_process import (
    TEST_KEY,
    ServerProcess,
    loaded_at_start,
    start_server,
    stop_and_check,
)
from tests.service.test_grpc_errors import (
    NEWER_RELEASE_ADDITIONS,
    assert_from_a_newer_release,
    raw_call,
    state_calls,
)
from tests.service.test_open_token_command import open_token

INVALID = grpc.StatusCode.INVALID_ARGUMENT
RUNTIMES = ("python", "upb")

# Loaded by each interpreter at its start (``sitecustomize`` on PYTHONPATH): the protobuf
# runtime it then runs, which the server's own imports of protobuf keep, into
# ``runtime-PID`` beside this file.
RECORDS_RUNTIME = """
import os

from google.protobuf.internal import api_implementation

with open(os.path.join(os.path.dirname(__file__), f"runtime-{os.getpid()}"), "w") as record:
    record.write(api_implementation.Type())
"""


def runtime_env(folder: Path, runtime: str) -> dict[str, str]:
    """The environment that selects ``runtime`` and records it in ``folder``."""
    return {
        "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION": runtime,
        "PYTHONPATH": loaded_at_start(folder, RECORDS_RUNTIME),
    }


def recorded_runtimes(folder: Path) -> dict[int, str]:
    """The runtime of each process that started with ``folder``'s sitecustomize, by pid."""
    return {
        int(record.name.removeprefix("runtime-")): record.read_text()
        for record in folder.glob("runtime-*")
    }


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ServerProcess]]:
    """A server on each runtime, sealing under the test key; each must have logged no
    failure (no INTERNAL) when it stops."""
    started: dict[str, ServerProcess] = {}
    try:
        for runtime in RUNTIMES:
            folder = tmp_path_factory.mktemp(runtime)
            server = start_server(env=runtime_env(folder, runtime))
            started[runtime] = server
            assert recorded_runtimes(folder)[server.process.pid] == runtime
        yield started
    finally:
        for server in started.values():
            stop_and_check(server)


@pytest.fixture(scope="module")
def stubs(servers: dict[str, ServerProcess]) -> Iterator[dict[str, Stub]]:
    with connect(servers["python"].target) as python, connect(servers["upb"].target) as upb:
        yield {"python": python, "upb": upb}


@pytest.fixture(scope="module")
def channels(servers: dict[str, ServerProcess]) -> Iterator[dict[str, grpc.Channel]]:
    with (
        grpc.insecure_channel(servers["python"].target) as python,
        grpc.insecure_channel(servers["upb"].target) as upb,
    ):
        yield {"python": python, "upb": upb}


RULES = pb.Rules(bordstabbe=True, last_capture_point=True)


@pytest.fixture(scope="module")
def game(stubs: dict[str, Stub]) -> pb.NewGameResponse:
    """A 2-player game with rule flags set, started on the pure-Python server, which plays
    it as upb would: both servers seal under the test key."""
    request = pb.NewGameRequest(config=pb.GameConfig(players=2, rules=RULES), seed=1)
    answers = {runtime: stub.NewGame(request) for runtime, stub in stubs.items()}
    assert dealt(answers["python"].view) == dealt(answers["upb"].view)
    return answers["python"]


def test_the_pure_python_server_plays_a_game_with_rule_flags(stubs, game):
    """The baseline: a state holding ``config.rules`` opens, plays and scores there."""
    stub = stubs["python"]
    seat = game.view.turn
    asked = pb.LegalMovesRequest(state=game.state, seat=seat, seat_token=game.seat_tokens[seat])
    move = stub.LegalMoves(asked).moves[0].move
    played = stub.Play(
        pb.PlayRequest(state=game.state, seat=seat, seat_token=game.seat_tokens[seat], move=move)
    )
    assert played.view.move_number == 1
    assert stub.Score(pb.ScoreRequest(state=played.state)).totals == [0, 0]
    assert game_state(played.state, TEST_KEY).config.rules == RULES


def on_both(channels: dict[str, grpc.Channel], method: str, raw: bytes) -> Refusal:
    """The refusal of ``raw`` sent to ``method`` of each server, which must be the same."""
    refusals = {
        runtime: refused(raw_call(channel, method), raw) for runtime, channel in channels.items()
    }
    assert refusals["python"] == refusals["upb"]
    return refusals["python"]


@pytest.mark.parametrize(
    ("method", "raw"),
    [
        # field 63 = 1 after a GetViewRequest's fields
        ("GetView", b"\x0a\x01\x01\xf8\x03\x01"),
        # config (1) > rules (3) > field 63 = 1: a rule flag of a newer client's
        (
            "NewGame",
            pb.NewGameRequest(config=pb.GameConfig(players=2, rules=RULES)).SerializeToString()
            + b"\x0a\x05\x1a\x03\xf8\x03\x01",
        ),
    ],
    ids=["top-level", "rule-flag"],
)
def test_a_request_field_this_release_lacks_is_field_unknown(channels, method, raw):
    """Not ignored: ignoring the rule flag would start a game under other rules."""
    refusal = on_both(channels, method, raw)
    assert (refusal.code, refusal.reason) == (INVALID, "FIELD_UNKNOWN")
    assert f".{method}Request does not have" in refusal.message


@pytest.mark.parametrize(
    ("method", "raw", "path"),
    [
        ("NewGame", b"\x12\x00", "seed"),  # uint64 seed (2) sent length-delimited
        ("NewGame", b"\x0a\x02\x0a\x00", "config.players"),  # an int32 as bytes
        (
            "Play",
            b"\x22\x08\x12\x02\x08\x01\x12\x02\x12\x00",  # the second capture's suit as bytes
            "move.captures[1].suit",
        ),
    ],
    ids=["top-level", "nested", "repeated"],
)
def test_a_known_field_sent_as_another_type_is_request_malformed(channels, method, raw, path):
    refusal = on_both(channels, method, raw)
    assert (refusal.code, refusal.reason) == (INVALID, "REQUEST_MALFORMED")
    assert refusal.message.startswith(f"{path}: encoded as another type than the field's")
    assert set(refusal.violations) == {path}


@pytest.mark.parametrize("addition", NEWER_RELEASE_ADDITIONS)
def test_a_sealed_state_of_a_newer_release_is_token_from_newer_release(stubs, game, addition):
    """Not played with the field dropped, nor INTERNAL for one inside ``config.rules``."""
    payload = game_state(game.state, TEST_KEY).SerializeToString()
    token = seal(payload + NEWER_RELEASE_ADDITIONS[addition], TEST_KEY)
    refusals = {runtime: state_calls(stub, token, game) for runtime, stub in stubs.items()}
    assert refusals["python"] == refusals["upb"]
    assert_from_a_newer_release(refusals["python"])


@pytest.mark.parametrize("addition", ["field", "rule flag"])
def test_open_token_refuses_a_newer_releases_state_on_pure_python(tmp_path, game, addition):
    """Printed, the state would lack the newer release's field, unsaid (exit 1, as upb)."""
    payload = game_state(game.state, TEST_KEY).SerializeToString()
    newer = base64.b64encode(seal(payload + NEWER_RELEASE_ADDITIONS[addition], TEST_KEY))
    done = open_token(newer.decode(), env=runtime_env(tmp_path, "python"))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith("cardrules: error: TOKEN_FROM_NEWER_RELEASE: ")
    assert set(recorded_runtimes(tmp_path).values()) == {"python"}


# Prints how many unknown bytes ``unknown_field_bytes`` finds in the NewGameRequest on stdin.
COUNTS_UNKNOWN_BYTES = """
import sys

from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from service.codec import unknown_field_bytes

print(unknown_field_bytes(pb.NewGameRequest.FromString(sys.stdin.buffer.read())))
"""


def test_unknown_field_bytes_counts_alike_on_both_runtimes(tmp_path):
    """The count is of bytes, positive on either runtime (docs/operations.md, "On a VM"):
    a NewGameRequest with field 127 = 1 (tag 2 bytes, value 1) holds 3. The server only
    asks whether there are any, but compares the count with the size it searches for a
    field sent as another type: a negative count would be searched at any size."""
    raw = pb.NewGameRequest(config=pb.GameConfig(players=2), seed=1).SerializeToString()
    counts = {}
    for runtime in RUNTIMES:
        folder = tmp_path / runtime
        folder.mkdir()
        done = subprocess.run(
            [sys.executable, "-c", COUNTS_UNKNOWN_BYTES],
            env={**os.environ, **runtime_env(folder, runtime)},
            cwd=Path(__file__).resolve().parents[2],
            input=raw + b"\xf8\x07\x01",
            capture_output=True,
            check=True,
            timeout=60,
        )
        assert set(recorded_runtimes(folder).values()) == {runtime}
        counts[runtime] = int(done.stdout)
    assert counts == {"python": 3, "upb": 3}
