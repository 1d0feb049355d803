"""The ``/metrics`` endpoint of a real ``cardrules serve`` whose threads run out (a
container's pids limit), on loopback (service/metrics_http.py; docs/operations.md,
"Sizing").

The limit is ``RLIMIT_NPROC``, lowered on the running server: the kernel then refuses
it a thread, as a cgroup's ``pids.max`` does. It binds no root, so a test run as root
runs the server as ``nobody``, and counts that user's threads, as the kernel does.
Run as another user, the server runs as that user, whose other processes' threads
count too: started or ended meanwhile, they move the limit.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from tests.service.server_process import ServerProcess, free_port, running

NOBODY = 65534
REFUSED = "metrics connections closed: no thread could be started"

_LOWER_SOFT_LIMIT = (
    "import resource, sys\n"
    "pid, soft = int(sys.argv[1]), int(sys.argv[2])\n"
    "hard = resource.prlimit(pid, resource.RLIMIT_NPROC)[1]\n"
    "resource.prlimit(pid, resource.RLIMIT_NPROC, (soft, hard))\n"
)


def server_user() -> tuple[int, Sequence[str]]:
    """The user the server runs as, and the launcher that makes it so."""
    if os.geteuid() != 0:
        return os.getuid(), ()
    return NOBODY, ("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--")


def threads_of_user(uid: int) -> int:
    """Threads whose real user is ``uid``: what ``RLIMIT_NPROC`` is checked against."""
    total = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError, ValueError, KeyError):  # gone since the listing
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines())
            if int(fields["Uid"].split()[0]) == uid:
                total += int(fields["Threads"])
    return total


def settled(count: Callable[[], int]) -> int:
    """``count()`` once two readings 0.3 s apart agree: a thread that served a scrape
    may still be ending."""
    deadline = time.monotonic() + 10
    last = count()
    while True:
        time.sleep(0.3)
        if (now := count()) == last or time.monotonic() > deadline:
            return now
        last = now


def allow_threads(server: ServerProcess, more: int) -> None:
    """Let ``server``'s user start ``more`` threads beyond those it has, by the server's
    soft limit, which that user may lower (root may lack CAP_SYS_RESOURCE, which
    another user's limit needs, as here)."""
    uid, launcher = server_user()
    soft = settled(lambda: threads_of_user(uid)) + more
    command = [*launcher, sys.executable, "-c", _LOWER_SOFT_LIMIT, str(server.process.pid)]
    subprocess.run([*command, str(soft)], check=True, timeout=30)


@contextlib.contextmanager
def idle_connections(port: int, count: int) -> Iterator[list[socket.socket]]:
    connections = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(count)]
    try:
        yield connections
    finally:
        for connection in connections:
            connection.close()


def closed_by_server(connection: socket.socket, within: float) -> bool:
    connection.settimeout(within)
    try:
        return connection.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def status(url: str) -> int | str:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code
    except OSError as error:  # closed without an answer: no thread for it
        return str(error)


def test_connections_without_a_thread_are_closed_and_logged_as_one_json_line():
    """Under a pids limit, 16 idle connections ran the server out of threads: each
    refused thread printed socketserver's traceback on stderr, amid the JSON log. Now
    they are closed, reported in one JSON line, and scrapes work once they are gone."""
    _, launcher = server_user()
    metrics = ("--metrics-port", str(free_port()))
    with running(metrics, launcher=launcher, failures_expected=True) as server:
        server.wait_for_logs("metrics")
        assert status(server.metrics_url) == 200
        # Three threads: one connection's two (its own and its deadline's), and a third
        # one that starts for the next and finds no thread for its deadline.
        allow_threads(server, 3)
        with idle_connections(server.metrics_port, 16) as connections:
            closed = [closed_by_server(connection, 1.0) for connection in connections]
            assert any(closed), closed  # at once, not at the deadline
            assert status(f"{server.http_url}/healthz") == 200  # the calls are served
            server.wait_for_logs(REFUSED)
        deadline = time.monotonic() + 15
        while (answer := status(server.metrics_url)) != 200:
            assert time.monotonic() < deadline, answer
            time.sleep(0.2)
    refusals = server.log_events(REFUSED)  # all of them: the server has stopped
    assert len(refusals) == 1  # the whole burst, within the window: one line
    assert refusals[0]["level"] == "error"
    assert refusals[0]["error"] == "can't start new thread"
    assert refusals[0]["connections_closed"] == 1
    assert [line for line in server.logs if line.get("event") == "raw"] == []
    assert [line for line in server.logs if line.get("level") == "error"] == server.log_events(
        REFUSED
    )
