"""The benchmarks' ``cardrules serve`` (``bench/server.py``): on loopback only, with the
benchmark's own ``CARDRULES_*`` environment and no other, and handed over once every
worker listens (docs/benchmarks.md)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench import server as bench_server
from bench.server import BENCH_KEY, Ports, cardrules_server


def _environment(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode()
    return dict(entry.split("=", 1) for entry in raw.split("\0") if "=" in entry)


def test_the_server_gets_the_benchmarks_settings_and_none_of_the_callers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A setting left in the caller's shell would change what is measured."""
    monkeypatch.setenv("CARDRULES_MAX_REQUEST_BYTES", "1024")
    monkeypatch.setenv("CARDRULES_LOG_FORMAT", "console")
    with cardrules_server() as server:
        settings = {
            name: value
            for name, value in _environment(server.process.pid).items()
            if name.startswith("CARDRULES_")
        }
    assert settings == {"CARDRULES_STATE_KEYS": BENCH_KEY, "CARDRULES_LOG_FORMAT": "json"}


def test_every_worker_listens_on_loopback_alone_when_the_server_is_handed_over() -> None:
    """127.0.0.2 is loopback too, but not the address the server was told to take."""
    with cardrules_server(2) as server:
        lines = [json.loads(line) for line in server.log_path.read_text().splitlines()]
        assert [line["event"] for line in lines].count("listening") == 2
        with socket.create_connection(("127.0.0.1", server.ports.grpc), timeout=10):
            pass
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.2", server.ports.grpc), timeout=10)


LISTENING = '{"event":"listening","grpc_port":5001,"http_port":5002}'


@pytest.fixture
def running() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    process.kill()
    process.wait()


@pytest.mark.parametrize(
    "log",
    [
        # A line grpc's core writes past the logger (its stderr goes to the log too).
        f"E0000 00:00:00.000000 1 chttp2_server.cc:1] not JSON\n{LISTENING}\n",
        # The next line still being written.
        f'{LISTENING}\n{{"event":"listen',
    ],
    ids=["raw_line", "line_being_written"],
)
def test_the_ports_are_read_past_lines_that_are_no_json_yet(
    tmp_path: Path, running: subprocess.Popen[bytes], log: str
) -> None:
    path = tmp_path / "server.log"
    path.write_text(log)
    assert bench_server._wait_listening(path, running, 1) == Ports(5001, 5002)


def _sleep_with(monkeypatch: pytest.MonkeyPatch, sleep: Callable[[float], None]) -> None:
    """``_wait_listening``'s waits go to ``sleep``: bench.server's own name for the time
    module is replaced, not the module every thread shares."""
    clock = SimpleNamespace(monotonic=time.monotonic, sleep=sleep)
    monkeypatch.setattr(bench_server, "time", clock)


def test_a_server_that_exited_is_reported_at_once_with_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not waited on for the start's 30 s: nothing sleeps."""
    path = tmp_path / "server.log"
    path.write_text('{"event":"error","message":"port taken"}\n')
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()

    def no_sleep(seconds: float) -> None:
        raise AssertionError(f"slept {seconds} s on a server that had exited")

    _sleep_with(monkeypatch, no_sleep)
    with pytest.raises(RuntimeError) as refused:
        bench_server._wait_listening(path, ended, 1)
    assert str(refused.value) == f"the server did not start: {path.read_text()}"


def test_the_server_is_handed_over_only_once_every_worker_listens(
    tmp_path: Path, running: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One worker's line is not enough for two: it waits, here while the second one's
    line is written."""
    path = tmp_path / "server.log"
    path.write_text(LISTENING + "\n")
    waits = []

    def second_worker_listens(seconds: float) -> None:
        waits.append(seconds)
        with path.open("a") as log:
            log.write(LISTENING + "\n")

    _sleep_with(monkeypatch, second_worker_listens)
    assert bench_server._wait_listening(path, running, 2) == Ports(5001, 5002)
    assert len(waits) == 1
