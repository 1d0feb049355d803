"""A real cardrules server in a subprocess on loopback, for tests (design section 7)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

CARDRULES = str(Path(sys.executable).parent / "cardrules")
TEST_KEY = "q83vEjRWeJASNFZ4kBI0VniQEjRWeJASNFZ4kBI0Vng="  # fixed test key, never used in production


@dataclass
class ServerProcess:
    """A running ``cardrules serve``; ``logs`` collects its JSON log lines."""

    process: subprocess.Popen[str]
    grpc_port: int
    logs: list[dict[str, object]] = field(default_factory=list)
    _reader: threading.Thread | None = None

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def terminate(self, timeout: float = 30) -> int:
        """SIGTERM, wait, and return the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout)
        if self._reader is not None:
            self._reader.join(timeout)
        return code

    def log_events(self, event: str) -> list[dict[str, object]]:
        return [line for line in list(self.logs) if line.get("event") == event]


def start_server(
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    keys: str = TEST_KEY,
    timeout: float = 30,
) -> ServerProcess:
    """Start ``cardrules serve`` on a free port and wait for its ``listening`` line."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CARDRULES_")}
    environ.update({"CARDRULES_STATE_KEYS": keys, "CARDRULES_LOG_FORMAT": "json"})
    environ.update(env or {})
    command = [CARDRULES, "serve", "--host", "127.0.0.1", *args]
    if "--grpc-port" not in args:
        command += ["--grpc-port", "0"]
    if "--metrics-port" not in args:
        command += ["--metrics-port", "0"]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environ
    )
    server = ServerProcess(process, 0)
    ready = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            try:
                line = json.loads(raw)
            except ValueError:
                line = {"event": "raw", "text": raw.rstrip()}
            server.logs.append(line)
            if line.get("event") == "listening" and not ready.is_set():
                server.grpc_port = int(str(line["grpc_port"]))
                ready.set()

    server._reader = threading.Thread(target=read, daemon=True)
    server._reader.start()
    if not ready.wait(timeout):
        process.kill()
        raise RuntimeError(f"server did not start: {server.logs}")
    return server
