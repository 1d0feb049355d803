"""Helpers shared by the benchmarks: size options, the report's metadata and JSON file,
engine caches, percentiles, tables, progress."""

from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from engine.krypkasino import captures, moves
from service.cli import positive_argument

Json = dict[str, Any]
T = TypeVar("T")

NS_PER_US = 1000.0
RETIME_REPEATS = 3


@dataclass(frozen=True)
class Size:
    """A size option's full-run and ``--quick`` defaults."""

    full: int
    quick: int
    help: str


def add_sizes(parser: argparse.ArgumentParser, sizes: dict[str, Size]) -> None:
    for name, size in sizes.items():
        parser.add_argument(
            "--" + name.replace("_", "-"),
            type=positive_argument,
            metavar="N",
            help=f"{size.help} (default {size.full}, {size.quick} with --quick)",
        )


def chosen_sizes(args: argparse.Namespace, sizes: dict[str, Size]) -> dict[str, int]:
    """Each size as given, else its default (the ``--quick`` one with ``--quick``)."""
    chosen: dict[str, int] = {}
    for name, size in sizes.items():
        given = getattr(args, name)
        chosen[name] = (size.quick if args.quick else size.full) if given is None else given
    return chosen


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def meta() -> Json:
    """Where and when the figures were taken; shared machines are noisy."""
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),  # RFC 3339, UTC
        "loadavg_start": loadavg(),
        **engine_revision(),
    }


def engine_revision() -> Json:
    """The commit measured, and whether tracked engine/ files differed from it (figures move with it)."""
    root = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=True
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip()

    status = git("status", "--porcelain", "--untracked-files=no", "--", "engine")
    return {"git_commit": git("rev-parse", "HEAD"), "engine_dirty": bool(status)}


def json_path(text: str) -> Path:
    """``--json``'s file, refused before the run if it cannot be written: a folder or an
    unwritable place was found only when the figures were ready, after minutes of work.

    A file that exists (``/dev/stdout``, process substitution's ``/dev/fd/63``) needs
    write permission; a new one, a folder it can be made in, or the nearest folder that
    exists above it, where ``finish`` makes the rest.
    """
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder: give the file to write")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise argparse.ArgumentTypeError(f"cannot write {text}: permission denied")
        return path
    above = path.parent
    while not above.exists():
        above = above.parent
    if not above.is_dir():
        raise argparse.ArgumentTypeError(f"cannot write {text}: {above} is not a folder")
    try:
        with tempfile.NamedTemporaryFile(dir=above, prefix=".bench-"):
            pass
    except OSError as error:
        raise argparse.ArgumentTypeError(
            f"cannot write {text}: {error.strerror or error}"
        ) from None
    return path


def finish(report: Json, path: Path | None) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    note(f"wrote {path}")


def clear_caches() -> None:
    """Empty the memo tables of the K7.3 search, and of the sweeps a table allows (K7.6),
    so the next call pays its full cost."""
    captures.value_options.cache_clear()
    captures.sweeps.cache_clear()
    moves._sweep_ranks.cache_clear()


def alternate(items: Sequence[T], rounds: int) -> list[tuple[int, T]]:
    """Every item of ``rounds`` rounds in turn, with its round (from 0): ``items`` in even
    rounds, reversed in odd ones, so that no item always runs first after the previous
    round's last, or always last."""
    return [
        (number, item)
        for number in range(rounds)
        for item in (items if number % 2 == 0 else items[::-1])
    ]


def percentile(ordered: Sequence[int], q: float) -> int:
    """Nearest-rank percentile (``q`` in 0..1) of samples sorted ascending."""
    if not ordered:
        raise ValueError("no samples")
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


def summarize_ns(samples: Iterable[int]) -> Json:
    """Count, p50, p99, max and mean of nanosecond samples, in microseconds."""
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "p50_us": round(percentile(ordered, 0.50) / NS_PER_US, 2),
        "p99_us": round(percentile(ordered, 0.99) / NS_PER_US, 2),
        "max_us": round(ordered[-1] / NS_PER_US, 2),
        "mean_us": round(sum(ordered) / len(ordered) / NS_PER_US, 2),
    }


class Slowest(Generic[T]):
    """The ``k`` slowest calls seen, with their inputs, to re-time them afterwards.

    On a shared machine the raw maximum is mostly a preemption or a page
    fault; re-timing the slowest inputs separates a slow input from a slow
    moment.
    """

    def __init__(self, k: int) -> None:
        self.k = k
        self._heap: list[tuple[int, int, T]] = []
        self._count = 0

    def add(self, elapsed: int, item: T) -> None:
        if len(self._heap) < self.k:
            self._count += 1
            heapq.heappush(self._heap, (elapsed, self._count, item))
        elif elapsed > self._heap[0][0]:
            self._count += 1
            heapq.heapreplace(self._heap, (elapsed, self._count, item))

    def items(self) -> list[tuple[int, T]]:
        """``(raw nanoseconds, input)``, slowest first."""
        return [(e, item) for e, _, item in sorted(self._heap, key=lambda x: -x[0])]


def retime(call: Callable[[], object], repeats: int = RETIME_REPEATS) -> int:
    """Fastest of ``repeats`` uncached runs of ``call``, in nanoseconds: its cost without noise."""
    best = math.inf
    for _ in range(repeats):
        clear_caches()
        start = time.perf_counter_ns()
        call()
        best = min(best, time.perf_counter_ns() - start)
    return int(best)


def target(
    metric: str,
    value: float,
    limit: float,
    unit: str,
    *,
    at_least: bool = False,
    goal: bool = False,
    exact: float | None = None,
) -> Json:
    """One check: ``value <= limit`` (``>=`` with ``at_least``); a ``goal`` is only aspired to.

    ``value`` is the figure as reported, rounded; ``exact``, when given, is the unrounded
    figure the check judges: a Play/echo ratio of 0.5996 reads 0.6 to three places, and
    judged on that it met the 0.6 target."""
    judged = value if exact is None else exact
    met = judged >= limit if at_least else judged <= limit
    return {
        "metric": metric,
        "kind": "goal" if goal else "target",
        "value": value,
        "limit": limit,
        "unit": unit,
        "op": ">=" if at_least else "<=",
        "met": met,
    }


def verdict(check: Json) -> str:
    """``ok``, a missed target's ``MISSED``, or the side of its limit a missed goal is on."""
    if check["met"]:
        return "ok"
    if check["kind"] == "target":
        return "MISSED"
    # An at-most goal missed is above its limit, not below it.
    return "below" if check["op"] == ">=" else "above"


def render_targets(targets: Iterable[Json]) -> str:
    rows = [
        [
            t["metric"],
            _measured(t),
            f"{t['op']} {fmt(t['limit'])} {t['unit']}",
            t["kind"],
            verdict(t),
        ]
        for t in targets
    ]
    return table(["check", "measured", "limit", "kind", ""], rows)


def _measured(check: Json) -> str:
    """The check's figure; one rounded onto its limit but judged unrounded on the wrong side
    of it says so ("under 0.60 >= 0.60 MISSED")."""
    text = fmt_beside(check["value"], check["limit"])
    if check["value"] == check["limit"] and not check["met"]:
        return ("under " if check["op"] == ">=" else "over ") + text
    return text


def fmt(value: float) -> str:
    """A figure with a precision that suits its size."""
    if isinstance(value, int) or abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def fmt_beside(value: float, limit: float) -> str:
    """``fmt(value)``, with as many more decimals as it takes not to read as ``limit``: a
    ratio of 0.597 printed "0.60 >= 0.60 MISSED"."""
    text = fmt(value)
    if value == limit or text != fmt(limit):
        return text
    for places in range(1, 10):
        if f"{value:,.{places}f}" != f"{limit:,.{places}f}":
            return f"{value:,.{places}f}"
    return repr(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A plain text table; the first column is left aligned, the others right aligned."""
    cells = [list(headers), *([str(c) for c in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        parts = [
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *(line(row) for row in cells[1:])])


class Progress:
    """Progress lines on stderr, at most one every ``every`` seconds, for long loops.

    Whole lines rather than a tqdm bar: off a terminal (a log of ``make bench``)
    tqdm redraws its bar with carriage returns, all on one line.
    """

    def __init__(self, label: str, total: int, every: float = 10.0) -> None:
        self.label = label
        self.total = total
        self.every = every
        self.start = time.monotonic()
        self.last = self.start

    def step(self, done: int) -> None:
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            note(f"  {self.label}: {done}/{self.total} ({now - self.start:.0f} s)")

    def finish(self) -> float:
        """Report and return the seconds since the start."""
        elapsed = time.monotonic() - self.start
        note(f"  {self.label}: done in {elapsed:.1f} s")
        return elapsed


def note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
