"""Legal-move generation (K7.7) over every position of seeded random games.

For each player count 2..6, ``games`` matches are played to the end with a
seeded random policy (``play_unchecked`` advances). Only
``legal_moves(state, state.turn)`` is timed. Two passes replay the very same
positions: *cached* clears the engine caches once per player count, as a
long-running process would see them; *uncached* clears them before every
call, the cost of a position whose capture searches were never seen.

The raw maximum on a shared machine is mostly noise, so the slowest
positions of each pass are re-timed afterwards (uncached, fastest of a few
runs): the maximum target is judged on that figure, the raw one is shown too.
"""

from __future__ import annotations

import random
import time
from array import array
from collections.abc import Mapping, Sequence
from functools import partial

from bench.common import (
    NS_PER_US,
    RETIME_REPEATS,
    Json,
    Progress,
    Slowest,
    clear_caches,
    fmt,
    note,
    percentile,
    retime,
    summarize_ns,
    table,
    target,
)
from engine.krypkasino import Config, State, legal_moves, new_game, play_unchecked

PLAYER_COUNTS = (2, 3, 4, 5, 6)
P99_TARGET_US = 200.0
MAX_TARGET_US = 5000.0
MODES = ("cached", "uncached")
CANDIDATES = 200


def game_seed(players: int, game: int) -> int:
    """Distinct, reproducible seeds per player count."""
    return players * 1_000_000 + game


def time_positions(
    players: int, games: int, *, uncached: bool
) -> tuple[array[int], int, Slowest[State]]:
    """Nanoseconds of every ``legal_moves`` call, the total of legal moves, the slowest."""
    samples: array[int] = array("q")
    slowest: Slowest[State] = Slowest(CANDIDATES)
    total_moves = 0
    clock = time.perf_counter_ns
    config = Config(players=players)
    progress = Progress(f"legal_moves {players}p {'uncached' if uncached else 'cached'}", games)
    clear_caches()
    for game in range(games):
        seed = game_seed(players, game)
        rng = random.Random(seed)
        state = new_game(config, seed=seed)
        while not state.over:
            if uncached:
                clear_caches()
            start = clock()
            moves = legal_moves(state, state.turn)
            elapsed = clock() - start
            samples.append(elapsed)
            slowest.add(elapsed, state)
            total_moves += len(moves)
            state, _ = play_unchecked(state, rng.choice(moves))
        progress.step(game + 1)
    progress.finish()
    return samples, total_moves, slowest


def worst_retimed(slowest: Slowest[State]) -> int:
    """The slowest candidate's cost without noise (re-timed uncached), in nanoseconds."""
    return max(retime(partial(legal_moves, state, state.turn)) for _, state in slowest.items())


def run(games: int) -> Json:
    """Both passes, side by side per player count (cached first, then uncached)."""
    note(f"legal_moves: {games} games per player count")
    by_players: dict[str, Json] = {}
    overall: dict[str, array[int]] = {mode: array("q") for mode in MODES}
    worst_ns = dict.fromkeys(MODES, 0)
    for players in PLAYER_COUNTS:
        entry: Json = {}
        moves_seen: dict[str, int] = {}
        for mode in MODES:
            samples, total_moves, slowest = time_positions(
                players, games, uncached=mode == "uncached"
            )
            overall[mode].extend(samples)
            entry[mode] = summarize_ns(samples)
            worst = worst_retimed(slowest)
            worst_ns[mode] = max(worst_ns[mode], worst)
            entry[mode]["max_retimed_us"] = round(worst / NS_PER_US, 2)
            moves_seen[mode] = total_moves
        positions = entry["cached"]["n"]
        if entry["uncached"]["n"] != positions or moves_seen["cached"] != moves_seen["uncached"]:
            raise RuntimeError(f"{players}p: the two passes did not replay the same positions")
        entry["positions"] = positions
        entry["moves_per_position"] = round(moves_seen["cached"] / positions, 2)
        by_players[str(players)] = entry
    summary, targets = overall_figures(overall, worst_ns)
    return {
        "games_per_player_count": games,
        "by_players": by_players,
        "overall": summary,
        "targets": targets,
    }


def overall_figures(
    samples: Mapping[str, Sequence[int]], worst_ns: dict[str, int]
) -> tuple[Json, list[Json]]:
    """Each mode's figures over every player count (its nanosecond samples together, and
    ``worst_ns``, its largest re-timed maximum: the largest of the player counts' rounded
    ones, as rounding keeps the order), and the targets' checks on them, judged unrounded."""
    summary: Json = {}
    exact: Json = {}
    for mode in MODES:
        ordered = sorted(samples[mode])
        worst_us = worst_ns[mode] / NS_PER_US
        summary[mode] = summarize_ns(ordered)
        summary[mode]["max_retimed_us"] = round(worst_us, 2)
        exact[mode] = {"p99_us": percentile(ordered, 0.99) / NS_PER_US, "max_retimed_us": worst_us}
    return summary, checks(summary, exact)


def checks(summary: Json, exact: Json) -> list[Json]:
    """The targets of a ``run``'s overall figures; ``exact`` holds each mode's p99 and
    re-timed maximum unrounded, ``summary`` them rounded to 0.01 µs."""
    targets = []
    for mode in MODES:
        stats, unrounded = summary[mode], exact[mode]
        targets.append(
            target(
                f"legal_moves {mode} p99",
                stats["p99_us"],
                P99_TARGET_US,
                "µs",
                exact=unrounded["p99_us"],
            )
        )
        targets.append(
            target(
                f"legal_moves {mode} max re-timed",
                stats["max_retimed_us"],
                MAX_TARGET_US,
                "µs",
                exact=unrounded["max_retimed_us"],
            )
        )
    return targets


def render(result: Json) -> str:
    head = [
        "players",
        "positions",
        "moves/pos",
        "cached p50",
        "p99",
        "max",
        "re-timed",
        "uncached p50",
        "p99",
        "max",
        "re-timed",
    ]

    def row(label: str, entry: Json, positions: int, per_pos: str) -> list[str]:
        cells = [label, f"{positions:,}", per_pos]
        for mode in MODES:
            cells += [fmt(entry[mode][f"{s}_us"]) for s in ("p50", "p99", "max", "max_retimed")]
        return cells

    rows = [
        row(p, e, e["positions"], f"{e['moves_per_position']:.2f}")
        for p, e in result["by_players"].items()
    ]
    rows.append(row("all", result["overall"], result["overall"]["cached"]["n"], ""))
    title = (
        f"legal_moves(state, state.turn), {result['games_per_player_count']} seeded random "
        "games per player count; microseconds"
    )
    legend = (
        f"max = raw maximum (includes machine noise); re-timed = the {CANDIDATES} slowest "
        f"positions of the pass re-run uncached, fastest of {RETIME_REPEATS}, slowest kept"
    )
    return f"{title}\n{table(head, rows)}\n{legend}"
