"""``python -m bench http``: ``Play`` over HTTP/JSON beside ``Play`` over gRPC, one server.

One ``cardrules serve`` (one worker, request logging on, as in production)
answers both transports. The request stream is seeded: ``Play`` requests
taken from random games of 2 to 6 players, played once over gRPC at set-up,
so every request is a real, legal move. Each round sends the whole stream
once per transport from ``--clients`` concurrent clients, each on a
connection of its own (a gRPC channel, an HTTP keep-alive connection); the
order of the transports alternates between rounds. Per round: requests per
second and client-side latency p50/p99; the report gives the medians over
the rounds. Client and server share the machine, so the figures compare the
transports, they do not size a deployment.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from statistics import median

import aiohttp
import grpc
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from cardrules.krypkasino.v1 import krypkasino_pb2_grpc
from google.protobuf import json_format

from bench.common import (
    NS_PER_US,
    Json,
    Size,
    add_sizes,
    alternate,
    chosen_sizes,
    finish,
    meta,
    note,
    percentile,
    table,
)
from bench.server import Ports, cardrules_serve
from service.cli import seed_argument

TRANSPORTS = ("grpc", "http")
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]


@dataclass(frozen=True)
class Sizes:
    clients: int
    requests: int
    rounds: int
    games: int
    moves: int


HTTP_SIZES = {
    "clients": Size(8, 8, "concurrent clients"),
    "requests": Size(3000, 100, "Play requests per round and transport"),
    "rounds": Size(5, 2, "measured rounds"),
}


def configure(parser: argparse.ArgumentParser) -> None:
    add_sizes(parser, HTTP_SIZES)
    parser.add_argument("--seed", type=seed_argument, default=0, help="seed of the request stream")


def sizes(args: argparse.Namespace) -> Sizes:
    return Sizes(**chosen_sizes(args, HTTP_SIZES), games=4 if args.quick else 20, moves=40)


# -- the request stream ----------------------------------------------------------------


def request_stream(port: int, games: int, moves: int, seed: int) -> list[pb.PlayRequest]:
    """Legal ``Play`` requests from seeded random games (2 to 6 players)."""
    choose = random.Random(seed)
    stream: list[pb.PlayRequest] = []
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = krypkasino_pb2_grpc.KrypkasinoServiceStub(channel)
        for game in range(games):
            config = pb.GameConfig(players=2 + game % 5)
            started = stub.NewGame(pb.NewGameRequest(config=config, seed=(seed + game) % 2**64))
            state, tokens, view = started.state, started.seat_tokens, started.view
            for _ in range(moves):
                if not view.HasField("turn"):
                    break
                seat = view.turn
                legal = stub.LegalMoves(
                    pb.LegalMovesRequest(state=state, seat=seat, seat_token=tokens[seat])
                ).moves
                request = pb.PlayRequest(
                    state=state, seat=seat, seat_token=tokens[seat], move=choose.choice(legal).move
                )
                stream.append(request)
                played = stub.Play(request)
                state, view = played.state, played.view
    choose.shuffle(stream)
    return stream


# -- load --------------------------------------------------------------------------------

Call = Callable[[int], Awaitable[bool]]


async def _load(calls: list[Call], requests: int) -> Json:
    """Send ``requests`` calls from ``len(calls)`` concurrent clients; figures of the round."""
    latencies: list[int] = []
    failures = 0
    counter = iter(range(requests))

    async def client(call: Call) -> None:
        nonlocal failures
        for index in counter:
            start = time.perf_counter_ns()
            ok = await call(index)
            latencies.append(time.perf_counter_ns() - start)
            failures += not ok

    started = time.perf_counter()
    await asyncio.gather(*(client(call) for call in calls))
    return round_figures(latencies, failures, time.perf_counter() - started)


def round_figures(latencies: Sequence[int], failures: int, seconds: float) -> Json:
    """A round's figures from each call's nanoseconds, the failed calls among them, and the
    round's seconds."""
    ordered = sorted(latencies)
    return {
        "requests": len(ordered),
        "failures": failures,
        # Answered calls only: a refusal is no Play served, however fast it comes back.
        "rps": round((len(ordered) - failures) / seconds, 1),
        "p50_us": round(percentile(ordered, 0.50) / NS_PER_US, 1),
        "p99_us": round(percentile(ordered, 0.99) / NS_PER_US, 1),
    }


def load_order(rounds: int) -> list[tuple[int, str]]:
    """Every load of the measured rounds in turn, with its round (from 0): the transports'
    order reversed every other round."""
    return alternate(TRANSPORTS, rounds)


async def _measure(
    ports: Ports, stream: list[pb.PlayRequest], size: Sizes
) -> dict[str, list[Json]]:
    bodies = [json_format.MessageToJson(r, indent=None).encode() for r in stream]
    url = f"http://127.0.0.1:{ports.http}/v1/krypkasino:play"
    headers = {"Content-Type": "application/json"}
    channels = [
        grpc.aio.insecure_channel(f"127.0.0.1:{ports.grpc}", options=OWN_CONNECTION)
        for _ in range(size.clients)
    ]
    sessions = [
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) for _ in range(size.clients)
    ]
    try:

        def grpc_call(channel: grpc.aio.Channel) -> Call:
            stub = krypkasino_pb2_grpc.KrypkasinoServiceStub(channel)

            async def call(index: int) -> bool:
                try:
                    await stub.Play(stream[index % len(stream)], timeout=10)
                except grpc.RpcError:
                    return False
                return True

            return call

        def http_call(session: aiohttp.ClientSession) -> Call:
            async def call(index: int) -> bool:
                body = bodies[index % len(bodies)]
                async with session.post(url, data=body, headers=headers) as response:
                    await response.read()
                    return response.status == 200

            return call

        calls = {
            "grpc": [grpc_call(channel) for channel in channels],
            "http": [http_call(session) for session in sessions],
        }
        for transport in TRANSPORTS:  # warm-up: connections, caches, the JIT-less interpreter
            await _load(calls[transport], max(50, size.requests // 10))
        rounds: dict[str, list[Json]] = {transport: [] for transport in TRANSPORTS}
        for number, transport in load_order(size.rounds):
            rounds[transport].append(await _load(calls[transport], size.requests))
            note(f"round {number + 1} {transport}: {rounds[transport][-1]}")
        return rounds
    finally:
        for session in sessions:
            await session.close()
        for channel in channels:
            await channel.close()


def summarize(rounds: dict[str, list[Json]]) -> Json:
    """Medians over the rounds per transport, and HTTP relative to gRPC."""
    result: Json = {}
    for transport, figures in rounds.items():
        result[transport] = {
            key: round(median([f[key] for f in figures]), 1) for key in ("rps", "p50_us", "p99_us")
        }
        result[transport]["failures"] = sum(f["failures"] for f in figures)
    grpc_rps = result["grpc"]["rps"]
    # None when no gRPC call was answered (the run fails then, on its failures).
    result["http_to_grpc_rps"] = round(result["http"]["rps"] / grpc_rps, 2) if grpc_rps else None
    return result


def render(size: Sizes, stream: int, summary: Json) -> str:
    rows = [
        (t, summary[t]["rps"], summary[t]["p50_us"], summary[t]["p99_us"], summary[t]["failures"])
        for t in TRANSPORTS
    ]
    heading = (
        f"Play over gRPC and HTTP/JSON, one server process: {size.clients} clients, "
        f"{size.requests} requests x {size.rounds} rounds per transport, "
        f"{stream} distinct requests (medians over rounds)"
    )
    text = table(("transport", "requests/s", "p50 µs", "p99 µs", "failures"), rows)
    return f"{heading}\n{text}\nHTTP/gRPC throughput: {summary['http_to_grpc_rps']}"


def run(args: argparse.Namespace) -> int:
    size = sizes(args)
    with cardrules_serve() as ports:
        stream = request_stream(ports.grpc, size.games, size.moves, args.seed)
        note(f"{len(stream)} Play requests from {size.games} seeded games")
        rounds = asyncio.run(_measure(ports, stream, size))
    summary = summarize(rounds)
    print(render(size, len(stream), summary), flush=True)
    report: Json = {
        "command": "http",
        "meta": meta(),
        "params": {**size.__dict__, "seed": args.seed, "stream": len(stream)},
        "rounds": rounds,
        "summary": summary,
    }
    finish(report, args.json)
    return exit_status(summary)


def exit_status(summary: Json) -> int:
    """1 when a call over either transport failed, else 0."""
    return 1 if summary["grpc"]["failures"] + summary["http"]["failures"] else 0
