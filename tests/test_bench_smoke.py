"""Smoke test of ``python -m bench engine --quick``: it runs and writes sane JSON; and
every command refuses a size below one.

Only the shape and internal consistency of the figures are checked, never a
timing (design section 7).
"""

import json
import os
import re
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from bench.__main__ import COMMANDS, GRPC_SIZES, build_parser
from bench.common import clear_caches, meta, render_targets, target
from bench.deals import one_deal
from engine.krypkasino import captures, moves

ROOT = Path(__file__).resolve().parents[1]
SIZE_OPTIONS = {
    "engine": ("--games", "--tables", "--growth-tables", "--reps", "--deals"),
    "grpc": ("--games", "--rounds", "--seconds", "--concurrency"),
    "http": ("--clients", "--requests", "--rounds"),
    "overload": ("--http", "--grpc", "--seconds"),
    "soak": ("--workers", "--grpc-clients", "--http-clients"),
}


def _positive(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _check_stats(stats: dict[str, float]) -> None:
    for key in ("n", "p50_us", "p99_us", "max_us", "mean_us"):
        assert _positive(stats[key]), (key, stats)
    assert stats["p50_us"] <= stats["p99_us"] <= stats["max_us"]


def quick_bench(out: Path, *args: str) -> tuple[str, Any]:
    """``python -m bench ARGS --quick --json OUT`` from the checkout, which must succeed:
    its stdout and the figures it wrote."""
    done = subprocess.run(
        [sys.executable, "-m", "bench", *args, "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, json.loads(out.read_text(encoding="utf-8"))


def test_quick_engine_run_writes_every_figure(tmp_path):
    stdout, report = quick_bench(tmp_path / "bench.json", "engine")
    assert "legal_moves(state, state.turn)" in stdout
    assert report["command"] == "engine"

    legal = report["legal_moves"]
    assert sorted(legal["by_players"]) == ["2", "3", "4", "5", "6"]
    for entry in legal["by_players"].values():
        # Both passes replay the same games, so they time the same positions.
        assert entry["cached"]["n"] == entry["uncached"]["n"] == entry["positions"]
        assert _positive(entry["moves_per_position"])
        for mode in ("cached", "uncached"):
            _check_stats(entry[mode])
            assert _positive(entry[mode]["max_retimed_us"])
    total = sum(e["positions"] for e in legal["by_players"].values())
    assert legal["overall"]["cached"]["n"] == legal["overall"]["uncached"]["n"] == total

    caps = report["captures"]
    # One call per table and played rank (13 ranks, K2.3 values 2..14).
    assert caps["overall"]["n"] == 13 * caps["tables"]
    assert len(caps["by_played"]) == 13
    for stats in (caps["overall"], *caps["by_played"].values()):
        _check_stats(stats)
    assert caps["worst"]["us"] == caps["overall"]["max_retimed_us"]
    assert caps["worst"]["moves"] >= 1
    sizes = [g["size"] for g in caps["growth"]]
    assert sizes == list(range(8, 29, 2))
    for g in caps["growth"]:
        assert g["calls"] == 13 * caps["growth_tables_per_size"]
        assert _positive(g["p50_us"]) and _positive(g["max_retimed_us"])
        assert g["max_moves"] >= g["median_moves"] >= 1
    assert all(_positive(g["p50_ratio"]) for g in caps["growth"][1:])
    assert all(_positive(g["max_retimed_ratio"]) for g in caps["growth"][1:])

    deals = report["deals"]
    for path in ("unchecked", "validated", "unchecked_warm"):
        assert _positive(deals[path]["deals_per_s"]) and _positive(deals[path]["deals_per_cpu_s"])
        assert len(deals[path]["runs"]) == deals["repetitions"]
    # K5.1 for 2 players: 4 of the 104 cards go to the table, every other one is played.
    assert deals["unchecked"]["moves_per_deal"] == deals["validated"]["moves_per_deal"] == 100

    assert report["targets"] and all(isinstance(t["met"], bool) for t in report["targets"])


def test_without_a_command_the_engine_runs_only_the_parts_asked(tmp_path):
    """``python -m bench`` alone is ``engine``; ``--only`` keeps to its part; ``--json``
    makes the folders it names (``json_path`` took them) and records the load average
    at the start and the end, as the run's meta says where the figures were taken."""
    _, report = quick_bench(tmp_path / "new" / "bench.json", "--only", "deals")
    assert report["command"] == "engine"
    assert "deals" in report and not {"legal_moves", "captures"} & set(report)
    assert {"loadavg_start", "loadavg_end"} <= set(report["meta"])


def test_the_grpc_benchmarks_default_load_is_the_documented_one():
    """docs/benchmarks.md states the load every row of its tables was measured under."""
    text = " ".join((ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8").split())
    assert f"({GRPC_SIZES['concurrency'].full} calls in flight)" in text
    assert f"the first deals of {GRPC_SIZES['games'].full} seeded 4-player matches" in text


@pytest.mark.parametrize("value", ["0", "-2"])
@pytest.mark.parametrize(
    ("command", "option"),
    [(command, option) for command, options in SIZE_OPTIONS.items() for option in options],
)
def test_every_command_refuses_a_size_below_one(command, option, value, capsys):
    with pytest.raises(SystemExit) as refused:
        build_parser().parse_args([command, option, value])
    assert refused.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"python -m bench {command}: error: argument {option}: must be at least 1, not {value}"
    )


@pytest.mark.parametrize("value", ["-1", str(2**64)])
def test_the_http_request_stream_refuses_a_seed_no_game_can_have(value, capsys):
    """NewGame's seed is an unsigned 64-bit number: -1 crashed the run half-way."""
    with pytest.raises(SystemExit) as refused:
        build_parser().parse_args(["http", "--seed", value])
    assert refused.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"python -m bench http: error: argument --seed: must be 0 to 18446744073709551615, not {value}"
    )


def test_make_help_and_the_readme_name_every_bench_command():
    """``make help`` listed engine, grpc and http, not overload, which the README names."""
    (bench_help,) = [
        line for line in (ROOT / "Makefile").read_text().splitlines() if line.startswith("bench:")
    ]
    readme = " ".join((ROOT / "README.md").read_text().split("\n## Benchmarks\n", 1)[1].split())
    for command in COMMANDS:
        assert command in bench_help.split("##", 1)[1], command
        assert command == "engine" or f"BENCH_ARGS={command}" in readme, command


def test_the_check_table_says_on_which_side_of_its_limit_a_missed_goal_is():
    """A missed at-most goal (the 4-player token's 600 bytes) read "below" its limit."""
    checks = [
        target("token", 700, 600, "bytes", goal=True),
        target("ratio", 0.5, 0.8, "", at_least=True, goal=True),
        target("p99", 300, 200, "µs"),
        target("deals/s", 400, 250, "/s", at_least=True),
    ]
    verdicts = [line.split()[-1] for line in render_targets(checks).splitlines()[2:]]
    assert verdicts == ["above", "below", "MISSED", "ok"]


def test_a_missed_limit_is_never_printed_as_the_limit_itself():
    """A ratio of 0.597 read "0.60 >= 0.60 MISSED" (a benchmark review)."""
    checks = [
        target("ratio", 0.597, 0.6, "", at_least=True),
        target("p99", 200.4, 200.0, "µs"),
        target("token", 241, 600, "bytes", goal=True),
        target("met", 0.6, 0.6, "", at_least=True),
    ]
    measured = [line.split()[1] for line in render_targets(checks).splitlines()[2:]]
    assert measured == ["0.597", "200.4", "241", "0.60"]


@pytest.mark.parametrize("where", ["folder", "under_a_file"])
def test_a_json_path_that_cannot_be_written_is_refused_before_the_run(where, tmp_path, capsys):
    """A folder given to ``--json`` failed with a traceback after the whole run."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    path = tmp_path if where == "folder" else blocker / "figures.json"
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(["engine", "--quick", "--json", str(path)])
    assert stopped.value.code == 2
    assert (
        f"--json: {'' if where == 'folder' else 'cannot write '}{path}" in capsys.readouterr().err
    )
    assert sorted(tmp_path.iterdir()) == [blocker]  # nothing left behind


def test_a_json_path_to_a_pipe_or_a_new_folder_is_taken(tmp_path):
    """The first check, a file made beside the target, refused process substitution's
    ``/dev/fd/63`` and made missing folders while the arguments were read."""
    read_end, write_end = os.pipe()
    try:
        pipe = f"/dev/fd/{write_end}"
        assert build_parser().parse_args(["engine", "--json", pipe]).json == Path(pipe)
    finally:
        os.close(read_end)
        os.close(write_end)
    deep = tmp_path / "new" / "figures.json"
    assert build_parser().parse_args(["engine", "--json", str(deep)]).json == deep
    assert list(tmp_path.iterdir()) == []


def test_cleared_caches_leave_no_engine_memo_filled():
    """A "cold" repetition started with the sweep ranks an earlier one had memoized,
    skipping the sweep search it meant to time (a code review)."""
    one_deal(1, True)
    clear_caches()
    memos = [captures.value_options, captures.sweeps, moves._sweep_ranks]
    assert [memo.cache_info().currsize for memo in memos] == [0, 0, 0]


def test_the_start_time_is_rfc_3339_in_utc_whatever_the_time_zone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """It was local time with a ``+0530`` offset, which RFC 3339 writes ``+05:30`` (a
    review); the logs' times are UTC with a ``Z``."""
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    try:
        started = meta()["started"]
    finally:
        monkeypatch.undo()
        time.tzset()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", started), started
    assert abs(datetime.fromisoformat(started).timestamp() - time.time()) < 60
