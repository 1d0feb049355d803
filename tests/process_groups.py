"""A benchmark stopped by SIGTERM, as a CI job's time limit stops it: whatever it left running."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable


def group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def assert_sigterm_stops_the_whole_run(
    arguments: list[str], started: Callable[[str], bool], settle_seconds: float = 0
) -> None:
    """``python -m bench ARGUMENTS`` sent SIGTERM ``settle_seconds`` after the first line of
    its stderr that ``started`` accepts: it exits 128 + SIGTERM and leaves no process of
    its group behind (each benchmark runs in a process group of its own)."""
    bench = subprocess.Popen(
        [sys.executable, "-m", "bench", *arguments],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: every process it starts
    )
    try:
        assert bench.stderr is not None
        for line in bench.stderr:
            if started(line):
                break
        time.sleep(settle_seconds)
        bench.send_signal(signal.SIGTERM)
        assert bench.wait(60) == 128 + signal.SIGTERM
        deadline = time.monotonic() + 15
        while group_alive(bench.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not group_alive(bench.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(bench.pid, signal.SIGKILL)
