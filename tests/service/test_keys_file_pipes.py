"""A state keys file that is a pipe whose writer holds it open without writing or closing
it (a secret fetch that hangs): ``cardrules serve`` waited in ``read`` for ever, deaf to
SIGTERM and Ctrl-C, which start-up only records (docs/operations.md, "Configuration"
and "Termination"). Real FIFOs, real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.config import KEYS_PIPE_SECONDS
from tests.service.server_process import (
    CARDRULES,
    TEST_KEY,
    free_port,
    kill_group,
    loaded_at_start,
    server_environment,
    start_session,
)

#: Well past the few hundredths of a second a stop takes, well short of the wait's bound.
PROMPT_SECONDS = 5.0


@pytest.fixture
def held_fifo(tmp_path: Path) -> Iterator[Path]:
    """A named pipe this test holds open for writing (and reading: O_RDWR opens a FIFO
    at once on Linux), never writing to it nor closing it while the test runs."""
    fifo = tmp_path / "fifo.keys"
    os.mkfifo(fifo, 0o600)
    held = os.open(fifo, os.O_RDWR)
    try:
        yield fifo
    finally:
        os.close(held)


def _start(
    command: list[str], fifo: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """``cardrules COMMAND --state-keys-file FIFO``, returned once it has the FIFO open:
    it is then reading it, its stop signals taken."""
    process = start_session(
        [CARDRULES, *command, "--state-keys-file", str(fifo)],
        env=server_environment(env, keys=None),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not _has_open(process.pid, fifo):
        if process.poll() is not None or time.monotonic() > deadline:
            kill_group(process)
            raise AssertionError(f"never opened the keys file: {process.communicate()}")
        time.sleep(0.02)
    return process


def _has_open(pid: int, path: Path) -> bool:
    folder = Path(f"/proc/{pid}/fd")
    try:
        links = [os.readlink(folder / name) for name in os.listdir(folder)]
    except OSError:  # gone, or a descriptor closed since the listing
        return False
    return str(path) in links


def _finished(process: subprocess.Popen[str], timeout: float) -> tuple[int, str]:
    """The exit status and stderr of ``process``; one still running after ``timeout``
    is killed and fails the test (the old code's hang)."""
    try:
        _, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(process)
        raise AssertionError(f"still running {timeout} s on") from None
    kill_group(process)  # reaped already: forgets it
    return process.returncode, stderr


def _serve_command() -> list[str]:
    return ["serve", "--host", "127.0.0.1", "--grpc-port", str(free_port()), "--http-port", "0"]


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_while_serve_waits_for_a_keys_pipe_ends_the_start_at_once(
    held_fifo: Path, stop: signal.Signals
) -> None:
    process = _start([*_serve_command(), "--metrics-port", "0"], held_fifo)
    time.sleep(0.3)  # in the wait, not merely opening
    sent = time.monotonic()
    process.send_signal(stop)
    status, stderr = _finished(process, PROMPT_SECONDS)
    assert time.monotonic() - sent < PROMPT_SECONDS
    # As a stop during start-up exits (docs/operations.md, "Termination").
    assert status == 0
    assert stderr == (
        f"cardrules: stopped by {stop.name} during start-up, before serving: "
        f"--state-keys-file: {held_fifo} had not given the keys yet\n"
    )


#: The bound the next test's server waits, set by a ``sitecustomize`` so that the test
#: takes about a second, not ``KEYS_PIPE_SECONDS``: the same code, a shorter wait.
SHORT_BOUND_SECONDS = 1.0
SHORTER_BOUND = f"import service.config\nservice.config.KEYS_PIPE_SECONDS = {SHORT_BOUND_SECONDS}\n"


def test_serve_refuses_a_keys_pipe_that_never_ends_after_the_bound(
    held_fifo: Path, tmp_path: Path
) -> None:
    assert SHORT_BOUND_SECONDS < KEYS_PIPE_SECONDS
    path = loaded_at_start(tmp_path, SHORTER_BOUND)
    started = time.monotonic()
    process = _start([*_serve_command(), "--metrics-port", "0"], held_fifo, {"PYTHONPATH": path})
    status, stderr = _finished(process, SHORT_BOUND_SECONDS + 20)
    assert time.monotonic() - started >= SHORT_BOUND_SECONDS
    assert status == 2
    assert stderr == (
        f"cardrules: error: --state-keys-file: {held_fifo} is a pipe or device that did "
        f"not give the keys and end within {SHORT_BOUND_SECONDS:g} s: what writes the keys "
        "to it must write them all and close it\n"
    )


def test_keyid_on_a_keys_pipe_that_never_ends_stops_on_ctrl_c(held_fifo: Path) -> None:
    process = _start(["keyid"], held_fifo)
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)
    status, stderr = _finished(process, PROMPT_SECONDS)
    assert (status, stderr) == (130, "cardrules: error: interrupted\n")


def test_serve_reads_a_keys_pipe_written_after_it_started(tmp_path: Path) -> None:
    """The pipe read as written and closed, then served with that key (its id logged)."""
    fifo = tmp_path / "fifo.keys"
    os.mkfifo(fifo, 0o600)
    writer = os.open(fifo, os.O_RDWR)
    try:
        process = _start([*_serve_command(), "--metrics-port", "0"], fifo)
    finally:
        os.write(writer, f"{TEST_KEY}\n".encode())
        os.close(writer)
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if '"listening"' in line:
                break
        else:
            raise AssertionError(f"never listened: {process.communicate()}")
        process.send_signal(signal.SIGTERM)
        status, stderr = _finished(process, 30)
    finally:
        kill_group(process)
    assert (status, stderr) == (0, "")
