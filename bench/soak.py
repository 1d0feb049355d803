"""``python -m bench soak``: a real server's footprint under long mixed traffic
(docs/benchmarks.md, "Soak").

A ``cardrules serve`` (``--workers 1`` by default) serves clients that play whole
matches over gRPC and HTTP/JSON, with a trickle of bad requests
(``bench.soak_traffic``). Every ``--sample-seconds`` this process reads each server
process (the supervisor and its workers) from ``/proc``: resident memory (VmRSS,
VmHWM), open descriptors, threads and CPU time, beside the calls answered so far.
The report compares the footprint at the end of the warm-up, while the service's
bounded caches fill, with the end, and extrapolates the growth after the warm-up to
an hour. The clients run in this process, beside the server on the same machine:
the figures show whether the footprint stays flat, not what a pod serves.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import math
import statistics
import time
from pathlib import Path
from typing import Any

from bench.common import Json, Size, add_sizes, chosen_sizes, finish, fmt, meta, note, table
from bench.procfs import Footprint, descendants, footprint
from bench.server import Server, cardrules_server
from bench.soak_traffic import Tally, play_until
from service.cli import seed_argument

SOAK_SIZES = {
    "workers": Size(1, 1, "server workers (cardrules serve --workers)"),
    "grpc_clients": Size(6, 2, "clients playing over gRPC (cardrules.client)"),
    "http_clients": Size(2, 2, "clients playing over HTTP/JSON (aiohttp)"),
}
DEFAULT_MINUTES = 2.0
QUICK_SECONDS = 8.0
SAMPLE_SECONDS = 5.0
QUICK_SAMPLE_SECONDS = 1.0
# The warm-up, while caches fill: the first minute or the first 10 %, whichever is
# longer, but at most half the run.
WARMUP_SECONDS = 60.0
WARMUP_SHARE = 0.1
# The growth at the end of the run, beside the growth since the warm-up.
LAST_SHARE = 0.25
# The table over time: a row a minute, or about ten rows for a run under ROW_MINUTE_RUN.
ROW_MINUTE_RUN = 180.0
# Each figure sampled, and its name in the tables.
METRICS = {"rss_kib": "RSS MiB", "hwm_kib": "HWM MiB", "fds": "fds", "threads": "threads"}
KIB_PER_MIB = 1024
# A request line's field for a retry of its call (service/logs.py), and the failure it counts as.
ATTEMPT_FIELD = b'"attempt":'
RETRIED = "grpc attempts retried by the client (each hides a failed attempt)"
SECONDS_PER_HOUR = 3600.0


def configure(parser: argparse.ArgumentParser) -> None:
    add_sizes(parser, SOAK_SIZES)
    parser.add_argument(
        "--minutes",
        type=positive_number,
        help=f"minutes of traffic (default {DEFAULT_MINUTES:g}, {QUICK_SECONDS:g} s with --quick)",
    )
    parser.add_argument(
        "--sample-seconds",
        type=positive_number,
        help=f"seconds between samples (default {SAMPLE_SECONDS:g}, "
        f"{QUICK_SAMPLE_SECONDS:g} with --quick)",
    )
    parser.add_argument("--seed", type=seed_argument, default=0, help="seed of the traffic")


def positive_number(text: str) -> float:
    """A finite number above 0 (``--minutes 0.5``)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a number above 0, not {text}")
    return value


def run(args: argparse.Namespace) -> int:
    params = plan(args)
    report: Json = {"command": "soak", "meta": meta(), "params": params}
    with cardrules_server(params["workers"]) as server:
        samples, tally, stopped = asyncio.run(soak(server, params))
        report |= outcome(samples, tally, stopped, params["seconds"], server.log_path)
    print(render(report), flush=True)
    finish(report, args.json)
    return exit_status(report)


def plan(args: argparse.Namespace) -> Json:
    """The run the command line asks for: sizes, seconds of traffic, seconds between
    samples, the seed, and whether matches last one deal (``--quick``)."""
    if args.minutes is not None:
        seconds = args.minutes * 60
    else:
        seconds = QUICK_SECONDS if args.quick else DEFAULT_MINUTES * 60
    every = args.sample_seconds or (QUICK_SAMPLE_SECONDS if args.quick else SAMPLE_SECONDS)
    return {
        **chosen_sizes(args, SOAK_SIZES),
        "seconds": seconds,
        "sample_seconds": every,
        "seed": args.seed,
        "one_deal": args.quick,
    }


def outcome(
    samples: list[Json], tally: Tally, stopped: str | None, seconds: float, log_path: Path
) -> Json:
    """The report's figures once the traffic is over, the server log's retried attempts
    counted as failures."""
    count_retries(tally, log_path)
    return {
        "samples": samples,
        "tally": tally.as_json(),
        "summary": summarize(samples, tally, warmup_seconds(seconds)),
        "server_stopped": stopped,
    }


def exit_status(report: Json) -> int:
    """1 when anything failed or the server stopped, else 0."""
    return 1 if report["server_stopped"] or report["tally"]["failures"] else 0


def count_retries(tally: Tally, log_path: Path) -> None:
    """The server log's retried attempts, if any, as failures of ``tally``."""
    if retried := retried_attempts(log_path):
        tally.failures[RETRIED] = retried


def retried_attempts(log_path: Path) -> int:
    """The request lines of the server's log that are a retry (``"attempt"``, 2 or more):
    each hides an attempt that failed with ``UNAVAILABLE``, ``CANCELLED`` or a transport
    error, which the gRPC clients' retry policy took for them."""
    with log_path.open("rb") as log:
        return sum(ATTEMPT_FIELD in line for line in log)


def warmup_seconds(seconds: float) -> float:
    return min(max(WARMUP_SECONDS, WARMUP_SHARE * seconds), seconds / 2)


async def soak(server: Server, params: Json) -> tuple[list[Json], Tally, str | None]:
    """Traffic for ``params["seconds"]`` and a sample every ``params["sample_seconds"]``
    (``plan``): the samples, the tally, and how the server stopped if it did (None while
    it serves)."""
    seconds, every = params["seconds"], params["sample_seconds"]
    start = time.monotonic()
    deadline = start + seconds
    ports = (server.ports.grpc, server.ports.http)
    clients = (params["grpc_clients"], params["http_clients"])
    tally, players = await play_until(ports, clients, params["seed"], deadline, params["one_deal"])
    samples = [sample(server.process.pid, tally, 0.0)]  # before the first call
    stopped: str | None = None
    due = start
    while stopped is None and time.monotonic() < deadline:
        due += every
        await asyncio.sleep(max(0.0, min(due, deadline) - time.monotonic()))
        for player in players:
            if player.done() and player.exception() is not None:
                raise RuntimeError("a soak client stopped") from player.exception()
        if server.process.poll() is not None:
            stopped = f"the server exited with status {server.process.returncode}"
            break
        samples.append(sample(server.process.pid, tally, time.monotonic() - start))
        progress(samples, seconds)
    # Each client ends the call it is in; a match in progress is left unfinished.
    await asyncio.gather(*players)
    return samples, tally, stopped


def sample(pid: int, tally: Tally, seconds: float) -> Json:
    """Every server process's footprint now, their sums, and the traffic so far."""
    processes = [
        figures
        for figures in map(footprint, [pid, *sorted(descendants(pid))])
        if figures is not None
    ]
    taken: Json = {
        "seconds": round(seconds, 1),
        "calls": sum(tally.calls.values()),
        "games": sum(tally.games.values()),
        "refusals": sum(tally.refusals.values()),
        "failures": sum(tally.failures.values()),
        "processes": [_process_json(figures, index) for index, figures in enumerate(processes)],
        "cpu_seconds": round(sum(p.cpu_seconds for p in processes), 2),
    }
    for metric in METRICS:
        taken[metric] = sum(getattr(p, metric) for p in processes)
    return taken


def _process_json(figures: Footprint, index: int) -> Json:
    # With one worker the server is one process; with several the first is the supervisor.
    return {"role": "worker" if index else "main", **dataclasses.asdict(figures)}


def _rates(before: Json, after: Json) -> tuple[float, float] | None:
    """The server's CPU (% of a core) and the calls a second between two samples."""
    elapsed = after["seconds"] - before["seconds"]
    if not elapsed:
        return None
    cpu = (after["cpu_seconds"] - before["cpu_seconds"]) / elapsed * 100
    return cpu, (after["calls"] - before["calls"]) / elapsed


def progress(samples: list[Json], seconds: float) -> None:
    last = samples[-1]
    cpu, rate = _rates(samples[-2], last) or (0.0, 0.0)
    note(
        f"  soak {_clock(last['seconds'])}/{_clock(seconds)}: {last['calls']:,} calls "
        f"({rate:,.0f}/s), {last['games']:,} games, RSS {last['rss_kib'] / KIB_PER_MIB:.1f} MiB, "
        f"fds {last['fds']}, threads {last['threads']}, server CPU {cpu:.0f}%, "
        f"refusals {last['refusals']}, failures {last['failures']}"
    )


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


def summarize(samples: list[Json], tally: Tally, warmup: float) -> Json:
    """The footprint at the end of the warm-up against the end; its growth per hour after
    the warm-up and over the run's last quarter (least-squares slopes over their samples:
    bounded caches that still fill after the warm-up slow down, a leak does not); the
    traffic's totals."""
    # The last sample at or before the warm-up's end (the baseline, if none came earlier).
    warm = max(i for i, s in enumerate(samples) if s["seconds"] <= warmup)
    end = samples[-1]
    last_quarter = [s for s in samples if s["seconds"] >= (1 - LAST_SHARE) * end["seconds"]]
    footprint_summary: Json = {}
    for metric in METRICS:
        footprint_summary[metric] = {
            "start": samples[0][metric],
            "warmup_end": samples[warm][metric],
            "end": end[metric],
            "max": max(s[metric] for s in samples),
            "per_hour": _per_hour(samples[warm:], metric),
            "per_hour_last_quarter": _per_hour(last_quarter, metric),
        }
    traffic_seconds = end["seconds"] or 1.0
    return {
        "warmup_seconds": samples[warm]["seconds"],
        "end_seconds": end["seconds"],
        "samples": len(samples),
        "processes": len(end["processes"]),
        "footprint": footprint_summary,
        "server_cpu_cores": round(
            (end["cpu_seconds"] - samples[0]["cpu_seconds"]) / traffic_seconds, 2
        ),
        # Every call's, the last ones' after the last sample too, as the split by transport.
        "calls": sum(tally.calls.values()),
        "calls_per_second": round(end["calls"] / traffic_seconds, 1),
        "calls_by_transport": dict(tally.calls),
        "games": sum(tally.games.values()),
        "games_by_transport": dict(tally.games),
        "refusals": sum(tally.refusals.values()),
        "failures": sum(tally.failures.values()),
    }


def _per_hour(samples: list[Json], metric: str) -> float | None:
    """The least-squares slope of ``metric`` an hour; None with fewer than two distinct times."""
    try:
        fit = statistics.linear_regression(
            [s["seconds"] for s in samples], [s[metric] for s in samples]
        )
    except statistics.StatisticsError:
        return None
    return round(fit.slope * SECONDS_PER_HOUR, 1)


def rows_over_time(samples: list[Json], seconds: float) -> list[Json]:
    """The samples at each row's boundary (a minute, or a tenth of a short run), and the last."""
    step = (
        60.0
        if seconds >= ROW_MINUTE_RUN
        else max(seconds / 10, samples[1]["seconds"] if len(samples) > 1 else 1.0)
    )
    rows = [samples[0]]
    for taken in samples[1:]:
        if taken["seconds"] >= rows[-1]["seconds"] + step - 0.5 or taken is samples[-1]:
            rows.append(taken)
    return rows


def render(report: Json) -> str:
    samples: list[Json] = report["samples"]
    summary: Json = report["summary"]
    params: Json = report["params"]
    rows = rows_over_time(samples, params["seconds"])
    lines: list[list[Any]] = []
    for before, row in zip([rows[0], *rows], rows, strict=False):
        rates = _rates(before, row)
        lines.append(
            [
                _clock(row["seconds"]),
                f"{row['rss_kib'] / KIB_PER_MIB:.1f}",
                f"{row['hwm_kib'] / KIB_PER_MIB:.1f}",
                row["fds"],
                row["threads"],
                f"{rates[0]:.0f}" if rates else "-",
                f"{rates[1]:,.0f}" if rates else "-",
                f"{row['games']:,}",
                row["failures"],
            ]
        )
    heading = (
        f"Soak: cardrules serve --workers {params['workers']}, {params['grpc_clients']} gRPC and "
        f"{params['http_clients']} HTTP/JSON clients playing whole matches for "
        f"{_clock(params['seconds'])}, a sample every {params['sample_seconds']:g} s "
        f"({summary['processes']} server process(es), figures summed over them)"
    )
    over_time = table(
        ["time", "RSS MiB", "HWM MiB", "fds", "threads", "CPU %", "calls/s", "games", "failures"],
        lines,
    )
    footprint = summary["footprint"]
    change = [
        [
            name,
            _figure(metric, footprint[metric]["start"]),
            _figure(metric, footprint[metric]["warmup_end"]),
            _figure(metric, footprint[metric]["end"]),
            _figure(metric, footprint[metric]["max"]),
            *(
                "-" if footprint[metric][key] is None else _figure(metric, footprint[metric][key])
                for key in ("per_hour", "per_hour_last_quarter")
            ),
        ]
        for metric, name in METRICS.items()
    ]
    growth = table(
        [
            "",
            "start",
            f"warm-up end ({_clock(summary['warmup_seconds'])})",
            "end",
            "max",
            "per hour after warm-up",
            "per hour, last quarter",
        ],
        change,
    )
    totals = (
        f"{summary['calls']:,} calls ({summary['calls_per_second']:,.0f}/s; "
        f"{', '.join(f'{k} {v:,}' for k, v in summary['calls_by_transport'].items())}), "
        f"{summary['games']:,} whole matches "
        f"({', '.join(f'{k} {v:,}' for k, v in summary['games_by_transport'].items())}), "
        f"{summary['refusals']:,} expected refusals, {summary['failures']} failures; "
        f"server CPU {summary['server_cpu_cores']} cores"
    )
    text = [heading, over_time, "", growth, totals]
    failures = report["tally"]["failures"]
    if failures:
        text.append("failures: " + "; ".join(f"{k} x{v}" for k, v in failures.items()))
    if report["server_stopped"]:
        text.append(report["server_stopped"])
    return "\n".join(text)


def _figure(metric: str, value: float) -> str:
    return f"{value / KIB_PER_MIB:.1f}" if metric.endswith("_kib") else fmt(value)
