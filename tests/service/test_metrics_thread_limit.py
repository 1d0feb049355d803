"""The ``/metrics`` endpoint of a real ``cardrules serve`` whose threads run out (a
container's pids limit), on loopback (service/metrics_http.py; docs/operations.md,
"Sizing").

The limit is a container's own: the running server is moved into a pids cgroup of its
own, whose ``pids.max`` the test then sets a few threads above ``pids.current``, and the
kernel refuses it a thread past that. Only the server's threads count. The test needs
a pids hierarchy it may write to, found in ``/proc/self/mountinfo`` (cgroup v1's
``pids``, or a cgroup2 mount offering ``pids``): it runs as root, as the tests that need
mount namespaces do, and fails saying so otherwise.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.procfs import descendants
from tests.service.server_process import ServerProcess, free_port, running

REFUSED = "metrics connections closed: no thread could be started"


@dataclass(frozen=True)
class PidsHierarchy:
    """A mounted cgroup hierarchy with the pids controller: v1 ``pids``, or cgroup2."""

    mount_point: Path
    version: int


def _unescape(field: str) -> str:
    """A path of ``/proc/self/mountinfo``, whose spaces and such are octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), field)


def pids_hierarchies(mountinfo: Path = Path("/proc/self/mountinfo")) -> list[PidsHierarchy]:
    """The mounted hierarchies that can limit pids (proc(5), "mountinfo")."""
    found = []
    for line in mountinfo.read_text().splitlines():
        fields = line.split()
        after = fields.index("-")  # optional fields come before it
        mount_point, fstype, options = Path(_unescape(fields[4])), fields[after + 1], fields[-1]
        if fstype == "cgroup" and "pids" in options.split(","):
            found.append(PidsHierarchy(mount_point, 1))
        elif fstype == "cgroup2":
            with contextlib.suppress(OSError):
                if "pids" in (mount_point / "cgroup.controllers").read_text().split():
                    found.append(PidsHierarchy(mount_point, 2))
    return found


def make_cgroup(hierarchy: PidsHierarchy) -> Path:
    """A new cgroup with a ``pids.max``, at the top of ``hierarchy``."""
    parent = hierarchy.mount_point
    if hierarchy.version == 2:
        enable_pids_below(parent)
    cgroup = parent / f"cardrules-test-pids-{os.getpid()}-{time.monotonic_ns()}"
    cgroup.mkdir()
    return cgroup


def enable_pids_below(parent: Path) -> None:
    """Give the children of cgroup2's ``parent`` the pids controller (cgroups(7), "Enabling
    and disabling controllers"). Left on afterwards: another run may be using it, and it
    only counts."""
    subtree_control = parent / "cgroup.subtree_control"
    if "pids" not in subtree_control.read_text().split():
        subtree_control.write_text("+pids")


def remove_cgroup(cgroup: Path) -> None:
    """Move what still runs in ``cgroup`` back to its parent, and remove it (it empties
    as the server's last threads end)."""
    deadline = time.monotonic() + 10
    while True:
        for pid in (cgroup / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError):
                (cgroup.parent / "cgroup.procs").write_text(pid)
        try:
            cgroup.rmdir()
            return
        except OSError:  # EBUSY: a task is still leaving
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@contextlib.contextmanager
def pids_cgroup() -> Iterator[Path]:
    """A pids cgroup of this test's own, removed at the end; the test fails, saying what it
    needs, without one."""
    hierarchies = pids_hierarchies()
    refusals = []
    for hierarchy in hierarchies:
        try:
            cgroup = make_cgroup(hierarchy)
        except OSError as error:
            refusals.append(f"{hierarchy.mount_point} (cgroup v{hierarchy.version}): {error}")
            continue
        try:
            yield cgroup
        finally:
            remove_cgroup(cgroup)
        return
    raise AssertionError(
        "this test limits the server's threads as a container's pids limit does, in a pids "
        "cgroup it makes: it must run as root, with a cgroup hierarchy offering the pids "
        "controller mounted writable (cgroup v1's pids, or cgroup2 with pids in "
        "cgroup.controllers): "
        + ("; ".join(refusals) if refusals else "none is mounted (/proc/self/mountinfo)")
    )


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


def allow_threads(server: ServerProcess, cgroup: Path, more: int) -> None:
    """Move ``server`` (and any process it forked) into ``cgroup``, with all its threads,
    and let it start ``more`` threads beyond those it has."""
    for pid in (server.process.pid, *descendants(server.process.pid)):
        (cgroup / "cgroup.procs").write_text(str(pid))
    threads = settled(lambda: int((cgroup / "pids.current").read_text()))
    (cgroup / "pids.max").write_text(str(threads + more))


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
    metrics = ("--metrics-port", str(free_port()))
    with pids_cgroup() as cgroup, running(metrics, failures_expected=True) as server:
        server.wait_for_logs("metrics")
        assert status(server.metrics_url) == 200
        # Three threads: one connection's two (its own and its deadline's), and a third
        # one that starts for the next and finds no thread for its deadline.
        allow_threads(server, cgroup, 3)
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
