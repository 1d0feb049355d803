"""Whole random 2-player deals per second, engine only, one core (K4-K12).

A deal is ``new_game`` plus random legal moves until the first deal ends
(``state.deal`` changes or the match is over). The fast path advances with
``play_unchecked``; the validated path with ``play``, which checks the move
against the legal set again (K7.8). Repetitions alternate the two paths on
the same seeds, each starting from empty engine caches, and the median of
the repetitions is reported. A third, *warm* run per repetition plays other
deals with the caches the previous run left, as a long-running process would.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from statistics import median

from bench.common import Json, Progress, clear_caches, fmt, note, table, target
from engine.krypkasino import Config, legal_moves, new_game, play, play_unchecked

CONFIG = Config(players=2)
TARGET_PER_S = 250.0
GOAL_PER_S = 500.0
PATHS = ("unchecked", "validated", "unchecked_warm")


def one_deal(seed: int, validated: bool) -> int:
    """Play the first deal of a seeded match with random legal moves; return the move count."""
    rng = random.Random(seed)
    state = new_game(CONFIG, seed=seed)
    deal = state.deal
    moves = 0
    while not state.over and state.deal == deal:
        move = rng.choice(legal_moves(state, state.turn))
        if validated:
            state, _ = play(state, state.turn, move)
        else:
            state, _ = play_unchecked(state, move)
        moves += 1
    return moves


@dataclass(frozen=True)
class Timing:
    """One repetition of one path: wall and CPU seconds, and the moves played."""

    seconds: float
    cpu_seconds: float
    moves: int


def repetition(first_seed: int, deals: int, validated: bool, cold: bool = True) -> Timing:
    """Wall and CPU seconds for ``deals`` deals (from empty caches if ``cold``), and moves.

    CPU time is shown beside wall time: on an oversubscribed machine it is the
    fairer engine figure, while the target is on wall time.
    """
    if cold:
        clear_caches()
    moves = 0
    start, cpu_start = time.perf_counter(), time.process_time()
    for seed in range(first_seed, first_seed + deals):
        moves += one_deal(seed, validated)
    return Timing(time.perf_counter() - start, time.process_time() - cpu_start, moves)


def run(reps: int, deals: int) -> Json:
    note(f"deals: {reps} repetitions x {deals} deals per path")
    for seed in range(3):  # warm-up: imports, first allocations
        one_deal(-1 - seed, validated=True)
    timings: dict[str, list[Timing]] = {path: [] for path in PATHS}
    progress = Progress("deals", reps, every=5.0)
    for rep in range(reps):
        for path in PATHS:
            # The warm run plays the next block of seeds, so its cache hits come from other deals.
            warm = path == "unchecked_warm"
            first = (rep + 1 if warm else rep) * deals
            timings[path].append(
                repetition(first, deals, validated=path == "validated", cold=not warm)
            )
        if timings["unchecked"][-1].moves != timings["validated"][-1].moves:
            raise RuntimeError("the two paths did not play the same deals")
        progress.step(rep + 1)
    progress.finish()
    return figures(timings, deals)


def repetition_figures(timing: Timing, deals: int) -> Json:
    """A repetition of ``deals`` deals as reported."""
    return {
        "seconds": round(timing.seconds, 4),
        "cpu_seconds": round(timing.cpu_seconds, 4),
        "moves": timing.moves,
        "deals_per_s": round(deals / timing.seconds, 1),
        "deals_per_cpu_s": round(deals / timing.cpu_seconds, 1),
        "us_per_move": round(timing.seconds * 1e6 / timing.moves, 2),
    }


def figures(timings: dict[str, list[Timing]], deals: int) -> Json:
    """The result of each path's repetitions of ``deals`` deals: the medians of the
    repetitions' rounded figures (and the rates' extremes), and the checks."""
    reps = len(timings["unchecked"])
    result: Json = {"players": CONFIG.players, "repetitions": reps, "deals_per_rep": deals}
    for path in PATHS:
        runs = [repetition_figures(timing, deals) for timing in timings[path]]
        shown = [r["deals_per_s"] for r in runs]
        result[path] = {
            "deals_per_s": median(shown),
            "min_deals_per_s": min(shown),
            "max_deals_per_s": max(shown),
            "deals_per_cpu_s": median([r["deals_per_cpu_s"] for r in runs]),
            "us_per_move": median([r["us_per_move"] for r in runs]),
            "moves_per_deal": round(runs[0]["moves"] / deals, 1),
            "runs": runs,
        }
    # The checks judge the rates unrounded.
    exact = {path: median(deals / t.seconds for t in timings[path]) for path in PATHS}
    result["targets"] = checks(result, exact)
    return result


def checks(result: Json, exact: dict[str, float]) -> list[Json]:
    """The target and goals of a ``run`` result; ``exact`` holds each path's median rate of
    unrounded repetitions, the result's ``deals_per_s`` the median of the rounded ones."""
    fast, checked = result["unchecked"]["deals_per_s"], result["validated"]["deals_per_s"]
    fast_exact, checked_exact = exact["unchecked"], exact["validated"]
    return [
        target("deals/s unchecked", fast, TARGET_PER_S, "/s", at_least=True, exact=fast_exact),
        target(
            "deals/s unchecked",
            fast,
            GOAL_PER_S,
            "/s",
            at_least=True,
            goal=True,
            exact=fast_exact,
        ),
        # The validated path is shown beside the fast one; the bar applies to the fast one.
        target(
            "deals/s validated",
            checked,
            TARGET_PER_S,
            "/s",
            at_least=True,
            goal=True,
            exact=checked_exact,
        ),
    ]


def render(result: Json) -> str:
    rows = [
        [
            path,
            fmt(result[path]["deals_per_s"]),
            fmt(result[path]["min_deals_per_s"]),
            fmt(result[path]["max_deals_per_s"]),
            fmt(result[path]["deals_per_cpu_s"]),
            fmt(result[path]["us_per_move"]),
            fmt(result[path]["moves_per_deal"]),
        ]
        for path in PATHS
    ]
    title = (
        f"whole random {result['players']}-player deals, median of {result['repetitions']} "
        f"repetitions x {result['deals_per_rep']} deals, one core"
    )
    head = ["path", "deals/s", "min", "max", "per CPU s", "µs/move", "moves/deal"]
    return f"{title}\n{table(head, rows)}"
