"""A log line is written whole to a pipe, also when a signal comes mid-write (design
section 6: one JSON line per request; service/logs.py ``_write_all``)."""

from __future__ import annotations

import array
import fcntl
import json
import os
import signal
import subprocess
import sys
import termios
import textwrap
import time

# A real server's stdout after ``unbuffer_std_streams``: the raw file, where a handled
# signal ends a write blocked on a full pipe part-way.
_CHILD = textwrap.dedent(
    """
    import signal, sys, structlog
    from service.logs import configure_logging, unbuffer_std_streams
    unbuffer_std_streams()
    configure_logging("json", "info")
    signal.signal(signal.SIGUSR1, lambda *_: None)  # as asyncio's handlers are
    sys.stderr.write("ready\\n")
    log = structlog.get_logger("cardrules")
    for n in range(LINES):
        log.info("request", n=n, pad="x" * 200_000)  # three pipes' worth each
    log.info("stopped")
    """
)
LINES = 4


def wait_until_full(child: subprocess.Popen[bytes]) -> None:
    """Returns once ``child``'s stdout pipe holds all it can, or the child has ended."""
    assert child.stdout is not None
    capacity = fcntl.fcntl(child.stdout, fcntl.F_GETPIPE_SZ)
    held = array.array("i", [0])
    while child.poll() is None:
        fcntl.ioctl(child.stdout, termios.FIONREAD, held)
        if held[0] >= capacity:
            return
        time.sleep(0.01)


def test_a_signal_during_a_blocked_write_loses_no_part_of_the_line():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD.replace("LINES", str(LINES))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        # Not after a fixed time: the child's imports took longer than one second on a
        # loaded machine, and the signal ended it before it had a handler (a review).
        assert child.stderr is not None and child.stderr.readline() == b"ready\n"
        wait_until_full(child)  # nobody reads: the first line fills the pipe, its write waits
        os.kill(child.pid, signal.SIGUSR1)
        out, err = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 0, err
    lines = [json.loads(line) for line in out.decode().splitlines()]
    assert [line["event"] for line in lines] == ["request"] * LINES + ["stopped"]
    assert [line["n"] for line in lines[:LINES]] == list(range(LINES))
