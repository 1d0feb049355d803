"""gRPC benchmarks (docs/benchmarks.md, "gRPC"): ``Play`` against an echo call, CPU per Play,
token size, workers.

- ``Play`` and an echo call that moves a payload of the same size run in the
  same server process (``bench.grpc_server``), alternating in rounds so both
  see the same machine, the calls' order reversed every other round; the ratio of their throughputs is the share of the
  transport's capacity that the rules leave (target 0.6, goal 0.8). A second
  echo takes ``serve_call``, the path of every real RPC (request id, metrics,
  the request log line), so beside it Play differs only by its handler's work:
  the token, protobuf and seat-token work, and the rules work.
  A third call, the Play floor, takes Play's whole path but the rules work
  (token, protobuf and seat-token work, the move parsed and counted, the
  request line's fields, the real answer precomputed): what
  any engine, in any language, could reach at most.
- Server CPU per call comes from ``/proc/<pid>/stat`` around each round, and
  what the main (asyncio) thread did from ``/proc/<pid>/schedstat``: the share
  of the round it ran, the share it waited for a core, times scheduled per call.
- The token size is that of 4-player states in the middle of each deal of the match
  (the first deal's alone beside it, as measured before the fifty-third session).
- Throughput of a real ``cardrules serve`` with ``--workers 1`` and ``2``.
The load generator (``bench.grpc_load``) runs in its own process.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import NamedTuple

from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from bench.common import Json, alternate, note, summarize_ns, table, target
from bench.grpc_load import write_requests
from bench.grpc_server import ECHO_METHOD, INSTRUMENTED_ECHO_METHOD, PLAY_FLOOR_METHOD
from bench.procfs import cpu_seconds
from bench.server import BENCH_KEY, cardrules_serve
from service.calls import CallInfo
from service.config import ServerConfig
from service.krypkasino_api import SERVICE_NAME
from service.server import build_api
from service.tokens import KeyRing

PLAY_METHOD = f"/{SERVICE_NAME}/Play"


def play_stream(
    games: int, players: int = 4
) -> tuple[list[bytes], list[int], dict[int, list[int]]]:
    """Seeded Play requests of whole first deals, their response sizes, and the sizes of the
    state tokens in the middle of every deal of each match, by deal number.

    Each match is played to its end for the tokens: every finished deal travels in the
    token, so later deals' tokens are the larger ones, and the goal is on a state "in
    the middle of a deal", any deal. Only the first deals' requests are replayed, the
    load every session has measured."""
    api = build_api(ServerConfig(), KeyRing.parse(BENCH_KEY), None)
    requests: list[bytes] = []
    response_sizes: list[int] = []
    token_sizes: dict[int, list[int]] = {}
    for seed in range(games):
        rng = random.Random(seed)
        started = api.new_game(
            pb.NewGameRequest(config=pb.GameConfig(players=players), seed=seed), CallInfo()
        )
        state, view = started.state, started.view
        while not view.game_over:
            seat = view.turn
            token = started.seat_tokens[seat]
            moves = api.legal_moves(
                pb.LegalMovesRequest(state=state, seat=seat, seat_token=token), CallInfo()
            ).moves
            request = pb.PlayRequest(
                state=state, seat=seat, seat_token=token, move=rng.choice(moves).move
            )
            response = api.play(request, CallInfo())
            if view.deal_number == 1:
                requests.append(request.SerializeToString())
                response_sizes.append(response.ByteSize())
            state, view = response.state, response.view
            if not view.game_over and mid_deal(view.distribution, view.distributions):
                token_sizes.setdefault(view.deal_number, []).append(len(state))
    return requests, response_sizes, token_sizes


def mid_deal(distribution: int, distributions: int) -> bool:
    """Whether distribution ``distribution`` (from 1) of a deal's ``distributions`` is the
    deal's middle one, where the token is measured: the third of six, the third of five
    (the later of two middles, the middle of an odd count)."""
    return distribution == (distributions + 1) // 2


def token_figures(token_sizes: dict[int, list[int]]) -> Json:
    """The mid-deal token sizes of ``play_stream``: median and max over every deal, and
    each deal's."""
    every = [size for sizes in token_sizes.values() for size in sizes]
    return {
        "median": int(median(every)),
        "max": max(every),
        "by_deal": [
            {"deal": deal, "median": int(median(sizes)), "max": max(sizes)}
            for deal, sizes in sorted(token_sizes.items())
        ],
    }


class Schedule(NamedTuple):
    """A thread's ``/proc/<pid>/schedstat``, or its change over a round."""

    run_ns: int  # on a core
    wait_ns: int  # runnable, waiting for a core
    slices: int  # times scheduled


def parse_schedstat(text: str) -> Schedule:
    """``/proc/<pid>/schedstat``'s three numbers."""
    run_ns, wait_ns, slices = text.split()
    return Schedule(int(run_ns), int(wait_ns), int(slices))


def _main_thread_schedule(pid: int) -> Schedule:
    """The server's main (asyncio) thread: ns on a core, ns runnable but waiting for one,
    and times scheduled (``/proc/<pid>/schedstat``)."""
    return parse_schedstat(Path(f"/proc/{pid}/schedstat").read_text())


@dataclass(frozen=True)
class Load:
    """What a load process (``bench.grpc_load``) reports: calls answered, seconds, failures
    by status code, each answered call's nanoseconds."""

    calls: int
    seconds: float
    failures: dict[str, int]
    ns: list[int]


@dataclass(frozen=True)
class Round(Load):
    """One call's load in one round of ``side_by_side``, and what the server did meanwhile."""

    server_cpu: float  # seconds of the server's CPU
    main_thread: Schedule  # the change of its main thread's schedstat


def _load(
    target_address: str, method: str, path: Path, concurrency: int, seconds: float, channels: int
) -> Load:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.grpc_load",
            target_address,
            method,
            str(path),
            str(concurrency),
            str(seconds),
            str(channels),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    result: Json = json.loads(done.stdout)
    # Throughput, latency and every ratio need answered calls; without any, say why.
    if not result["calls"]:
        raise RuntimeError(
            f"no call to {method} at {target_address} was answered in {seconds} s: "
            f"{result['failures']}"
        )
    return Load(result["calls"], result["seconds"], result["failures"], result["ns"])


#: The calls of ``side_by_side``, by name in the report, in the order of its first round.
CALLS = (
    ("play", PLAY_METHOD),
    ("echo", ECHO_METHOD),
    ("echo_instrumented", INSTRUMENTED_ECHO_METHOD),
    ("play_floor", PLAY_FLOOR_METHOD),
)
#: The ratios of ``side_by_side``: name, the call above, the call below.
#: "ceiling": what Play/echo would read if only the path every RPC takes cost; "floor":
#: if the rules cost nothing, with only the token, protobuf and seat-token work left.
RATIOS = (
    ("ratio", "play", "echo"),
    ("ratio_instrumented", "play", "echo_instrumented"),
    ("ceiling", "echo_instrumented", "echo"),
    ("floor", "play_floor", "echo"),
)


def load_order(rounds: int) -> list[tuple[int, str, str]]:
    """Every load of ``side_by_side`` in turn: its round (from 0), call name and method.
    ``CALLS`` in even rounds, reversed in odd ones, as ``bench http`` alternates its
    transports, so that no call always runs first after the previous round's last or always
    last; ``Play`` and the echo stay next to each other in every round, their ratio taken
    side by side."""
    return [(number, name, method) for number, (name, method) in alternate(CALLS, rounds)]


def side_by_side(
    path: Path, echo_bytes: int, rounds: int, seconds: float, concurrency: int
) -> dict[str, list[Round]]:
    """Play, the echoes and the floor in rounds on one server process, the order of the calls
    reversed every other round (``load_order``): each call's rounds, in order."""
    with tempfile.TemporaryDirectory() as folder:
        port_file = Path(folder) / "port"
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.grpc_server",
                str(port_file),
                str(echo_bytes),
                str(path),
            ],
            stdout=subprocess.DEVNULL,
        )
        try:
            while not port_file.exists() or not port_file.read_text():
                if server.poll() is not None:
                    raise RuntimeError("the benchmark server did not start")
                time.sleep(0.05)
            address = f"127.0.0.1:{port_file.read_text()}"
            _load(address, PLAY_METHOD, path, concurrency, 0.5, 1)  # warm-up
            runs: dict[str, list[Round]] = {name: [] for name, _ in CALLS}
            for round_number, name, method in load_order(rounds):
                cpu = cpu_seconds(server.pid)
                before = _main_thread_schedule(server.pid)
                load = _load(address, method, path, concurrency, seconds, 1)
                server_cpu = cpu_seconds(server.pid) - cpu
                after = _main_thread_schedule(server.pid)
                main_thread = Schedule(*(a - b for a, b in zip(after, before, strict=True)))
                runs[name].append(
                    Round(**vars(load), server_cpu=server_cpu, main_thread=main_thread)
                )
                note(f"round {round_number + 1}/{rounds} {name}: {load.calls} calls")
        finally:
            server.terminate()
            server.wait(10)
    return runs


def rate(load: Load) -> float:
    """Calls answered a second."""
    return load.calls / load.seconds


def failures(loads: Sequence[Load]) -> int:
    return sum(sum(load.failures.values()) for load in loads)


def call_figures(rounds: Sequence[Round]) -> Json:
    """One call's figures of ``side_by_side``: medians of its rounds', and every round's
    latencies and failures together."""
    return {
        "throughput_rps": round(median(rate(r) for r in rounds), 1),
        "latency": summarize_ns(ns for r in rounds for ns in r.ns),
        "server_cpu_us_per_call": round(
            median(r.server_cpu / max(r.calls, 1) * 1e6 for r in rounds), 1
        ),
        # Where the asyncio thread, which every call needs, spent the round.
        "main_thread_running_pct": round(
            median(r.main_thread.run_ns / (r.seconds * 1e7) for r in rounds), 1
        ),
        "main_thread_waiting_for_a_core_pct": round(
            median(r.main_thread.wait_ns / (r.seconds * 1e7) for r in rounds), 1
        ),
        "main_thread_scheduled_per_call": round(
            median(r.main_thread.slices / max(r.calls, 1) for r in rounds), 1
        ),
        "failures": failures(rounds),
    }


def ratio_rounds(tops: Sequence[Load], bottoms: Sequence[Load]) -> list[float]:
    """Each round's throughput of ``tops`` over the same round's of ``bottoms``, unrounded."""
    return [rate(t) / rate(b) for t, b in zip(tops, bottoms, strict=True)]


def median_ratio(runs: dict[str, list[Round]], top: str, bottom: str) -> float:
    """The median of the rounds' throughput ratios of call ``top`` over ``bottom``,
    unrounded."""
    return median(ratio_rounds(runs[top], runs[bottom]))


def play_echo_ratio(runs: dict[str, list[Round]]) -> float:
    """The Play/echo ratio the target judges, unrounded; the report's ``ratio`` rounded."""
    return median_ratio(runs, "play", "echo")


def side_by_side_figures(runs: dict[str, list[Round]]) -> Json:
    """The report of ``side_by_side``'s rounds: each call's figures, and each ratio as the
    median of the rounds' ratios (each round's calls side by side), with the rounds'."""
    report: Json = {name: call_figures(rounds) for name, rounds in runs.items()}
    for name, top, bottom in RATIOS:
        report[name] = round(median_ratio(runs, top, bottom), 3)
        report[name + "_rounds"] = [round(r, 3) for r in ratio_rounds(runs[top], runs[bottom])]
    return report


def worker_figures(loads: Sequence[Load]) -> Json:
    """A ``cardrules serve``'s Play figures over its loads (``workers_throughput``)."""
    return {
        "throughput_rps": round(median(rate(load) for load in loads), 1),
        "latency": summarize_ns(ns for load in loads for ns in load.ns),
        "failures": failures(loads),
    }


def workers_throughput(path: Path, seconds: float, concurrency: int) -> Json:
    """Play throughput of a real ``cardrules serve`` with one and with two workers."""
    report: Json = {}
    for workers in (1, 2):
        with cardrules_serve(workers) as ports:
            address = f"127.0.0.1:{ports.grpc}"
            _load(address, PLAY_METHOD, path, concurrency, 0.5, 8)
            loads = [_load(address, PLAY_METHOD, path, concurrency, seconds, 8) for _ in range(3)]
        report[f"workers_{workers}"] = worker_figures(loads)
        note(f"workers {workers}: {report[f'workers_{workers}']['throughput_rps']} Play/s")
    return report


def stream_figures(
    requests: Sequence[bytes], response_sizes: Sequence[int], token_sizes: dict[int, list[int]]
) -> Json:
    """The figures of ``play_stream``'s requests, responses (the echo's size) and tokens."""
    return {
        "requests": len(requests),
        "echo_bytes": int(median(response_sizes)),
        "request_bytes_median": int(median(len(r) for r in requests)),
        # The first deal's alone, as every session before the fifty-third measured it.
        "token_bytes_mid_deal": {
            "median": int(median(token_sizes[1])),
            "max": max(token_sizes[1]),
        },
        "token_bytes_mid_every_deal": token_figures(token_sizes),
    }


def run(games: int, rounds: int, seconds: float, concurrency: int) -> Json:
    requests, response_sizes, token_sizes = play_stream(games)
    report = stream_figures(requests, response_sizes, token_sizes)
    report["concurrency"] = concurrency
    report["seconds_per_round"] = seconds
    path = write_requests(requests)
    try:
        runs = side_by_side(path, report["echo_bytes"], rounds, seconds, concurrency)
        report["side_by_side"] = side_by_side_figures(runs)
        report["workers"] = workers_throughput(path, seconds, concurrency)
    finally:
        path.unlink()
    report["targets"] = checks(report, play_echo_ratio(runs))
    return report


def checks(report: Json, ratio: float) -> list[Json]:
    """The target and goals of a ``run`` report; ``ratio`` is its Play/echo ratio unrounded,
    the report's ``side_by_side.ratio`` rounded to three places."""
    shown = report["side_by_side"]["ratio"]
    return [
        target("Play/echo throughput ratio", shown, 0.6, "", at_least=True, exact=ratio),
        target(
            "Play/echo throughput ratio (goal)",
            shown,
            0.8,
            "",
            at_least=True,
            goal=True,
            exact=ratio,
        ),
        target(
            "4-player mid-deal token, every deal (goal)",
            report["token_bytes_mid_every_deal"]["max"],
            600,
            "bytes",
            goal=True,
        ),
    ]


def failed_calls(report: Json) -> int:
    """Calls answered with an error, in every round and on every server. Throughput counts
    only the answered calls, so any failure fails the run, as in ``bench http`` and
    ``bench overload``."""
    sides = report["side_by_side"]
    calls = [sides[name] for name in ("play", "echo", "echo_instrumented", "play_floor")]
    return sum(call["failures"] for call in [*calls, *report["workers"].values()])


def render(report: Json) -> str:
    sides = report["side_by_side"]
    every, first = report["token_bytes_mid_every_deal"], report["token_bytes_mid_deal"]
    rows = [
        [
            name,
            sides[name]["throughput_rps"],
            sides[name]["latency"]["p50_us"],
            sides[name]["latency"]["p99_us"],
            sides[name]["server_cpu_us_per_call"],
            sides[name]["main_thread_running_pct"],
            sides[name]["main_thread_waiting_for_a_core_pct"],
            sides[name]["main_thread_scheduled_per_call"],
            sides[name]["failures"],
        ]
        for name in ("play", "echo", "echo_instrumented", "play_floor")
    ]
    lines = [
        "gRPC: Play beside an echo of the same size "
        f"({report['echo_bytes']} B), concurrency {report['concurrency']}",
        table(
            [
                "call",
                "req/s",
                "p50 µs",
                "p99 µs",
                "server CPU µs/call",
                "main thread running %",
                "waiting for a core %",
                "scheduled/call",
                "failures",
            ],
            rows,
        ),
        f"throughput ratio Play/echo: {sides['ratio']} (rounds {sides['ratio_rounds']}); "
        f"Play/instrumented echo: {sides['ratio_instrumented']}; "
        f"instrumented echo/echo, the ceiling if nothing but the RPC path cost: {sides['ceiling']}; "
        f"Play floor/echo, if the rules cost nothing: {sides['floor']} "
        f"(rounds {sides['floor_rounds']})",
        f"state token, 4 players mid-deal, every deal: median {every['median']} B, "
        f"max {every['max']} B (by deal, median/max: "
        + ", ".join(f"{d['deal']}: {d['median']}/{d['max']} B" for d in every["by_deal"])
        + f"); first deal alone: median {first['median']} B, max {first['max']} B",
        table(
            ["server", "Play/s", "p50 µs", "p99 µs", "failures"],
            [
                [
                    name,
                    w["throughput_rps"],
                    w["latency"]["p50_us"],
                    w["latency"]["p99_us"],
                    w["failures"],
                ]
                for name, w in report["workers"].items()
            ],
        ),
    ]
    return "\n".join(lines)
