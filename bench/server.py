"""A real ``cardrules serve`` on loopback for the benchmarks (docs/benchmarks.md).

The server gets the benchmark's own ``CARDRULES_*`` environment, never the
caller's, so a setting left in a shell cannot change what is measured. It
logs JSON, request lines included as in production, to a temporary file.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CARDRULES = str(Path(sys.executable).parent / "cardrules")
# Every benchmark server seals with this key, so requests prepared in one process open in another.
BENCH_KEY = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
START_SECONDS = 30.0


@dataclass(frozen=True)
class Ports:
    grpc: int
    http: int


@dataclass(frozen=True)
class Server:
    """A started server: its ports, its process (the supervisor, with several workers) and
    the file its log goes to (while it runs)."""

    ports: Ports
    process: subprocess.Popen[bytes]
    log_path: Path


@contextlib.contextmanager
def cardrules_serve(workers: int = 1) -> Iterator[Ports]:
    """The ports of ``cardrules_server(workers)``."""
    with cardrules_server(workers) as server:
        yield server.ports


@contextlib.contextmanager
def cardrules_server(workers: int = 1) -> Iterator[Server]:
    """``cardrules serve --workers N`` on loopback with metrics off, once every worker listens.

    One worker takes any free ports; several must share fixed ones (the server
    refuses port 0 with more than one worker), so those are chosen here.
    """
    grpc_port, http_port = (0, 0) if workers == 1 else _free_ports(2)
    command = [CARDRULES, "serve", "--host", "127.0.0.1", "--workers", str(workers)]
    command += ["--grpc-port", str(grpc_port), "--http-port", str(http_port), "--metrics-port", "0"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CARDRULES_")}
    env |= {"CARDRULES_STATE_KEYS": BENCH_KEY, "CARDRULES_LOG_FORMAT": "json"}
    with tempfile.TemporaryDirectory(prefix="cardrules-bench-") as folder:
        log_path = Path(folder) / "server.log"
        with log_path.open("w") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
            try:
                yield Server(_wait_listening(log_path, process, workers), process, log_path)
            finally:
                process.terminate()
                process.wait(30)


def _wait_listening(log_path: Path, process: subprocess.Popen[bytes], workers: int) -> Ports:
    """The ports of the ``listening`` log lines, once each worker has written its own."""
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline and process.poll() is None:
        # The last piece may be a line still being written.
        complete = log_path.read_text().split("\n")[:-1]
        lines = [json.loads(raw) for raw in complete if raw.startswith("{")]
        listening = [line for line in lines if line.get("event") == "listening"]
        if len(listening) >= workers:
            return Ports(int(listening[0]["grpc_port"]), int(listening[0]["http_port"]))
        time.sleep(0.05)
    raise RuntimeError(f"the server did not start: {log_path.read_text()}")


def _free_ports(count: int) -> list[int]:
    """``count`` loopback ports that were free a moment ago; the probes stay bound until
    all are chosen, so no two are equal."""
    with contextlib.ExitStack() as stack:
        probes = [stack.enter_context(socket.socket()) for _ in range(count)]
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [int(probe.getsockname()[1]) for probe in probes]
