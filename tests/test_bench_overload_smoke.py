"""The overload benchmark still runs end to end (a smoke run; timings are never asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def test_quick_overload_run_loads_each_transport_and_probes(tmp_path: Path) -> None:
    out = tmp_path / "overload.json"
    command = [sys.executable, "-m", "bench", "overload", "--quick", "--seconds", "2"]
    done = subprocess.run(
        [*command, "--http", "20", "--grpc", "20", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "A server past saturation" in done.stdout
    scenarios = {row["scenario"]: row for row in json.loads(out.read_text())["scenarios"]}
    assert list(scenarios) == ["HTTP", "HTTP and gRPC", "gRPC"]
    # Each scenario loads the transports it names, and only those.
    assert scenarios["HTTP"]["http_per_s"] > 0 == scenarios["HTTP"]["grpc_per_s"]
    assert scenarios["gRPC"]["grpc_per_s"] > 0 == scenarios["gRPC"]["http_per_s"]
    assert scenarios["HTTP and gRPC"]["http_per_s"] > 0
    assert scenarios["HTTP and gRPC"]["grpc_per_s"] > 0
    for row in scenarios.values():
        assert row["calls_failed"] == 0, row
        assert 0 <= row["probe_failures"] <= row["probes"] and row["probes"] > 0
        assert 0 < row["probe_p50_ms"] <= row["probe_max_ms"]
