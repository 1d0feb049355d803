"""The benchmarks' arithmetic on fixed inputs: no server, no timing. Each figure the team
decides on, computed from given measurements by the pure functions the benchmarks call,
against hand-computed values; and what each benchmark prints against what it writes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench import captures, deals, legal_moves, overload, procfs, soak
from bench import grpc as grpc_bench
from bench import http as http_bench
from bench.__main__ import build_parser
from bench.common import (
    Json,
    Slowest,
    fmt,
    percentile,
    render_targets,
    summarize_ns,
    target,
    verdict,
)
from bench.grpc import Load, Round, Schedule
from bench.soak_traffic import Tally

# -- common -----------------------------------------------------------------------------


def test_percentile_is_the_nearest_rank() -> None:
    ten = list(range(1, 11))
    assert [percentile(ten, q) for q in (0.0, 0.1, 0.5, 0.55, 0.99, 1.0)] == [1, 1, 5, 6, 10, 10]
    hundred_one = list(range(1, 102))
    assert percentile(hundred_one, 0.5) == 51 and percentile(hundred_one, 0.99) == 100
    with pytest.raises(ValueError):
        percentile([], 0.5)


def test_the_slowest_kept_are_the_k_largest_slowest_first() -> None:
    """The inputs re-timed for a worst case: the largest times seen, whatever their order."""
    slowest: Slowest[str] = Slowest(3)
    for elapsed, item in [(5, "a"), (9, "b"), (1, "c"), (7, "d"), (8, "e"), (2, "f")]:
        slowest.add(elapsed, item)
    assert slowest.items() == [(9, "b"), (8, "e"), (7, "d")]


def test_summarize_ns_in_microseconds() -> None:
    samples = [k * 1000 for k in range(200, 0, -1)] + [1_000_000]  # 201 samples, unsorted
    assert summarize_ns(samples) == {
        "n": 201,
        "p50_us": 101.0,  # rank ceil(100.5) = 101
        "p99_us": 199.0,  # rank ceil(198.99) = 199
        "max_us": 1000.0,
        "mean_us": 104.98,  # (20,100,000 + 1,000,000) ns / 201
    }


def test_a_limit_met_exactly_is_met_either_way() -> None:
    checks = [
        target("at least", 0.6, 0.6, "", at_least=True),
        target("at most", 600, 600, "bytes"),
        target("just under", 0.5999, 0.6, "", at_least=True),
        target("just over", 600.5, 600, "bytes", goal=True),
    ]
    assert [c["met"] for c in checks] == [True, True, False, False]
    assert [c["op"] for c in checks] == [">=", "<=", ">=", "<="]
    assert [verdict(c) for c in checks] == ["ok", "ok", "MISSED", "above"]
    rows = render_targets(checks).splitlines()[2:]
    assert [row.split()[-1] for row in rows] == ["ok", "ok", "MISSED", "above"]


# -- the checks judge the unrounded figures ------------------------------------------------


def _load(calls: int, seconds: float = 10.0) -> Round:
    return Round(calls, seconds, {}, [1000], 0.0, Schedule(0, 0, 0))


def test_a_play_echo_ratio_rounded_onto_the_target_misses_it() -> None:
    """5,996 Play calls beside 10,000 echoes in 10 s: 0.5996, which reads 0.6 to three places
    and was judged "ok" on that."""
    runs = {name: [_load(10_000)] for name, _ in grpc_bench.CALLS}
    runs["play"] = [_load(5996)]
    sides = grpc_bench.side_by_side_figures(runs)
    assert sides["ratio"] == 0.6 and sides["ratio_rounds"] == [0.6]  # as reported
    report = {"side_by_side": sides, "token_bytes_mid_every_deal": {"max": 9}}
    checked, goal, token = grpc_bench.checks(report, grpc_bench.play_echo_ratio(runs))
    assert (checked["value"], checked["limit"], checked["met"]) == (0.6, 0.6, False)
    assert [verdict(c) for c in (checked, goal, token)] == ["MISSED", "below", "ok"]
    row = render_targets([checked]).splitlines()[2]
    assert row.split()[-6:] == ["under", "0.60", ">=", "0.60", "target", "MISSED"], row
    # Just over the limit, rounded onto it: met, and printed as before.
    (met, *_) = grpc_bench.checks(report, 0.6004)
    assert met["met"] and render_targets([met]).splitlines()[2].split()[-5:] == [
        "0.60",
        ">=",
        "0.60",
        "target",
        "ok",
    ]


def test_a_deal_rate_rounded_onto_the_target_misses_it() -> None:
    """10 deals in 40.0064 ms: 249.96 deals/s, which reads 250.0 to one place, the target."""
    timing = deals.Timing(10 / 249.96, 0.03, 1000)
    result = deals.figures({path: [timing] for path in deals.PATHS}, 10)
    assert result["unchecked"]["deals_per_s"] == 250.0  # as reported
    assert [(c["value"], c["met"]) for c in result["targets"]] == [(250.0, False)] * 3
    assert [verdict(c) for c in result["targets"]] == ["MISSED", "below", "below"]
    shown = {"deals_per_s": 250.0}
    checks = deals.checks(
        {"unchecked": shown, "validated": shown}, {"unchecked": 250.04, "validated": 1.0}
    )
    assert [c["met"] for c in checks] == [True, False, False]


def test_a_p99_rounded_onto_the_target_misses_it() -> None:
    """A p99 of 200,004 ns reads 200.0 µs to 0.01 µs, the target's 200; a re-timed maximum
    of 5,000,004 ns, 5,000.0 µs. The samples come unsorted, two player counts' one after
    the other, as ``run`` joins them: the 99th of 100 sorted is 200,004 ns, the 99th as
    given 1,000."""
    samples = {
        "cached": [1000] * 49 + [300_000] + [200_004] + [1000] * 49,
        "uncached": [199_999] * 100,
    }
    worst_ns = {"cached": 4_999_990, "uncached": 5_000_004}
    summary, checks = legal_moves.overall_figures(samples, worst_ns)
    assert summary["cached"] == {
        "n": 100,
        "p50_us": 1.0,
        "p99_us": 200.0,
        "max_us": 300.0,
        "mean_us": 5.98,  # (98,000 + 200,004 + 300,000) ns / 100
        "max_retimed_us": 4999.99,
    }
    assert summary["uncached"]["max_retimed_us"] == 5000.0
    assert [c["value"] for c in checks] == [200.0, 4999.99, 200.0, 5000.0]
    assert [verdict(c) for c in checks] == ["MISSED", "ok", "ok", "MISSED"]
    assert render_targets(checks).splitlines()[2].split()[-7:-4] == ["over", "200", "<="]


def test_the_deal_target_judges_the_median_unrounded_rate() -> None:
    """245, 250.04 and 250.05 deals/s: their median, 250.04, meets the 250 target; their
    mean, 248.36, and their minimum would miss it."""
    timings = [deals.Timing(10 / rate, 0.03, 1000) for rate in (250.04, 245.0, 250.05)]
    result = deals.figures({path: list(timings) for path in deals.PATHS}, 10)
    assert result["unchecked"]["deals_per_s"] == 250.0  # as reported
    assert [c["met"] for c in result["targets"]] == [True, False, True]


def test_a_worst_capture_rounded_onto_the_target_misses_it() -> None:
    assert not captures.check(10_000.0, 10_000_004)["met"]
    assert captures.check(10_000.0, 10_000_000)["met"]


# -- grpc: side_by_side's figures from given rounds ---------------------------------------

# Per call, per round: calls, seconds, server CPU s, main thread (run ns, wait ns, slices).
SCRIPT = {
    "play": [
        (1000, 2.0, 0.4, (1_000_000_000, 200_000_000, 2000)),
        (1200, 2.0, 0.6, (1_200_000_000, 400_000_000, 3600)),
        (3000, 2.0, 0.6, (1_200_000_000, 400_000_000, 3600)),
    ],
    "echo": [
        (2000, 2.0, 0.2, (800_000_000, 100_000_000, 2000)),
        (2000, 2.5, 0.3, (1_000_000_000, 500_000_000, 4000)),
        (2000, 2.0, 0.3, (1_000_000_000, 500_000_000, 4000)),
    ],
    "echo_instrumented": [
        (1500, 2.0, 0.3, (900_000_000, 0, 1500)),
        (1500, 2.0, 0.3, (900_000_000, 0, 1500)),
        (1500, 2.0, 0.3, (900_000_000, 0, 1500)),
    ],
    "play_floor": [
        (1800, 2.0, 0.36, (1_000_000_000, 0, 1800)),
        (1600, 2.0, 0.32, (1_000_000_000, 0, 1600)),
        (1600, 2.0, 0.32, (1_000_000_000, 0, 1600)),
    ],
}


def scripted(rounds: int) -> dict[str, list[Round]]:
    """``rounds`` rounds of SCRIPT; Play's latencies 1..100 µs a round, the echo's failures
    one more each round, the floor's one a round."""
    runs: dict[str, list[Round]] = {}
    for name, _ in grpc_bench.CALLS:
        runs[name] = []
        for number, (calls, seconds, cpu, schedule) in enumerate(SCRIPT[name][:rounds]):
            ns = [k * 1000 for k in range(1, 101)] if name == "play" else [1000]
            failures = {
                "echo": {"UNAVAILABLE": number + 1},
                "play_floor": {"DEADLINE_EXCEEDED": 1},
            }.get(name, {})
            runs[name].append(Round(calls, seconds, failures, ns, cpu, Schedule(*schedule)))
    return runs


def test_side_by_side_figures_of_two_rounds() -> None:
    report = grpc_bench.side_by_side_figures(scripted(2))
    play, echo = report["play"], report["echo"]
    # Medians of the rounds' rates: (500, 600) and (1000, 800) calls/s.
    assert (play["throughput_rps"], echo["throughput_rps"]) == (550.0, 900.0)
    assert report["echo_instrumented"]["throughput_rps"] == 750.0
    assert report["play_floor"]["throughput_rps"] == 850.0
    # Server CPU per call: 0.4 s / 1000 and 0.6 s / 1200 calls, in µs; its median.
    assert play["server_cpu_us_per_call"] == 450.0
    assert echo["server_cpu_us_per_call"] == 125.0  # 100 and 150
    # Main thread: run 1.0 and 1.2 s, wait 0.2 and 0.4 s of 2 s rounds; 2 and 3 slices a call.
    assert play["main_thread_running_pct"] == 55.0
    assert play["main_thread_waiting_for_a_core_pct"] == 15.0
    assert play["main_thread_scheduled_per_call"] == 2.5
    assert echo["main_thread_running_pct"] == 40.0  # 40 % and 40 %
    assert echo["main_thread_waiting_for_a_core_pct"] == 12.5  # 5 % and 20 %
    assert echo["main_thread_scheduled_per_call"] == 1.5  # 1 and 2
    assert play["latency"] == {
        "n": 200,
        "p50_us": 50.0,
        "p99_us": 99.0,
        "max_us": 100.0,
        "mean_us": 50.5,
    }
    assert (play["failures"], echo["failures"], report["play_floor"]["failures"]) == (0, 3, 2)
    # Ratios: the median of the rounds' ratios (not the ratio of the totals, 0.619).
    assert report["ratio_rounds"] == [0.5, 0.75] and report["ratio"] == 0.625
    assert report["ratio_instrumented_rounds"] == [0.667, 0.8]
    assert report["ratio_instrumented"] == 0.733
    assert report["ceiling_rounds"] == [0.75, 0.938] and report["ceiling"] == 0.844
    assert report["floor_rounds"] == [0.9, 1.0] and report["floor"] == 0.95
    assert grpc_bench.play_echo_ratio(scripted(2)) == 0.625


def test_an_odd_count_of_rounds_takes_the_middle_one() -> None:
    """Three rounds: the median round, not the mean (866.7 Play/s) nor the last."""
    report = grpc_bench.side_by_side_figures(scripted(3))
    assert report["play"]["throughput_rps"] == 600.0  # of 500, 600 and 1500
    assert report["echo"]["throughput_rps"] == 1000.0  # of 1000, 800 and 1000
    assert report["play"]["server_cpu_us_per_call"] == 400.0  # of 400, 500 and 200
    assert report["ratio_rounds"] == [0.5, 0.75, 1.5] and report["ratio"] == 0.75
    assert grpc_bench.play_echo_ratio(scripted(3)) == 0.75  # their mean is 0.917


def test_rounds_alternate_the_order_of_the_calls() -> None:
    """Every round ran Play, echo, instrumented echo and floor in that order, so Play always
    followed the previous round's floor and the floor always ran last; ``bench http``
    alternates its order. Play and the echo stay side by side in every round."""
    methods = dict(grpc_bench.CALLS)
    forth = ["play", "echo", "echo_instrumented", "play_floor"]
    back = ["play_floor", "echo_instrumented", "echo", "play"]
    assert grpc_bench.load_order(3) == [
        (number, name, methods[name])
        for number, names in enumerate((forth, back, forth))
        for name in names
    ]


def test_workers_figures_take_the_median_load() -> None:
    loads = [
        Load(1000, 1.0, {}, [1000]),
        Load(3000, 1.0, {"UNAVAILABLE": 2}, [3000]),
        Load(3000, 2.0, {"CANCELLED": 1}, [2000]),
    ]
    assert grpc_bench.worker_figures(loads) == {
        "throughput_rps": 1500.0,  # of 1000, 3000 and 1500; their mean is 1833.3
        "latency": summarize_ns([1000, 2000, 3000]),
        "failures": 3,
    }


def test_the_token_is_measured_in_the_middle_distribution_of_a_deal() -> None:
    """The third distribution of six, not the first nor the last; of an odd count, its
    middle one."""
    assert [grpc_bench.mid_deal(d, 6) for d in range(1, 7)] == [False, False, True] + [False] * 3
    assert [grpc_bench.mid_deal(d, 5) for d in range(1, 6)] == [False, False, True, False, False]
    assert grpc_bench.mid_deal(1, 1)


def _grpc_report() -> Json:
    # Skewed sizes, so that no median is their mean or their maximum; deals unsorted.
    token_sizes = {3: [400, 410, 420, 600], 1: [200, 210, 290], 2: [300, 330, 900]}
    requests = [b"a" * 3, b"a" * 50, b"a" * 7]
    report = grpc_bench.stream_figures(requests, [90, 400, 100], token_sizes)
    report["concurrency"] = 4
    report["seconds_per_round"] = 2.0
    runs = scripted(2)
    report["side_by_side"] = grpc_bench.side_by_side_figures(runs)
    report["workers"] = {
        "workers_1": grpc_bench.worker_figures([Load(1801, 2.0, {}, [1000, 3000])]),
        "workers_2": grpc_bench.worker_figures([Load(3201, 2.0, {"CANCELLED": 1}, [2000, 4000])]),
    }
    report["targets"] = grpc_bench.checks(report, grpc_bench.play_echo_ratio(runs))
    return report


def test_the_stream_and_the_checks_of_a_grpc_run() -> None:
    report = _grpc_report()
    assert list(report) == [
        "requests",
        "echo_bytes",
        "request_bytes_median",
        "token_bytes_mid_deal",
        "token_bytes_mid_every_deal",
        "concurrency",
        "seconds_per_round",
        "side_by_side",
        "workers",
        "targets",
    ]
    assert report["requests"] == 3
    assert report["echo_bytes"] == 100  # of 90, 400 and 100; their mean is 196
    assert report["request_bytes_median"] == 7  # of 3, 50 and 7; their mean is 20
    assert report["token_bytes_mid_deal"] == {"median": 210, "max": 290}  # mean 233
    assert report["token_bytes_mid_every_deal"] == {
        "median": 365,  # of 10 sizes, between 330 and 400; their mean is 446
        "max": 900,
        "by_deal": [
            {"deal": 1, "median": 210, "max": 290},
            {"deal": 2, "median": 330, "max": 900},  # mean 510
            {"deal": 3, "median": 415, "max": 600},  # mean 457.5
        ],
    }
    assert [
        (t["metric"], t["value"], t["limit"], t["op"], t["kind"]) for t in report["targets"]
    ] == [
        ("Play/echo throughput ratio", 0.625, 0.6, ">=", "target"),
        ("Play/echo throughput ratio (goal)", 0.625, 0.8, ">=", "goal"),
        ("4-player mid-deal token, every deal (goal)", 900, 600, "<=", "goal"),
    ]
    assert grpc_bench.failed_calls(report) == 3 + 2 + 1


def test_the_printed_grpc_tables_show_the_json_figures() -> None:
    """What ``bench grpc`` prints is what it writes: each call's row, the ratios, the tokens,
    the workers."""
    report = _grpc_report()
    sides = report["side_by_side"]
    lines = grpc_bench.render(report).splitlines()
    columns = (
        "throughput_rps",
        "p50_us",
        "p99_us",
        "server_cpu_us_per_call",
        "main_thread_running_pct",
        "main_thread_waiting_for_a_core_pct",
        "main_thread_scheduled_per_call",
        "failures",
    )
    for name, _ in grpc_bench.CALLS:
        (row,) = [line.split() for line in lines if line.split()[:1] == [name]]
        side = sides[name]
        expected = [side["latency"][key] if key.endswith("_us") else side[key] for key in columns]
        assert row[1:] == [str(value) for value in expected], name
    ratio_line = next(line for line in lines if line.startswith("throughput ratio"))
    assert ratio_line == (
        "throughput ratio Play/echo: 0.625 (rounds [0.5, 0.75]); Play/instrumented echo: 0.733; "
        "instrumented echo/echo, the ceiling if nothing but the RPC path cost: 0.844; "
        "Play floor/echo, if the rules cost nothing: 0.95 (rounds [0.9, 1.0])"
    )
    assert (
        "every deal: median 365 B, max 900 B (by deal, median/max: 1: 210/290 B, 2: 330/900 B, "
        "3: 415/600 B); first deal alone: median 210 B, max 290 B" in "\n".join(lines)
    )
    for name, w in report["workers"].items():
        (row,) = [line.split() for line in lines if line.split()[:1] == [name]]
        assert row[1:] == [
            str(w["throughput_rps"]),
            str(w["latency"]["p50_us"]),
            str(w["latency"]["p99_us"]),
            str(w["failures"]),
        ]


# -- /proc ------------------------------------------------------------------------------


def test_schedstat_is_run_wait_slices() -> None:
    assert grpc_bench.parse_schedstat("1200 340 56\n") == Schedule(1200, 340, 56)


def test_main_thread_schedule_of_a_real_process() -> None:
    """``/proc/PID/schedstat``: time on a core, time waiting for one, timeslices; checked
    against ``/proc/PID/sched`` of a stopped child that ran about 0.2 s."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, signal, time\nt = time.process_time()\n"
            "while time.process_time() - t < 0.2: pass\nos.kill(os.getpid(), signal.SIGSTOP)",
        ]
    )
    try:
        deadline = time.monotonic() + 10
        while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "T":
            assert child.poll() is None, f"the child exited ({child.returncode}) before stopping"
            assert time.monotonic() < deadline, "the child did not stop within 10 s"
            time.sleep(0.001)
        run_ns, wait_ns, slices = grpc_bench._main_thread_schedule(child.pid)
        sched = dict(
            (line.split(":")[0].strip(), line.split(":")[1].strip())
            for line in Path(f"/proc/{child.pid}/sched").read_text().splitlines()
            if ":" in line
        )
        assert abs(run_ns / 1e6 - float(sched["se.sum_exec_runtime"])) < 1.0
        assert abs(slices - int(sched["nr_switches"])) <= 2, (slices, sched["nr_switches"])
        assert run_ns >= 0.15e9 and wait_ns >= 0
    finally:
        child.kill()
        child.wait()


def test_cpu_ticks_are_user_plus_system_of_the_process_only() -> None:
    """Fields 14 and 15 of ``/proc/PID/stat`` (utime, stime), not its children's (16, 17),
    after a command name that holds ") "."""
    fields = ["S", "1", "77", "77", "0", "-1", "4194560", "10", "0", "0", "0"]
    fields += ["300", "100", "50000", "70000", "20", "0", "1", "0", "5"]
    assert procfs.cpu_ticks("77 (odd) name) " + " ".join(fields) + "\n") == 400


def test_cpu_seconds_of_this_process() -> None:
    before = os.times()
    measured = procfs.cpu_seconds(os.getpid())
    after = os.times()
    tick = 1 / os.sysconf("SC_CLK_TCK")
    assert before.user + before.system - tick <= measured <= after.user + after.system + tick


# -- http -------------------------------------------------------------------------------


def test_an_http_round_counts_only_answered_calls() -> None:
    latencies = [k * 1000 for k in range(100, 0, -1)]
    assert http_bench.round_figures(latencies, 10, 2.0) == {
        "requests": 100,
        "failures": 10,
        "rps": 45.0,  # 90 answered in 2 s
        "p50_us": 50.0,
        "p99_us": 99.0,
    }


def test_http_summary_takes_the_median_round() -> None:
    def figures(rps: float, p50: float, p99: float, failures: int = 0) -> dict[str, float]:
        return {"rps": rps, "p50_us": p50, "p99_us": p99, "failures": failures}

    rounds = {
        "grpc": [figures(1000, 100, 900), figures(3000, 300, 300), figures(2000, 200, 500, 1)],
        "http": [figures(500, 50, 60), figures(700, 70, 80), figures(900, 90, 40)],
    }
    summary = http_bench.summarize(rounds)
    assert summary["grpc"] == {"rps": 2000, "p50_us": 200, "p99_us": 500, "failures": 1}
    assert summary["http"] == {"rps": 700, "p50_us": 70, "p99_us": 60, "failures": 0}
    assert summary["http_to_grpc_rps"] == 0.35
    even = {t: rounds[t][:2] for t in rounds}
    assert http_bench.summarize(even)["grpc"]["rps"] == 2000  # the mean of the middle two
    size = http_bench.Sizes(clients=8, requests=100, rounds=3, games=1, moves=1)
    lines = http_bench.render(size, 40, summary).splitlines()
    for transport in http_bench.TRANSPORTS:
        (row,) = [line.split() for line in lines if line.split()[:1] == [transport]]
        shown = summary[transport]
        assert row[1:] == [str(shown[k]) for k in ("rps", "p50_us", "p99_us", "failures")]
    assert lines[-1] == "HTTP/gRPC throughput: 0.35"


def test_a_failed_call_over_either_transport_fails_the_http_run() -> None:
    """Failures of two rounds add up; any over either transport exits 1."""

    def rounds(grpc_failures: tuple[int, ...], http_failures: tuple[int, ...]) -> Json:
        return {
            name: [{"rps": 100, "p50_us": 1, "p99_us": 2, "failures": f} for f in failures]
            for name, failures in (("grpc", grpc_failures), ("http", http_failures))
        }

    summary = http_bench.summarize(rounds((1, 2, 0), (0, 0, 0)))
    assert summary["grpc"]["failures"] == 3
    assert http_bench.exit_status(summary) == 1
    assert http_bench.exit_status(http_bench.summarize(rounds((0, 0, 0), (0, 4, 0)))) == 1
    assert http_bench.exit_status(http_bench.summarize(rounds((0, 0, 0), (0, 0, 0)))) == 0


def test_http_rounds_alternate_the_transports() -> None:
    assert http_bench.load_order(3) == [
        (0, "grpc"),
        (0, "http"),
        (1, "http"),
        (1, "grpc"),
        (2, "grpc"),
        (2, "http"),
    ]


# -- soak -------------------------------------------------------------------------------


def _samples() -> list[dict[str, object]]:
    out = []
    for seconds in range(0, 101, 10):
        out.append(
            {
                "seconds": float(seconds),
                "calls": 30 * seconds,
                "cpu_seconds": 2.0 + 0.5 * seconds,
                "processes": [{}],
                "rss_kib": 10_000 + 36 * seconds if seconds >= 50 else 1000 + 216 * seconds,
                "hwm_kib": 20_000,
                "fds": 10 + (seconds >= 80),
                "threads": 5,
                "games": seconds // 10,
                "failures": 0,
            }
        )
    return out


def test_soak_summary_from_fixed_samples() -> None:
    tally = Tally()
    tally.calls.update({"grpc": 2500, "http": 520})
    tally.games.update({"grpc": 7, "http": 3})
    samples = _samples()
    summary = soak.summarize(samples, tally, soak.warmup_seconds(100.0))
    assert soak.warmup_seconds(100.0) == 50.0 and soak.warmup_seconds(1000.0) == 100.0
    assert summary["warmup_seconds"] == 50.0 and summary["end_seconds"] == 100.0
    rss = summary["footprint"]["rss_kib"]
    assert rss == {
        "start": 1000,
        "warmup_end": 11_800,
        "end": 13_600,
        "max": 13_600,
        "per_hour": 129_600.0,  # 36 KiB a second after the warm-up
        "per_hour_last_quarter": 129_600.0,
    }
    assert summary["footprint"]["hwm_kib"]["per_hour"] == 0.0
    # fds: one more from 80 s on; over 80..100 s (the last quarter from 75 s): flat.
    assert summary["footprint"]["fds"]["per_hour_last_quarter"] == 0.0
    assert summary["server_cpu_cores"] == 0.5
    assert summary["calls_per_second"] == 30.0 and summary["calls"] == 3020
    assert summary["games"] == 10


@pytest.mark.parametrize(
    ("arguments", "seconds", "every", "one_deal"),
    [
        ([], 120.0, 5.0, False),
        (["--quick"], 8.0, 1.0, True),
        (["--minutes", "0.5"], 30.0, 5.0, False),
        (["--quick", "--minutes", "0.5", "--sample-seconds", "2"], 30.0, 2.0, True),
    ],
)
def test_the_soak_runs_as_long_as_its_command_line_says(
    arguments: list[str], seconds: float, every: float, one_deal: bool
) -> None:
    """Two minutes of whole matches by default, 8 s of one-deal matches with ``--quick``
    (docs/benchmarks.md, "Soak")."""
    params = soak.plan(build_parser().parse_args(["soak", *arguments]))
    assert (params["seconds"], params["sample_seconds"], params["one_deal"]) == (
        seconds,
        every,
        one_deal,
    )


def _soak_outcome(tally: Tally, stopped: str | None, log: Path) -> dict[str, object]:
    params: Json = {"workers": 1, "grpc_clients": 6, "http_clients": 2}
    params |= {"seconds": 100.0, "sample_seconds": 10.0}
    return {"params": params, **soak.outcome(_samples(), tally, stopped, 100.0, log)}


def test_a_soak_fails_on_any_failure_retried_attempt_or_stopped_server(tmp_path: Path) -> None:
    """Each fails the run (exit 1) and is named under the tables (docs/benchmarks.md,
    "Soak"); a clean run exits 0 and names none."""
    log = tmp_path / "server.log"
    log.write_text('{"event":"request","code":"OK"}\n')
    clean = _soak_outcome(Tally(), None, log)
    assert soak.exit_status(clean) == 0
    assert "failures:" not in soak.render(clean) and "exited" not in soak.render(clean)

    tally = Tally()
    tally.failures.update({"grpc play INTERNAL boom": 2, "http score TRANSPORT TimeoutError": 1})
    failed = _soak_outcome(tally, None, log)
    assert soak.exit_status(failed) == 1
    assert failed["summary"]["failures"] == 3  # type: ignore[index]
    assert soak.render(failed).splitlines()[-1] == (
        "failures: grpc play INTERNAL boom x2; http score TRANSPORT TimeoutError x1"
    )

    log.write_text("".join(f'{{"event":"request","attempt":{n}}}\n' for n in (2, 3, 4)))
    retried = _soak_outcome(Tally(), None, log)
    assert soak.exit_status(retried) == 1
    assert soak.render(retried).splitlines()[-1] == f"failures: {soak.RETRIED} x3"

    log.write_text("")
    stopped = _soak_outcome(Tally(), "the server exited with status 3", log)
    assert soak.exit_status(stopped) == 1
    assert soak.render(stopped).splitlines()[-1] == "the server exited with status 3"


def test_the_soak_table_has_a_row_a_minute_and_the_last_sample() -> None:
    """A run of 3 minutes or more: a row a minute; a shorter one: about ten rows. The last
    sample always ends the table, wherever it falls."""
    long_run = [{"seconds": float(seconds)} for seconds in range(0, 301, 5)]
    assert [row["seconds"] for row in soak.rows_over_time(long_run, 300.0)] == [
        0.0,
        60.0,
        120.0,
        180.0,
        240.0,
        300.0,
    ]
    # A sample a second (--quick), the last one late.
    short_run = [{"seconds": float(seconds)} for seconds in range(9)] + [{"seconds": 8.3}]
    rows = [row["seconds"] for row in soak.rows_over_time(short_run, 8.0)]
    assert rows == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 8.3]


# -- deals ------------------------------------------------------------------------------


def _deal_result() -> Json:
    # Three repetitions of 10 deals: wall s, CPU s, moves.
    timings = {
        "unchecked": [(0.02, 0.025, 1000), (0.04, 0.05, 1010), (0.025, 0.04, 1020)],
        "validated": [(0.05, 0.04, 1000), (0.08, 0.1, 1010), (0.04, 0.025, 1020)],
        "unchecked_warm": [(0.01, 0.02, 990), (0.02, 0.02, 1020), (0.04, 0.02, 1000)],
    }
    return deals.figures(
        {path: [deals.Timing(*t) for t in rows] for path, rows in timings.items()}, 10
    )


def test_deal_rates_are_medians_of_the_repetitions() -> None:
    result = _deal_result()
    assert (result["players"], result["repetitions"], result["deals_per_rep"]) == (2, 3, 10)
    fast = result["unchecked"]
    # 500, 250 and 400 deals/s; 400, 200 and 250 per CPU s; 20, 39.6 and 24.51 µs a move.
    assert (fast["deals_per_s"], fast["min_deals_per_s"], fast["max_deals_per_s"]) == (
        400.0,
        250.0,
        500.0,
    )
    assert fast["deals_per_cpu_s"] == 250.0 and fast["us_per_move"] == 24.51
    assert fast["moves_per_deal"] == 100.0
    assert fast["runs"][1] == {
        "seconds": 0.04,
        "cpu_seconds": 0.05,
        "moves": 1010,
        "deals_per_s": 250.0,
        "deals_per_cpu_s": 200.0,
        "us_per_move": 39.6,
    }
    assert result["validated"]["deals_per_s"] == 200.0
    assert result["unchecked_warm"]["deals_per_s"] == 500.0
    assert [(t["metric"], t["value"], t["limit"], t["kind"]) for t in result["targets"]] == [
        ("deals/s unchecked", 400.0, 250.0, "target"),
        ("deals/s unchecked", 400.0, 500.0, "goal"),
        ("deals/s validated", 200.0, 250.0, "goal"),
    ]
    assert [verdict(t) for t in result["targets"]] == ["ok", "below", "below"]


# -- overload ---------------------------------------------------------------------------


def test_overload_rates_and_probe_figures() -> None:
    served, failed = {"http": 1234, "grpc": 5678}, {"http": 3, "grpc": 4}
    row = overload.scenario_figures(
        "HTTP and gRPC", served, failed, [0.010, 0.030, 0.020, 0.500], 1, 10
    )
    assert row == {
        "scenario": "HTTP and gRPC",
        "http_per_s": 123,  # over the load's 10 s
        "grpc_per_s": 568,
        "calls_failed": 7,
        "probes": 4,
        "probe_p50_ms": 25.0,
        "probe_max_ms": 500.0,
        "probe_failures": 1,
    }
    lines = overload.render({"http": 5, "grpc": 5, "seconds": 10}, [row]).splitlines()
    assert lines[-1].split()[3:] == [str(v) for v in list(row.values())[1:]]
    # A failed call fails the run; a failed probe alone does not.
    clean = overload.scenario_figures("HTTP", served, {"http": 0, "grpc": 0}, [0.01], 1, 10)
    assert overload.exit_status([clean, row]) == 1 and overload.exit_status([clean]) == 0


def _row(lines: list[str], label: str) -> list[str]:
    """The cells of the one table row of ``lines`` that starts with ``label``, after it."""
    (row,) = [line[len(label) :].split() for line in lines if line.startswith(label + " ")]
    return row


def test_the_printed_deal_table_shows_the_json_figures() -> None:
    result = _deal_result()
    lines = deals.render(result).splitlines()
    assert lines[0] == ("whole random 2-player deals, median of 3 repetitions x 10 deals, one core")
    # deals/s, min, max, per CPU s, µs/move, moves/deal
    assert _row(lines, "unchecked") == ["400", "250", "500", "250", "24.5", "100"]
    assert _row(lines, "validated") == ["200", "125", "250", "250", "50.0", "100"]
    assert _row(lines, "unchecked_warm") == ["500", "250", "1,000", "500", "19.6", "99.0"]
    for path in deals.PATHS:
        shown = result[path]
        keys = ["deals_per_s", "min_deals_per_s", "max_deals_per_s", "deals_per_cpu_s"]
        keys += ["us_per_move", "moves_per_deal"]
        assert _row(lines, path) == [fmt(shown[key]) for key in keys], path


def test_the_printed_legal_moves_table_shows_the_json_figures() -> None:
    """Each player count's row and the overall one: positions, moves a position, then p50,
    p99, raw and re-timed maxima of the cached pass, then of the uncached one."""
    # 101 samples a count: 1..100 µs and 500 µs, 2..200 µs and 700 µs; p50 the 51st, p99
    # the 100th. Uncached: 3 times as long.
    two = [k * 1000 for k in range(1, 101)] + [500_000]
    three = [k * 2000 for k in range(1, 101)] + [700_000]
    by_players: Json = {}
    for players, cached, retimed in (("2", two, 123_400), ("3", three, 234_400)):
        by_players[players] = {
            "cached": {**summarize_ns(cached), "max_retimed_us": retimed / 1000},
            "uncached": {
                **summarize_ns(3 * ns for ns in cached),
                "max_retimed_us": 3 * retimed / 1000,
            },
            "positions": 101,
            "moves_per_position": 7.5,
        }
    samples = {"cached": two + three, "uncached": [3 * ns for ns in two + three]}
    overall, _ = legal_moves.overall_figures(samples, {"cached": 234_400, "uncached": 703_200})
    result = {"games_per_player_count": 2, "by_players": by_players, "overall": overall}
    lines = legal_moves.render(result).splitlines()
    # positions, moves/position; cached p50, p99, max, re-timed; uncached the same
    two_row = ["101", "7.50", "51.0", "100", "500", "123", "153", "300", "1,500", "370"]
    three_row = ["101", "7.50", "102", "200", "700", "234", "306", "600", "2,100", "703"]
    assert (_row(lines, "2"), _row(lines, "3")) == (two_row, three_row)
    # 202 samples together: p50 the 101st sorted (68 µs, of each count's; 102 are 68 µs or
    # less), p99 the 200th (200 µs, below 500 and 700); re-timed: the largest of worst_ns.
    assert _row(lines, "all") == ["202", "68.0", "200", "700", "234", "204", "600", "2,100", "703"]


def test_the_printed_capture_tables_show_the_json_figures() -> None:
    def stats(p50: float, p99: float, top: float, retimed: float) -> Json:
        return {
            "n": 3,
            "p50_us": p50,
            "p99_us": p99,
            "max_us": top,
            "mean_us": 1.0,
            "max_retimed_us": retimed,
        }

    def grown(size: int, p50: float, retimed: float, ratios: tuple[float, float] | None) -> Json:
        return {
            "size": size,
            "calls": 1300,
            "p50_us": p50,
            "p99_us": 2 * p50,
            "max_us": 5 * p50,
            "max_retimed_us": retimed,
            "median_moves": 4.5,
            "max_moves": 12,
            "p50_ratio": ratios and ratios[0],
            "max_retimed_ratio": ratios and ratios[1],
        }

    result = {
        "tables": 1500,
        "table_size": 20,
        "overall": stats(3.25, 41.5, 950.0, 120.0),
        "by_played": {"2 (2)": stats(1.5, 2.25, 3.75, 2.5), "A (14)": stats(4.25, 41.5, 950, 120)},
        "worst": {"us": 120.0, "played": "A (14)", "table": "A♠ A♥ 2♣", "moves": 7},
        "growth_tables_per_size": 5,
        "growth": [grown(8, 2.0, 4.25, None), grown(10, 3.0, 7.0, (1.5, 1.75))],
    }
    lines = captures.render(result).splitlines()
    assert lines[0].startswith("table_moves([card], table) on 1,500 random 20-card tables")
    # p50, p99, raw maximum, re-timed maximum
    assert _row(lines, "2 (2)") == ["1.50", "2.25", "3.75", "2.50"]
    assert _row(lines, "A (14)") == ["4.25", "41.5", "950", "120"]
    assert _row(lines, "all") == ["3.25", "41.5", "950", "120"]
    assert "worst: A (14) against A♠ A♥ 2♣ -> 7 moves, 120 µs re-timed" in lines
    assert "growth with table size, 5 tables x 13 values per size" in "\n".join(lines)
    # cards, calls, p50 and its ratio, p99, max, re-timed and its ratio, moves p50, max
    assert _row(lines, "8") == ["1,300", "2.00", "4.00", "10.0", "4.25", "4.50", "12"]
    assert _row(lines, "10") == [
        "1,300",
        "3.00",
        "x1.50",
        "6.00",
        "15.0",
        "7.00",
        "x1.75",
        "4.50",
        "12",
    ]


def test_the_printed_soak_tables_show_the_json_figures() -> None:
    tally = Tally()
    tally.calls.update({"grpc": 2500, "http": 520})
    tally.games.update({"grpc": 7, "http": 3})
    tally.refusals.update({"bad token": 4})
    samples = _samples()
    report = {
        "params": {
            "workers": 2,
            "grpc_clients": 3,
            "http_clients": 1,
            "seconds": 100.0,
            "sample_seconds": 10.0,
        },
        "samples": samples,
        "tally": tally.as_json(),
        "summary": soak.summarize(samples, tally, soak.warmup_seconds(100.0)),
        "server_stopped": None,
    }
    lines = soak.render(report).splitlines()
    assert lines[0].startswith("Soak: cardrules serve --workers 2, 3 gRPC and 1 HTTP/JSON")
    # Every sample of the short run: time, RSS and HWM in MiB, fds, threads, CPU % and
    # calls a second since the previous row, games, failures.
    assert _row(lines, "0:00") == ["1.0", "19.5", "10", "5", "-", "-", "0", "0"]
    assert _row(lines, "1:00") == ["11.9", "19.5", "10", "5", "50", "30", "6", "0"]
    assert _row(lines, "1:40") == ["13.3", "19.5", "11", "5", "50", "30", "10", "0"]
    for seconds in range(0, 101, 10):
        assert _row(lines, f"{seconds // 60}:{seconds % 60:02d}")[-2] == str(seconds // 10)
    # The footprint: start, warm-up end, end, max, per hour after the warm-up and over the
    # last quarter.
    assert _row(lines, "RSS MiB") == ["1.0", "11.5", "13.3", "13.3", "126.6", "126.6"]
    assert _row(lines, "HWM MiB") == ["19.5"] * 4 + ["0.0", "0.0"]
    # fds: 10, 10, 10, 11, 11, 11 over 50..100 s, a slope of 45/1750 a second; flat from 75 s.
    assert _row(lines, "fds") == ["10", "10", "11", "11", "92.6", "0.00"]
    assert lines[-1] == (
        "3,020 calls (30/s; grpc 2,500, http 520), 10 whole matches (grpc 7, http 3), "
        "4 expected refusals, 0 failures; server CPU 0.5 cores"
    )
