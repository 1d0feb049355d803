"""The benchmarks' arithmetic on fixed inputs: no server, no timing. Each figure the team
decides on, computed from given measurements, against hand-computed values."""

from __future__ import annotations

from statistics import median

from bench import captures, deals, legal_moves
from bench import grpc as grpc_bench
from bench.common import NS_PER_US, percentile, render_targets, summarize_ns, verdict

# -- the checks judge the unrounded figures ------------------------------------------------


def test_a_play_echo_ratio_rounded_onto_the_target_misses_it() -> None:
    """5,996 Play calls beside 10,000 echoes in 10 s: 0.5996, which reads 0.6 to three places
    and was judged "ok" on that."""
    ratios = grpc_bench.ratio_rounds(
        [{"calls": 5996, "seconds": 10.0}], [{"calls": 10_000, "seconds": 10.0}]
    )
    ratio = median(ratios)
    report = {"side_by_side": {"ratio": round(ratio, 3)}, "token_bytes_mid_every_deal": {"max": 9}}
    checked, goal, token = grpc_bench.checks(report, ratio)
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
    """249.96 deals/s reads 250.0 to one place, the target's 250."""
    shown = {"deals_per_s": 250.0}
    result = {"unchecked": shown, "validated": shown}
    checks = deals.checks(result, {"unchecked": 249.96, "validated": 250.04})
    assert [(c["value"], c["met"]) for c in checks] == [
        (250.0, False),
        (250.0, False),
        (250.0, True),
    ]
    assert [verdict(c) for c in checks] == ["MISSED", "below", "ok"]


def test_a_p99_rounded_onto_the_target_misses_it() -> None:
    """A p99 of 200,004 ns reads 200.0 µs to 0.01 µs, the target's 200; a re-timed maximum
    of 5,000,004 ns, 5,000.0 µs."""
    ordered = [1000] * 98 + [200_004, 300_000]
    stats = summarize_ns(ordered)
    assert stats["p99_us"] == 200.0
    summary = {mode: {**stats, "max_retimed_us": 5000.0} for mode in legal_moves.MODES}
    exact = {
        "cached": {"p99_us": percentile(ordered, 0.99) / NS_PER_US, "max_retimed_us": 4999.99},
        "uncached": {"p99_us": 199.999, "max_retimed_us": 5_000_004 / NS_PER_US},
    }
    checks = legal_moves.checks(summary, exact)
    assert [c["value"] for c in checks] == [200.0, 5000.0, 200.0, 5000.0]
    assert [verdict(c) for c in checks] == ["MISSED", "ok", "ok", "MISSED"]
    assert render_targets(checks).splitlines()[2].split()[-7:-4] == ["over", "200", "<="]


def test_a_worst_capture_rounded_onto_the_target_misses_it() -> None:
    assert not captures.check(10_000.0, 10_000_004)["met"]
    assert captures.check(10_000.0, 10_000_000)["met"]
