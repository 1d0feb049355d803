"""The HTTP benchmark still runs end to end and counts what it should (real servers;
timings are never asserted)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import aiohttp
import grpc
import pytest
from cardrules.krypkasino.v1 import krypkasino_pb2_grpc

from bench import http as http_bench
from bench.__main__ import build_parser
from bench.common import Json
from bench.server import BENCH_KEY, cardrules_serve, cardrules_server
from tests.service.grpc_helpers import game_state

CALLS = 20
JSON = {"Content-Type": "application/json"}


def test_quick_http_run_writes_every_figure(tmp_path: Path) -> None:
    """docs/benchmarks.md says make test smoke-runs each benchmark; http had no such run."""
    out = tmp_path / "http.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "http", "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "HTTP/gRPC throughput" in done.stdout
    report = json.loads(out.read_text())
    params = report["params"]
    assert report["command"] == "http" and params["stream"] > 0
    for transport in ("grpc", "http"):
        rounds = report["rounds"][transport]
        assert len(rounds) == params["rounds"]
        for figures in rounds:
            assert figures["requests"] == params["requests"] and figures["failures"] == 0
            assert 0 < figures["p50_us"] <= figures["p99_us"] and figures["rps"] > 0
        summary = report["summary"][transport]
        assert summary["failures"] == 0 and summary["rps"] > 0
        assert min(f["rps"] for f in rounds) <= summary["rps"] <= max(f["rps"] for f in rounds)
    summary = report["summary"]
    assert summary["http_to_grpc_rps"] == round(summary["http"]["rps"] / summary["grpc"]["rps"], 2)


def test_calls_answered_with_an_error_are_not_counted_as_throughput() -> None:
    """requests/s counts the answered ``Play``s only: a round of calls the gateway refused
    read as fast as the refusals came back."""

    async def refused_round(port: int) -> Json:
        url = f"http://127.0.0.1:{port}/v1/krypkasino:play"
        async with aiohttp.ClientSession() as session:

            async def refused(index: int) -> bool:
                # A Play without a state token: refused with a 400.
                async with session.post(url, data=b"{}", headers=JSON) as response:
                    await response.read()
                    return response.status == 200

            return await http_bench._load([refused, refused], CALLS)

    with cardrules_serve() as ports:
        figures = asyncio.run(refused_round(ports.http))
    assert figures["requests"] == figures["failures"] == CALLS, figures
    assert figures["rps"] == 0, figures


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ([], http_bench.Sizes(clients=8, requests=3000, rounds=5, games=20, moves=40)),
        (["--quick"], http_bench.Sizes(clients=8, requests=100, rounds=2, games=4, moves=40)),
        (
            ["--quick", "--clients", "1", "--requests", "1", "--rounds", "1"],
            http_bench.Sizes(clients=1, requests=1, rounds=1, games=4, moves=40),
        ),
    ],
)
def test_http_sizes_are_those_given_else_the_defaults(
    options: list[str], expected: http_bench.Sizes
) -> None:
    assert http_bench.sizes(build_parser().parse_args(["http", *options])) == expected


def test_the_request_stream_is_legal_moves_of_seeded_games_of_2_to_6_players_shuffled() -> None:
    """The stream ``bench http`` sends, as its docstring says: each game seeded apart,
    2 to 6 players in turn, every request a move its server accepts, the games interleaved
    so that no round meets one game's requests in a row."""
    with cardrules_serve() as ports:
        stream = http_bench.request_stream(ports.grpc, games=5, moves=6, seed=40)
        with grpc.insecure_channel(f"127.0.0.1:{ports.grpc}") as channel:
            stub = krypkasino_pb2_grpc.KrypkasinoServiceStub(channel)
            for request in stream:
                stub.Play(request, timeout=30)  # raises on a refusal
    states = [game_state(request.state, BENCH_KEY) for request in stream]
    players = {state.seed: state.config.players for state in states}
    assert players == {40: 2, 41: 3, 42: 4, 43: 5, 44: 6}
    seeds = [state.seed for state in states]
    assert sorted(seeds) == [seed for seed in range(40, 45) for _ in range(6)]
    assert seeds != sorted(seeds)


def test_a_refused_play_is_a_failed_call_over_both_transports() -> None:
    """Each round's calls go over both transports, and a call refused over either, by a
    gRPC status or an HTTP status other than 200, counts as failed."""
    size = http_bench.Sizes(clients=2, requests=12, rounds=2, games=1, moves=4)
    with cardrules_serve() as ports:
        stream = http_bench.request_stream(ports.grpc, size.games, size.moves, seed=3)
        tokens = {request.seat: request.seat_token for request in stream}
        assert sorted(tokens) == [0, 1]
        for request in stream:  # the other seat's token: PERMISSION_DENIED, HTTP 403
            request.seat_token = tokens[1 - request.seat]
        rounds = asyncio.run(http_bench._measure(ports, stream, size))
    for transport in http_bench.TRANSPORTS:
        assert [figures["requests"] for figures in rounds[transport]] == [12, 12]
        assert [figures["failures"] for figures in rounds[transport]] == [12, 12]


def test_every_request_of_the_stream_is_sent_alike_over_both_transports() -> None:
    """A round as long as the stream sends each of its requests once per transport, and
    the warm-up (50 calls over these 10) each five times: the server's request lines
    name each answered state once per call. The stream's own making played each once
    more over gRPC."""
    size = http_bench.Sizes(clients=2, requests=10, rounds=1, games=2, moves=5)
    with cardrules_server() as server:
        stream = http_bench.request_stream(server.ports.grpc, size.games, size.moves, seed=9)
        assert len(stream) == size.requests
        asyncio.run(http_bench._measure(server.ports, stream, size))
        logged = [json.loads(line) for line in server.log_path.read_text().splitlines()]
    plays = Counter(
        (line["transport"], line["state_id"])
        for line in logged
        if line.get("event") == "request" and line.get("method", "").endswith("/Play")
    )
    for transport, times in (("grpc", 7), ("http", 6)):
        sent = {state: n for (over, state), n in plays.items() if over == transport}
        assert len(sent) == len(stream) and set(sent.values()) == {times}, (transport, sent)
