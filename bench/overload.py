"""``python -m bench overload``: a server past saturation (docs/operations.md, "Overload").

A real ``cardrules serve`` (one worker) gets far more ``Play`` calls in flight
than it can serve, over HTTP/JSON, over gRPC, and over both at once, from
load processes of their own, while this process asks the gRPC health service
``liveness`` every half second on a new connection with a 2 s timeout, as the
kubelet's probe does (k8s/base/deployment.yaml). Per scenario: each
transport's ``Play`` calls per second, and the probes' p50, worst and failures.
What it shows: whether a busy pod stays healthy to its probes, and how the
two transports share a saturated pod.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any

import aiohttp
import grpc
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from cardrules.krypkasino.v1 import krypkasino_pb2_grpc
from google.protobuf import json_format
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench.common import Json, Size, add_sizes, chosen_sizes, finish, meta, note, table
from bench.server import Ports, cardrules_serve

OVERLOAD_SIZES = {
    "http": Size(200, 50, "HTTP calls in flight"),
    "grpc": Size(200, 50, "gRPC calls in flight"),
    "seconds": Size(14, 5, "seconds of load per scenario"),
}
# (name, HTTP load, gRPC load)
SCENARIOS = (("HTTP", True, False), ("HTTP and gRPC", True, True), ("gRPC", False, True))
PROBE_EVERY_SECONDS = 0.5
PROBE_TIMEOUT_SECONDS = 2.0  # the manifests' timeoutSeconds
# Probes start once the load runs and stop before it ends.
SETTLE_SECONDS = 1.5
# At most this many calls per gRPC connection, well under the server's 500 streams.
CALLS_PER_CONNECTION = 100


@dataclass(frozen=True)
class Load:
    port: int
    in_flight: int
    seconds: float


def configure(parser: argparse.ArgumentParser) -> None:
    add_sizes(parser, OVERLOAD_SIZES)


def play_request(port: int) -> pb.PlayRequest:
    """The first legal move of a new 4-player game; replaying it is pure, so always legal."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = krypkasino_pb2_grpc.KrypkasinoServiceStub(channel)
        game = stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=4), seed=5))
        seat = game.view.turn
        token = game.seat_tokens[seat]
        legal = stub.LegalMoves(pb.LegalMovesRequest(state=game.state, seat=seat, seat_token=token))
        return pb.PlayRequest(
            state=game.state, seat=seat, seat_token=token, move=legal.moves[0].move
        )


def in_window(end: float) -> bool:
    """Whether a call that just ended counts as served: only those ended by ``end`` do.

    Each client's last call ends after ``end`` (a starved transport's seconds
    after, on a server the other load has left); counting those against the
    window's seconds added the calls in flight to each transport's Play/s
    (200 in 14 s: 14 a second, most of gRPC's share beside HTTP without the budget).
    """
    return time.monotonic() <= end


def http_load(load: Load, body: bytes, results: multiprocessing.Queue[Json]) -> None:
    """``load.in_flight`` HTTP clients, each on a connection of its own, for ``load.seconds``."""

    async def main() -> Json:
        url = f"http://127.0.0.1:{load.port}/v1/krypkasino:play"
        headers = {"Content-Type": "application/json"}
        served = failed = 0
        end = time.monotonic() + load.seconds
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:

            async def client() -> None:
                nonlocal served, failed
                while time.monotonic() < end:
                    try:
                        async with session.post(url, data=body, headers=headers) as response:
                            await response.read()
                            served += response.status == 200 and in_window(end)
                            failed += response.status != 200
                    except aiohttp.ClientError:
                        failed += 1

            await asyncio.gather(*(client() for _ in range(load.in_flight)))
        return {"transport": "http", "served": served, "failed": failed}

    results.put(asyncio.run(main()))


def grpc_load(load: Load, request: bytes, results: multiprocessing.Queue[Json]) -> None:
    """``load.in_flight`` gRPC clients over connections of their own, for ``load.seconds``."""

    async def main() -> Json:
        served = failed = 0
        end = time.monotonic() + load.seconds
        message = pb.PlayRequest.FromString(request)
        connections = -(-load.in_flight // CALLS_PER_CONNECTION)
        channels = [
            grpc.aio.insecure_channel(
                f"127.0.0.1:{load.port}", options=[("grpc.use_local_subchannel_pool", 1)]
            )
            for _ in range(connections)
        ]
        stubs = [krypkasino_pb2_grpc.KrypkasinoServiceStub(channel) for channel in channels]

        async def client(stub: krypkasino_pb2_grpc.KrypkasinoServiceAsyncStub) -> None:
            nonlocal served, failed
            while time.monotonic() < end:
                try:
                    await stub.Play(message, timeout=30)
                    served += in_window(end)
                except grpc.aio.AioRpcError:
                    failed += 1

        await asyncio.gather(*(client(stubs[n % connections]) for n in range(load.in_flight)))
        for channel in channels:
            await channel.close()
        return {"transport": "grpc", "served": served, "failed": failed}

    results.put(asyncio.run(main()))


def probe(port: int, until: float) -> tuple[list[float], int]:
    """Liveness checks every half second, start to start as the kubelet's period is, until
    ``until``: their seconds, and the failures (an error, a timeout or an answer other
    than ``SERVING``, as the kubelet's gRPC probe counts them)."""
    seconds: list[float] = []
    failures = 0
    while not seconds or time.monotonic() < until:  # at least one, however short the run
        started = time.monotonic()
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub: Any = health_pb2_grpc.HealthStub(channel)  # its type stubs lack Check
            try:
                answer = stub.Check(
                    health_pb2.HealthCheckRequest(service="liveness"),
                    timeout=PROBE_TIMEOUT_SECONDS,
                )
            except grpc.RpcError:
                failures += 1
            else:  # the kubelet fails any answer but SERVING too
                failures += answer.status != health_pb2.HealthCheckResponse.SERVING
        seconds.append(time.monotonic() - started)
        time.sleep(max(0.0, started + PROBE_EVERY_SECONDS - time.monotonic()))
    return seconds, failures


def scenario(name: str, http: bool, grpc_too: bool, sizes: dict[str, int]) -> Json:
    """One fresh server under one load."""
    spawn = multiprocessing.get_context("spawn")  # the load processes start clean of grpc
    results: multiprocessing.Queue[Json] = spawn.Queue()
    with cardrules_serve() as ports:
        request = play_request(ports.grpc)
        loads = _load_processes(spawn, ports, request, http, grpc_too, sizes, results)
        with _stopped_at_exit(loads):
            note(f"{name}: loading for {sizes['seconds']} s")
            time.sleep(SETTLE_SECONDS)
            latencies, failures = probe(
                ports.grpc, time.monotonic() + sizes["seconds"] - 2 * SETTLE_SECONDS
            )
            served = {"http": 0, "grpc": 0}
            failed = {"http": 0, "grpc": 0}
            for _ in loads:
                result = results.get(timeout=sizes["seconds"] + 60)
                served[result["transport"]] = result["served"]
                failed[result["transport"]] = result["failed"]
    figures = scenario_figures(name, served, failed, latencies, failures, sizes["seconds"])
    note(f"{name}: {figures}")
    return figures


def scenario_figures(
    name: str,
    served: dict[str, int],
    failed: dict[str, int],
    probe_seconds: Sequence[float],
    probe_failures: int,
    seconds: float,
) -> Json:
    """A scenario's row: each transport's calls served and failed over the load's
    ``seconds``, each probe's seconds and the probes failed."""
    ordered = sorted(probe_seconds)
    return {
        "scenario": name,
        "http_per_s": round(served["http"] / seconds),
        "grpc_per_s": round(served["grpc"] / seconds),
        "calls_failed": failed["http"] + failed["grpc"],
        "probes": len(ordered),
        "probe_p50_ms": round(median(ordered) * 1000, 1),
        "probe_max_ms": round(ordered[-1] * 1000, 1),
        "probe_failures": probe_failures,
    }


@contextlib.contextmanager
def _stopped_at_exit(loads: list[multiprocessing.process.BaseProcess]) -> Iterator[None]:
    """``loads`` started, and stopped when the block ends: a run interrupted by SIGTERM or
    Ctrl-C (``bench.__main__``) left them calling a stopped server until their window
    ended, at full CPU, and waited for them."""
    try:
        for process in loads:
            process.start()
        yield
    except BaseException:
        for process in loads:
            if process.is_alive():
                process.terminate()
        raise
    finally:
        for process in loads:
            if process.pid is not None:
                process.join()


def _load_processes(
    spawn: multiprocessing.context.SpawnContext,
    ports: Ports,
    request: pb.PlayRequest,
    http: bool,
    grpc_too: bool,
    sizes: dict[str, int],
    results: multiprocessing.Queue[Json],
) -> list[multiprocessing.process.BaseProcess]:
    processes: list[multiprocessing.process.BaseProcess] = []
    if http:
        body = json_format.MessageToJson(request, indent=None).encode()
        load = Load(ports.http, sizes["http"], sizes["seconds"])
        processes.append(spawn.Process(target=http_load, args=(load, body, results)))
    if grpc_too:
        load = Load(ports.grpc, sizes["grpc"], sizes["seconds"])
        args = (load, request.SerializeToString(), results)
        processes.append(spawn.Process(target=grpc_load, args=args))
    return processes


def render(sizes: dict[str, int], rows: list[Json]) -> str:
    heading = (
        f"A server past saturation: {sizes['http']} HTTP and/or {sizes['grpc']} gRPC Play calls "
        f"in flight for {sizes['seconds']} s; liveness probes every {PROBE_EVERY_SECONDS} s, "
        f"{PROBE_TIMEOUT_SECONDS} s timeout"
    )
    columns = (
        "scenario",
        "HTTP Play/s",
        "gRPC Play/s",
        "calls failed",
        "probes",
        "p50 ms",
        "max ms",
        "failed",
    )
    keys = (
        "scenario",
        "http_per_s",
        "grpc_per_s",
        "calls_failed",
        "probes",
        "probe_p50_ms",
        "probe_max_ms",
    )
    return f"{heading}\n{table(columns, [[row[k] for k in (*keys, 'probe_failures')] for row in rows])}"


def run(args: argparse.Namespace) -> int:
    sizes = chosen_sizes(args, OVERLOAD_SIZES)
    rows = [scenario(name, http, grpc_too, sizes) for name, http, grpc_too in SCENARIOS]
    print(render(sizes, rows), flush=True)
    finish({"command": "overload", "meta": meta(), "params": sizes, "scenarios": rows}, args.json)
    return exit_status(rows)


def exit_status(rows: list[Json]) -> int:
    """1 when a call of any scenario failed, else 0 (a slow probe fails no run)."""
    return 1 if any(row["calls_failed"] for row in rows) else 0
