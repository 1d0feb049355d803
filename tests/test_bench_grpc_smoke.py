"""The gRPC benchmark still runs end to end (a smoke run; timings are never asserted)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from prometheus_client import CollectorRegistry

from bench import grpc as grpc_bench
from bench.grpc_load import load, write_requests
from bench.grpc_server import (
    ECHO_METHOD,
    INSTRUMENTED_ECHO_METHOD,
    PLAY_FLOOR_METHOD,
    play_floor,
)
from bench.server import BENCH_KEY
from service.calls import CallInfo
from service.codec import CodecError
from service.config import ServerConfig
from service.errors import ServiceError
from service.grpc_service import parsing
from service.server import build_api, new_metrics
from service.tokens import KeyRing, SeatTokenError
from tests.process_groups import assert_sigterm_stops_the_whole_run


def test_quick_grpc_run_writes_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "grpc.json"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        # A server setting left in the caller's environment, here an HTTP port that is
        # taken, must not reach the servers the benchmark starts.
        env = {**os.environ, "CARDRULES_HTTP_PORT": str(taken.getsockname()[1])}
        done = subprocess.run(
            # Two rounds, so that the run shows it alternates its calls' order.
            [sys.executable, "-m", "bench", "grpc", "--quick", "--rounds", "2", "--json", str(out)],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
    assert done.returncode == 0, done.stderr
    assert "throughput ratio Play/echo" in done.stdout and "the ceiling" in done.stdout
    assert "Play floor/echo" in done.stdout
    whole = json.loads(out.read_text())
    assert {"loadavg_start", "loadavg_end"} <= set(whole["meta"])
    report = whole["grpc"]
    for call in ("play", "echo", "echo_instrumented", "play_floor"):
        side = report["side_by_side"][call]
        assert side["failures"] == 0 and side["throughput_rps"] > 0, side
        # The "server CPU time per Play": the server's, measured per call.
        assert side["server_cpu_us_per_call"] > 0, side
        assert side["latency"]["p50_us"] <= side["latency"]["p99_us"]
        assert (
            0 < side["main_thread_running_pct"] <= 100
            and side["main_thread_scheduled_per_call"] > 0
        )
        assert 0 <= side["main_thread_waiting_for_a_core_pct"] <= 100
    sides = report["side_by_side"]
    for ratio in ("ratio", "ratio_instrumented", "ceiling", "floor"):
        rounds = sides[ratio + "_rounds"]
        assert len(rounds) == 2 and 0 < min(rounds) <= sides[ratio] <= max(rounds), (ratio, sides)
    loaded = re.findall(r"^round (\d)/2 (\w+): \d+ calls$", done.stderr, re.MULTILINE)
    assert loaded == [
        ("1", "play"),
        ("1", "echo"),
        ("1", "echo_instrumented"),
        ("1", "play_floor"),
        ("2", "play_floor"),
        ("2", "echo_instrumented"),
        ("2", "echo"),
        ("2", "play"),
    ], done.stderr
    first, every = report["token_bytes_mid_deal"], report["token_bytes_mid_every_deal"]
    assert 0 < first["median"] <= first["max"] < every["max"]
    assert every["by_deal"][0] == {"deal": 1, **first}
    assert any(
        t["metric"].endswith("every deal (goal)") and t["value"] == every["max"]
        for t in report["targets"]
    )
    for workers in ("workers_1", "workers_2"):
        assert report["workers"][workers]["failures"] == 0
        assert report["workers"][workers]["throughput_rps"] > 0


def test_a_call_answered_with_an_error_fails_the_run() -> None:
    """Throughput counts only the answered calls, so any failure fails the run (exit 1), as
    in ``bench http`` and ``bench overload``: ``bench grpc`` exited 0 whatever failed."""
    requests, _, _ = grpc_bench.play_stream(1)
    refused = pb.PlayRequest(state=b"not a state token", seat=0, seat_token=b"x")
    # First, so the first call of the load fails however few calls a loaded machine makes.
    path = write_requests([refused.SerializeToString(), *requests])
    try:
        workers = grpc_bench.workers_throughput(path, 0.3, 4)
    finally:
        path.unlink()
    assert all(w["failures"] > 0 and w["throughput_rps"] > 0 for w in workers.values()), workers
    answered = {"failures": 0}
    sides = dict.fromkeys(("play", "echo", "echo_instrumented", "play_floor"), answered)
    report = {"side_by_side": sides, "workers": workers}
    assert grpc_bench.failed_calls(report) == sum(w["failures"] for w in workers.values())
    no_failures = {name: {**w, "failures": 0} for name, w in workers.items()}
    assert grpc_bench.failed_calls({"side_by_side": sides, "workers": no_failures}) == 0


def test_a_round_with_no_call_answered_says_why() -> None:
    """A round whose every call failed ended the run in a bare ``no samples`` or a
    ZeroDivisionError, naming neither the call nor how it failed."""
    refused = pb.PlayRequest(state=b"not a state token", seat=0, seat_token=b"x")
    path = write_requests([refused.SerializeToString()])
    try:
        with pytest.raises(
            RuntimeError, match=r"no call to .*Play.* was answered.*INVALID_ARGUMENT"
        ):
            grpc_bench.workers_throughput(path, 0.3, 4)
    finally:
        path.unlink()


def test_sigterm_stops_the_servers_the_benchmark_started() -> None:
    """A CI job's time limit sends SIGTERM: the benchmark server it had started kept
    running, orphaned, for good."""
    # The first round's first note: its server is serving.
    assert_sigterm_stops_the_whole_run(
        ["grpc", "--quick"], lambda line: line.startswith("round 1/")
    )


ECHO_BYTES = 100


@contextlib.contextmanager
def _benchmark_server(
    tmp_path: Path, requests: list[bytes]
) -> Iterator[tuple[str, list[dict[str, object]]]]:
    """A real benchmark server on loopback echoing ``ECHO_BYTES``, with ``requests`` for
    its floor: its target, and a list that holds its log lines once it has stopped."""
    path = write_requests(requests)
    port_file, log = tmp_path / "port", tmp_path / "server.log"
    # A file, not a pipe nobody reads while the calls run: a full pipe would block the
    # server's request lines, and the server with them.
    with log.open("w") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "bench.grpc_server", str(port_file), str(ECHO_BYTES), str(path)],
            stdout=out,
        )
    logged: list[dict[str, object]] = []
    try:
        while not port_file.exists() or not port_file.read_text():
            assert server.poll() is None, "the benchmark server did not start"
            time.sleep(0.05)
        yield f"127.0.0.1:{port_file.read_text()}", logged
    finally:
        server.terminate()
        server.wait(timeout=30)
        path.unlink()
    logged.extend(json.loads(line) for line in log.read_text().splitlines())


def _calls_on_the_benchmark_server(
    tmp_path: Path, requests: list[bytes], calls: list[tuple[str, bytes]]
) -> tuple[list[bytes | grpc.StatusCode], list[dict[str, object]]]:
    """Each of ``calls`` (method, request) made once on ``_benchmark_server``: its answer
    (or the code it failed with), and the server's log lines."""
    answers: list[bytes | grpc.StatusCode] = []
    with (
        _benchmark_server(tmp_path, requests) as (target, logged),
        grpc.insecure_channel(target) as channel,
    ):
        for method, request in calls:
            call: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(method)
            try:
                answers.append(call(request, timeout=30))
            except grpc.RpcError as error:
                answers.append(error.code())
    return answers, logged


def test_the_play_floor_is_logged_as_play_is(tmp_path: Path) -> None:
    """The floor takes Play's whole path but the rules work (docs/benchmarks.md, "gRPC"):
    its request line left out the seat, move number and state id that Play's carries, on
    the real benchmark server over loopback. It answers what the engine answers."""
    requests, _, _ = grpc_bench.play_stream(1)
    middle = requests[len(requests) // 2]
    calls = [(grpc_bench.PLAY_METHOD, middle), (PLAY_FLOOR_METHOD, middle)]
    answers, lines = _calls_on_the_benchmark_server(tmp_path, requests, calls)
    play, floor = (line for line in lines if line.get("event") == "request")
    assert (play["method"], floor["method"]) == (grpc_bench.PLAY_METHOD[1:], PLAY_FLOOR_METHOD[1:])
    assert floor.keys() == play.keys(), (play, floor)
    for key in ("code", "game_id", "seat", "move_number", "transport"):
        assert floor[key] == play[key], key
    # The same answer but the state token, sealed under a nonce of its own.
    assert all(isinstance(answer, bytes) for answer in answers), answers
    played, floored = (pb.PlayResponse.FromString(a) for a in answers if isinstance(a, bytes))
    assert played.state and floored.state and len(floored.state) == len(played.state)
    played.ClearField("state")
    floored.ClearField("state")
    assert floored == played and played.view.ByteSize() > 0


def test_the_echoes_move_the_payload_and_only_the_instrumented_one_is_logged(
    tmp_path: Path,
) -> None:
    """Echo answers ``ECHO_BYTES`` whatever it is sent and takes no step of an RPC's path;
    InstrumentedEcho answers the same through ``serve_call``, request line included. Both
    run under the real server's options: a request over its limit is refused by grpc."""
    echo, instrumented = ECHO_METHOD, INSTRUMENTED_ECHO_METHOD
    calls = [(echo, b"x"), (instrumented, b"y" * 300), (echo, b"z" * (200 << 10))]
    answers, lines = _calls_on_the_benchmark_server(tmp_path, [], calls)
    assert answers == [b"\x01" * ECHO_BYTES] * 2 + [grpc.StatusCode.RESOURCE_EXHAUSTED]
    logged = [line["method"] for line in lines if line.get("event") == "request"]
    assert logged == [instrumented[1:]]


def test_the_load_spreads_over_its_channels_and_counts_every_call(tmp_path: Path) -> None:
    """Each channel is a connection of its own (a peer of its own in the request lines),
    every refused call is counted under its code, and each latency is of one call."""
    with _benchmark_server(tmp_path, []) as (target, logged):
        served = asyncio.run(load(target, INSTRUMENTED_ECHO_METHOD, [b"x"], 8, 1.0, 4))
        refused = asyncio.run(load(target, PLAY_FLOOR_METHOD, [b"\xff"], 4, 0.5, 1))
    lines = [line for line in logged if line.get("event") == "request"]
    echoes = [line for line in lines if line["method"] == INSTRUMENTED_ECHO_METHOD[1:]]
    assert served["calls"] == len(echoes) > 0 and served["failures"] == {}
    assert len({line["peer"] for line in echoes}) == 4
    latencies = served["ns"]
    assert isinstance(latencies, list) and isinstance(served["seconds"], float)
    assert served["seconds"] > 1.0  # measured: the calls in flight at the deadline end after it
    assert all(0 < ns <= served["seconds"] * 1e9 for ns in latencies)
    floors = [line for line in lines if line["method"] == PLAY_FLOOR_METHOD[1:]]
    assert floors and refused["calls"] == 0
    assert refused["failures"] == {"INVALID_ARGUMENT": len(floors)}


def test_the_play_floor_refuses_what_play_refuses() -> None:
    """It checks the seat token and parses the move, as Play does before its rules work."""
    requests, _, _ = grpc_bench.play_stream(1)
    config, keys = ServerConfig(), KeyRing.parse(BENCH_KEY)
    play = parsing(pb.PlayRequest, build_api(config, keys, None).play, 1 << 16)
    floor = play_floor(config, keys, None, requests)
    request = pb.PlayRequest.FromString(requests[0])
    forged = pb.PlayRequest()
    forged.CopyFrom(request)
    forged.seat_token = bytes(len(request.seat_token))
    refusals = []
    for handle in (play, floor):
        # Play answers the service's refusal; the floor lets the token's error through.
        with pytest.raises((ServiceError, SeatTokenError)) as refused:
            handle(forged.SerializeToString(), CallInfo())
        error = refused.value
        assert isinstance(error, ServiceError | SeatTokenError)
        refusals.append(error.reason)
    assert refusals[0] == refusals[1] == "SEAT_TOKEN_INVALID"
    request.ClearField("move")
    with pytest.raises(CodecError):
        floor(request.SerializeToString(), CallInfo())


def test_the_play_floor_queues_the_move_count_play_does() -> None:
    """The floor counts the move Play counts for the same request (``cardrules_moves_total``),
    as ``CallRunner`` counts a call whose answer stands."""
    requests, _, _ = grpc_bench.play_stream(1)
    config = ServerConfig()
    keys = KeyRing.parse(BENCH_KEY)
    registry = CollectorRegistry()
    metrics = new_metrics(registry)
    play = parsing(pb.PlayRequest, build_api(config, keys, metrics).play, 1 << 16)
    floor = play_floor(config, keys, metrics, requests)

    def moves() -> float:
        return sum(
            sample.value
            for family in registry.collect()
            if family.name == "cardrules_moves"
            for sample in family.samples
            if sample.name == "cardrules_moves_total"
        )

    for raw in requests:
        counted = []
        for handle in (play, floor):
            before = moves()
            info = CallInfo()
            handle(raw, info)
            for count in info.counts:
                count()
            counted.append(moves() - before)
        assert counted[1] == counted[0] >= 1, counted


def test_the_token_size_covers_every_deal_of_the_match(monkeypatch: pytest.MonkeyPatch) -> None:
    """The goal is on a 4-player state "in the middle of a deal": the benchmark measured
    the first deal's only, the smallest, as every finished deal travels in the token.
    A real match: its tokens are taken in the third distribution of each deal's six
    (``mid_deal``, which the stream is seen to ask: a review found the count of 16 a
    deal blind to which distribution gave them), one a play."""
    kept: list[tuple[int, int]] = []
    mid_deal = grpc_bench.mid_deal

    def seen(distribution: int, distributions: int) -> bool:
        if chosen := mid_deal(distribution, distributions):
            kept.append((distribution, distributions))
        return chosen

    monkeypatch.setattr(grpc_bench, "mid_deal", seen)
    requests, _, token_sizes = grpc_bench.play_stream(1)
    assert set(kept) == {(3, 6)} and len(kept) == 64
    # The default 4-player match deals once per player; the third distribution of each
    # deal gives each player 4 cards: 16 plays.
    assert sorted(token_sizes) == [1, 2, 3, 4]
    assert [len(token_sizes[deal]) for deal in (1, 2, 3, 4)] == [16] * 4
    figures = grpc_bench.token_figures(token_sizes)
    assert [deal["deal"] for deal in figures["by_deal"]] == [1, 2, 3, 4]
    first = figures["by_deal"][0]
    assert figures["max"] == max(deal["max"] for deal in figures["by_deal"]) > first["max"]
    # The load replayed is still the first deal's Plays alone.
    states = [pb.PlayRequest.FromString(raw).state for raw in requests]
    assert max(len(state) for state in states) < min(token_sizes[2])
