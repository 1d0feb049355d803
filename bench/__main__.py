"""``python -m bench [COMMAND] [options]``: the benchmarks (``make bench``).

Commands are registered in ``COMMANDS``; without one, ``engine`` runs, so
``python -m bench --games 100`` means ``python -m bench engine --games 100``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench import captures, deals, http, legal_moves, overload, soak
from bench.common import (
    Json,
    Size,
    add_sizes,
    chosen_sizes,
    finish,
    json_path,
    loadavg,
    meta,
    render_targets,
)

DEFAULT_COMMAND = "engine"
ENGINE_PARTS = ("legal_moves", "captures", "deals")


@dataclass(frozen=True)
class Command:
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


ENGINE_SIZES = {
    "games": Size(1000, 4, "random games per player count for legal_moves"),
    "tables": Size(10_000, 20, "random 20-card tables for captures"),
    "growth_tables": Size(150, 3, "random tables per size for the captures growth"),
    "reps": Size(7, 3, "repetitions per path for deals"),
    "deals": Size(200, 5, "deals per repetition for deals"),
}


def configure_engine(parser: argparse.ArgumentParser) -> None:
    add_sizes(parser, ENGINE_SIZES)
    parser.add_argument("--seed", type=int, default=0, help="seed of the captures tables")
    parser.add_argument(
        "--only",
        action="append",
        choices=ENGINE_PARTS,
        help="run only this part (repeatable; default all)",
    )


def run_engine(args: argparse.Namespace) -> int:
    sizes = chosen_sizes(args, ENGINE_SIZES)
    parts = args.only or list(ENGINE_PARTS)
    report: Json = {"command": "engine", "meta": meta(), "params": {**sizes, "seed": args.seed}}
    targets: list[Json] = []
    for part in ENGINE_PARTS:
        if part not in parts:
            continue
        start = time.monotonic()
        if part == "legal_moves":
            result = legal_moves.run(sizes["games"])
            text = legal_moves.render(result)
        elif part == "captures":
            result = captures.run(sizes["tables"], sizes["growth_tables"], args.seed)
            text = captures.render(result)
        else:
            result = deals.run(sizes["reps"], sizes["deals"])
            text = deals.render(result)
        result["seconds"] = round(time.monotonic() - start, 1)
        report[part] = result
        targets.extend(result["targets"])
        print(text + "\n", flush=True)
    report["targets"] = targets
    report["meta"]["loadavg_end"] = loadavg()
    print(render_targets(targets))
    finish(report, args.json)
    return 0


GRPC_SIZES = {
    "games": Size(12, 2, "seeded 4-player deals whose Play requests are replayed"),
    "rounds": Size(3, 1, "alternating Play/echo rounds"),
    "seconds": Size(4, 1, "seconds per round"),
    "concurrency": Size(16, 4, "calls in flight"),
}


def configure_grpc(parser: argparse.ArgumentParser) -> None:
    add_sizes(parser, GRPC_SIZES)


def run_grpc(args: argparse.Namespace) -> int:
    from bench import grpc as grpc_bench  # imports the service: only for this command

    sizes = chosen_sizes(args, GRPC_SIZES)
    report: Json = {"command": "grpc", "meta": meta(), "params": sizes}
    result = grpc_bench.run(sizes["games"], sizes["rounds"], sizes["seconds"], sizes["concurrency"])
    report["grpc"] = result
    report["targets"] = result["targets"]
    report["meta"]["loadavg_end"] = loadavg()
    print(grpc_bench.render(result) + "\n")
    print(render_targets(result["targets"]))
    finish(report, args.json)
    return 1 if grpc_bench.failed_calls(result) else 0


COMMANDS: dict[str, Command] = {
    "engine": Command(
        "engine benchmarks: legal_moves, captures, deals", configure_engine, run_engine
    ),
    "http": Command(
        "Play over HTTP/JSON beside gRPC on one server: requests/s, p50, p99",
        http.configure,
        http.run,
    ),
    "grpc": Command(
        "gRPC: Play beside an echo call, CPU per Play, token size, workers 1 and 2",
        configure_grpc,
        run_grpc,
    ),
    "overload": Command(
        "a server past saturation: liveness probes and each transport's Play/s",
        overload.configure,
        overload.run,
    ),
    "soak": Command(
        "a real server for minutes of whole matches: memory, descriptors, threads over time",
        soak.configure,
        soak.run,
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=f"Benchmarks. Without a command, '{DEFAULT_COMMAND}' runs.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, command in COMMANDS.items():
        sub = commands.add_parser(name, help=command.help, description=command.help)
        sub.add_argument("--quick", action="store_true", help="a small smoke run")
        sub.add_argument(
            "--json", type=json_path, metavar="PATH", help="also write all figures here"
        )
        command.configure(sub)
        sub.set_defaults(run=command.run)
    return parser


def _stop(signum: int, _frame: object) -> None:
    """SIGTERM (a CI job's time limit, ``kill``) unwinds as Ctrl-C does, so that each
    benchmark stops the servers and load processes it started: its default action
    ended this process at once and left them running."""
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _stop)
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or (args[0] not in COMMANDS and args[0] not in ("-h", "--help")):
        args.insert(0, DEFAULT_COMMAND)
    parsed = build_parser().parse_args(args)
    run: Callable[[argparse.Namespace], int] = parsed.run
    return run(parsed)


if __name__ == "__main__":
    sys.exit(main())
