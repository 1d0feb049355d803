"""Smoke test of ``python -m bench http --quick``: both transports run and report (no timings)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.__main__ import build_parser
from bench.http import Sizes, sizes

ROOT = Path(__file__).resolve().parents[2]


def test_the_http_benchmark_measures_both_transports(tmp_path):
    out = tmp_path / "http.json"
    command = [sys.executable, "-m", "bench", "http", "--quick", "--clients", "2"]
    done = subprocess.run(
        [*command, "--requests", "40", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "HTTP/gRPC throughput" in done.stdout
    report = json.loads(out.read_text())
    assert report["command"] == "http" and report["params"]["stream"] > 0
    for transport in ("grpc", "http"):
        rounds = report["rounds"][transport]
        assert len(rounds) == report["params"]["rounds"]
        assert all(r["requests"] == 40 and r["failures"] == 0 for r in rounds)
        summary = report["summary"][transport]
        assert 0 < summary["p50_us"] <= summary["p99_us"] and summary["rps"] > 0


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ([], Sizes(clients=8, requests=3000, rounds=5, games=20, moves=40)),
        (["--quick"], Sizes(clients=8, requests=100, rounds=2, games=4, moves=40)),
        (
            ["--quick", "--clients", "1", "--requests", "1", "--rounds", "1"],
            Sizes(clients=1, requests=1, rounds=1, games=4, moves=40),
        ),
    ],
)
def test_http_sizes_are_those_given_else_the_defaults(options, expected):
    assert sizes(build_parser().parse_args(["http", *options])) == expected
