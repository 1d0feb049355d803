"""A real server started with a standard stream closed or broken (docs/operations.md,
"Configuration" and "Log lines")."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import ResponseReceived, StreamReset, TrailersReceived

from bench.procfs import descendants
from tests.service.grpc_helpers import connect
from tests.service.metrics_helpers import metric_samples
from tests.service.server_process import (
    CARDRULES,
    free_port,
    free_ports,
    kill_group,
    running,
    server_environment,
    start_session,
)

WORKERS = ("--workers", "2")
NEW_GAME = "/cardrules.krypkasino.v1.KrypkasinoService/NewGame"


def malformed_timeout_calls(port: int, count: int) -> list[str]:
    """``count`` gRPC calls whose ``grpc-timeout`` header grpc cannot parse, which any
    client can send: grpc's core answers each itself and writes an error line on
    stderr. Returns each call's ``grpc-status`` (``reset`` for a reset stream)."""
    client = H2Connection(H2Configuration(client_side=True))
    client.initiate_connection()
    for _ in range(count):
        client.send_headers(
            client.get_next_available_stream_id(),
            [
                (":method", "POST"),
                (":scheme", "http"),
                (":path", NEW_GAME),
                (":authority", "test"),
                ("content-type", "application/grpc"),
                ("te", "trailers"),
                ("grpc-timeout", "bogus"),
            ],
            end_stream=True,
        )
    statuses: dict[int, str] = {}
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(client.data_to_send())
        while len(statuses) < count:
            data = connection.recv(65536)
            assert data, f"the connection ended after {len(statuses)} answers"
            for event in client.receive_data(data):
                if isinstance(event, ResponseReceived | TrailersReceived):
                    headers = dict(event.headers or [])
                    if b"grpc-status" in headers and event.stream_id is not None:
                        statuses[event.stream_id] = headers[b"grpc-status"].decode()
                elif isinstance(event, StreamReset) and event.stream_id is not None:
                    statuses[event.stream_id] = "reset"
            connection.sendall(client.data_to_send())
    return list(statuses.values())


@pytest.mark.parametrize("args", [(), WORKERS], ids=["one_process", "workers"])
def test_a_closed_stderr_and_stdin_are_given_dev_null(args, tmp_path: Path) -> None:
    """``2>&-``: the first file the server opened took descriptor 2, the metrics
    folder's lock file in every process of ``--workers 2`` (the metrics listener or
    the event loop's epoll with one process), and grpc's error line for each malformed
    call grew that hidden file without bound. ``/dev/null`` holds 0 and 2 now."""
    launcher = ("sh", "-c", 'exec "$@" <&- 2>&-', "sh")
    flags = (*args, "--grpc-port", str(free_port())) if args else ()
    # The temporary metrics folder of ``--workers``, where the test can look into it.
    with running(flags, {"TMPDIR": str(tmp_path)}, launcher=launcher) as server:
        if args:
            server.wait_for_logs("listening", 2)
        calls = 50
        assert malformed_timeout_calls(server.grpc_port, calls) == ["13"] * calls  # INTERNAL
        processes = [server.process.pid, *descendants(server.process.pid)]
        assert len(processes) == (3 if args else 1)
        for pid in processes:
            for descriptor in (0, 2):
                assert os.readlink(f"/proc/{pid}/fd/{descriptor}") == os.devnull, (pid, descriptor)
        locks = list(tmp_path.glob("cardrules-metrics-*/.in-use"))
        assert len(locks) == (1 if args else 0)
        assert [lock.stat().st_size for lock in locks] == [0] * len(locks)
        with connect(server.target) as stub:
            game = stub.NewGame(pb.NewGameRequest(config=pb.GameConfig(players=2)), timeout=30)
        assert len(game.seat_tokens) == 2


def serving_into_a_full_stdout(
    args: list[str], env: dict[str, str] | None = None, stderr: int = subprocess.DEVNULL
) -> subprocess.Popen[str]:
    """``cardrules serve --host 127.0.0.1 ARGS >/dev/full``: stdout refuses every line."""
    with open("/dev/full", "w") as full:
        return start_session(
            [CARDRULES, "serve", "--host", "127.0.0.1", *args],
            env=server_environment(env),
            stdout=full,
            stderr=stderr,
            text=True,
        )


def test_with_workers_stdout_full_from_the_start_is_reported_by_every_process() -> None:
    """``>/dev/full``: the supervisor lost its ``starting workers`` line before it forked,
    and each worker inherited its count of lost lines, so only the supervisor said why;
    docs/operations.md promises one notice per process. The counter counts the
    workers' lines (their ``listening`` and request lines), not the supervisor's."""
    grpc_port, http_port, metrics_port = free_ports(3)
    ports = {"--grpc-port": grpc_port, "--http-port": http_port, "--metrics-port": metrics_port}
    flags = [text for flag, port in ports.items() for text in (flag, str(port))]
    process = serving_into_a_full_stdout([*flags, *WORKERS], stderr=subprocess.PIPE)
    notes: list[str] = []

    def read() -> None:
        assert process.stderr is not None
        notes.extend(process.stderr)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        with connect(f"127.0.0.1:{grpc_port}") as stub:
            for _ in range(4):  # to both workers, most likely; each lost its listening line
                game = stub.NewGame(
                    pb.NewGameRequest(config=pb.GameConfig(players=2)),
                    timeout=30,
                    wait_for_ready=True,
                )
                assert len(game.seat_tokens) == 2
        deadline = time.monotonic() + 30
        while len(notes) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        metrics = metric_samples(f"http://127.0.0.1:{metrics_port}/metrics")
        # Two listening lines and four request lines at least, none of the supervisor's.
        assert metrics[("cardrules_log_lines_dropped_total", frozenset())] >= 6
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
        reader.join(30)
    finally:
        kill_group(process)
    assert len(notes) == 3, notes
    assert all(
        "are lost from now on" in note and "No space left on device" in note for note in notes
    ), notes
    named = {found[1] for note in notes if (found := re.search(r"of process (\d+) are", note))}
    assert len(named) == 3 and str(process.pid) in named, notes


def test_stdout_full_from_the_start_counts_every_line_lost_by_one_process() -> None:
    """docs/operations.md, ``cardrules_log_lines_dropped_total``: the workers' lines, or a
    single process's, all counted. A single process lost its start's warnings and its
    ``metrics`` line before it had the counter, which then read 1 for four lost lines.
    The lines it loses are those a server started alike writes, and the call's."""
    misspelt = {"CARDRULES_GRPC_PROT": "1"}  # a warning at start
    with running(("--metrics-port", str(free_port())), misspelt) as reference:
        start = [line["event"] for line in reference.logs]
    lost = start.index("listening") + 1 + 1  # the start's lines and the one call's
    assert lost >= 4, start  # the warning and the metrics line among them
    grpc_port, metrics_port = free_ports(2)
    flags = ["--grpc-port", str(grpc_port), "--metrics-port", str(metrics_port)]
    process = serving_into_a_full_stdout(flags, misspelt)
    try:
        with connect(f"127.0.0.1:{grpc_port}") as stub:
            stub.NewGame(
                pb.NewGameRequest(config=pb.GameConfig(players=2)), timeout=30, wait_for_ready=True
            )
        counted = 0.0
        deadline = time.monotonic() + 30
        while counted < lost and time.monotonic() < deadline:  # the listening line may lag
            metrics = metric_samples(f"http://127.0.0.1:{metrics_port}/metrics")
            counted = metrics[("cardrules_log_lines_dropped_total", frozenset())]
            time.sleep(0.05)
        assert counted == lost
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    finally:
        kill_group(process)
