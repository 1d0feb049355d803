"""The HTTP benchmark still runs end to end and counts what it should (real servers;
timings are never asserted)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import aiohttp

from bench import http as http_bench
from bench.common import Json
from bench.server import cardrules_serve

CALLS = 20
JSON = {"Content-Type": "application/json"}


def test_quick_http_run_writes_every_figure(tmp_path: Path) -> None:
    """docs/benchmarks.md says make test smoke-runs each benchmark; http had no such run."""
    out = tmp_path / "http.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "http", "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "HTTP/gRPC throughput" in done.stdout
    report = json.loads(out.read_text())
    params = report["params"]
    for transport in ("grpc", "http"):
        rounds = report["rounds"][transport]
        assert len(rounds) == params["rounds"]
        for figures in rounds:
            assert figures["requests"] == params["requests"] and figures["failures"] == 0
            assert 0 < figures["p50_us"] <= figures["p99_us"] and figures["rps"] > 0
        summary = report["summary"][transport]
        assert summary["failures"] == 0 and summary["rps"] > 0
        assert min(f["rps"] for f in rounds) <= summary["rps"] <= max(f["rps"] for f in rounds)
    summary = report["summary"]
    assert summary["http_to_grpc_rps"] == round(summary["http"]["rps"] / summary["grpc"]["rps"], 2)


def test_calls_answered_with_an_error_are_not_counted_as_throughput() -> None:
    """requests/s counts the answered ``Play``s only: a round of calls the gateway refused
    read as fast as the refusals came back."""

    async def refused_round(port: int) -> Json:
        url = f"http://127.0.0.1:{port}/v1/krypkasino:play"
        async with aiohttp.ClientSession() as session:

            async def refused(index: int) -> bool:
                # A Play without a state token: refused with a 400.
                async with session.post(url, data=b"{}", headers=JSON) as response:
                    await response.read()
                    return response.status == 200

            return await http_bench._load([refused, refused], CALLS)

    with cardrules_serve() as ports:
        figures = asyncio.run(refused_round(ports.http))
    assert figures["requests"] == figures["failures"] == CALLS, figures
    assert figures["rps"] == 0, figures
