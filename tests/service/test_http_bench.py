"""Smoke test of ``python -m bench http --quick``: both transports run and report (no timings)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
