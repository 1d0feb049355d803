"""Serving (design sections 4 and 6): real ``cardrules serve`` processes on
loopback.

Statelessness across processes, key rotation, ``--workers 2`` with aggregated
metrics, draining on SIGTERM under load, health and reflection, a committed
token that later releases must still open, and configuration by environment.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import queue
import random
import resource
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import grpc
import pytest
from cardrules.client import channel_options, state_to_keep
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from cardrules.krypkasino.v1 import krypkasino_pb2_grpc
from google.protobuf import json_format
from google.protobuf.descriptor_pb2 import FileDescriptorProto
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from prometheus_client.multiprocess import MultiProcessCollector

from engine.cards import parse_cards
from engine.krypkasino import Move, State, legal_moves, open_game, play, score
from service import codec
from service.config import add_server_arguments, meant_variables, resolve, unknown_variables
from service.server import MAX_CONCURRENT_STREAMS, grpc_server_options
from service.state_codec import state_from_proto
from service.state_fields import state_fields
from service.tokens import KEY_ID_BYTES, KeyRing
from tests.service.fixtures import make_token_fixture as token_fixtures
from tests.service.grpc_helpers import health, key_id, refused
from tests.service.metrics_helpers import Samples, metric_samples
from tests.service.server_process import (
    TEST_KEY,
    ServerProcess,
    failure_lines,
    free_ports,
    running,
    serve_and_fail,
    start_server,
)

SERVICE = "cardrules.krypkasino.v1.KrypkasinoService"
HEALTH = "grpc.health.v1.Health"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
# One TCP connection per channel: by default channels to one target share a
# connection, and SO_REUSEPORT spreads connections, not calls.
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]


# -- helpers ------------------------------------------------------------------------


@contextmanager
def krypkasino(target: str) -> Iterator[krypkasino_pb2_grpc.KrypkasinoServiceStub]:
    """A stub on a channel (and connection) of its own, closed afterwards."""
    with grpc.insecure_channel(target, options=OWN_CONNECTION) as channel:
        yield krypkasino_pb2_grpc.KrypkasinoServiceStub(channel)


def sealed_under(token: bytes) -> bytes:
    """The key id in a sealed token's header: ``version | key id | nonce | ...`` (section 4)."""
    assert token[0] == 1, "schema version 1, sealed (not plain)"
    return token[1:5]


@dataclass
class Game:
    """A game played over the wire, with the engine's state alongside."""

    state: bytes
    tokens: list[bytes]
    view: pb.View
    engine: State
    moves: int = 0


def new_wire_game(
    stub: krypkasino_pb2_grpc.KrypkasinoServiceStub, request: pb.NewGameRequest
) -> Game:
    game = stub.NewGame(request)
    engine, _ = open_game(codec.config_from_proto(request.config), seed=request.seed)
    return Game(game.state, list(game.seat_tokens), game.view, engine)


def play_on(
    game: Game,
    stubs: Callable[[], krypkasino_pb2_grpc.KrypkasinoServiceStub],
    choose: Callable[[int], int],
    moves: int | None = None,
) -> None:
    """Play ``moves`` moves (all, when ``None``): the next stub of ``stubs`` serves each call.

    At every turn the wire's legal moves must be the engine's, annotations
    included; ``choose(n)`` picks the index played, on the wire and in the engine.
    """
    played = 0
    while not game.view.game_over and (moves is None or played < moves):
        seat = game.view.turn
        assert seat == game.engine.turn
        offered = (
            stubs()
            .LegalMoves(
                pb.LegalMovesRequest(state=game.state, seat=seat, seat_token=game.tokens[seat])
            )
            .moves
        )
        expected = legal_moves(game.engine, seat)
        assert list(offered) == codec.legal_moves_to_proto(game.engine, expected)
        index = choose(len(expected))
        answer = stubs().Play(
            pb.PlayRequest(
                state=game.state,
                seat=seat,
                seat_token=game.tokens[seat],
                move=offered[index].move,
            )
        )
        game.engine, _ = play(game.engine, seat, expected[index])
        game.state, game.view = answer.state, answer.view
        game.moves += 1
        played += 1
        assert game.view.move_number == game.engine.move_number


def alternate(*stubs: krypkasino_pb2_grpc.KrypkasinoServiceStub) -> Callable[[], Any]:
    turn = iter(range(1 << 62))
    return lambda: stubs[next(turn) % len(stubs)]


# -- statelessness ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "config",
    [
        pb.GameConfig(players=2),
        pb.GameConfig(
            players=4, teams=pb.TEAM_MODE_PAIRS, rules=pb.Rules(must_capture_if_able=True)
        ),
    ],
    ids=["two_players", "four_players_pairs"],
)
def test_two_processes_with_the_same_keys_serve_alternate_calls_of_one_game(config):
    """Design section 4: any replica serves any request; the game equals the engine's."""
    seed = 4242 + config.players
    with running() as a, running() as b:
        assert a.log_events("listening")[0]["pid"] != b.log_events("listening")[0]["pid"]
        with krypkasino(a.target) as on_a, krypkasino(b.target) as on_b:
            game = new_wire_game(on_a, pb.NewGameRequest(config=config, seed=seed))
            rng = random.Random(seed)
            play_on(game, alternate(on_b, on_a), rng.randrange)
            assert game.engine.over and game.moves > 100
            expected = codec.score_to_proto(score(game.engine))
            assert on_b.Score(pb.ScoreRequest(state=game.state)) == expected
            assert on_a.Score(pb.ScoreRequest(state=game.state)) == expected
            assert expected.game_over and list(expected.winners)


# -- key rotation --------------------------------------------------------------------------


def test_key_rotation_opens_old_tokens_and_seals_under_the_new_primary():
    """Design section 4: keys are a list, the first seals and all open."""
    old, new = KeyRing.generate_key_text(), KeyRing.generate_key_text()
    request = pb.NewGameRequest(config=pb.GameConfig(players=2), seed=77)
    with (
        running(keys=old) as before,
        running(keys=f"{new},{old}") as rotated,
        krypkasino(before.target) as on_old,
        krypkasino(rotated.target) as on_rotated,
    ):
        game = new_wire_game(on_old, request)
        play_on(game, lambda: on_old, lambda n: 0, moves=5)
        assert sealed_under(game.state) == key_id(old)
        old_state, old_seat_tokens = game.state, list(game.tokens)

        # The rotated server opens the old token and accepts the seat tokens
        # issued under the old key, and seals what it returns under the new one.
        view = on_rotated.GetView(
            pb.GetViewRequest(state=old_state, seat=0, seat_token=old_seat_tokens[0])
        ).view
        assert view.move_number == 5 and len(view.hand) == game.view.hand_sizes[0]
        play_on(game, lambda: on_rotated, lambda n: n - 1, moves=5)
        assert sealed_under(game.state) == key_id(new)
        assert game.tokens == old_seat_tokens

        # A server that has only the old key cannot open the new token.
        unknown = refused(on_old.GetView, pb.GetViewRequest(state=game.state))
        assert (unknown.code, unknown.reason) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            "TOKEN_UNKNOWN_KEY",
        )

        play_on(game, lambda: on_rotated, lambda n: n // 2)
        assert on_rotated.Score(pb.ScoreRequest(state=game.state)) == codec.score_to_proto(
            score(game.engine)
        )

    # Once the old key is retired, its tokens stop opening; the new ones still do.
    with running(keys=new) as retired, krypkasino(retired.target) as on_new:
        retired_key = refused(on_new.GetView, pb.GetViewRequest(state=old_state))
        assert (retired_key.code, retired_key.reason) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            "TOKEN_UNKNOWN_KEY",
        )
        assert on_new.GetView(pb.GetViewRequest(state=game.state)).view.game_over
        own_view = pb.GetViewRequest(state=game.state, seat=0, seat_token=game.tokens[0])
        old_seat_token = refused(on_new.GetView, own_view)
        assert (old_seat_token.code, old_seat_token.reason) == (
            grpc.StatusCode.PERMISSION_DENIED,
            "SEAT_TOKEN_INVALID",
        )
        # Told apart from a wrong token: the key id names the retired key.
        assert old_seat_token.metadata == {"seat": "0", "key_id": key_id(old).hex()}


def test_seat_tokens_are_renewed_under_the_new_key_so_a_game_outlives_the_old_one():
    """docs/operations.md, "Key rotation": a game started under the old key goes on
    once the old key is gone, with the seat tokens the rotated servers renewed."""
    old, new = KeyRing.generate_key_text(), KeyRing.generate_key_text()
    request = pb.NewGameRequest(config=pb.GameConfig(players=2), seed=78)
    with running(keys=old) as before, krypkasino(before.target) as on_old:
        game = new_wire_game(on_old, request)
        play_on(game, lambda: on_old, lambda n: 0, moves=3)
        nothing_to_renew = on_old.LegalMoves(
            pb.LegalMovesRequest(state=game.state, seat=0, seat_token=game.tokens[0])
        )
        assert not nothing_to_renew.HasField("seat_token")

    (metrics_port,) = free_ports(1)
    with (
        running(("--metrics-port", str(metrics_port)), keys=f"{new},{old}") as rotated,
        krypkasino(rotated.target) as on_rotated,
    ):
        seat = game.view.turn
        legal = on_rotated.LegalMoves(
            pb.LegalMovesRequest(state=game.state, seat=seat, seat_token=game.tokens[seat])
        )
        other = 1 - seat
        other_view = on_rotated.GetView(
            pb.GetViewRequest(state=game.state, seat=other, seat_token=game.tokens[other])
        )
        public = on_rotated.GetView(pb.GetViewRequest(state=game.state))
        assert not public.HasField("seat_token")
        played = on_rotated.Play(
            pb.PlayRequest(
                state=game.state, seat=seat, seat_token=game.tokens[seat], move=legal.moves[0].move
            )
        )
        renewed = {seat: legal.seat_token, other: other_view.seat_token}
        assert played.seat_token == renewed[seat]
        assert {token[:KEY_ID_BYTES] for token in renewed.values()} == {key_id(new)}
        # A renewed token is current: nothing more to renew.
        again = on_rotated.GetView(
            pb.GetViewRequest(state=played.state, seat=seat, seat_token=renewed[seat])
        )
        assert not again.HasField("seat_token")
        rotated.wait_for_logs("metrics")
        renewals = ("cardrules_seat_tokens_renewed_total", frozenset({("game", "krypkasino")}))
        samples = metric_samples(rotated.metrics_url)
        assert samples[renewals] == 3
        # The three reads were sent the state under OLD; Play sealed the next one anew.
        assert samples[("cardrules_state_tokens_renewed_total", renewals[1])] == 3
        assert {legal.state[1:5], other_view.state[1:5], public.state[1:5]} == {key_id(new)}
        assert not again.HasField("state")
        game.engine, _ = play(game.engine, seat, legal_moves(game.engine, seat)[0])
        game.state, game.view = played.state, played.view

    with running(keys=new) as retired, krypkasino(retired.target) as on_new:
        game.tokens = [renewed[0], renewed[1]]
        play_on(game, lambda: on_new, lambda n: n - 1)
        assert game.view.game_over


def test_a_paused_game_moves_to_the_new_key_by_reads_alone():
    """docs/operations.md, "Key rotation": a game nobody plays while the keys rotate
    outlives the old key when the backend reads it once per seat (GetView with the
    seat's token), keeping the state and seat tokens the reads renewed."""
    old, new = KeyRing.generate_key_text(), KeyRing.generate_key_text()
    request = pb.NewGameRequest(config=pb.GameConfig(players=3), seed=41)
    with running(keys=old) as before, krypkasino(before.target) as on_old:
        game = new_wire_game(on_old, request)
        play_on(game, lambda: on_old, lambda n: n // 2, moves=4)
        paused_score = on_old.Score(pb.ScoreRequest(state=game.state))

    with running(keys=f"{new},{old}") as rotated, krypkasino(rotated.target) as on_rotated:
        # Not kept (below, GetView renews the state again): each read sent OLD renews it.
        score_read = on_rotated.Score(pb.ScoreRequest(state=game.state))
        assert score_read.state[1:5] == key_id(new)
        score_read.ClearField("state")
        assert score_read == paused_score
        state, tokens = game.state, list(game.tokens)
        for seat in range(3):
            read = on_rotated.GetView(
                pb.GetViewRequest(state=state, seat=seat, seat_token=tokens[seat])
            )
            # Only the first read is sent the state under OLD; the others are sent
            # the state it renewed, under NEW, and renew nothing.
            assert read.HasField("state") == (seat == 0)
            assert read.view.state_id == game.view.state_id  # the same state, resealed
            state = state_to_keep(read, state)
            tokens[seat] = read.seat_token
        assert {state[1:5], *(token[:KEY_ID_BYTES] for token in tokens)} == {key_id(new)}

    with running(keys=new) as retired, krypkasino(retired.target) as on_new:
        game.state, game.tokens = state, tokens
        play_on(game, lambda: on_new, lambda n: n - 1)
        assert game.view.game_over


# -- workers ------------------------------------------------------------------------------


def process_series(samples: Samples, **labels: str) -> dict[str, float]:
    """The ``process_*`` series with exactly ``labels`` (a server of one process has none;
    with workers, ``worker``), by name."""
    return {
        name: value
        for (name, found), value in samples.items()
        if name.startswith("process_") and dict(found) == labels
    }


#: What prometheus_client's ``ProcessCollector`` reports of each process.
PROCESS_SERIES = (
    "process_cpu_seconds_total",
    "process_max_fds",
    "process_open_fds",
    "process_resident_memory_bytes",
    "process_start_time_seconds",
    "process_virtual_memory_bytes",
)


def new_games_handled(samples: Samples) -> float:
    labels = {
        "grpc_type": "unary",
        "grpc_service": SERVICE,
        "grpc_method": "NewGame",
        "grpc_code": "OK",
    }
    return samples[("grpc_server_handled_total", frozenset(labels.items()))]


def test_two_workers_both_serve_and_the_supervisor_aggregates_their_metrics(tmp_path):
    """Design section 6: ``--workers`` shares the port (SO_REUSEPORT); multiprocess metrics."""
    (port, metrics_port), folder = free_ports(2), tmp_path / "metrics"
    args = ("--workers", "2", "--grpc-port", str(port), "--metrics-port", str(metrics_port))
    connections = 24  # the kernel picks a worker per connection: 2**-23 that one takes all
    # PYTHONUNBUFFERED=1 as container images set it: every write reaches the shared pipe.
    env = {"PROMETHEUS_MULTIPROC_DIR": str(folder), "PYTHONUNBUFFERED": "1"}
    with running(args, env, timeout=10) as server:
        listening_lines = server.wait_for_logs("listening", 2)
        workers = {int(str(line["pid"])) for line in listening_lines}
        assert len(workers) == 2 and server.process.pid not in workers
        server.wait_for_logs("metrics")
        assert server.metrics_port == metrics_port
        for seed in range(connections):
            with krypkasino(server.target) as stub:
                stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2), seed=seed))

        # Each worker writes its own file (named by its pid); read them one by one.
        per_worker = {}
        for pid in workers:
            files = [str(folder / f"counter_{pid}.db")]
            found = {
                (s.name, frozenset(s.labels.items())): s.value
                for family in MultiProcessCollector.merge(files)  # type: ignore[no-untyped-call]
                for s in family.samples
            }
            per_worker[pid] = new_games_handled(found)
        assert all(count > 0 for count in per_worker.values()), per_worker
        assert sum(per_worker.values()) == connections

        # Both workers log at once: each line must still be one whole JSON object.
        def views(state: bytes) -> None:
            with krypkasino(server.target) as stub:
                for _ in range(25):
                    stub.GetView(pb.GetViewRequest(state=state))

        with krypkasino(server.target) as stub:
            state = stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2))).state
        with ThreadPoolExecutor(8) as pool:
            for done in [pool.submit(views, state) for _ in range(8)]:
                done.result(30)

        # Each process's own CPU, memory and files, by its worker number: a limit set on
        # worker 2 alone shows under its number only.
        numbers = {int(str(line["pid"])): str(line["worker"]) for line in listening_lines}
        [second] = [pid for pid, number in numbers.items() if number == "2"]
        soft, hard = resource.prlimit(second, resource.RLIMIT_NOFILE)
        resource.prlimit(second, resource.RLIMIT_NOFILE, (soft - 7, hard))
        aggregated = metric_samples(server.metrics_url)
        assert new_games_handled(aggregated) == connections + 1
        own = {
            number: process_series(aggregated, worker=number) for number in ("supervisor", "1", "2")
        }
        assert {number: sorted(series) for number, series in own.items()} == {
            number: sorted(PROCESS_SERIES) for number in own
        }
        assert own["2"]["process_max_fds"] == soft - 7
        assert own["1"]["process_max_fds"] == own["supervisor"]["process_max_fds"] == soft
        assert all(series["process_resident_memory_bytes"] > 10 * 2**20 for series in own.values())
        assert all(series["process_cpu_seconds_total"] > 0 for series in own.values())
        assert own["supervisor"]["process_start_time_seconds"] <= min(
            own[number]["process_start_time_seconds"] for number in ("1", "2")
        )
        assert sum(name == "python_info" for name, _ in aggregated) == 1
        started = sum(
            v for (name, _), v in aggregated.items() if name == "cardrules_games_started_total"
        )
        assert started == connections + 1
    assert {line["pid"] for line in server.log_events("stopped")} == workers
    assert server.log_events("raw") == [], "log lines of the two workers ran into each other"
    requests = server.log_events("request")
    assert len(requests) == connections + 1 + 8 * 25
    # Every worker line names its worker, so an operator can tell them apart.
    listening = server.log_events("listening")
    assert {line["worker"] for line in listening} == {1, 2}
    # ... and says which state tokens it writes: in a rolling upgrade, whether the old
    # pods read the new ones' (service/state_fields.py).
    assert [line["state_fields"] for line in listening] == [state_fields()] * 2
    assert {line["worker"] for line in requests} == {1, 2}
    # The supervisor's own lines frame its workers' (docs/operations.md "Workers"): its
    # pid, which systemd calls MainPID, first; its exit status last.
    [starting] = server.log_events("starting workers")
    assert (starting["level"], starting["pid"], starting["workers"]) == (
        "info",
        server.process.pid,
        2,
    )
    assert starting["state_fields"] == state_fields() and "worker" not in starting
    assert server.logs.index(starting) < min(
        index for index, line in enumerate(server.logs) if "worker" in line
    )
    [closing] = server.wait_for_logs("supervisor stopped")
    assert (closing["level"], closing["pid"], closing["exit_status"]) == (
        "info",
        server.process.pid,
        0,
    )
    assert server.logs[-1] == closing and "worker" not in closing


def test_a_misspelt_variable_is_named_in_a_warning_without_its_value():
    """``CARDRULES_STATE_KEY`` for ``CARDRULES_STATE_KEYS`` would leave the server on an
    ephemeral key with nothing pointing at the typo; the value may be a key, so it is not
    logged."""
    value = base64.b64encode(b"k" * 32).decode()
    misspelt = {"CARDRULES_STATE_KEY": value, "CARDRULES_GRPC_PORTS": "50051"}
    with running(env=misspelt) as server:
        server.wait_for_logs("listening")
    warnings = [line for line in server.logs if "unknown CARDRULES_" in str(line.get("event"))]
    assert [line["variables"] for line in warnings] == [sorted(misspelt)]
    # A list, not a map from each unknown name: the log redacts values under keys ending
    # in _KEY.
    assert warnings[0]["did_you_mean"] == [
        "CARDRULES_GRPC_PORT for CARDRULES_GRPC_PORTS",
        "CARDRULES_STATE_KEYS for CARDRULES_STATE_KEY",
    ]
    assert warnings[0]["level"] == "warning"
    assert value not in json.dumps(server.logs)


@pytest.mark.parametrize(
    ("args", "event"),
    [
        (
            (),
            "no state keys configured: using an ephemeral key; tokens die with this server "
            "and other replicas cannot open them (set CARDRULES_STATE_KEYS)",
        ),
        (
            ("--plain-state",),
            "no state keys configured: using an ephemeral key for seat tokens; they die with "
            "this server and other replicas cannot verify them (state tokens are plain, "
            "which any --plain-state server opens; set CARDRULES_STATE_KEYS)",
        ),
    ],
)
def test_a_server_without_keys_warns_which_tokens_die_with_it(args, event):
    """A plain-state server's state tokens outlive it; only its seat tokens are under the
    key it made up, so its warning does not say every token dies."""
    with running(args, keys=None) as server:
        server.wait_for_logs("listening")
    [warning] = [line for line in server.logs if "ephemeral key" in str(line.get("event"))]
    assert (warning["level"], warning["event"]) == ("warning", event)


@pytest.mark.parametrize("keys", [None, TEST_KEY])
def test_plain_mode_warns_and_names_the_keys_whose_tokens_it_opens_in_the_clear(keys):
    """docs/api.md: a plain server still opens sealed tokens, so one given real keys shows
    their games' hands; its warning names those keys (their public ids, never the keys)."""
    with running(("--plain-state",), keys=keys) as server:
        server.wait_for_logs("listening")
    [warning] = [line for line in server.logs if "plain state tokens" in str(line.get("event"))]
    assert warning["level"] == "warning"
    if keys is None:
        assert "key_ids" not in warning
        assert "in the clear" not in str(warning["event"])
    else:
        ring = KeyRing.parse(keys)
        assert warning["key_ids"] == [KeyRing.key_id(key).hex() for key in ring.keys]
        assert "answered in the clear" in str(warning["event"])
        assert keys not in json.dumps(server.logs)


def test_keys_on_the_command_line_are_warned_of_and_keys_elsewhere_are_not(tmp_path):
    """/proc/PID/cmdline, which ps shows, is readable by every user of the machine; the
    environment and a file are not. The warning never quotes the keys."""
    with running(("--state-keys", TEST_KEY), keys=None) as server:
        server.wait_for_logs("listening")
    [warning] = [line for line in server.logs if "command line" in str(line.get("event"))]
    assert warning["level"] == "warning"
    assert "CARDRULES_STATE_KEYS or --state-keys-file" in str(warning["event"])
    assert TEST_KEY not in json.dumps(server.logs)
    keys_file = tmp_path / "keys"
    keys_file.write_text(TEST_KEY)
    for args, keys in ((("--state-keys-file", str(keys_file)), None), ((), TEST_KEY)):
        with running(args, keys=keys) as server:
            server.wait_for_logs("listening")
        assert not [line for line in server.logs if "command line" in str(line.get("event"))]


def test_only_variables_no_setting_reads_are_unknown():
    settings = ("STATE_KEYS", "STATE_KEYS_FILE", "WORKER_TIMEOUT_SECONDS", "HOST")
    environ = {f"CARDRULES_{name}": "" for name in (*settings, "STATE_KEY", "X")}
    assert unknown_variables({**environ, "OTHER": ""}) == ["CARDRULES_STATE_KEY", "CARDRULES_X"]


def test_an_unknown_variable_a_slip_from_a_settings_is_told_which_it_meant():
    unknown = ["CARDRULES_GRPC_PORTS", "cardrules_grpc_port", "CARDRULES_STATE_KEY", "CARDRULES_X"]
    assert meant_variables(unknown) == [
        "CARDRULES_GRPC_PORT for CARDRULES_GRPC_PORTS",
        "CARDRULES_GRPC_PORT for cardrules_grpc_port",
        "CARDRULES_STATE_KEYS for CARDRULES_STATE_KEY",
    ]
    assert meant_variables(["CARDRULES_X"]) == []


def test_a_setting_variable_in_the_wrong_case_is_unknown():
    """Environment names are case-sensitive: these set nothing, and were ignored unnamed."""
    environ = {"cardrules_grpc_port": "1", "Cardrules_Workers": "2", "CARDRULES_HOST": "x"}
    assert unknown_variables(environ) == ["Cardrules_Workers", "cardrules_grpc_port"]


def test_a_server_restarted_without_keys_says_why_it_cannot_open_older_tokens():
    """``make serve``'s default key dies with the server: the refusal of a token sealed
    before a restart names that cause, over the wire."""
    with running(keys=None) as first, krypkasino(first.target) as stub:
        state = stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2))).state
    with running(keys=None) as restarted, krypkasino(restarted.target) as stub:
        refusal = refused(stub.GetView, pb.GetViewRequest(state=state))
    assert (refusal.code, refusal.reason) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "TOKEN_UNKNOWN_KEY",
    )
    assert "this server made its key up at start (no CARDRULES_STATE_KEYS)" in refusal.message


@pytest.mark.parametrize("args", [(), ("--plain-state",)])
def test_a_seat_token_from_before_a_restart_without_keys_names_the_made_up_key(args):
    """The seat token's refusal names the cause the state token's does: no key retired,
    the restart threw the made-up one away. On a plain-state server the state token
    still opens after the restart; only the seat token cannot be verified."""
    with running(args, keys=None) as first, krypkasino(first.target) as stub:
        game = stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2)))
    with running(args, keys=None) as restarted, krypkasino(restarted.target) as stub:
        # A sealed state of before is refused first: the restarted server starts its own.
        config = pb.GameConfig(players=2)
        state = game.state if args else stub.NewGame(pb.NewGameRequest(config=config)).state
        request = pb.GetViewRequest(state=state, seat=1, seat_token=game.seat_tokens[1])
        refusal = refused(stub.GetView, request)
    assert (refusal.code, refusal.reason) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "SEAT_TOKEN_INVALID",
    )
    assert refusal.message == (
        "the seat token of seat 1 is under no key of this server: this server made its key "
        "up at start (no CARDRULES_STATE_KEYS), so seat tokens from before a restart or from "
        "another server cannot be verified"
    )


def test_two_workers_without_keys_share_one_ephemeral_key():
    """The supervisor makes the ephemeral key before forking: a token one worker seals
    opens on the other (each making its own would fail half the calls)."""
    connections = 24  # the kernel picks a worker per connection: 2**-23 that one takes all
    (port, metrics_port) = free_ports(2)
    args = ("--workers", "2", "--grpc-port", str(port), "--metrics-port", str(metrics_port))
    with running(args, {"PYTHONUNBUFFERED": "1"}, keys=None) as server:
        server.wait_for_logs("listening", 2)
        with krypkasino(server.target) as stub:
            state = stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2))).state
        for _ in range(connections):
            with krypkasino(server.target) as stub:
                assert stub.GetView(pb.GetViewRequest(state=state)).view.move_number == 0
    warnings = [line for line in server.logs if "ephemeral key" in str(line.get("event"))]
    assert len(warnings) == 1 and "worker" not in warnings[0]
    views = [
        line for line in server.log_events("request") if line["method"] == f"{SERVICE}/GetView"
    ]
    assert {line["code"] for line in views} == {"OK"}
    assert {line["worker"] for line in views} == {1, 2}


# -- SIGTERM under load ------------------------------------------------------------------


@dataclass(frozen=True)
class CallRecord:
    request_id: str
    started: float
    ended: float
    code: grpc.StatusCode


@dataclass
class Load:
    """Client threads playing games in a loop until a call fails; every call is recorded.

    ``health_checked`` clients use the Python client's channel settings with
    ``round_robin``, hence gRPC's client-side health checking of ``readiness``;
    the others use a plain channel (``pick_first``, no health checking).
    """

    target: str
    health_checked: bool
    calls: list[CallRecord] = field(default_factory=list)
    last_codes: list[grpc.StatusCode] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ok_calls(self) -> int:
        with self.lock:
            return sum(1 for c in self.calls if c.code == grpc.StatusCode.OK)

    def channel(self) -> grpc.Channel:
        if self.health_checked:
            options = channel_options("round_robin", OWN_CONNECTION)
            assert '"healthCheckConfig"' in dict(options)["grpc.service_config"]
            return grpc.insecure_channel(self.target, options)
        return grpc.insecure_channel(self.target, OWN_CONNECTION)

    def run(self, seed: int) -> None:
        with self.channel() as channel:
            stub = krypkasino_pb2_grpc.KrypkasinoServiceStub(channel)
            rng = random.Random(seed)
            try:
                while True:
                    game = self._call(
                        stub.NewGame, pb.NewGameRequest(config=pb.GameConfig(players=2))
                    )
                    state, tokens, view = game.state, game.seat_tokens, game.view
                    while not view.game_over:
                        seat = view.turn
                        asked = pb.LegalMovesRequest(
                            state=state, seat=seat, seat_token=tokens[seat]
                        )
                        moves = self._call(stub.LegalMoves, asked).moves
                        move = moves[rng.randrange(len(moves))].move
                        answer = self._call(
                            stub.Play,
                            pb.PlayRequest(
                                state=state, seat=seat, seat_token=tokens[seat], move=move
                            ),
                        )
                        state, view = answer.state, answer.view
            except grpc.RpcError as error:
                with self.lock:
                    self.last_codes.append(error.code())

    def _call(self, method: Any, request: Any) -> Any:
        request_id = uuid.uuid4().hex
        started = time.monotonic()
        code = grpc.StatusCode.OK
        try:
            return method(request, metadata=[("x-request-id", request_id)], timeout=60)
        except grpc.RpcError as error:
            code = error.code()
            raise
        finally:
            with self.lock:
                self.calls.append(CallRecord(request_id, started, time.monotonic(), code))


class HealthWatch:
    """A Health/Watch stream read by a thread: every status the server sent, and how the
    stream ended (``None`` while open)."""

    def __init__(self, channel: grpc.Channel, service: str) -> None:
        self.statuses: list[int] = []
        self.ended: grpc.StatusCode | None = None
        self.call = health(channel).Watch(
            health_pb2.HealthCheckRequest(service=service), timeout=120
        )
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for answer in self.call:
                self.statuses.append(answer.status)
            self.ended = self.call.code()
        except grpc.RpcError as error:
            self.ended = error.code()

    def wait_for(self, status: int, timeout: float = 30) -> bool:
        deadline = time.monotonic() + timeout
        while status not in self.statuses and time.monotonic() < deadline:
            time.sleep(0.005)
        return status in self.statuses

    def join(self, timeout: float = 30) -> None:
        self._thread.join(timeout)

    def stop(self) -> None:
        self.call.cancel()
        self.join()


@dataclass
class SigtermRun:
    """What a server under load did from SIGTERM to its exit."""

    server: ServerProcess
    load: Load
    signalled: float
    exit_code: int

    def handled(self) -> dict[str, dict[str, object]]:
        """The server's ``request`` log lines by request id: the calls the servicer ran."""
        return {str(line["request_id"]): line for line in self.server.log_events("request")}

    def requests_logged_between(self, first: str, last: str) -> list[str]:
        """Request ids the server logged after its ``first`` line and before ``last``."""
        events = [line.get("event") for line in self.server.logs]
        window = self.server.logs[events.index(first) + 1 : events.index(last)]
        return [str(line["request_id"]) for line in window if line.get("event") == "request"]


def sigterm_under_load(
    server: ServerProcess,
    health_checked: bool,
    watches: tuple[HealthWatch, ...] = (),
    after_signal: Callable[[], None] = lambda: None,
) -> SigtermRun:
    """Six clients play until 150 calls succeeded; then SIGTERM, ``after_signal()``, and
    wait for the exit.

    The ``watches`` (on another channel) are left open: the server must end them.
    """
    load = Load(server.target, health_checked)
    clients = [threading.Thread(target=load.run, args=(seed,)) for seed in range(6)]
    for client in clients:
        client.start()
    deadline = time.monotonic() + 60
    while load.ok_calls() < 150 and time.monotonic() < deadline:
        time.sleep(0.005)
    signalled = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    after_signal()
    exit_code = server.process.wait(90)
    for thread in clients:
        thread.join(60)
    for watch in watches:
        watch.join()
    server.terminate()  # reap the log reader
    assert not any(thread.is_alive() for thread in clients), "a client never stopped"
    assert load.ok_calls() >= 150, load.calls[-6:]
    assert len({call.request_id for call in load.calls}) == len(load.calls)
    return SigtermRun(server, load, signalled, exit_code)


#: How long before SIGTERM a call may have begun and still not have been sent.
UNSENT_SECONDS = 1.0


def test_sigterm_under_load_fails_no_call_of_health_checking_clients_and_exits_0():
    """Design section 6: on SIGTERM readiness turns NOT_SERVING, the server serves
    on for the drain delay while health-checking clients move away, then stops and exits 0.

    No call fails but those the clients refuse themselves, with UNAVAILABLE, once they
    know the server is not ready: nothing is CANCELLED (grpc/grpc#41785 cancels calls
    gRPC core received but had not handed over when the stop began; the delay lets
    core hand over every call received before the clients heard NOT_SERVING).
    """
    server = start_server(("--grace-seconds", "20", "--drain-delay-seconds", "3"))
    try:
        with grpc.insecure_channel(server.target, options=OWN_CONNECTION) as observer:
            readiness = HealthWatch(observer, "readiness")
            liveness = HealthWatch(observer, "liveness")
            # The whole server's name, which grpc_health_probe without -service and
            # clients' health checking with serviceName "" ask for (docs/operations.md,
            # "Termination").
            whole = HealthWatch(observer, "")
            assert all(watch.wait_for(SERVING) for watch in (readiness, liveness, whole))
            late_calls: list[str] = []

            def call_while_draining() -> None:
                """A client that checks no health calls after readiness turned NOT_SERVING."""
                server.wait_for_logs("draining")
                late_calls.append(uuid.uuid4().hex)
                with krypkasino(server.target) as stub:
                    stub.NewGame(
                        pb.NewGameRequest(config=pb.GameConfig(players=2)),
                        metadata=(("x-request-id", late_calls[0]),),
                        timeout=10,
                    )

            run = sigterm_under_load(
                server,
                health_checked=True,
                watches=(readiness, liveness, whole),
                after_signal=call_while_draining,
            )
    finally:
        server.kill()
    assert run.exit_code == 0
    # The Watch streams saw readiness drop, liveness stay up, and were ended by the
    # server (OK) when it stopped, not cut off at the end of the grace period.
    assert (readiness.statuses, readiness.ended) == ([SERVING, NOT_SERVING], grpc.StatusCode.OK)
    assert (whole.statuses, whole.ended) == ([SERVING, NOT_SERVING], grpc.StatusCode.OK)
    assert (liveness.statuses, liveness.ended) == ([SERVING], grpc.StatusCode.OK)

    # First, so that a line written past the logger (a traceback, gRPC core's) is shown.
    assert failure_lines(server) == []
    events = [line.get("event") for line in server.logs]
    assert events.count("draining") == events.count("stopping") == 1
    assert events.index("draining") < events.index("stopping") and events[-1] == "stopped"
    draining = server.log_events("draining")[0]
    assert (draining["signal"], draining["drain_delay_seconds"]) == ("SIGTERM", 3)
    assert draining["grace_seconds"] == 20

    handled = run.handled()
    for call in run.load.calls:
        # A call begun just before the signal may not have left its client by the time
        # the client hears NOT_SERVING (a thread waiting for the GIL; once under coverage
        # in a full parallel run), and is then refused by that client, never sent.
        sent_before = call.started < run.signalled - UNSENT_SECONDS
        if sent_before:  # in flight or done when SIGTERM came
            assert call.code == grpc.StatusCode.OK, call
        else:  # OK, or refused by the client: never CANCELLED, never anything else
            assert call.code in (grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE), call
        if call.code == grpc.StatusCode.OK:
            assert handled[call.request_id]["code"] == "OK", call
        else:
            assert call.request_id not in handled, call
    assert len(handled) == run.load.ok_calls() + len(late_calls)
    # The drain delay is real: a call that arrived once the server was draining was
    # served, and only then did the server stop. (Whether a health-checking client
    # still sends a call after the signal is a race it may lose, so a client without
    # health checks makes that call.)
    assert late_calls[0] in run.requests_logged_between("draining", "stopping")
    # Each client ended on UNAVAILABLE: it heard NOT_SERVING, then the server was gone.
    assert run.load.last_codes == [grpc.StatusCode.UNAVAILABLE] * 6


@pytest.mark.parametrize("processes", [1, 2], ids=["one_process", "workers"])
def test_sigterm_under_load_completes_every_call_the_servicer_accepted_without_health_checks(
    processes,
):
    """Design section 6: clients that check no health (``pick_first``) do not hear
    NOT_SERVING and may lose calls to the stop (UNAVAILABLE, or CANCELLED by
    grpc/grpc#41785), but never one the servicer began; and the exit status is 0. With
    ``--workers 2`` the supervisor forwards SIGTERM and exits 0 once every worker has
    drained (docs/operations.md, "Workers")."""
    args = ("--workers", "2", "--grpc-port", str(free_ports(1)[0])) if processes == 2 else ()
    with running((*args, "--grace-seconds", "20", "--drain-delay-seconds", "0")) as server:
        server.wait_for_logs("listening", processes)
        run = sigterm_under_load(server, health_checked=False)
    assert run.exit_code == 0
    assert len(server.log_events("stopped")) == processes
    assert server.log_events("draining")[0]["drain_delay_seconds"] == 0
    handled = run.handled()
    for call in run.load.calls:
        if call.request_id in handled:
            assert handled[call.request_id]["code"] == "OK", call
            assert call.code == grpc.StatusCode.OK, call
        else:
            assert call.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED), call
            assert call.ended > run.signalled, call
    assert len(run.load.last_codes) == 6


@pytest.mark.parametrize(
    "signals",
    [(signal.SIGINT,), (signal.SIGTERM, signal.SIGINT)],
    ids=["sigint", "sigint_during_the_drain_delay"],
)
def test_sigint_skips_the_drain_delay(signals):
    """``make serve`` stops on Ctrl-C without the drain delay (here ten minutes), also
    when Ctrl-C comes while a SIGTERM's delay runs."""
    with running(("--drain-delay-seconds", "600")) as server:
        for signum in signals:
            server.process.send_signal(signum)
            server.wait_for_logs("draining")
        assert server.process.wait(60) == 0  # well before the delay would have ended
    draining = server.log_events("draining")[0]
    assert draining["signal"] == signals[0].name
    assert draining["drain_delay_seconds"] == (600 if signals[0] == signal.SIGTERM else 0)
    assert [line.get("event") for line in server.logs][-2:] == ["stopping", "stopped"]


@pytest.mark.parametrize(
    "signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=["sigterm", "sighup", "sigint"]
)
@pytest.mark.parametrize("processes", [1, 2], ids=["one_process", "workers"])
def test_a_stop_signal_repeated_until_the_process_is_gone_still_exits_0(signum, processes):
    """Only the first SIGTERM counts: more of them, up to the last moment of the exit
    (after the event loop, whose handlers they met, has closed), change nothing, for the
    supervisor of ``--workers N`` too: Python resets the handlers it ran to the default
    action as it exits, and a SIGTERM then killed the supervisor (status 143). SIGHUP
    (the terminal of ``make serve`` closed) drains the same way: it used to kill the
    process with calls in flight. A SIGINT after the event loop closed (a second Ctrl-C)
    met asyncio's KeyboardInterrupt or that default action (status 130)."""
    args = ("--workers", "2", "--grpc-port", str(free_ports(1)[0])) if processes == 2 else ()
    with running((*args, "--drain-delay-seconds", "0.2")) as server:
        server.wait_for_logs("listening", processes)
        server.process.send_signal(signum)
        server.wait_for_logs("draining", processes)
        while server.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                server.process.send_signal(signum)
            time.sleep(0.0005)
        # terminate: the whole log read, for the message (status 1 once, under coverage
        # on a loaded machine, not seen again in 70 runs).
        assert server.terminate(60) == 0, failure_lines(server)
    assert len(server.log_events("stopped")) == processes
    assert not [line for line in server.logs if line.get("level") == "error"]
    if processes == 1:
        draining = server.log_events("draining")[0]
        assert draining["signal"] == signum.name
        assert draining["drain_delay_seconds"] == (0 if signum == signal.SIGINT else 0.2)
        assert [line.get("event") for line in server.logs][-2:] == ["stopping", "stopped"]


# -- health and reflection -----------------------------------------------------------------


@pytest.mark.parametrize("service", ["", "liveness", "readiness", SERVICE])
def test_health_reports_serving(grpc_target, service):
    """Design section 6: the standard health service answers for every probe name."""
    with grpc.insecure_channel(grpc_target) as channel:
        answer = health(channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
    assert answer.status == SERVING


def test_health_lists_every_name_it_answers_for(grpc_target):
    """The health protocol's List, which grpcio-health-checking leaves unimplemented (a
    call answered UNIMPLEMENTED, logged as an error with a traceback)."""
    with grpc.insecure_channel(grpc_target) as channel:
        list_request = health_pb2.HealthListRequest()  # type: ignore[attr-defined]
        listed = health(channel).List(list_request, timeout=10)
    assert {name: answer.status for name, answer in listed.statuses.items()} == {
        name: SERVING for name in ("", "liveness", "readiness", SERVICE)
    }


def test_health_does_not_know_other_services(grpc_target):
    with grpc.insecure_channel(grpc_target) as channel, pytest.raises(grpc.RpcError) as unknown:
        health(channel).Check(
            health_pb2.HealthCheckRequest(service="cardrules.crates.v1.CratesService"), timeout=10
        )
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize("service", ["cardrules.crates.v1.CratesService", "x" * 80_000])
def test_a_health_watch_of_another_service_ends_at_once(grpc_target, service):
    """An open Watch holds its name: a stream per unknown name must not stay open."""
    with grpc.insecure_channel(grpc_target) as channel:
        watch = HealthWatch(channel, service)
        watch.join(timeout=10)
    assert (watch.ended, watch.statuses) == (grpc.StatusCode.NOT_FOUND, [])


def test_a_health_watch_of_a_probe_name_stays_open(grpc_target):
    with grpc.insecure_channel(grpc_target) as channel:
        watch = HealthWatch(channel, "readiness")
        assert watch.wait_for(SERVING)
        time.sleep(0.5)
        assert watch.ended is None
        watch.stop()


def test_reflection_lists_and_describes_the_services(grpc_target):
    """Design section 6: server reflection, so grpcurl and friends need no proto files."""
    with grpc.insecure_channel(grpc_target) as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        # Reflection lists itself too (README): grpcurl list shows all three.
        assert sorted(database.get_services()) == sorted(
            [SERVICE, HEALTH, "grpc.reflection.v1alpha.ServerReflection"]
        )
        described = DescriptorPool(database).FindServiceByName(SERVICE)
        assert [m.name for m in described.methods] == [
            "NewGame",
            "LegalMoves",
            "Play",
            "Score",
            "GetView",
        ]
        assert described.methods_by_name["Play"].input_type.full_name == (
            "cardrules.krypkasino.v1.PlayRequest"
        )


def reflection_stream(
    channel: grpc.Channel,
) -> tuple[queue.Queue[reflection_pb2.ServerReflectionRequest | None], Any]:
    """A reflection stream that stays open, as a GUI tool's session does: put requests
    on the queue (None ends the stream), read its answers."""
    asked: queue.Queue[reflection_pb2.ServerReflectionRequest | None] = queue.Queue()
    stub: Any = cast(Any, reflection_pb2_grpc).ServerReflectionStub(channel)  # stubs untyped
    answers = stub.ServerReflectionInfo(iter(asked.get, None), timeout=120)
    return asked, answers


@pytest.mark.parametrize(
    ("symbol", "file"),
    [
        (f"{SERVICE}.Play", "cardrules/krypkasino/v1/krypkasino.proto"),
        (f"{HEALTH}.Check", "grpc_health/v1/health.proto"),
        (SERVICE, "cardrules/krypkasino/v1/krypkasino.proto"),
    ],
)
def test_reflection_describes_a_method_by_its_full_name(grpc_target, symbol, file):
    """grpcurl's ``describe Service.Method`` asks for the file holding the method: grpc's
    own reflection answered NOT_FOUND (its pool finds no method, grpc/grpc#34743)."""
    with grpc.insecure_channel(grpc_target) as channel:
        asked, answers = reflection_stream(channel)
        asked.put(reflection_pb2.ServerReflectionRequest(file_containing_symbol=symbol))
        answer = next(answers)
        asked.put(None)  # the client closes its side, as grpcurl does: the stream ends
        assert list(answers) == [] and answers.code() == grpc.StatusCode.OK
    assert answer.original_request.file_containing_symbol == symbol
    assert answer.WhichOneof("message_response") == "file_descriptor_response", answer
    first = answer.file_descriptor_response.file_descriptor_proto[0]
    assert FileDescriptorProto.FromString(first).name == file


def test_an_open_reflection_stream_ends_when_the_server_stops_not_at_the_grace_period():
    """Like a health Watch, a reflection stream a tool keeps open held ``server.stop``
    for the whole grace period (a reflection-only client's review: 12 s instead of 2):
    the server ends it, with OK, once the stop has begun."""
    with running(("--grace-seconds", "30", "--drain-delay-seconds", "0.2")) as server:
        server.wait_for_logs("listening")
        with grpc.insecure_channel(server.target) as channel:
            asked, answers = reflection_stream(channel)
            asked.put(reflection_pb2.ServerReflectionRequest(list_services=""))
            assert SERVICE in {s.name for s in next(answers).list_services_response.service}
            server.process.send_signal(signal.SIGTERM)
            assert list(answers) == []  # the stream ended, with OK: no error raised
            assert answers.code() == grpc.StatusCode.OK
            assert server.process.wait(25) == 0
            asked.put(None)


# -- token compatibility across releases --------------------------------------------------


LAST_MOVE = f"{pb.GameState.DESCRIPTOR.full_name}.last_move = 25"


def fixture_tokens(schema: int | None = None) -> list[Any]:
    """Each token of each fixture of ``schema`` (every version: None), with a test id."""
    return [
        pytest.param(path, index, id=f"{path.stem}-{token.get('scenario', index)}")
        for path in token_fixtures.fixtures(schema)
        for index, token in enumerate(token_fixtures.tokens(path))
    ]


def recorded(live: dict[str, Any], fixture: dict[str, Any]) -> dict[str, Any]:
    """``live`` restricted to the fields the fixture recorded, in nested messages too: later
    releases may add fields (views now name every setting of their config, for one)."""
    return {
        name: recorded(live[name], want)
        if isinstance(want, dict) and isinstance(live.get(name), dict)
        else live.get(name)
        for name, want in fixture.items()
    }


def as_dict(message: Any) -> dict[str, Any]:
    found: dict[str, Any] = json_format.MessageToDict(message, preserving_proto_field_name=True)
    return found


@pytest.mark.parametrize(("path", "index"), fixture_tokens())
def test_a_token_committed_by_this_release_opens_and_plays_to_the_end(path: Path, index: int):
    """Tokens survive rolling upgrades (design section 4): every committed token opens with
    the views and legal moves it was sealed with, and plays on to the final score the
    engine reaches from the same moves. Never regenerate a fixture to pass."""
    fixture = token_fixtures.tokens(path)[index]
    state = base64.b64decode(fixture["state"])
    tokens = [base64.b64decode(token) for token in fixture["seat_tokens"]]
    seat = fixture["seat_to_move"]
    config = json_format.ParseDict(fixture["config"], pb.GameConfig())
    decks = [parse_cards(deck) for deck in fixture["decks"]]
    engine, _ = open_game(codec.config_from_proto(config), seed=fixture["seed"], decks=decks)
    for move in fixture["moves_played"]:
        engine, _ = play(engine, engine.turn, Move.parse(move))
    # The state opens as the engine plays it, fields no view shows (the draw for deal's
    # cards) included: they travel in every later token. The first fixture, which lists
    # no fields, was sealed before GameState had a last move.
    made_with = json.loads(path.read_text()).get("state_fields", [])
    opened, game_id = state_from_proto(token_fixtures.sealed_state(fixture), trusted=True)
    then = engine if LAST_MOVE in made_with else replace(engine, last_move=None)
    assert (opened, game_id) == (then, fixture["game_id"])

    with running(keys=fixture["key"]) as server, krypkasino(server.target) as stub:
        public = as_dict(stub.GetView(pb.GetViewRequest(state=state)).view)
        assert recorded(public, fixture["public_view"]) == fixture["public_view"]
        assert public["game_id"] == fixture["game_id"]
        own = as_dict(
            stub.GetView(pb.GetViewRequest(state=state, seat=seat, seat_token=tokens[seat])).view
        )
        assert recorded(own, fixture["seat_view"]) == fixture["seat_view"]
        legal = as_dict(
            stub.LegalMoves(pb.LegalMovesRequest(state=state, seat=seat, seat_token=tokens[seat]))
        ).get("moves", [])
        expected = fixture["legal_moves"]["moves"]
        assert len(legal) == len(expected)
        assert [
            recorded(move, want) for move, want in zip(legal, expected, strict=True)
        ] == expected

        view = pb.View(turn=seat, move_number=engine.move_number, game_over=engine.over)
        game = Game(state, tokens, view, engine)
        play_on(game, lambda: stub, lambda n: n - 1)
        final = stub.Score(pb.ScoreRequest(state=game.state))
        assert final.game_over and final == codec.score_to_proto(score(game.engine))


@pytest.mark.parametrize(("path", "index"), fixture_tokens())
def test_the_fixture_is_sealed_under_its_own_test_key(path: Path, index: int):
    fixture = token_fixtures.tokens(path)[index]
    assert sealed_under(base64.b64decode(fixture["state"])) == key_id(fixture["key"])
    players = json_format.ParseDict(fixture["config"], pb.GameConfig()).players
    assert fixture["schema_version"] == 1 and len(fixture["seat_tokens"]) == players


def test_every_field_of_the_state_is_set_in_a_token_fixture():
    """Every field of ``GameState`` (and of the messages inside it) holds a value other than
    its default in the opened state of some committed token of this schema version, the
    items the codec derives instead of reading aside (``DERIVED``). A field no token sets
    is in no test: ``GameState.last_move`` came a few days after the only fixture, and a
    release that read a field differently from the one that sealed it (the sweep and
    double sweep's marker numbers swapped, winners read as the tie-break teams) passed
    while the fixtures recorded only the fields' names."""
    missing = sorted(token_fixtures.unset(token_fixtures.fixtures()))
    assert not missing, f"{missing}: run python -m tests.service.fixtures.make_token_fixture"


# -- connection ageing -------------------------------------------------------------------


def get_views_until(
    target: str, enough: Callable[[], bool], timeout: float = 120, threads: int = 4
) -> int:
    """GetView calls from ``threads`` threads on one channel, so that some are in flight
    whenever the server ages the connection out, until ``enough()`` (each thread makes
    at least one call). A failed call fails the test, and so does ``enough()`` still
    false after ``timeout`` seconds. Returns how many calls were made, NewGame included."""
    stop = threading.Event()
    with krypkasino(target) as stub:
        game = stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2), seed=3))

        def calls() -> int:
            made = 0
            while not (made and stop.is_set()):
                stub.GetView(pb.GetViewRequest(state=game.state), timeout=30)
                made += 1
            return made

        with ThreadPoolExecutor(threads) as pool:
            callers = [pool.submit(calls) for _ in range(threads)]
            deadline = time.monotonic() + timeout
            try:
                # A caller that is done before the stop has failed: result() raises below.
                while not enough() and not any(caller.done() for caller in callers):
                    assert time.monotonic() < deadline, f"not enough after {timeout} s"
                    time.sleep(0.02)
            finally:
                stop.set()
            return 1 + sum(caller.result() for caller in callers)


def peers(server: ServerProcess) -> set[object]:
    """The client addresses (``host:port``) in ``server``'s request log: one per connection."""
    return {line["peer"] for line in server.log_events("request")}


def test_connections_are_aged_out_and_the_client_reconnects_without_a_failed_call():
    """--max-connection-age-seconds: grpc sends GOAWAY after about that long, the channel
    opens a new connection (a new client port in the log's ``peer``), and no call fails."""
    with running(("--max-connection-age-seconds", "1")) as server:
        calls = get_views_until(server.target, lambda: len(peers(server)) >= 3)
    # The server has stopped and its log reader is joined: every request line is in.
    requests = server.log_events("request")
    assert len(requests) == calls
    assert [line for line in requests if line["code"] != "OK"] == []
    assert len(peers(server)) >= 3


def test_without_a_connection_age_the_connection_is_kept():
    """0, the default, never ages a connection out: calls spread over three seconds
    (three times the least age) all go over the one connection."""
    with running(("--max-connection-age-seconds", "0")) as server:
        until = time.monotonic() + 3
        calls = get_views_until(server.target, lambda: time.monotonic() >= until)
    requests = server.log_events("request")
    assert len(requests) == calls
    assert [line for line in requests if line["code"] != "OK"] == []
    assert len(peers(server)) == 1, peers(server)


def states_after_one_call(target: str, seconds: float) -> list[str]:
    """A channel (a connection of its own, no keepalive pings) makes one call, then stays
    idle for ``seconds`` or until it falls IDLE, then makes a second call. Returns the
    states the channel went through after the first call (READY first)."""
    seen: queue.Queue[grpc.ChannelConnectivity] = queue.Queue()
    states: list[str] = []
    with grpc.insecure_channel(target, options=OWN_CONNECTION) as channel:
        stub = krypkasino_pb2_grpc.KrypkasinoServiceStub(channel)
        stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2), seed=3), timeout=10)
        channel.subscribe(seen.put, try_to_connect=False)
        deadline = time.monotonic() + seconds
        while "IDLE" not in states and (left := deadline - time.monotonic()) > 0:
            with contextlib.suppress(queue.Empty):
                states.append(seen.get(timeout=left).name)
        # Closed or not, the next call goes through: the channel reconnects by itself.
        stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2), seed=4), timeout=10)
        channel.unsubscribe(seen.put)
    return states


@pytest.mark.parametrize(
    ("flags", "closed"),
    [(("--max-connection-idle-seconds", "1"), True), ((), False)],
    ids=["idle-1s", "default"],
)
def test_a_connection_without_calls_is_closed_after_the_idle_time(flags, closed):
    """--max-connection-idle-seconds: grpc keeps a connection that opens no call for
    ever unless told (an HTTP/2 review: 10,000 idle connections held 10,000 descriptors
    and 145 MiB). At 1 s the server sends GOAWAY about a second after the call ended,
    the channel falls from READY to IDLE, and its next call reconnects (a new peer)
    without failing; the default, 5 minutes, keeps the connection over the same wait."""
    with running(flags) as server:
        states = states_after_one_call(server.target, seconds=4)
    requests = server.log_events("request")
    assert [line["code"] for line in requests] == ["OK", "OK"]
    assert states[:1] == ["READY"], states
    assert ("IDLE" in states) is closed, states
    assert len(peers(server)) == (2 if closed else 1), peers(server)


# -- configuration -------------------------------------------------------------------------


def grpc_options(flags: tuple[str, ...]) -> dict[str, int]:
    """The grpc core options of a server given ``flags`` and no variables."""
    parser = argparse.ArgumentParser()
    add_server_arguments(parser)
    return dict(grpc_server_options(resolve(parser.parse_args(flags), environ={})))


@pytest.mark.parametrize(
    ("flags", "age_ms"),
    [
        ((), None),
        (("--max-connection-age-seconds", "300"), 300_000),
        (("--max-connection-age-seconds", "1.2346"), 1235),
    ],
)
def test_the_connection_age_becomes_grpcs_option_in_milliseconds(flags, age_ms):
    options = grpc_options(flags)
    assert options.get("grpc.max_connection_age_ms") == age_ms
    # Calls open at the age limit get 30 s: a call whose request never came ends too.
    assert options.get("grpc.max_connection_age_grace_ms") == (age_ms and 30_000)
    assert options["grpc.max_concurrent_streams"] == 500  # docs/operations.md says so


@pytest.mark.parametrize(
    ("flags", "idle_ms"),
    [
        ((), 300_000),
        (("--max-connection-idle-seconds", "0"), None),
        (("--max-connection-idle-seconds", "86400"), 86_400_000),
        (("--max-connection-idle-seconds", "1.2346"), 1235),
    ],
)
def test_the_connection_idle_time_becomes_grpcs_option_in_milliseconds(flags, idle_ms):
    """5 minutes by default; 0 leaves the option out, and grpc keeps idle connections."""
    options = grpc_options(flags)
    assert options.get("grpc.max_connection_idle_ms") == idle_ms


def test_environment_variables_alone_configure_the_server():
    """Design section 6: ``CARDRULES_*`` variables, no flags."""
    port, http_port, metrics_port = free_ports(3)
    env = {
        "CARDRULES_HOST": "127.0.0.1",
        "CARDRULES_GRPC_PORT": str(port),
        "CARDRULES_HTTP_PORT": str(http_port),
        "CARDRULES_METRICS_PORT": str(metrics_port),
        "CARDRULES_GRACE_SECONDS": "3",
        "CARDRULES_DRAIN_DELAY_SECONDS": "0.5",
        "CARDRULES_MAX_REQUEST_BYTES": "2048",
    }
    with running(env=env, loopback_flags=False) as server:
        listening = server.log_events("listening")[0]
        assert listening["grpc"] == f"127.0.0.1:{port}" and server.grpc_port == port
        assert server.http_port == http_port
        server.wait_for_logs("metrics")
        assert server.metrics_port == metrics_port
        assert new_games_handled(metric_samples(server.metrics_url)) == 0
        with krypkasino(server.target) as stub:
            game = stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2), seed=1))
            assert stub.Score(pb.ScoreRequest(state=game.state)).totals == [0, 0]
            with pytest.raises(grpc.RpcError) as too_big:
                stub.GetView(pb.GetViewRequest(state=bytes(4096)))
            assert too_big.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        samples = metric_samples(server.metrics_url)
        assert new_games_handled(samples) == 1
        # One process: its own CPU and memory, as a default registry has them.
        assert process_series(samples)["process_resident_memory_bytes"] > 10 * 2**20
        assert process_series(samples)["process_cpu_seconds_total"] > 0
        assert any(name == "python_info" for name, _ in samples)
    draining = server.log_events("draining")[0]
    assert (draining["grace_seconds"], draining["drain_delay_seconds"]) == (3, 0.5)


def test_a_flag_wins_over_its_environment_variable():
    with running(("--workers", "1"), {"CARDRULES_WORKERS": "abc"}) as server:
        assert len(server.log_events("listening")) == 1


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("CARDRULES_WORKERS", "abc"),
        ("CARDRULES_WORKERS", "0"),
        ("CARDRULES_MAX_REQUEST_BYTES", "-1"),
        ("CARDRULES_GRACE_SECONDS", "soon"),
        ("CARDRULES_DRAIN_DELAY_SECONDS", "-1"),
        ("CARDRULES_MAX_CONNECTION_AGE_SECONDS", "forever"),
        ("CARDRULES_MAX_CONNECTION_AGE_SECONDS", "-5"),
        ("CARDRULES_MAX_CONNECTION_AGE_SECONDS", "0.001"),
        ("CARDRULES_MAX_CONNECTION_IDLE_SECONDS", "0.5"),
        ("CARDRULES_MAX_CONNECTION_IDLE_SECONDS", "86401"),
        ("CARDRULES_HTTP_KEEPALIVE_SECONDS", "0"),
        ("CARDRULES_HTTP_KEEPALIVE_SECONDS", "7201"),
        ("CARDRULES_LOG_FORMAT", "xml"),
        ("CARDRULES_PLAIN_STATE", "maybe"),
    ],
)
def test_a_bad_environment_value_exits_2_with_one_line_naming_it(variable, value):
    result = serve_and_fail(env={variable: value})
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("cardrules: error: "), result.stderr
    assert variable in lines[0]


@pytest.mark.parametrize("bad", ["c2VjcmV0LWtleS10b28tc2hvcnQ=", "th1s-is-N0T*base64!"])
def test_a_bad_state_key_exits_2_without_echoing_any_key(bad):
    good = KeyRing.generate_key_text()
    result = serve_and_fail(keys=f"{good},{bad}")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("cardrules: error: CARDRULES_STATE_KEYS: key 2 ")
    assert len(result.stderr.splitlines()) == 1
    for secret in (good, bad, good.rstrip("="), bad.rstrip("=")):
        assert secret not in result.stderr


def test_a_key_list_with_an_empty_entry_exits_2() -> None:
    """Step 1 of a rotation whose script read no current keys would write ``,NEW``."""
    result = serve_and_fail(keys="," + KeyRing.generate_key_text())
    assert result.returncode == 2
    assert result.stderr.startswith("cardrules: error: CARDRULES_STATE_KEYS: key 1 is empty")


def test_state_keys_set_but_empty_exit_2_instead_of_an_ephemeral_key() -> None:
    """An empty Secret must not leave a pod serving tokens no other replica can open."""
    result = serve_and_fail(keys="")
    assert result.returncode == 2
    assert result.stderr == (
        "cardrules: error: CARDRULES_STATE_KEYS: no keys given: "
        "expected base64 AES-256 keys, separated by commas, spaces or new lines\n"
    )


def test_a_bad_key_in_the_keys_file_names_the_file_variable(tmp_path: Path) -> None:
    keys_file = tmp_path / "state-keys"
    keys_file.write_text(KeyRing.generate_key_text() + "\nc2hvcnQ=\n")
    result = serve_and_fail(env={"CARDRULES_STATE_KEYS_FILE": str(keys_file)}, keys=None)
    assert result.returncode == 2
    assert result.stderr.startswith("cardrules: error: CARDRULES_STATE_KEYS_FILE: key 2 ")


def test_a_binary_keys_file_is_refused_without_quoting_its_bytes(tmp_path: Path) -> None:
    """A raw key (``openssl rand 32 > file``) instead of base64 is a config error naming
    the variable, never a traceback that quotes a byte of the key and where it was."""
    keys_file = tmp_path / "state-keys"
    raw = bytes.fromhex("d3") + bytes(range(1, 30)) + bytes.fromhex("fffe")
    keys_file.write_bytes(raw)
    result = serve_and_fail(env={"CARDRULES_STATE_KEYS_FILE": str(keys_file)}, keys=None)
    assert result.returncode == 2
    assert result.stderr == (
        f"cardrules: error: CARDRULES_STATE_KEYS_FILE: {keys_file} is not text: "
        "expected base64 AES-256 keys, one per line (not raw key bytes)\n"
    )


@pytest.mark.parametrize("source", ["CARDRULES_STATE_KEYS_FILE", "--state-keys-file"])
def test_keys_given_where_the_keys_file_belongs_are_not_echoed(source: str) -> None:
    """A Secret wired to the file's variable instead of CARDRULES_STATE_KEYS: the refusal
    reaches the pod's log, so it must not quote the keys as the name of a missing file."""
    keys = [KeyRing.generate_key_text(), KeyRing.generate_key_text()]
    value = ",".join(keys)
    if source.startswith("--"):
        result = serve_and_fail(source, value, keys=None)
    else:
        result = serve_and_fail(env={source: value}, keys=None)
    assert result.returncode == 2
    assert result.stderr == (
        f"cardrules: error: {source}: cannot read the file it names (No such file or "
        "directory), whose name is not shown: it reads as state keys, which go in "
        "CARDRULES_STATE_KEYS (this setting takes the path of a file of them)\n"
    )
    for key in keys:
        assert key.rstrip("=") not in result.stderr


KEY_A, KEY_B = KeyRing.generate_key_text(), KeyRing.generate_key_text().rstrip("=")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # Keys separated by white space (docs/api.md) but not quoted: the shell splits them.
        (("--state-keys", KEY_A, KEY_B), "unrecognized arguments: {key}"),
        (("--stat-keys", KEY_A), "unrecognized arguments: --stat-keys {key}"),
        # No abbreviations: --state-key= had been ambiguous, --state-keys= would be taken.
        ((f"--state-key={KEY_A}",), "unrecognized arguments: --state-key={key}"),
        (
            (f"--plain-state={KEY_B}",),
            "--plain-state/--no-plain-state: takes no value, not '{key}': give --plain-state "
            "or --no-plain-state alone",
        ),
    ],
)
def test_a_state_key_in_a_mistyped_command_line_is_not_echoed(
    args: tuple[str, ...], message: str
) -> None:
    """argparse quotes the arguments it refuses; stderr goes to a log, where no state key
    may go (design section 4), so each key is replaced, the rest of the message kept."""
    result = serve_and_fail(*args, keys=None)
    assert result.returncode == 2
    hidden = message.format(key="[a state key, not shown]")
    assert result.stderr == f"cardrules: error: {hidden} (see cardrules serve --help)\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--state-keys", KEY_A, "--state-keys", KEY_B),
            "--state-keys given twice: give every key in one value, separated by commas or white space",
        ),
        (
            ("--cors-origins", "https://a.example", "--cors-origins", "https://b.example"),
            "--cors-origins given twice: give every origin in one value, separated by commas or white space",
        ),
        # A prefix unique today would break, or set another flag, once a flag is added.
        (("--grpc", "5"), "unrecognized arguments: --grpc 5"),
        (("--work", "2"), "unrecognized arguments: --work 2"),
    ],
)
def test_a_list_given_twice_or_an_abbreviated_flag_is_refused(
    args: tuple[str, ...], message: str
) -> None:
    """argparse kept the last of two lists, so ``--state-keys NEW --state-keys OLD`` served
    with OLD alone, and took ``--grpc 5`` for ``--grpc-port 5`` (a configuration review)."""
    result = serve_and_fail(*args, keys=None)
    assert result.returncode == 2
    assert result.stderr == f"cardrules: error: {message} (see cardrules serve --help)\n"


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (
            ("--grpc-port", KEY_A),
            {},
            "--grpc-port: must be a whole number from 0 to 65535, not '{key}'",
        ),
        (
            ("--log-level", KEY_A),
            {},
            "--log-level: must be one of debug, info, warning, error, not '{key}'",
        ),
        (
            (),
            {"CARDRULES_PLAIN_STATE": KEY_A},
            "CARDRULES_PLAIN_STATE: must be true or false (true, false, 1, 0, yes, no, on or off),"
            " not '{key}'",
        ),
        (("--host", KEY_A), {}, "--host: {key} is not a host name or address"),
    ],
)
def test_a_state_key_given_to_another_setting_is_not_echoed(
    args: tuple[str, ...], env: dict[str, str], message: str
) -> None:
    """A Secret wired to the wrong variable, or a key pasted after the wrong flag: the
    setting's refusal quoted it, and a host that a key passed for reached the JSON
    ``cannot listen`` line too (a CLI review's find)."""
    result = serve_and_fail(*args, env=env, keys=None)
    assert result.returncode == 2
    assert result.stderr.startswith(
        "cardrules: error: " + message.format(key="[a state key, not shown]")
    )
    assert KEY_A not in result.stderr + result.stdout


def test_one_connection_holds_a_bounded_number_of_calls_whose_request_never_comes(
    grpc_target,
):
    """A call open without its request holds server memory until its client gives up:
    one connection may hold ``MAX_CONCURRENT_STREAMS`` (``grpc.max_concurrent_streams``),
    then its next call waits for one of them to end instead of reaching the server."""
    method = f"/{SERVICE}/NewGame"
    request = pb.NewGameRequest(config=pb.GameConfig(players=2)).SerializeToString()
    stop = threading.Event()

    def never_sent() -> Iterator[bytes]:
        stop.wait()
        yield from ()

    with grpc.insecure_channel(grpc_target, options=OWN_CONNECTION) as channel:
        stalled_call: Any = channel.stream_unary(method)  # bytes in, bytes out
        new_game: Any = channel.unary_unary(method)
        stalled = [stalled_call.future(never_sent()) for _ in range(MAX_CONCURRENT_STREAMS)]
        try:
            with pytest.raises(grpc.RpcError) as waited:
                new_game(request, timeout=3)
            assert waited.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        finally:
            for call in stalled:
                call.cancel()
            stop.set()
        assert new_game(request, timeout=10)  # a stream is free again


def test_a_connection_far_below_the_stream_limit_never_has_a_call_refused(grpc_target):
    """grpc counts a call against ``grpc.max_concurrent_streams`` for a moment after its
    answer has gone: with a limit of 100, a client keeping 150 calls in flight on one
    connection (and even 90, now and then) had some refused with UNAVAILABLE
    (RST_STREAM REFUSED_STREAM) instead of queued. A client without a retry policy on
    UNAVAILABLE, as this one, sees any such refusal."""
    method = f"/{SERVICE}/NewGame"
    request = pb.NewGameRequest(config=pb.GameConfig(players=2)).SerializeToString()
    in_flight, rounds = 150, 8

    async def run() -> list[grpc.StatusCode]:
        async with grpc.aio.insecure_channel(grpc_target, options=OWN_CONNECTION) as channel:
            new_game: Any = channel.unary_unary(method)

            async def caller() -> list[grpc.StatusCode]:
                failures = []
                for _ in range(rounds):
                    try:
                        await new_game(request, timeout=30)
                    except grpc.aio.AioRpcError as error:
                        failures.append(error.code())
                return failures

            answers = await asyncio.gather(*(caller() for _ in range(in_flight)))
        return [code for failures in answers for code in failures]

    assert asyncio.run(run()) == []


def test_every_drained_name_is_not_serving_from_the_start_of_the_drain_delay():
    """At SIGTERM ``""``, ``readiness`` and the service's own name turn NOT_SERVING as the
    drain delay begins, not after it (clients that health-check any of them must move
    away while the server still answers), and ``liveness`` stays SERVING. A mutation
    review found neither the moment nor the service's name pinned. ``List`` says the
    same as ``Check`` (it kept saying SERVING once ``set`` stopped updating it)."""
    with running(("--drain-delay-seconds", "600")) as server:
        server.process.terminate()
        server.wait_for_logs("draining")
        with grpc.insecure_channel(server.target) as channel:
            check = health(channel).Check
            statuses = {
                name: check(health_pb2.HealthCheckRequest(service=name), timeout=10).status
                for name in ("", "readiness", SERVICE, "liveness")
            }
            list_request = health_pb2.HealthListRequest()  # type: ignore[attr-defined]
            listed = health(channel).List(list_request, timeout=10)
        assert statuses == {
            "": NOT_SERVING,
            "readiness": NOT_SERVING,
            SERVICE: NOT_SERVING,
            "liveness": SERVING,
        }
        assert {name: answer.status for name, answer in listed.statuses.items()} == statuses
        server.process.send_signal(signal.SIGINT)  # cuts the delay short
        assert server.process.wait(60) == 0
